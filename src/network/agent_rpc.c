/* agent_rpc.c - the network service's side of its agents' RPC, Neutron's
 * plugin topic "q-plugin" (network/agent/netagent.h gives the messages):
 *   report_state (cast)  upserts the agent's row and heartbeat; an agent
 *                        that is new, restarted or alive again triggers
 *                        scheduling and a notification of the hosts;
 *   get_host_state       the host's desired state (host_state.c);
 *   update_device_list   port statuses: up ACTIVE, down DOWN, failed ERROR
 *                        with the reason kept (ports.status_reason);
 *   update_floatingip_statuses  a stub until floating IPs exist (h/l3).
 * Started in the process that serves the Networking API (it has the
 * database). */
#include "bus/bus.h"
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "db/db.h"
#include "compute/rpc/compute_api.h"
#include "network/ml2_int.h"
#include "network/network.h"
#include "network/network_int.h"

#include <string.h>

#define LOG "nubo.network.rpc"
#define DB nb_net_env->db

/* A Linux bridge agent (re)appeared on host: the ports bound there before
 * (to no data plane, or while it was dead) are bound again, as ML2 retries
 * a failed binding: "bridge", DOWN until the agent reports them up. */
static void rebind_host(struct nb_ctx *ctx, const char *host)
{
    char now[32];
    int n = nb_db_exec(DB, ctx,
                       "UPDATE ports SET binding_vif_type = 'bridge', status = 'DOWN', updated_at "
                       "= ? WHERE binding_host_id = ? AND binding_vif_type IN ('ovs', "
                       "'binding_failed')",
                       "ss", nb_net_now(now), host);
    if (n > 0)
        NB_INFO(LOG, ctx, NULL, "%d port(s) of host %s bound to its Linux bridge agent", n, host);
}

static json_t *report_state(void *opaque, struct nb_ctx *ctx, const char *method, json_t *args)
{
    (void)opaque, (void)method;
    struct nb_ctx sys;
    nb_ctx_init_system(&sys, ctx->request_id);
    bool revived = false;
    _cleanup_json_ json_t *row = nb_agent_report(&sys, json_object_get(args, "agent"), &revived);
    if (!row) {
        NB_WARN(LOG, &sys, NULL, "report_state refused: %s", nb_ctx_message(&sys));
        return NULL;
    }
    /* A new or revived agent, or one that took a dead one's place: the
     * schedule may change; the hosts fetch again (notify runs it). */
    if (revived && !strcmp(nb_json_str(row, "agent_type"), NB_AGENT_LINUXBRIDGE))
        rebind_host(&sys, nb_json_str(row, "host"));
    if (revived) {
        nb_net_notify_reset(nb_json_str(row, "host"));
        nb_net_notify(&sys, "agent started");
    } else if (nb_sched_run(&sys) > 0)
        nb_net_notify(&sys, "rescheduled");
    return NULL;
}

static json_t *get_host_state(void *opaque, struct nb_ctx *ctx, const char *method, json_t *args)
{
    (void)opaque, (void)method;
    struct nb_ctx sys;
    nb_ctx_init_system(&sys, ctx->request_id);
    json_t *state = nb_host_state(&sys, nb_json_str(args, "host"));
    if (!state)
        return json_pack("{s:s}", "error", nb_ctx_message(&sys));
    return state;
}

/* Sets status on the ports of ids bound to host whose status differs;
 * returns the ids changed. */
static json_t *set_status(struct nb_ctx *ctx, const char *host, const json_t *ids,
                          const char *status)
{
    json_t *changed = json_array();
    char now[32];
    nb_net_now(now);
    size_t i;
    json_t *id;
    json_array_foreach (ids, i, id) {
        if (!json_is_string(id))
            continue;
        int n = nb_db_exec(DB, ctx,
                           "UPDATE ports SET status = ?, status_reason = NULL, updated_at = ? "
                           "WHERE id = ? AND binding_host_id = ? AND status != ?",
                           "sssss", status, now, json_string_value(id), host, status);
        if (n > 0)
            json_array_append(changed, id);
    }
    return changed;
}

/* Neutron's Nova notifier: a compute port that went ACTIVE (DOWN) is a
 * network-vif-plugged (-unplugged) event for its server, sent to the
 * server's host as os-server-external-events sends it, so the libvirt
 * driver's wait for the port ends at once. */
static void notify_compute(struct nb_ctx *ctx, const char *host, const json_t *ids,
                           const char *event)
{
    _cleanup_json_ json_t *events = json_array();
    size_t i;
    json_t *id;
    json_array_foreach (ids, i, id) {
        _cleanup_json_ json_t *row =
            nb_db_row(DB, ctx, "SELECT device_id, device_owner FROM ports WHERE id = ?", "s",
                      json_string_value(id));
        const char *owner = nb_json_str(row, "device_owner"), *dev = nb_json_str(row, "device_id");
        if (!owner || strncmp(owner, "compute:", 8) || !dev || !*dev)
            continue;
        json_array_append_new(events,
                              json_pack("{s:s, s:s, s:s, s:O}", "name", event, "server_uuid", dev,
                                        "status", "completed", "tag", id));
    }
    nb_ctx_clear_error(ctx);
    if (json_array_size(events) &&
        nb_compute_external_instance_event(ctx, host, json_incref(events)) < 0) {
        NB_WARN(LOG, ctx, NULL, "cannot send %s for %zu port(s) to host %s: %s", event,
                json_array_size(events), host, nb_ctx_message(ctx));
        nb_ctx_clear_error(ctx);
    }
}

static json_t *update_device_list(void *opaque, struct nb_ctx *ctx, const char *method,
                                  json_t *args)
{
    (void)opaque, (void)method;
    struct nb_ctx sys;
    nb_ctx_init_system(&sys, ctx->request_id);
    const char *host = nb_json_str(args, "host");
    if (!host)
        return json_pack("{s:s}", "error", "host required");
    json_t *up = set_status(&sys, host, json_object_get(args, "devices_up"), "ACTIVE");
    json_t *down = set_status(&sys, host, json_object_get(args, "devices_down"), "DOWN");
    size_t i;
    json_t *f;
    char now[32];
    nb_net_now(now);
    json_array_foreach (json_object_get(args, "devices_failed"), i, f) {
        const char *id = nb_json_str(f, "port_id"), *why = nb_json_str(f, "reason");
        if (id && nb_db_exec(DB, &sys,
                             "UPDATE ports SET status = 'ERROR', status_reason = ?, updated_at = "
                             "? WHERE id = ? AND binding_host_id = ? AND (status != 'ERROR' OR "
                             "COALESCE(status_reason, '') != ?)",
                             "sssss", why ? why : "", now, id, host, why ? why : "") > 0)
            NB_WARN(LOG, &sys, NULL, "port %s on host %s failed: %s", id, host, why ? why : "");
    }
    if (json_array_size(up) || json_array_size(down))
        NB_INFO(LOG, &sys, NULL, "host %s: %zu port(s) up, %zu down", host, json_array_size(up),
                json_array_size(down));
    notify_compute(&sys, host, up, "network-vif-plugged");
    notify_compute(&sys, host, down, "network-vif-unplugged");
    return json_pack("{s:o, s:o}", "devices_up", up, "devices_down", down);
}

/* {"statuses": {port id: {"status", "status_reason"}}} for the ports of
 * args["port_ids"] that exist: what the libvirt driver waits on before it
 * reports a guest running (nb_vif_wait_active). */
static json_t *get_port_statuses(void *opaque, struct nb_ctx *ctx, const char *method, json_t *args)
{
    (void)opaque, (void)method;
    struct nb_ctx sys;
    nb_ctx_init_system(&sys, ctx->request_id);
    json_t *out = json_object();
    size_t i;
    json_t *id;
    json_array_foreach (json_object_get(args, "port_ids"), i, id) {
        if (!json_is_string(id))
            continue;
        json_t *row = nb_db_row(DB, &sys, "SELECT status, status_reason FROM ports WHERE id = ?",
                                "s", json_string_value(id));
        if (row && json_is_object(row))
            json_object_set_new(out, json_string_value(id), row);
        else
            json_decref(row);
        nb_ctx_clear_error(&sys);
    }
    return json_pack("{s:o}", "statuses", out);
}

/* The floating IPs' file answers it when linked in (floatingips.c). */
json_t *nb_net_rpc_update_floatingip_statuses(void *opaque, struct nb_ctx *ctx, const char *method,
                                              json_t *args) __attribute__((weak));

static json_t *update_floatingip_statuses(void *opaque, struct nb_ctx *ctx, const char *method,
                                          json_t *args)
{
    if (nb_net_rpc_update_floatingip_statuses) {
        struct nb_ctx sys;
        nb_ctx_init_system(&sys, ctx->request_id);
        return nb_net_rpc_update_floatingip_statuses(opaque, &sys, method, args);
    }
    return json_pack("{s:i}", "updated", 0);
}

static const struct nb_bus_method methods[] = {
    {"report_state", NB_BUS_CAST, report_state},
    {"get_host_state", NB_BUS_CALL, get_host_state},
    {"update_device_list", NB_BUS_CALL, update_device_list},
    {"get_port_statuses", NB_BUS_CALL, get_port_statuses},
    {"update_floatingip_statuses", NB_BUS_CALL, update_floatingip_statuses},
    {NULL, 0, NULL},
};

static const struct nb_bus_service service = {"q-plugin", LOG, methods};

static json_t *handle(void *opaque, struct nb_ctx *ctx, const char *method, json_t *args)
{
    return nb_bus_dispatch(&service, opaque, ctx, method, args);
}

int nb_network_rpc_start(struct nb_env *env)
{
    if (!env->db) {
        NB_ERROR(LOG, NULL, NULL, "the network service's RPC needs database access");
        return -1;
    }
    nb_net_env = env;
    if (nb_bus_listen("q-plugin", handle, NULL, (int)nb_conf_int("network", "rpc_workers", 4)) <
        0) {
        NB_ERROR(LOG, NULL, NULL, "cannot listen on topic q-plugin");
        return -1;
    }
    NB_INFO(LOG, NULL, NULL, "listening on topic q-plugin");
    return 0;
}
