/* serve.c - `nubo serve`, `nubo compute` and `nubo db`: act on an existing
 * cloud through its configuration file (`nubo doctor` too: doctor.c). */
#include "cmd/cmd.h"
#include "common/config.h"
#include "common/log.h"
#include "common/util.h"
#include "db/db.h"
#include "db/url.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int nb_cmd_load_config(int argc, char **argv, const char **path_out)
{
    const char *path = "/etc/nubo/nubo.conf";
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--config") && i + 1 < argc)
            path = argv[++i];
        else if (!strcmp(argv[i], "--set") && i + 1 < argc)
            continue;
    }
    if (path_out)
        *path_out = path;
    if (nb_conf_load(path) < 0)
        return -1;
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--set") && i + 1 < argc && nb_conf_set_arg(argv[++i]) < 0) {
            fprintf(stderr, "nubo: --set wants SECTION.KEY=VALUE, not '%s'\n", argv[i]);
            return -1;
        }
    return 0;
}

static bool bus_inproc(void)
{
    return strcmp(nb_conf_str("bus", "transport", "inproc"), "inproc") == 0;
}

/* Without [DEFAULT] roles, `nubo serve` runs the control plane; with the
 * in-process bus no other process can reach it, so the compute agents run
 * inside too (an all-in-one from its configuration). */
int nb_cmd_serve(int argc, char **argv)
{
    const char *path;
    if (nb_cmd_load_config(argc, argv, &path) < 0)
        return 2;
    if (!nb_conf_str("DEFAULT", "roles", NULL))
        nb_conf_set("DEFAULT", "roles",
                    bus_inproc() ? "api,conductor,scheduler,placement,compute,metadata"
                                 : "api,conductor,scheduler,placement,metadata");
    struct nb_run_opts opts = {.command = "serve", .config_path = path};
    return nb_run_roles(&opts);
}

/* --fake-hosts N: [fake] hosts = <[fake] host_prefix>1 … N (prefix
 * "fake-"), each a nova-compute service with its own provider and
 * heartbeat. 0, or 2 after a message. */
static int fake_hosts_arg(int argc, char **argv)
{
    const char *arg = NULL;
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--fake-hosts") && i + 1 < argc)
            arg = argv[++i];
    if (!arg)
        return 0;
    char *end;
    long n = strtol(arg, &end, 10);
    if (*end || n < 1 || n > 10000) {
        fprintf(stderr, "nubo compute: --fake-hosts must be between 1 and 10000\n");
        return 2;
    }
    if (strcmp(nb_conf_str("compute", "driver", "fake"), "fake")) {
        fprintf(stderr, "nubo compute: --fake-hosts needs [compute] driver = fake\n");
        return 2;
    }
    const char *prefix = nb_conf_str("fake", "host_prefix", "fake-");
    size_t cap = (size_t)n * (strlen(prefix) + 8) + 1;
    char *hosts = calloc(1, cap);
    if (!hosts)
        return 2;
    size_t len = 0;
    for (long i = 1; i <= n; i++)
        len += (size_t)snprintf(hosts + len, cap - len, "%s%s%ld", i > 1 ? "," : "", prefix, i);
    nb_conf_set("fake", "hosts", hosts);
    free(hosts);
    return 0;
}

/* One hypervisor agent process (nova-compute): role compute only, no
 * database, the conductor over the bus between processes. With
 * --fake-hosts N, the agents of N fake hosts. */
int nb_cmd_compute(int argc, char **argv)
{
    const char *path;
    if (nb_cmd_load_config(argc, argv, &path) < 0)
        return 2;
    if (fake_hosts_arg(argc, argv))
        return 2;
    if (bus_inproc()) {
        fprintf(stderr, "nubo compute: a separate compute process needs a message bus between "
                        "processes: set [bus] transport = amqp and [bus] transport_url "
                        "(rabbit://USER:PASSWORD@HOST:5672/VHOST), also for `nubo serve`; with "
                        "the in-process bus, run the compute role inside `nubo serve` "
                        "(roles = ...,compute).\n");
        return 2;
    }
    nb_conf_set("DEFAULT", "roles", "compute");
    struct nb_run_opts opts = {.command = "compute", .config_path = path};
    return nb_run_roles(&opts);
}

const char *nb_cmd_db_path(char *buf, size_t n)
{
    struct nb_db_url u;
    char err[256];
    if (nb_db_url_parse(nb_conf_str("database", "connection", NULL),
                        nb_conf_str("DEFAULT", "state_path", "/var/lib/nubo"), &u, err,
                        sizeof(err)) < 0) {
        fprintf(stderr, "nubo: [database] connection: %s\n", err);
        return NULL;
    }
    const char *conn = nb_conf_str("database", "connection", NULL);
    if (u.kind == NB_DB_MARIADB && strlen(conn) < n) /* nb_db_open takes the URL */
        return strcpy(buf, conn);
    if (u.kind == NB_DB_MARIADB || strlen(u.path) >= n) {
        fprintf(stderr, "nubo: [database] connection: path too long\n");
        return NULL;
    }
    return strcpy(buf, u.path);
}

int nb_cmd_db(int argc, char **argv)
{
    char shown[1100];
    if (argc < 1 || (strcmp(argv[0], "sync") && strcmp(argv[0], "version"))) {
        fprintf(stderr, "usage: nubo db sync|version --config FILE\n");
        return 2;
    }
    if (nb_cmd_load_config(argc - 1, argv + 1, NULL) < 0)
        return 2;
    char path[1100];
    if (!nb_cmd_db_path(path, sizeof(path)))
        return 1;
    struct nb_db *db = nb_db_open(path);
    if (!db) {
        fprintf(stderr, "nubo db: cannot open %s\n", nb_db_url_display(path, shown, sizeof(shown)));
        return 1;
    }
    int rc = 0;
    if (!strcmp(argv[0], "sync")) {
        int n = nb_db_sync(db);
        if (n < 0) {
            fprintf(stderr, "nubo db sync: failed (see logs)\n");
            rc = 1;
        } else {
            printf("applied %d migration(s); schema version %d\n", n, nb_db_version(db));
        }
    } else {
        printf("%d\n", nb_db_version(db));
    }
    nb_db_close(db);
    return rc;
}
