/* roles.c - starts the configured roles in this process and stops them in
 * order on SIGTERM/SIGINT: HTTP first (in-flight requests finish), then the
 * compute agents' periodic work, then the bus (queued work drains), then the
 * database.
 *
 * A process whose roles need no database (a compute agent of its own, as
 * nova-compute) neither opens it nor serves HTTP: its agents reach the
 * conductor over the bus and placement and the image service over HTTP
 * (compute/agent/svc_client.h). */
#include "bus/bus.h"
#include "cmd/cmd.h"
#include "cmd/seed.h"
#include "common/config.h"
#include "common/env.h"
#include "common/http.h"
#include "common/log.h"
#include "common/util.h"
#include "compute/agent/agent.h"
#include "compute/agent/svc_client.h"
#include "compute/api/api.h"
#include "compute/compute.h"
#include "compute/conductor/conductor.h"
#include "compute/metadata/metadata.h"
#include "compute/scheduler/scheduler.h"
#include "db/db.h"
#include "identity/identity.h"
#include "image/image.h"
#include "network/network.h"
#include "placement/placement.h"
#include "volume/volume.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static bool role_enabled(const char *role)
{
    const char *roles =
        nb_conf_str("DEFAULT", "roles", "api,conductor,scheduler,placement,compute,metadata");
    char *copy = strdup(roles), *save = NULL;
    bool on = false;
    for (char *r = strtok_r(copy, ", ", &save); r && !on; r = strtok_r(NULL, ", ", &save))
        on = !strcmp(r, role);
    free(copy);
    return on;
}

/* Path of the SQLite database from [database] connection (sqlite:///path). */
static const char *db_path(char *buf, size_t n)
{
    const char *conn = nb_conf_str("database", "connection", NULL);
    if (conn && nb_startswith(conn, "sqlite:///"))
        nb_strlcpy(buf, conn + strlen("sqlite://"), n);
    else
        snprintf(buf, n, "%s/nubo.sqlite", nb_conf_str("DEFAULT", "state_path", "/var/lib/nubo"));
    return buf;
}

/* True when a configured role works on the database: every role but
 * compute. */
static bool needs_database(void)
{
    static const char *const roles[] = {"api", "placement", "conductor", "scheduler", "metadata"};
    for (size_t i = 0; i < sizeof(roles) / sizeof(roles[0]); i++)
        if (role_enabled(roles[i]))
            return true;
    return false;
}

/* mkdir -p the state path. 0, or -1 after a message. */
static int make_state_path(const char *state)
{
    if (nb_mkdir_p(state) == 0)
        return 0;
    fprintf(stderr, "nubo: cannot create %s\n", state);
    return -1;
}

/* Opens and migrates the database into env->db. 0, or -1 after a message. */
static int open_database(struct nb_env *env)
{
    char path[1024];
    if (make_state_path(env->state_path) < 0)
        return -1;
    if (!(env->db = nb_db_open(db_path(path, sizeof(path))))) {
        fprintf(stderr, "nubo: cannot open database %s\n", path);
        return -1;
    }
    if (nb_db_sync(env->db) < 0) {
        fprintf(stderr, "nubo: database migration failed (see the logs)\n");
        return -1;
    }
    return 0;
}

/* Starts one agent per host the driver serves. */
static int start_agents(struct nb_env *env, struct nb_virt_driver **drv_out)
{
    const char *name = nb_conf_str("compute", "driver", "fake");
    struct nb_virt_driver *drv = nb_virt_open(name);
    if (!drv)
        return -1;
    *drv_out = drv;
    const char *hosts =
        !strcmp(name, "fake") ? nb_conf_str("fake", "hosts", "fake-1,fake-2,fake-3") : env->my_host;
    char *copy = strdup(hosts), *save = NULL;
    int rc = 0;
    for (char *h = strtok_r(copy, ", ", &save); h && rc == 0; h = strtok_r(NULL, ", ", &save))
        rc = nb_compute_agent_start(env, drv, h);
    free(copy);
    return rc;
}

int nb_run_roles(bool bootstrap, const char *admin_password, const char *demo_password)
{
    /* Signals are taken by sigwait below; every thread inherits the mask. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    char hostname[256] = "localhost";
    gethostname(hostname, sizeof(hostname));
    const char *state = nb_conf_str("DEFAULT", "state_path", "/var/lib/nubo");
    struct nb_env env = {
        .state_path = state,
        .region = nb_conf_str("DEFAULT", "region_name", "RegionOne"),
        .my_host = nb_conf_str("DEFAULT", "host", hostname),
    };
    char logdir[1024];
    snprintf(logdir, sizeof(logdir), "%s/log", state);
    if (nb_log_open(nb_conf_str("DEFAULT", "log_dir", logdir),
                    nb_conf_bool("DEFAULT", "debug", false), true) < 0) {
        fprintf(stderr, "nubo: cannot create log directory\n");
        return 1;
    }
    if (needs_database() ? open_database(&env) < 0 : make_state_path(state) < 0) {
        nb_db_close(env.db);
        nb_log_close();
        return 1;
    }
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    NB_INFO("nubo.main", &ctx, NULL, "starting nubo (pid %d), state_path %s", (int)getpid(), state);

    int rc = 1;
    struct nb_virt_driver *drv = NULL;
    bool http = role_enabled("api") || role_enabled("placement");
    if (nb_bus_init() < 0)
        goto cleanup;
    if (http &&
        (nb_identity_init(&env) < 0 || nb_image_init(&env) < 0 || nb_volume_init(&env) < 0 ||
         nb_network_init(&env) < 0 || nb_placement_init(&env) < 0 || nb_compute_api_init(&env) < 0))
        goto cleanup;
    if (bootstrap && (nb_identity_bootstrap(&env, admin_password, demo_password) < 0 ||
                      nb_seed_defaults(&env) < 0 || nb_network_seed_defaults(&env) < 0))
        goto cleanup;
    if (role_enabled("scheduler") &&
        (nb_scheduler_start(&env) < 0 ||
         nb_service_keepalive_start(env.db, env.my_host, "nova-scheduler", "scheduler") < 0))
        goto cleanup;
    if (role_enabled("conductor") &&
        (nb_conductor_start(&env) < 0 ||
         nb_service_keepalive_start(env.db, env.my_host, "nova-conductor", "conductor") < 0))
        goto cleanup;
    if (role_enabled("metadata") && nb_metadata_start(&env) < 0)
        goto cleanup;
    if (http) {
        const char *url = nb_conf_str("api", "public_url", NULL);
        if (url)
            nb_http_set_base_url(url);
        if (nb_http_start(nb_conf_str("api", "listen", "127.0.0.1"),
                          (int)nb_conf_int("api", "port", 8774),
                          (int)nb_conf_int("api", "workers", 8)) < 0)
            goto cleanup;
    }
    /* After the HTTP server: agents that reach placement over HTTP (even
     * this process's) register at once. */
    if (role_enabled("compute")) {
        nb_svc_init(http);
        if (start_agents(&env, &drv) < 0)
            goto cleanup;
    }
    if (http) {
        NB_INFO("nubo.main", &ctx, NULL, "nubo is ready at %s", nb_http_base_url());
        printf("nubo: ready at %s\n", nb_http_base_url());
    } else {
        NB_INFO("nubo.main", &ctx, NULL, "nubo is ready (roles %s, host %s)",
                nb_conf_str("DEFAULT", "roles", ""), env.my_host);
        printf("nubo: ready (roles %s, host %s)\n", nb_conf_str("DEFAULT", "roles", ""),
               env.my_host);
    }
    fflush(stdout);

    int sig = 0;
    sigwait(&set, &sig);
    NB_INFO("nubo.main", &ctx, NULL, "caught signal %d, stopping", sig);
    rc = 0;
cleanup:
    nb_http_stop();
    nb_compute_agents_stop();
    nb_service_keepalive_stop();
    nb_volume_shutdown();
    nb_metadata_stop();
    nb_bus_shutdown();
    nb_svc_shutdown();
    if (drv && drv->ops->close)
        drv->ops->close(drv);
    nb_db_close(env.db);
    NB_INFO("nubo.main", &ctx, NULL, "stopped");
    nb_log_close();
    return rc;
}
