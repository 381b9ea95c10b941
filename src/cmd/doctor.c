/* doctor.c - `nubo doctor server <id> [--fix]`: the command line, the
 * database it opens ([database] connection, as `nubo db` does), and the exit
 * status. The checks are in doctor_checks.c, the fix in doctor_fix.c. */
#include "cmd/cmd.h"
#include "cmd/doctor.h"

#include "common/config.h"
#include "common/log.h"
#include "common/util.h"
#include "db/db.h"
#include "db/url.h"

#include <curl/curl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char usage_text[] =
    "usage: nubo doctor server <server-id|name> [--fix] [--timeout SECONDS]\n"
    "                          [--config FILE] [--set SECTION.KEY=VALUE ...]\n"
    "       nubo doctor migration <server-id|name> [--to HOST] [--json] ...\n"
    "                          (live-migration prechecks; see doctor migration --help)\n"
    "       nubo doctor [cloud] [--json] [--fix] [--config FILE] [--set S.K=V ...]\n"
    "                          (the whole cloud; see below)\n"
    "       nubo doctor rollback <fix-id> [--config FILE]\n"
    "\n"
    "Diagnoses one server the way the \"Image is not in qcow2 format\" runbook does.\n"
    "Run it as root on a controller or compute host: it reads the database of\n"
    "[database] connection, asks libvirt ([libvirt] connection_uri) about the\n"
    "domain when the server's host is this host ([DEFAULT] host), and inspects\n"
    "each volume file's real format. Each check prints one line:\n"
    "  [OK|WARN|PROBLEM|SKIP] <check>: <evidence>\n"
    "checks: server (status, task and power state, host), fault, boot volume,\n"
    "boot_index 0 (exactly one), libvirt domain, and per volume: volume file,\n"
    "disk format (file against connection_info.data.format), volume record;\n"
    "per port: its record, metadata (an egress rule of its security groups lets\n"
    "the guest reach 169.254.169.254:80), and on the server's host: host state,\n"
    "tap, dhcp, security groups, dhcp rules (its nft filter lets DHCP through).\n"
    "\n"
    "`nubo doctor cloud` (or `nubo doctor` alone) checks the whole cloud from the\n"
    "database: orphan allocation (a placement consumer that is no live server or\n"
    "migration, as `nova-manage placement audit`), missing allocation (a live\n"
    "server with a host, not shelved-offloaded, holding none, as `nova-manage\n"
    "placement heal_allocations`), stuck migration (non-final status for longer\n"
    "than [conductor] audit_migration_stuck, default 3600 s), stuck task\n"
    "(task_state older than [conductor] audit_task_stuck, 3600 s), service down\n"
    "(no heartbeat within [DEFAULT] service_down_time), clock skew (SKIP: no\n"
    "host clock is recorded), port binding (a compute port bound to a host\n"
    "without nova-compute), libvirt domain (servers on this host against its\n"
    "domains; SKIP elsewhere or with the fake driver) and disk format (every\n"
    "volume mapping). --json prints {\"findings\": [{\"check\", \"verdict\",\n"
    "\"subject\", \"evidence\", \"fix\"?}], \"problems\", \"warnings\"}. Exit 0\n"
    "when nothing is a PROBLEM, else 1 (2 after --fix repaired everything).\n"
    "--fix repairs what is safe: deletes an orphan's allocations, heals a missing\n"
    "allocation from the flavor on the host's provider, sets a stuck migration to\n"
    "error; each repair is kept with what it replaced in table doctor_cloud_fixes\n"
    "and printed as [FIX] ... fix N; `nubo doctor rollback N` puts it back.\n"
    "\n"
    "  --fix            correct each mapping whose connection_info.data.format\n"
    "                   differs from its file: the old connection_info is printed\n"
    "                   and kept in table doctor_fixes, the runbook's JSON_SET\n"
    "                   update runs in one transaction that must change exactly\n"
    "                   one row (the volume's admin metadata follows); then an\n"
    "                   ERROR server is reset to active and hard-rebooted through\n"
    "                   the API, and if it is not ACTIVE with power state 1 in\n"
    "                   time the old values are put back\n"
    "  --timeout SECS   how long --fix waits for the guest (default 120)\n"
    "  --config FILE    default /etc/nubo/nubo.conf\n"
    "\n"
    "Exit status:\n"
    "  0   no problem found\n"
    "  1   a problem was found and not fixed (no --fix, or the fix failed and\n"
    "      was rolled back)\n"
    "  2   a problem was found and fixed\n"
    "  3   the diagnosis could not run (unknown server, database unreachable)\n"
    "  64  usage error\n";

struct options {
    const char *server;
    const char *config;
    bool fix;
    bool cloud;
    bool json;
    const char *rollback;
    int timeout;
    char *sets[64];
    int nsets;
};

/* 0 parsed, 1 help asked, -1 usage error (message printed). */
static int parse(int argc, char **argv, struct options *o)
{
    static const struct option opts[] = {
        {"fix", no_argument, NULL, 'f'},
        {"timeout", required_argument, NULL, 't'},
        {"config", required_argument, NULL, 'c'},
        {"set", required_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},
        {"json", no_argument, NULL, 'j'},
        {NULL, 0, NULL, 0},
    };
    o->config = "/etc/nubo/nubo.conf";
    o->timeout = 120;
    /* getopt wants argv[0] to be the program; ours starts at the options. */
    char **av = calloc((size_t)argc + 2, sizeof(char *));
    av[0] = "nubo doctor";
    for (int i = 0; i < argc; i++)
        av[i + 1] = argv[i];
    optind = 0;
    opterr = 1;
    int c, rc = 0;
    char *end;
    while (rc == 0 && (c = getopt_long(argc + 1, av, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'f': o->fix = true; break;
        case 'j': o->json = true; break;
        case 'c': o->config = optarg; break;
        case 'h': rc = 1; break;
        case 't':
            o->timeout = (int)strtol(optarg, &end, 10);
            if (*end || o->timeout < 1 || o->timeout > 3600) {
                fprintf(stderr, "nubo doctor: --timeout wants 1 to 3600 seconds, not '%s'\n",
                        optarg);
                rc = -1;
            }
            break;
        case 's':
            if (o->nsets < 64)
                o->sets[o->nsets++] = optarg;
            break;
        default: rc = -1; break;
        }
    }
    if (rc == 0) {
        int rest = argc + 1 - optind;
        if (rest < 1 || (rest == 1 && !strcmp(av[optind], "cloud"))) {
            o->cloud = true;
        } else if (!strcmp(av[optind], "rollback")) {
            if (rest != 2)
                fprintf(stderr, "nubo doctor: rollback wants one fix id\n");
            rc = rest == 2 ? 0 : -1;
            o->rollback = av[optind + 1];
        } else if (strcmp(av[optind], "server")) {
            fprintf(stderr,
                    "nubo doctor: cannot diagnose '%s'; only 'cloud', 'server' or "
                    "'migration'\n",
                    av[optind]);
            rc = -1;
        } else if (rest != 2 || !*av[optind + 1]) {
            fprintf(stderr, "nubo doctor: give exactly one server id or name\n");
            rc = -1;
        } else {
            o->server = av[optind + 1];
        }
    }
    free(av);
    return rc;
}

/* Loads the configuration; 0, or -1 after a message. */
static int load(const struct options *o)
{
    if (nb_conf_load(o->config) < 0)
        return -1;
    for (int i = 0; i < o->nsets; i++)
        if (nb_conf_set_arg(o->sets[i]) < 0) {
            fprintf(stderr, "nubo doctor: --set wants SECTION.KEY=VALUE, not '%s'\n", o->sets[i]);
            return -1;
        }
    return 0;
}

/* Opens the database of [database] connection without creating one: a
 * missing file means a wrong configuration, not an empty cloud. */
static struct nb_db *open_db(void)
{
    char shown[1100];
    char path[1100];
    if (!nb_cmd_db_path(path, sizeof(path)))
        return NULL;
    if (!nb_db_url_is_mariadb(path) && access(path, R_OK | W_OK) < 0) {
        fprintf(stderr, "nubo doctor: cannot open database %s: %m\n",
                nb_db_url_display(path, shown, sizeof(shown)));
        return NULL;
    }
    struct nb_db *db = nb_db_open(path);
    if (!db)
        fprintf(stderr, "nubo doctor: cannot open database %s\n",
                nb_db_url_display(path, shown, sizeof(shown)));
    return db;
}

static void summary(const struct nb_dr_report *r)
{
    fprintf(r->out, "summary: server %s: %d problem(s), %d warning(s)\n", r->uuid, r->problems,
            r->warnings);
}

/* Diagnoses, fixes when asked, diagnoses again after a fix. */
static int run(struct nb_db *db, const struct options *o, const struct nb_dr_host *host)
{
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    struct nb_dr_report r = {.out = stdout};
    if (nb_dr_diagnose(db, &ctx, host, o->server, &r) < 0) {
        fprintf(stderr, "nubo doctor: cannot diagnose server %s: %s%s\n", o->server,
                nb_ctx_failed(&ctx) ? nb_ctx_message(&ctx) : "database error",
                nb_ctx_status(&ctx) == 404 || nb_ctx_status(&ctx) == 409
                    ? ""
                    : " (details in nubo-db.log)");
        nb_dr_report_clear(&r);
        return NB_DR_EXIT_CANNOT;
    }
    summary(&r);
    int rc = nb_dr_exit_status(r.problems, false, false);
    if (rc == NB_DR_EXIT_HEALTHY || !o->fix) {
        if (rc != NB_DR_EXIT_HEALTHY && r.nfixes)
            printf("hint: `nubo doctor server %s --fix` corrects the disk format\n", r.uuid);
        nb_dr_report_clear(&r);
        return rc;
    }
    if (r.nfixes == 0) {
        printf("[FIX] nothing to apply: --fix corrects disk-format mismatches only\n");
        nb_dr_report_clear(&r);
        return NB_DR_EXIT_PROBLEM;
    }
    int found = r.problems;
    bool fixed = nb_dr_fix_run(db, &ctx, &r, o->timeout) == 0;
    char uuid[64];
    nb_strlcpy(uuid, r.uuid, sizeof(uuid));
    nb_dr_report_clear(&r);
    if (!fixed)
        return NB_DR_EXIT_PROBLEM;
    printf("after the fix:\n");
    nb_ctx_init_system(&ctx, ctx.request_id);
    if (nb_dr_diagnose(db, &ctx, host, uuid, &r) < 0) {
        fprintf(stderr, "nubo doctor: cannot diagnose server %s again: %s\n", uuid,
                nb_ctx_message(&ctx));
        nb_dr_report_clear(&r);
        return NB_DR_EXIT_PROBLEM;
    }
    summary(&r);
    rc = nb_dr_exit_status(found, true, r.problems == 0);
    nb_dr_report_clear(&r);
    return rc;
}

int nb_cmd_doctor(int argc, char **argv)
{
    if (argc > 0 && !strcmp(argv[0], "migration"))
        return nb_cmd_doctor_migration(argc - 1, argv + 1);
    struct options o = {0};
    int p = parse(argc, argv, &o);
    if (p != 0) {
        fputs(usage_text, p > 0 ? stdout : stderr);
        return p > 0 ? 0 : NB_DR_EXIT_USAGE;
    }
    if (load(&o) < 0)
        return NB_DR_EXIT_CANNOT;
    const char *state = nb_conf_str("DEFAULT", "state_path", "/var/lib/nubo");
    char logdir[1100];
    snprintf(logdir, sizeof(logdir), "%s/log", state);
    /* Logs (and the fix's audit lines) go where the cloud's go, not to the
     * report on stdout; if that is not possible, to stderr. */
    if (nb_log_open(nb_conf_str("DEFAULT", "log_dir", logdir), false, false) < 0)
        fprintf(stderr, "nubo doctor: cannot write the log under %s; logging to stderr\n", logdir);
    char hostname[256] = "localhost";
    gethostname(hostname, sizeof(hostname));
    const struct nb_dr_host host = {
        .my_host = nb_conf_str("DEFAULT", "host", hostname),
        .driver = nb_conf_str("compute", "driver", "fake"),
        .libvirt_uri = nb_conf_str("libvirt", "connection_uri", "qemu:///system"),
    };
    struct nb_db *db = open_db();
    if (!db) {
        nb_log_close();
        return NB_DR_EXIT_CANNOT;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int rc = o.cloud      ? nb_dr_cloud(db, &host, o.json, o.fix)
             : o.rollback ? nb_dr_cloud_rollback(db, o.rollback)
                          : run(db, &o, &host);
    curl_global_cleanup();
    nb_db_close(db);
    nb_log_close();
    return rc;
}
