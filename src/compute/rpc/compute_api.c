/* compute_api.c - the client of topic "compute.<host>" (see
 * compute_api.h). */
#include "compute/rpc/compute_api.h"
#include "compute/rpc/power_methods.h"
#include "bus/bus.h"
#include "common/cleanup.h"
#include "common/json.h"
#include "common/log.h"
#include "compute/virt/driver.h"

#include <stdio.h>

#define LOG_RPC "nubo.compute.rpcapi"

/* The topic of host's agent, in buf. */
static const char *topic_of(char *buf, size_t n, const char *host)
{
    snprintf(buf, n, NB_COMPUTE_TOPIC_PREFIX "%s", host ? host : "");
    return buf;
}

/* The host is in the database (the scheduler chose it, or an instance or
 * migration is on it): its agent exists, so after a broker restart the
 * cast waits in its queue until the agent listens again rather than
 * failing because this process never saw that queue. */
static int cast(struct nb_ctx *ctx, const char *host, const char *method, json_t *args)
{
    char topic[300];
    return nb_bus_cast_to_listener(ctx, topic_of(topic, sizeof(topic), host), method, args);
}

static json_t *call(struct nb_ctx *ctx, const char *host, const char *method, json_t *args,
                    int timeout_ms)
{
    char topic[300];
    return nb_bus_call(ctx, topic_of(topic, sizeof(topic), host), method, args, timeout_ms);
}

int nb_compute_build_and_run_instance(struct nb_ctx *ctx, const char *host, json_t *instance,
                                      const char *node)
{
    return cast(ctx, host, NB_COMPUTE_BUILD_AND_RUN_INSTANCE,
                json_pack("{s:o, s:s}", "instance", instance, "node", node));
}

int nb_compute_power_action(struct nb_ctx *ctx, const char *host, const char *op, json_t *instance,
                            bool hard)
{
    const char *method = nb_rpc_power_method(op);
    if (!method) {
        json_decref(instance);
        NB_ERROR(LOG_RPC, ctx, NULL, "no compute method for the power action %s", op);
        return -1;
    }
    return cast(
        ctx, host, method,
        json_pack("{s:o, s:s}", "instance", instance, "reboot_type", hard ? "HARD" : "SOFT"));
}

int nb_compute_terminate_instance(struct nb_ctx *ctx, const char *host, json_t *instance)
{
    return cast(ctx, host, NB_COMPUTE_TERMINATE_INSTANCE, json_pack("{s:o}", "instance", instance));
}

int nb_compute_attach_volume(struct nb_ctx *ctx, const char *host, json_t *instance, json_t *bdm)
{
    return cast(ctx, host, NB_COMPUTE_ATTACH_VOLUME,
                json_pack("{s:o, s:O}", "instance", instance, "bdm", bdm));
}

int nb_compute_detach_volume(struct nb_ctx *ctx, const char *host, json_t *instance, json_t *bdm)
{
    return cast(ctx, host, NB_COMPUTE_DETACH_VOLUME,
                json_pack("{s:o, s:O}", "instance", instance, "bdm", bdm));
}

int nb_compute_snapshot_instance(struct nb_ctx *ctx, const char *host, json_t *instance,
                                 const char *image_id)
{
    return cast(ctx, host, NB_COMPUTE_SNAPSHOT_INSTANCE,
                json_pack("{s:o, s:s}", "instance", instance, "image_id", image_id));
}

int nb_compute_external_instance_event(struct nb_ctx *ctx, const char *host, json_t *events)
{
    return cast(ctx, host, NB_COMPUTE_EXTERNAL_INSTANCE_EVENT,
                json_pack("{s:o}", "events", events));
}

/* How long a guest's destroy is sent again: a host cut off or a broker
 * down for minutes. */
#define DESTROY_SEND_S 600

int nb_compute_destroy_guest(struct nb_ctx *ctx, const char *host, const char *uuid)
{
    json_t *args = json_pack("{s:s}", "uuid", uuid);
    if (cast(ctx, host, NB_COMPUTE_DESTROY_GUEST, json_incref(args)) == 0) {
        json_decref(args);
        return 0;
    }
    char topic[300];
    NB_WARN(LOG_RPC, ctx, uuid, "destroy_guest not sent to host %s: sent again until it arrives",
            host);
    return nb_bus_cast_later(ctx, topic_of(topic, sizeof(topic), host), NB_COMPUTE_DESTROY_GUEST,
                             args, DESTROY_SEND_S, (struct nb_bus_undo){0});
}

json_t *nb_compute_get_console_output(struct nb_ctx *ctx, const char *host, const char *uuid,
                                      long long length, int timeout_ms)
{
    return call(ctx, host, NB_COMPUTE_GET_CONSOLE_OUTPUT,
                json_pack("{s:s, s:o}", "uuid", uuid, "length",
                          length < 0 ? json_null() : json_integer(length)),
                timeout_ms);
}

json_t *nb_compute_get_diagnostics(struct nb_ctx *ctx, const char *host, const char *uuid,
                                   bool standard, int timeout_ms)
{
    return call(ctx, host, NB_COMPUTE_GET_DIAGNOSTICS,
                json_pack("{s:s, s:b}", "uuid", uuid, "standard", standard), timeout_ms);
}

int nb_compute_guest_info(struct nb_ctx *ctx, const char *host, const char *uuid, int timeout_ms,
                          bool *found, int *power_state)
{
    _cleanup_json_ json_t *r =
        call(ctx, host, NB_COMPUTE_GUEST_INFO, json_pack("{s:s}", "uuid", uuid), timeout_ms);
    if (!r)
        return -1;
    *found = json_is_true(json_object_get(r, "found"));
    *power_state = (int)nb_json_int(r, "power_state", NB_POWER_NOSTATE);
    return 0;
}

json_t *nb_compute_get_host_uptime(struct nb_ctx *ctx, const char *host, int timeout_ms)
{
    return call(ctx, host, NB_COMPUTE_GET_HOST_UPTIME, json_object(), timeout_ms);
}

bool nb_compute_ping(struct nb_ctx *ctx, const char *host, int timeout_ms)
{
    json_t *r = call(ctx, host, NB_COMPUTE_PING, json_object(), timeout_ms);
    json_decref(r);
    return r != NULL;
}

json_t *nb_compute_check_can_live_migrate_destination(struct nb_ctx *ctx, const char *dest,
                                                      json_t *instance, const char *source,
                                                      int check_timeout_ms, int timeout_ms)
{
    return call(ctx, dest, NB_COMPUTE_CHECK_CAN_LIVE_MIGRATE_DESTINATION,
                json_pack("{s:o, s:s, s:i}", "instance", instance, "source", source, "timeout_ms",
                          check_timeout_ms),
                timeout_ms);
}

json_t *nb_compute_check_can_live_migrate_source(struct nb_ctx *ctx, const char *source,
                                                 json_t *instance, const char *probe,
                                                 const char *dest_uri, int check_timeout_ms,
                                                 int timeout_ms)
{
    return call(ctx, source, NB_COMPUTE_CHECK_CAN_LIVE_MIGRATE_SOURCE,
                json_pack("{s:o, s:s?, s:s?, s:i}", "instance", instance, "probe", probe,
                          "dest_uri", dest_uri, "timeout_ms", check_timeout_ms),
                timeout_ms);
}

json_t *nb_compute_pre_live_migration(struct nb_ctx *ctx, const char *dest, json_t *instance,
                                      const json_t *disks, bool shared_storage,
                                      bool block_migration, int timeout_ms)
{
    return call(ctx, dest, NB_COMPUTE_PRE_LIVE_MIGRATION,
                json_pack("{s:o, s:O?, s:b, s:b}", "instance", instance, "disks", (json_t *)disks,
                          "shared_storage", shared_storage, "block_migration", block_migration),
                timeout_ms);
}

int nb_compute_live_migration(struct nb_ctx *ctx, const char *source, json_t *instance,
                              const struct nb_live_migration_req *r)
{
    return cast(ctx, source, NB_COMPUTE_LIVE_MIGRATION,
                json_pack("{s:o, s:s, s:s, s:s?, s:s?, s:b, s:b, s:O?}", "instance", instance,
                          "migration_uuid", r->migration_uuid, "dest_host", r->dest_host,
                          "dest_uri", r->dest_uri, "dest_addr", r->dest_addr, "block_migration",
                          r->block_migration, "shared_storage", r->shared_storage, "disks",
                          (json_t *)r->disks));
}

int nb_compute_live_migration_abort(struct nb_ctx *ctx, const char *source,
                                    const char *migration_uuid)
{
    return cast(ctx, source, NB_COMPUTE_LIVE_MIGRATION_ABORT,
                json_pack("{s:s}", "migration_uuid", migration_uuid));
}

int nb_compute_live_migration_force_complete(struct nb_ctx *ctx, const char *source,
                                             const char *migration_uuid)
{
    return cast(ctx, source, NB_COMPUTE_LIVE_MIGRATION_FORCE_COMPLETE,
                json_pack("{s:s}", "migration_uuid", migration_uuid));
}

int nb_compute_live_migration_running(struct nb_ctx *ctx, const char *source,
                                      const char *migration_uuid, int timeout_ms, char *phase,
                                      size_t n)
{
    if (phase && n)
        phase[0] = '\0';
    _cleanup_json_ json_t *r =
        call(ctx, source, NB_COMPUTE_LIVE_MIGRATION_RUNNING,
             json_pack("{s:s}", "migration_uuid", migration_uuid), timeout_ms);
    if (!json_is_object(r) || nb_json_str(r, "error")) { /* an agent without the method */
        if (r && !nb_ctx_failed(ctx))
            nb_error(ctx, 500, NULL, "unexpected answer of host %s to %s", source,
                     NB_COMPUTE_LIVE_MIGRATION_RUNNING);
        return -1;
    }
    if (!json_is_true(json_object_get(r, "running")))
        return 0;
    if (phase && n)
        snprintf(phase, n, "%s", nb_json_str(r, "phase") ? nb_json_str(r, "phase") : "?");
    return 1;
}

json_t *nb_compute_post_live_migration_at_destination(struct nb_ctx *ctx, const char *dest,
                                                      json_t *instance, int timeout_ms)
{
    return call(ctx, dest, NB_COMPUTE_POST_LIVE_MIGRATION_AT_DESTINATION,
                json_pack("{s:o}", "instance", instance), timeout_ms);
}

json_t *nb_compute_post_live_migration_at_source(struct nb_ctx *ctx, const char *source,
                                                 json_t *instance, bool shared_storage,
                                                 int timeout_ms)
{
    return call(ctx, source, NB_COMPUTE_POST_LIVE_MIGRATION_AT_SOURCE,
                json_pack("{s:o, s:b}", "instance", instance, "shared_storage", shared_storage),
                timeout_ms);
}

json_t *nb_compute_rollback_live_migration_at_destination(struct nb_ctx *ctx, const char *dest,
                                                          json_t *instance, bool shared_storage,
                                                          int timeout_ms)
{
    return call(ctx, dest, NB_COMPUTE_ROLLBACK_LIVE_MIGRATION_AT_DESTINATION,
                json_pack("{s:o, s:b}", "instance", instance, "shared_storage", shared_storage),
                timeout_ms);
}

/* The arguments of a resize step: what every step sends, plus the members
 * of its own message (flavor, dest_host + dest, power_on). */
static json_t *resize_args(const struct nb_resize_step *s, bool flavor, bool dest, bool power)
{
    json_t *a = json_pack("{s:o, s:s?, s:b}", "instance", s->instance, "migration_uuid",
                          s->migration_uuid, "same_host", s->same_host);
    if (flavor)
        json_object_set_new(a, "flavor", s->flavor ? json_deep_copy(s->flavor) : json_null());
    if (dest) {
        json_object_set_new(a, "dest_host", json_string(s->dest_host ? s->dest_host : ""));
        json_object_set_new(a, "dest", s->dest ? json_deep_copy(s->dest) : json_object());
    }
    if (power)
        json_object_set_new(a, "power_on", json_boolean(s->power_on));
    return a;
}

json_t *nb_compute_prep_resize(struct nb_ctx *ctx, const struct nb_resize_step *s, int timeout_ms)
{
    return call(ctx, s->host, NB_COMPUTE_PREP_RESIZE, resize_args(s, true, false, false),
                timeout_ms);
}

json_t *nb_compute_resize_instance(struct nb_ctx *ctx, const struct nb_resize_step *s,
                                   int timeout_ms)
{
    return call(ctx, s->host, NB_COMPUTE_RESIZE_INSTANCE, resize_args(s, true, true, false),
                timeout_ms);
}

json_t *nb_compute_finish_resize(struct nb_ctx *ctx, const struct nb_resize_step *s, int timeout_ms)
{
    return call(ctx, s->host, NB_COMPUTE_FINISH_RESIZE, resize_args(s, false, false, true),
                timeout_ms);
}

json_t *nb_compute_confirm_resize(struct nb_ctx *ctx, const struct nb_resize_step *s,
                                  int timeout_ms)
{
    return call(ctx, s->host, NB_COMPUTE_CONFIRM_RESIZE, resize_args(s, false, false, false),
                timeout_ms);
}

json_t *nb_compute_revert_resize(struct nb_ctx *ctx, const struct nb_resize_step *s, int timeout_ms)
{
    return call(ctx, s->host, NB_COMPUTE_REVERT_RESIZE, resize_args(s, false, false, false),
                timeout_ms);
}

json_t *nb_compute_finish_revert_resize(struct nb_ctx *ctx, const struct nb_resize_step *s,
                                        int timeout_ms)
{
    return call(ctx, s->host, NB_COMPUTE_FINISH_REVERT_RESIZE, resize_args(s, false, false, true),
                timeout_ms);
}

int nb_compute_rebuild_instance(struct nb_ctx *ctx, const char *host, json_t *instance,
                                const struct nb_compute_rebuild *r)
{
    json_t *args = json_pack("{s:o, s:s?, s:b}", "instance", instance, "migration_uuid",
                             r->migration_uuid, "preserve_ephemeral", r->preserve_ephemeral);
    json_object_set_new(args, "on_shared_storage",
                        r->on_shared_storage < 0 ? json_null()
                                                 : json_boolean(r->on_shared_storage));
    return cast(ctx, host, NB_COMPUTE_REBUILD_INSTANCE, args);
}
