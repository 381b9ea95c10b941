/* server_actions.c - POST /compute/v2.1/servers/{id}/action: os-start,
 * os-stop, reboot, lock, unlock, os-resetState, pause, unpause, suspend,
 * resume, os-getConsoleOutput and createImage (server_snapshot.c), as Nova's servers.py,
 * lock_server.py, admin_actions.py, pause_server.py, suspend_server.py and console_output.py with
 * compute/api.py's state checks.
 *
 * Each accepted action sets the instance's task state in the API (so that
 * clients polling for it see the change at once), records an instance
 * action under the request ID in the same transaction, and then casts the
 * work to the conductor (compute/rpc/conductor_api.h). os-getConsoleOutput
 * instead asks the instance's host and answers 200 with the text. Nova
 * actions nubo does not implement yet are refused with 400 rather than
 * pretended. */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "compute/api/api.h"
#include "compute/api/instances.h"
#include "compute/api/server_actions.h"
#include "compute/api/server_moves.h"
#include "compute/api/server_rebuild.h"
#include "compute/api/server_resize.h"
#include "compute/api/server_snapshot.h"
#include "compute/api/validate.h"
#include "compute/compute.h"
#include "compute/objects/instance.h"
#include "compute/objects/migration.h"
#include "compute/rpc/compute_api.h"
#include "image/image.h"
#include "compute/rpc/conductor_api.h"
#include "db/db.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool nb_srv_in_set(const char *v, const char *const *set)
{
    for (; *set; set++)
        if (!strcmp(v ? v : "", *set))
            return true;
    return false;
}

int nb_srv_check_state(struct nb_ctx *ctx, const json_t *inst, const char *action,
                       const struct nb_srv_state_rule *rule)
{
    const char *uuid = nb_json_str(inst, "uuid");
    const char *vm = nb_json_str(inst, "vm_state");
    const char *task = nb_json_str(inst, "task_state");
    if (rule->vm && !nb_srv_in_set(vm, rule->vm))
        return nb_srv_invalid_state(ctx, action, uuid, "vm_state", vm);
    if (rule->task && !nb_srv_in_set(task, rule->task))
        return nb_srv_invalid_state(ctx, action, uuid, "task_state", task);
    if (rule->must_have_launched && !nb_json_str(inst, "launched_at"))
        return nb_srv_invalid_state(ctx, action, uuid, "launched_at", NULL);
    return 0;
}

int nb_srv_check_host(struct nb_ctx *ctx, const json_t *inst)
{
    const char *host = nb_json_str(inst, "host");
    if (!host || !*host)
        return nb_error(ctx, 409, NULL, "Instance %s is not ready", nb_json_str(inst, "uuid"));
    return 0;
}

int nb_srv_begin_task(struct nb_ctx *ctx, const json_t *inst, const char *action_name,
                      const char *message_action, const char *task_state,
                      const char *const *expected_tasks, bool reset_progress)
{
    struct nb_db *db = nb_srv_db();
    const char *uuid = nb_json_str(inst, "uuid");
    const char *cur = nb_json_str(inst, "task_state");
    if (!nb_srv_in_set(cur, expected_tasks))
        return nb_srv_invalid_state(ctx, message_action, uuid, "task_state", cur);
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    int n = (int)nb_instance_transition(db, ctx, uuid,
                                        &(struct nb_instance_change){
                                            .expect_vm = {nb_json_str(inst, "vm_state")},
                                            .expect_task = {cur ? cur : NB_NONE},
                                            .task_state = task_state,
                                            .reset_progress = reset_progress,
                                        },
                                        NULL);
    if (n < 0 ||
        (n == 0 && nb_srv_invalid_state(ctx, message_action, uuid, "task_state",
                                        "(changed meanwhile)") < 0) ||
        nb_action_start(db, ctx, uuid, action_name) < 0) {
        nb_db_rollback(db);
        return -1;
    }
    return nb_db_commit(db, ctx);
}

#define NOT_SENT "The compute conductor is not available."
#define NOT_SENT_LATE                                                                              \
    "The request was accepted but could not be sent to the compute conductor (the message bus "    \
    "was unreachable): it was undone."

/* nb_bus_undo_fn of the API's requests (nb_srv_undo): data {"task": the
 * task state the API set, "migration": the status the migration of
 * args' migration_uuid goes back to (or to error), "migration_from": the
 * status it must still have (absent: any), "image_ref": the image the
 * instance had (a rebuild), "drop_image": args' image_id goes (a
 * snapshot)}. Each step only while the record is as the API left it, so
 * it never undoes what a conductor did. */
static void undo_request(struct nb_ctx *ctx, json_t *args, json_t *data, bool late)
{
    struct nb_db *db = nb_srv_db();
    const char *uuid = nb_json_str(args, "uuid");
    const char *task = nb_json_str(data, "task");
    const char *mig = nb_json_str(args, "migration_uuid");
    const char *mig_status = nb_json_str(data, "migration");
    if (!uuid)
        return;
    if (mig && mig_status)
        nb_migration_set_status(db, ctx, mig, mig_status, nb_json_str(data, "migration_from"));
    nb_ctx_clear_error(ctx);
    int n = 0;
    if (task)
        n = (int)nb_instance_transition(db, ctx, uuid,
                                        &(struct nb_instance_change){
                                            .expect_task = {task},
                                            .task_state = NB_NONE,
                                            .image_ref = nb_json_str(data, "image_ref"),
                                        },
                                        NULL);
    nb_ctx_clear_error(ctx);
    const char *image = nb_json_str(args, "image_id");
    if (image && json_is_true(json_object_get(data, "drop_image")) &&
        nb_image_delete(ctx, image) < 0)
        NB_WARN("nubo.compute.api", ctx, uuid, "could not delete image %s: %s", image,
                nb_ctx_message(ctx));
    nb_ctx_clear_error(ctx);
    if (late && n == 1)
        nb_fault_add(db, ctx, uuid, 503, NOT_SENT_LATE, NOT_SENT_LATE, NULL);
    nb_ctx_clear_error(ctx);
    nb_action_finish(db, ctx, uuid, late ? NOT_SENT_LATE : NOT_SENT);
    NB_ERROR("nubo.compute.api", ctx, uuid, "%s%s%s undone: %s", task ? "task " : "",
             task ? task : "request", n == 1 ? "" : " (already changed)",
             late ? "never sent to the conductor" : "no conductor to send it to");
}

struct nb_bus_undo nb_srv_undo(const char *task, const char *migration, const char *migration_from)
{
    return (struct nb_bus_undo){undo_request,
                                json_pack("{s:s?, s:s?, s:s?}", "task", task, "migration",
                                          migration, "migration_from", migration_from)};
}

int nb_srv_not_sent(struct nb_ctx *ctx, const char *uuid, const char *method)
{
    NB_ERROR("nubo.compute.api", ctx, uuid, "no conductor listening for %s", method);
    return nb_error(ctx, 503, NULL, NOT_SENT);
}

/* Casts the power action op ("start", "stop", "reboot" with reboot_type,
 * "pause", …) of the instance to the conductor, undone to task (the one
 * the API set) if it is never sent; 503 when none listens. */
static int cast_conductor(struct nb_ctx *ctx, const char *op, const char *uuid,
                          const char *reboot_type, const char *task)
{
    if (nb_conductor_power_action(ctx, uuid, op, reboot_type, nb_srv_undo(task, NULL, NULL)) < 0)
        return nb_srv_not_sent(ctx, uuid, op);
    return 0;
}

const char *const nb_srv_none_only[] = {"", NULL};

static int do_start(struct nb_ctx *ctx, json_t *inst, json_t *args)
{
    (void)args;
    static const char *const vm[] = {NB_VM_STOPPED, NULL};
    const struct nb_srv_state_rule rule = {vm, nb_srv_none_only, true};
    if (nb_srv_policy(ctx, "os_compute_api:servers:start",
                      nb_srv_is_member_of(ctx, nb_json_str(inst, "project_id"))) < 0 ||
        nb_srv_check_lock(ctx, inst) < 0 || nb_srv_check_host(ctx, inst) < 0 ||
        nb_srv_check_state(ctx, inst, "start", &rule) < 0 ||
        nb_srv_begin_task(ctx, inst, "start", "start", NB_TASK_POWERING_ON, nb_srv_none_only,
                          false) < 0)
        return -1;
    return cast_conductor(ctx, "start", nb_json_str(inst, "uuid"), NULL, NB_TASK_POWERING_ON);
}

static int do_stop(struct nb_ctx *ctx, json_t *inst, json_t *args)
{
    (void)args;
    static const char *const vm[] = {NB_VM_ACTIVE, NB_VM_ERROR, NULL};
    const struct nb_srv_state_rule rule = {vm, nb_srv_none_only, true};
    if (nb_srv_policy(ctx, "os_compute_api:servers:stop",
                      nb_srv_is_member_of(ctx, nb_json_str(inst, "project_id"))) < 0 ||
        nb_srv_check_lock(ctx, inst) < 0 || nb_srv_check_host(ctx, inst) < 0 ||
        nb_srv_check_state(ctx, inst, "stop", &rule) < 0 ||
        nb_srv_begin_task(ctx, inst, "stop", "stop", NB_TASK_POWERING_OFF, nb_srv_none_only, true) <
            0)
        return -1;
    return cast_conductor(ctx, "stop", nb_json_str(inst, "uuid"), NULL, NB_TASK_POWERING_OFF);
}

static int validate_reboot(struct nb_ctx *ctx, json_t *args, const char **type)
{
    static const char *const keys[] = {"type", NULL};
    if (!json_is_object(args))
        return nb_srv_bad(ctx, "reboot", args, "is not of type 'object'");
    json_t *t = json_object_get(args, "type");
    if (!t)
        return nb_error(ctx, 400, NULL,
                        "Invalid input for field/attribute reboot. Value: {...}. 'type' is a "
                        "required property");
    if (nb_res_only_keys(ctx, "reboot", args, keys) < 0)
        return -1;
    static const char *const ok[] = {"HARD", "Hard", "hard", "SOFT", "Soft", "soft", NULL};
    if (!json_is_string(t) || !nb_srv_in_set(json_string_value(t), ok))
        return nb_srv_bad(ctx, "type", t,
                          "is not one of ['HARD', 'Hard', 'hard', 'SOFT', 'Soft', 'soft']");
    *type = strcasecmp(json_string_value(t), "hard") == 0 ? "HARD" : "SOFT";
    return 0;
}

static int check_reboot(struct nb_ctx *ctx, json_t *args)
{
    const char *type;
    return validate_reboot(ctx, args, &type);
}

static int do_reboot(struct nb_ctx *ctx, json_t *inst, json_t *args)
{
    const char *type;
    if (validate_reboot(ctx, args, &type) < 0)
        return -1;
    bool hard = !strcmp(type, "HARD");
    static const char *const soft_vm[] = {NB_VM_ACTIVE, NULL};
    static const char *const hard_vm[] = {NB_VM_ACTIVE,    NB_VM_STOPPED, NB_VM_PAUSED,
                                          NB_VM_SUSPENDED, NB_VM_ERROR,   NULL};
    /* task_states.ALLOW_REBOOT */
    static const char *const hard_tasks[] = {"",
                                             "rebooting",
                                             "reboot_pending",
                                             "reboot_started",
                                             "resuming",
                                             "rebooting_hard",
                                             "unpausing",
                                             "pausing",
                                             "suspending",
                                             NULL};
    const struct nb_srv_state_rule rule = {hard ? hard_vm : soft_vm,
                                           hard ? hard_tasks : nb_srv_none_only, true};
    if (nb_srv_policy(ctx, "os_compute_api:servers:reboot",
                      nb_srv_is_member_of(ctx, nb_json_str(inst, "project_id"))) < 0 ||
        nb_srv_check_lock(ctx, inst) < 0 || nb_srv_check_state(ctx, inst, "reboot", &rule) < 0 ||
        nb_srv_begin_task(ctx, inst, "reboot", "reboot",
                          hard ? NB_TASK_REBOOTING_HARD : NB_TASK_REBOOTING, rule.task, false) < 0)
        return -1;
    return cast_conductor(ctx, "reboot", nb_json_str(inst, "uuid"), type,
                          hard ? NB_TASK_REBOOTING_HARD : NB_TASK_REBOOTING);
}

/* pause, unpause, suspend, resume: Nova's pause_server.py and
 * suspend_server.py over compute/api.py. One vm_state allowed, task state
 * None, launched; the task state set here and the rest cast to the
 * conductor. */
struct simple_action {
    const char *name;   /* action, message and conductor power action, e.g. "pause" */
    const char *policy; /* rule name */
    const char *vm;     /* the one vm_state allowed */
    const char *task;   /* task state while it runs */
};

static const struct simple_action pause_action = {"pause", "os_compute_api:os-pause-server:pause",
                                                  NB_VM_ACTIVE, NB_TASK_PAUSING};
static const struct simple_action unpause_action = {
    "unpause", "os_compute_api:os-pause-server:unpause", NB_VM_PAUSED, NB_TASK_UNPAUSING};
static const struct simple_action suspend_action = {
    "suspend", "os_compute_api:os-suspend-server:suspend", NB_VM_ACTIVE, NB_TASK_SUSPENDING};
static const struct simple_action resume_action = {
    "resume", "os_compute_api:os-suspend-server:resume", NB_VM_SUSPENDED, NB_TASK_RESUMING};

static int simple(struct nb_ctx *ctx, json_t *inst, const struct simple_action *a)
{
    const char *const vm[] = {a->vm, NULL};
    const struct nb_srv_state_rule rule = {vm, nb_srv_none_only, true};
    if (nb_srv_policy(ctx, a->policy, nb_srv_is_member_of(ctx, nb_json_str(inst, "project_id"))) <
            0 ||
        nb_srv_check_lock(ctx, inst) < 0 || nb_srv_check_state(ctx, inst, a->name, &rule) < 0 ||
        nb_srv_begin_task(ctx, inst, a->name, a->name, a->task, nb_srv_none_only, false) < 0)
        return -1;
    return cast_conductor(ctx, a->name, nb_json_str(inst, "uuid"), NULL, a->task);
}

static int do_pause(struct nb_ctx *ctx, json_t *inst, json_t *args)
{
    (void)args;
    return simple(ctx, inst, &pause_action);
}

static int do_unpause(struct nb_ctx *ctx, json_t *inst, json_t *args)
{
    (void)args;
    return simple(ctx, inst, &unpause_action);
}

static int do_suspend(struct nb_ctx *ctx, json_t *inst, json_t *args)
{
    (void)args;
    return simple(ctx, inst, &suspend_action);
}

static int do_resume(struct nb_ctx *ctx, json_t *inst, json_t *args)
{
    (void)args;
    return simple(ctx, inst, &resume_action);
}

/* Nova's console_output schema: an object with at most "length", which is
 * an integer >= -1, a string matching ^-?[0-9]+$, or null. */
static int check_console_output(struct nb_ctx *ctx, json_t *args)
{
    static const char *const keys[] = {"length", NULL};
    if (!json_is_object(args))
        return nb_srv_bad(ctx, "os-getConsoleOutput", args, "is not of type 'object'");
    if (nb_res_only_keys(ctx, "os-getConsoleOutput", args, keys) < 0)
        return -1;
    json_t *l = json_object_get(args, "length");
    if (!l || json_is_null(l))
        return 0;
    if (json_is_integer(l)) {
        if (json_integer_value(l) < -1)
            return nb_srv_bad(ctx, "length", l, "is less than the minimum of -1");
        return 0;
    }
    if (!json_is_string(l))
        return nb_srv_bad(ctx, "length", l, "is not of type 'integer', 'string', 'null'");
    const char *p = json_string_value(l);
    if (*p == '-')
        p++;
    bool digits = *p != '\0';
    for (; *p; p++)
        digits = digits && *p >= '0' && *p <= '9';
    if (!digits)
        return nb_srv_bad(ctx, "length", l, "does not match '^-?[0-9]+$'");
    return 0;
}

/* The checked length as the agent takes it: a number of lines, or -1
 * (null, absent, or negative: the whole log; the schema's minimum does
 * not apply to strings, so "-5" arrives here too). */
static long long console_length(json_t *args)
{
    json_t *l = json_object_get(args, "length");
    long long n = -1;
    if (json_is_integer(l))
        n = json_integer_value(l);
    else if (json_is_string(l))
        n = strtoll(json_string_value(l), NULL, 10);
    return n < 0 ? -1 : n;
}

/* Nova drops the control characters a console writes (all of
 * \x00-\x08 and \x0b-\x1f: tab and newline stay) and decodes the log as
 * ASCII with replacement: every byte above 0x7f becomes U+FFFD. New
 * string. */
static char *console_clean(const char *in)
{
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)in; *p; p++)
        n += *p >= 0x80 ? 3 : 1;
    char *out = malloc(n + 1), *o = out;
    for (const unsigned char *p = (const unsigned char *)in; *p; p++) {
        if (*p >= 0x80) {
            memcpy(o, "\xef\xbf\xbd", 3);
            o += 3;
        } else if (*p >= 0x20 || *p == '\t' || *p == '\n' || *p == 0x7f) {
            *o++ = (char)*p;
        }
    }
    *o = '\0';
    return out;
}

/* os-getConsoleOutput: Nova's API asks the instance's host directly
 * (compute.<host> get_console_output, a call). 409 when the instance has
 * no host; the agent's 404 (no guest or no log) and 501 (driver without
 * console logs) pass through with Nova's messages. */
static json_t *do_console_output(struct nb_ctx *ctx, json_t *inst, json_t *args)
{
    const char *uuid = nb_json_str(inst, "uuid");
    if (nb_srv_policy(ctx, "os_compute_api:os-console-output",
                      nb_srv_is_member_of(ctx, nb_json_str(inst, "project_id"))) < 0 ||
        nb_srv_check_host(ctx, inst) < 0)
        return NULL;
    const char *host = nb_json_str(inst, "host");
    long long length = console_length(args);
    struct nb_ctx sub; /* same identity and request ID, own error slot */
    nb_ctx_child(&sub, ctx);
    int timeout_ms = (int)nb_conf_int("DEFAULT", "rpc_response_timeout", 60) * 1000;
    _cleanup_json_ json_t *r = nb_compute_get_console_output(&sub, host, uuid, length, timeout_ms);
    const char *output = nb_json_str(r, "output");
    if (output) {
        _cleanup_free_ char *clean = console_clean(output);
        return json_pack("{s:s}", "output", clean);
    }
    if (!r) {
        NB_ERROR("nubo.compute.api", ctx, uuid, "compute service of %s did not answer: %s", host,
                 nb_ctx_message(&sub));
        nb_error(ctx, 503, NULL, "The compute service of the instance's host is not available.");
        return NULL;
    }
    int code = (int)nb_json_int(r, "code", 404);
    NB_INFO("nubo.compute.api", ctx, uuid, "no console output from %s: %s", host,
            nb_json_str(r, "error") ? nb_json_str(r, "error") : "(no reason)");
    if (code == 501)
        nb_error(ctx, 501, NULL, "The requested functionality is not supported.");
    else
        nb_error(ctx, 404, NULL, "Guest does not have a console available.");
    return NULL;
}

static int check_reset_state(struct nb_ctx *ctx, json_t *args)
{
    static const char *const keys[] = {"state", NULL};
    if (!json_is_object(args))
        return nb_srv_bad(ctx, "os-resetState", args, "is not of type 'object'");
    json_t *st = json_object_get(args, "state");
    if (!st)
        return nb_error(ctx, 400, NULL,
                        "Invalid input for field/attribute os-resetState. Value: {...}. 'state' "
                        "is a required property");
    if (nb_res_only_keys(ctx, "os-resetState", args, keys) < 0)
        return -1;
    const char *state = json_string_value(st);
    if (!state || (strcmp(state, "active") && strcmp(state, "error")))
        return nb_srv_bad(ctx, "state", st, "is not one of ['active', 'error']");
    return 0;
}

static int do_reset_state(struct nb_ctx *ctx, json_t *inst, json_t *args)
{
    const char *state = json_string_value(json_object_get(args, "state"));
    if (nb_srv_policy(ctx, "os_compute_api:os-admin-actions:reset_state", ctx->is_admin) < 0)
        return -1;
    struct nb_db *db = nb_srv_db();
    const char *uuid = nb_json_str(inst, "uuid");
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    if (nb_action_start(db, ctx, uuid, "resetState") < 0 ||
        nb_instance_transition(db, ctx, uuid,
                               &(struct nb_instance_change){
                                   .vm_state = !strcmp(state, "error") ? NB_VM_ERROR : NB_VM_ACTIVE,
                                   .task_state = NB_NONE},
                               NULL) < 0 ||
        nb_action_finish(db, ctx, uuid, NULL) < 0) {
        nb_db_rollback(db);
        return -1;
    }
    if (nb_db_commit(db, ctx) < 0)
        return -1;
    NB_INFO("nubo.compute.api", ctx, uuid, "State of instance reset to %s by an administrator",
            state);
    return 0;
}

/* Records lock/unlock as Nova's wrap_instance_event(prefix='api') does:
 * action, event api_<name>, the change, event result; one transaction. */
static int lock_change(struct nb_ctx *ctx, const json_t *inst, const char *name, bool lock,
                       const char *locked_by, const char *reason)
{
    struct nb_db *db = nb_srv_db();
    const char *uuid = nb_json_str(inst, "uuid");
    char event[32];
    snprintf(event, sizeof(event), "api_%s", name);
    const char *host = nb_srv_env()->my_host;
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    if (nb_action_start(db, ctx, uuid, name) < 0 || nb_event_start(db, ctx, uuid, event, host) < 0)
        goto fail;
    if (nb_instance_set_lock(db, ctx, uuid, lock, locked_by, reason) < 0 ||
        nb_event_finish(db, ctx, uuid, event, "Success", NULL, NULL) < 0)
        goto fail;
    return nb_db_commit(db, ctx);
fail:
    nb_db_rollback(db);
    return -1;
}

static int check_lock(struct nb_ctx *ctx, json_t *args)
{
    if (!nb_ctx_mv_ge(ctx, 2, 73))
        return 0;
    if (!json_is_null(args) && !json_is_object(args))
        return nb_srv_bad(ctx, "lock", args, "is not of type 'object', 'null'");
    static const char *const keys[] = {"locked_reason", NULL};
    if (json_is_object(args)) {
        if (nb_res_only_keys(ctx, "lock", args, keys) < 0)
            return -1;
        json_t *r = json_object_get(args, "locked_reason");
        if (r && nb_srv_check_string(ctx, "locked_reason", r, 1, 255, false) < 0)
            return -1;
    }
    return 0;
}

static int do_lock(struct nb_ctx *ctx, json_t *inst, json_t *args)
{
    const char *reason = NULL;
    if (nb_ctx_mv_ge(ctx, 2, 73) && json_is_object(args))
        reason = json_string_value(json_object_get(args, "locked_reason"));
    const char *project = nb_json_str(inst, "project_id");
    if (nb_srv_policy(ctx, "os_compute_api:os-lock-server:lock",
                      nb_srv_is_member_of(ctx, project)) < 0)
        return -1;
    bool owner = !strcmp(project, ctx->project_id);
    if (nb_json_int(inst, "locked", 0) && owner)
        return 0;
    return lock_change(ctx, inst, "lock", true, owner ? "owner" : "admin", reason);
}

static int do_unlock(struct nb_ctx *ctx, json_t *inst, json_t *args)
{
    (void)args;
    const char *project = nb_json_str(inst, "project_id");
    if (nb_srv_policy(ctx, "os_compute_api:os-lock-server:unlock",
                      nb_srv_is_member_of(ctx, project)) < 0)
        return -1;
    /* a lock taken by an admin of another project needs unlock_override */
    bool owner = !strcmp(project, ctx->project_id);
    const char *by = nb_json_str(inst, "locked_by");
    if (by && strcmp(by, owner ? "owner" : "admin") &&
        nb_srv_policy(ctx, "os_compute_api:os-lock-server:unlock:unlock_override", ctx->is_admin) <
            0)
        return -1;
    return lock_change(ctx, inst, "unlock", false, NULL, NULL);
}

typedef int (*action_fn)(struct nb_ctx *ctx, json_t *inst, json_t *args);
typedef int (*check_fn)(struct nb_ctx *ctx, json_t *args);
/* An action that answers 200 with a body (new ref) instead of 202; NULL
 * after nb_error(). */
typedef json_t *(*query_fn)(struct nb_ctx *ctx, json_t *inst, json_t *args);

/* An action that writes its own 202 answer (a body or headers). */
typedef int (*respond_fn)(struct nb_ctx *ctx, json_t *inst, json_t *args, struct nb_resp *resp);

/* Each action: its body check (run before the server is looked up, as
 * Nova's schema decorators) and its work (fn, or query for actions with a
 * body in the answer, or respond for those that shape their answer). */
static const struct {
    const char *name;
    check_fn check;
    action_fn fn;
    query_fn query;
    respond_fn respond;
} actions[] = {
    {"os-start", NULL, do_start, NULL, NULL},
    {"os-stop", NULL, do_stop, NULL, NULL},
    {"reboot", check_reboot, do_reboot, NULL, NULL},
    {"lock", check_lock, do_lock, NULL, NULL},
    {"unlock", NULL, do_unlock, NULL, NULL},
    {"os-resetState", check_reset_state, do_reset_state, NULL, NULL},
    {"pause", NULL, do_pause, NULL, NULL},
    {"unpause", NULL, do_unpause, NULL, NULL},
    {"suspend", NULL, do_suspend, NULL, NULL},
    {"resume", NULL, do_resume, NULL, NULL},
    {"os-getConsoleOutput", check_console_output, NULL, do_console_output, NULL},
    {"createImage", nb_srv_check_create_image, NULL, NULL, nb_srv_create_image},
    {"os-migrateLive", nb_srv_check_live_migrate, nb_srv_live_migrate, NULL, NULL},
    {"migrate", nb_srv_check_migrate, nb_srv_migrate, NULL, NULL},
    {"resize", nb_srv_check_resize, nb_srv_resize, NULL, NULL},
    {"confirmResize", NULL, NULL, NULL, nb_srv_confirm_resize},
    {"revertResize", NULL, nb_srv_revert_resize, NULL, NULL},
    {"rebuild", nb_srv_check_rebuild, NULL, NULL, nb_srv_rebuild},
    {"evacuate", nb_srv_check_evacuate, NULL, NULL, nb_srv_evacuate},
    {"addSecurityGroup", NULL, nb_srv_add_security_group, NULL, NULL},
    {"removeSecurityGroup", NULL, nb_srv_remove_security_group, NULL, NULL},
    {"addFloatingIp", nb_srv_check_add_floating_ip, nb_srv_add_floating_ip, NULL, NULL},
    {"removeFloatingIp", nb_srv_check_remove_floating_ip, nb_srv_remove_floating_ip, NULL, NULL},
};

/* Nova's other server actions: known, but not available in nubo yet. */
static const char *const not_yet[] = {"addFixedIp",
                                      "removeFixedIp",
                                      "changePassword",
                                      "createBackup",
                                      "rescue",
                                      "unrescue",
                                      "shelve",
                                      "shelveOffload",
                                      "unshelve",
                                      "os-getVNCConsole",
                                      "os-getSPICEConsole",
                                      "os-getRDPConsole",
                                      "os-getSerialConsole",
                                      "injectNetworkInfo",
                                      "forceDelete",
                                      "restore",
                                      "trigger_crash_dump",
                                      NULL};

static int h_server_action(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    json_t *body = req->json;
    if (!json_is_object(body) || json_object_size(body) != 1)
        return nb_error(ctx, 400, NULL, "Malformed request body");
    const char *name = json_object_iter_key(json_object_iter(body));
    json_t *args = json_object_get(body, name);
    if (!strcmp(name, "resetNetwork"))
        return nb_error(ctx, 410, NULL, "Gone");
    action_fn fn = NULL;
    check_fn check = NULL;
    query_fn query = NULL;
    respond_fn respond = NULL;
    for (size_t i = 0; i < sizeof(actions) / sizeof(actions[0]); i++) {
        if (!strcmp(actions[i].name, name)) {
            fn = actions[i].fn;
            check = actions[i].check;
            query = actions[i].query;
            respond = actions[i].respond;
        }
    }
    if (!fn && !query && !respond) {
        if (nb_srv_in_set(name, not_yet))
            return nb_error(ctx, 400, NULL, "The '%s' server action is not supported by nubo yet.",
                            name);
        return nb_error(ctx, 400, NULL, "There is no such action: %s", name);
    }
    if (check && check(ctx, args) < 0)
        return -1;
    json_t *inst = nb_srv_instance_get(ctx, nb_req_param(req, "server_id"), false);
    if (!inst)
        return -1;
    if (query) {
        json_t *body_out = query(ctx, inst, args);
        json_decref(inst);
        return body_out ? nb_resp_json(resp, 200, body_out) : -1;
    }
    int rc = respond ? respond(ctx, inst, args, resp) : fn(ctx, inst, args);
    json_decref(inst);
    if (respond)
        return rc;
    return rc < 0 ? -1 : nb_resp_empty(resp, 202);
}

int nb_compute_server_actions_init(struct nb_env *env)
{
    (void)env;
    nb_http_route("POST", "/compute/v2.1/servers/{server_id}/action", h_server_action, 0);
    nb_compute_server_moves_init(env);
    return 0;
}
