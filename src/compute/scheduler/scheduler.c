/* scheduler.c - the scheduler role: select_destinations on topic
 * "scheduler" (contract in scheduler.h).
 *
 * One request goes: resources from the flavor -> placement allocation
 * candidates -> host states (placement's usage + the cached view of compute
 * nodes, services and aggregates) -> request filters (retry, availability
 * zone) -> [filter_scheduler] enabled_filters -> weighers -> claim in
 * placement on the best host, falling to the next one on a 409. Every step
 * adds a line to the explanation that becomes the fault details when no
 * host is left.
 *
 * The host view (compute_nodes, services, aggregates) is cached for
 * [scheduler] host_cache_ms (default 500) so a burst of boots does not
 * re-read it per request; usage always comes fresh from placement, and the
 * claim is atomic there. Requests with a server group are serialised, so
 * that two members cannot both see a host as free of the group. */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/util.h"
#include "compute/objects/request_spec.h"
#include "compute/rpc/scheduler_api.h"
#include "compute/scheduler/host_state.h"
#include "compute/scheduler/scheduler.h"
#include "bus/bus.h"
#include "db/db.h"
#include "placement/placement.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LOG_MGR "nubo.scheduler.manager"
#define LOG_FILTERS "nubo.scheduler.filters"
#define MAX_FILTERS 32
#define MAX_WEIGHERS 8

#define NO_HOST_PLACEMENT "No valid host was found. "
#define NO_HOST_FILTERS "No valid host was found. There are not enough hosts available."

/* A consistent snapshot of the compute hosts, shared by requests. */
/* services_key(): counts and sums of services and aggregates */
#define SERVICES_KEY_LEN 192

struct host_cache {
    int refs;
    double built; /* nb_time_mono() */
    size_t n;
    struct nb_host_state *hosts;
    double *heartbeat; /* last_seen_up (or created_at) per host, -1 = never */
    bool *forced_down;
    json_t *by_rp;                       /* {rp_uuid: index} */
    json_t *keep;                        /* owns the JSON the host states borrow */
    json_t *parsed;                      /* {text: value} of keep_json, alike hosts share */
    char services_key[SERVICES_KEY_LEN]; /* services_key() when built */
};

struct scheduler {
    struct nb_env *env;
    pthread_mutex_t cache_lock;
    struct host_cache *cache;
    bool rebuilding; /* a request is building the next cache (cache_lock) */
    pthread_mutex_t group_lock;
    const struct nb_sched_filter *filters[MAX_FILTERS];
    size_t nfilters;
    const struct nb_sched_weigher *weighers[MAX_WEIGHERS];
    double multipliers[MAX_WEIGHERS];
    size_t nweighers;
};

static void cache_free(struct host_cache *c)
{
    free(c->hosts);
    free(c->heartbeat);
    free(c->forced_down);
    json_decref(c->by_rp);
    json_decref(c->keep);
    json_decref(c->parsed);
    free(c);
}

/* Drops a reference (under cache_lock); the last frees it. */
static void cache_unref(struct host_cache *c)
{
    if (c && --c->refs == 0)
        cache_free(c);
}

/* Parses a JSON text column into a value kept alive by c->keep, read-only:
 * hosts with the same text (same CPU, same hypervisor) share one value, so
 * a snapshot of thousands of alike hosts parses each text once. */
static json_t *keep_json(struct host_cache *c, const char *text)
{
    if (!text)
        return NULL;
    json_t *j = json_object_get(c->parsed, text);
    if (j)
        return j;
    j = nb_json_parse(text);
    if (j) {
        json_array_append_new(c->keep, j);
        json_object_set(c->parsed, text, j);
    }
    return j;
}

/* {host: [aggregate objects]} from the aggregate tables. New ref or NULL. */
static json_t *load_aggregates(struct nb_db *db, struct nb_ctx *ctx)
{
    _cleanup_json_ json_t *hosts =
        nb_db_rows(db, ctx,
                   "SELECT a.id, a.uuid, a.name, h.host FROM aggregates a "
                   "JOIN aggregate_hosts h ON h.aggregate_id = a.id WHERE a.deleted = 0",
                   "");
    _cleanup_json_ json_t *meta =
        nb_db_rows(db, ctx,
                   "SELECT m.aggregate_id, m.key, m.value FROM aggregate_metadata m "
                   "JOIN aggregates a ON a.id = m.aggregate_id WHERE a.deleted = 0",
                   "");
    if (!hosts || !meta)
        return NULL;
    json_t *aggs = json_object(); /* {id: {"name","uuid","metadata"}} */
    size_t i;
    json_t *r;
    json_array_foreach (hosts, i, r) {
        char id[32];
        snprintf(id, sizeof(id), "%lld", nb_json_int(r, "id", 0));
        if (!json_object_get(aggs, id))
            json_object_set_new(aggs, id,
                                json_pack("{s:s?, s:s?, s:{}}", "name", nb_json_str(r, "name"),
                                          "uuid", nb_json_str(r, "uuid"), "metadata"));
    }
    json_array_foreach (meta, i, r) {
        char id[32];
        snprintf(id, sizeof(id), "%lld", nb_json_int(r, "aggregate_id", 0));
        json_t *a = json_object_get(aggs, id);
        const char *k = nb_json_str(r, "key"), *v = nb_json_str(r, "value");
        if (a && k)
            json_object_set_new(json_object_get(a, "metadata"), k, json_string(v ? v : ""));
    }
    json_t *by_host = json_object();
    json_array_foreach (hosts, i, r) {
        char id[32];
        snprintf(id, sizeof(id), "%lld", nb_json_int(r, "id", 0));
        const char *h = nb_json_str(r, "host");
        if (!h)
            continue;
        json_t *list = json_object_get(by_host, h);
        if (!list) {
            list = json_array();
            json_object_set_new(by_host, h, list);
        }
        json_array_append(list, json_object_get(aggs, id));
    }
    json_decref(aggs);
    return by_host;
}

/* The zone(s) of a host: availability_zone metadata of its aggregates
 * (comma-joined if several differ), else the default zone. */
static void host_zone(json_t *aggs, const char *def, char *out, size_t n)
{
    out[0] = '\0';
    size_t i;
    json_t *a;
    json_array_foreach (aggs, i, a) {
        const char *z = nb_json_str(json_object_get(a, "metadata"), "availability_zone");
        if (!z || strstr(out, z))
            continue;
        snprintf(out + strlen(out), n - strlen(out), "%s%s", out[0] ? "," : "", z);
    }
    if (!out[0])
        nb_strlcpy(out, def, n);
}

/* {host: the row, or the row's value_key when given} of rows with a host.
 * New ref. */
static json_t *by_host(json_t *rows, const char *value_key)
{
    json_t *out = json_object();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        if (nb_json_str(r, "host"))
            json_object_set(out, nb_json_str(r, "host"),
                            value_key ? json_object_get(r, value_key) : r);
    }
    return out;
}

/* A numeric column, 0 when it is NULL. */
static double ratio_of(json_t *row, const char *key)
{
    json_t *ratio = json_object_get(row, key);
    return json_is_number(ratio) ? json_number_value(ratio) : 0;
}

/* Fills hs from its compute_nodes row, its aggregates (kept alive by c)
 * and its instance count. */
static void host_from_node(struct host_cache *c, struct nb_host_state *hs, json_t *r, json_t *aggs,
                           const char *def_zone, json_t *count_by_host)
{
    const char *host = nb_json_str(r, "host");
    nb_strlcpy(hs->host, host ? host : "", sizeof(hs->host));
    const char *node = nb_json_str(r, "hypervisor_hostname");
    nb_strlcpy(hs->nodename, node ? node : hs->host, sizeof(hs->nodename));
    const char *uuid = nb_json_str(r, "uuid");
    nb_strlcpy(hs->rp_uuid, uuid ? uuid : "", sizeof(hs->rp_uuid));
    const char *type = nb_json_str(r, "hypervisor_type");
    nb_strlcpy(hs->hypervisor_type, type ? type : "", sizeof(hs->hypervisor_type));
    hs->hypervisor_version = (long)nb_json_int(r, "hypervisor_version", 0);
    const char *ip = nb_json_str(r, "host_ip");
    nb_strlcpy(hs->host_ip, ip ? ip : "", sizeof(hs->host_ip));
    hs->cpu_info = keep_json(c, nb_json_str(r, "cpu_info"));
    hs->supported_instances = keep_json(c, nb_json_str(r, "supported_instances"));
    hs->aggregates = json_object_get(aggs, hs->host);
    if (hs->aggregates)
        json_array_append(c->keep, hs->aggregates);
    host_zone(hs->aggregates, def_zone, hs->availability_zone, sizeof(hs->availability_zone));
    hs->vcpus_total = nb_json_int(r, "vcpus", 0);
    hs->memory_mb_total = nb_json_int(r, "memory_mb", 0);
    hs->local_gb_total = nb_json_int(r, "local_gb", 0);
    hs->cpu_allocation_ratio = ratio_of(r, "cpu_allocation_ratio");
    hs->ram_allocation_ratio = ratio_of(r, "ram_allocation_ratio");
    hs->disk_allocation_ratio = ratio_of(r, "disk_allocation_ratio");
    hs->num_instances = (long)json_integer_value(json_object_get(count_by_host, hs->host));
}

/* Fills host i of c from its nova-compute services row (svc may be NULL:
 * no service, never seen). */
static void host_from_service(struct host_cache *c, size_t i, json_t *svc)
{
    struct nb_host_state *hs = &c->hosts[i];
    c->heartbeat[i] = -1;
    if (!svc)
        return;
    hs->has_service = true;
    hs->service_disabled = nb_json_int(svc, "disabled", 0) != 0;
    const char *reason = nb_json_str(svc, "disabled_reason");
    nb_strlcpy(hs->disabled_reason, reason ? reason : "", sizeof(hs->disabled_reason));
    c->forced_down[i] = nb_json_int(svc, "forced_down", 0) != 0;
    const char *seen = nb_json_str(svc, "last_seen_up");
    nb_strlcpy(hs->last_seen_up, seen ? seen : "", sizeof(hs->last_seen_up));
    if (!seen)
        seen = nb_json_str(svc, "created_at");
    c->heartbeat[i] = seen ? nb_time_parse(seen) : -1;
}

/* An empty snapshot with room for n hosts. */
static struct host_cache *cache_alloc(size_t n)
{
    struct host_cache *c = calloc(1, sizeof(*c));
    c->refs = 1;
    c->built = nb_time_mono();
    c->n = n;
    c->hosts = calloc(c->n ? c->n : 1, sizeof(*c->hosts));
    c->heartbeat = calloc(c->n ? c->n : 1, sizeof(double));
    c->forced_down = calloc(c->n ? c->n : 1, sizeof(bool));
    c->by_rp = json_object();
    c->keep = json_array();
    c->parsed = json_object();
    return c;
}

/* Builds a fresh snapshot of the compute hosts. NULL on a database error. */
static struct host_cache *cache_build(struct scheduler *s, struct nb_ctx *ctx)
{
    struct nb_db *db = s->env->db;
    _cleanup_json_ json_t *nodes = nb_db_rows(
        db, ctx,
        "SELECT uuid, host, hypervisor_hostname, hypervisor_type, hypervisor_version, cpu_info, "
        "vcpus, memory_mb, local_gb, host_ip, cpu_allocation_ratio, ram_allocation_ratio, "
        "disk_allocation_ratio, supported_instances FROM compute_nodes WHERE deleted = 0 "
        "ORDER BY id",
        "");
    _cleanup_json_ json_t *services =
        nb_db_rows(db, ctx,
                   "SELECT host, disabled, disabled_reason, forced_down, last_seen_up, created_at "
                   "FROM services WHERE \"binary\" = 'nova-compute' AND deleted = 0",
                   "");
    _cleanup_json_ json_t *counts = nb_db_rows(
        db, ctx,
        "SELECT host, COUNT(*) AS n FROM instances WHERE deleted = 0 AND host IS NOT NULL "
        "GROUP BY host",
        "");
    _cleanup_json_ json_t *aggs = load_aggregates(db, ctx);
    if (!nodes || !services || !counts || !aggs)
        return NULL;

    _cleanup_json_ json_t *svc_by_host = by_host(services, NULL);
    _cleanup_json_ json_t *count_by_host = by_host(counts, "n");
    const char *def_zone = nb_conf_str("DEFAULT", "default_availability_zone", "nova");
    struct host_cache *c = cache_alloc(json_array_size(nodes));
    size_t i;
    json_t *r;
    json_array_foreach (nodes, i, r) {
        struct nb_host_state *hs = &c->hosts[i];
        host_from_node(c, hs, r, aggs, def_zone, count_by_host);
        host_from_service(c, i, json_object_get(svc_by_host, hs->host));
        if (hs->rp_uuid[0])
            json_object_set_new(c->by_rp, hs->rp_uuid, json_integer((json_int_t)i));
    }
    return c;
}

/* A fingerprint of which services are disabled and forced down (their
 * count, and the count, sum and sum of squares of the ids of each kind)
 * and of the aggregates (their count, ids and last update, which a rename
 * or a metadata change sets; their hosts' count and a sum over aggregate
 * ids and host names), into key: a service disabled, enabled or forced
 * down, or a host added to an aggregate or a zone, changes it, so that no
 * request is scheduled on the states from before (heartbeats leave it
 * alone). Counts alone are not enough: enabling one host and disabling
 * another (nubo host drain after a maintenance) leaves them as they were. */
static void services_key(struct scheduler *s, struct nb_ctx *ctx, char key[SERVICES_KEY_LEN])
{
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    _cleanup_json_ json_t *r = nb_db_row(
        s->env->db, &sub,
        "SELECT COUNT(*) AS n, SUM(disabled) AS d, SUM(disabled * id) AS di, "
        "SUM(disabled * id * id) AS dq, SUM(forced_down) AS f, SUM(forced_down * id) AS fi, "
        "SUM(forced_down * id * id) AS fq, "
        "(SELECT COUNT(*) FROM aggregates) AS an, (SELECT SUM(id) FROM aggregates) AS ai, "
        "(SELECT MAX(updated_at) FROM aggregates) AS au, "
        "(SELECT COUNT(*) FROM aggregate_hosts) AS hn, "
        "(SELECT SUM(aggregate_id * (LENGTH(host) + 1)) FROM aggregate_hosts) AS hs "
        "FROM services WHERE deleted = 0",
        "");
    snprintf(key, SERVICES_KEY_LEN, "%lld/%lld/%llx/%llx/%lld/%llx/%llx/%lld/%lld/%s/%lld/%lld",
             nb_json_int(r, "n", -1), nb_json_int(r, "d", -1),
             (unsigned long long)nb_json_int(r, "di", -1),
             (unsigned long long)nb_json_int(r, "dq", -1), nb_json_int(r, "f", -1),
             (unsigned long long)nb_json_int(r, "fi", -1),
             (unsigned long long)nb_json_int(r, "fq", -1), nb_json_int(r, "an", -1),
             nb_json_int(r, "ai", 0), nb_json_str(r, "au") ? nb_json_str(r, "au") : "-",
             nb_json_int(r, "hn", -1), nb_json_int(r, "hs", 0));
}

/* A snapshot no older than [scheduler] host_cache_ms, or one a little
 * older while another request rebuilds it (with thousands of hosts a
 * rebuild takes long enough that requests queued behind it would wait
 * for nothing): never one from before a service changed state. */
static struct host_cache *cache_get(struct scheduler *s, struct nb_ctx *ctx)
{
    double max_age = (double)nb_conf_int("scheduler", "host_cache_ms", 500) / 1000.0;
    char key[SERVICES_KEY_LEN];
    services_key(s, ctx, key);
    pthread_mutex_lock(&s->cache_lock);
    struct host_cache *c = s->cache;
    bool same = c && !strcmp(c->services_key, key);
    if (!same || nb_time_mono() - c->built > max_age) {
        if (same && s->rebuilding) {
            c->refs++; /* the rebuild is under way: this one meanwhile */
            pthread_mutex_unlock(&s->cache_lock);
            return c;
        }
        s->rebuilding = true;
        pthread_mutex_unlock(&s->cache_lock);
        double t0 = nb_time_mono();
        struct host_cache *fresh = cache_build(s, ctx);
        if (fresh)
            nb_strlcpy(fresh->services_key, key, sizeof(fresh->services_key));
        NB_DEBUG(LOG_MGR, ctx, NULL, "host cache rebuilt: %zu host(s) in %.1f ms",
                 fresh ? fresh->n : 0, (nb_time_mono() - t0) * 1000);
        struct host_cache *old = NULL;
        pthread_mutex_lock(&s->cache_lock);
        s->rebuilding = false;
        if (fresh) {
            old = s->cache;
            s->cache = fresh;
            if (old && --old->refs > 0)
                old = NULL; /* still in use: its last user frees it */
        }
        c = s->cache;
        if (c)
            c->refs++;
        pthread_mutex_unlock(&s->cache_lock);
        if (old)
            cache_free(old); /* outside the lock: thousands of hosts */
        return c;
    }
    if (c)
        c->refs++;
    pthread_mutex_unlock(&s->cache_lock);
    return c;
}

static void cache_put(struct scheduler *s, struct host_cache *c)
{
    pthread_mutex_lock(&s->cache_lock);
    cache_unref(c);
    pthread_mutex_unlock(&s->cache_lock);
}

/* The flavor object inside an instance's flavor JSON (flat, or Nova's
 * {"cur": {"nova_object.data": …}} shape). Borrowed. */
static json_t *flavor_body(json_t *flavor)
{
    json_t *cur = json_object_get(flavor, "cur");
    if (cur)
        flavor = cur;
    json_t *data = json_object_get(flavor, "nova_object.data");
    return data ? data : flavor;
}

/* Placement resources for the flavor, as Nova's resources_from_flavor
 * (DISK_GB = root + ephemeral + swap MB rounded up to GB; no root disk when
 * booting from volume), with "resources:<RC>=<n>" extra specs overriding
 * and "trait:<T>=required" collected into *required. New ref. */
static json_t *resources_for(json_t *flavor, bool is_bfv, json_t **required)
{
    long long vcpus = nb_json_int(flavor, "vcpus", 0);
    long long ram = nb_json_int(flavor, "memory_mb", 0);
    long long root = is_bfv ? 0 : nb_json_int(flavor, "root_gb", 0);
    long long disk_mb =
        (root + nb_json_int(flavor, "ephemeral_gb", 0)) * 1024 + nb_json_int(flavor, "swap", 0);
    long long disk = (disk_mb + 1023) / 1024;
    json_t *res = json_object();
    if (vcpus > 0)
        json_object_set_new(res, "VCPU", json_integer(vcpus));
    if (ram > 0)
        json_object_set_new(res, "MEMORY_MB", json_integer(ram));
    if (disk > 0)
        json_object_set_new(res, "DISK_GB", json_integer(disk));
    *required = json_array();
    const char *key;
    json_t *v;
    json_object_foreach (json_object_get(flavor, "extra_specs"), key, v) {
        const char *val = json_string_value(v);
        if (!val)
            continue;
        if (nb_startswith(key, "resources:")) {
            long long amount = strtoll(val, NULL, 10);
            if (amount > 0)
                json_object_set_new(res, key + strlen("resources:"), json_integer(amount));
            else
                json_object_del(res, key + strlen("resources:"));
        } else if (nb_startswith(key, "trait:") && !strcmp(val, "required")) {
            json_array_append_new(*required, json_string(key + strlen("trait:")));
        }
    }
    return res;
}

json_t *nb_scheduler_flavor_resources(json_t *flavor, bool is_bfv)
{
    json_t *required = NULL;
    json_t *res = resources_for(flavor_body(flavor), is_bfv, &required);
    json_decref(required);
    return res;
}

/* "VCPU=1, MEMORY_MB=512, DISK_GB=1" into buf. */
static void resources_text(json_t *res, char *buf, size_t n)
{
    buf[0] = '\0';
    const char *rc;
    json_t *v;
    json_object_foreach (res, rc, v) {
        snprintf(buf + strlen(buf), n - strlen(buf), "%s%s=%lld", buf[0] ? ", " : "", rc,
                 (long long)json_integer_value(v));
    }
}

/* Number of other group members per host: {host: n}. Members are read
 * now (under the group lock), not from the request, so that a member
 * created and placed since the request was made counts; one without a host
 * yet (being built) counts where placement holds its allocation. New ref. */
static json_t *group_hosts(struct scheduler *s, struct nb_ctx *ctx, struct host_cache *c,
                           json_t *group, const char *self)
{
    json_t *out = json_object();
    struct nb_ctx sub; /* lookups: a failure falls back to what the spec says */
    nb_ctx_child(&sub, ctx);
    _cleanup_json_ json_t *rows = NULL;
    const char *guuid = nb_json_str(group, "uuid");
    if (guuid)
        rows = nb_db_rows(s->env->db, &sub,
                          "SELECT m.instance_uuid AS uuid FROM instance_group_member m JOIN "
                          "instance_groups g ON g.id = m.group_id WHERE g.uuid = ?",
                          "s", guuid);
    _cleanup_json_ json_t *members = json_array();
    size_t i;
    json_t *m;
    json_array_foreach (rows, i, m) {
        if (nb_json_str(m, "uuid"))
            json_array_append_new(members, json_string(nb_json_str(m, "uuid")));
    }
    if (!rows)
        json_array_extend(members, json_object_get(group, "members"));
    json_array_foreach (members, i, m) {
        const char *uuid = json_string_value(m);
        if (!uuid || (self && !strcmp(uuid, self)))
            continue;
        _cleanup_json_ json_t *row =
            nb_db_row(s->env->db, &sub, "SELECT host FROM instances WHERE uuid = ? AND deleted = 0",
                      "s", uuid);
        if (!row)
            continue;
        char host[256] = "";
        if (nb_json_str(row, "host")) {
            nb_strlcpy(host, nb_json_str(row, "host"), sizeof(host));
        } else {
            _cleanup_free_ char *rp = nb_placement_consumer_provider(&sub, uuid);
            json_t *idx = rp ? json_object_get(c->by_rp, rp) : NULL;
            if (idx)
                nb_strlcpy(host, c->hosts[json_integer_value(idx)].host, sizeof(host));
        }
        if (host[0])
            json_object_set_new(out, host, json_integer(nb_json_int(out, host, 0) + 1));
    }
    return out;
}

/* The request as the filters see it (borrowing from rs). */
static void build_spec(struct nb_sched_spec *spec, const char *uuid,
                       const struct nb_request_spec *rs, json_t *flavor, json_t **image_props_out)
{
    memset(spec, 0, sizeof(*spec));
    spec->instance_uuid = uuid;
    spec->flavor = flavor;
    json_t *props = json_object_get(rs->image, "properties");
    *image_props_out = json_is_object(props) ? json_incref(props) : json_object();
    spec->image_props = *image_props_out;
    spec->default_architecture =
        nb_conf_str("filter_scheduler", "image_properties_default_architecture", NULL);
    spec->availability_zone = rs->availability_zone;
    spec->default_zone = nb_conf_str("DEFAULT", "default_availability_zone", "nova");
    json_t *group = rs->group;
    if (json_is_object(group)) {
        spec->group_uuid = nb_json_str(group, "uuid");
        spec->group_policy = nb_json_str(group, "policy");
        json_t *max = json_object_get(json_object_get(group, "rules"), "max_server_per_host");
        spec->max_server_per_host = json_is_integer(max)  ? (long)json_integer_value(max)
                                    : json_is_string(max) ? strtol(json_string_value(max), NULL, 10)
                                                          : 1;
    }
    spec->retry_hosts = rs->retry_hosts;
    spec->unreachable_hosts = rs->unreachable_hosts;
    spec->isolation_namespace =
        nb_conf_str("filter_scheduler", "aggregate_image_properties_isolation_namespace", NULL);
    spec->isolation_separator =
        nb_conf_str("filter_scheduler", "aggregate_image_properties_isolation_separator", ".");
}

/* Joins the JSON array of strings with newlines. Caller frees. */
static char *join_lines(json_t *lines)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    size_t i;
    json_t *l;
    json_array_foreach (lines, i, l)
        fprintf(f, "%s%s", i ? "\n" : "", json_string_value(l));
    fclose(f);
    return buf;
}

/* details on one line, for the log */
static char *one_line(const char *text)
{
    char *out = strdup(text ? text : "");
    for (char *p = out; *p; p++)
        if (*p == '\n')
            *p = '|';
    return out;
}

static json_t *no_host(struct nb_ctx *ctx, const char *uuid, const char *error, json_t *lines)
{
    _cleanup_free_ char *details = join_lines(lines);
    _cleanup_free_ char *flat = one_line(details);
    NB_INFO(LOG_MGR, ctx, uuid, "%s Explanation: %s", error, flat);
    return json_pack("{s:s, s:s}", "error", error, "details", details);
}

/* Placement's candidates (nb_placement_candidate_list). */
struct cand_list {
    struct nb_placement_cand *v;
    size_t n, nreq;
};

/* Host states for the candidates, in placement's order, usage filled from
 * placement's. Providers that are not compute nodes are left out. Returns
 * the count; *out is malloc'd. */
static size_t candidate_hosts(struct host_cache *c, const struct cand_list *cl,
                              struct nb_host_state **out)
{
    size_t n = 0;
    *out = calloc(cl->n + 1, sizeof(**out));
    bool *seen = calloc(c->n + 1, sizeof(bool)); /* by cache index: a host once */
    double now = nb_time_now();
    double down_time = (double)nb_conf_int("DEFAULT", "service_down_time", 60);
    for (size_t i = 0; i < cl->n; i++) {
        const struct nb_placement_cand *pc = &cl->v[i];
        json_t *idx = json_object_get(c->by_rp, pc->rp_uuid);
        if (!idx)
            continue;
        size_t k = (size_t)json_integer_value(idx);
        if (k >= c->n || seen[k])
            continue;
        seen[k] = true;
        struct nb_host_state *hs = &(*out)[n++];
        *hs = c->hosts[k];
        hs->forced_down = c->forced_down[k];
        hs->service_up = hs->has_service && !c->forced_down[k] && c->heartbeat[k] >= 0 &&
                         fabs(now - c->heartbeat[k]) <= down_time;
        hs->vcpu_capacity = pc->vcpu_capacity;
        hs->vcpu_used = pc->vcpu_used;
        hs->ram_capacity = pc->ram_capacity;
        hs->ram_used = pc->ram_used;
        hs->disk_capacity = pc->disk_capacity;
        hs->disk_used = pc->disk_used;
    }
    free(seen);
    return n;
}

/* Restricts hosts to the forced one (admin "zone:host"): filters are
 * skipped for forced hosts, as in Nova. */
static size_t force_host(struct nb_host_state **hosts, size_t n, const char *host, json_t *lines)
{
    size_t kept = 0;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(hosts[i]->host, host))
            hosts[kept++] = hosts[i];
    char line[512];
    snprintf(line, sizeof(line), "ForcedHost: %zu -> %zu; host %s forced, filters skipped", n, kept,
             host);
    json_array_append_new(lines, json_string(line));
    return kept;
}

/* Restricts hosts to the one named in the request (2.74 "host"); unlike a
 * forced host, filters still run. */
static size_t requested_host(struct nb_host_state **hosts, size_t n, const char *host,
                             json_t *lines)
{
    size_t kept = 0;
    char reasons[1024] = "";
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(hosts[i]->host, host))
            hosts[kept++] = hosts[i];
        else if (strlen(reasons) < sizeof(reasons) - 300)
            snprintf(reasons + strlen(reasons), sizeof(reasons) - strlen(reasons),
                     "; %s: host %s was requested", hosts[i]->host, host);
    }
    char line[1200];
    snprintf(line, sizeof(line), "RequestedDestination: %zu -> %zu%s", n, kept, reasons);
    json_array_append_new(lines, json_string(line));
    return kept;
}

/* Drops the hosts the request ignores (Nova's ignore_hosts: a move's
 * source host unless it may stay there), as Nova's host manager strips
 * them before the filters ("Host filter ignoring hosts: …"). */
static size_t ignore_hosts(struct nb_host_state **hosts, size_t n, json_t *ignored, json_t *lines)
{
    size_t kept = 0;
    char names[1024] = "";
    for (size_t i = 0; i < n; i++) {
        bool drop = false;
        size_t k;
        json_t *h;
        json_array_foreach (ignored, k, h) {
            drop = drop || (json_is_string(h) && !strcmp(json_string_value(h), hosts[i]->host));
        }
        if (!drop)
            hosts[kept++] = hosts[i];
        else if (strlen(names) < sizeof(names) - 300)
            snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s",
                     names[0] ? ", " : "", hosts[i]->host);
    }
    char line[1200];
    snprintf(line, sizeof(line), "IgnoreHosts: %zu -> %zu%s%s", n, kept,
             names[0] ? "; Host filter ignoring hosts: " : "", names);
    json_array_append_new(lines, json_string(line));
    return kept;
}

/* Asks placement for allocation candidates for res (with the required
 * traits) into *cl, adding the outcome to lines; while the database is
 * unreachable it asks again once a second (nb_db_redo_or_wait). 0, or -1
 * when there are none or placement failed: lines then hold the whole
 * explanation and ctx's error is cleared. */
static int ask_placement(struct nb_db *db, struct nb_ctx *ctx, const char *uuid, json_t *res,
                         json_t *required, const char *restext, json_t *lines, struct cand_list *cl)
{
    int rc;
    /* a database restart or Galera failover is waited out (a read: safe to
     * redo), not answered as no valid host */
    for (int tries = 1; (rc = nb_placement_candidate_list(
                             ctx, res, json_array_size(required) ? required : NULL, NULL,
                             (int)nb_conf_int("scheduler", "max_placement_results", 1000), &cl->v,
                             &cl->n, &cl->nreq)) < 0 &&
                        nb_ctx_failed(ctx) && nb_db_redo_or_wait(db, ctx, tries);
         tries++)
        ;
    if (rc < 0) {
        char line[1400];
        snprintf(line, sizeof(line), "Placement: allocation candidates for %s failed: %s", restext,
                 nb_ctx_message(ctx));
        nb_ctx_clear_error(ctx); /* handled: answered as no valid host */
        json_array_append_new(lines, json_string(line));
        return -1;
    }
    size_t ncand = cl->nreq;
    char line[2048];
    char traits[512] = "";
    size_t ti;
    json_t *tv;
    json_array_foreach (required, ti, tv) {
        snprintf(traits + strlen(traits), sizeof(traits) - strlen(traits), "%s%s",
                 ti ? ", " : " with required traits ", json_string_value(tv));
    }
    snprintf(line, sizeof(line), "Placement: %zu candidate(s) for %s%s", ncand, restext, traits);
    json_array_append_new(lines, json_string(line));
    NB_INFO(LOG_FILTERS, ctx, uuid, "%s", line);
    if (ncand == 0) {
        struct nb_ctx sub; /* the explanation is best-effort */
        nb_ctx_child(&sub, ctx);
        _cleanup_free_ char *why = nb_placement_explain_shortage(&sub, res);
        if (why && *why)
            json_array_append_new(lines, json_string(why));
        else
            json_array_append_new(
                lines, json_string(json_array_size(required)
                                       ? "no compute host has the required traits with enough "
                                         "free resources"
                                       : "no compute host is registered in placement"));
        return -1;
    }
    return 0;
}

/* The host states of the candidates (*states, malloc'd) and the list of
 * pointers to them the filters work on (*hosts, malloc'd), noting in lines
 * the providers that are not compute nodes. Returns the count. */
static size_t host_list(struct host_cache *c, const struct cand_list *cl,
                        struct nb_host_state **states, struct nb_host_state ***hosts, json_t *lines)
{
    size_t ncand = cl->nreq;
    size_t n = candidate_hosts(c, cl, states);
    *hosts = calloc(n + 1, sizeof(**hosts));
    for (size_t i = 0; i < n; i++)
        (*hosts)[i] = &(*states)[i];
    if (n < ncand) {
        char line[2048];
        snprintf(line, sizeof(line),
                 "ComputeNodes: %zu -> %zu; providers without a compute node left out", ncand, n);
        json_array_append_new(lines, json_string(line));
    }
    return n;
}

/* The request filters spec needs (retry, availability zone) into pre[2];
 * returns their number. */
static size_t request_filters(const struct nb_sched_spec *spec,
                              const struct nb_sched_filter *pre[2])
{
    size_t npre = 0;
    if (json_array_size(spec->retry_hosts) || json_array_size(spec->unreachable_hosts))
        pre[npre++] = &nb_filter_retry;
    if (spec->availability_zone && *spec->availability_zone &&
        nb_conf_bool("scheduler", "query_placement_for_availability_zone", true))
        pre[npre++] = &nb_filter_az_prefilter;
    return npre;
}

/* Narrows hosts to those the request allows: the forced host (filters
 * skipped), else the requested host, the request filters and the enabled
 * filters, each logged. Returns the count left. */
static size_t filter_hosts(struct scheduler *s, struct nb_ctx *ctx, const char *uuid,
                           const struct nb_request_spec *rs, const struct nb_sched_spec *spec,
                           struct nb_host_state **hosts, size_t n, json_t *lines)
{
    const char *forced = rs->force_host;
    const char *requested = rs->requested_host;
    if (forced && *forced)
        return force_host(hosts, n, forced, lines);
    if (requested && *requested)
        n = requested_host(hosts, n, requested, lines);
    if (json_array_size(rs->ignore_hosts))
        n = ignore_hosts(hosts, n, rs->ignore_hosts, lines);
    const struct nb_sched_filter *pre[2];
    size_t npre = request_filters(spec, pre);
    size_t before = json_array_size(lines);
    n = nb_sched_run_filters(hosts, n, pre, npre, spec, lines);
    n = nb_sched_run_filters(hosts, n, s->filters, s->nfilters, spec, lines);
    for (size_t i = before; i < json_array_size(lines); i++)
        NB_INFO(LOG_FILTERS, ctx, uuid, "%s", json_string_value(json_array_get(lines, i)));
    return n;
}

/* The monotonic times of one request's steps, for the selection log line. */
struct select_times {
    double start, placement, weighed;
};

/* "host=weight, …" of the five best hosts into weights, and as a line. */
static void weights_text(struct nb_host_state **hosts, size_t n, char *weights, size_t size,
                         json_t *lines)
{
    char line[2048];
    weights[0] = '\0';
    for (size_t i = 0; i < n && i < 5; i++)
        snprintf(weights + strlen(weights), size - strlen(weights), "%s%s=%.3f", i ? ", " : "",
                 hosts[i]->host, hosts[i]->weight);
    snprintf(line, sizeof(line), "Weighed: %s%s", weights, n > 5 ? ", …" : "");
    json_array_append_new(lines, json_string(line));
}

#define CLAIM_TRIES 3

/* nb_placement_claim, tried again (up to CLAIM_TRIES times in all, after
 * 50 ms, then 100 ms) when its transaction failed on a deadlock, a lock
 * wait timeout or a Galera conflict (db.h nb_db_retryable_failures):
 * another scheduler claiming on the same providers at the same moment
 * (several control planes on one MariaDB), not a refusal of this host. */
static int claim_retrying(struct nb_ctx *claim, const char *uuid, const char *project,
                          const char *user, const char *rp_uuid, json_t *res)
{
    for (int attempt = 1;; attempt++) {
        unsigned before = nb_db_retryable_failures();
        int rc = nb_placement_claim(claim, uuid, project, user, rp_uuid, res, -1);
        if (rc == 0 || attempt >= CLAIM_TRIES || nb_db_retryable_failures() == before)
            return rc;
        NB_WARN(LOG_MGR, claim, uuid,
                "Claim on provider %s hit a database conflict (%s); retrying (%d of %d)", rp_uuid,
                nb_ctx_message(claim), attempt, CLAIM_TRIES - 1);
        nb_ctx_clear_error(claim);
        usleep((useconds_t)(50000 << (attempt - 1)));
    }
}

/* Claims res in placement on the weighed hosts in order, the next one on a
 * refusal. The selection reply, or the no-host reply when every claim was
 * refused (each refusal in lines, on its own child context). New ref. */
static json_t *claim_best(struct nb_ctx *ctx, const char *uuid, const struct nb_request_spec *rs,
                          struct nb_host_state **hosts, size_t n, json_t *res, const char *restext,
                          const char *weights, const struct select_times *t, json_t *lines)
{
    const char *project = rs->project_id;
    const char *user = rs->user_id;
    char line[2048];
    for (size_t i = 0; i < n; i++) {
        struct nb_ctx claim; /* each host's refusal is its own */
        nb_ctx_child(&claim, ctx);
        if (claim_retrying(&claim, uuid, project ? project : ctx->project_id,
                           user ? user : ctx->user_id, hosts[i]->rp_uuid, res) == 0) {
            _cleanup_free_ char *details = join_lines(lines);
            double t_end = nb_time_mono();
            NB_INFO(LOG_MGR, ctx, uuid,
                    "Selected host %s (node %s) and claimed %s; weighed hosts: %s%s; took "
                    "%.1f ms (candidates %.1f, hosts/filters/weighers %.1f, claim %.1f)",
                    hosts[i]->host, hosts[i]->nodename, restext, weights, n > 5 ? ", …" : "",
                    (t_end - t->start) * 1000, (t->placement - t->start) * 1000,
                    (t->weighed - t->placement) * 1000, (t_end - t->weighed) * 1000);
            return json_pack("{s:s, s:s, s:s, s:s, s:s}", "host", hosts[i]->host, "node",
                             hosts[i]->nodename, "rp_uuid", hosts[i]->rp_uuid, "availability_zone",
                             hosts[i]->availability_zone, "details", details);
        }
        snprintf(line, sizeof(line), "Claim: %s refused (%d): %s", hosts[i]->host,
                 nb_ctx_status(&claim), nb_ctx_message(&claim));
        NB_INFO(LOG_MGR, ctx, uuid, "%s", line);
        json_array_append_new(lines, json_string(line));
    }
    return no_host(ctx, uuid, NO_HOST_FILTERS, lines);
}

/* A dry run's answer (nothing claimed): per candidate host whether the
 * request filters and the enabled filters let it through, with the first
 * filter that stopped it, each host judged on its own; hosts that are not
 * placement candidates are absent (the caller names them so). New ref. */
static json_t *dry_run_verdicts(struct scheduler *s, const struct nb_sched_spec *spec,
                                struct nb_host_state **hosts, size_t n, const char *restext,
                                json_t *lines)
{
    const struct nb_sched_filter *pre[2];
    size_t npre = request_filters(spec, pre);
    json_t *verdicts = json_object();
    for (size_t i = 0; i < n; i++) {
        struct nb_host_state *one[1] = {hosts[i]};
        _cleanup_json_ json_t *l = json_array();
        size_t left = nb_sched_judge_filters(one, 1, pre, npre, spec, l);
        left = nb_sched_judge_filters(one, left, s->filters, s->nfilters, spec, l);
        const char *last = json_string_value(json_array_get(l, json_array_size(l) - 1));
        json_object_set_new(verdicts, hosts[i]->host,
                            left ? json_pack("{s:b, s:s}", "ok", 1, "reason", "passed every filter")
                                 : json_pack("{s:b, s:s}", "ok", 0, "reason", last ? last : "?"));
    }
    _cleanup_free_ char *details = join_lines(lines);
    return json_pack("{s:b, s:s, s:o, s:s}", "dry_run", 1, "resources", restext, "hosts", verdicts,
                     "details", details);
}

/* select_destinations of instance uuid with request spec rs. */
static json_t *select_for(struct scheduler *s, struct nb_ctx *ctx, const char *uuid,
                          const struct nb_request_spec *rs, bool dry_run)
{
    json_t *flavor = flavor_body(rs->flavor);
    if (!uuid || !json_object_size(flavor))
        return json_pack("{s:s, s:s}", "error", NO_HOST_PLACEMENT, "details",
                         "The request has no instance UUID or no flavor.");
    _cleanup_json_ json_t *lines = json_array();
    _cleanup_json_ json_t *required = NULL;
    _cleanup_json_ json_t *res = resources_for(flavor, rs->is_bfv, &required);
    char restext[256];
    resources_text(res, restext, sizeof(restext));

    struct select_times t = {.start = nb_time_mono()};
    struct cand_list cl = {0};
    if (ask_placement(s->env->db, ctx, uuid, res, required, restext, lines, &cl) < 0) {
        free(cl.v);
        return no_host(ctx, uuid, NO_HOST_PLACEMENT, lines);
    }

    t.placement = nb_time_mono();
    struct host_cache *c = cache_get(s, ctx);
    if (!c) {
        char line[2048];
        snprintf(line, sizeof(line), "Database error reading compute hosts: %s",
                 nb_ctx_message(ctx));
        nb_ctx_clear_error(ctx); /* handled: answered as no valid host */
        json_array_append_new(lines, json_string(line));
        free(cl.v);
        return no_host(ctx, uuid, NO_HOST_FILTERS, lines);
    }
    struct nb_host_state *states = NULL;
    struct nb_host_state **hosts = NULL;
    size_t n = host_list(c, &cl, &states, &hosts, lines);
    free(cl.v);

    json_t *group = rs->group;
    bool grouped = json_is_object(group);
    if (grouped)
        pthread_mutex_lock(&s->group_lock);

    struct nb_sched_spec spec;
    _cleanup_json_ json_t *props = NULL;
    build_spec(&spec, uuid, rs, flavor, &props);
    _cleanup_json_ json_t *ghosts = grouped ? group_hosts(s, ctx, c, group, uuid) : json_object();
    spec.group_hosts = ghosts;
    json_t *reply;
    if (dry_run) {
        reply = dry_run_verdicts(s, &spec, hosts, n, restext, lines);
    } else if ((n = filter_hosts(s, ctx, uuid, rs, &spec, hosts, n, lines)) == 0) {
        reply = no_host(ctx, uuid, NO_HOST_FILTERS, lines);
    } else {
        nb_sched_weigh(hosts, n, s->weighers, s->multipliers, s->nweighers);
        t.weighed = nb_time_mono();
        char weights[512];
        weights_text(hosts, n, weights, sizeof(weights), lines);
        reply = claim_best(ctx, uuid, rs, hosts, n, res, restext, weights, &t, lines);
    }
    if (grouped)
        pthread_mutex_unlock(&s->group_lock);
    free(hosts);
    free(states);
    cache_put(s, c);
    return reply;
}

/* select_destinations {"instance_uuid", "spec": <request spec JSON>}. */
static json_t *select_destinations(struct scheduler *s, struct nb_ctx *ctx, json_t *args)
{
    struct nb_request_spec rs;
    nb_request_spec_from_json(&rs, json_object_get(args, "spec"));
    bool dry_run = json_is_true(json_object_get(args, "dry_run"));
    json_t *reply = select_for(s, ctx, nb_json_str(args, "instance_uuid"), &rs, dry_run);
    if (!dry_run)
        nb_metrics_add(
            NB_M_SCHEDULER_DECISIONS, 1,
            (const char *const[]){nb_json_str(reply, "host") ? "selected" : "no_valid_host"});
    nb_request_spec_free(&rs);
    return reply;
}

static json_t *rpc_select_destinations(void *s, struct nb_ctx *ctx, const char *method,
                                       json_t *args)
{
    (void)method;
    return select_destinations(s, ctx, args);
}

static json_t *rpc_ping(void *s, struct nb_ctx *ctx, const char *method, json_t *args)
{
    (void)s, (void)ctx, (void)method, (void)args;
    return json_pack("{s:b}", "ok", 1);
}

/* The methods of topic "scheduler" (the messages: scheduler_api.h). */
static const struct nb_bus_method methods[] = {
    {NB_SCHEDULER_SELECT_DESTINATIONS, NB_BUS_CALL, rpc_select_destinations},
    {NB_SCHEDULER_PING, NB_BUS_CALL, rpc_ping},
    {NULL, 0, NULL},
};

static const struct nb_bus_service service = {"scheduler", LOG_MGR, methods};

static json_t *handle(void *opaque, struct nb_ctx *ctx, const char *method, json_t *args)
{
    return nb_bus_dispatch(&service, opaque, ctx, method, args);
}

/* The last dotted component: "nova.scheduler.weights.ram.RAMWeigher" ->
 * "RAMWeigher". */
static const char *class_name(const char *s)
{
    const char *dot = strrchr(s, '.');
    return dot ? dot + 1 : s;
}

/* Parses enabled_filters and weight_classes. -1 (logged) on unknown names. */
static int configure(struct scheduler *s)
{
    const char *filters =
        nb_conf_str("filter_scheduler", "enabled_filters",
                    "ComputeFilter,ComputeCapabilitiesFilter,ImagePropertiesFilter,"
                    "ServerGroupAntiAffinityFilter,ServerGroupAffinityFilter");
    _cleanup_free_ char *copy = strdup(filters);
    char *save = NULL;
    for (char *t = strtok_r(copy, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
        const struct nb_sched_filter *f = nb_sched_filter_find(class_name(t));
        if (!f || s->nfilters == MAX_FILTERS) {
            NB_ERROR(LOG_MGR, NULL, NULL, "[filter_scheduler] enabled_filters: unknown filter %s",
                     t);
            return -1;
        }
        s->filters[s->nfilters++] = f;
    }
    const char *weighers =
        nb_conf_str("filter_scheduler", "weight_classes", "nova.scheduler.weights.all_weighers");
    _cleanup_free_ char *wcopy = strdup(weighers);
    for (char *t = strtok_r(wcopy, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
        const char *name = class_name(t);
        const struct nb_sched_weigher *list[MAX_WEIGHERS];
        size_t nl = 0;
        if (!strcmp(name, "all_weighers")) {
            list[nl++] = &nb_weigher_ram;
            list[nl++] = &nb_weigher_cpu;
            list[nl++] = &nb_weigher_disk;
        } else if ((list[0] = nb_sched_weigher_find(name))) {
            nl = 1;
        } else {
            NB_ERROR(LOG_MGR, NULL, NULL, "[filter_scheduler] weight_classes: unknown weigher %s",
                     t);
            return -1;
        }
        for (size_t i = 0; i < nl && s->nweighers < MAX_WEIGHERS; i++) {
            s->weighers[s->nweighers] = list[i];
            s->multipliers[s->nweighers++] =
                nb_conf_double("filter_scheduler", list[i]->multiplier_key, 1.0);
        }
    }
    return 0;
}

int nb_scheduler_start(struct nb_env *env)
{
    struct scheduler *s = calloc(1, sizeof(*s));
    s->env = env;
    pthread_mutex_init(&s->cache_lock, NULL);
    pthread_mutex_init(&s->group_lock, NULL);
    if (configure(s) < 0) {
        free(s);
        return -1;
    }
    if (nb_bus_listen(NB_SCHEDULER_TOPIC, handle, s, (int)nb_conf_int("scheduler", "workers", 4)) <
        0) {
        NB_ERROR(LOG_MGR, NULL, NULL, "cannot listen on topic scheduler");
        free(s);
        return -1;
    }
    char names[512] = "";
    for (size_t i = 0; i < s->nfilters; i++)
        snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s", i ? "," : "",
                 s->filters[i]->name);
    NB_INFO(LOG_MGR, NULL, NULL, "scheduler started; filters %s; %zu weigher(s)", names,
            s->nweighers);
    return 0;
}
