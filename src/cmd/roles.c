/* roles.c - starts the configured roles in this process and stops them in
 * order on SIGTERM/SIGINT: HTTP first (in-flight requests finish), then the
 * compute agents' periodic work, then the bus (queued work drains), then the
 * conductor's leases (given up for the other control planes), then the
 * database.
 *
 * The roles run together or apart, as OpenStack's services do: each
 * process initialises the service modules its roles call (see modules
 * below), opens the database when a role works on it, and serves HTTP only
 * with an HTTP role (api, placement). A conductor or a scheduler of its own
 * (nova-conductor, nova-scheduler) opens the database and listens on the
 * bus. A process whose roles need no database (a compute agent of its own,
 * as nova-compute) neither opens it nor serves HTTP: its agents reach the
 * conductor over the bus and placement and the image service over HTTP
 * (compute/agent/svc_client.h). */
#include "bus/bus.h"
#include "cmd/cmd.h"
#include "cmd/procrec.h"
#include "cmd/seed.h"
#include "cmd/version.h"
#include "common/config.h"
#include "common/env.h"
#include "common/http.h"
#include "common/json.h"
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
#include "db/url.h"
#include "identity/identity.h"
#include "image/image.h"
#include "network/agent/netagent.h"
#include "network/network.h"
#include "placement/placement.h"
#include "policy/policy.h"
#include "volume/volume.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* [DEFAULT] roles, or every role. Borrowed. */
static const char *roles_str(void)
{
    return nb_conf_str("DEFAULT", "roles", "api,conductor,scheduler,placement,compute,metadata");
}

static bool role_enabled(const char *role)
{
    const char *roles = roles_str();
    char *copy = strdup(roles), *save = NULL;
    bool on = false;
    for (char *r = strtok_r(copy, ", ", &save); r && !on; r = strtok_r(NULL, ", ", &save))
        on = !strcmp(r, role);
    free(copy);
    return on;
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

/* The service modules, each set up once in a process whose roles call it.
 * A module's init prepares its in-process API, the one other roles call
 * (placement's candidates and claims, the network's ports, the volume
 * backend, the image store), and registers its HTTP routes, which only a
 * process with an HTTP role (api, placement) serves. A conductor or a
 * scheduler of its own thus works on the shared database exactly as the
 * same role inside `nubo serve` does, placement included (its candidate
 * cache follows a version kept in the database, so several processes see
 * one picture). */
static const struct module {
    const char *name;
    int (*init)(struct nb_env *env);
    const char *const roles[5]; /* the roles that need it */
} modules[] = {
    {"identity", nb_identity_init, {"api", "placement"}},
    {"image", nb_image_init, {"api", "conductor"}},
    {"volume", nb_volume_init, {"api", "conductor"}},
    {"network", nb_network_init, {"api", "conductor"}},
    {"placement", nb_placement_init, {"api", "placement", "conductor", "scheduler"}},
    {"compute API", nb_compute_api_init, {"api"}},
};

/* True if a configured role needs module m. */
static bool module_needed(const struct module *m)
{
    for (size_t i = 0; i < sizeof(m->roles) / sizeof(m->roles[0]) && m->roles[i]; i++)
        if (role_enabled(m->roles[i]))
            return true;
    return false;
}

/* Initialises the modules the configured roles need, in the table's
 * order. 0, or -1 after a message. */
static int init_modules(struct nb_env *env)
{
    for (size_t i = 0; i < sizeof(modules) / sizeof(modules[0]); i++) {
        if (!module_needed(&modules[i]))
            continue;
        if (modules[i].init(env) < 0) {
            fprintf(stderr, "nubo: cannot initialise the %s module (see the logs)\n",
                    modules[i].name);
            return -1;
        }
    }
    return 0;
}

/* True if this process initialised the module called name. */
static bool module_here(const char *name)
{
    for (size_t i = 0; i < sizeof(modules) / sizeof(modules[0]); i++)
        if (!strcmp(modules[i].name, name))
            return module_needed(&modules[i]);
    return false;
}

/* Registers the HTTP layer's own routes and every service's description,
 * before the modules register their routes. A module registers its own at
 * init too; registering them all here lets a process serve each service's
 * prefix in that service's dialect (errors, request ID header, access line)
 * even without its module (a placement-only process answering a /compute
 * URL). Compute answers what names no service. */
static void register_http_services(void)
{
    nb_http_init_routes();
    nb_http_service_register(&nb_compute_http_service, true);
    nb_http_service_register(&nb_identity_http_service, false);
    nb_http_service_register(&nb_image_http_service, false);
    nb_http_service_register(&nb_placement_http_service, false);
    nb_http_service_register(&nb_volume_http_service, false);
    nb_http_service_register(&nb_network_http_service, false);
}

/* Installs the policy guard once the modules registered their routes; a
 * route without a policy entry (or, in a process with every service, an
 * entry without a route) stops the start, naming each one in the log and on
 * stderr. 0/-1. */
static int start_policy(void)
{
    bool every_service = true;
    for (size_t i = 0; i < sizeof(modules) / sizeof(modules[0]); i++)
        every_service = every_service && module_needed(&modules[i]);
    int problems = nb_policy_check_routes(every_service);
    if (problems) {
        fprintf(stderr, "nubo: %d route(s) disagree with the policy table (see the log)\n",
                problems);
        return -1;
    }
    nb_policy_init();
    return 0;
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
    char shown[1100];
    char path[1100];
    if (make_state_path(env->state_path) < 0 || !nb_cmd_db_path(path, sizeof(path)))
        return -1;
    if (!(env->db = nb_db_open(path))) {
        fprintf(stderr, "nubo: cannot open database %s\n",
                nb_db_url_display(path, shown, sizeof(shown)));
        return -1;
    }
    if (nb_db_sync(env->db) < 0) {
        fprintf(stderr, "nubo: database migration failed (see the logs)\n");
        return -1;
    }
    return 0;
}

/* The hosts the compute role serves here: the fake driver's list, else
 * this host. Borrowed from the configuration or env. */
static const char *agent_hosts(const struct nb_env *env)
{
    if (!strcmp(nb_conf_str("compute", "driver", "fake"), "fake"))
        return nb_conf_str("fake", "hosts", "fake-1,fake-2,fake-3");
    return env->my_host;
}

/* Hosts from which one process's agents listen with one worker at a time
 * each ([compute] agent_workers 1), on the bus's shared pool of workers
 * ([compute] agent_shared_workers true; on the in-process bus), unless
 * configured otherwise: a thread is a process id, and 10,000 fake hosts
 * with two workers each are more threads than this machine kind's pid_max
 * (32,768) leaves to one process; with one each they were 10,000 stacks. */
#define MANY_AGENTS 100

/* Starts one agent per host the driver serves. */
static int start_agents(struct nb_env *env, struct nb_virt_driver **drv_out)
{
    const char *name = nb_conf_str("compute", "driver", "fake");
    struct nb_virt_driver *drv = nb_virt_open(name);
    if (!drv)
        return -1;
    *drv_out = drv;
    size_t nhosts = 1;
    for (const char *p = agent_hosts(env); *p; p++)
        nhosts += *p == ',';
    if (nhosts > MANY_AGENTS && !nb_conf_str("compute", "agent_workers", NULL))
        nb_conf_set("compute", "agent_workers", "1");
    if (nhosts > MANY_AGENTS && !nb_conf_str("compute", "agent_shared_workers", NULL))
        nb_conf_set("compute", "agent_shared_workers", "true");
    char *copy = strdup(agent_hosts(env)), *save = NULL;
    int rc = 0;
    for (char *h = strtok_r(copy, ", ", &save); h && rc == 0; h = strtok_r(NULL, ", ", &save))
        rc = nb_compute_agent_start(env, drv, h);
    free(copy);
    return rc;
}

/* Starts the network agent of each compute host here, when wanted
 * (netagent.h: by default with the libvirt driver). */
static int start_network_agents(struct nb_env *env)
{
    if (!nb_netagent_wanted())
        return 0;
    char *copy = strdup(agent_hosts(env)), *save = NULL;
    int rc = 0;
    for (char *h = strtok_r(copy, ", ", &save); h && rc == 0; h = strtok_r(NULL, ", ", &save))
        rc = nb_netagent_start(env, h);
    free(copy);
    return rc;
}

/* True if the comma lists a and b share a role other than compute. */
static bool control_roles_meet(const char *a, const char *b)
{
    char *copy = strdup(a), *save = NULL;
    bool meet = false;
    for (char *r = strtok_r(copy, ", ", &save); r && !meet; r = strtok_r(NULL, ", ", &save)) {
        if (!strcmp(r, "compute"))
            continue;
        size_t n = strlen(r);
        for (const char *p = b; !meet && (p = strstr(p, r)); p += n)
            meet = (p == b || p[-1] == ',') && (p[n] == ',' || !p[n]);
    }
    free(copy);
    return meet;
}

/* True if the JSON arrays of strings a and b share an item. */
static bool hosts_meet(const json_t *a, const json_t *b)
{
    size_t i, k;
    json_t *x, *y;
    json_array_foreach (a, i, x)
        json_array_foreach (b, k, y)
            if (json_equal(x, y))
                return true;
    return false;
}

/* True (after a message) if a live nubo process of this state path
 * already runs one of the roles of info: a control-plane role for the
 * same host, or an agent for one of the same compute hosts. */
static bool overlapping(const char *run_dir, const json_t *info)
{
    json_t *recs = nb_procrec_list(run_dir);
    bool clash = false;
    size_t i;
    json_t *r;
    json_array_foreach (recs, i, r) {
        if (!json_is_true(json_object_get(r, "alive")))
            continue;
        const char *mine = nb_json_str(info, "roles"), *theirs = nb_json_str(r, "roles");
        const char *host = nb_json_str(r, "host");
        if (!(host && theirs && !strcmp(host, nb_json_str(info, "host")) &&
              control_roles_meet(mine, theirs)) &&
            !hosts_meet(json_object_get(info, "hosts"), json_object_get(r, "hosts")))
            continue;
        fprintf(stderr,
                "nubo: a running nubo process (pid %lld, %s since %s, roles %s, host %s; record "
                "%s) already runs some of these roles (%s) on this state path; stop it first\n",
                nb_json_int(r, "pid", 0), nb_json_str(r, "command"), nb_json_str(r, "started_at"),
                theirs, host, nb_json_str(r, "path"), mine);
        clash = true;
        break;
    }
    json_decref(recs);
    return clash;
}

/* Locks this process's record (procrec.h) with what `nubo status` shows:
 * command, roles, hosts, version, config, endpoints. NULL after a
 * message. */
static struct nb_procrec *record_process(const struct nb_env *env, const struct nb_run_opts *o,
                                         bool http)
{
    json_t *info =
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "command", o->command ? o->command : "serve",
                  "roles", roles_str(), "host", env->my_host, "version", NUBO_VERSION, "state_path",
                  env->state_path, "config", o->config_path ? o->config_path : "");
    json_t *hosts = json_array();
    if (role_enabled("compute")) {
        char *copy = strdup(agent_hosts(env)), *save = NULL;
        for (char *h = strtok_r(copy, ", ", &save); h; h = strtok_r(NULL, ", ", &save))
            json_array_append_new(hosts, json_string(h));
        free(copy);
    }
    json_object_set_new(info, "hosts", hosts);
    if (http) {
        char url[300];
        snprintf(url, sizeof(url), "http://%s:%ld", nb_conf_str("api", "listen", "127.0.0.1"),
                 nb_conf_int("api", "port", 8774));
        json_object_set_new(info, "api_url", json_string(url));
    }
    if (role_enabled("metadata")) {
        char url[300];
        snprintf(url, sizeof(url), "http://%s:%ld", nb_conf_str("metadata", "listen", "127.0.0.1"),
                 nb_conf_int("metadata", "port", 8775));
        json_object_set_new(info, "metadata_url", json_string(url));
    }
    char run_dir[1100], kind[256];
    snprintf(run_dir, sizeof(run_dir), "%s/run", env->state_path);
    nb_strlcpy(kind, roles_str(), sizeof(kind));
    for (char *p = kind; *p; p++)
        if (*p == ',' || *p == ' ' || *p == '/')
            *p = '-';
    struct nb_procrec *rec =
        overlapping(run_dir, info) ? NULL : nb_procrec_acquire(run_dir, kind, env->my_host, info);
    json_decref(info);
    return rec;
}

/* The first records of a new cloud, or what this start was asked to
 * (re)seed. 0/-1 (logged). */
static int bootstrap(struct nb_env *env, const struct nb_run_opts *o)
{
    if ((o->bootstrap || o->reset_identity || o->seed_demo_image) && !role_enabled("api")) {
        fprintf(stderr, "nubo: creating or seeding a cloud needs the api role in [DEFAULT] "
                        "roles (it writes identities, networks and images)\n");
        return -1;
    }
    if ((o->bootstrap || o->reset_identity) &&
        nb_identity_bootstrap(env, o->admin_password, o->demo_password) < 0)
        return -1;
    if (o->bootstrap && (nb_seed_defaults(env) < 0 || nb_network_seed_defaults(env) < 0))
        return -1;
    if (!o->bootstrap && o->seed_demo_image && nb_seed_demo_image(env) < 0)
        return -1;
    return o->bootstrapped ? o->bootstrapped(o->arg) : 0;
}

/* Blocks SIGTERM and SIGINT in every thread (they are taken by sigwait)
 * and ignores SIGPIPE; *set gets the two. */
static void block_signals(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGINT);
    pthread_sigmask(SIG_BLOCK, set, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* Opens the log ([DEFAULT] log_dir, default <state>/log). 0, or -1 after
 * a message on stderr. */
static int open_log(const char *state)
{
    char logdir[1024];
    snprintf(logdir, sizeof(logdir), "%s/log", state);
    if (nb_log_open(nb_conf_str("DEFAULT", "log_dir", logdir),
                    nb_conf_bool("DEFAULT", "debug", false), true) < 0) {
        fprintf(stderr, "nubo: cannot create log directory\n");
        return -1;
    }
    return 0;
}

/* Starts the bus, the modules and the enabled roles in dependency order,
 * the HTTP server (when http) before the compute agents; *drv gets the
 * agents' virt driver. 0, or -1 (logged) with what started left for
 * stop_roles. */
static int start_roles(struct nb_env *env, const struct nb_run_opts *opts, bool http,
                       struct nb_virt_driver **drv)
{
    if (nb_bus_init() < 0)
        return -1;
    if (http)
        register_http_services();
    if (init_modules(env) < 0)
        return -1;
    if (http && start_policy() < 0)
        return -1;
    if (bootstrap(env, opts) < 0)
        return -1;
    /* The agents' side of the network service, where the Networking API is
     * served (its process has the database). */
    if (http && role_enabled("api") && module_here("network") && nb_network_rpc_start(env) < 0)
        return -1;
    if (role_enabled("scheduler") &&
        (nb_scheduler_start(env) < 0 ||
         nb_service_keepalive_start(env->db, env->my_host, "nova-scheduler", "scheduler") < 0))
        return -1;
    if (role_enabled("conductor") &&
        (nb_conductor_start(env) < 0 ||
         nb_service_keepalive_start(env->db, env->my_host, "nova-conductor", "conductor") < 0))
        return -1;
    if (role_enabled("metadata") && nb_metadata_start(env) < 0)
        return -1;
    if (http) {
        const char *url = nb_conf_str("api", "public_url", NULL);
        if (url)
            nb_http_set_base_url(url);
        if (nb_http_start(nb_conf_str("api", "listen", "127.0.0.1"),
                          (int)nb_conf_int("api", "port", 8774),
                          (int)nb_conf_int("api", "workers", 8)) < 0)
            return -1;
    }
    /* After the HTTP server: agents that reach placement over HTTP (even
     * this process's) register at once. */
    if (role_enabled("compute")) {
        nb_svc_init(module_here("placement") && module_here("image"));
        if (start_agents(env, drv) < 0 || start_network_agents(env) < 0)
            return -1;
    }
    return 0;
}

/* "nubo is ready" in the log and on stdout (which the launcher waits
 * for), with the URL when serving HTTP. */
static void announce_ready(struct nb_ctx *ctx, const struct nb_env *env, bool http)
{
    if (http) {
        NB_INFO("nubo.main", ctx, NULL, "nubo is ready at %s", nb_http_base_url());
        printf("nubo: ready at %s\n", nb_http_base_url());
    } else {
        NB_INFO("nubo.main", ctx, NULL, "nubo is ready (roles %s, host %s)",
                nb_conf_str("DEFAULT", "roles", ""), env->my_host);
        printf("nubo: ready (roles %s, host %s)\n", nb_conf_str("DEFAULT", "roles", ""),
               env->my_host);
    }
    fflush(stdout);
}

/* Stops whatever start_roles started, in reverse, then closes the
 * database, the process record and the log. */
static void stop_roles(struct nb_ctx *ctx, struct nb_env *env, struct nb_virt_driver *drv,
                       struct nb_procrec *rec)
{
    nb_http_stop();
    nb_compute_agents_stop();
    nb_netagent_stop();
    nb_service_keepalive_stop();
    nb_volume_shutdown();
    nb_metadata_stop();
    nb_bus_shutdown();
    nb_conductor_stop(); /* its leases, once no handler runs */
    nb_svc_shutdown();
    if (drv && drv->ops->close)
        drv->ops->close(drv);
    nb_db_close(env->db);
    nb_procrec_release(rec);
    NB_INFO("nubo.main", ctx, NULL, "stopped");
    nb_log_close();
}

int nb_run_roles(const struct nb_run_opts *opts)
{
    sigset_t set;
    block_signals(&set);
    char hostname[256] = "localhost";
    gethostname(hostname, sizeof(hostname));
    const char *state = nb_conf_str("DEFAULT", "state_path", "/var/lib/nubo");
    struct nb_env env = {
        .state_path = state,
        .region = nb_conf_str("DEFAULT", "region_name", "RegionOne"),
        .my_host = nb_conf_str("DEFAULT", "host", hostname),
    };
    if (open_log(state) < 0)
        return 1;
    bool http = role_enabled("api") || role_enabled("placement");
    struct nb_procrec *rec = NULL;
    if (make_state_path(state) < 0 || !(rec = record_process(&env, opts, http)) ||
        (needs_database() && open_database(&env) < 0)) {
        nb_db_close(env.db);
        nb_procrec_release(rec);
        nb_log_close();
        return 1;
    }
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    NB_INFO("nubo.main", &ctx, NULL, "starting nubo %s (pid %d, %s), state_path %s", NUBO_VERSION,
            (int)getpid(), opts->command ? opts->command : "serve", state);
    if (opts->config_path)
        NB_INFO("nubo.main", &ctx, NULL, "config %s%s%s", opts->config_path,
                opts->config_note ? ": " : "", opts->config_note ? opts->config_note : "");

    int rc = 1;
    struct nb_virt_driver *drv = NULL;
    if (start_roles(&env, opts, http, &drv) == 0) {
        announce_ready(&ctx, &env, http);
        nb_procrec_ready(rec);
        int sig = 0;
        sigwait(&set, &sig);
        NB_INFO("nubo.main", &ctx, NULL, "caught signal %d, stopping", sig);
        rc = 0;
    }
    stop_roles(&ctx, &env, drv, rec);
    return rc;
}
