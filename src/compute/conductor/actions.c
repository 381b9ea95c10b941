/* actions.c - start, stop, reboot and delete of a built instance, and the
 * power-state sync reported by the agents.
 *
 * Each action: instance action (the API's, or one made here), task state
 * set (if the API has not), event started with the host, cast to the
 * host's agent; the agent's op_result ends it: the new states committed,
 * then the event finished. Outcomes follow Nova: a failed start leaves the
 * server SHUTOFF with a fault, a failed stop leaves it as it was, a failed
 * reboot leaves it ACTIVE if the guest still runs and ERROR otherwise, a
 * failed terminate sets ERROR. */
#include "bus/bus.h"
#include "common/cleanup.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "compute/compute.h"
#include "compute/conductor/internal.h"
#include "compute/virt/driver.h"
#include "db/db.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct power_op {
    const char *method; /* bus method, conductor and agent alike */
    const char *op;     /* "start", "stop", "reboot" */
    const char *action;
    const char *event;
};

static const struct power_op power_ops[] = {
    {"start_instance", "start", "start", EV_START},
    {"stop_instance", "stop", "stop", EV_STOP},
    {"reboot_instance", "reboot", "reboot", EV_REBOOT},
};

static const struct power_op *find_op(const char *key, bool by_method)
{
    for (size_t i = 0; i < sizeof(power_ops) / sizeof(power_ops[0]); i++)
        if (!strcmp(by_method ? power_ops[i].method : power_ops[i].op, key))
            return &power_ops[i];
    return NULL;
}

static const char *str_or(const char *s, const char *def)
{
    return s ? s : def;
}

/* Claims the instance for op: sets the working task state unless another
 * task holds it. 1 claimed, 0 busy/gone, -1 error. */
static int claim_task(struct conductor *c, struct nb_ctx *ctx, const char *uuid, const char *op,
                      bool hard, const char **task_out)
{
    const char *task, *accepted;
    if (!strcmp(op, "start")) {
        task = NB_TASK_POWERING_ON;
        accepted = "'powering-on'";
    } else if (!strcmp(op, "stop")) {
        task = NB_TASK_POWERING_OFF;
        accepted = "'powering-off'";
    } else {
        task = hard ? NB_TASK_REBOOT_STARTED_HARD : NB_TASK_REBOOT_STARTED;
        accepted = "'rebooting', 'rebooting_hard', 'reboot_pending', 'reboot_pending_hard', "
                   "'reboot_started', 'reboot_started_hard'";
    }
    *task_out = task;
    char now[32];
    nb_now_iso_us(now);
    _cleanup_free_ char *sql = nb_strdup_printf(
        "UPDATE instances SET task_state = ?, updated_at = ? WHERE uuid = ? AND deleted = 0 AND "
        "(task_state IS NULL OR task_state IN (%s))",
        accepted);
    int n = nb_db_exec(c->db, ctx, sql, "sss", task, now, uuid);
    return n < 0 ? -1 : n;
}

static void finish_power_op(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                            const char *host, const struct power_op *op, bool ok,
                            const char *message, int power_state);

void cond_power_action(struct conductor *c, struct nb_ctx *ctx, const char *method, json_t *args)
{
    const struct power_op *op = find_op(method, true);
    const char *uuid = nb_json_str(args, "uuid");
    _cleanup_json_ json_t *row = cond_instance_get(c, ctx, uuid);
    if (!op || !row || nb_json_int(row, "deleted", 0) != 0)
        return;
    const char *host = nb_json_str(row, "host");
    bool hard = !strcmp(str_or(nb_json_str(args, "reboot_type"), "SOFT"), "HARD");
    nb_action_start(c->db, ctx, uuid, op->action);
    cond_clear_error(ctx);
    if (!host) {
        NB_WARN(LOG_COND, ctx, uuid, "Cannot %s an instance that has no host", op->op);
        nb_db_exec(c->db, ctx,
                   "UPDATE instances SET task_state = NULL WHERE uuid = ? AND deleted = 0 AND "
                   "task_state IN ('powering-on', 'powering-off', 'rebooting', 'rebooting_hard')",
                   "s", uuid);
        cond_clear_error(ctx);
        return;
    }
    const char *task = NULL;
    int n = claim_task(c, ctx, uuid, op->op, hard, &task);
    if (n <= 0) {
        NB_WARN(LOG_COND, ctx, uuid, "Instance is busy (task_state %s); %s not done",
                str_or(nb_json_str(row, "task_state"), "None"), op->op);
        cond_clear_error(ctx);
        return;
    }
    cond_event_start(c, ctx, uuid, op->event, host);
    NB_INFO(LOG_COND, ctx, uuid, "%s%s of the instance on host %s (task_state %s)",
            !strcmp(op->op, "reboot") ? (hard ? "Hard " : "Soft ") : "", op->op, host, task);
    json_t *inst = cond_instance_for_agent(c, ctx, row);
    if (cond_cast_compute(
            c, ctx, host, op->method,
            json_pack("{s:o, s:s}", "instance", inst, "reboot_type", hard ? "HARD" : "SOFT")) < 0) {
        char msg[512];
        snprintf(msg, sizeof(msg), "The compute service of host %s is not reachable.", host);
        finish_power_op(c, ctx, uuid, host, op, false, msg,
                        (int)nb_json_int(row, "power_state", NB_POWER_NOSTATE));
    }
}

static void finish_power_op(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                            const char *host, const struct power_op *op, bool ok,
                            const char *message, int power_state)
{
    char now[32];
    nb_now_iso_us(now);
    const char *vm = NULL; /* NULL: leave vm_state as it is */
    const char *expected;
    if (!strcmp(op->op, "start")) {
        expected = "task_state = 'powering-on'";
        vm = ok ? NB_VM_ACTIVE : NULL;
    } else if (!strcmp(op->op, "stop")) {
        expected = "task_state = 'powering-off'";
        vm = ok ? NB_VM_STOPPED : NULL;
    } else {
        expected = "task_state IN ('reboot_started', 'reboot_started_hard')";
        vm = ok || power_state == NB_POWER_RUNNING ? NB_VM_ACTIVE : NB_VM_ERROR;
    }
    _cleanup_free_ char *sql = nb_strdup_printf(
        "UPDATE instances SET vm_state = COALESCE(?, vm_state), task_state = NULL, "
        "power_state = ?, updated_at = ? WHERE uuid = ? AND deleted = 0 AND %s",
        expected);
    if (nb_db_begin(c->db, ctx) < 0) {
        cond_clear_error(ctx);
        return;
    }
    int n = nb_db_exec(c->db, ctx, sql, "siss", vm, (long long)power_state, now, uuid);
    if (!ok && n == 1)
        cond_fault(c, ctx, uuid, 500, message, message, host);
    cond_event_finish(c, ctx, uuid, op->event, ok, ok ? NULL : message);
    if (nb_db_commit(c->db, ctx) < 0) {
        NB_ERROR(LOG_COND, ctx, uuid, "could not record the end of %s: %s", op->op, ctx->err_msg);
        cond_clear_error(ctx);
        return;
    }
    nb_action_finish(c->db, ctx, uuid, ok ? NULL : "Error");
    cond_clear_error(ctx);
    if (n != 1)
        NB_INFO(LOG_COND, ctx, uuid, "%s finished on %s but the instance moved on meanwhile",
                op->op, host);
    else if (ok)
        NB_INFO(LOG_COND, ctx, uuid, "Instance %s done on host %s (vm_state %s, power_state %d)",
                op->op, host, vm, power_state);
    else
        NB_WARN(LOG_COND, ctx, uuid, "Instance %s failed on host %s: %s", op->op, host, message);
}

void cond_delete_instance(struct conductor *c, struct nb_ctx *ctx, const char *uuid)
{
    _cleanup_json_ json_t *row = cond_instance_get(c, ctx, uuid);
    if (!row || nb_json_int(row, "deleted", 0) != 0)
        return;
    nb_action_start(c->db, ctx, uuid, "delete");
    char now[32];
    nb_now_iso_us(now);
    nb_db_exec(c->db, ctx,
               "UPDATE instances SET task_state = 'deleting', updated_at = ? WHERE uuid = ? AND "
               "deleted = 0",
               "ss", now, uuid);
    cond_clear_error(ctx);
    const char *host = nb_json_str(row, "host");
    if (!host) {
        cond_local_delete(c, ctx, uuid);
        cond_clear_error(ctx);
        return;
    }
    cond_event_start(c, ctx, uuid, EV_TERMINATE, host);
    json_t *inst = cond_instance_for_agent(c, ctx, row);
    if (cond_cast_compute(c, ctx, host, "terminate_instance",
                          json_pack("{s:o}", "instance", inst)) < 0) {
        NB_WARN(LOG_COND, ctx, uuid,
                "The compute service of host %s is not reachable: deleting the instance record "
                "only; a guest may remain on %s",
                host, host);
        cond_event_finish(c, ctx, uuid, EV_TERMINATE, true, NULL);
        cond_local_delete(c, ctx, uuid);
        cond_clear_error(ctx);
    }
}

/* The agent's answer to terminate_instance. */
static void finish_terminate(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                             const char *host, bool ok, const char *message)
{
    if (ok) {
        cond_event_finish(c, ctx, uuid, EV_TERMINATE, true, NULL);
        cond_local_delete(c, ctx, uuid);
        cond_clear_error(ctx);
        return;
    }
    char now[32];
    nb_now_iso_us(now);
    int n = nb_db_exec(c->db, ctx,
                       "UPDATE instances SET vm_state = 'error', task_state = NULL, updated_at = ? "
                       "WHERE uuid = ? AND deleted = 0",
                       "ss", now, uuid);
    if (n == 1)
        cond_fault(c, ctx, uuid, 500, message, message, host);
    cond_event_finish(c, ctx, uuid, EV_TERMINATE, false, message);
    nb_action_finish(c->db, ctx, uuid, "Error");
    cond_clear_error(ctx);
    NB_ERROR(LOG_COND, ctx, uuid, "Terminating the instance on %s failed: %s", host, message);
}

void cond_op_result(struct conductor *c, struct nb_ctx *ctx, json_t *args)
{
    const char *uuid = nb_json_str(args, "uuid");
    const char *host = nb_json_str(args, "host");
    const char *opname = nb_json_str(args, "op");
    bool ok = json_is_true(json_object_get(args, "ok"));
    const char *msg = str_or(nb_json_str(args, "message"), "The operation failed.");
    if (!uuid || !host || !opname)
        return;
    if (!strcmp(opname, "terminate")) {
        finish_terminate(c, ctx, uuid, host, ok, msg);
        return;
    }
    const struct power_op *op = find_op(opname, false);
    if (op)
        finish_power_op(c, ctx, uuid, host, op, ok, msg,
                        (int)nb_json_int(args, "power_state", NB_POWER_NOSTATE));
}

/* A guest found shut down behind nubo's back: Nova's "stop API" call,
 * recorded as action stop / event compute_stop_instance. */
static void stopped_by_itself(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                              const char *host, int db_power, int power)
{
    NB_WARN(LOG_COND, ctx, uuid,
            "Instance shutdown by itself. Calling the stop API. Current vm_state: active, current "
            "task_state: None, original DB power_state: %d, current VM power_state: %d",
            db_power, power);
    nb_action_start(c->db, ctx, uuid, "stop");
    cond_clear_error(ctx);
    cond_event_start(c, ctx, uuid, EV_STOP, host);
    char now[32];
    nb_now_iso_us(now);
    int n =
        nb_db_exec(c->db, ctx,
                   "UPDATE instances SET vm_state = 'stopped', power_state = 4, task_state = "
                   "NULL, updated_at = ? WHERE uuid = ? AND deleted = 0 AND vm_state = 'active' "
                   "AND task_state IS NULL AND host = ?",
                   "sss", now, uuid, host);
    cond_clear_error(ctx);
    cond_event_finish(c, ctx, uuid, EV_STOP, n == 1,
                      n == 1 ? NULL : "The instance changed state during the power sync.");
    nb_action_finish(c->db, ctx, uuid, n == 1 ? NULL : "Error");
    cond_clear_error(ctx);
}

void cond_power_sync(struct conductor *c, struct nb_ctx *ctx, json_t *args)
{
    const char *uuid = nb_json_str(args, "uuid");
    const char *host = nb_json_str(args, "host");
    int power = (int)nb_json_int(args, "power_state", NB_POWER_NOSTATE);
    _cleanup_json_ json_t *row = cond_instance_get(c, ctx, uuid);
    /* Re-check against the database now, as Nova does: a task started or a
     * move since the agent looked means the observation is stale. */
    if (!row || !host || nb_json_int(row, "deleted", 0) != 0 || nb_json_str(row, "task_state") ||
        strcmp(str_or(nb_json_str(row, "host"), ""), host))
        return;
    const char *vm = str_or(nb_json_str(row, "vm_state"), "");
    int db_power = (int)nb_json_int(row, "power_state", NB_POWER_NOSTATE);
    if (db_power != power) {
        char now[32];
        nb_now_iso_us(now);
        nb_db_exec(c->db, ctx,
                   "UPDATE instances SET power_state = ?, updated_at = ? WHERE uuid = ? AND "
                   "deleted = 0 AND task_state IS NULL AND host = ?",
                   "isss", (long long)power, now, uuid, host);
        cond_clear_error(ctx);
        NB_INFO(LOG_COND, ctx, uuid,
                "Power state of the instance on %s: %d (was %d in the database)", host, power,
                db_power);
    }
    if (!strcmp(vm, NB_VM_ACTIVE) && (power == NB_POWER_SHUTDOWN || power == NB_POWER_CRASHED)) {
        stopped_by_itself(c, ctx, uuid, host, db_power, power);
    } else if (!strcmp(vm, NB_VM_STOPPED) && power == NB_POWER_RUNNING) {
        NB_WARN(LOG_COND, ctx, uuid,
                "Instance is not stopped. Calling the stop API. Current "
                "vm_state: stopped, current VM power_state: %d",
                power);
        json_t *a = json_pack("{s:s}", "uuid", uuid);
        cond_power_action(c, ctx, "stop_instance", a);
        json_decref(a);
    }
}
