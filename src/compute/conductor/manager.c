/* manager.c - the conductor role: the "conductor" topic's dispatcher and
 * the role's start. The instance helpers the workflows share are in
 * helpers.c (helpers.h).
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
#include "db/db.h"
#include "placement/placement.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
