/* evacuate.c - the conductor's half of an evacuation (Nova's conductor
 * rebuild_instance with recreate, the resource tracker's rebuild_claim and
 * finish_evacuation, and the source's _destroy_evacuated_instances).
 *
 * Placement follows the migration-consumer model of every move here: the
 * instance's allocation on the source is handed to the migration, then the
 * scheduler picks a destination (the named one: forced, or requested with
 * its filters run) other than the source and claims it for the instance.
 * The migration keeps the source allocation after the evacuation is done,
 * as the source host's resources are still taken by the guest it may
 * still run; Nova drops it when the source's compute service comes back
 * (init_host's _destroy_evacuated_instances), and so does nubo: the source
 * agent, at its first registration, asks for its evacuated instances,
 * destroys the guests it still has and reports each one cleaned, and the
 * migration's allocation goes and the migration ends "completed".
 *
 * Volumes are re-attached for the destination before the rebuild
 * (volume_moves.c): a new attachment for the destination with fresh
 * connection_info, the old one (source host) ended, as Nova's
 * detach_block_devices and _prep_block_device do for an evacuation. */
#include "common/cleanup.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "compute/compute.h"
#include "compute/conductor/internal.h"
#include "compute/objects/instance.h"
#include "compute/objects/migration.h"
#include "compute/objects/request_spec.h"
#include "compute/rpc/scheduler_api.h"
#include "db/db.h"
#include "network/network.h"
#include "placement/placement.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NO_HOST "No valid host was found. There are not enough hosts available."

void cond_evacuate_rollback(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                            const char *migration_uuid, const char *status)
{
    (void)c;
    struct nb_ctx sub; /* best-effort: recovery releases what is left */
    nb_ctx_child(&sub, ctx);
    _cleanup_json_ json_t *held = nb_placement_allocations_of(&sub, migration_uuid);
    if (held && json_object_size(held)) {
        if (nb_placement_delete_allocations(&sub, uuid) < 0 ||
            nb_placement_move_allocations(&sub, migration_uuid, uuid) < 0)
            NB_WARN(LOG_COND, ctx, uuid, "could not hand the source allocation back: %s",
                    nb_ctx_message(&sub));
    }
    nb_ctx_clear_error(&sub);
    if (nb_migration_set_status(c->db, &sub, migration_uuid, status, NULL) < 0)
        NB_WARN(LOG_COND, ctx, uuid, "could not set migration %s %s: %s", migration_uuid, status,
                nb_ctx_message(&sub));
}

char *cond_evacuation_dest_node(struct conductor *c, struct nb_ctx *ctx, const char *migration_uuid)
{
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    _cleanup_json_ json_t *m = nb_migration_get(c->db, &sub, migration_uuid);
    const char *node = nb_json_str(m, "dest_node");
    return node ? strdup(node) : NULL;
}

/* The request spec for the destination: the stored one with the request's
 * host (forced or requested), the source ignored, no retries of the boot. */
static void evacuation_spec(const json_t *row, const json_t *args, struct nb_request_spec *rs)
{
    _cleanup_json_ json_t *j = nb_json_parse(nb_json_str(row, "request_spec"));
    nb_request_spec_from_json(rs, j);
    const char *host = nb_json_str(args, "host");
    free(rs->force_host), free(rs->force_node), free(rs->requested_host), free(rs->requested_node);
    rs->force_host = rs->force_node = rs->requested_host = rs->requested_node = NULL;
    if (host && json_is_true(json_object_get(args, "force")))
        rs->force_host = strdup(host);
    else if (host)
        rs->requested_host = strdup(host);
    json_array_append_new(rs->ignore_hosts, json_string(nb_json_str(row, "host")));
    json_array_clear(rs->retry_hosts);
    json_array_clear(rs->retry_failures);
    json_array_clear(rs->unreachable_hosts);
    rs->num_attempts = 0;
}

/* Picks and claims the destination (the instance's allocation already
 * with the migration). The selection (new ref), or NULL after ending the
 * evacuation. */
static json_t *select_dest(struct conductor *c, struct nb_ctx *ctx, const json_t *row,
                           const json_t *args, const char *mig)
{
    const char *uuid = nb_json_str(row, "uuid");
    const char *source = nb_json_str(row, "host");
    struct nb_request_spec rs;
    evacuation_spec(row, args, &rs);
    json_t *sel = nb_scheduler_select_destinations(ctx, uuid, &rs, c->call_timeout_ms);
    nb_request_spec_free(&rs);
    const char *err = nb_json_str(sel, "error");
    const char *dest = nb_json_str(sel, "host");
    if (!sel || err || !dest || !strcmp(dest, source)) {
        const char *why = !sel ? nb_ctx_message(ctx) : nb_json_str(sel, "details");
        _cleanup_free_ char *details = strdup(why ? why : "");
        if (dest && !err && !strcmp(dest, source)) {
            struct nb_ctx sub;
            nb_ctx_child(&sub, ctx);
            nb_placement_delete_allocations(&sub, uuid); /* the claim on the source */
        }
        nb_ctx_clear_error(ctx); /* handled: the evacuation ends with this message */
        cond_rebuild_failed(c, ctx, uuid, mig, NULL, EV_COND_REBUILD, "error", err ? err : NO_HOST,
                            *details ? details : NULL);
        json_decref(sel);
        return NULL;
    }
    return sel;
}

void cond_evacuate(struct conductor *c, struct nb_ctx *ctx, const json_t *row, const json_t *args)
{
    const char *uuid = nb_json_str(row, "uuid");
    const char *mig = nb_json_str(args, "migration_uuid");
    const char *source = nb_json_str(row, "host");
    if (nb_placement_move_allocations(ctx, uuid, mig) < 0) {
        char msg[1100];
        snprintf(msg, sizeof(msg), "%s", nb_ctx_message(ctx));
        nb_ctx_clear_error(ctx); /* handled: the evacuation fails with it */
        cond_rebuild_failed(c, ctx, uuid, mig, NULL, EV_COND_REBUILD, "error", msg, NULL);
        return;
    }
    _cleanup_json_ json_t *sel = select_dest(c, ctx, row, args, mig);
    if (!sel)
        return;
    const char *dest = nb_json_str(sel, "host");
    const char *node = nb_json_str(sel, "node") ? nb_json_str(sel, "node") : dest;
    /* the resource tracker's _claim_existing_migration: destination
     * compute, node and address, pre-migrating */
    _cleanup_json_ json_t *cn = nb_db_row(c->db, ctx,
                                          "SELECT host_ip FROM compute_nodes WHERE host = ? AND "
                                          "deleted = 0 ORDER BY id LIMIT 1",
                                          "s", dest);
    const struct nb_migration_change mc = {.status = "pre-migrating",
                                           .dest_compute = dest,
                                           .dest_node = node,
                                           .dest_host = nb_json_str(cn, "host_ip")};
    nb_migration_update(c->db, ctx, mig, &mc);
    nb_ctx_clear_error(ctx); /* the record's progress is not the evacuation's */
    cond_event_finish(c, ctx, uuid, EV_COND_REBUILD, true, NULL);
    NB_INFO(LOG_COND, ctx, uuid, "Evacuating instance from %s to %s (migration %s)", source, dest,
            mig);
    if (cond_volumes_move(c, ctx, uuid, dest) < 0) {
        char msg[1100];
        snprintf(msg, sizeof(msg), "Volumes could not be re-attached for host %s: %s", dest,
                 nb_ctx_message(ctx));
        nb_ctx_clear_error(ctx); /* handled: the evacuation fails with it */
        cond_rebuild_failed(c, ctx, uuid, mig, dest, NULL, "failed", msg, NULL);
        return;
    }
    json_t *shared = json_object_get(args, "on_shared_storage");
    cond_rebuild_on_host(c, ctx, uuid, dest, mig,
                         json_is_boolean(shared) ? json_is_true(shared) : -1,
                         json_is_true(json_object_get(args, "preserve_ephemeral")));
}

void cond_evacuate_done(struct conductor *c, struct nb_ctx *ctx, const char *uuid, const char *host,
                        const char *migration_uuid, bool on_shared_storage)
{
    struct nb_ctx sub; /* the instance has moved: the records follow best-effort */
    nb_ctx_child(&sub, ctx);
    if (nb_network_bind_instance_host(&sub, uuid, host) < 0)
        NB_WARN(LOG_COND, ctx, uuid, "could not bind the ports to %s: %s", host,
                nb_ctx_message(&sub));
    nb_ctx_clear_error(&sub);
    if (nb_migration_set_status(c->db, &sub, migration_uuid, "done", NULL) < 0)
        NB_WARN(LOG_COND, ctx, uuid, "could not set migration %s done: %s", migration_uuid,
                nb_ctx_message(&sub));
    nb_ctx_clear_error(&sub);
    /* what the source needs to know when it cleans up: whether the disk it
     * has is the one the destination runs */
    if (nb_db_exec(c->db, &sub,
                   "UPDATE instance_system_metadata SET deleted = id WHERE instance_uuid = ? AND "
                   "\"key\" = 'evacuated_on_shared_storage' AND deleted = 0",
                   "s", uuid) < 0 ||
        nb_db_exec(
            c->db, &sub,
            "INSERT INTO instance_system_metadata (instance_uuid, \"key\", value) VALUES (?, "
            "'evacuated_on_shared_storage', ?)",
            "ss", uuid, on_shared_storage ? "True" : "False") < 0)
        NB_WARN(LOG_COND, ctx, uuid, "could not record the evacuation's storage: %s",
                nb_ctx_message(&sub));
}

json_t *cond_evacuated_instances(struct conductor *c, struct nb_ctx *ctx, json_t *args)
{
    const char *host = nb_json_str(args, "host");
    /* a disk is kept when the evacuation ran it from shared storage, when
     * the server is volume-backed, or while the evacuation has not told */
    json_t *rows = nb_db_rows(
        c->db, ctx,
        "SELECT m.instance_uuid AS uuid, m.uuid AS migration_uuid, "
        "COALESCE(i.deleted, 1) != 0 AS deleted, "
        "(m.status = 'done' AND NOT EXISTS (SELECT 1 FROM instance_system_metadata s WHERE "
        "s.instance_uuid = m.instance_uuid AND s.deleted = 0 AND s.key = "
        "'evacuated_on_shared_storage' AND s.value = 'True') AND NOT EXISTS (SELECT 1 FROM "
        "block_device_mapping b WHERE b.instance_uuid = m.instance_uuid AND b.deleted = 0 AND "
        "b.boot_index = 0 AND b.destination_type = 'volume')) AS destroy_disks "
        "FROM migrations m LEFT JOIN instances i ON i.uuid = m.instance_uuid "
        "WHERE m.source_compute = ? AND m.migration_type = 'evacuation' AND m.deleted = 0 AND "
        "m.status IN ('accepted', 'pre-migrating', 'done') ORDER BY m.id",
        "s", host);
    if (!rows) {
        nb_ctx_clear_error(ctx); /* handled: the agent asks again at its next start */
        return json_array();
    }
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        json_object_set_new(r, "deleted", json_boolean(nb_json_int(r, "deleted", 0)));
        json_object_set_new(r, "destroy_disks", json_boolean(nb_json_int(r, "destroy_disks", 0)));
    }
    return rows;
}

void cond_evacuation_cleaned(struct conductor *c, struct nb_ctx *ctx, json_t *args)
{
    const char *uuid = nb_json_str(args, "uuid");
    const char *mig = nb_json_str(args, "migration_uuid");
    if (!uuid || !mig)
        return;
    NB_INFO(LOG_COND, ctx, uuid,
            "Cleaning up allocations of the instance as it has been evacuated from %s",
            nb_json_str(args, "host") ? nb_json_str(args, "host") : "?");
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    if (nb_placement_delete_allocations(&sub, mig) < 0)
        NB_WARN(LOG_COND, ctx, uuid, "Failed to clean allocation of evacuated instance: %s",
                nb_ctx_message(&sub));
    nb_ctx_clear_error(&sub);
    if (nb_migration_set_status(c->db, &sub, mig, "completed", NULL) < 0)
        NB_WARN(LOG_COND, ctx, uuid, "could not set migration %s completed: %s", mig,
                nb_ctx_message(&sub));
}
