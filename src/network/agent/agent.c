/* agent.c - the network agent's thread (netagent.h): listens on
 * "q-agent-notifier.<host>", reports the state of its four agent types to
 * "q-plugin", fetches the host's desired state (get_host_state) when told
 * it changed and every [agent] resync_interval, runs the phases on it
 * (internal.h), and scans the devices every [agent] polling_interval,
 * telling the control side which ports came up or went down
 * (update_device_list); a compute port's addresses are probed for
 * duplicates (dad.c) before it is first reported up.
 *
 * Nothing on the host is touched before the first state arrives. A phase
 * that fails is logged and the next one runs; the ports it named
 * (na_port_failed) are reported as failed with its message. */
#include "bus/bus.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "network/agent/agent_int.h"
#include "network/agent/dad.h"
#include "network/agent/mdproxy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LOG_NA "nubo.network.agent"
#define PLUGIN_TOPIC "q-plugin"
#define NOTIFIER_PREFIX "q-agent-notifier."

static pthread_mutex_t agents_lock = PTHREAD_MUTEX_INITIALIZER;
static struct na *agents;

const char *na_host(const struct na *a)
{
    return a->host;
}

const char *na_state_dir(const struct na *a)
{
    return a->state_dir;
}

const char *na_tag(const struct na *a)
{
    return a->tag;
}

bool nb_netagent_wanted(void)
{
    const char *v = nb_conf_str("network_agent", "enabled", "auto");
    int b = nb_bool_from_string(v);
    if (b >= 0)
        return b == 1;
    return !strcmp(nb_conf_str("compute", "driver", "fake"), "libvirt");
}

/* The agent's uuid, kept in <state dir>/agent_uuid (made once); tag gets
 * its first 8 hex digits. */
static void load_tag(struct na *a)
{
    char path[1100], id[NB_UUID_LEN];
    snprintf(path, sizeof(path), "%s/agent_uuid", a->state_dir);
    char *text = nb_read_file(path, NULL);
    if (text && nb_is_uuid(strtok(text, " \n"))) {
        nb_strlcpy(id, text, sizeof(id));
    } else {
        nb_uuid(id);
        char line[NB_UUID_LEN + 2];
        snprintf(line, sizeof(line), "%s\n", id);
        nb_write_file(path, line, strlen(line), 0644);
    }
    free(text);
    nb_strlcpy(a->tag, id, sizeof(a->tag));
}

struct na *na_new(const char *host, const char *state_dir)
{
    if (nb_mkdir_p(state_dir) < 0) {
        NB_ERROR(LOG_NA, NULL, NULL, "cannot create the network agent's directory %s: %s",
                 state_dir, strerror(errno));
        return NULL;
    }
    struct na *a = calloc(1, sizeof(*a));
    nb_strlcpy(a->host, host, sizeof(a->host));
    nb_strlcpy(a->state_dir, state_dir, sizeof(a->state_dir));
    snprintf(a->topic, sizeof(a->topic), NOTIFIER_PREFIX "%s", host);
    pthread_mutex_init(&a->own_lock, NULL);
    pthread_mutex_init(&a->lock, NULL);
    pthread_cond_init(&a->cond, NULL);
    a->reported = json_object();
    a->failed = json_object();
    a->probed = json_object();
    load_tag(a);
    na_own_load(a);
    return a;
}

void na_free(struct na *a)
{
    if (!a)
        return;
    json_decref(a->owned);
    json_decref(a->state);
    json_decref(a->reported);
    json_decref(a->failed);
    json_decref(a->probed);
    pthread_mutex_destroy(&a->own_lock);
    pthread_mutex_destroy(&a->lock);
    pthread_cond_destroy(&a->cond);
    free(a);
}

void na_port_failed(struct na *a, const char *port_id, const char *reason)
{
    if (port_id && !json_object_get(a->failed, port_id))
        json_object_set_new(a->failed, port_id, json_string(reason ? reason : "failed"));
}

typedef int (*phase_fn)(struct na *, struct nb_ctx *, const json_t *);

int na_reconcile(struct na *a, struct nb_ctx *ctx, const json_t *state)
{
    /* The phases linked in (weak symbols), in internal.h's order. */
    const struct {
        const char *name;
        phase_fn fn;
    } run[] = {
        {"l2", na_l2_sync}, {"dhcp", na_dhcp_sync}, {"mdproxy", na_mdproxy_sync},
        {"l3", na_l3_sync}, {"sg", na_sg_sync},
    };
    json_object_clear(a->failed);
    int failed = 0;
    for (size_t i = 0; i < sizeof(run) / sizeof(run[0]); i++) {
        if (!run[i].fn)
            continue;
        struct nb_ctx pctx;
        nb_ctx_child(&pctx, ctx);
        double t0 = nb_time_mono();
        if (run[i].fn(a, &pctx, state) < 0) {
            failed++;
            NB_ERROR(LOG_NA, &pctx, NULL, "Network agent phase %s failed on host %s: %s",
                     run[i].name, a->host, nb_ctx_message(&pctx));
            nb_ctx_clear_error(ctx);
            nb_ctx_forward_error(ctx, &pctx);
        } else {
            NB_DEBUG(LOG_NA, &pctx, NULL, "phase %s done in %.3f s", run[i].name,
                     nb_time_mono() - t0);
        }
    }
    return failed;
}

/* Counts for the agents' "configurations": networks, ports, subnets of
 * the last state. */
static void count(const json_t *state, int *nets, int *ports, int *subnets, int *dhcp_nets,
                  int *routers)
{
    *nets = *ports = *subnets = *dhcp_nets = *routers = 0;
    const json_t *ns = json_object_get(state, "networks"), *n;
    size_t i;
    json_array_foreach (ns, i, n) {
        (*nets)++;
        if (json_is_object(json_object_get(n, "dhcp"))) {
            (*dhcp_nets)++;
            *subnets += (int)json_array_size(json_object_get(n, "subnets"));
        }
    }
    *ports = (int)json_array_size(json_object_get(state, "ports"));
    *routers = (int)json_array_size(json_object_get(state, "routers"));
}

/* The "agent" object of report_state for one agent type. */
static json_t *agent_report(struct na *a, int type, bool start_flag)
{
    static const char *const types[][3] = {
        {"Linux bridge agent", "neutron-linuxbridge-agent", "N/A"},
        {"DHCP agent", "neutron-dhcp-agent", "dhcp_agent"},
        {"L3 agent", "neutron-l3-agent", "l3_agent"},
        {"Metadata agent", "neutron-metadata-agent", "N/A"},
    };
    int nets, ports, subnets, dhcp_nets, routers;
    count(a->state, &nets, &ports, &subnets, &dhcp_nets, &routers);
    json_t *conf;
    switch (type) {
    case 0:
        conf = json_pack(
            "{s:s, s:[s], s:{}, s:{}, s:i, s:b}", "local_ip",
            nb_conf_str("vxlan", "local_ip", nb_conf_str("DEFAULT", "my_ip", "127.0.0.1")),
            "tunnel_types", "vxlan", "interface_mappings", "bridge_mappings", "devices", ports,
            "l2_population", false);
        break;
    case 1:
        conf = json_pack("{s:s, s:i, s:i, s:i, s:I, s:b}", "dhcp_driver",
                         "neutron.agent.linux.dhcp.Dnsmasq", "networks", dhcp_nets, "subnets",
                         subnets, "ports", ports, "dhcp_lease_duration",
                         (json_int_t)nb_conf_int("DEFAULT", "dhcp_lease_duration", 86400),
                         "log_agent_heartbeats", false);
        break;
    case 2:
        conf = json_pack("{s:s, s:i, s:s, s:s}", "agent_mode", "legacy", "routers", routers,
                         "interface_driver", "linuxbridge", "external_network_bridge", "");
        break;
    default:
        conf = json_pack("{s:s, s:b}", "metadata_proxy_socket", "", "log_agent_heartbeats", false);
        break;
    }
    return json_pack("{s:{s:s, s:s, s:s, s:s, s:s, s:b, s:o}}", "agent", "host", a->host, "binary",
                     types[type][1], "agent_type", types[type][0], "topic", types[type][2],
                     "availability_zone", nb_conf_str("agent", "availability_zone", "nova"),
                     "start_flag", start_flag, "configurations", conf);
}

/* Casts report_state for the four agent types. 0, or -1 when the control
 * side does not listen yet. */
static int report_states(struct na *a, bool start_flag)
{
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    int rc = 0;
    for (int t = 0; t < 4 && rc == 0; t++)
        rc = nb_bus_cast(&ctx, PLUGIN_TOPIC, "report_state", agent_report(a, t, start_flag));
    if (rc < 0)
        NB_DEBUG(LOG_NA, &ctx, NULL, "report_state: no listener on %s yet", PLUGIN_TOPIC);
    return rc;
}

/* Fetches the host's state. New reference or NULL (logged). */
static json_t *fetch_state(struct na *a, struct nb_ctx *ctx)
{
    json_t *r =
        nb_bus_call(ctx, PLUGIN_TOPIC, "get_host_state", json_pack("{s:s}", "host", a->host),
                    (int)nb_conf_int("agent", "rpc_timeout_ms", 30000));
    if (!r || !json_is_object(r) || json_object_get(r, "error")) {
        /* once per outage at WARNING (the control side may not be up yet) */
        nb_log(a->fetch_failing ? NB_LOG_DEBUG : NB_LOG_WARNING, LOG_NA, ctx, NULL,
               "get_host_state for host %s failed: %s", a->host,
               r ? nb_json_str(r, "error") ? nb_json_str(r, "error") : "not an object"
                 : nb_ctx_message(ctx));
        json_decref(r);
        nb_ctx_clear_error(ctx);
        a->fetch_failing = true;
        return NULL;
    }
    if (a->fetch_failing)
        NB_INFO(LOG_NA, ctx, NULL, "get_host_state for host %s answered again", a->host);
    a->fetch_failing = false;
    return r;
}

/* After a fresh state: what the control side knows of each compute port
 * (ACTIVE = up, DOWN = down, anything else: to be reported). DHCP and
 * router legs keep what was reported by this run of the agent. */
static void learn_statuses(struct na *a, const json_t *state)
{
    size_t i;
    json_t *p;
    json_array_foreach (json_object_get(state, "ports"), i, p) {
        const char *id = nb_json_str(p, "id"), *st = nb_json_str(p, "status");
        if (!id)
            continue;
        if (st && !strcmp(st, "ACTIVE"))
            json_object_set_new(a->reported, id, json_true());
        else if (st && !strcmp(st, "DOWN"))
            json_object_set_new(a->reported, id, json_false());
        else
            json_object_del(a->reported, id);
    }
}

/* True if port id of state is being live-migrated (its device comes and
 * goes on both hosts: the migration reports it). */
static bool migrating(const json_t *state, const char *id)
{
    size_t i;
    json_t *p;
    json_array_foreach (json_object_get(state, "ports"), i, p)
        if (!strcmp(nb_json_str(p, "id") ? nb_json_str(p, "id") : "", id))
            return json_object_get(p, "migrating_to") &&
                   !json_is_null(json_object_get(p, "migrating_to"));
    return false;
}

/* Scans the devices and reports the changes (and the failed ports). */
static void scan_devices(struct na *a, struct nb_ctx *ctx)
{
    json_t *up = NULL, *down = NULL;
    if (na_l2_devices(a, ctx, a->state, &up, &down) < 0) {
        NB_WARN(LOG_NA, ctx, NULL, "device scan failed: %s", nb_ctx_message(ctx));
        nb_ctx_clear_error(ctx);
        json_decref(up);
        json_decref(down);
        return;
    }
    /* before a port is up for the first time: is its address in use? */
    na_dad_check(a, ctx, a->state, up);
    json_t *send_up = json_array(), *send_down = json_array(), *send_failed = json_array();
    size_t i;
    json_t *v;
    json_array_foreach (up, i, v) {
        const char *id = json_string_value(v);
        if (json_object_get(a->failed, id))
            continue;
        if (!json_is_true(json_object_get(a->reported, id)))
            json_array_append(send_up, v);
    }
    json_array_foreach (down, i, v) {
        const char *id = json_string_value(v);
        if (json_object_get(a->failed, id) || migrating(a->state, id))
            continue;
        if (!json_is_false(json_object_get(a->reported, id)))
            json_array_append(send_down, v);
    }
    const char *id;
    json_object_foreach (a->failed, id, v) {
        if (!json_is_string(json_object_get(a->reported, id)) ||
            strcmp(json_string_value(json_object_get(a->reported, id)), json_string_value(v)))
            json_array_append_new(send_failed, json_pack("{s:s, s:O}", "port_id", id, "reason", v));
    }
    json_decref(up);
    json_decref(down);
    if (!json_array_size(send_up) && !json_array_size(send_down) && !json_array_size(send_failed)) {
        json_decref(send_up);
        json_decref(send_down);
        json_decref(send_failed);
        return;
    }
    json_t *args = json_pack("{s:s, s:O, s:O, s:O}", "host", a->host, "devices_up", send_up,
                             "devices_down", send_down, "devices_failed", send_failed);
    json_t *r = nb_bus_call(ctx, PLUGIN_TOPIC, "update_device_list", args,
                            (int)nb_conf_int("agent", "rpc_timeout_ms", 30000));
    if (!r || json_object_get(r, "error")) {
        NB_WARN(LOG_NA, ctx, NULL, "update_device_list failed: %s",
                r ? nb_json_str(r, "error") : nb_ctx_message(ctx));
        nb_ctx_clear_error(ctx);
    } else {
        NB_INFO(LOG_NA, ctx, NULL, "Reported devices of host %s: %zu up, %zu down, %zu failed",
                a->host, json_array_size(send_up), json_array_size(send_down),
                json_array_size(send_failed));
        json_array_foreach (send_up, i, v)
            json_object_set_new(a->reported, json_string_value(v), json_true());
        json_array_foreach (send_down, i, v)
            json_object_set_new(a->reported, json_string_value(v), json_false());
        json_array_foreach (send_failed, i, v)
            json_object_set(a->reported, nb_json_str(v, "port_id"), json_object_get(v, "reason"));
    }
    json_decref(r);
    json_decref(send_up);
    json_decref(send_down);
    json_decref(send_failed);
}

/* Fetches and reconciles. 0, or -1 when no state could be fetched. */
static int resync(struct na *a, const char *reason)
{
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    json_t *state = fetch_state(a, &ctx);
    if (!state)
        return -1;
    double t0 = nb_time_mono();
    json_decref(a->state);
    a->state = state;
    learn_statuses(a, state);
    int failed = na_reconcile(a, &ctx, state);
    nb_ctx_clear_error(&ctx);
    NB_DEBUG(LOG_NA, &ctx, NULL,
             "Reconciled host %s (%s): %zu networks, %zu ports, %zu routers, %d phases failed, "
             "%.3f s",
             a->host, reason, json_array_size(json_object_get(state, "networks")),
             json_array_size(json_object_get(state, "ports")),
             json_array_size(json_object_get(state, "routers")), failed, nb_time_mono() - t0);
    scan_devices(a, &ctx);
    return 0;
}

static double conf_seconds(const char *key, double def)
{
    double v = nb_conf_double("agent", key, def);
    return v > 0 ? v : def;
}

static void *na_main(void *arg)
{
    struct na *a = arg;
    double report = conf_seconds("report_interval", 30),
           resync_s = conf_seconds("resync_interval", 10),
           poll_s = conf_seconds("polling_interval", 1);
    double next_report = 0, next_resync = 0, next_poll = 0;
    bool start_flag = true;
    pthread_mutex_lock(&a->lock);
    while (!a->stop) {
        bool dirty = a->dirty;
        char reason[256];
        nb_strlcpy(reason, dirty ? a->reason : "periodic resync", sizeof(reason));
        a->dirty = false;
        pthread_mutex_unlock(&a->lock);

        double now = nb_time_mono();
        if (now >= next_report) {
            if (report_states(a, start_flag) == 0)
                start_flag = false;
            next_report = now + (start_flag ? 2 : report);
        }
        if (dirty || now >= next_resync) {
            int rc = resync(a, reason);
            now = nb_time_mono();
            next_resync = now + (rc == 0 ? resync_s : 2);
            next_poll = now + poll_s;
        } else if (now >= next_poll && a->state) {
            struct nb_ctx ctx;
            nb_ctx_init_system(&ctx, NULL);
            scan_devices(a, &ctx);
            next_poll = nb_time_mono() + poll_s;
        }

        pthread_mutex_lock(&a->lock);
        if (a->stop || a->dirty)
            continue;
        double wake = next_report < next_resync ? next_report : next_resync;
        if (a->state && next_poll < wake)
            wake = next_poll;
        double wait = wake - nb_time_mono();
        if (wait <= 0)
            continue;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        long ns = ts.tv_nsec + (long)(wait * 1e9);
        ts.tv_sec += ns / 1000000000L;
        ts.tv_nsec = ns % 1000000000L;
        pthread_cond_timedwait(&a->cond, &a->lock, &ts);
    }
    pthread_mutex_unlock(&a->lock);
    return NULL;
}

/* host_state_changed {"reason"}: fetch again (bursts coalesce into the
 * flag). */
static json_t *on_state_changed(void *opaque, struct nb_ctx *ctx, const char *method, json_t *args)
{
    struct na *a = opaque;
    NB_DEBUG(LOG_NA, ctx, NULL, "host_state_changed on %s: %s", a->host,
             nb_json_str(args, "reason") ? nb_json_str(args, "reason") : "-");
    pthread_mutex_lock(&a->lock);
    a->dirty = true;
    snprintf(a->reason, sizeof(a->reason), "%s",
             nb_json_str(args, "reason") ? nb_json_str(args, "reason") : "notified");
    pthread_cond_signal(&a->cond);
    pthread_mutex_unlock(&a->lock);
    return NULL;
}

static const struct nb_bus_method notifier_methods[] = {
    {"host_state_changed", NB_BUS_CAST, on_state_changed},
    {NULL, 0, NULL},
};
static const struct nb_bus_service notifier_service = {
    .role = "network agent", .logger = LOG_NA, .methods = notifier_methods};

static json_t *notifier_handle(void *opaque, struct nb_ctx *ctx, const char *method, json_t *args)
{
    return nb_bus_dispatch(&notifier_service, opaque, ctx, method, args);
}

int nb_netagent_start(struct nb_env *env, const char *host)
{
    if (!host || !*host) {
        NB_ERROR(LOG_NA, NULL, NULL, "a network agent needs a host name");
        return -1;
    }
    char dir[1100];
    snprintf(dir, sizeof(dir), "%s/network-agent/%s", env->state_path, host);
    struct na *a = na_new(host, dir);
    if (!a)
        return -1;
    a->env = env;
    if (nb_bus_listen(a->topic, notifier_handle, a, 1) < 0) {
        NB_ERROR(LOG_NA, NULL, NULL, "cannot listen on topic %s", a->topic);
        na_free(a);
        return -1;
    }
    if (pthread_create(&a->thread, NULL, na_main, a) != 0) {
        NB_ERROR(LOG_NA, NULL, NULL, "cannot start the network agent's thread");
        return -1; /* the listener keeps a: not freed */
    }
    a->running = true;
    pthread_mutex_lock(&agents_lock);
    a->next = agents;
    agents = a;
    pthread_mutex_unlock(&agents_lock);
    NB_INFO(LOG_NA, NULL, NULL, "Network agent for host %s started (state in %s, tag %s)", host,
            dir, a->tag);
    return 0;
}

void nb_netagent_stop(void)
{
    pthread_mutex_lock(&agents_lock);
    struct na *list = agents;
    pthread_mutex_unlock(&agents_lock);
    for (struct na *a = list; a; a = a->next) {
        pthread_mutex_lock(&a->lock);
        bool running = a->running;
        a->stop = true;
        a->running = false;
        pthread_cond_broadcast(&a->cond);
        pthread_mutex_unlock(&a->lock);
        if (running)
            pthread_join(a->thread, NULL);
    }
    /* The metadata proxies live in this process: their sockets close
     * with the agents (the rest of the data plane stays). */
    na_mdproxy_stop_all();
    /* The agents stay allocated: the bus may still deliver a notification
     * to a stopped one until it shuts down. */
}
