/* live_migrate_hosts.c - the facts about one candidate destination of a
 * live migration (migrate_checks.h): its nova-compute service and compute
 * node from the database, the placement claim of the instance on it (made
 * here for a named host, by the scheduler for a scheduled one; only weighed
 * in a dry run), and what the two hosts say about each other (the
 * destination's check_can_live_migrate_destination, which asks the
 * source). Nothing here decides: migrate_checks.c judges. */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "compute/conductor/internal.h"
#include "compute/conductor/live_migrate.h"
#include "compute/rpc/compute_api.h"
#include "db/db.h"
#include "network/network.h"
#include "placement/placement.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

json_t *cond_lm_node(struct lm_task *t, const char *host)
{
    struct nb_ctx sub;
    nb_ctx_child(&sub, t->ctx);
    return nb_db_row(t->c->db, &sub,
                     "SELECT uuid, host, hypervisor_hostname, hypervisor_type, hypervisor_version, "
                     "free_disk_gb, disk_available_least FROM compute_nodes WHERE host = ? AND "
                     "deleted = 0 ORDER BY id LIMIT 1",
                     "s", host);
}

json_t *cond_lm_other_hosts(struct lm_task *t)
{
    struct nb_ctx sub;
    nb_ctx_child(&sub, t->ctx);
    _cleanup_json_ json_t *rows = nb_db_rows(
        t->c->db, &sub,
        "SELECT DISTINCT host FROM compute_nodes WHERE deleted = 0 AND host != ? ORDER BY host",
        "s", t->source ? t->source : "");
    json_t *out = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r)
        if (nb_json_str(r, "host"))
            json_array_append_new(out, json_string(nb_json_str(r, "host")));
    return out;
}

/* The destination's service row and its heartbeat age into facts. */
static void service_facts(struct lm_task *t, const char *dest, json_t *facts)
{
    struct nb_ctx sub;
    nb_ctx_child(&sub, t->ctx);
    json_t *svc =
        nb_db_row(t->c->db, &sub,
                  "SELECT disabled, disabled_reason, forced_down, last_seen_up, "
                  "created_at FROM services WHERE host = ? AND \"binary\" = 'nova-compute' "
                  "AND deleted = 0",
                  "s", dest);
    long long age = -1;
    if (svc) {
        const char *seen = nb_json_str(svc, "last_seen_up");
        double when = nb_time_parse(seen ? seen : nb_json_str(svc, "created_at"));
        if (when > 0)
            age = (long long)(nb_time_now() - when);
    }
    json_object_set_new(facts, "service", svc ? svc : json_null());
    json_object_set_new(facts, "service_age_s", json_integer(age));
    json_object_set_new(facts, "service_down_time",
                        json_integer(nb_conf_int("DEFAULT", "service_down_time", 60)));
}

/* capacity - used of rc on provider rp as placement sees it (its
 * allocation-candidate summaries); -1 when the provider offers none. */
static long long free_of(struct nb_ctx *ctx, const char *rp, const char *rc)
{
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    _cleanup_json_ json_t *res = json_pack("{s:i}", rc, 1);
    _cleanup_json_ json_t *cands = nb_placement_candidates(&sub, res, NULL, NULL, 0);
    json_t *s = json_object_get(
        json_object_get(json_object_get(json_object_get(cands, "provider_summaries"), rp),
                        "resources"),
        rc);
    if (!json_is_object(s))
        return -1;
    return nb_json_int(s, "capacity", 0) - nb_json_int(s, "used", 0);
}

/* "RC needed n, free f; …" of res on rp into ev, and the short ones into
 * short_out. */
static void weigh(struct nb_ctx *ctx, const char *rp, const json_t *res, char *ev, size_t n,
                  char *short_out, size_t sn)
{
    ev[0] = short_out[0] = '\0';
    const char *rc;
    json_t *v;
    json_object_foreach ((json_t *)res, rc, v) {
        long long need = json_integer_value(v), avail = free_of(ctx, rp, rc);
        if (avail < 0)
            avail = 0;
        snprintf(ev + strlen(ev), n - strlen(ev), "%s%s needed %lld, free %lld", ev[0] ? "; " : "",
                 rc, need, avail);
        if (need > avail)
            snprintf(short_out + strlen(short_out), sn - strlen(short_out),
                     "%s%s: needed %lld, free %lld", short_out[0] ? "; " : "", rc, need, avail);
    }
}

/* The amounts the consumer holds, summed over its providers (new ref). */
static json_t *held_amounts(struct nb_ctx *ctx, const char *consumer)
{
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    _cleanup_json_ json_t *by_rp = nb_placement_allocations_of(&sub, consumer);
    json_t *out = json_object();
    const char *rp, *rc;
    json_t *res, *v;
    json_object_foreach (by_rp, rp, res)
        json_object_foreach (res, rc, v)
            json_object_set_new(out, rc,
                                json_integer(nb_json_int(out, rc, 0) + json_integer_value(v)));
    return out;
}

/* The claim fact for dest (node: its compute node row): the scheduler's
 * when it chose dest, else the instance's claim on dest's provider of what
 * the migration holds on the source (dry run: weighed only). */
static json_t *claim_facts(struct lm_task *t, const char *dest, const json_t *node,
                           const json_t *scheduled)
{
    const char *rp = nb_json_str(node, "uuid");
    char ev[1500], shortage[1000], msg[2400];
    if (scheduled) {
        snprintf(ev, sizeof(ev), "claimed by the scheduler on %s (node %s, provider %s)", dest,
                 nb_json_str(scheduled, "node") ? nb_json_str(scheduled, "node") : "?",
                 rp ? rp : "?");
        return json_pack("{s:b, s:s}", "ok", 1, "evidence", ev);
    }
    _cleanup_json_ json_t *res =
        held_amounts(t->ctx, t->migration_uuid ? t->migration_uuid : t->uuid);
    weigh(t->ctx, rp, res, ev, sizeof(ev), shortage, sizeof(shortage));
    if (!json_object_size(res))
        return json_pack("{s:b, s:s}", "ok", 1, "evidence", "the instance holds no allocation");
    if (t->dry_run) {
        if (!shortage[0])
            return json_pack("{s:b, s:s}", "ok", 1, "evidence", ev);
        snprintf(msg, sizeof(msg),
                 "Migration pre-check error: Unable to move instance %s to host %s. There is "
                 "not enough capacity on the host for the instance: %s",
                 t->uuid, dest, shortage);
        return json_pack("{s:b, s:s, s:s}", "ok", 0, "message", msg, "evidence", ev);
    }
    struct nb_ctx sub;
    nb_ctx_child(&sub, t->ctx);
    if (nb_placement_claim(&sub, t->uuid, nb_json_str(t->row, "project_id"),
                           nb_json_str(t->row, "user_id"), rp, res, -1) == 0) {
        snprintf(ev + strlen(ev), sizeof(ev) - strlen(ev), "; claimed on provider %s", rp);
        return json_pack("{s:b, s:s}", "ok", 1, "evidence", ev);
    }
    snprintf(msg, sizeof(msg),
             "Migration pre-check error: Unable to move instance %s to host %s. There is not "
             "enough capacity on the host for the instance: %s",
             t->uuid, dest, shortage[0] ? shortage : nb_ctx_message(&sub));
    snprintf(ev + strlen(ev), sizeof(ev) - strlen(ev), "; placement: %s", nb_ctx_message(&sub));
    return json_pack("{s:b, s:s, s:s}", "ok", 0, "message", msg, "evidence", ev);
}

/* What the destination (and through it the source) says, or why it said
 * nothing. */
static json_t *agent_facts(struct lm_task *t, const char *dest)
{
    int check_ms = (int)(nb_conf_double("compute", "live_migration_precheck_timeout", 5) * 1000);
    int call_ms = 2 * check_ms + 10000;
    if (call_ms > t->c->call_timeout_ms)
        call_ms = t->c->call_timeout_ms;
    struct nb_ctx sub;
    nb_ctx_child(&sub, t->ctx);
    json_t *inst = cond_instance_for_agent(t->c, t->ctx, t->row);
    json_t *r = nb_compute_check_can_live_migrate_destination(&sub, dest, inst, t->source, check_ms,
                                                              call_ms);
    if (r)
        return r;
    char msg[1400];
    snprintf(msg, sizeof(msg), "The compute service of host %s did not answer the prechecks: %s",
             dest, nb_ctx_message(&sub));
    return json_pack("{s:b, s:s}", "ok", 0, "message", msg);
}

/* The instance's ports and dest's Linux bridge agent (network service),
 * or {"error"} when the service could not say. */
static json_t *networking_facts(struct lm_task *t, const char *dest)
{
    struct nb_ctx sub;
    nb_ctx_child(&sub, t->ctx);
    json_t *f = nb_network_move_facts(&sub, t->uuid, dest);
    if (f)
        return f;
    NB_WARN(LOG_LM, t->ctx, t->uuid, "the network service could not describe the ports: %s",
            nb_ctx_message(&sub));
    return json_pack("{s:s}", "error", nb_ctx_message(&sub));
}

json_t *cond_lm_facts(struct lm_task *t, const char *dest, const json_t *scheduled)
{
    json_t *inst = cond_instance_for_agent(t->c, t->ctx, t->row);
    json_t *facts = json_pack(
        "{s:{s:s, s:s?, s:s?, s:O}, s:s, s:s, s:s, s:s}", "instance", "uuid", t->uuid, "vm_state",
        nb_json_str(t->row, "vm_state"), "config_drive", nb_json_str(t->row, "config_drive"),
        "flavor", json_object_get(inst, "flavor"), "source", t->source ? t->source : "", "dest",
        dest, "block_migration", t->block_migration, "config_drive_format",
        nb_conf_str("DEFAULT", "config_drive_format", "iso9660"));
    json_decref(inst);
    service_facts(t, dest, facts);
    json_t *sn = cond_lm_node(t, t->source);
    json_t *dn = cond_lm_node(t, dest);
    json_object_set_new(facts, "source_node", sn ? sn : json_null());
    json_object_set_new(facts, "dest_node", dn ? dn : json_null());
    json_object_set_new(facts, "dest_known", json_boolean(dn != NULL));
    json_t *svc = json_object_get(facts, "service");
    long long age = nb_json_int(facts, "service_age_s", -1);
    bool reachable = dn && json_is_object(svc) && strcmp(dest, t->source ? t->source : "") &&
                     !nb_json_int(svc, "forced_down", 0) && age >= 0 &&
                     age <= nb_json_int(facts, "service_down_time", 60);
    bool usable = reachable && !nb_json_int(svc, "disabled", 0);
    if (usable)
        json_object_set_new(facts, "claim", claim_facts(t, dest, dn, scheduled));
    json_object_set_new(facts, "networking", networking_facts(t, dest));
    json_object_set_new(facts, "agent",
                        reachable ? agent_facts(t, dest)
                                  : json_pack("{s:b, s:s}", "ok", 0, "message",
                                              "not asked: the destination is not usable"));
    return facts;
}
