/* radvd.c - router advertisements of the L3 agent (l3.c calls it per
 * router): as Neutron's agent/linux/ra.py, one radvd per router in its
 * qrouter-<id> namespace, for the interfaces on IPv6 subnets whose
 * ipv6_ra_mode is set, configured by na_l3_radvd_conf (l3_rules.c).
 *
 * Its files live in <state dir>/l3/<router id>/ (radvd.conf, radvd.pid,
 * radvd.log). A radvd is ours when the pid file names a live process whose
 * command line has that pid file, so a restarted agent finds the radvd it
 * left (reconcile at start) and never signals another one. Started when
 * needed and not running (or running outside the namespace), sent SIGHUP
 * when its configuration changed, stopped (SIGTERM, then SIGKILL) and its
 * directory removed when the router needs none or goes. Ownership kind
 * "process", name "radvd:<router id>". */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/proc.h"
#include "common/util.h"
#include "network/agent/internal.h"
#include "network/agent/l3.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RA_LOG "nubo.network.agent.l3"

static void router_dir(struct na *a, const char *router_id, char *dir, size_t n)
{
    snprintf(dir, n, "%s/l3/%s", na_state_dir(a), router_id);
}

/* The pid of the radvd of dir if it runs, else 0. */
static pid_t radvd_pid(const char *dir)
{
    char pidfile[PATH_MAX + 16];
    snprintf(pidfile, sizeof(pidfile), "%s/radvd.pid", dir);
    return na_daemon_pid(pidfile, pidfile);
}

static void radvd_stop(struct nb_ctx *ctx, const char *dir)
{
    char pidfile[PATH_MAX + 16];
    snprintf(pidfile, sizeof(pidfile), "%s/radvd.pid", dir);
    pid_t pid = na_daemon_stop(pidfile, pidfile);
    if (pid)
        NB_INFO(RA_LOG, ctx, NULL, "stopped radvd %d (%s)", (int)pid, dir);
}

void na_radvd_remove(struct na *a, struct nb_ctx *ctx, const char *router_id)
{
    char dir[PATH_MAX], proc[100];
    router_dir(a, router_id, dir, sizeof(dir));
    radvd_stop(ctx, dir);
    nb_rm_rf(dir);
    snprintf(proc, sizeof(proc), "radvd:%s", router_id);
    na_disown(a, "process", proc);
}

int na_radvd_sync(struct na *a, struct nb_ctx *ctx, const json_t *router, const char *ns)
{
    const char *id = nb_json_str(router, "id");
    if (!id || strchr(id, '/') || !strcmp(id, "..") || !*id)
        return nb_error(ctx, 500, NULL, "router without a usable id");
    int min = (int)nb_conf_int("l3", "min_rtr_adv_interval", 30),
        max = (int)nb_conf_int("l3", "max_rtr_adv_interval", 100);
    _cleanup_free_ char *conf = na_l3_radvd_conf(router, min, max);
    if (!conf) {
        na_radvd_remove(a, ctx, id);
        return 0;
    }
    char dir[PATH_MAX], path[PATH_MAX + 16], pidf[PATH_MAX + 16], logf[PATH_MAX + 16], proc[100];
    router_dir(a, id, dir, sizeof(dir));
    if (nb_mkdir_p(dir) < 0)
        return nb_error(ctx, 500, NULL, "cannot create %s: %s", dir, strerror(errno));
    snprintf(path, sizeof(path), "%s/radvd.conf", dir);
    snprintf(pidf, sizeof(pidf), "%s/radvd.pid", dir);
    snprintf(logf, sizeof(logf), "%s/radvd.log", dir);
    _cleanup_free_ char *old = nb_read_file(path, NULL);
    bool changed = !old || strcmp(old, conf);
    /* radvd refuses a configuration others may write */
    if (changed && nb_write_file(path, conf, strlen(conf), 0644) < 0)
        return nb_error(ctx, 500, NULL, "cannot write %s: %s", path, strerror(errno));
    pid_t pid = radvd_pid(dir);
    if (pid && !na_runs_in(pid, ns)) {
        NB_WARN(RA_LOG, ctx, NULL, "radvd %d of router %s is not in %s; restarting it there",
                (int)pid, id, ns);
        radvd_stop(ctx, dir);
        pid = 0;
    }
    if (pid) {
        if (changed) {
            kill(pid, SIGHUP);
            NB_INFO(RA_LOG, ctx, NULL, "radvd %d of router %s reloaded", (int)pid, id);
        }
        return 0;
    }
    snprintf(proc, sizeof(proc), "radvd:%s", id);
    if (na_own(a, "process", proc) < 0)
        return -1;
    const char *argv[] = {"radvd", "-C", path, "-p", pidf, "-m", "logfile", "-l", logf, NULL};
    if (na_must(ctx, ns, argv, NULL) < 0)
        return -1;
    NB_INFO(RA_LOG, ctx, NULL, "started radvd for router %s in %s", id, ns);
    return 0;
}
