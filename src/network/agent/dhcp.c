/* dhcp.c - the DHCP phase (internal.h: na_dhcp_sync), as Neutron's DHCP
 * agent serves a network: per network of the state with "dhcp", the
 * namespace qdhcp-<network id>, a veth tap<port[:11]> (on the network's
 * bridge) / ns-<port[:11]> (in the namespace, with the DHCP port's MAC and
 * addresses, plus 169.254.169.254/32 when it answers metadata), and one
 * dnsmasq (files rendered by dhcp_render.c under <state dir>/dhcp/<net>;
 * a change to the hosts or options rewrites them atomically and sends
 * SIGHUP; a change of its command line restarts it; a dead one is started
 * again). A network that leaves the state (or whose DHCP moved away) loses
 * its dnsmasq, veth and namespace: only those this agent recorded. */
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/proc.h"
#include "common/sbuf.h"
#include "common/util.h"
#include "network/agent/dhcp.h"
#include "network/agent/netdev.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LOG_DHCP "nubo.network.agent.dhcp"
#define NS_PREFIX "qdhcp-"
#define DIR_MAX 2048 /* a network's directory; files in it fit PATH_MAX */

static void dhcp_conf(struct na_dhcp_conf *c)
{
    c->domain = nb_conf_str("DEFAULT", "dns_domain", "openstacklocal");
    c->lease_seconds = nb_conf_int("DEFAULT", "dhcp_lease_duration", 86400);
    c->force_metadata = nb_conf_bool("dhcp", "force_metadata", true);
    c->isolated_metadata = nb_conf_bool("dhcp", "enable_isolated_metadata", true);
}

/* A name safe in a path and on a command line (uuids, device names). */
static bool safe_name(const char *s)
{
    if (!s || !*s || strlen(s) > 64 || !strcmp(s, ".") || !strcmp(s, ".."))
        return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '-' && *s != '_')
            return false;
    return true;
}

static void net_dir(struct na *a, const char *net, char *dir, size_t n)
{
    snprintf(dir, n, "%s/dhcp/%s", na_state_dir(a), net);
}

static bool netns_exists(const char *ns)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "/run/netns/%s", ns);
    return access(path, F_OK) == 0;
}

/* The pid of the network's dnsmasq if it runs (its pid file names a live
 * dnsmasq whose command line has that pid file), else 0. */
static pid_t dnsmasq_pid(const char *dir)
{
    char pidfile[PATH_MAX + 8], want[PATH_MAX + 24];
    snprintf(pidfile, sizeof(pidfile), "%s/pid", dir);
    snprintf(want, sizeof(want), "--pid-file=%s/pid", dir);
    return na_daemon_pid(pidfile, want);
}

/* Stops the dnsmasq of dir (SIGTERM, then SIGKILL after 2 s). */
static void dnsmasq_stop(struct nb_ctx *ctx, const char *dir)
{
    char pidfile[PATH_MAX + 8], want[PATH_MAX + 24];
    snprintf(pidfile, sizeof(pidfile), "%s/pid", dir);
    snprintf(want, sizeof(want), "--pid-file=%s/pid", dir);
    pid_t pid = na_daemon_stop(pidfile, want);
    if (pid)
        NB_INFO(LOG_DHCP, ctx, NULL, "Stopped dnsmasq %d (%s)", (int)pid, dir);
}

/* Writes dir/name when its content differs. 1 written, 0 same, -1 error. */
static int write_if_changed(struct nb_ctx *ctx, const char *dir, const char *name, const char *text)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    char *old = nb_read_file(path, NULL);
    bool same = old && !strcmp(old, text);
    free(old);
    if (same)
        return 0;
    if (nb_write_file(path, text, strlen(text), 0644) < 0)
        return nb_error(ctx, 500, NULL, "cannot write %s: %s", path, strerror(errno));
    return 1;
}

/* Makes the namespace (recorded as ours) with lo up. 0/-1. */
static int ensure_netns(struct na *a, struct nb_ctx *ctx, const char *ns)
{
    if (!netns_exists(ns)) {
        const char *add[] = {"ip", "netns", "add", ns, NULL};
        if (na_must(ctx, NULL, add, NULL) < 0)
            return -1;
        NB_INFO(LOG_DHCP, ctx, NULL, "Created namespace %s", ns);
    }
    if (na_own(a, "netns", ns) < 0)
        return nb_error(ctx, 500, NULL, "cannot record namespace %s", ns);
    const char *lo[] = {"ip", "link", "set", "lo", "up", NULL};
    return na_must(ctx, ns, lo, NULL);
}

/* Whether dev exists in namespace ns. */
static bool ns_dev_exists(struct nb_ctx *ctx, const char *ns, const char *dev)
{
    const char *show[] = {"ip", "link", "show", "dev", dev, NULL};
    return na_run(ctx, ns, show, NULL, 10000, NULL) == 0;
}

/* The veth pair tap (root, on bridge) / dev (in ns, with mac and mtu). */
static int ensure_veth(struct na *a, struct nb_ctx *ctx, const char *ns, const char *tap,
                       const char *dev, const char *mac, const char *bridge, int mtu)
{
    if (!ns_dev_exists(ctx, ns, dev)) {
        if (na_dev_exists(tap)) { /* a stale root end (its peer went with a namespace) */
            const char *del[] = {"ip", "link", "del", tap, NULL};
            na_run(ctx, NULL, del, NULL, 10000, NULL);
        }
        const char *add[] = {"ip",   "link", "add", tap,     "type", "veth",
                             "peer", "name", dev,   "netns", ns,     NULL};
        if (na_must(ctx, NULL, add, NULL) < 0)
            return -1;
        NB_INFO(LOG_DHCP, ctx, NULL, "Created veth %s / %s in %s", tap, dev, ns);
    }
    if (na_own(a, "link", tap) < 0)
        return nb_error(ctx, 500, NULL, "cannot record link %s", tap);
    char m[16];
    snprintf(m, sizeof(m), "%d", mtu > 0 ? mtu : 1500);
    const char *ns_set[] = {"ip", "link", "set", dev, "address", mac, "mtu", m, "up", NULL};
    if (na_must(ctx, ns, ns_set, NULL) < 0)
        return -1;
    if (mtu > 0 && na_dev_mtu(tap) != mtu) {
        const char *set[] = {"ip", "link", "set", tap, "mtu", m, NULL};
        if (na_must(ctx, NULL, set, NULL) < 0)
            return -1;
    }
    return na_dev_enslave(ctx, tap, bridge);
}

/* The addresses ("a.b.c.d/n") dev has in ns, but IPv6 link-local ones, as
 * a JSON object (set). NULL on error. */
static json_t *ns_addresses(struct nb_ctx *ctx, const char *ns, const char *dev)
{
    const char *show[] = {"ip", "-o", "addr", "show", "dev", dev, NULL};
    char *out = NULL;
    if (na_run(ctx, ns, show, NULL, 10000, &out) != 0) {
        nb_error(ctx, 500, NULL, "ip -n %s addr show dev %s: %s", ns, dev, out);
        free(out);
        return NULL;
    }
    json_t *set = json_object();
    char *save = NULL;
    for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *p = strstr(line, " inet ");
        if (!p)
            p = strstr(line, " inet6 ");
        if (!p || strstr(line, "scope link"))
            continue;
        p = strchr(p + 1, ' ') + 1;
        char addr[80];
        if (sscanf(p, "%79s", addr) == 1)
            json_object_set_new(set, addr, json_true());
    }
    free(out);
    return set;
}

/* The namespace end's addresses: the DHCP port's fixed IPs (+ the metadata
 * address). 0/-1. */
static int ensure_addresses(struct nb_ctx *ctx, const char *ns, const char *dev, const json_t *dhcp,
                            bool metadata)
{
    json_t *want = json_object();
    size_t i;
    json_t *ip;
    json_array_foreach (json_object_get(dhcp, "fixed_ips"), i, ip) {
        char a[100];
        snprintf(a, sizeof(a), "%s/%lld", nb_json_str(ip, "ip_address"),
                 nb_json_int(ip, "prefixlen", 24));
        if (nb_json_str(ip, "ip_address"))
            json_object_set_new(want, a, json_true());
    }
    if (metadata)
        json_object_set_new(want, "169.254.169.254/32", json_true());
    json_t *have = ns_addresses(ctx, ns, dev);
    int rc = have ? 0 : -1;
    const char *addr;
    json_t *v;
    json_object_foreach (want, addr, v) {
        if (rc < 0 || json_object_get(have, addr))
            continue;
        bool v6 = strchr(addr, ':') != NULL;
        const char *add[] = {"ip", "addr", "add", addr, "dev", dev, v6 ? "nodad" : NULL, NULL};
        rc = na_must(ctx, ns, add, NULL);
    }
    json_object_foreach (have, addr, v) {
        if (rc < 0 || json_object_get(want, addr))
            continue;
        const char *del[] = {"ip", "addr", "del", addr, "dev", dev, NULL};
        rc = na_must(ctx, ns, del, NULL);
    }
    json_decref(want);
    json_decref(have);
    return rc;
}

/* argv as one line, to see whether the command line changed. */
static char *argv_line(const json_t *argv)
{
    struct nb_sbuf b = {0};
    size_t i;
    json_t *v;
    json_array_foreach (argv, i, v) {
        nb_sbuf_str(&b, json_string_value(v));
        nb_sbuf_str(&b, "\n");
    }
    return b.s;
}

/* Drops from dir/leases the leases the hosts file no longer allows
 * (na_dhcp_prune_leases; old_hosts: the hosts file before this sync's
 * rewrite, may be NULL). Returns how many were (dry: would be) dropped, -1
 * on error. dnsmasq reads the file only at start: stop it first. */
static int drop_stale_leases(struct nb_ctx *ctx, const char *dir, const char *old_hosts,
                             const char *hosts, bool dry)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/leases", dir);
    char *text = nb_read_file(path, NULL);
    if (!text)
        return 0;
    int dropped;
    char *keep = na_dhcp_prune_leases(text, old_hosts, hosts, &dropped);
    free(text);
    int rc = dropped;
    if (dropped && !dry && nb_write_file(path, keep, strlen(keep), 0644) < 0)
        rc = nb_error(ctx, 500, NULL, "cannot write %s: %s", path, strerror(errno));
    free(keep);
    return rc;
}

/* Files, then dnsmasq: started when not running, restarted when its
 * command line changed, sent SIGHUP when a file changed. 0/-1. */
static int ensure_dnsmasq(struct na *a, struct nb_ctx *ctx, const json_t *net, const char *ns,
                          const char *dir, const json_t *routers, const struct na_dhcp_conf *conf)
{
    char *host = na_dhcp_hostsfile(net, conf), *addn = na_dhcp_addn_hosts(net, conf),
         *opts = na_dhcp_optsfile(net, routers, conf);
    json_t *argv = na_dhcp_argv(net, dir, conf);
    char *line = argv_line(argv);
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/host", dir);
    char *old_host = nb_read_file(path, NULL);
    int w1 = write_if_changed(ctx, dir, "host", host),
        w2 = write_if_changed(ctx, dir, "addn_hosts", addn),
        w3 = write_if_changed(ctx, dir, "opts", opts);
    int wc = write_if_changed(ctx, dir, "cmdline", line);
    free(addn);
    free(opts);
    free(line);
    int rc = w1 < 0 || w2 < 0 || w3 < 0 || wc < 0 ? -1 : 0;
    pid_t pid = dnsmasq_pid(dir);
    if (rc == 0 && pid && w1 > 0 && drop_stale_leases(ctx, dir, old_host, host, true) > 0) {
        NB_INFO(LOG_DHCP, ctx, NULL,
                "dnsmasq of network %s holds leases of removed ports; restarting it without them",
                nb_json_str(net, "id"));
        dnsmasq_stop(ctx, dir);
        pid = 0;
    }
    if (rc == 0 && !pid && drop_stale_leases(ctx, dir, old_host, host, false) < 0)
        rc = -1;
    free(host);
    free(old_host);
    if (rc == 0 && pid && !na_runs_in(pid, ns)) {
        NB_WARN(LOG_DHCP, ctx, NULL,
                "dnsmasq %d of network %s is not in namespace %s (deleted by hand?); "
                "restarting it there",
                (int)pid, nb_json_str(net, "id"), ns);
        dnsmasq_stop(ctx, dir);
        pid = 0;
    } else if (rc == 0 && pid && wc > 0) {
        NB_INFO(LOG_DHCP, ctx, NULL, "dnsmasq of network %s: command line changed, restarting",
                nb_json_str(net, "id"));
        dnsmasq_stop(ctx, dir);
        pid = 0;
    }
    if (rc == 0 && !pid) {
        size_t n = json_array_size(argv);
        const char **av = calloc(n + 1, sizeof(*av));
        for (size_t i = 0; i < n; i++)
            av[i] = json_string_value(json_array_get(argv, i));
        char proc[100];
        snprintf(proc, sizeof(proc), "dnsmasq:%s", nb_json_str(net, "id"));
        na_own(a, "process", proc);
        rc = na_must(ctx, ns, av, NULL);
        free(av);
        if (rc == 0)
            NB_INFO(LOG_DHCP, ctx, NULL, "Started dnsmasq for network %s in %s",
                    nb_json_str(net, "id"), ns);
    } else if (rc == 0 && (w1 > 0 || w2 > 0 || w3 > 0)) {
        kill(pid, SIGHUP);
        NB_DEBUG(LOG_DHCP, ctx, NULL, "dnsmasq %d of network %s reloaded", (int)pid,
                 nb_json_str(net, "id"));
    }
    json_decref(argv);
    return rc;
}

/* Serves the DHCP of one network. 0/-1. */
static int serve(struct na *a, struct nb_ctx *ctx, const json_t *net, const json_t *routers,
                 const struct na_dhcp_conf *conf)
{
    const json_t *d = json_object_get(net, "dhcp");
    const char *id = nb_json_str(net, "id"), *ns = nb_json_str(d, "namespace");
    const char *tap = nb_json_str(d, "tap"), *dev = nb_json_str(d, "dev");
    const char *mac = nb_json_str(d, "mac"), *br = nb_json_str(net, "bridge");
    if (!safe_name(id) || !safe_name(ns) || !safe_name(tap) || !safe_name(dev) || !mac ||
        !safe_name(br))
        return nb_error(ctx, 500, NULL, "network %s: incomplete DHCP state", id ? id : "?");
    char dir[DIR_MAX];
    net_dir(a, id, dir, sizeof(dir));
    if (nb_mkdir_p(dir) < 0)
        return nb_error(ctx, 500, NULL, "cannot create %s: %s", dir, strerror(errno));
    int mtu = (int)nb_json_int(net, "mtu", 0);
    if (!na_dev_exists(br))
        return nb_error(ctx, 500, NULL, "bridge %s of network %s does not exist", br, id);
    if (ensure_netns(a, ctx, ns) < 0 || ensure_veth(a, ctx, ns, tap, dev, mac, br, mtu) < 0 ||
        ensure_addresses(ctx, ns, dev, d, na_dhcp_serves_metadata(net, routers, conf)) < 0)
        return -1;
    return ensure_dnsmasq(a, ctx, net, ns, dir, routers, conf);
}

/* Removes what this agent made for the DHCP of network id in ns. */
static void unserve(struct na *a, struct nb_ctx *ctx, const char *ns)
{
    const char *id = ns + strlen(NS_PREFIX);
    char dir[DIR_MAX], proc[100];
    net_dir(a, id, dir, sizeof(dir));
    dnsmasq_stop(ctx, dir);
    snprintf(proc, sizeof(proc), "dnsmasq:%s", id);
    na_disown(a, "process", proc);
    /* the root ends of veths whose peer is in ns */
    json_t *links = na_owned(a, "link");
    size_t i;
    json_t *v;
    json_array_foreach (links, i, v) {
        const char *tap = json_string_value(v);
        char path[PATH_MAX + 8];
        snprintf(path, sizeof(path), "%s/tap", dir);
        char *mine = nb_read_file(path, NULL);
        bool ours = mine && !strcmp(mine, tap);
        free(mine);
        if (!ours)
            continue;
        const char *del[] = {"ip", "link", "del", tap, NULL};
        if (!na_dev_exists(tap) || na_run(ctx, NULL, del, NULL, 10000, NULL) == 0)
            na_disown(a, "link", tap);
    }
    json_decref(links);
    if (netns_exists(ns)) {
        const char *del[] = {"ip", "netns", "del", ns, NULL};
        struct nb_ctx sub;
        nb_ctx_child(&sub, ctx);
        if (na_must(&sub, NULL, del, NULL) < 0)
            return;
    }
    na_disown(a, "netns", ns);
    nb_rm_rf(dir);
    NB_INFO(LOG_DHCP, ctx, NULL, "Removed the DHCP of network %s (%s)", id, ns);
}

int na_dhcp_sync(struct na *a, struct nb_ctx *ctx, const json_t *state)
{
    struct na_dhcp_conf conf;
    dhcp_conf(&conf);
    const json_t *routers = json_object_get(state, "routers");
    json_t *wanted = json_object();
    int rc = 0;
    size_t i;
    json_t *n;
    json_array_foreach (json_object_get(state, "networks"), i, n) {
        const json_t *d = json_object_get(n, "dhcp");
        const char *ns = nb_json_str(d, "namespace");
        if (!json_is_object(d) || !ns)
            continue;
        json_object_set_new(wanted, ns, json_true());
        struct nb_ctx sub;
        nb_ctx_child(&sub, ctx);
        char dir[DIR_MAX];
        if (safe_name(nb_json_str(n, "id"))) {
            net_dir(a, nb_json_str(n, "id"), dir, sizeof(dir));
            nb_mkdir_p(dir);
            write_if_changed(&sub, dir, "tap", nb_json_str(d, "tap") ? nb_json_str(d, "tap") : "");
        }
        if (serve(a, &sub, n, routers, &conf) < 0) {
            NB_WARN(LOG_DHCP, &sub, NULL, "DHCP of network %s: %s", nb_json_str(n, "id"),
                    nb_ctx_message(&sub));
            na_port_failed(a, nb_json_str(d, "port_id"), nb_ctx_message(&sub));
            rc = nb_ctx_forward_error(ctx, &sub);
        }
    }
    json_t *owned = na_owned(a, "netns");
    json_t *v;
    json_array_foreach (owned, i, v) {
        const char *ns = json_string_value(v);
        if (nb_startswith(ns, NS_PREFIX) && !json_object_get(wanted, ns))
            unserve(a, ctx, ns);
    }
    json_decref(owned);
    json_decref(wanted);
    return rc;
}
