/* doctor_cloud_fix.c - `nubo doctor cloud --fix` and `nubo doctor rollback
 * <fix-id>`: each repairable PROBLEM repaired through compute/audit.h's
 * nb_audit_fix, with a row in doctor_cloud_fixes (085) kept before the
 * change and completed after it with what the change replaced, so that
 * the rollback can put it back. */
#include "cmd/doctor.h"

#include "common/cleanup.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "compute/audit.h"
#include "db/db.h"
#include "placement/placement.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void set_outcome(struct nb_db *db, long long id, const char *outcome, const json_t *undo,
                        const char *message)
{
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    char now[32];
    nb_now_iso_us(now);
    _cleanup_free_ char *u = undo ? json_dumps(undo, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    nb_db_exec(
        db, &ctx,
        "UPDATE doctor_cloud_fixes SET outcome = ?, \"undo\" = COALESCE(?, \"undo\"), message = ?, "
        "updated_at = ? WHERE id = ?",
        "ssssi", outcome, u, message, now, id);
}

/* One finding's repair. 0 applied, -1 not (reason printed). */
static int fix_one(struct nb_db *db, struct nb_ctx *ctx, const json_t *f)
{
    const char *check = nb_json_str(f, "check"), *subject = nb_json_str(f, "subject");
    const json_t *fix = json_object_get(f, "fix");
    const char *action = nb_json_str(fix, "action");
    char now[32];
    nb_now_iso_us(now);
    if (nb_db_exec(
            db, ctx,
            "INSERT INTO doctor_cloud_fixes (check_name, subject, action, \"undo\", evidence, "
            "request_id, created_at, outcome) VALUES (?, ?, ?, '{}', ?, ?, ?, 'applying')",
            "ssssss", check, subject, action, nb_json_str(f, "evidence"), ctx->request_id,
            now) < 0) {
        printf("[FIX] %s %s: not applied: cannot record it in doctor_cloud_fixes: %s\n", check,
               subject, nb_ctx_message(ctx));
        return -1;
    }
    long long id = nb_db_last_id(db);
    json_t *undo = NULL;
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    if (nb_audit_fix(db, &sub, fix, &undo) < 0) {
        printf("[FIX] %s %s: %s failed: %s (fix %lld)\n", check, subject, action,
               nb_ctx_message(&sub), id);
        set_outcome(db, id, "failed", NULL, nb_ctx_message(&sub));
        return -1;
    }
    set_outcome(db, id, "applied", undo, NULL);
    _cleanup_free_ char *u = json_dumps(undo, JSON_COMPACT | JSON_SORT_KEYS);
    NB_WARN("nubo.doctor", ctx, NULL, "doctor cloud --fix %lld: %s %s: %s; undo %s", id, check,
            subject, action, u);
    printf("[FIX] %s %s: %s done; fix %lld keeps %s (`nubo doctor rollback %lld` undoes it)\n",
           check, subject, action, id, u, id);
    json_decref(undo);
    return 0;
}

int nb_dr_cloud_fix(struct nb_db *db, struct nb_ctx *ctx, const json_t *findings)
{
    int failed = 0, done = 0;
    size_t i;
    json_t *f;
    json_array_foreach (findings, i, f) {
        if (strcmp(nb_json_str(f, "verdict"), "PROBLEM") || !json_object_get(f, "fix"))
            continue;
        if (fix_one(db, ctx, f) < 0)
            failed++;
        else
            done++;
    }
    if (!done && !failed)
        printf("[FIX] nothing to apply: no PROBLEM has a safe repair\n");
    return failed ? -1 : 0;
}

int nb_dr_cloud_rollback(struct nb_db *db, const char *ref)
{
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    nb_placement_use_db(db);
    char *end;
    long long id = strtoll(ref, &end, 10);
    if (*end || id <= 0) {
        fprintf(stderr, "nubo doctor: rollback wants a fix id, not '%s'\n", ref);
        return NB_DR_EXIT_USAGE;
    }
    _cleanup_json_ json_t *row =
        nb_db_row(db, &ctx, "SELECT * FROM doctor_cloud_fixes WHERE id = ?", "i", id);
    if (!row) {
        fprintf(stderr, "nubo doctor: no fix %lld in doctor_cloud_fixes\n", id);
        return NB_DR_EXIT_CANNOT;
    }
    const char *outcome = nb_json_str(row, "outcome");
    if (strcmp(outcome, "applied")) {
        fprintf(stderr, "nubo doctor: fix %lld is %s, not applied: nothing to roll back\n", id,
                outcome);
        return NB_DR_EXIT_PROBLEM;
    }
    _cleanup_json_ json_t *undo = json_loads(nb_json_str(row, "undo"), 0, NULL);
    if (nb_audit_undo(db, &ctx, undo) < 0) {
        printf("[ROLLBACK] fix %lld (%s %s): failed: %s\n", id, nb_json_str(row, "check_name"),
               nb_json_str(row, "subject"), nb_ctx_message(&ctx));
        set_outcome(db, id, "rollback_failed", NULL, nb_ctx_message(&ctx));
        return NB_DR_EXIT_PROBLEM;
    }
    set_outcome(db, id, "rolled_back", NULL, NULL);
    printf("[ROLLBACK] fix %lld (%s %s): %s undone\n", id, nb_json_str(row, "check_name"),
           nb_json_str(row, "subject"), nb_json_str(row, "action"));
    return NB_DR_EXIT_HEALTHY;
}
