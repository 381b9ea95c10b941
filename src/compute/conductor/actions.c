/* actions.c - start, stop, reboot, pause, unpause, suspend, resume and
 * delete of a built instance, and the power-state sync reported by the
 * agents.
 *
 * Each action: instance action (the API's, or one made here), task state
 * set (if the API has not), event started with the host, cast to the
 * host's agent; the agent's op_result ends it: the new states committed,
 * then the event finished. Outcomes follow Nova: a failed start leaves the
 * server SHUTOFF with a fault, a failed stop leaves it as it was, a failed
 * reboot leaves it ACTIVE if the guest still runs and ERROR otherwise, a
 * failed pause or unpause leaves it as it was, a failed suspend or resume
 * sets ERROR (unless the guest was never touched: driver without the op,
 * agent unreachable), a failed terminate sets ERROR. */
#include "common/cleanup.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "compute/compute.h"
#include "compute/conductor/internal.h"
#include "compute/objects/instance.h"
#include "compute/rpc/compute_api.h"
#include "db/db.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One power action. task: its working task state (reboot: set by
 * claim_task from the reboot type); accepted: the task states, besides
 * None, a claim may take over (the API's); claim_vm: the vm_state the
 * instance must be in when claimed (NULL: any); vm_ok: the vm_state after
 * success (NULL: reboot's rule); revert_to_error: a failure after the guest
 * may have changed sets ERROR (Nova's _error_out_instance_on_exception). */
struct power_op {
    const char *method; /* bus method, conductor and agent alike */
    const char *op;     /* "start", "stop", "reboot", "pause", … */
    const char *action;
    const char *event;
    const char *task;
    const char *accepted[NB_EXPECT_MAX - 1];
    const char *claim_vm;
    const char *vm_ok;
    bool revert_to_error;
};

#define REBOOT_TASKS                                                                               \
    {                                                                                              \
        NB_TASK_REBOOTING, NB_TASK_REBOOTING_HARD, NB_TASK_REBOOT_PENDING,                         \
            NB_TASK_REBOOT_PENDING_HARD, NB_TASK_REBOOT_STARTED, NB_TASK_REBOOT_STARTED_HARD       \
    }

static const struct power_op power_ops[] = {
    {"start_instance",
     "start",
     "start",
     EV_START,
     NB_TASK_POWERING_ON,
     {NB_TASK_POWERING_ON},
     NULL,
     NB_VM_ACTIVE,
     false},
    {"stop_instance",
     "stop",
     "stop",
     EV_STOP,
     NB_TASK_POWERING_OFF,
     {NB_TASK_POWERING_OFF},
     NULL,
     NB_VM_STOPPED,
     false},
    {"reboot_instance", "reboot", "reboot", EV_REBOOT, NULL, REBOOT_TASKS, NULL, NULL, false},
    {"pause_instance",
     "pause",
     "pause",
     EV_PAUSE,
     NB_TASK_PAUSING,
     {NB_TASK_PAUSING},
     NB_VM_ACTIVE,
     NB_VM_PAUSED,
     false},
    {"unpause_instance",
     "unpause",
     "unpause",
     EV_UNPAUSE,
     NB_TASK_UNPAUSING,
     {NB_TASK_UNPAUSING},
     NB_VM_PAUSED,
     NB_VM_ACTIVE,
     false},
    {"suspend_instance",
     "suspend",
     "suspend",
     EV_SUSPEND,
     NB_TASK_SUSPENDING,
     {NB_TASK_SUSPENDING},
     NB_VM_ACTIVE,
     NB_VM_SUSPENDED,
     true},
    {"resume_instance",
     "resume",
     "resume",
     EV_RESUME,
     NB_TASK_RESUMING,
     {NB_TASK_RESUMING},
     NB_VM_SUSPENDED,
     NB_VM_ACTIVE,
     true},
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
 * task holds it (or, for ops with a claim_vm, the vm_state moved on).
 * 1 claimed, 0 busy/gone (found: what holds it), -1 error. */
static int claim_task(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                      const struct power_op *op, bool hard, const char **task_out,
                      struct nb_instance_found *found)
{
    const char *task = op->task;
    if (!task)
        task = hard ? NB_TASK_REBOOT_STARTED_HARD : NB_TASK_REBOOT_STARTED;
    *task_out = task;
    struct nb_instance_change ch = {.task_state = task, .expect_vm = {op->claim_vm}};
    ch.expect_task[0] = NB_NONE;
    memcpy(ch.expect_task + 1, op->accepted, sizeof(op->accepted));
    return (int)nb_instance_transition(c->db, ctx, uuid, &ch, found);
}

static void finish_power_op(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                            const char *host, const struct power_op *op, bool ok, bool untouched,
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
    cond_action_start(c, ctx, uuid, op->action);
    if (!host) {
        NB_WARN(LOG_COND, ctx, uuid, "Cannot %s an instance that has no host", op->op);
        struct nb_instance_change ch = {.task_state = NB_NONE};
        memcpy(ch.expect_task, op->accepted, sizeof(op->accepted));
        struct nb_ctx sub; /* best-effort: a failure leaves the task to the next sync */
        nb_ctx_child(&sub, ctx);
        nb_instance_transition(c->db, &sub, uuid, &ch, NULL);
        return;
    }
    const char *task = NULL;
    struct nb_instance_found found = {0};
    int n = claim_task(c, ctx, uuid, op, hard, &task, &found);
    if (n <= 0) {
        NB_WARN(LOG_COND, ctx, uuid, "Instance is busy (task_state %s); %s not done",
                found.task_state[0] ? found.task_state : "None", op->op);
        nb_ctx_clear_error(ctx); /* handled: the op is not done */
        return;
    }
    cond_event_start(c, ctx, uuid, op->event, host);
    NB_INFO(LOG_COND, ctx, uuid, "%s%s of the instance on host %s (task_state %s)",
            !strcmp(op->op, "reboot") ? (hard ? "Hard " : "Soft ") : "", op->op, host, task);
    json_t *inst = cond_instance_for_agent(c, ctx, row);
    if (nb_compute_power_action(ctx, host, op->op, inst, hard) < 0) {
        char msg[512];
        snprintf(msg, sizeof(msg), "The compute service of host %s is not reachable.", host);
        finish_power_op(c, ctx, uuid, host, op, false, true, msg,
                        (int)nb_json_int(row, "power_state", NB_POWER_NOSTATE));
    }
}

/* Ends op with the agent's outcome: the new states and power state (only
 * if the instance is still in op's task), the fault on failure, the event
 * and the action. untouched: the guest was not changed (driver without the
 * op, agent unreachable), so the vm_state stays whatever the op. */
static void finish_power_op(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                            const char *host, const struct power_op *op, bool ok, bool untouched,
                            const char *message, int power_state)
{
    /* vm_state NULL: left as it is */
    struct nb_instance_change ch = {
        .task_state = NB_NONE, .set_power_state = true, .power_state = power_state};
    if (op->task) {
        ch.expect_task[0] = op->task;
        ch.vm_state = ok ? op->vm_ok : (op->revert_to_error && !untouched ? NB_VM_ERROR : NULL);
    } else {
        ch.expect_task[0] = NB_TASK_REBOOT_STARTED;
        ch.expect_task[1] = NB_TASK_REBOOT_STARTED_HARD;
        ch.vm_state = ok || power_state == NB_POWER_RUNNING ? NB_VM_ACTIVE : NB_VM_ERROR;
    }
    const char *vm = ch.vm_state;
    if (nb_db_begin(c->db, ctx) < 0) {
        nb_ctx_clear_error(ctx);
        return;
    }
    int n = (int)nb_instance_transition(c->db, ctx, uuid, &ch, NULL);
    if (!ok && n == 1)
        cond_fault(c, ctx, uuid, 500, message, message, host);
    cond_event_finish(c, ctx, uuid, op->event, ok, ok ? NULL : message);
    if (nb_db_commit(c->db, ctx) < 0) {
        NB_ERROR(LOG_COND, ctx, uuid, "could not record the end of %s: %s", op->op,
                 nb_ctx_message(ctx));
        nb_ctx_clear_error(ctx);
        return;
    }
    nb_ctx_clear_error(ctx); /* a failed update is a lost race (n != 1) */
    cond_action_finish(c, ctx, uuid, ok ? NULL : "Error");
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
    cond_action_start(c, ctx, uuid, "delete");
    if (nb_instance_transition(c->db, ctx, uuid,
                               &(struct nb_instance_change){.task_state = NB_TASK_DELETING},
                               NULL) < 0)
        nb_ctx_clear_error(ctx); /* the delete goes on without the task state */
    cond_resize_on_delete(c, ctx, row);
    const char *host = nb_json_str(row, "host");
    if (!host) {
        if (cond_local_delete(c, ctx, uuid) < 0)
            nb_ctx_clear_error(ctx); /* logged; run again by the next delete */
        return;
    }
    cond_event_start(c, ctx, uuid, EV_TERMINATE, host);
    json_t *inst = cond_instance_for_agent(c, ctx, row);
    if (nb_compute_terminate_instance(ctx, host, inst) < 0) {
        NB_WARN(LOG_COND, ctx, uuid,
                "The compute service of host %s is not reachable: deleting the instance record "
                "only; a guest may remain on %s",
                host, host);
        cond_event_finish(c, ctx, uuid, EV_TERMINATE, true, NULL);
        if (cond_local_delete(c, ctx, uuid) < 0)
            nb_ctx_clear_error(ctx); /* logged; run again by the next delete */
    }
}

/* The agent's answer to terminate_instance. */
static void finish_terminate(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                             const char *host, bool ok, const char *message)
{
    if (ok) {
        cond_event_finish(c, ctx, uuid, EV_TERMINATE, true, NULL);
        if (cond_local_delete(c, ctx, uuid) < 0)
            nb_ctx_clear_error(ctx); /* logged; run again by the next delete */
        return;
    }
    enum nb_transition n = nb_instance_transition(
        c->db, ctx, uuid,
        &(struct nb_instance_change){.vm_state = NB_VM_ERROR, .task_state = NB_NONE}, NULL);
    if (n == NB_TRANSITION_MOVED)
        cond_fault(c, ctx, uuid, 500, message, message, host);
    cond_event_finish(c, ctx, uuid, EV_TERMINATE, false, message);
    cond_action_finish(c, ctx, uuid, "Error");
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
        finish_power_op(c, ctx, uuid, host, op, ok,
                        json_is_true(json_object_get(args, "unsupported")), msg,
                        (int)nb_json_int(args, "power_state", NB_POWER_NOSTATE));
}

/* A guest of an ACTIVE or PAUSED server found shut down behind nubo's
 * back: Nova's "stop API" call, recorded as action stop / event
 * compute_stop_instance. The guest is already off, so the states are set
 * here rather than through the agent. */
static void stopped_by_itself(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                              const char *host, const char *vm, int db_power, int power)
{
    if (!strcmp(vm, NB_VM_PAUSED))
        NB_WARN(LOG_COND, ctx, uuid,
                "Paused instance shutdown by itself. Calling the stop API. Original DB "
                "power_state: %d, current VM power_state: %d",
                db_power, power);
    else
        NB_WARN(LOG_COND, ctx, uuid,
                "Instance shutdown by itself. Calling the stop API. Current vm_state: %s, current "
                "task_state: None, original DB power_state: %d, current VM power_state: %d",
                vm, db_power, power);
    cond_action_start(c, ctx, uuid, "stop");
    cond_event_start(c, ctx, uuid, EV_STOP, host);
    int n = (int)nb_instance_transition(c->db, ctx, uuid,
                                        &(struct nb_instance_change){
                                            .expect_vm = {vm},
                                            .expect_task = {NB_NONE},
                                            .expect_host = host,
                                            .vm_state = NB_VM_STOPPED,
                                            .task_state = NB_NONE,
                                            .set_power_state = true,
                                            .power_state = NB_POWER_SHUTDOWN,
                                        },
                                        NULL);
    nb_ctx_clear_error(ctx); /* a failed update ends the stop like a lost race */
    cond_event_finish(c, ctx, uuid, EV_STOP, n == 1,
                      n == 1 ? NULL : "The instance changed state during the power sync.");
    cond_action_finish(c, ctx, uuid, n == 1 ? NULL : "Error");
}

/* Nova's stop through the agent for a guest that runs when it should not. */
static void stop_through_agent(struct conductor *c, struct nb_ctx *ctx, const char *uuid)
{
    json_t *a = json_pack("{s:s}", "uuid", uuid);
    cond_power_action(c, ctx, "stop_instance", a);
    json_decref(a);
}

/* Nova's _sync_instance_power_state, after the power state is stored:
 * what the vm_state and the guest's power state disagreeing means. */
static void resolve_power_mismatch(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                                   const char *host, const char *vm, int db_power, int power)
{
    bool down = power == NB_POWER_SHUTDOWN || power == NB_POWER_CRASHED;
    if (!strcmp(vm, NB_VM_ACTIVE)) {
        if (down) {
            stopped_by_itself(c, ctx, uuid, host, vm, db_power, power);
        } else if (power == NB_POWER_SUSPENDED) {
            NB_WARN(LOG_COND, ctx, uuid,
                    "Instance is suspended unexpectedly. Calling the stop API.");
            stop_through_agent(c, ctx, uuid);
        } else if (power == NB_POWER_PAUSED) {
            /* maybe an external tool holding the guest for a moment */
            NB_WARN(LOG_COND, ctx, uuid, "Instance is paused unexpectedly. Ignore.");
        } else if (power == NB_POWER_NOSTATE) {
            NB_WARN(LOG_COND, ctx, uuid, "Instance is unexpectedly not found. Ignore.");
        }
    } else if (!strcmp(vm, NB_VM_STOPPED)) {
        if (power != NB_POWER_NOSTATE && !down) {
            NB_WARN(LOG_COND, ctx, uuid,
                    "Instance is not stopped. Calling the stop API. Current vm_state: stopped, "
                    "current task_state: None, original DB power_state: %d, current VM "
                    "power_state: %d",
                    db_power, power);
            stop_through_agent(c, ctx, uuid);
        }
    } else if (!strcmp(vm, NB_VM_PAUSED)) {
        if (down)
            stopped_by_itself(c, ctx, uuid, host, vm, db_power, power);
    }
    /* building, suspended (its guest is shut down by design), error, …:
     * ignored, as Nova does */
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
        nb_instance_transition(c->db, ctx, uuid,
                               &(struct nb_instance_change){.expect_task = {NB_NONE},
                                                            .expect_host = host,
                                                            .set_power_state = true,
                                                            .power_state = power},
                               NULL);
        nb_ctx_clear_error(ctx); /* the next sync stores it */
        NB_INFO(LOG_COND, ctx, uuid,
                "Power state of the instance on %s: %d (was %d in the database)", host, power,
                db_power);
    }
    resolve_power_mismatch(c, ctx, uuid, host, vm, db_power, power);
}
