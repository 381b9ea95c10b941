/* world.c - a consistent in-memory picture of providers for searching.
 *
 * Allocation candidates, the provider list's resource/trait/aggregate
 * filters and shortage explanations all need, per provider: its place in
 * its tree, its inventories with current usage, its traits and its
 * aggregates. Rather than a query per provider, the static part
 * (providers, inventories, traits, aggregates: four queries) is parsed
 * into a snapshot shared by all requests and rebuilt only when the
 * version in placement_state moved; every write transaction that changes
 * those tables bumps it (plc_world_changed). A request then reads the
 * version and the current usage (one GROUP BY over allocations) in one
 * transaction and copies the snapshot's provider and inventory arrays
 * (pointer fix-ups only; strings stay in the snapshot), so a search over
 * a thousand providers costs two small queries and some memcpy.
 * Snapshots are reference counted; the cache holds one. */
#include "common/cleanup.h"
#include "common/json.h"
#include "common/util.h"
#include "db/db.h"
#include "placement/internal.h"
#include "placement/placement.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

int plc_world_index(const struct plc_world *w, long long id)
{
    int lo = 0, hi = w->n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (w->rp[mid].id == id)
            return mid;
        if (w->rp[mid].id < id)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

int plc_world_index_uuid(const struct plc_world *w, const char *uuid)
{
    for (int i = 0; i < w->n; i++)
        if (strcmp(w->rp[i].uuid, uuid) == 0)
            return i;
    return -1;
}

const struct plc_inv *plc_rp_inv(const struct plc_rp *rp, const char *rc)
{
    for (int i = 0; i < rp->ninv; i++)
        if (strcmp(rp->inv[i].rc, rc) == 0)
            return &rp->inv[i];
    return NULL;
}

bool plc_rp_has_trait(const struct plc_rp *rp, const char *name)
{
    for (int i = 0; i < rp->ntraits; i++)
        if (strcmp(rp->traits[i], name) == 0)
            return true;
    return false;
}

bool plc_rp_in_agg(const struct plc_rp *rp, const char *agg)
{
    for (int i = 0; i < rp->naggs; i++)
        if (strcmp(rp->aggs[i], agg) == 0)
            return true;
    return false;
}

bool plc_rp_traits_match(const struct plc_rp *rp, json_t *required, json_t *forbidden)
{
    size_t i, j;
    json_t *any, *t;
    json_array_foreach (forbidden, i, t) {
        if (plc_rp_has_trait(rp, json_string_value(t)))
            return false;
    }
    json_array_foreach (required, i, any) {
        bool hit = false;
        json_array_foreach (any, j, t) {
            if (plc_rp_has_trait(rp, json_string_value(t))) {
                hit = true;
                break;
            }
        }
        if (!hit)
            return false;
    }
    return true;
}

bool plc_rp_aggs_match(const struct plc_rp *rp, json_t *member_of, json_t *forbidden)
{
    size_t i, j;
    json_t *any, *a;
    json_array_foreach (forbidden, i, a) {
        if (plc_rp_in_agg(rp, json_string_value(a)))
            return false;
    }
    json_array_foreach (member_of, i, any) {
        bool hit = false;
        json_array_foreach (any, j, a) {
            if (plc_rp_in_agg(rp, json_string_value(a))) {
                hit = true;
                break;
            }
        }
        if (!hit)
            return false;
    }
    return true;
}

struct plc_snapshot {
    int refs; /* guarded by g_lock */
    long long version;
    int n;
    bool has_trees;
    struct plc_rp *rp;
    struct plc_inv *inv_store;
    int ninv;
    const char **trait_store;
    const char **agg_store;
    char *trait_text;
    json_t *rows[3]; /* providers, inventories, aggregates */
};

/* The cached snapshot: a cache of database content, not state of its own;
 * replaced whole, never modified in place. */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct plc_snapshot *g_snap;

static void snap_free(struct plc_snapshot *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < sizeof(s->rows) / sizeof(s->rows[0]); i++)
        json_decref(s->rows[i]);
    free(s->rp);
    free(s->inv_store);
    free(s->trait_store);
    free(s->agg_store);
    free(s->trait_text);
    free(s);
}

static void snap_release(struct plc_snapshot *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&g_lock);
    bool last = --s->refs == 0;
    pthread_mutex_unlock(&g_lock);
    if (last)
        snap_free(s);
}

static int snap_index(const struct plc_snapshot *s, long long id)
{
    struct plc_world w = {.n = s->n, .rp = s->rp};
    return plc_world_index(&w, id);
}

static int load_providers(struct nb_ctx *ctx, struct plc_snapshot *s)
{
    s->rows[0] = nb_db_rows(plc_db(), ctx,
                            "SELECT id, uuid, generation, parent_provider_id AS p, "
                            "root_provider_id AS r FROM resource_providers ORDER BY id",
                            "");
    if (!s->rows[0])
        return -1;
    s->n = (int)json_array_size(s->rows[0]);
    s->rp = calloc(s->n ? s->n : 1, sizeof(*s->rp));
    if (!s->rp)
        return nb_error(ctx, 500, PLC_ERR_DEFAULT, "out of memory");
    size_t i;
    json_t *row;
    json_array_foreach (s->rows[0], i, row) {
        struct plc_rp *rp = &s->rp[i];
        rp->id = nb_json_int(row, "id", 0);
        rp->uuid = nb_json_str(row, "uuid");
        rp->name = rp->uuid;
        rp->generation = nb_json_int(row, "generation", 0);
    }
    json_array_foreach (s->rows[0], i, row) {
        struct plc_rp *rp = &s->rp[i];
        long long p = nb_json_int(row, "p", 0);
        long long r = nb_json_int(row, "r", 0);
        rp->parent = p ? snap_index(s, p) : -1;
        int ri = r ? snap_index(s, r) : -1;
        rp->root = ri >= 0 ? ri : (int)i;
        if (rp->parent >= 0)
            s->has_trees = true;
    }
    return 0;
}

static int load_inventories(struct nb_ctx *ctx, struct plc_snapshot *s)
{
    s->rows[1] = nb_db_rows(plc_db(), ctx,
                            "SELECT resource_provider_id AS p, resource_class AS rc, total, "
                            "reserved, min_unit, max_unit, step_size, allocation_ratio "
                            "FROM inventories ORDER BY resource_provider_id, id",
                            "");
    if (!s->rows[1])
        return -1;
    s->ninv = (int)json_array_size(s->rows[1]);
    s->inv_store = calloc(s->ninv ? s->ninv : 1, sizeof(*s->inv_store));
    if (!s->inv_store)
        return nb_error(ctx, 500, PLC_ERR_DEFAULT, "out of memory");
    struct plc_rp *cur = NULL;
    size_t i;
    json_t *row;
    json_array_foreach (s->rows[1], i, row) {
        struct plc_inv *inv = &s->inv_store[i];
        inv->rc = nb_json_str(row, "rc");
        inv->total = nb_json_int(row, "total", 0);
        inv->reserved = nb_json_int(row, "reserved", 0);
        inv->min_unit = nb_json_int(row, "min_unit", 1);
        inv->max_unit = nb_json_int(row, "max_unit", PLC_MAX_INT);
        inv->step_size = nb_json_int(row, "step_size", 1);
        inv->ratio = json_number_value(json_object_get(row, "allocation_ratio"));
        long long p = nb_json_int(row, "p", 0);
        if (!cur || cur->id != p) {
            int k = snap_index(s, p);
            cur = k >= 0 ? &s->rp[k] : NULL;
            if (cur)
                cur->inv = inv;
        }
        if (cur)
            cur->ninv++;
    }
    return 0;
}

/* Splits a comma-separated list in place into ptrs; returns the count. */
static int split_csv(char *str, const char **ptrs)
{
    int n = 0;
    while (str && *str) {
        ptrs[n++] = str;
        char *c = strchr(str, ',');
        if (!c)
            break;
        *c = '\0';
        str = c + 1;
    }
    return n;
}

static int load_traits(struct nb_ctx *ctx, struct plc_snapshot *s)
{
    /* One row per provider (trait names cannot contain commas). */
    _cleanup_json_ json_t *rows =
        nb_db_rows(plc_db(), ctx,
                   "SELECT rpt.resource_provider_id AS p, GROUP_CONCAT(t.name) AS names "
                   "FROM resource_provider_traits rpt JOIN traits t ON t.id = rpt.trait_id "
                   "GROUP BY rpt.resource_provider_id",
                   "");
    if (!rows)
        return -1;
    size_t bytes = 0, count = 0, i;
    json_t *row;
    json_array_foreach (rows, i, row) {
        const char *names = nb_json_str(row, "names");
        for (const char *c = names; c && *c; c++)
            count += *c == ',';
        bytes += names ? strlen(names) + 1 : 0;
        count++;
    }
    s->trait_text = malloc(bytes + 1);
    s->trait_store = calloc(count + 1, sizeof(*s->trait_store));
    if (!s->trait_text || !s->trait_store)
        return nb_error(ctx, 500, PLC_ERR_DEFAULT, "out of memory");
    char *buf = s->trait_text;
    size_t used = 0;
    json_array_foreach (rows, i, row) {
        const char *names = nb_json_str(row, "names");
        int k = snap_index(s, nb_json_int(row, "p", 0));
        if (!names || k < 0)
            continue;
        size_t len = strlen(names) + 1;
        memcpy(buf, names, len);
        s->rp[k].traits = &s->trait_store[used];
        s->rp[k].ntraits = split_csv(buf, &s->trait_store[used]);
        used += (size_t)s->rp[k].ntraits;
        buf += len;
    }
    return 0;
}

static int load_aggs(struct nb_ctx *ctx, struct plc_snapshot *s)
{
    s->rows[2] = nb_db_rows(plc_db(), ctx,
                            "SELECT resource_provider_id AS p, aggregate_uuid AS a FROM "
                            "resource_provider_aggregates ORDER BY resource_provider_id",
                            "");
    if (!s->rows[2])
        return -1;
    s->agg_store = calloc(json_array_size(s->rows[2]) + 1, sizeof(*s->agg_store));
    if (!s->agg_store)
        return nb_error(ctx, 500, PLC_ERR_DEFAULT, "out of memory");
    struct plc_rp *cur = NULL;
    size_t i, used = 0;
    json_t *row;
    json_array_foreach (s->rows[2], i, row) {
        long long p = nb_json_int(row, "p", 0);
        if (!cur || cur->id != p) {
            int k = snap_index(s, p);
            cur = k >= 0 ? &s->rp[k] : NULL;
            if (cur)
                cur->aggs = &s->agg_store[used];
        }
        if (!cur)
            continue;
        s->agg_store[used++] = nb_json_str(row, "a");
        cur->naggs++;
    }
    return 0;
}

/* Builds a snapshot of the static tables (inside the caller's
 * transaction). NULL after nb_error. */
static struct plc_snapshot *snap_build(struct nb_ctx *ctx, long long version)
{
    struct plc_snapshot *s = calloc(1, sizeof(*s));
    if (!s) {
        nb_error(ctx, 500, PLC_ERR_DEFAULT, "out of memory");
        return NULL;
    }
    s->refs = 1;
    s->version = version;
    if (load_providers(ctx, s) < 0 || load_inventories(ctx, s) < 0 || load_traits(ctx, s) < 0 ||
        load_aggs(ctx, s) < 0) {
        snap_free(s);
        return NULL;
    }
    return s;
}

/* The snapshot for `version`: the cached one or a new one (cached in
 * turn). Returns a reference, or NULL after nb_error. */
static struct plc_snapshot *snap_get(struct nb_ctx *ctx, long long version)
{
    pthread_mutex_lock(&g_lock);
    struct plc_snapshot *s = g_snap;
    if (s && s->version == version)
        s->refs++;
    else
        s = NULL;
    pthread_mutex_unlock(&g_lock);
    if (s)
        return s;
    s = snap_build(ctx, version);
    if (!s)
        return NULL;
    pthread_mutex_lock(&g_lock);
    struct plc_snapshot *old = NULL;
    if (!g_snap || g_snap->version <= version) {
        old = g_snap;
        g_snap = s;
        s->refs++;
    }
    pthread_mutex_unlock(&g_lock);
    snap_release(old);
    return s;
}

int plc_world_changed(struct nb_ctx *ctx)
{
    return nb_db_exec(plc_db(), ctx,
                      "UPDATE placement_state SET version = version + 1 WHERE id = 1", "") < 0
               ? -1
               : 0;
}

void plc_world_free(struct plc_world *w)
{
    free(w->rp);
    free(w->inv_store);
    free(w->usage);
    json_decref(w->names);
    snap_release(w->snap);
    memset(w, 0, sizeof(*w));
}

/* This request's copies of the provider and inventory arrays. */
static int world_copy(struct nb_ctx *ctx, struct plc_world *w)
{
    struct plc_snapshot *s = w->snap;
    w->n = s->n;
    w->has_trees = s->has_trees;
    w->rp = malloc((size_t)(s->n ? s->n : 1) * sizeof(*w->rp));
    w->inv_store = malloc((size_t)(s->ninv ? s->ninv : 1) * sizeof(*w->inv_store));
    if (!w->rp || !w->inv_store)
        return nb_error(ctx, 500, PLC_ERR_DEFAULT, "out of memory");
    memcpy(w->rp, s->rp, (size_t)s->n * sizeof(*w->rp));
    memcpy(w->inv_store, s->inv_store, (size_t)s->ninv * sizeof(*w->inv_store));
    for (int i = 0; i < w->n; i++)
        if (w->rp[i].inv)
            w->rp[i].inv = w->inv_store + (s->rp[i].inv - s->inv_store);
    return 0;
}

/* Current usage, as one string of "provider:class:sum" records (the ids,
 * class names and sums contain no ':' or ','): cheaper than a row object
 * per provider and class on every search. */
static int load_usage(struct nb_ctx *ctx, struct plc_world *w)
{
    _cleanup_json_ json_t *row = nb_db_row(
        plc_db(), ctx,
        "SELECT GROUP_CONCAT(resource_provider_id || ':' || resource_class || ':' || used) AS v "
        "FROM (SELECT resource_provider_id, resource_class, SUM(used) AS used FROM allocations "
        "GROUP BY resource_provider_id, resource_class) u",
        "");
    if (!row && nb_ctx_failed(ctx))
        return -1;
    const char *v = row ? nb_json_str(row, "v") : NULL;
    w->usage = strdup(v ? v : "");
    if (!w->usage)
        return nb_error(ctx, 500, PLC_ERR_DEFAULT, "out of memory");
    char *rec = w->usage;
    while (rec && *rec) {
        char *next = strchr(rec, ',');
        if (next)
            *next++ = '\0';
        char *c1 = strchr(rec, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (c1 && c2) {
            *c1 = *c2 = '\0';
            int k = plc_world_index(w, strtoll(rec, NULL, 10));
            struct plc_inv *inv = k >= 0 ? (struct plc_inv *)plc_rp_inv(&w->rp[k], c1 + 1) : NULL;
            if (inv)
                inv->used = strtoll(c2 + 1, NULL, 10);
        }
        rec = next;
    }
    return 0;
}

static int load_names(struct nb_ctx *ctx, struct plc_world *w)
{
    w->names = nb_db_rows(plc_db(), ctx, "SELECT id, name, generation FROM resource_providers", "");
    if (!w->names)
        return -1;
    size_t i;
    json_t *row;
    json_array_foreach (w->names, i, row) {
        int k = plc_world_index(w, nb_json_int(row, "id", 0));
        if (k < 0)
            continue;
        w->rp[k].name = nb_json_str(row, "name");
        w->rp[k].generation = nb_json_int(row, "generation", 0);
    }
    return 0;
}

static int world_load_locked(struct nb_ctx *ctx, struct plc_world *w, unsigned flags)
{
    long long version =
        nb_db_int(plc_db(), ctx, 0, "SELECT version FROM placement_state WHERE id = 1", "");
    if (nb_ctx_failed(ctx))
        return -1;
    w->snap = snap_get(ctx, version);
    if (!w->snap || world_copy(ctx, w) < 0)
        return -1;
    if ((flags & PLC_W_INV) && load_usage(ctx, w) < 0)
        return -1;
    if ((flags & PLC_W_NAMES) && load_names(ctx, w) < 0)
        return -1;
    return 0;
}

int plc_world_load(struct nb_ctx *ctx, struct plc_world *w, unsigned flags)
{
    memset(w, 0, sizeof(*w));
    if (nb_db_begin(plc_db(), ctx) < 0)
        return -1;
    int rc = world_load_locked(ctx, w, flags);
    if (rc < 0) {
        nb_db_rollback(plc_db());
        plc_world_free(w);
        return -1;
    }
    if (nb_db_commit(plc_db(), ctx) < 0) {
        plc_world_free(w);
        return -1;
    }
    return 0;
}
