/* audit.c - the cloud audit's database checks (contract in audit.h).
 *
 * Compute's own tables (instances, migrations, services, compute_nodes,
 * block_device_mapping) are read here by their owner; placement's
 * allocations come from nb_placement_audit_allocations and bound ports from
 * nb_network_bound_ports. The fixes (audit_fix.c) go through
 * nb_placement_* and nb_migration_set_status. */
#include "compute/audit.h"

#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/util.h"
#include "compute/objects/migration.h"
#include "compute/objects/states.h"
#include "compute/scheduler/scheduler.h"
#include "db/db.h"
#include "network/network.h"
#include "placement/placement.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const moving[] = {
    NB_MIGRATION_ACCEPTED,
    NB_MIGRATION_QUEUED,
    NB_MIGRATION_PREPARING,
    NB_MIGRATION_RUNNING,
    NB_MIGRATION_POST_MIGRATING,
    NB_MIGRATION_PRE_MIGRATING,
    NB_MIGRATION_MIGRATING,
    "confirming",
    "reverting",
};
static const char *const over[] = {
    NB_MIGRATION_COMPLETED, NB_MIGRATION_CONFIRMED, NB_MIGRATION_REVERTED,
    NB_MIGRATION_ERROR,     NB_MIGRATION_FAILED,    NB_MIGRATION_CANCELLED,
};
/* final, but the move's allocations wait (confirm, the source's clean-up) */
static const char *const waiting[] = {NB_MIGRATION_FINISHED, NB_MIGRATION_DONE};

static bool in(const char *s, const char *const *set, size_t n)
{
    for (size_t i = 0; s && i < n; i++)
        if (!strcmp(s, set[i]))
            return true;
    return false;
}

#define IN(s, set) in(s, set, sizeof(set) / sizeof(set[0]))

bool nb_audit_migration_moving(const char *status)
{
    if (IN(status, moving))
        return true;
    return status && !IN(status, over) && !IN(status, waiting);
}

bool nb_audit_migration_holds(const char *status)
{
    return !IN(status, over);
}

double nb_audit_age(const char *at, double now)
{
    if (!at || !*at)
        return -1;
    double t = nb_time_parse(at);
    return t < 0 ? -1 : now - t;
}

void nb_audit_opts_from_conf(struct nb_audit_opts *o)
{
    o->migration_stuck_secs = nb_conf_int("conductor", "audit_migration_stuck", 3600);
    o->task_stuck_secs = nb_conf_int("conductor", "audit_task_stuck", 3600);
    o->service_down_time = nb_conf_int("DEFAULT", "service_down_time", 60);
    o->now = 0;
}

void nb_audit_add(json_t *findings, const char *verdict, const char *check, const char *subject,
                  json_t *fix, const char *fmt, ...)
{
    char ev[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ev, sizeof(ev), fmt, ap);
    va_end(ap);
    json_t *f = json_pack("{s:s, s:s, s:s, s:s}", "check", check, "verdict", verdict, "subject",
                          subject ? subject : "", "evidence", ev);
    if (fix)
        json_object_set_new(f, "fix", fix);
    json_array_append_new(findings, f);
}

static const char *or_none(const char *s)
{
    return s && *s ? s : "None";
}

/* "VCPU=1, MEMORY_MB=512" of {rc: n}. */
static void amounts_text(const json_t *res, char *buf, size_t n)
{
    buf[0] = '\0';
    const char *rc;
    json_t *v;
    json_object_foreach ((json_t *)res, rc, v)
        snprintf(buf + strlen(buf), n - strlen(buf), "%s%s=%lld", buf[0] ? ", " : "", rc,
                 (long long)json_integer_value(v));
}

/* "provider <uuid> (<name>): VCPU=1, ...; ..." of one consumer's record. */
static void consumer_text(const json_t *c, char *buf, size_t n)
{
    buf[0] = '\0';
    const char *rp;
    json_t *res;
    json_object_foreach (json_object_get(c, "allocations"), rp, res) {
        char am[512];
        amounts_text(res, am, sizeof(am));
        snprintf(buf + strlen(buf), n - strlen(buf), "%sprovider %s (%s): %s", buf[0] ? "; " : "",
                 rp, or_none(nb_json_str(json_object_get(c, "providers"), rp)), am);
    }
}

/* {uuid: row} of rows by key. New ref. */
static json_t *index_by(const json_t *rows, const char *key)
{
    json_t *idx = json_object();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        const char *k = nb_json_str(r, key);
        if (k)
            json_object_set(idx, k, r);
    }
    return idx;
}

struct world {
    json_t *instances;  /* live instances rows */
    json_t *by_uuid;    /* {uuid: row} */
    json_t *migrations; /* live migrations rows */
    json_t *mig_by_uuid;
    json_t *allocs; /* nb_placement_audit_allocations */
    json_t *services;
};

static void world_free(struct world *w)
{
    json_decref(w->instances);
    json_decref(w->by_uuid);
    json_decref(w->migrations);
    json_decref(w->mig_by_uuid);
    json_decref(w->allocs);
    json_decref(w->services);
}

static int world_load(struct nb_db *db, struct nb_ctx *ctx, struct world *w)
{
    w->instances = nb_db_rows(db, ctx,
                              "SELECT uuid, display_name, host, node, vm_state, task_state, "
                              "flavor, project_id, user_id, updated_at, created_at FROM instances "
                              "WHERE deleted = 0 ORDER BY id",
                              "");
    w->migrations = w->instances ? nb_db_rows(db, ctx,
                                              "SELECT uuid, instance_uuid, status, "
                                              "migration_type, source_compute, dest_compute, "
                                              "updated_at, created_at FROM migrations WHERE "
                                              "deleted = 0 ORDER BY id",
                                              "")
                                 : NULL;
    w->services = w->migrations ? nb_db_rows(db, ctx,
                                             "SELECT host, binary, disabled, forced_down, "
                                             "last_seen_up, created_at FROM services WHERE "
                                             "deleted = 0 ORDER BY host, binary",
                                             "")
                                : NULL;
    w->allocs = w->services ? nb_placement_audit_allocations(ctx) : NULL;
    if (!w->allocs)
        return -1;
    w->by_uuid = index_by(w->instances, "uuid");
    w->mig_by_uuid = index_by(w->migrations, "uuid");
    return 0;
}

/* Allocations whose consumer is neither a live instance nor a migration
 * that may hold them (nova-manage placement audit). */
static void check_orphans(const struct world *w, json_t *out)
{
    const char *cid;
    json_t *c;
    int n = 0;
    json_object_foreach (w->allocs, cid, c) {
        if (json_object_get(w->by_uuid, cid))
            continue;
        const json_t *m = json_object_get(w->mig_by_uuid, cid);
        const char *st = nb_json_str(m, "status");
        if (m && nb_audit_migration_holds(st))
            continue;
        char held[1500];
        consumer_text(c, held, sizeof(held));
        char why[200];
        if (m)
            snprintf(why, sizeof(why), "migration %s of server %s is %s", cid,
                     or_none(nb_json_str(m, "instance_uuid")), or_none(st));
        else
            snprintf(why, sizeof(why), "no live server or migration %s", cid);
        json_t *fix = json_pack("{s:s, s:s, s:O}", "action", "delete_allocations", "consumer", cid,
                                "consumer_record", c);
        nb_audit_add(out, "PROBLEM", "orphan allocation", cid, fix,
                     "consumer %s holds %s, but there is %s (project %s)", cid, held, why,
                     or_none(nb_json_str(c, "project_id")));
        n++;
    }
    if (!n)
        nb_audit_add(out, "OK", "orphan allocation", NULL, NULL,
                     "all %zu consumers are live servers or migrations",
                     json_object_size(w->allocs));
}

/* The compute node's provider of host/node: new string or NULL. */
static char *host_provider(struct nb_db *db, struct nb_ctx *ctx, const char *host, const char *node)
{
    _cleanup_json_ json_t *row =
        nb_db_row(db, ctx,
                  "SELECT uuid FROM compute_nodes WHERE host = ? AND deleted = 0 AND "
                  "(hypervisor_hostname = ? OR ? IS NULL) ORDER BY id LIMIT 1",
                  "sss", host, node, node);
    nb_ctx_clear_error(ctx);
    const char *u = nb_json_str(row, "uuid");
    return u ? strdup(u) : NULL;
}

static bool boots_from_volume(struct nb_db *db, struct nb_ctx *ctx, const char *uuid)
{
    long long n = nb_db_int(db, ctx, 0,
                            "SELECT COUNT(*) FROM block_device_mapping WHERE instance_uuid = ? "
                            "AND deleted = 0 AND boot_index = 0 AND destination_type = 'volume'",
                            "s", uuid);
    nb_ctx_clear_error(ctx);
    return n > 0;
}

/* The resources the flavor of instance row r claims. New ref. */
static json_t *flavor_resources(struct nb_db *db, struct nb_ctx *ctx, const json_t *r)
{
    json_t *fl = json_object_get(r, "flavor");
    _cleanup_json_ json_t *parsed = NULL;
    if (json_is_string(fl))
        fl = parsed = json_loads(json_string_value(fl), 0, NULL);
    if (!json_is_object(fl))
        return json_object();
    return nb_scheduler_flavor_resources(fl, boots_from_volume(db, ctx, nb_json_str(r, "uuid")));
}

/* One live server with a host that holds no allocation (heal_allocations):
 * a finding, with the heal as its fix. */
static void missing_one(struct nb_db *db, struct nb_ctx *ctx, const json_t *r, json_t *out)
{
    const char *uuid = nb_json_str(r, "uuid"), *host = nb_json_str(r, "host");
    _cleanup_json_ json_t *res = flavor_resources(db, ctx, r);
    if (!json_object_size(res))
        return; /* a flavor of nothing claims nothing */
    _cleanup_free_ char *rp = host_provider(db, ctx, host, nb_json_str(r, "node"));
    char am[512];
    amounts_text(res, am, sizeof(am));
    json_t *fix = !rp ? NULL
                      : json_pack("{s:s, s:s, s:s, s:s?, s:s?, s:O}", "action", "heal", "consumer",
                                  uuid, "provider", rp, "project_id", nb_json_str(r, "project_id"),
                                  "user_id", nb_json_str(r, "user_id"), "resources", res);
    nb_audit_add(out, "PROBLEM", "missing allocation", uuid, fix,
                 "server %s (\"%s\", vm_state=%s) on host %s holds no allocation; its flavor "
                 "claims %s on provider %s%s",
                 uuid, or_none(nb_json_str(r, "display_name")), or_none(nb_json_str(r, "vm_state")),
                 host, am, rp ? rp : "None",
                 rp ? "" : " (the host has no compute node: nothing to heal against)");
}

static void check_missing(struct nb_db *db, struct nb_ctx *ctx, const struct world *w, json_t *out)
{
    size_t i, before = json_array_size(out);
    json_t *r;
    int skipped = 0;
    json_array_foreach (w->instances, i, r) {
        const char *host = nb_json_str(r, "host"), *vm = nb_json_str(r, "vm_state");
        const char *uuid = nb_json_str(r, "uuid");
        if (!host || !*host || (vm && !strcmp(vm, NB_VM_SHELVED_OFFLOADED)))
            continue;
        if (json_object_get(w->allocs, uuid))
            continue;
        const char *task = nb_json_str(r, "task_state");
        if (task && *task) { /* as heal_allocations: a task may be claiming */
            skipped++;
            continue;
        }
        missing_one(db, ctx, r, out);
    }
    if (json_array_size(out) == before)
        nb_audit_add(out, "OK", "missing allocation", NULL, NULL,
                     "every live server with a host holds allocations%s",
                     skipped ? " (servers in a task_state skipped, as heal_allocations does)" : "");
}

static void check_migrations(const struct world *w, const struct nb_audit_opts *o, json_t *out)
{
    size_t i, before = json_array_size(out);
    json_t *m;
    json_array_foreach (w->migrations, i, m) {
        const char *st = nb_json_str(m, "status"), *uuid = nb_json_str(m, "uuid");
        if (!nb_audit_migration_moving(st) || !uuid)
            continue;
        const char *at = nb_json_str(m, "updated_at");
        double age = nb_audit_age(at && *at ? at : nb_json_str(m, "created_at"), o->now);
        if (age < o->migration_stuck_secs)
            continue;
        json_t *fix = json_pack("{s:s, s:s, s:s}", "action", "migration_error", "migration", uuid,
                                "status", st);
        nb_audit_add(
            out, "PROBLEM", "stuck migration", uuid, fix,
            "%s %s of server %s (%s -> %s) has been %s for %.0f s (updated_at %s; "
            "threshold %ld s)",
            or_none(nb_json_str(m, "migration_type")), uuid,
            or_none(nb_json_str(m, "instance_uuid")), or_none(nb_json_str(m, "source_compute")),
            or_none(nb_json_str(m, "dest_compute")), st, age, or_none(at), o->migration_stuck_secs);
    }
    if (json_array_size(out) == before)
        nb_audit_add(out, "OK", "stuck migration", NULL, NULL,
                     "no migration in a non-final status for longer than %ld s",
                     o->migration_stuck_secs);
}

static void check_tasks(const struct world *w, const struct nb_audit_opts *o, json_t *out)
{
    size_t i, before = json_array_size(out);
    json_t *r;
    json_array_foreach (w->instances, i, r) {
        const char *task = nb_json_str(r, "task_state");
        if (!task || !*task)
            continue;
        const char *at = nb_json_str(r, "updated_at");
        double age = nb_audit_age(at && *at ? at : nb_json_str(r, "created_at"), o->now);
        if (age < o->task_stuck_secs)
            continue;
        nb_audit_add(out, "PROBLEM", "stuck task", nb_json_str(r, "uuid"), NULL,
                     "server %s (\"%s\") on host %s has been in task_state %s (vm_state %s) for "
                     "%.0f s (updated_at %s; threshold %ld s); `openstack server set --state` "
                     "resets it",
                     nb_json_str(r, "uuid"), or_none(nb_json_str(r, "display_name")),
                     or_none(nb_json_str(r, "host")), task, or_none(nb_json_str(r, "vm_state")),
                     age, or_none(at), o->task_stuck_secs);
    }
    if (json_array_size(out) == before)
        nb_audit_add(out, "OK", "stuck task", NULL, NULL,
                     "no server in a task_state for longer than %ld s", o->task_stuck_secs);
}

static void check_services(const struct world *w, const struct nb_audit_opts *o, json_t *out)
{
    size_t i, before = json_array_size(out), n = 0;
    json_t *s;
    json_array_foreach (w->services, i, s) {
        const char *bin = nb_json_str(s, "binary"), *host = nb_json_str(s, "host");
        n++;
        const char *seen = nb_json_str(s, "last_seen_up");
        double age = nb_audit_age(seen && *seen ? seen : nb_json_str(s, "created_at"), o->now);
        bool forced = nb_json_int(s, "forced_down", 0);
        if (!forced && age >= 0 && age <= o->service_down_time)
            continue;
        bool disabled = nb_json_int(s, "disabled", 0);
        char subject[300];
        snprintf(subject, sizeof(subject), "%s@%s", or_none(bin), or_none(host));
        nb_audit_add(out, disabled ? "WARN" : "PROBLEM", "service down", subject, NULL,
                     "%s on host %s: %s; last heartbeat %s (%.0f s ago, service_down_time %ld "
                     "s)%s",
                     or_none(bin), or_none(host), forced ? "forced down" : "no recent heartbeat",
                     or_none(seen), age, o->service_down_time, disabled ? "; it is disabled" : "");
    }
    if (json_array_size(out) == before)
        nb_audit_add(out, "OK", "service down", NULL, NULL,
                     "all %zu services reported within %ld s", n, o->service_down_time);
    /* compute/service.c and the conductor stamp last_seen_up with the clock
     * of the process that records the heartbeat, not the host's own */
    nb_audit_add(out, "SKIP", "clock skew", NULL, NULL,
                 "services.last_seen_up is stamped by the control plane that records the "
                 "heartbeat, not by the host; nothing records a host's own clock");
}

/* Hosts with a live nova-compute service: {host: true}. New ref. */
static json_t *compute_hosts(const struct world *w)
{
    json_t *hosts = json_object();
    size_t i;
    json_t *s;
    json_array_foreach (w->services, i, s)
        if (!strcmp(or_none(nb_json_str(s, "binary")), "nova-compute"))
            json_object_set_new(hosts, nb_json_str(s, "host"), json_true());
    return hosts;
}

static int check_ports(struct nb_db *db, struct nb_ctx *ctx, const struct world *w, json_t *out)
{
    _cleanup_json_ json_t *ports = nb_network_bound_ports(db, ctx);
    if (!ports)
        return -1;
    _cleanup_json_ json_t *hosts = compute_hosts(w);
    size_t i, before = json_array_size(out), n = 0;
    json_t *p;
    json_array_foreach (ports, i, p) {
        const char *owner = or_none(nb_json_str(p, "device_owner"));
        const char *host = nb_json_str(p, "binding_host_id");
        if (!nb_startswith(owner, "compute:"))
            continue; /* network agents' ports are bound to network hosts */
        n++;
        if (json_object_get(hosts, host))
            continue;
        nb_audit_add(out, "PROBLEM", "port binding", nb_json_str(p, "id"), NULL,
                     "port %s of server %s (status %s) is bound to host %s, which has no "
                     "nova-compute service",
                     nb_json_str(p, "id"), or_none(nb_json_str(p, "device_id")),
                     or_none(nb_json_str(p, "status")), host);
    }
    if (json_array_size(out) == before)
        nb_audit_add(out, "OK", "port binding", NULL, NULL,
                     "all %zu bound compute ports are on hosts with a nova-compute service", n);
    return 0;
}

json_t *nb_audit_cloud(struct nb_db *db, struct nb_ctx *ctx, const struct nb_audit_opts *opts)
{
    struct nb_audit_opts o = *opts;
    if (o.now <= 0)
        o.now = nb_time_now();
    struct world w = {0};
    if (world_load(db, ctx, &w) < 0) {
        world_free(&w);
        return NULL;
    }
    json_t *out = json_array();
    check_orphans(&w, out);
    check_missing(db, ctx, &w, out);
    check_migrations(&w, &o, out);
    check_tasks(&w, &o, out);
    check_services(&w, &o, out);
    int rc = check_ports(db, ctx, &w, out);
    world_free(&w);
    if (rc < 0) {
        json_decref(out);
        return NULL;
    }
    return out;
}

json_t *nb_audit_servers(struct nb_db *db, struct nb_ctx *ctx)
{
    return nb_db_rows(
        db, ctx, "SELECT uuid, host, vm_state FROM instances WHERE deleted = 0 ORDER BY id", "");
}
