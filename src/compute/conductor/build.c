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
#include "compute/rpc/compute_api.h"
#include "compute/rpc/scheduler_api.h"
#include "db/db.h"
#include "image/image.h"
#include "placement/placement.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXCEEDED_FMT                                                                               \
    "Exceeded maximum number of retries. Exhausted all hosts available for retrying build "        \
    "failures for instance %s."

/* {"id", "disk_format", "properties"} of the image, or null when booting
 * without one. An image that vanished since the API accepted the request is
 * scheduled without properties (the spawn will report it). New ref. */
static json_t *image_for_spec(struct nb_ctx *ctx, const char *image_ref)
{
    if (!image_ref || !*image_ref)
        return json_null();
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    _cleanup_json_ json_t *img = nb_image_lookup(&sub, image_ref);
    json_t *props = json_object();
    const char *k;
    json_t *v;
    json_object_foreach (img, k, v) {
        if (!nb_image_is_core_attr(k))
            json_object_set(props, k, v);
    }
    return json_pack("{s:s, s:s?, s:o}", "id", image_ref, "disk_format",
                     nb_json_str(img, "disk_format"), "properties", props);
}

/* The server group of the instance: from the request's scheduler hint, else
 * from membership. {"uuid","policy","rules","members"} or null. New ref. */
static json_t *group_for_spec(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                              json_t *rspec)
{
    const char *g = nb_json_str(json_object_get(rspec, "scheduler_hints"), "group");
    json_t *hint_list = json_object_get(json_object_get(rspec, "scheduler_hints"), "group");
    if (!g && json_is_array(hint_list))
        g = json_string_value(json_array_get(hint_list, 0));
    if (!g)
        g = nb_json_str(rspec, "group");
    if (!g)
        g = nb_json_str(json_object_get(rspec, "group"), "uuid");
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    _cleanup_json_ json_t *grp = NULL;
    if (g)
        grp = nb_db_row(c->db, &sub,
                        "SELECT id, uuid, policy, rules FROM instance_groups WHERE uuid = ? AND "
                        "deleted = 0",
                        "s", g);
    if (!grp)
        grp = nb_db_row(c->db, &sub,
                        "SELECT g.id, g.uuid, g.policy, g.rules FROM instance_groups g JOIN "
                        "instance_group_member m ON m.group_id = g.id WHERE m.instance_uuid = ? "
                        "AND g.deleted = 0 LIMIT 1",
                        "s", uuid);
    if (!grp)
        return json_null();
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
    /* a member being built may not be in the table yet if the API adds it
     * after the cast; the instance itself is always a member */
    json_t *rules = nb_json_parse(nb_json_str(grp, "rules"));
    return json_pack("{s:s?, s:s?, s:o, s:o}", "uuid", nb_json_str(grp, "uuid"), "policy",
                     nb_json_str(grp, "policy"), "rules", rules ? rules : json_object(), "members",
                     members);
}

/* True if the boot disk is a volume (no local root disk to claim). */
static bool boot_from_volume(struct conductor *c, struct nb_ctx *ctx, const char *uuid)
{
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    return nb_db_int(c->db, &sub, 0,
                     "SELECT COUNT(*) FROM block_device_mapping WHERE instance_uuid = ? AND "
                     "deleted = 0 AND boot_index = 0 AND destination_type = 'volume'",
                     "s", uuid) > 0;
}

/* The zone and forced host asked for: the API's request_spec fields
 * (availability_zone, force_hosts), else the instance's availability_zone
 * column parsed as Nova's "zone:host[:node]". */
static void zone_and_host(json_t *row, json_t *rspec, char *zone, char *host, size_t n)
{
    zone[0] = host[0] = '\0';
    json_t *azj = json_object_get(rspec, "availability_zone");
    const char *az = azj ? json_string_value(azj) : nb_json_str(row, "availability_zone");
    const char *forced =
        json_string_value(json_array_get(json_object_get(rspec, "force_hosts"), 0));
    if (az) {
        const char *colon = strchr(az, ':');
        if (colon) {
            snprintf(zone, n, "%.*s", (int)(colon - az), az);
            snprintf(host, n, "%s", colon + 1);
            char *second = strchr(host, ':');
            if (second)
                *second = '\0';
        } else {
            snprintf(zone, n, "%s", az);
        }
    }
    if (forced)
        snprintf(host, n, "%s", forced);
}

/* The select_destinations spec for the instance row (see scheduler.h). */
static json_t *spec_for(struct conductor *c, struct nb_ctx *ctx, json_t *row, json_t *rspec)
{
    const char *uuid = nb_json_str(row, "uuid");
    json_t *flavor = nb_json_parse(nb_json_str(row, "flavor"));
    char zone[256], host[256];
    zone_and_host(row, rspec, zone, host, sizeof(zone));
    /* the image as the API saw it at boot (Nova keeps it in the request
     * spec), else looked up now */
    json_t *image = json_object_get(rspec, "image");
    image = json_is_object(json_object_get(image, "properties"))
                ? json_incref(image)
                : image_for_spec(ctx, nb_json_str(row, "image_ref"));
    json_t *bfv = json_object_get(rspec, "is_bfv");
    bool is_bfv = json_is_boolean(bfv) ? json_is_true(bfv) : boot_from_volume(c, ctx, uuid);
    const char *requested = nb_json_str(json_object_get(rspec, "requested_destination"), "host");
    json_t *retry = json_object_get(rspec, "retry");
    json_t *tried = json_object_get(retry, "hosts");
    json_t *unreachable = json_object_get(rspec, "unreachable_hosts");
    return json_pack("{s:o, s:o, s:s?, s:s?, s:s?, s:o, s:o, s:o, s:b, s:s?, s:s?}", "flavor",
                     flavor ? flavor : json_object(), "image", image, "availability_zone",
                     zone[0] ? zone : NULL, "force_host", host[0] ? host : NULL, "requested_host",
                     requested, "group", group_for_spec(c, ctx, uuid, rspec), "retry_hosts",
                     tried ? json_incref(tried) : json_array(), "unreachable_hosts",
                     json_is_array(unreachable) ? json_incref(unreachable) : json_array(), "is_bfv",
                     is_bfv, "project_id", nb_json_str(row, "project_id"), "user_id",
                     nb_json_str(row, "user_id"));
}

/* request_spec of the row as an object (new ref, {} if unparsable). */
static json_t *request_spec_of(json_t *row)
{
    json_t *r = nb_json_parse(nb_json_str(row, "request_spec"));
    if (!json_is_object(r)) {
        json_decref(r);
        r = json_object();
    }
    return r;
}

/* request_spec.retry, created if missing (borrowed from rspec). */
static json_t *retry_of(json_t *rspec)
{
    json_t *retry = json_object_get(rspec, "retry");
    if (!json_is_object(retry)) {
        retry = json_pack("{s:i, s:[], s:[]}", "num_attempts", 0, "hosts", "failures");
        json_object_set_new(rspec, "retry", retry);
    }
    if (!json_is_array(json_object_get(retry, "hosts")))
        json_object_set_new(retry, "hosts", json_array());
    if (!json_is_array(json_object_get(retry, "failures")))
        json_object_set_new(retry, "failures", json_array());
    return retry;
}

/* "Attempt 1 on fake-2: why" lines of the earlier failures. Caller frees. */
static char *failures_text(json_t *retry)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    size_t i;
    json_t *e;
    json_array_foreach (json_object_get(retry, "failures"), i, e) {
        fprintf(f, "%sAttempt %zu: %s", i ? "\n" : "", i + 1, json_string_value(e));
    }
    fclose(f);
    return buf;
}

/* Ends the build in ERROR while it is still scheduling: fault, events,
 * action. A concurrent delete wins (nothing to do then). */
static void fail_build(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                       const char *message, const char *details)
{
    char now[32];
    nb_now_iso_us(now);
    int n = nb_db_exec(c->db, ctx,
                       "UPDATE instances SET vm_state = 'error', task_state = NULL, host = NULL, "
                       "node = NULL, updated_at = ? WHERE uuid = ? AND deleted = 0 AND "
                       "task_state = 'scheduling'",
                       "ss", now, uuid);
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
static int next_step(struct conductor *c, struct nb_ctx *ctx, const char *uuid, const char *host,
                     const char *from, const char *from_event, const char *to, const char *to_event,
                     const json_t *network_info)
{
    char now[32];
    nb_now_iso_us(now);
    if (nb_db_begin(c->db, ctx) < 0)
        return -1;
    int n = nb_db_exec(c->db, ctx,
                       "UPDATE instances SET task_state = ?, updated_at = ? WHERE uuid = ? AND "
                       "deleted = 0 AND task_state = ?",
                       "ssss", to, now, uuid, from);
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
    char now[32];
    nb_now_iso_us(now);
    int n = nb_db_exec(c->db, ctx,
                       "UPDATE instances SET vm_state = 'error', task_state = NULL, host = NULL, "
                       "node = NULL, updated_at = ? WHERE uuid = ? AND deleted = 0 AND "
                       "task_state = ?",
                       "sss", now, uuid, task);
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
                      const char *az, json_t *rspec, char *why, char *details, size_t n)
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

/* The instance has a host: run the build steps and cast the spawn. */
static void build_on_host(struct conductor *c, struct nb_ctx *ctx, const char *uuid, json_t *rspec,
                          json_t *sel)
{
    const char *host = nb_json_str(sel, "host");
    const char *node = nb_json_str(sel, "node") ? nb_json_str(sel, "node") : host;
    json_t *retry = retry_of(rspec);
    json_object_set_new(retry, "num_attempts",
                        json_integer(nb_json_int(retry, "num_attempts", 0) + 1));
    char now[32];
    nb_now_iso_us(now);
    if (nb_db_begin(c->db, ctx) < 0)
        goto db_error;
    int n =
        nb_db_exec(c->db, ctx,
                   "UPDATE instances SET host = ?, node = ?, availability_zone = "
                   "COALESCE(?, availability_zone), task_state = 'networking', "
                   "request_spec = ?, updated_at = ? WHERE uuid = ? AND deleted = 0 AND "
                   "task_state = 'scheduling'",
                   "sssjss", host, node, nb_json_str(sel, "availability_zone"), rspec, now, uuid);
    if (n < 0) {
        nb_db_rollback(c->db);
        goto db_error;
    }
    if (n == 0) {
        nb_db_rollback(c->db);
        /* deleted while scheduling: give back the claim the scheduler made */
        cond_release_allocations(c, ctx, uuid, host);
        cond_event_finish(c, ctx, uuid, EV_SCHEDULE, false,
                          "The instance was deleted while it was being scheduled.");
        return;
    }
    cond_event_finish(c, ctx, uuid, EV_SCHEDULE, true, NULL);
    cond_event_start(c, ctx, uuid, EV_BUILD, host);
    cond_event_start(c, ctx, uuid, EV_NETWORKING, host);
    if (nb_db_commit(c->db, ctx) < 0)
        goto db_error;
    NB_INFO(LOG_COND, ctx, uuid, "Scheduled on host %s (node %s), attempt %lld", host, node,
            nb_json_int(retry, "num_attempts", 1));

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
    _cleanup_json_ json_t *rspec = request_spec_of(row);
    json_t *retry = retry_of(rspec);
    long long attempts = nb_json_int(retry, "num_attempts", 0);
    cond_event_start(c, ctx, uuid, EV_SCHEDULE, c->env->my_host);
    char exceeded[256];
    snprintf(exceeded, sizeof(exceeded), EXCEEDED_FMT, uuid);
    if (attempts >= c->max_attempts) {
        _cleanup_free_ char *details = failures_text(retry);
        fail_build(c, ctx, uuid, exceeded, details);
        return;
    }
    json_t *spec = spec_for(c, ctx, row, rspec);
    _cleanup_json_ json_t *sel =
        nb_scheduler_select_destinations(ctx, uuid, spec, c->call_timeout_ms);
    if (!sel || !json_is_object(sel)) {
        char msg[1100];
        snprintf(msg, sizeof(msg), "%s",
                 nb_ctx_failed(ctx) ? nb_ctx_message(ctx) : "The scheduler gave no answer.");
        nb_ctx_clear_error(ctx); /* handled: the build fails with this message */
        fail_build(c, ctx, uuid, msg, "select_destinations failed; see the conductor log");
        return;
    }
    const char *error = nb_json_str(sel, "error");
    if (error) {
        const char *explain = nb_json_str(sel, "details");
        if (attempts > 0) {
            _cleanup_free_ char *prev = failures_text(retry);
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
    _cleanup_json_ json_t *rspec = request_spec_of(row);
    json_t *retry = retry_of(rspec);
    _cleanup_free_ char *failure = nb_strdup_printf("%s: %s", host, message);
    if (counted) {
        json_array_append_new(json_object_get(retry, "hosts"), json_string(host));
        json_array_append_new(json_object_get(retry, "failures"), json_string(failure));
    } else {
        json_t *unreachable = json_object_get(rspec, "unreachable_hosts");
        if (!json_is_array(unreachable)) {
            unreachable = json_array();
            json_object_set_new(rspec, "unreachable_hosts", unreachable);
        }
        json_array_append_new(unreachable, json_string(host));
        long long done = nb_json_int(retry, "num_attempts", 1);
        json_object_set_new(retry, "num_attempts", json_integer(done > 0 ? done - 1 : 0));
    }
    char now[32];
    nb_now_iso_us(now);
    if (nb_db_begin(c->db, ctx) < 0) {
        nb_ctx_clear_error(ctx);
        return;
    }
    int n = nb_db_exec(c->db, ctx,
                       "UPDATE instances SET host = NULL, node = NULL, task_state = 'scheduling', "
                       "request_spec = ?, updated_at = ? WHERE uuid = ? AND deleted = 0 AND "
                       "task_state = 'spawning' AND host = ?",
                       "jsss", rspec, now, uuid, host);
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
                host, message, nb_json_int(retry, "num_attempts", 0), c->max_attempts);
    else
        NB_WARN(LOG_COND, ctx, uuid,
                "%s Not counted as a build attempt (%lld of %d done): allocation released, "
                "scheduling again without host %s",
                message, nb_json_int(retry, "num_attempts", 0), c->max_attempts, host);
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
    _cleanup_json_ json_t *rspec = row ? request_spec_of(row) : NULL;
    bool again = array_has_str(json_object_get(rspec, "unreachable_hosts"), host);
    reschedule_from(c, ctx, uuid, host, message, again);
}

void cond_build_result(struct conductor *c, struct nb_ctx *ctx, json_t *args)
{
    const char *uuid = nb_json_str(args, "uuid");
    const char *host = nb_json_str(args, "host");
    if (!uuid || !host)
        return;
    if (!json_is_true(json_object_get(args, "ok"))) {
        const char *msg = nb_json_str(args, "message");
        build_failed(c, ctx, uuid, host, msg ? msg : "The spawn failed.");
        return;
    }
    char now[32];
    nb_now_iso_us(now);
    if (nb_db_begin(c->db, ctx) < 0) {
        nb_ctx_clear_error(ctx);
        return;
    }
    int n = nb_db_exec(c->db, ctx,
                       "UPDATE instances SET vm_state = 'active', task_state = NULL, "
                       "power_state = 1, launched_at = ?, updated_at = ? WHERE uuid = ? AND "
                       "deleted = 0 AND task_state = 'spawning' AND host = ?",
                       "ssss", now, now, uuid, host);
    if (n == 1) {
        cond_event_finish(c, ctx, uuid, EV_SPAWN, true, NULL);
        cond_event_finish(c, ctx, uuid, EV_BUILD, true, NULL);
        cond_action_finish(c, ctx, uuid, NULL);
    }
    if (nb_db_commit(c->db, ctx) < 0 || n != 1) {
        nb_ctx_clear_error(ctx);
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
