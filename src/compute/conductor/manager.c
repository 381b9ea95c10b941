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
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "compute/conductor/conductor.h"
#include "compute/conductor/internal.h"
#include "compute/conductor/live_migrate.h"
#include "compute/rpc/conductor_api.h"
#include "db/db.h"

#include <stdlib.h>

/* The workflows' entry points as bus handlers (the bus passes the
 * conductor as opaque). */
#define CAST_TO(name, fn)                                                                          \
    static json_t *name(void *c, struct nb_ctx *ctx, const char *method, json_t *args)             \
    {                                                                                              \
        (void)method;                                                                              \
        fn(c, ctx, args);                                                                          \
        return NULL;                                                                               \
    }
#define CALL_TO(name, fn)                                                                          \
    static json_t *name(void *c, struct nb_ctx *ctx, const char *method, json_t *args)             \
    {                                                                                              \
        (void)method;                                                                              \
        return fn(c, ctx, args);                                                                   \
    }

static json_t *build_instances(void *c, struct nb_ctx *ctx, const char *method, json_t *args)
{
    (void)method;
    size_t i;
    json_t *u;
    json_array_foreach (json_object_get(args, "instance_uuids"), i, u) {
        if (json_is_string(u))
            cond_build_instance(c, ctx, json_string_value(u));
    }
    return NULL;
}

static json_t *power_action(void *c, struct nb_ctx *ctx, const char *method, json_t *args)
{
    cond_power_action(c, ctx, method, args);
    return NULL;
}

static json_t *delete_instance(void *c, struct nb_ctx *ctx, const char *method, json_t *args)
{
    (void)method;
    cond_delete_instance(c, ctx, nb_json_str(args, "uuid"));
    return NULL;
}

static json_t *ping(void *c, struct nb_ctx *ctx, const char *method, json_t *args)
{
    (void)c, (void)ctx, (void)method, (void)args;
    return json_pack("{s:b}", "ok", 1);
}

CAST_TO(build_result, cond_build_result)
CAST_TO(op_result, cond_op_result)
CAST_TO(attach_volume, cond_attach_volume)
CAST_TO(attach_result, cond_attach_result)
CAST_TO(detach_volume, cond_detach_volume)
CAST_TO(detach_result, cond_detach_result)
CAST_TO(snapshot_instance, cond_snapshot_instance)
CAST_TO(snapshot_result, cond_snapshot_result)
CAST_TO(power_sync, cond_power_sync)
CAST_TO(migrate_server, cond_migrate_server)
CAST_TO(confirm_resize, cond_confirm_resize)
CAST_TO(revert_resize, cond_revert_resize)
CAST_TO(service_heartbeat, cond_service_heartbeat)
CAST_TO(rebuild_instance, cond_rebuild_instance)
CAST_TO(rebuild_result, cond_rebuild_result)
CAST_TO(evacuation_cleaned, cond_evacuation_cleaned)
CALL_TO(evacuated_instances, cond_evacuated_instances)
CALL_TO(reconcile_disk_format, cond_reconcile_disk_format)
CALL_TO(service_update, cond_service_update)
CALL_TO(compute_node_update, cond_compute_node_update)
CALL_TO(instances_on_host, cond_instances_on_host)
CAST_TO(live_migrate_instance, cond_live_migrate_instance)
CALL_TO(check_live_migration, cond_check_live_migration)
CALL_TO(live_migration_status, cond_live_migration_status)
CAST_TO(live_migration_result, cond_live_migration_result)
CAST_TO(live_migration_abort, cond_live_migration_abort)
CAST_TO(live_migration_force_complete, cond_live_migration_force_complete)

/* The methods of topic "conductor" (the messages: conductor_api.h).
 * compute_node_update is a call at registration and a cast for usage
 * reports: as a call its reply goes back, a cast's is dropped by the bus. */
static const struct nb_bus_method methods[] = {
    {NB_CONDUCTOR_BUILD_INSTANCES, NB_BUS_CAST, build_instances},
    {NB_CONDUCTOR_START_INSTANCE, NB_BUS_CAST, power_action},
    {NB_CONDUCTOR_STOP_INSTANCE, NB_BUS_CAST, power_action},
    {NB_CONDUCTOR_REBOOT_INSTANCE, NB_BUS_CAST, power_action},
    {NB_CONDUCTOR_PAUSE_INSTANCE, NB_BUS_CAST, power_action},
    {NB_CONDUCTOR_UNPAUSE_INSTANCE, NB_BUS_CAST, power_action},
    {NB_CONDUCTOR_SUSPEND_INSTANCE, NB_BUS_CAST, power_action},
    {NB_CONDUCTOR_RESUME_INSTANCE, NB_BUS_CAST, power_action},
    {NB_CONDUCTOR_DELETE_INSTANCE, NB_BUS_CAST, delete_instance},
    {NB_CONDUCTOR_ATTACH_VOLUME, NB_BUS_CAST, attach_volume},
    {NB_CONDUCTOR_DETACH_VOLUME, NB_BUS_CAST, detach_volume},
    {NB_CONDUCTOR_SNAPSHOT_INSTANCE, NB_BUS_CAST, snapshot_instance},
    {NB_CONDUCTOR_MIGRATE_SERVER, NB_BUS_CAST, migrate_server},
    {NB_CONDUCTOR_CONFIRM_RESIZE, NB_BUS_CAST, confirm_resize},
    {NB_CONDUCTOR_REVERT_RESIZE, NB_BUS_CAST, revert_resize},
    {NB_CONDUCTOR_BUILD_RESULT, NB_BUS_CAST, build_result},
    {NB_CONDUCTOR_OP_RESULT, NB_BUS_CAST, op_result},
    {NB_CONDUCTOR_ATTACH_RESULT, NB_BUS_CAST, attach_result},
    {NB_CONDUCTOR_DETACH_RESULT, NB_BUS_CAST, detach_result},
    {NB_CONDUCTOR_SNAPSHOT_RESULT, NB_BUS_CAST, snapshot_result},
    {NB_CONDUCTOR_RECONCILE_DISK_FORMAT, NB_BUS_CALL, reconcile_disk_format},
    {NB_CONDUCTOR_POWER_SYNC, NB_BUS_CAST, power_sync},
    {NB_CONDUCTOR_SERVICE_UPDATE, NB_BUS_CALL, service_update},
    {NB_CONDUCTOR_COMPUTE_NODE_UPDATE, NB_BUS_CALL, compute_node_update},
    {NB_CONDUCTOR_SERVICE_HEARTBEAT, NB_BUS_CAST, service_heartbeat},
    {NB_CONDUCTOR_INSTANCES_ON_HOST, NB_BUS_CALL, instances_on_host},
    {NB_CONDUCTOR_REBUILD_INSTANCE, NB_BUS_CAST, rebuild_instance},
    {NB_CONDUCTOR_REBUILD_RESULT, NB_BUS_CAST, rebuild_result},
    {NB_CONDUCTOR_EVACUATED_INSTANCES, NB_BUS_CALL, evacuated_instances},
    {NB_CONDUCTOR_EVACUATION_CLEANED, NB_BUS_CAST, evacuation_cleaned},
    {NB_CONDUCTOR_PING, NB_BUS_CALL, ping},
    {NB_CONDUCTOR_LIVE_MIGRATE_INSTANCE, NB_BUS_CAST, live_migrate_instance},
    {NB_CONDUCTOR_CHECK_LIVE_MIGRATION, NB_BUS_CALL, check_live_migration},
    {NB_CONDUCTOR_LIVE_MIGRATION_STATUS, NB_BUS_CALL, live_migration_status},
    {NB_CONDUCTOR_LIVE_MIGRATION_RESULT, NB_BUS_CAST, live_migration_result},
    {NB_CONDUCTOR_LIVE_MIGRATION_ABORT, NB_BUS_CAST, live_migration_abort},
    {NB_CONDUCTOR_LIVE_MIGRATION_FORCE_COMPLETE, NB_BUS_CAST, live_migration_force_complete},
    {NULL, 0, NULL},
};

static const struct nb_bus_service service = {"conductor", LOG_COND, methods};

static json_t *handle(void *opaque, struct nb_ctx *ctx, const char *method, json_t *args)
{
    cond_leases_own(opaque, args);
    return nb_bus_dispatch(&service, opaque, ctx, method, args);
}

static struct conductor *running; /* for nb_conductor_stop */

void nb_conductor_stop(void)
{
    cond_builds_later_stop();
    if (running)
        cond_leases_stop(running);
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
    c->last_bdm_id_at_start =
        nb_db_int(c->db, &ctx, 0, "SELECT MAX(id) FROM block_device_mapping", "");
    if (cond_leases_start(c) < 0) {
        free(c);
        return -1;
    }
    if (nb_bus_listen(NB_CONDUCTOR_TOPIC, handle, c, (int)nb_conf_int("conductor", "workers", 8)) <
        0) {
        NB_ERROR(LOG_COND, NULL, NULL, "cannot listen on topic conductor");
        cond_leases_stop(c);
        return -1;
    }
    if (nb_bus_listen(NB_CONDUCTOR_HEARTBEAT_TOPIC, handle, c, 1) < 0) {
        NB_ERROR(LOG_COND, NULL, NULL, "cannot listen on topic %s", NB_CONDUCTOR_HEARTBEAT_TOPIC);
        cond_leases_stop(c);
        return -1;
    }
    running = c;
    NB_INFO(LOG_COND, NULL, NULL, "conductor started (max_attempts %d)", c->max_attempts);
    cond_recover_start(c);
    cond_resize_confirm_start(c);
    cond_audit_start(c);
    return 0;
}
