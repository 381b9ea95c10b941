/* build.c - the build workflow: schedule, networking, block device
 * mapping, spawn on the chosen host, and reschedule on a failed spawn.
 *
 *   building/scheduling --select_destinations--> host set, networking
 *     -> block_device_mapping -> spawning --cast build_and_run_instance-->
 *   agent: driver spawn --cast build_result--> active (power 1) | reschedule
 *
 * Each step is an instance action event under the request's ID (Nova's
 * conductor_schedule_and_build_instances and
 * compute__do_build_and_run_instance, and nubo's compute_networking,
 * compute_block_device_mapping, compute_spawn inside the latter). A failed
 * spawn records a fault, releases the allocation, remembers the host in
 * request_spec.retry and schedules again, up to [scheduler] max_attempts;
 * then ERROR with Nova's MaxRetriesExceeded message. No host at all: ERROR
 * with Nova's NoValidHost message and the scheduler's explanation. A failed
 * block_device_mapping step (volume creation or attach, volumes.c) aborts
 * the build without a reschedule, as Nova's BuildAbortException; so does a
 * failed networking step (ports of the Networking service, networking.c),
 * whose network_info is written to instance_info_caches in the transaction
 * that moves the build on. Every way out of a build attempt (abort, retry,
 * lost race) releases the instance's ports. */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "compute/compute.h"
#include "compute/conductor/internal.h"
#include "compute/objects/instance.h"
#include "compute/objects/request_spec.h"
#include "compute/rpc/compute_api.h"
#include "compute/rpc/scheduler_api.h"
#include "db/db.h"
#include "image/image.h"
#include "placement/placement.h"

#include "bus/bus.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A build the scheduler found no host for while the bus recovers: tried
 * again this many seconds later (bus_recovering). */
#define RECOVERING_RETRY_S 3
static atomic_int later_threads;
static atomic_bool later_stop;
static bool bus_recovering(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                           const char *error);

#define EXCEEDED_FMT                                                                               \
    "Exceeded maximum number of retries. Exhausted all hosts available for retrying build "        \
    "failures for instance %s."

/* The server group's current policy, rules and members into spec->group
 * (the group named when the API took the request; members built since
 * count for (anti-)affinity). A group deleted meanwhile: none. */
static void refresh_group(struct conductor *c, struct nb_ctx *ctx, struct nb_request_spec *spec)
{
    const char *g = nb_request_spec_group_uuid(spec);
    if (!g)
        return;
    struct nb_ctx sub; /* lookups: without them the spec has no group */
    nb_ctx_child(&sub, ctx);
    _cleanup_json_ json_t *grp = nb_db_row(c->db, &sub,
                                           "SELECT id, uuid, policy, rules FROM instance_groups "
                                           "WHERE uuid = ? AND deleted = 0",
                                           "s", g);
    json_decref(spec->group);
    spec->group = NULL;
    if (!grp)
        return;
    _cleanup_json_ json_t *rows = nb_db_rows(
        c->db, &sub, "SELECT instance_uuid FROM instance_group_member WHERE group_id = ?", "i",
        nb_json_int(grp, "id", 0));
    json_t *members = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        if (nb_json_str(r, "instance_uuid"))
            json_array_append_new(members, json_string(nb_json_str(r, "instance_uuid")));
    }
    json_t *rules = nb_json_parse(nb_json_str(grp, "rules"));
    spec->group = json_pack("{s:s?, s:s?, s:o, s:o}", "uuid", nb_json_str(grp, "uuid"), "policy",
                            nb_json_str(grp, "policy"), "rules", rules ? rules : json_object(),
                            "members", members);
}

/* The instance's stored request spec (defaults for what it lacks). */
static void request_spec_of(json_t *row, struct nb_request_spec *spec)
{
    _cleanup_json_ json_t *j = nb_json_parse(nb_json_str(row, "request_spec"));
    nb_request_spec_from_json(spec, j);
}

/* "Attempt 1 on fake-2: why" lines of the earlier failures. Caller frees. */
static char *failures_text(const struct nb_request_spec *spec)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    size_t i;
    json_t *e;
    json_array_foreach (spec->retry_failures, i, e) {
        fprintf(f, "%sAttempt %zu: %s", i ? "\n" : "", i + 1, json_string_value(e));
    }
    fclose(f);
    return buf;
}

/* The instance from task state `task` to ERROR with no task, host or
 * node, redone when its transaction lost a conflict or the database was
 * unreachable (nb_db_redo_or_wait). The transition's count, or -1. */
static int to_error(struct conductor *c, struct nb_ctx *ctx, const char *uuid, const char *task)
{
    struct nb_instance_change ch = {.expect_task = {task},
                                    .vm_state = NB_VM_ERROR,
                                    .task_state = NB_NONE,
                                    .host = NB_NONE,
                                    .node = NB_NONE};
    int n;
    for (int tries = 1; (n = (int)nb_instance_transition(c->db, ctx, uuid, &ch, NULL)) < 0 &&
                        nb_db_redo_or_wait(c->db, ctx, tries);
         tries++)
        ;
    return n;
}

/* Ends the build in ERROR while it is still scheduling: fault, events,
 * action. A concurrent delete wins (nothing to do then). */
static void fail_build(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                       const char *message, const char *details)
{
    int n = to_error(c, ctx, uuid, NB_TASK_SCHEDULING);
    nb_ctx_clear_error(ctx); /* a failed update ends the build like a lost race */
    if (n <= 0) {
        cond_event_finish(c, ctx, uuid, EV_SCHEDULE, false,
                          "The instance was deleted while it was being scheduled.");
        NB_INFO(LOG_COND, ctx, uuid, "Build abandoned: the instance is being deleted");
        return;
    }
    cond_deallocate_networks(c, ctx, uuid); /* an earlier attempt's, if any */
    cond_fault(c, ctx, uuid, 500, message, details, NULL);
    cond_event_finish(c, ctx, uuid, EV_SCHEDULE, false, details && *details ? details : message);
    cond_action_finish(c, ctx, uuid, "Error");
    _cleanup_free_ char *flat = strdup(details ? details : "");
    for (char *p = flat; *p; p++)
        if (*p == '\n')
            *p = '|';
    NB_WARN(LOG_COND, ctx, uuid, "Failed to schedule_and_build_instances: %s Details: %s", message,
            flat);
}

/* After a lost race in a build step: the build stops here, its events end
 * in Error. The delete that won releases what the instance holds. */
static void build_aborted(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                          const char *step_event)
{
    const char *why = "The instance was deleted while it was being built.";
    if (step_event)
        cond_event_finish(c, ctx, uuid, step_event, false, why);
    cond_event_finish(c, ctx, uuid, EV_BUILD, false, why);
    NB_INFO(LOG_COND, ctx, uuid, "Build stopped: the instance is being deleted");
}

/* Moves task_state from one build step to the next, ending the previous
 * step's event and starting the next one, in one transaction; with
 * network_info, the instance's info cache is written in it too. Returns 1
 * if it moved, 0 if the instance left the build meanwhile, -1 on error. */
static int next_step_once(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                          const char *host, const char *from, const char *from_event,
                          const char *to, const char *to_event, const json_t *network_info)
{
    if (nb_db_begin(c->db, ctx) < 0)
        return -1;
    int n = (int)nb_instance_transition(
        c->db, ctx, uuid, &(struct nb_instance_change){.expect_task = {from}, .task_state = to},
        NULL);
    if (n == 1 && network_info && cond_info_cache_write(c, ctx, uuid, network_info) < 0)
        n = -1;
    if (n == 1) {
        cond_event_finish(c, ctx, uuid, from_event, true, NULL);
        cond_event_start(c, ctx, uuid, to_event, host);
    }
    if (n < 0) {
        nb_db_rollback(c->db);
        return -1;
    }
    return nb_db_commit(c->db, ctx) < 0 ? -1 : n;
}

/* next_step_once, redone when its transaction lost a conflict with a
 * concurrent one (MariaDB: concurrent builds' event rows deadlock) or the
 * database was unreachable (a restart): a build must not stop in its task
 * state for that. */
static int next_step(struct conductor *c, struct nb_ctx *ctx, const char *uuid, const char *host,
                     const char *from, const char *from_event, const char *to, const char *to_event,
                     const json_t *network_info)
{
    int n;
    for (int tries = 1; (n = next_step_once(c, ctx, uuid, host, from, from_event, to, to_event,
                                            network_info)) < 0 &&
                        nb_db_redo_or_wait(c->db, ctx, tries);
         tries++)
        ;
    return n;
}

/* Hands the instance to its host's agent. */
static int cast_build(struct conductor *c, struct nb_ctx *ctx, const char *uuid, const char *host,
                      const char *node)
{
    _cleanup_json_ json_t *row = cond_instance_get(c, ctx, uuid);
    if (!row)
        return -1;
    json_t *inst = cond_instance_for_agent(c, ctx, row);
    return nb_compute_build_and_run_instance(ctx, host, inst, node);
}

static void build_failed(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                         const char *host, const char *message);
static void host_unreachable(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                             const char *host, const char *message);

/* A build step (networking, block_device_mapping) failed: Nova's
 * BuildAbortException (no reschedule). The volumes are let go
 * (_cleanup_volumes: detached, those marked delete_on_termination deleted)
 * and the ports released (_cleanup_allocated_networks), the instance goes
 * to ERROR without a host, with the fault "Build of instance <uuid>
 * aborted: <why>" (details: the service's own message, else why), and its
 * allocation is released. */
static void build_abort_step(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                             const char *host, const char *task, const char *event, const char *why,
                             const char *details)
{
    cond_cleanup_volumes(c, ctx, uuid);
    cond_deallocate_networks(c, ctx, uuid);
    _cleanup_free_ char *message = nb_strdup_printf("Build of instance %s aborted: %s", uuid, why);
    int n = to_error(c, ctx, uuid, task);
    nb_ctx_clear_error(ctx); /* a failed update stops the build like a lost race */
    if (n != 1) {
        build_aborted(c, ctx, uuid, event);
        return;
    }
    cond_fault(c, ctx, uuid, 500, message, details && *details ? details : why, host);
    cond_event_finish(c, ctx, uuid, event, false, details && *details ? details : why);
    cond_event_finish(c, ctx, uuid, EV_BUILD, false, message);
    cond_action_finish(c, ctx, uuid, "Error");
    cond_release_allocations(c, ctx, uuid, host);
    NB_ERROR(LOG_COND, ctx, uuid, "%s", message);
}

/* The networking step: ports for the requested networks, their
 * network_info cached in the transaction that moves the build on to
 * block_device_mapping. 0 when the build goes on; -1 when it stopped here
 * (allocation failed: aborted; lost race: ports released; database error:
 * logged). */
static int networking(struct conductor *c, struct nb_ctx *ctx, const char *uuid, const char *host,
                      const char *az, const struct nb_request_spec *rspec, char *why, char *details,
                      size_t n)
{
    _cleanup_json_ json_t *row = cond_instance_get(c, ctx, uuid);
    if (!row) {
        build_aborted(c, ctx, uuid, EV_NETWORKING);
        return -1;
    }
    if (!az || !*az)
        az = nb_json_str(row, "availability_zone");
    if (!az || !*az)
        az = nb_conf_str("DEFAULT", "default_availability_zone", "nova");
    _cleanup_json_ json_t *nw_info = NULL;
    if (cond_allocate_networks(c, ctx, row, host, az, rspec, &nw_info, why, details, n) < 0) {
        build_abort_step(c, ctx, uuid, host, NB_TASK_NETWORKING, EV_NETWORKING, why, details);
        return -1;
    }
    int moved = next_step(c, ctx, uuid, host, NB_TASK_NETWORKING, EV_NETWORKING, NB_TASK_BDM,
                          EV_BDM, nw_info);
    if (moved == 1)
        return 0;
    /* deleted meanwhile (its delete may have run before these ports
     * existed), or the move failed: these ports are this attempt's own */
    cond_deallocate_networks(c, ctx, uuid);
    if (moved < 0) {
        NB_ERROR(LOG_COND, ctx, uuid, "database error during the build: %s", nb_ctx_message(ctx));
        nb_ctx_clear_error(ctx);
    } else {
        build_aborted(c, ctx, uuid, EV_NETWORKING);
    }
    return -1;
}

/* The transaction that gives the instance its host: scheduling ->
 * networking, with the events. 1 moved, 0 deleted meanwhile, -1 error. */
static int move_to_host(struct conductor *c, struct nb_ctx *ctx, const char *uuid, const char *host,
                        const char *node, json_t *sel, json_t *stored)
{
    if (nb_db_begin(c->db, ctx) < 0)
        return -1;
    int n =
        (int)nb_instance_transition(c->db, ctx, uuid,
                                    &(struct nb_instance_change){
                                        .expect_task = {NB_TASK_SCHEDULING},
                                        .task_state = NB_TASK_NETWORKING,
                                        .host = host,
                                        .node = node,
                                        .availability_zone = nb_json_str(sel, "availability_zone"),
                                        .request_spec = stored,
                                    },
                                    NULL);
    if (n <= 0) {
        nb_db_rollback(c->db);
        return n;
    }
    cond_event_finish(c, ctx, uuid, EV_SCHEDULE, true, NULL);
    cond_event_start(c, ctx, uuid, EV_BUILD, host);
    cond_event_start(c, ctx, uuid, EV_NETWORKING, host);
    return nb_db_commit(c->db, ctx) < 0 ? -1 : 1;
}

/* The instance has a host: run the build steps and cast the spawn. */
static void build_on_host(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                          struct nb_request_spec *rspec, json_t *sel)
{
    const char *host = nb_json_str(sel, "host");
    const char *node = nb_json_str(sel, "node") ? nb_json_str(sel, "node") : host;
    rspec->num_attempts++;
    _cleanup_json_ json_t *stored = nb_request_spec_to_json(rspec);
    int n;
    for (int tries = 1; (n = move_to_host(c, ctx, uuid, host, node, sel, stored)) < 0 &&
                        nb_db_redo_or_wait(c->db, ctx, tries);
         tries++)
        ;
    if (n < 0)
        goto db_error;
    if (n == 0) {
        /* deleted while scheduling: give back the claim the scheduler made */
        cond_release_allocations(c, ctx, uuid, host);
        cond_event_finish(c, ctx, uuid, EV_SCHEDULE, false,
                          "The instance was deleted while it was being scheduled.");
        return;
    }
    NB_INFO(LOG_COND, ctx, uuid, "Scheduled on host %s (node %s), attempt %lld", host, node,
            rspec->num_attempts);

    char why[1100], details[1100];
    if (networking(c, ctx, uuid, host, nb_json_str(sel, "availability_zone"), rspec, why, details,
                   sizeof(why)) < 0)
        return;
    /* block_device_mapping: volumes created and attached here; the agent
     * plugs them from the mappings it is given */
    if (cond_prep_block_devices(c, ctx, uuid, host, why, sizeof(why)) < 0) {
        build_abort_step(c, ctx, uuid, host, NB_TASK_BDM, EV_BDM, why, NULL);
        return;
    }
    n = next_step(c, ctx, uuid, host, NB_TASK_BDM, EV_BDM, NB_TASK_SPAWNING, EV_SPAWN, NULL);
    if (n <= 0) {
        if (n < 0)
            goto db_error;
        /* a delete that ran meanwhile may have missed what was attached */
        cond_cleanup_volumes(c, ctx, uuid);
        cond_deallocate_networks(c, ctx, uuid);
        build_aborted(c, ctx, uuid, EV_BDM);
        return;
    }
    if (cast_build(c, ctx, uuid, host, node) < 0) {
        char msg[512];
        snprintf(msg, sizeof(msg), "The compute service of host %s is not reachable.", host);
        host_unreachable(c, ctx, uuid, host, msg);
    }
    return;
db_error:
    NB_ERROR(LOG_COND, ctx, uuid, "database error during the build: %s", nb_ctx_message(ctx));
    nb_ctx_clear_error(ctx);
}

/* Schedules the instance with its request spec (a failed attempt or no
 * host: ERROR) and runs the build on the chosen host. */
static void schedule_and_build(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                               struct nb_request_spec *rspec)
{
    long long attempts = rspec->num_attempts;
    cond_event_start(c, ctx, uuid, EV_SCHEDULE, c->env->my_host);
    char exceeded[256];
    snprintf(exceeded, sizeof(exceeded), EXCEEDED_FMT, uuid);
    if (attempts >= c->max_attempts) {
        _cleanup_free_ char *details = failures_text(rspec);
        fail_build(c, ctx, uuid, exceeded, details);
        return;
    }
    /* a member being built may not be in the table yet if the API adds it
     * after the cast; the instance itself is always a member */
    refresh_group(c, ctx, rspec);
    _cleanup_json_ json_t *sel =
        nb_scheduler_select_destinations(ctx, uuid, rspec, c->call_timeout_ms);
    if (!sel || !json_is_object(sel)) {
        char msg[1100];
        snprintf(msg, sizeof(msg), "%s",
                 nb_ctx_failed(ctx) ? nb_ctx_message(ctx) : "The scheduler gave no answer.");
        nb_ctx_clear_error(ctx); /* handled: the build fails with this message */
        fail_build(c, ctx, uuid, msg, "select_destinations failed; see the conductor log");
        /* no answer: a scheduler that died (another control plane) may
         * have claimed before its reply was lost */
        cond_release_allocations(c, ctx, uuid, NULL);
        return;
    }
    const char *error = nb_json_str(sel, "error");
    if (error && bus_recovering(c, ctx, uuid, error)) {
        cond_event_finish(c, ctx, uuid, EV_SCHEDULE, false,
                          "No valid host while the message bus recovers from an outage: "
                          "scheduling again once the compute services could report");
        return;
    }
    if (error) {
        const char *explain = nb_json_str(sel, "details");
        if (attempts > 0) {
            _cleanup_free_ char *prev = failures_text(rspec);
            _cleanup_free_ char *details = nb_strdup_printf(
                "%s\nNo other host for the retry: %s\n%s", prev, error, explain ? explain : "");
            fail_build(c, ctx, uuid, exceeded, details);
        } else {
            fail_build(c, ctx, uuid, error, explain);
        }
        return;
    }
    build_on_host(c, ctx, uuid, rspec, sel);
}

struct sched_later {
    struct conductor *c;
    struct nb_ctx ctx;
    char uuid[NB_UUID_LEN];
};

static void *sched_later_main(void *arg)
{
    struct sched_later *l = arg;
    for (int i = 0; i < RECOVERING_RETRY_S * 10 && !atomic_load(&later_stop); i++)
        usleep(100 * 1000);
    if (!atomic_load(&later_stop)) /* else the next start's recovery schedules it */
        cond_build_instance(l->c, &l->ctx, l->uuid);
    free(l);
    atomic_fetch_sub(&later_threads, 1);
    return NULL;
}

void cond_builds_later_stop(void)
{
    atomic_store(&later_stop, true);
    while (atomic_load(&later_threads) > 0)
        usleep(50 * 1000);
}

/* Whether the scheduler's "no valid host" (error) may only mean that the
 * compute services' heartbeats were lost with the bus: it reconnected
 * less than [DEFAULT] service_down_time (plus two report intervals) ago.
 * Then the build is scheduled again RECOVERING_RETRY_S later, from a
 * thread of its own (the conductor's workers must stay free for those
 * heartbeats), and true is returned. */
static bool bus_recovering(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                           const char *error)
{
    double at = nb_bus_recovered_at();
    double window = (double)nb_conf_int("DEFAULT", "service_down_time", 60) +
                    2.0 * (double)nb_conf_int("DEFAULT", "report_interval", 10);
    double age = nb_time_mono() - at;
    if (at <= 0 || age >= window)
        return false;
    struct sched_later *l = calloc(1, sizeof(*l));
    if (!l)
        return false;
    l->c = c;
    l->ctx = *ctx;
    nb_strlcpy(l->uuid, uuid, sizeof(l->uuid));
    if (atomic_load(&later_stop)) {
        free(l);
        return false;
    }
    atomic_fetch_add(&later_threads, 1);
    int rc = nb_thread_detached(sched_later_main, l);
    if (rc != 0) {
        atomic_fetch_sub(&later_threads, 1);
        free(l);
        return false;
    }
    NB_WARN(LOG_COND, ctx, uuid,
            "%s The message bus reconnected %.0f s ago: the compute services' heartbeats may "
            "have been lost with it; scheduling again in %d s (for up to %.0f s after the "
            "outage)",
            error, age, RECOVERING_RETRY_S, window);
    return true;
}

void cond_build_instance(struct conductor *c, struct nb_ctx *ctx, const char *uuid)
{
    _cleanup_json_ json_t *row = cond_instance_get(c, ctx, uuid);
    if (!row || nb_json_int(row, "deleted", 0) != 0 ||
        strcmp(nb_json_str(row, "vm_state") ? nb_json_str(row, "vm_state") : "", NB_VM_BUILDING) ||
        strcmp(nb_json_str(row, "task_state") ? nb_json_str(row, "task_state") : "",
               NB_TASK_SCHEDULING)) {
        NB_INFO(LOG_COND, ctx, uuid, "Not building: instance is %s",
                row ? "no longer waiting to be scheduled" : "unknown");
        return;
    }
    struct nb_request_spec rspec;
    request_spec_of(row, &rspec);
    schedule_and_build(c, ctx, uuid, &rspec);
    nb_request_spec_free(&rspec);
}

/* Whether the JSON array holds the string. */
static bool array_has_str(json_t *a, const char *v)
{
    size_t i;
    json_t *e;
    json_array_foreach (a, i, e) {
        if (json_is_string(e) && !strcmp(json_string_value(e), v))
            return true;
    }
    return false;
}

/* Takes the build off host and schedules it again: events end in Error,
 * the ports and the claim are released. A failed attempt (counted) adds a
 * fault and remembers the host in request_spec.retry; an uncounted one (the
 * host's agent did not take the build) gives the attempt back and puts the
 * host in request_spec.unreachable_hosts, which the scheduler skips for
 * this build. cond_build_instance ends in ERROR once the attempts are used
 * up or no host is left. */
static void reschedule_from(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                            const char *host, const char *message, bool counted)
{
    _cleanup_json_ json_t *row = cond_instance_get(c, ctx, uuid);
    if (!row)
        return;
    struct nb_request_spec spec;
    request_spec_of(row, &spec);
    _cleanup_free_ char *failure = nb_strdup_printf("%s: %s", host, message);
    if (counted) {
        json_array_append_new(spec.retry_hosts, json_string(host));
        json_array_append_new(spec.retry_failures, json_string(failure));
    } else {
        json_array_append_new(spec.unreachable_hosts, json_string(host));
        if (spec.num_attempts > 0)
            spec.num_attempts--;
    }
    long long done = spec.num_attempts;
    _cleanup_json_ json_t *rspec = nb_request_spec_to_json(&spec);
    nb_request_spec_free(&spec);
    if (nb_db_begin(c->db, ctx) < 0) {
        nb_ctx_clear_error(ctx);
        return;
    }
    int n = cond_build_unscheduled(c, ctx, uuid, NB_TASK_SPAWNING, host, rspec);
    cond_event_finish(c, ctx, uuid, EV_SPAWN, false, message);
    cond_event_finish(c, ctx, uuid, EV_BUILD, false, message);
    if (n == 1 && counted)
        cond_fault(c, ctx, uuid, 500, message, failure, host);
    if (nb_db_commit(c->db, ctx) < 0 || n != 1) {
        nb_ctx_clear_error(ctx);
        NB_INFO(LOG_COND, ctx, uuid, "Build on %s failed (%s) but the instance is being deleted",
                host, message);
        return;
    }
    /* Nova's _cleanup_allocated_networks before a reschedule: the next
     * attempt allocates (and binds) ports on its own host */
    cond_deallocate_networks(c, ctx, uuid);
    cond_release_allocations(c, ctx, uuid, host);
    if (counted)
        NB_WARN(LOG_COND, ctx, uuid,
                "Build of instance failed on host %s: %s; allocation released, rescheduling "
                "(attempt %lld of %d done)",
                host, message, done, c->max_attempts);
    else
        NB_WARN(LOG_COND, ctx, uuid,
                "%s Not counted as a build attempt (%lld of %d done): allocation released, "
                "scheduling again without host %s",
                message, done, c->max_attempts, host);
    cond_build_instance(c, ctx, uuid);
}

/* A spawn failed on host: a failed attempt. */
static void build_failed(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                         const char *host, const char *message)
{
    reschedule_from(c, ctx, uuid, host, message, true);
}

/* The build could not be handed to host's agent (not up yet, e.g. while
 * nubo or that host restarts): not a failed attempt, the host is skipped
 * for this build. A host chosen again although skipped (a forced host) is
 * a failed attempt, so this cannot loop. */
static void host_unreachable(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                             const char *host, const char *message)
{
    _cleanup_json_ json_t *row = cond_instance_get(c, ctx, uuid);
    struct nb_request_spec spec;
    request_spec_of(row, &spec);
    bool again = array_has_str(spec.unreachable_hosts, host);
    nb_request_spec_free(&spec);
    reschedule_from(c, ctx, uuid, host, message, again);
}

int cond_build_unscheduled(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                           const char *task, const char *host, const json_t *rspec)
{
    return (int)nb_instance_transition(c->db, ctx, uuid,
                                       &(struct nb_instance_change){
                                           .expect_task = {task},
                                           .expect_host = host,
                                           .task_state = NB_TASK_SCHEDULING,
                                           .host = NB_NONE,
                                           .node = NB_NONE,
                                           .request_spec = rspec,
                                       },
                                       NULL);
}

int cond_build_spawned(struct conductor *c, struct nb_ctx *ctx, const char *uuid, const char *task,
                       const char *host)
{
    return (int)nb_instance_transition(c->db, ctx, uuid,
                                       &(struct nb_instance_change){
                                           .expect_task = {task},
                                           .expect_host = host,
                                           .vm_state = NB_VM_ACTIVE,
                                           .task_state = NB_NONE,
                                           .set_power_state = true,
                                           .power_state = NB_POWER_RUNNING,
                                           .launched = true,
                                       },
                                       NULL);
}

/* The spawn's result in one transaction: 1 ACTIVE, 0 the instance left
 * the build (deleted), -1 database error. */
static int spawned_once(struct conductor *c, struct nb_ctx *ctx, const char *uuid, const char *host)
{
    if (nb_db_begin(c->db, ctx) < 0)
        return -1;
    int n = cond_build_spawned(c, ctx, uuid, NB_TASK_SPAWNING, host);
    if (n == 1) {
        cond_event_finish(c, ctx, uuid, EV_SPAWN, true, NULL);
        cond_event_finish(c, ctx, uuid, EV_BUILD, true, NULL);
        cond_action_finish(c, ctx, uuid, NULL);
    }
    if (n < 0) {
        nb_db_rollback(c->db);
        return -1;
    }
    return nb_db_commit(c->db, ctx) < 0 ? -1 : n;
}

void cond_build_result(struct conductor *c, struct nb_ctx *ctx, json_t *args)
{
    const char *uuid = nb_json_str(args, "uuid");
    const char *host = nb_json_str(args, "host");
    if (!uuid || !host)
        return;
    if (!json_is_true(json_object_get(args, "ok"))) {
        const char *msg = nb_json_str(args, "message");
        if (json_is_true(json_object_get(args, "interrupted")))
            host_unreachable(c, ctx, uuid, host, msg ? msg : "The build was interrupted.");
        else
            build_failed(c, ctx, uuid, host, msg ? msg : "The spawn failed.");
        return;
    }
    int n;
    for (int tries = 1;
         (n = spawned_once(c, ctx, uuid, host)) < 0 && nb_db_redo_or_wait(c->db, ctx, tries);
         tries++)
        ;
    if (n < 0) {
        NB_ERROR(LOG_COND, ctx, uuid,
                 "database error recording the spawn on %s: %s; the instance stays in spawning",
                 host, nb_ctx_message(ctx));
        nb_ctx_clear_error(ctx);
        return;
    }
    if (n != 1) {
        build_aborted(c, ctx, uuid, EV_SPAWN);
        /* the guest may have been created after the delete destroyed
         * nothing: destroy it now (absent guest is not an error) */
        nb_compute_destroy_guest(ctx, host, uuid);
        cond_deallocate_networks(c, ctx, uuid);
        return;
    }
    _cleanup_json_ json_t *row = cond_instance_get(c, ctx, uuid);
    double created = row ? nb_time_parse(nb_json_str(row, "created_at")) : -1;
    if (created > 0)
        NB_INFO(LOG_COND, ctx, uuid, "Instance is ACTIVE on host %s; took %.3f seconds to build",
                host, nb_time_now() - created);
    else
        NB_INFO(LOG_COND, ctx, uuid, "Instance is ACTIVE on host %s", host);
}
