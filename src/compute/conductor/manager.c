/* manager.c - the conductor role: bus dispatch and the instance helpers the
 * workflows share (see internal.h for the concurrency rule they follow).
 *
 * Workflows live next door: build.c (schedule, the build steps, reschedule),
 * actions.c (start/stop/reboot/pause/unpause/suspend/resume/delete and power
 * sync), volumes.c (block device mappings: build step, attach, detach,
 * cleanup, disk-format reconciliation), snapshot.c (createImage), hosts.c
 * (service and compute node records for the agents), recovery.c (after a
 * restart). */
#include "bus/bus.h"
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "compute/compute.h"
#include "compute/conductor/conductor.h"
#include "compute/conductor/internal.h"
#include "compute/objects/instance.h"
#include "db/db.h"
#include "placement/placement.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cond_clear_error(struct nb_ctx *ctx)
{
    ctx->err_status = 0;
    ctx->err_name[0] = '\0';
    ctx->err_msg[0] = '\0';
}

json_t *cond_instance_get(struct conductor *c, struct nb_ctx *ctx, const char *uuid)
{
    json_t *row =
        uuid ? nb_db_row(c->db, ctx, "SELECT * FROM instances WHERE uuid = ?", "s", uuid) : NULL;
    cond_clear_error(ctx);
    return row;
}

json_t *cond_instance_for_agent(struct conductor *c, struct nb_ctx *ctx, json_t *row)
{
    json_t *inst = nb_instance_agent_view(c->db, ctx, row);
    cond_clear_error(ctx);
    return inst;
}

void cond_event_start(struct conductor *c, struct nb_ctx *ctx, const char *uuid, const char *event,
                      const char *host)
{
    if (nb_event_start(c->db, ctx, uuid, event, host) < 0) {
        NB_WARN(LOG_COND, ctx, uuid, "could not record the start of event %s: %s", event,
                ctx->err_msg);
        cond_clear_error(ctx);
    }
}

void cond_event_finish(struct conductor *c, struct nb_ctx *ctx, const char *uuid, const char *event,
                       bool ok, const char *details)
{
    if (nb_event_finish(c->db, ctx, uuid, event, ok ? "Success" : "Error", ok ? NULL : details,
                        details) < 0) {
        NB_WARN(LOG_COND, ctx, uuid, "could not record the end of event %s: %s", event,
                ctx->err_msg);
        cond_clear_error(ctx);
    }
}

void cond_fault(struct conductor *c, struct nb_ctx *ctx, const char *uuid, int code,
                const char *message, const char *details, const char *host)
{
    if (nb_fault_add(c->db, ctx, uuid, code, message, details, host) < 0) {
        NB_ERROR(LOG_COND, ctx, uuid, "could not record fault '%s': %s", message, ctx->err_msg);
        cond_clear_error(ctx);
    }
}

int cond_local_delete(struct conductor *c, struct nb_ctx *ctx, const char *uuid)
{
    /* The guest is gone (or never was): its volumes are let go first, as
     * Nova's _shutdown_instance / _cleanup_volumes, while the mappings still
     * say which they are. */
    cond_cleanup_volumes(c, ctx, uuid);
    /* Its ports too (Nova's _try_deallocate_network), before the row is
     * deleted: a crash in between leaves a delete that is run again. */
    cond_deallocate_networks(c, ctx, uuid);
    int n = nb_instance_destroy(c->db, ctx, uuid, false, true);
    if (n < 0) {
        NB_ERROR(LOG_COND, ctx, uuid, "could not delete the instance record: %s", ctx->err_msg);
        return -1;
    }
    /* After the commit: a crash in between leaves an allocation of a deleted
     * instance, which recovery releases. */
    if (nb_placement_delete_allocations(ctx, uuid) < 0) {
        NB_ERROR(LOG_COND, ctx, uuid, "could not release the allocations: %s", ctx->err_msg);
        cond_clear_error(ctx);
    }
    if (n > 0) {
        nb_action_finish(c->db, ctx, uuid, NULL);
        cond_clear_error(ctx);
        NB_INFO(LOG_COND, ctx, uuid, "Instance deleted and its allocations released");
    }
    return 0;
}

int cond_cast_compute(struct conductor *c, struct nb_ctx *ctx, const char *host, const char *method,
                      json_t *args)
{
    (void)c;
    char topic[300];
    snprintf(topic, sizeof(topic), "compute.%s", host);
    return nb_bus_cast(ctx, topic, method, args);
}

static json_t *handle(void *opaque, struct nb_ctx *ctx, const char *method, json_t *args)
{
    struct conductor *c = opaque;
    if (!strcmp(method, "build_instances")) {
        size_t i;
        json_t *u;
        json_array_foreach (json_object_get(args, "instance_uuids"), i, u) {
            if (json_is_string(u))
                cond_build_instance(c, ctx, json_string_value(u));
        }
        return NULL;
    }
    if (!strcmp(method, "build_result")) {
        cond_build_result(c, ctx, args);
        return NULL;
    }
    if (!strcmp(method, "start_instance") || !strcmp(method, "stop_instance") ||
        !strcmp(method, "reboot_instance") || !strcmp(method, "pause_instance") ||
        !strcmp(method, "unpause_instance") || !strcmp(method, "suspend_instance") ||
        !strcmp(method, "resume_instance")) {
        cond_power_action(c, ctx, method, args);
        return NULL;
    }
    if (!strcmp(method, "delete_instance")) {
        cond_delete_instance(c, ctx, nb_json_str(args, "uuid"));
        return NULL;
    }
    if (!strcmp(method, "op_result")) {
        cond_op_result(c, ctx, args);
        return NULL;
    }
    if (!strcmp(method, "attach_volume")) {
        cond_attach_volume(c, ctx, args);
        return NULL;
    }
    if (!strcmp(method, "attach_result")) {
        cond_attach_result(c, ctx, args);
        return NULL;
    }
    if (!strcmp(method, "detach_volume")) {
        cond_detach_volume(c, ctx, args);
        return NULL;
    }
    if (!strcmp(method, "detach_result")) {
        cond_detach_result(c, ctx, args);
        return NULL;
    }
    if (!strcmp(method, "snapshot_instance")) {
        cond_snapshot_instance(c, ctx, args);
        return NULL;
    }
    if (!strcmp(method, "snapshot_result")) {
        cond_snapshot_result(c, ctx, args);
        return NULL;
    }
    if (!strcmp(method, "reconcile_disk_format"))
        return cond_reconcile_disk_format(c, ctx, args);
    if (!strcmp(method, "power_sync")) {
        cond_power_sync(c, ctx, args);
        return NULL;
    }
    if (!strcmp(method, "service_update"))
        return cond_service_update(c, ctx, args);
    if (!strcmp(method, "compute_node_update"))
        return cond_compute_node_update(c, ctx, args);
    if (!strcmp(method, "service_heartbeat")) {
        cond_service_heartbeat(c, ctx, args);
        return NULL;
    }
    if (!strcmp(method, "instances_on_host"))
        return cond_instances_on_host(c, ctx, args);
    if (!strcmp(method, "ping"))
        return json_pack("{s:b}", "ok", 1);
    NB_ERROR(LOG_COND, ctx, NULL, "unknown conductor method %s", method);
    return json_pack("{s:s}", "error", "unknown method");
}

int nb_conductor_start(struct nb_env *env)
{
    if (!env->db) {
        NB_ERROR(LOG_COND, NULL, NULL, "the conductor needs database access");
        return -1;
    }
    struct conductor *c = calloc(1, sizeof(*c));
    c->env = env;
    c->db = env->db;
    c->max_attempts = (int)nb_conf_int("scheduler", "max_attempts", 3);
    if (c->max_attempts < 1)
        c->max_attempts = 1;
    c->call_timeout_ms = (int)nb_conf_int("DEFAULT", "rpc_response_timeout", 60) * 1000;
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    c->last_id_at_start = nb_db_int(c->db, &ctx, 0, "SELECT MAX(id) FROM instances", "");
    if (nb_bus_listen("conductor", handle, c, (int)nb_conf_int("conductor", "workers", 8)) < 0) {
        NB_ERROR(LOG_COND, NULL, NULL, "cannot listen on topic conductor");
        free(c);
        return -1;
    }
    NB_INFO(LOG_COND, NULL, NULL, "conductor started (max_attempts %d)", c->max_attempts);
    cond_recover_start(c);
    return 0;
}
