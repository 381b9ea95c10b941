/* audit_fix.c - the repairs of the cloud audit's findings (audit.h), each
 * through its owner's call: placement's delete and claim of allocations,
 * the migration object's guarded status change. Each returns an undo
 * object that nb_audit_undo applies while the state is still what the
 * repair left. */
#include "common/cleanup.h"
#include "common/json.h"
#include "common/util.h"
#include "compute/audit.h"
#include "compute/objects/migration.h"
#include "placement/placement.h"

#include <string.h>

/* Claims a consumer record {"project_id", "user_id", "allocations": {rp:
 * {rc: n}}} again (one provider: the claim call's unit). */
static int reclaim(struct nb_ctx *ctx, const char *consumer, const json_t *rec)
{
    json_t *allocs = json_object_get(rec, "allocations");
    if (json_object_size(allocs) != 1) {
        nb_error(ctx, 409, NULL,
                 "consumer %s held allocations on %zu providers; only one can "
                 "be put back",
                 consumer, json_object_size(allocs));
        return -1;
    }
    const char *rp = json_object_iter_key(json_object_iter(allocs));
    long long gen = nb_placement_consumer_generation(ctx, consumer);
    if (nb_ctx_failed(ctx))
        return -1;
    return nb_placement_claim(ctx, consumer, nb_json_str(rec, "project_id"),
                              nb_json_str(rec, "user_id"), rp, json_object_get(allocs, rp), gen);
}

int nb_audit_fix(struct nb_db *db, struct nb_ctx *ctx, const json_t *fix, json_t **undo)
{
    const char *action = nb_json_str(fix, "action");
    *undo = NULL;
    if (!action) {
        nb_error(ctx, 400, NULL, "no fix");
        return -1;
    }
    if (!strcmp(action, "delete_allocations")) {
        const char *c = nb_json_str(fix, "consumer");
        if (nb_placement_delete_allocations(ctx, c) < 0)
            return -1;
        *undo = json_pack("{s:s, s:s, s:O}", "action", "reclaim", "consumer", c, "record",
                          json_object_get(fix, "consumer_record"));
        return 0;
    }
    if (!strcmp(action, "heal")) {
        const char *c = nb_json_str(fix, "consumer"), *rp = nb_json_str(fix, "provider");
        long long gen = nb_placement_consumer_generation(ctx, c);
        if (nb_ctx_failed(ctx) ||
            nb_placement_claim(ctx, c, nb_json_str(fix, "project_id"), nb_json_str(fix, "user_id"),
                               rp, json_object_get(fix, "resources"), gen) < 0)
            return -1;
        *undo = json_pack("{s:s, s:s, s:s, s:O}", "action", "unheal", "consumer", c, "provider", rp,
                          "resources", json_object_get(fix, "resources"));
        return 0;
    }
    if (!strcmp(action, "migration_error")) {
        const char *m = nb_json_str(fix, "migration"), *st = nb_json_str(fix, "status");
        int n = nb_migration_set_status(db, ctx, m, NB_MIGRATION_ERROR, st);
        if (n <= 0) {
            if (n == 0)
                nb_error(ctx, 409, NULL, "migration %s is no longer %s", m, st);
            return -1;
        }
        *undo = json_pack("{s:s, s:s, s:s}", "action", "migration_status", "migration", m, "status",
                          st);
        return 0;
    }
    nb_error(ctx, 400, NULL, "unknown fix %s", action);
    return -1;
}

int nb_audit_undo(struct nb_db *db, struct nb_ctx *ctx, const json_t *undo)
{
    const char *action = nb_json_str(undo, "action"), *c = nb_json_str(undo, "consumer");
    if (action && !strcmp(action, "reclaim"))
        return reclaim(ctx, c, json_object_get(undo, "record"));
    if (action && !strcmp(action, "unheal")) {
        _cleanup_json_ json_t *now = nb_placement_allocations_of(ctx, c);
        if (!now)
            return -1;
        json_t *want = json_object_get(undo, "resources");
        json_t *held = json_object_get(now, nb_json_str(undo, "provider"));
        if (json_object_size(now) != 1 || !json_equal(held, want)) {
            nb_error(ctx, 409, NULL, "consumer %s no longer holds just what the heal claimed", c);
            return -1;
        }
        return nb_placement_delete_allocations(ctx, c);
    }
    if (action && !strcmp(action, "migration_status")) {
        const char *m = nb_json_str(undo, "migration");
        int n =
            nb_migration_set_status(db, ctx, m, nb_json_str(undo, "status"), NB_MIGRATION_ERROR);
        if (n == 0)
            nb_error(ctx, 409, NULL, "migration %s is no longer error", m);
        return n > 0 ? 0 : -1;
    }
    nb_error(ctx, 400, NULL, "unknown undo %s", action ? action : "(none)");
    return -1;
}
