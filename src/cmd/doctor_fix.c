/* doctor_fix.c - `nubo doctor server --fix`: the runbook's workaround, made
 * safe.
 *
 * 1. Inside one transaction, for each mapping whose format is wrong: re-read
 *    its connection_info (the value kept is the one replaced, not the one
 *    diagnosed), keep it in doctor_fixes, run the runbook's own update
 *      UPDATE block_device_mapping SET connection_info = JSON_SET(
 *        connection_info, '$.data.format', ?) WHERE instance_uuid = ? AND
 *        uuid = ? AND deleted = 0
 *    which must change exactly one row, and set the volume's admin-metadata
 *    "format". Anything else rolls the whole transaction back.
 * 2. Through the running API (so the conductor and the compute agent do the
 *    work and record it as for any operator): os-resetState to active when
 *    the server is in ERROR, then a HARD reboot. The doctor authenticates
 *    with a short-lived admin token it issues itself in the database
 *    (nb_identity_issue_admin_token): root on the host with the database
 *    needs no password.
 * 3. Wait for ACTIVE, no task, power state 1. If that does not come within
 *    the time limit, put the old values back (only where the mapping still
 *    holds the doctor's value) and say so.
 * HTTP goes through libcurl. */
#include "cmd/api_client.h"
#include "cmd/doctor.h"

#include "common/cleanup.h"
#include "common/config.h"
#include "common/env.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "compute/bdm.h"
#include "compute/compute.h"
#include "compute/objects/block_device.h"
#include "compute/objects/instance.h"
#include "db/db.h"
#include "volume/volume.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LOGGER "nubo.doctor"
#define TOKEN_TTL 300

/* ---- the database side ------------------------------------------------- */

/* One mapping's part of the apply transaction. */
static int apply_one(struct nb_db *db, struct nb_ctx *ctx, const char *uuid,
                     struct nb_dr_format_fix *f, const char *now)
{
    free(f->old_connection_info);
    f->old_connection_info = nb_bdm_connection_info_text(db, ctx, uuid, f->bdm_uuid);
    if (!f->old_connection_info)
        return nb_ctx_failed(ctx) ? -1
                                  : nb_error(ctx, 409, NULL,
                                             "mapping %s is gone or has no "
                                             "connection_info",
                                             f->bdm_uuid);
    _cleanup_json_ json_t *ci = nb_json_parse(f->old_connection_info);
    const char *now_declared = nb_bdm_declared_format(ci);
    if (strcmp(now_declared, f->old_format))
        return nb_error(ctx, 409, NULL,
                        "mapping %s changed since the diagnosis: it now says %s, not %s",
                        f->bdm_uuid, now_declared, f->old_format);
    free(f->old_admin_format);
    f->old_admin_format = nb_volume_format(db, ctx, f->volume_id);
    if (nb_ctx_failed(ctx))
        return -1;
    if (nb_db_exec(db, ctx,
                   "INSERT INTO doctor_fixes (instance_uuid, bdm_uuid, volume_id, "
                   "old_connection_info, old_admin_format, request_id, created_at, outcome) "
                   "VALUES (?, ?, ?, ?, ?, ?, ?, 'applied')",
                   "sssssss", uuid, f->bdm_uuid, f->volume_id, f->old_connection_info,
                   f->old_admin_format, ctx->request_id, now) < 0)
        return -1;
    f->fix_id = nb_db_last_id(db);
    int n = nb_bdm_set_declared_format(db, ctx, uuid, f->bdm_uuid, f->new_format);
    if (n < 0)
        return -1;
    if (n != 1)
        return nb_error(ctx, 409, NULL, "the update of mapping %s changed %d rows, not exactly one",
                        f->bdm_uuid, n);
    free(f->new_connection_info);
    f->new_connection_info = nb_bdm_connection_info_text(db, ctx, uuid, f->bdm_uuid);
    if (!f->new_connection_info)
        return nb_ctx_failed(ctx) ? -1
                                  : nb_error(ctx, 500, NULL, "mapping %s vanished", f->bdm_uuid);
    if (nb_db_exec(db, ctx, "UPDATE doctor_fixes SET new_connection_info = ? WHERE id = ?", "si",
                   f->new_connection_info, f->fix_id) < 0)
        return -1;
    return nb_volume_set_format(db, ctx, f->volume_id, f->new_format);
}

int nb_dr_fix_apply(struct nb_db *db, struct nb_ctx *ctx, struct nb_dr_report *r)
{
    char now[32];
    nb_now_iso_us(now);
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    for (int i = 0; i < r->nfixes; i++) {
        if (apply_one(db, ctx, r->uuid, &r->fixes[i], now) < 0) {
            nb_db_rollback(db);
            for (int j = 0; j <= i; j++)
                r->fixes[j].fix_id = 0;
            return -1;
        }
    }
    if (nb_db_commit(db, ctx) < 0)
        return -1;
    for (int i = 0; i < r->nfixes; i++) {
        const struct nb_dr_format_fix *f = &r->fixes[i];
        NB_WARN(LOGGER, ctx, r->uuid,
                "doctor corrected connection_info.data.format of bdm %s (volume %s) from %s to "
                "%s; old connection_info kept in doctor_fixes id %lld: %s",
                f->bdm_uuid, f->volume_id, f->old_format, f->new_format, f->fix_id,
                f->old_connection_info);
    }
    return 0;
}

/* One mapping's part of the restore transaction: 1 restored, 0 left alone
 * (with why), -1 error (recorded on ctx). */
static int restore_one(struct nb_db *db, struct nb_ctx *ctx, const char *uuid,
                       const struct nb_dr_format_fix *f, char *why, size_t n)
{
    int changed = nb_bdm_restore_connection_info(db, ctx, uuid, f->bdm_uuid, f->old_connection_info,
                                                 f->new_connection_info);
    if (changed < 0)
        return -1;
    if (changed != 1) {
        snprintf(why, n,
                 "not restored: the mapping no longer holds the doctor's value "
                 "(changed since the fix); left as it is");
        return 0;
    }
    /* the volume's format as it was before the fix (none: cleared) */
    return nb_volume_set_format(db, ctx, f->volume_id, f->old_admin_format) < 0 ? -1 : 1;
}

int nb_dr_fix_restore(struct nb_db *db, struct nb_ctx *ctx, struct nb_dr_report *r, const char *why)
{
    char now[32];
    nb_now_iso_us(now);
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    int failed = 0;
    for (int i = 0; i < r->nfixes; i++) {
        const struct nb_dr_format_fix *f = &r->fixes[i];
        if (!f->fix_id || !f->new_connection_info)
            continue;
        char left[300] = "";
        int rc = restore_one(db, ctx, r->uuid, f, left, sizeof(left));
        if (rc < 0) {
            nb_db_rollback(db);
            return -1;
        }
        _cleanup_free_ char *msg = nb_strdup_printf("%s%s%s", why, rc ? "" : "; ", left);
        if (nb_db_exec(db, ctx,
                       "UPDATE doctor_fixes SET outcome = ?, message = ?, updated_at = ? WHERE "
                       "id = ?",
                       "sssi", rc ? "rolled_back" : "rollback_failed", msg, now, f->fix_id) < 0) {
            nb_db_rollback(db);
            return -1;
        }
        fprintf(r->out, "[ROLLBACK] disk format: bdm %s volume %s %s\n", f->bdm_uuid, f->volume_id,
                rc ? "connection_info and admin metadata restored to their old values" : left);
        failed += rc == 0;
    }
    if (nb_db_commit(db, ctx) < 0)
        return -1;
    NB_WARN(LOGGER, ctx, r->uuid, "doctor rolled back its format correction: %s", why);
    return failed ? -1 : 0;
}

int nb_dr_fix_outcome(struct nb_db *db, struct nb_ctx *ctx, const struct nb_dr_report *r,
                      const char *outcome, const char *message)
{
    char now[32];
    nb_now_iso_us(now);
    for (int i = 0; i < r->nfixes; i++)
        if (r->fixes[i].fix_id &&
            nb_db_exec(db, ctx,
                       "UPDATE doctor_fixes SET outcome = ?, message = ?, updated_at = ? WHERE "
                       "id = ?",
                       "sssi", outcome, message, now, r->fixes[i].fix_id) < 0)
            return -1;
    return 0;
}

/* ---- the API side -------------------------------------------------------- */

/* Runs one action (body: its JSON text); 0 on 202, else -1 with the API's
 * reason printed. */
static int act(struct nb_dr_report *r, const struct nb_api_client *a, const char *what,
               const char *body)
{
    _cleanup_json_ json_t *req = nb_json_parse(body);
    _cleanup_free_ char *path = nb_strdup_printf("/compute/v2.1/servers/%s/action", r->uuid);
    json_t *answer = NULL;
    char err[512] = "", msg[1024];
    long status = nb_api_call(a, "POST", path, NULL, req, &answer, err, sizeof(err));
    nb_api_error_message(answer, status, msg, sizeof(msg));
    json_decref(answer);
    if (status == 202) {
        fprintf(r->out, "[FIX] %s: accepted by the API at %s (202)\n", what, a->base);
        return 0;
    }
    if (status)
        fprintf(r->out, "[FIX] %s: refused by the API at %s: %ld %s\n", what, a->base, status, msg);
    else
        fprintf(r->out, "[FIX] %s: the API at %s cannot be reached: %s\n", what, a->base, err);
    return -1;
}

/* ---- waiting for the guest ----------------------------------------------- */

/* Polls the instance row until no task runs and the server is ACTIVE with
 * power state 1 (0), it settles otherwise (-1, why set), or timeout. */
static int wait_running(struct nb_db *db, struct nb_ctx *ctx, const char *uuid, int timeout,
                        char *why, size_t n)
{
    double deadline = nb_time_mono() + timeout;
    for (;;) {
        _cleanup_json_ json_t *s = nb_instance_get(db, ctx, uuid, true);
        if (!s) {
            snprintf(why, n, "the server row cannot be read");
            return -1;
        }
        const char *vm = nb_json_str(s, "vm_state");
        const char *task = nb_json_str(s, "task_state");
        long long power = nb_json_int(s, "power_state", 0);
        if (!task || !*task) {
            if (vm && !strcmp(vm, NB_VM_ACTIVE) && power == 1)
                return 0;
            snprintf(why, n, "the reboot ended with vm_state=%s power_state=%lld", vm ? vm : "None",
                     power);
            return -1;
        }
        if (nb_time_mono() >= deadline) {
            snprintf(why, n, "no ACTIVE/power_state 1 within %d s (vm_state=%s task_state=%s)",
                     timeout, vm ? vm : "None", task);
            return -1;
        }
        usleep(500 * 1000);
    }
}

/* The latest fault's message after the fix started, into out ("" if none). */
static void new_fault(struct nb_db *db, struct nb_ctx *ctx, const char *uuid, const char *since,
                      char *out, size_t n)
{
    _cleanup_json_ json_t *f = nb_fault_latest(db, ctx, uuid, since);
    nb_strlcpy(out, f && nb_json_str(f, "message") ? nb_json_str(f, "message") : "", n);
}

static void print_saved(const struct nb_dr_report *r)
{
    for (int i = 0; i < r->nfixes; i++) {
        const struct nb_dr_format_fix *f = &r->fixes[i];
        fprintf(r->out,
                "[FIX] old connection_info of bdm %s (volume %s), kept in doctor_fixes id "
                "%lld: %s\n",
                f->bdm_uuid, f->volume_id, f->fix_id, f->old_connection_info);
        fprintf(r->out,
                "[FIX] disk format: bdm %s volume %s connection_info.data.format %s -> %s "
                "(exactly one row changed), volume_admin_metadata format %s -> %s\n",
                f->bdm_uuid, f->volume_id, f->old_format, f->new_format,
                f->old_admin_format ? f->old_admin_format : "None", f->new_format);
    }
}

/* Undoes the format correction (and a reset to active that a refused reboot
 * made pointless). Always returns -1: the fix failed. */
static int fail(struct nb_db *db, struct nb_ctx *ctx, struct nb_dr_report *r,
                const struct nb_api_client *a, bool was_reset, const char *why)
{
    fprintf(r->out, "[FIX] failed: %s; rolling back\n", why);
    struct nb_ctx rctx;
    nb_ctx_init_system(&rctx, ctx->request_id);
    if (nb_dr_fix_restore(db, &rctx, r, why) < 0)
        fprintf(r->out, "[ROLLBACK] incomplete%s%s: see table doctor_fixes\n",
                nb_ctx_failed(&rctx) ? ": " : "", nb_ctx_message(&rctx));
    if (was_reset)
        act(r, a, "os-resetState error (the reboot never ran)",
            "{\"os-resetState\": "
            "{\"state\": \"error\"}}");
    return -1;
}

int nb_dr_fix_run(struct nb_db *db, struct nb_ctx *ctx, struct nb_dr_report *r, int timeout)
{
    const char *task = nb_json_str(r->server, "task_state");
    if (task && *task) {
        fprintf(r->out,
                "[FIX] not applied: task %s is in progress on the server; run the doctor "
                "again when it has finished\n",
                task);
        return -1;
    }
    if (r->unfixable)
        fprintf(r->out,
                "[FIX] note: %d problem(s) besides disk format are not addressed by the "
                "fix\n",
                r->unfixable);
    struct nb_api_client a = {.request_id = ctx->request_id};
    if (nb_api_client_open(&a, db, ctx, TOKEN_TTL) < 0) {
        fprintf(r->out, "[FIX] not applied: cannot issue an admin token: %s\n",
                nb_ctx_message(ctx));
        return -1;
    }
    char since[32];
    nb_now_iso_us(since);
    if (nb_dr_fix_apply(db, ctx, r) < 0) {
        fprintf(r->out, "[FIX] not applied, nothing changed: %s\n", nb_ctx_message(ctx));
        return -1;
    }
    print_saved(r);
    bool reset = false;
    const char *vm = nb_json_str(r->server, "vm_state");
    if (vm && !strcmp(vm, NB_VM_ERROR)) {
        if (act(r, &a, "os-resetState active", "{\"os-resetState\": {\"state\": \"active\"}}") < 0)
            return fail(db, ctx, r, &a, false,
                        "the API did not accept the reset of the server's state");
        reset = true;
    }
    if (act(r, &a, "reboot HARD", "{\"reboot\": {\"type\": \"HARD\"}}") < 0)
        return fail(db, ctx, r, &a, reset, "the API did not accept the hard reboot");
    fprintf(r->out, "[FIX] waiting up to %d s for ACTIVE with power_state 1\n", timeout);
    char why[512], fault[1024];
    if (wait_running(db, ctx, r->uuid, timeout, why, sizeof(why)) < 0) {
        new_fault(db, ctx, r->uuid, since, fault, sizeof(fault));
        char full[1600];
        snprintf(full, sizeof(full), "%s%s%s", why, *fault ? "; fault: " : "", fault);
        return fail(db, ctx, r, &a, false, full);
    }
    fprintf(r->out, "[FIX] the server is ACTIVE with power_state 1 (RUNNING)\n");
    nb_dr_fix_outcome(db, ctx, r, "fixed", NULL);
    NB_INFO(LOGGER, ctx, r->uuid, "doctor fix succeeded: the server is ACTIVE and running");
    return 0;
}
