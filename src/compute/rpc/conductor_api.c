/* conductor_api.c - the client of topic "conductor" (see conductor_api.h). */
#include "compute/rpc/conductor_api.h"
#include "compute/rpc/power_methods.h"
#include "bus/bus.h"
#include "common/log.h"

#define LOG_RPC "nubo.conductor.rpcapi"

static int cast(struct nb_ctx *ctx, const char *method, json_t *args)
{
    return nb_bus_cast(ctx, NB_CONDUCTOR_TOPIC, method, args);
}

/* How long a compute host keeps trying to send a result the conductor
 * must get (the instance waits in its task state for it): a broker down
 * for minutes, as RabbitMQ is during an upgrade. */
#define RESULT_SEND_S 600

/* A result for the conductor: sent until it arrives (nb_bus_cast_until_sent). */
static int report(struct nb_ctx *ctx, const char *method, json_t *args)
{
    return nb_bus_cast_until_sent(ctx, NB_CONDUCTOR_TOPIC, method, args, RESULT_SEND_S);
}

/* A request recorded in the database (its task state, mapping or
 * migration committed) and answered to its client: cast, or, when it
 * cannot be sent now (the broker down, no conductor listening), sent
 * again from a thread of its own until it arrives, so no acknowledged
 * request is lost to a broker outage; when that sender gives up, undo
 * puts the records back (a clean error instead of a task state nobody
 * works on). -1 (undo done) when it cannot even be queued: the caller
 * answers 503. (If this process dies meanwhile, the conductor's start-up
 * recovery finds the instance in its state: recovery.c.) */
static int acknowledged(struct nb_ctx *ctx, const char *method, json_t *args,
                        struct nb_bus_undo undo)
{
    if (cast(ctx, method, json_incref(args)) == 0) {
        json_decref(args);
        json_decref(undo.data);
        return 0;
    }
    NB_WARN(LOG_RPC, ctx, NULL, "%s not sent to the conductor: sent again until it arrives",
            method);
    return nb_bus_cast_later(ctx, NB_CONDUCTOR_TOPIC, method, args, RESULT_SEND_S, undo);
}

static const struct nb_bus_undo no_undo = {0};

int nb_conductor_build_instances(struct nb_ctx *ctx, json_t *instance_uuids,
                                 const char *admin_password)
{
    return acknowledged(ctx, NB_CONDUCTOR_BUILD_INSTANCES,
                        json_pack("{s:O, s:s?}", "instance_uuids", instance_uuids, "admin_password",
                                  admin_password),
                        no_undo);
}

int nb_conductor_power_action(struct nb_ctx *ctx, const char *uuid, const char *op,
                              const char *reboot_type, struct nb_bus_undo undo)
{
    /* the conductor's methods are the agent's names (power_methods.h) */
    const char *method = nb_rpc_power_method(op);
    if (!method) {
        NB_ERROR(LOG_RPC, ctx, uuid, "no conductor method for the power action %s", op);
        json_decref(undo.data);
        return -1;
    }
    json_t *args = json_pack("{s:s}", "uuid", uuid);
    if (reboot_type)
        json_object_set_new(args, "reboot_type", json_string(reboot_type));
    return acknowledged(ctx, method, args, undo);
}

int nb_conductor_delete_instance(struct nb_ctx *ctx, const char *uuid)
{
    return acknowledged(ctx, NB_CONDUCTOR_DELETE_INSTANCE, json_pack("{s:s}", "uuid", uuid),
                        no_undo);
}

static json_t *volume_args(const char *uuid, const char *bdm_uuid, const char *volume_id)
{
    return json_pack("{s:s, s:s, s:s}", "uuid", uuid, "bdm_uuid", bdm_uuid, "volume_id", volume_id);
}

int nb_conductor_attach_volume(struct nb_ctx *ctx, const char *uuid, const char *bdm_uuid,
                               const char *volume_id, struct nb_bus_undo undo)
{
    return acknowledged(ctx, NB_CONDUCTOR_ATTACH_VOLUME, volume_args(uuid, bdm_uuid, volume_id),
                        undo);
}

int nb_conductor_detach_volume(struct nb_ctx *ctx, const char *uuid, const char *bdm_uuid,
                               const char *volume_id, struct nb_bus_undo undo)
{
    return acknowledged(ctx, NB_CONDUCTOR_DETACH_VOLUME, volume_args(uuid, bdm_uuid, volume_id),
                        undo);
}

int nb_conductor_snapshot_instance(struct nb_ctx *ctx, const char *uuid, const char *image_id,
                                   struct nb_bus_undo undo)
{
    return acknowledged(ctx, NB_CONDUCTOR_SNAPSHOT_INSTANCE,
                        json_pack("{s:s, s:s}", "uuid", uuid, "image_id", image_id), undo);
}

int nb_conductor_live_migrate_instance(struct nb_ctx *ctx, const struct nb_live_migrate_req *r,
                                       struct nb_bus_undo undo)
{
    return acknowledged(ctx, NB_CONDUCTOR_LIVE_MIGRATE_INSTANCE,
                        json_pack("{s:s, s:s, s:s?, s:s, s:b}", "uuid", r->uuid, "migration_uuid",
                                  r->migration_uuid, "host", r->host, "block_migration",
                                  r->block_migration ? r->block_migration : "false", "force",
                                  r->force),
                        undo);
}

int nb_conductor_migrate_server(struct nb_ctx *ctx, const struct nb_migrate_server_req *r,
                                struct nb_bus_undo undo)
{
    return acknowledged(ctx, NB_CONDUCTOR_MIGRATE_SERVER,
                        json_pack("{s:s, s:s, s:s?, s:O?, s:b}", "uuid", r->uuid, "migration_uuid",
                                  r->migration_uuid, "host", r->host, "flavor", (json_t *)r->flavor,
                                  "allow_same_host", r->allow_same_host),
                        undo);
}

static json_t *migration_args(const char *uuid, const char *migration_uuid)
{
    return json_pack("{s:s, s:s}", "uuid", uuid, "migration_uuid", migration_uuid);
}

int nb_conductor_confirm_resize(struct nb_ctx *ctx, const char *uuid, const char *migration_uuid,
                                struct nb_bus_undo undo)
{
    return acknowledged(ctx, NB_CONDUCTOR_CONFIRM_RESIZE, migration_args(uuid, migration_uuid),
                        undo);
}

int nb_conductor_revert_resize(struct nb_ctx *ctx, const char *uuid, const char *migration_uuid,
                               struct nb_bus_undo undo)
{
    return acknowledged(ctx, NB_CONDUCTOR_REVERT_RESIZE, migration_args(uuid, migration_uuid),
                        undo);
}

int nb_conductor_rebuild_instance(struct nb_ctx *ctx, const struct nb_rebuild_req *r,
                                  struct nb_bus_undo undo)
{
    json_t *args = json_pack("{s:s, s:s?, s:s?, s:b, s:s?, s:s?, s:b}", "uuid", r->uuid,
                             "image_ref", r->image_ref, "admin_password", r->admin_password,
                             "preserve_ephemeral", r->preserve_ephemeral, "migration_uuid",
                             r->migration_uuid, "host", r->host, "force", r->force);
    json_object_set_new(args, "on_shared_storage",
                        r->shared_storage_given ? json_boolean(r->on_shared_storage) : json_null());
    return acknowledged(ctx, NB_CONDUCTOR_REBUILD_INSTANCE, args, undo);
}

int nb_conductor_live_migration_abort(struct nb_ctx *ctx, const char *uuid,
                                      const char *migration_uuid)
{
    return cast(ctx, NB_CONDUCTOR_LIVE_MIGRATION_ABORT, migration_args(uuid, migration_uuid));
}

int nb_conductor_live_migration_force_complete(struct nb_ctx *ctx, const char *uuid,
                                               const char *migration_uuid)
{
    return cast(ctx, NB_CONDUCTOR_LIVE_MIGRATION_FORCE_COMPLETE,
                migration_args(uuid, migration_uuid));
}

json_t *nb_conductor_check_live_migration(struct nb_ctx *ctx, const char *uuid, const char *host,
                                          const char *block_migration, bool force, int timeout_ms)
{
    return nb_bus_call(ctx, NB_CONDUCTOR_TOPIC, NB_CONDUCTOR_CHECK_LIVE_MIGRATION,
                       json_pack("{s:s, s:s?, s:s, s:b}", "uuid", uuid, "host", host,
                                 "block_migration", block_migration ? block_migration : "auto",
                                 "force", force),
                       timeout_ms);
}

int nb_conductor_build_result(struct nb_ctx *ctx, const char *uuid, const char *host, bool ok,
                              const char *message)
{
    return report(ctx, NB_CONDUCTOR_BUILD_RESULT,
                  json_pack("{s:s, s:s, s:b, s:s?}", "uuid", uuid, "host", host, "ok", ok,
                            "message", message));
}

int nb_conductor_build_interrupted(struct nb_ctx *ctx, const char *uuid, const char *host,
                                   const char *message)
{
    return report(ctx, NB_CONDUCTOR_BUILD_RESULT,
                  json_pack("{s:s, s:s, s:b, s:b, s:s}", "uuid", uuid, "host", host, "ok", 0,
                            "interrupted", 1, "message", message));
}

int nb_conductor_op_result(struct nb_ctx *ctx, const struct nb_op_result *r)
{
    return report(ctx, NB_CONDUCTOR_OP_RESULT,
                  json_pack("{s:s, s:s, s:s, s:b, s:s?, s:i, s:b}", "uuid", r->uuid, "host",
                            r->host, "op", r->op, "ok", r->ok, "message", r->message, "power_state",
                            r->power_state, "unsupported", r->unsupported));
}

static json_t *volume_result(const char *uuid, const char *host, const char *bdm_uuid,
                             const char *volume_id, bool ok, const char *message)
{
    return json_pack("{s:s, s:s, s:s?, s:s?, s:b, s:s?}", "uuid", uuid, "host", host, "bdm_uuid",
                     bdm_uuid, "volume_id", volume_id, "ok", ok, "message", message);
}

int nb_conductor_attach_result(struct nb_ctx *ctx, const char *uuid, const char *host,
                               const char *bdm_uuid, const char *volume_id, bool ok,
                               const char *message)
{
    return report(ctx, NB_CONDUCTOR_ATTACH_RESULT,
                  volume_result(uuid, host, bdm_uuid, volume_id, ok, message));
}

int nb_conductor_detach_result(struct nb_ctx *ctx, const char *uuid, const char *host,
                               const char *bdm_uuid, const char *volume_id, bool ok,
                               const char *message)
{
    return report(ctx, NB_CONDUCTOR_DETACH_RESULT,
                  volume_result(uuid, host, bdm_uuid, volume_id, ok, message));
}

int nb_conductor_snapshot_result(struct nb_ctx *ctx, const char *uuid, const char *host,
                                 const char *image_id, bool ok, const char *message)
{
    return report(ctx, NB_CONDUCTOR_SNAPSHOT_RESULT,
                  json_pack("{s:s, s:s, s:s, s:b, s:s?}", "uuid", uuid, "host", host, "image_id",
                            image_id, "ok", ok, "message", message));
}

int nb_conductor_power_sync(struct nb_ctx *ctx, const char *uuid, const char *host, int power_state,
                            bool found)
{
    return cast(ctx, NB_CONDUCTOR_POWER_SYNC,
                json_pack("{s:s, s:s, s:i, s:b}", "uuid", uuid, "host", host, "power_state",
                          power_state, "found", found));
}

json_t *nb_conductor_reconcile_disk_format(struct nb_ctx *ctx, const struct nb_disk_reconcile *r,
                                           int timeout_ms)
{
    return nb_bus_call(ctx, NB_CONDUCTOR_TOPIC, NB_CONDUCTOR_RECONCILE_DISK_FORMAT,
                       json_pack("{s:s, s:s?, s:s?, s:s, s:s, s:s, s:s}", "uuid", r->uuid,
                                 "bdm_uuid", r->bdm_uuid, "volume_id", r->volume_id, "path",
                                 r->path, "old_format", r->old_format, "new_format", r->new_format,
                                 "host", r->host),
                       timeout_ms);
}

json_t *nb_conductor_service_update(struct nb_ctx *ctx, const char *host, const char *binary,
                                    const char *topic, int timeout_ms)
{
    return nb_bus_call(ctx, NB_CONDUCTOR_TOPIC, NB_CONDUCTOR_SERVICE_UPDATE,
                       json_pack("{s:s, s:s, s:s}", "host", host, "binary", binary, "topic", topic),
                       timeout_ms);
}

json_t *nb_conductor_compute_node_update(struct nb_ctx *ctx, json_t *node, int timeout_ms)
{
    return nb_bus_call(ctx, NB_CONDUCTOR_TOPIC, NB_CONDUCTOR_COMPUTE_NODE_UPDATE, node, timeout_ms);
}

int nb_conductor_compute_node_report(struct nb_ctx *ctx, json_t *node)
{
    return cast(ctx, NB_CONDUCTOR_COMPUTE_NODE_UPDATE, node);
}

int nb_conductor_service_heartbeat(struct nb_ctx *ctx, const char *binary, json_t *hosts)
{
    return nb_bus_cast(ctx, NB_CONDUCTOR_HEARTBEAT_TOPIC, NB_CONDUCTOR_SERVICE_HEARTBEAT,
                       json_pack("{s:s, s:O}", "binary", binary, "hosts", hosts));
}

json_t *nb_conductor_instances_on_host(struct nb_ctx *ctx, const char *host, int timeout_ms)
{
    json_t *rows = nb_bus_call(ctx, NB_CONDUCTOR_TOPIC, NB_CONDUCTOR_INSTANCES_ON_HOST,
                               json_pack("{s:s}", "host", host), timeout_ms);
    if (!json_is_array(rows)) {
        json_decref(rows);
        return NULL;
    }
    return rows;
}

int nb_conductor_live_migration_status(struct nb_ctx *ctx, const struct nb_live_migration_status *s)
{
    json_t *progress = json_null();
    if (s->has_progress)
        progress =
            json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "memory_total", (json_int_t)s->memory_total,
                      "memory_processed", (json_int_t)s->memory_processed, "memory_remaining",
                      (json_int_t)s->memory_remaining, "disk_total", (json_int_t)s->disk_total,
                      "disk_processed", (json_int_t)s->disk_processed, "disk_remaining",
                      (json_int_t)s->disk_remaining);
    json_t *args =
        json_pack("{s:s, s:s, s:s, s:s?, s:o}", "uuid", s->uuid, "migration_uuid",
                  s->migration_uuid, "host", s->host, "status", s->status, "progress", progress);
    if (!s->status || s->as_cast)
        return cast(ctx, NB_CONDUCTOR_LIVE_MIGRATION_STATUS, args);
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    json_t *r =
        nb_bus_call(&sub, NB_CONDUCTOR_TOPIC, NB_CONDUCTOR_LIVE_MIGRATION_STATUS, args, 30000);
    json_decref(r);
    return r ? 0 : -1;
}

int nb_conductor_live_migration_result(struct nb_ctx *ctx,
                                       const struct nb_live_migration_outcome *o)
{
    return report(ctx, NB_CONDUCTOR_LIVE_MIGRATION_RESULT,
                  json_pack("{s:s, s:s, s:s, s:b, s:b, s:s?, s:s?, s:b}", "uuid", o->uuid,
                            "migration_uuid", o->migration_uuid, "host", o->host, "ok", o->ok,
                            "cancelled", o->cancelled, "phase", o->phase, "message", o->message,
                            "shared_storage", o->shared_storage));
}

int nb_conductor_rebuild_result(struct nb_ctx *ctx, const struct nb_rebuild_result *r)
{
    return cast(ctx, NB_CONDUCTOR_REBUILD_RESULT,
                json_pack("{s:s, s:s, s:s?, s:b, s:s?, s:i, s:b}", "uuid", r->uuid, "host", r->host,
                          "migration_uuid", r->migration_uuid, "ok", r->ok, "message", r->message,
                          "power_state", r->power_state, "on_shared_storage",
                          r->on_shared_storage));
}

json_t *nb_conductor_evacuated_instances(struct nb_ctx *ctx, const char *host, int timeout_ms)
{
    json_t *rows = nb_bus_call(ctx, NB_CONDUCTOR_TOPIC, NB_CONDUCTOR_EVACUATED_INSTANCES,
                               json_pack("{s:s}", "host", host), timeout_ms);
    if (!json_is_array(rows)) {
        json_decref(rows);
        return NULL;
    }
    return rows;
}

int nb_conductor_evacuation_cleaned(struct nb_ctx *ctx, const char *uuid,
                                    const char *migration_uuid, const char *host)
{
    return cast(
        ctx, NB_CONDUCTOR_EVACUATION_CLEANED,
        json_pack("{s:s, s:s, s:s}", "uuid", uuid, "migration_uuid", migration_uuid, "host", host));
}
