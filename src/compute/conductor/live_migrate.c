/* live_migrate.c - a live migration driven by the conductor, as Nova's
 * LiveMigrationTask and the compute manager's steps around it:
 *
 *  1. live_migrate_instance (from the API: migration "accepted", task
 *     migrating, action "live-migration"): the instance's source
 *     allocation goes to the migration (Nova's migration-consumer model);
 *     the destination is the named host (forced: before 2.30, or with
 *     force; else the scheduler's filters judge it too), or the
 *     scheduler's choice (source
 *     and refused hosts in ignore_hosts, up to [scheduler] max_attempts, or
 *     [DEFAULT] migrate_max_retries + 1 when that is set); each candidate
 *     is claimed for the instance and judged by every precheck
 *     (migrate_checks.c), and every candidate's verdict goes into the
 *     details of event conductor_live_migrate_instance. A refusal ends it:
 *     migration "error", fault naming the cause (NoValidHost's words when
 *     no scheduled host passed), task cleared, allocation handed back.
 *  2. the source agent (live_migration cast) reports "queued",
 *     "preparing" (event compute_pre_live_migration on the destination),
 *     "running" (event compute_live_migration) and progress, written here.
 *  3. its result: success -> "post-migrating",
 *     post_live_migration_at_destination, the source's cleanup, the
 *     instance on the destination (host, node, task None), the migration's
 *     allocation deleted, "completed". Failure or abort ->
 *     rollback_live_migration_at_destination, the destination claim
 *     dropped and the source allocation handed back, the instance ACTIVE
 *     on the source, "error" (fault and event naming phase and cause) or
 *     "cancelled". A failure after the guest moved leaves the instance on
 *     the destination with the migration "error".
 * Abort and force-complete are forwarded to the source agent; the dry run
 * (check_live_migration) judges hosts without moving or claiming anything. */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "compute/compute.h"
#include "compute/conductor/internal.h"
#include "compute/conductor/live_migrate.h"
#include "compute/conductor/migrate_checks.h"
#include "compute/objects/instance.h"
#include "compute/objects/migration.h"
#include "compute/objects/request_spec.h"
#include "compute/rpc/compute_api.h"
#include "compute/rpc/scheduler_api.h"
#include "db/db.h"
#include "network/network.h"
#include "placement/placement.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NO_VALID_HOST "No valid host was found. There are not enough hosts available."

void cond_lm_allocations_back(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                              const char *migration_uuid)
{
    (void)c;
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    /* replaces whatever the instance holds (its destination claim) */
    if (nb_placement_move_allocations(&sub, migration_uuid, uuid) < 0)
        NB_ERROR(LOG_LM, ctx, uuid,
                 "could not hand the source allocation back from migration %s: %s", migration_uuid,
                 nb_ctx_message(&sub));
}

/* Sets the migration's status (best-effort: logged). */
static void set_status(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                       const char *migration_uuid, const char *status)
{
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    if (nb_migration_set_status(c->db, &sub, migration_uuid, status, NULL) < 0)
        NB_ERROR(LOG_LM, ctx, uuid, "could not set migration %s to %s: %s", migration_uuid, status,
                 nb_ctx_message(&sub));
}

/* Clears the instance's task state migrating; with host, moves it there
 * first (node with it). */
static void end_task(struct conductor *c, struct nb_ctx *ctx, const char *uuid, const char *source,
                     const char *host, const char *node)
{
    struct nb_instance_change ch = {
        .expect_task = {NB_TASK_MIGRATING}, .expect_host = source, .task_state = NB_NONE};
    if (host) {
        ch.host = host;
        ch.node = node ? node : host;
    }
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    struct nb_instance_found found = {0};
    enum nb_transition n = nb_instance_transition(c->db, &sub, uuid, &ch, &found);
    if (n == NB_TRANSITION_ERROR)
        NB_ERROR(LOG_LM, ctx, uuid, "could not end the live migration's task: %s",
                 nb_ctx_message(&sub));
    else if (n == NB_TRANSITION_LOST)
        NB_WARN(LOG_LM, ctx, uuid,
                "instance no longer in task migrating on %s (task %s, host %s): left as it is",
                source ? source : "?", found.task_state[0] ? found.task_state : "None",
                found.host[0] ? found.host : "None");
}

/* Ends a live migration refused by its prechecks. */
static void refused(struct lm_task *t, const char *message, const char *details)
{
    NB_ERROR(LOG_LM, t->ctx, t->uuid, "Live migration of the instance refused: %s%s%s", message,
             details ? "\n" : "", details ? details : "");
    cond_event_finish(t->c, t->ctx, t->uuid, EV_LM_CONDUCTOR, false, details ? details : message);
    cond_lm_allocations_back(t->c, t->ctx, t->uuid, t->migration_uuid);
    set_status(t->c, t->ctx, t->uuid, t->migration_uuid, NB_MIGRATION_ERROR);
    end_task(t->c, t->ctx, t->uuid, t->source, NULL, NULL);
    cond_fault(t->c, t->ctx, t->uuid, 400, message, details, NULL);
    cond_action_finish(t->c, t->ctx, t->uuid, "Error");
}

/* Whether s is one of the NULL-terminated list. */
static bool in_list(const char *s, const char *const *list)
{
    for (; s && *list; list++)
        if (!strcmp(s, *list))
            return true;
    return false;
}

/* Nova's compute_check_can_live_migrate_source: the source's part of the
 * checks (the destination asked it) as an event on the source host, with
 * the verdicts of the checks that rest on what it said. */
static void source_event(struct lm_task *t, const json_t *v)
{
    if (!json_object_get(json_object_get(v, "agent"), "source"))
        return; /* the source was not asked */
    static const char *const from_source[] = {"transport", "storage", "network", NULL};
    char details[3000] = "";
    bool ok = true;
    size_t i;
    json_t *c;
    json_array_foreach (json_object_get(v, "checks"), i, c) {
        if (!in_list(nb_json_str(c, "check"), from_source))
            continue;
        bool cok = json_is_true(json_object_get(c, "ok"));
        ok = ok && cok;
        snprintf(details + strlen(details), sizeof(details) - strlen(details), "%s%s %s: %s",
                 details[0] ? "\n" : "", nb_json_str(c, "check"), cok ? "ok" : "REFUSED",
                 nb_json_str(c, "message") ? nb_json_str(c, "message")
                                           : nb_json_str(c, "evidence"));
    }
    cond_event_start(t->c, t->ctx, t->uuid, EV_LM_CHECK_SOURCE, t->source);
    cond_event_finish(t->c, t->ctx, t->uuid, EV_LM_CHECK_SOURCE, ok, details);
}

/* Judges dest as the destination (scheduled: the scheduler's reply when it
 * chose and claimed dest). Adds "<dest>: <verdict>" to lines; a refused
 * destination's claim is dropped again. The verdict (new ref) with the
 * destination's reply ("agent") and compute node ("dest_node"). */
static json_t *try_host(struct lm_task *t, const char *dest, const json_t *scheduled, json_t *lines)
{
    if (!t->dry_run)
        cond_event_start(t->c, t->ctx, t->uuid, EV_LM_CHECK_DEST, dest);
    _cleanup_json_ json_t *facts = cond_lm_facts(t, dest, scheduled);
    json_t *v = cond_lm_evaluate(facts);
    json_object_set(v, "agent", json_object_get(facts, "agent"));
    json_object_set(v, "dest_node", json_object_get(facts, "dest_node"));
    _cleanup_free_ char *text = cond_lm_verdict_text(v);
    bool ok = json_is_true(json_object_get(v, "ok"));
    /* "<host>: passed|refused", then each refused check (and warning)
     * indented on a line of its own */
    char *line = nb_strdup_printf("%s: %s", dest, ok ? "passed" : "refused");
    for (char *p = text, *nl; p && *p; p = nl ? nl + 1 : NULL) {
        nl = strchr(p, '\n');
        char *next = nb_strdup_printf("%s\n  %.*s", line, nl ? (int)(nl - p) : (int)strlen(p), p);
        free(line);
        line = next;
    }
    json_array_append_new(lines, json_string(line));
    free(line);
    if (t->dry_run)
        return v;
    cond_event_finish(t->c, t->ctx, t->uuid, EV_LM_CHECK_DEST, ok,
                      text && *text ? text : "every precheck passed");
    source_event(t, v);
    json_t *claim = json_object_get(facts, "claim");
    if (!ok && json_is_true(json_object_get(claim, "ok"))) {
        struct nb_ctx sub;
        nb_ctx_child(&sub, t->ctx);
        nb_placement_delete_allocations(&sub, t->uuid);
    }
    NB_INFO(LOG_LM, t->ctx, t->uuid, "%s destination %s for the live migration%s%s",
            ok ? "Accepted" : "Skipping", dest, ok ? "" : ": ",
            ok ? "" : nb_json_str(v, "message"));
    return v;
}

/* How many destinations a scheduled live migration may try. */
static long max_attempts(struct conductor *c)
{
    const char *r = nb_conf_str("DEFAULT", "migrate_max_retries", NULL);
    if (r && *r) {
        long n = strtol(r, NULL, 10);
        return n < 0 ? 1000000 : n + 1;
    }
    return c->max_attempts;
}

/* The request spec for select_destinations: the boot's, with ignore_hosts
 * and nothing forced or requested. */
static void spec_for(struct lm_task *t, struct nb_request_spec *rs, json_t *ignore,
                     const char *requested)
{
    _cleanup_json_ json_t *stored = nb_json_parse(nb_json_str(t->row, "request_spec"));
    nb_request_spec_from_json(rs, stored);
    free(rs->force_host);
    free(rs->force_node);
    free(rs->requested_host);
    free(rs->requested_node);
    rs->force_host = rs->force_node = rs->requested_host = rs->requested_node = NULL;
    rs->requested_host = requested ? strdup(requested) : NULL;
    free(rs->instance_uuid);
    rs->instance_uuid = strdup(t->uuid);
    json_decref(rs->ignore_hosts);
    rs->ignore_hosts = json_incref(ignore);
    json_array_clear(rs->retry_hosts);
    json_array_clear(rs->retry_failures);
    json_array_clear(rs->unreachable_hosts);
    rs->num_attempts = 0;
}

/* A scheduled destination: candidates from the scheduler until one passes
 * (verdict, new ref) or none is left (NULL, *why set). */
static json_t *schedule(struct lm_task *t, json_t *lines, char *why, size_t n)
{
    _cleanup_json_ json_t *ignore = json_pack("[s]", t->source);
    long max = max_attempts(t->c);
    for (long attempt = 1;; attempt++) {
        if (attempt > max) {
            snprintf(why, n,
                     "Exceeded max scheduling retries %ld for instance %s during live migration",
                     max - 1, t->uuid);
            return NULL;
        }
        struct nb_request_spec rs;
        spec_for(t, &rs, ignore, NULL);
        struct nb_ctx sub;
        nb_ctx_child(&sub, t->ctx);
        _cleanup_json_ json_t *r =
            nb_scheduler_select_destinations(&sub, t->uuid, &rs, t->c->call_timeout_ms);
        nb_request_spec_free(&rs);
        const char *host = nb_json_str(r, "host");
        if (!host) {
            char line[4000];
            snprintf(line, sizeof(line), "scheduler: %s%s%s",
                     r ? nb_json_str(r, "error") : nb_ctx_message(&sub),
                     nb_json_str(r, "details") ? "\n  " : "",
                     nb_json_str(r, "details") ? nb_json_str(r, "details") : "");
            json_array_append_new(lines, json_string(line));
            snprintf(why, n, "%s", NO_VALID_HOST);
            return NULL;
        }
        json_t *v = try_host(t, host, r, lines);
        if (json_is_true(json_object_get(v, "ok")))
            return v;
        json_decref(v);
        json_array_append_new(ignore, json_string(host));
    }
}

/* A named destination that is not forced (from 2.30 without force): the
 * scheduler's filters judge it too (Nova's requested_destination), and
 * claim it. When the scheduler refuses, the host's own facts (weighed, not
 * claimed) name the cause if they can, else NoValidHost with the
 * scheduler's explanation. The verdict, new ref. */
static json_t *requested(struct lm_task *t, const char *host, json_t *lines)
{
    _cleanup_json_ json_t *ignore = json_pack("[s]", t->source);
    struct nb_request_spec rs;
    spec_for(t, &rs, ignore, host);
    struct nb_ctx sub;
    nb_ctx_child(&sub, t->ctx);
    _cleanup_json_ json_t *r =
        nb_scheduler_select_destinations(&sub, t->uuid, &rs, t->c->call_timeout_ms);
    nb_request_spec_free(&rs);
    if (nb_json_str(r, "host") && !strcmp(nb_json_str(r, "host"), host))
        return try_host(t, host, r, lines);
    if (nb_json_str(r, "host")) { /* not the one asked for: give it back */
        nb_ctx_child(&sub, t->ctx);
        nb_placement_delete_allocations(&sub, t->uuid);
    }
    t->dry_run = true; /* weigh the host's facts only: no claim, no events */
    json_t *v = try_host(t, host, NULL, lines);
    t->dry_run = false;
    char line[4000];
    snprintf(line, sizeof(line), "scheduler: %s%s%s",
             r ? (nb_json_str(r, "error") ? nb_json_str(r, "error") : "another host chosen")
               : nb_ctx_message(&sub),
             nb_json_str(r, "details") ? "\n  " : "",
             nb_json_str(r, "details") ? nb_json_str(r, "details") : "");
    json_array_append_new(lines, json_string(line));
    if (json_is_true(json_object_get(v, "ok"))) {
        json_object_set_new(v, "ok", json_false());
        json_object_set_new(v, "message", json_string(NO_VALID_HOST));
    }
    return v;
}

/* "\n"-joined lines, caller frees. */
static char *join_lines(const char *head, json_t *lines)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    fputs(head, f);
    size_t i;
    json_t *l;
    json_array_foreach (lines, i, l)
        fprintf(f, "\n%s", json_string_value(l));
    fclose(f);
    return buf;
}

/* The checks passed for v's host: record the destination and start the
 * move on the source. */
static void start_move(struct lm_task *t, json_t *v, json_t *lines)
{
    json_t *agent = json_object_get(v, "agent");
    const char *dest = nb_json_str(v, "host");
    const char *node = nb_json_str(json_object_get(v, "dest_node"), "hypervisor_hostname");
    const char *addr = nb_json_str(json_object_get(agent, "dest"), "addr");
    struct nb_ctx sub;
    nb_ctx_child(&sub, t->ctx);
    struct nb_migration_change ch = {
        .dest_compute = dest, .dest_node = node ? node : dest, .dest_host = addr};
    if (nb_migration_update(t->c->db, &sub, t->migration_uuid, &ch) < 0)
        NB_ERROR(LOG_LM, t->ctx, t->uuid, "could not record the destination %s: %s", dest,
                 nb_ctx_message(&sub));
    _cleanup_free_ char *details = join_lines("Candidates:", lines);
    cond_event_finish(t->c, t->ctx, t->uuid, EV_LM_CONDUCTOR, true, details);
    bool block = json_is_true(json_object_get(v, "block_migration"));
    bool shared = json_is_true(json_object_get(v, "shared_storage"));
    NB_INFO(LOG_LM, t->ctx, t->uuid,
            "Live migration of the instance from %s to %s starting (block_migration %s, shared "
            "storage %s)",
            t->source, dest, block ? "true" : "false", shared ? "yes" : "no");
    const struct nb_live_migration_req req = {
        .migration_uuid = t->migration_uuid,
        .dest_host = dest,
        .dest_uri = nb_json_str(json_object_get(agent, "dest"), "uri"),
        .dest_addr = addr,
        .block_migration = block,
        .shared_storage = shared,
        .disks = json_object_get(agent, "disks"),
    };
    char msg[1400];
    const char *phase = "pre_live_migration";
    /* Nova's pre_live_migration: the volumes attached for the destination
     * (its connector, fresh connection_info) before the source starts, so
     * the destination prepares and checks the files with them */
    /* Nova's setup_networks_on_host for the destination: the ports carry
     * "migrating_to", the destination's agent wires them for the incoming
     * guest (its tap lands on the bridge with its filter) */
    nb_ctx_child(&sub, t->ctx);
    if (nb_network_set_migrating_to(&sub, t->uuid, dest) < 0)
        NB_WARN(LOG_LM, t->ctx, t->uuid, "could not mark the instance's ports migrating to %s: %s",
                dest, nb_ctx_message(&sub));
    nb_ctx_child(&sub, t->ctx);
    if (cond_volumes_attach_to(t->c, &sub, t->uuid, dest) < 0) {
        snprintf(msg, sizeof(msg), "Volumes could not be attached for host %s: %s", dest,
                 nb_ctx_message(&sub));
    } else {
        json_t *inst = cond_instance_for_agent(t->c, t->ctx, t->row);
        if (nb_compute_live_migration(t->ctx, t->source, inst, &req) == 0)
            return;
        snprintf(msg, sizeof(msg), "The compute service of host %s is not reachable.", t->source);
        phase = "live_migration";
    }
    json_t *args =
        json_pack("{s:s, s:s, s:s, s:b, s:b, s:s, s:s, s:b}", "uuid", t->uuid, "migration_uuid",
                  t->migration_uuid, "host", t->source, "ok", 0, "cancelled", 0, "phase", phase,
                  "message", msg, "shared_storage", shared);
    cond_live_migration_result(t->c, t->ctx, args);
    json_decref(args);
}

void cond_live_migrate_instance(struct conductor *c, struct nb_ctx *ctx, json_t *args)
{
    const char *uuid = nb_json_str(args, "uuid");
    const char *mig = nb_json_str(args, "migration_uuid");
    const char *host = nb_json_str(args, "host");
    json_t *row = cond_instance_get(c, ctx, uuid);
    if (!row || !mig || nb_json_int(row, "deleted", 0) != 0) {
        NB_WARN(LOG_LM, ctx, uuid, "live migration %s of a missing instance dropped",
                mig ? mig : "?");
        json_decref(row);
        return;
    }
    if (!cond_still_requested(c, ctx, row, NB_TASK_MIGRATING, mig, NB_MIGRATION_ACCEPTED,
                              "live_migrate_instance")) {
        json_decref(row);
        return;
    }
    struct lm_task t = {
        .c = c,
        .ctx = ctx,
        .row = row,
        .uuid = uuid,
        .source = nb_json_str(row, "host"),
        .source_node = nb_json_str(row, "node"),
        .migration_uuid = mig,
        .block_migration =
            nb_json_str(args, "block_migration") ? nb_json_str(args, "block_migration") : "auto",
    };
    cond_event_start(c, ctx, uuid, EV_LM_CONDUCTOR, c->env->my_host);
    NB_INFO(LOG_LM, ctx, uuid, "Live migration %s of the instance from %s to %s requested", mig,
            t.source ? t.source : "?", host ? host : "a host the scheduler picks");
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    if (!t.source || nb_placement_move_allocations(&sub, uuid, mig) < 0) {
        char msg[1400];
        snprintf(msg, sizeof(msg),
                 "Migration pre-check error: the source allocation of instance %s could not be "
                 "handed to migration %s: %s",
                 uuid, mig, t.source ? nb_ctx_message(&sub) : "the instance has no host");
        refused(&t, msg, NULL);
        json_decref(row);
        return;
    }
    _cleanup_json_ json_t *lines = json_array();
    char why[1400] = "";
    bool forced = json_is_true(json_object_get(args, "force"));
    json_t *v = !host    ? schedule(&t, lines, why, sizeof(why))
                : forced ? try_host(&t, host, NULL, lines)
                         : requested(&t, host, lines);
    if (v && json_is_true(json_object_get(v, "ok"))) {
        start_move(&t, v, lines);
    } else {
        const char *msg = v ? nb_json_str(v, "message") : why;
        _cleanup_free_ char *head = nb_strdup_printf("%s\nCandidates:", msg);
        _cleanup_free_ char *details = join_lines(head, lines);
        refused(&t, msg, details);
    }
    json_decref(v);
    json_decref(row);
}

/* The scheduler's dry run over every candidate (nothing claimed), as a
 * live migration to a scheduled or requested host would face it: the
 * instance's request spec with the source ignored. New ref, or NULL when
 * no scheduler answered (error on ctx). */
static json_t *scheduler_dry_run(struct lm_task *t, struct nb_ctx *ctx)
{
    _cleanup_json_ json_t *ignore = json_pack("[s]", t->source ? t->source : "");
    struct nb_request_spec rs;
    spec_for(t, &rs, ignore, NULL);
    json_t *r = nb_scheduler_dry_run(ctx, t->uuid, &rs, t->c->call_timeout_ms);
    nb_request_spec_free(&rs);
    return r;
}

/* Adds the "scheduler" check to host's verdict v from the dry run sched
 * (NULL: no scheduler answered, why): a host the filters stop cannot be
 * the destination unless forced (os-migrateLive force before 2.68). */
static void add_scheduler_check(json_t *v, const char *host, const json_t *sched, const char *why)
{
    const json_t *hv = json_object_get(json_object_get(sched, "hosts"), host);
    char evidence[2048], msg[2400] = "";
    bool ok = false, skipped = false;
    if (!sched) {
        skipped = true;
        snprintf(evidence, sizeof(evidence), "the scheduler did not answer: %s", why);
    } else if (nb_json_str(sched, "error")) {
        snprintf(evidence, sizeof(evidence), "%s", nb_json_str(sched, "details"));
        snprintf(msg, sizeof(msg), "%s", nb_json_str(sched, "error"));
    } else if (!hv) {
        snprintf(evidence, sizeof(evidence), "not among placement's allocation candidates for %s",
                 nb_json_str(sched, "resources") ? nb_json_str(sched, "resources") : "the flavor");
        snprintf(msg, sizeof(msg), "No valid host was found. Host %s lacks the free resources.",
                 host);
    } else {
        ok = json_is_true(json_object_get(hv, "ok"));
        snprintf(evidence, sizeof(evidence), "%s", nb_json_str(hv, "reason"));
        if (!ok)
            snprintf(msg, sizeof(msg), "No valid host was found. %s", nb_json_str(hv, "reason"));
    }
    if (!json_is_array(json_object_get(v, "checks")))
        json_object_set_new(v, "checks", json_array());
    json_array_append_new(json_object_get(v, "checks"),
                          json_pack("{s:s, s:b, s:b, s:b, s:s, s:s?}", "check", "scheduler", "ok",
                                    ok, "warning", 0, "skipped", skipped, "evidence", evidence,
                                    "message", msg[0] ? msg : NULL));
    if (ok || skipped)
        return;
    if (json_is_true(json_object_get(v, "ok")) || !nb_json_str(v, "message"))
        json_object_set_new(v, "message", json_string(msg));
    json_object_set_new(v, "ok", json_false());
}

json_t *cond_check_live_migration(struct conductor *c, struct nb_ctx *ctx, json_t *args)
{
    const char *uuid = nb_json_str(args, "uuid");
    const char *host = nb_json_str(args, "host");
    json_t *row = cond_instance_get(c, ctx, uuid);
    if (!row || nb_json_int(row, "deleted", 0) != 0) {
        json_decref(row);
        char msg[300];
        snprintf(msg, sizeof(msg), "Instance %s could not be found.", uuid ? uuid : "(null)");
        return json_pack("{s:s}", "error", msg);
    }
    struct lm_task t = {
        .c = c,
        .ctx = ctx,
        .row = row,
        .uuid = uuid,
        .source = nb_json_str(row, "host"),
        .source_node = nb_json_str(row, "node"),
        .block_migration =
            nb_json_str(args, "block_migration") ? nb_json_str(args, "block_migration") : "auto",
        .dry_run = true,
    };
    _cleanup_json_ json_t *hosts = host ? json_pack("[s]", host) : cond_lm_other_hosts(&t);
    _cleanup_json_ json_t *lines = json_array();
    json_t *out = json_array();
    double t0 = nb_time_mono();
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    bool forced = json_is_true(json_object_get(args, "force"));
    _cleanup_json_ json_t *sched = forced ? NULL : scheduler_dry_run(&t, &sub);
    size_t i;
    json_t *h;
    json_array_foreach (hosts, i, h) {
        json_t *v = try_host(&t, json_string_value(h), NULL, lines);
        json_object_del(v, "agent");
        json_object_del(v, "dest_node");
        if (!forced)
            add_scheduler_check(v, json_string_value(h), sched, nb_ctx_message(&sub));
        json_array_append_new(out, v);
    }
    NB_INFO(LOG_LM, ctx, uuid, "Live-migration prechecks of %zu host(s) took %.0f ms",
            json_array_size(hosts), (nb_time_mono() - t0) * 1000);
    json_t *reply = json_pack("{s:s, s:s?, s:s, s:o}", "instance", uuid, "source", t.source,
                              "block_migration", t.block_migration, "hosts", out);
    json_decref(row);
    return reply;
}
