/* allocations.c - consumers' allocations: /placement/allocations[/{c}],
 * /placement/resource_providers/{uuid}/allocations, /placement/reshaper,
 * and the in-process claim.
 *
 * Every write goes through plc_alloc_write_locked(), which does what
 * placement's replace_all does in one transaction: check (1.28+) or ignore
 * consumer generations, create/update the consumer rows, drop the
 * consumers' current allocations, check every requested amount against
 * inventory (min_unit/max_unit/step_size, then capacity counting what
 * this same request already took), insert, and bump provider and
 * consumer generations; consumers left without allocations are deleted.
 * Because the check and the insert share the transaction, two concurrent
 * claims that together exceed capacity get one success and one 409 (on
 * MariaDB the loser's deadlock is redone first: write_and_commit). */
#include "common/cleanup.h"
#include "common/http.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "db/db.h"
#include "placement/internal.h"
#include "placement/placement.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ^[0-9a-fA-F-]{36}$, placement's UUID_PATTERN for object keys. */
static bool uuid_pattern(const char *s)
{
    size_t n = 0;
    for (; s[n]; n++) {
        char c = s[n];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') ||
              c == '-'))
            return false;
    }
    return n == 36;
}

/* One allocation (or, with amount 0, a removal marker) in a write. */
struct entry {
    int consumer;
    long long rp_id;
    const char *rp_uuid;
    const char *rc;
    long long amount;
};

struct write_state {
    struct entry *e;
    int n, cap;
    json_t *keep; /* rows whose strings entries borrow */
};

static int add_entry(struct nb_ctx *ctx, struct write_state *st, struct entry e)
{
    if (st->n == st->cap) {
        int cap = st->cap ? st->cap * 2 : 16;
        struct entry *p = realloc(st->e, (size_t)cap * sizeof(*p));
        if (!p)
            return nb_error(ctx, 500, PLC_ERR_DEFAULT, "out of memory");
        st->e = p;
        st->cap = cap;
    }
    st->e[st->n++] = e;
    return 0;
}

/* Step 1: check generations and create or update the consumer rows. */
static int ensure_consumers(struct nb_ctx *ctx, struct plc_consumer_write *w, int n,
                            const char *now)
{
    for (int i = 0; i < n; i++) {
        const char *project = w[i].project_id ? w[i].project_id : PLC_INCOMPLETE_PROJECT;
        const char *user = w[i].project_id ? w[i].user_id : PLC_INCOMPLETE_USER;
        _cleanup_json_ json_t *row =
            nb_db_row(plc_db(), ctx,
                      "SELECT id, project_id, user_id, consumer_type, generation FROM consumers "
                      "WHERE uuid = ?",
                      "s", w[i].uuid);
        if (nb_ctx_failed(ctx))
            return -1;
        if (!row) {
            if (w[i].check_generation && !w[i].generation_null)
                return nb_error(ctx, 409, PLC_ERR_CONCURRENT,
                                "consumer generation conflict - expected null but got %lld",
                                w[i].generation);
            if (nb_db_exec(plc_db(), ctx,
                           "INSERT INTO consumers (uuid, project_id, user_id, consumer_type, "
                           "generation, created_at, updated_at) VALUES (?, ?, ?, ?, 0, ?, ?)",
                           "ssssss", w[i].uuid, project, user, w[i].consumer_type, now, now) < 0)
                return -1;
            continue;
        }
        long long gen = nb_json_int(row, "generation", 0);
        if (w[i].check_generation && (w[i].generation_null || w[i].generation != gen)) {
            char got[32] = "None";
            if (!w[i].generation_null)
                snprintf(got, sizeof(got), "%lld", w[i].generation);
            return nb_error(ctx, 409, PLC_ERR_CONCURRENT,
                            "consumer generation conflict - expected %lld but got %s", gen, got);
        }
        const char *ctype = nb_json_str(row, "consumer_type");
        bool same_owner = strcmp(nb_json_str(row, "project_id"), project) == 0 &&
                          strcmp(nb_json_str(row, "user_id"), user) == 0;
        bool same_type = !w[i].consumer_type || (ctype && strcmp(ctype, w[i].consumer_type) == 0);
        if (same_owner && same_type)
            continue;
        if (nb_db_exec(plc_db(), ctx,
                       "UPDATE consumers SET project_id = ?, user_id = ?, "
                       "consumer_type = COALESCE(?, consumer_type), updated_at = ? WHERE id = ?",
                       "ssssi", project, user, w[i].consumer_type, now,
                       nb_json_int(row, "id", 0)) < 0)
            return -1;
    }
    return 0;
}

/* Step 2: resolve providers into entries (400 for an unknown provider);
 * a consumer with no allocations contributes removal markers for the
 * providers it currently uses, whose generations placement bumps. */
static int collect_entries(struct nb_ctx *ctx, struct plc_consumer_write *w, int n,
                           struct write_state *st)
{
    for (int i = 0; i < n; i++) {
        const char *rp_uuid;
        json_t *res;
        if (json_object_size(w[i].allocations) == 0) {
            json_t *cur =
                nb_db_rows(plc_db(), ctx,
                           "SELECT a.resource_provider_id AS rp_id, rp.uuid, a.resource_class "
                           "FROM allocations a JOIN resource_providers rp ON rp.id = "
                           "a.resource_provider_id WHERE a.consumer_id = ? ORDER BY a.id",
                           "s", w[i].uuid);
            if (!cur)
                return -1;
            json_array_append_new(st->keep, cur);
            size_t k;
            json_t *row;
            json_array_foreach (cur, k, row) {
                struct entry e = {i, nb_json_int(row, "rp_id", 0), nb_json_str(row, "uuid"),
                                  nb_json_str(row, "resource_class"), 0};
                if (add_entry(ctx, st, e) < 0)
                    return -1;
            }
            continue;
        }
        json_object_foreach (w[i].allocations, rp_uuid, res) {
            json_t *rp = plc_rp_get(ctx, rp_uuid);
            if (!rp)
                return nb_ctx_failed(ctx)
                           ? -1
                           : nb_error(ctx, 400, PLC_ERR_DEFAULT,
                                      "Allocation for resource provider '%s' that does not "
                                      "exist.",
                                      rp_uuid);
            json_array_append_new(st->keep, rp);
            const char *rc;
            json_t *amount;
            json_object_foreach (res, rc, amount) {
                struct entry e = {i, nb_json_int(rp, "id", 0), nb_json_str(rp, "uuid"), rc,
                                  json_integer_value(amount)};
                if (add_entry(ctx, st, e) < 0)
                    return -1;
            }
        }
    }
    return 0;
}

static int unknown_class(struct nb_ctx *ctx, struct plc_consumer_write *w, int consumer,
                         const char *rc, enum plc_write_mode mode)
{
    if (mode == PLC_WRITE_POST)
        return nb_error(ctx, 400, PLC_ERR_DEFAULT,
                        "Unable to allocate inventory No such resource class %s.", rc);
    return nb_error(ctx, 400, PLC_ERR_DEFAULT,
                    "Unable to allocate inventory for consumer %s: No such resource class %s.",
                    w[consumer].uuid, rc);
}

/* Inventory of (rp_id, rc) among rows of `invs` (one provider's). */
static json_t *find_inv(json_t *invs, const char *rc)
{
    size_t i;
    json_t *row;
    json_array_foreach (invs, i, row) {
        if (strcmp(nb_json_str(row, "resource_class"), rc) == 0)
            return row;
    }
    return NULL;
}

/* Collects the inventory rows (with the amount used) of every provider in
 * st into by_rp {rp_uuid: rows}, and the classes in play into rcs. 0, or
 * -1 on a database error. */
static int load_inventories(struct nb_ctx *ctx, struct write_state *st, json_t *by_rp, json_t *rcs)
{
    for (int i = 0; i < st->n; i++) {
        bool seen = false;
        size_t k;
        json_t *r;
        json_array_foreach (rcs, k, r) {
            seen = seen || strcmp(json_string_value(r), st->e[i].rc) == 0;
        }
        if (!seen)
            json_array_append_new(rcs, json_string(st->e[i].rc));
        if (json_object_get(by_rp, st->e[i].rp_uuid))
            continue;
        /* locking on MariaDB: a concurrent claim on the provider waits for
         * this one's commit and then counts what it took */
        const char *lock = nb_db_for_update(plc_db());
        char sql[512];
        snprintf(sql, sizeof(sql),
                 "SELECT i.resource_class, i.total, i.reserved, i.min_unit, i.max_unit, "
                 "i.step_size, i.allocation_ratio, (SELECT COALESCE(SUM(a.used), 0) FROM "
                 "allocations a WHERE a.resource_provider_id = i.resource_provider_id AND "
                 "a.resource_class = i.resource_class%s) AS used FROM inventories i WHERE "
                 "i.resource_provider_id = ?%s",
                 lock, lock);
        json_t *invs = nb_db_rows(plc_db(), ctx, sql, "i", st->e[i].rp_id);
        if (!invs)
            return -1;
        json_object_set_new(by_rp, st->e[i].rp_uuid, invs);
    }
    return 0;
}

/* 0 when every provider of by_rp has inventory of some class of rcs, else
 * -1 after a 409 naming the classes and the providers without. */
static int check_providers_have_inventory(struct nb_ctx *ctx, json_t *by_rp, json_t *rcs)
{
    char missing[1024] = "";
    const char *rp_uuid;
    json_t *invs;
    json_object_foreach (by_rp, rp_uuid, invs) {
        bool any = false;
        size_t k;
        json_t *r;
        json_array_foreach (rcs, k, r) {
            any = any || find_inv(invs, json_string_value(r));
        }
        if (!any) {
            size_t len = strlen(missing);
            snprintf(missing + len, sizeof(missing) - len, "%s%s", len ? ", " : "", rp_uuid);
        }
    }
    if (!missing[0])
        return 0;
    char classes[1024] = "";
    size_t k;
    json_t *r;
    json_array_foreach (rcs, k, r) {
        size_t len = strlen(classes);
        snprintf(classes + len, sizeof(classes) - len, "%s%s", len ? ", " : "",
                 json_string_value(r));
    }
    return nb_error(ctx, 409, PLC_ERR_DEFAULT,
                    "Unable to allocate inventory: Inventory for '%s' on resource provider "
                    "'%s' invalid.",
                    classes, missing);
}

/* Whether entry e fits inventory row (e's amount alone, then sum, the
 * request's total for its provider and class so far). 0, or -1 after a
 * logged 409 for a unit constraint or the capacity. */
static int check_fit(struct nb_ctx *ctx, const struct entry *e, json_t *row, long long sum)
{
    struct plc_inv inv = {
        .rc = e->rc,
        .total = nb_json_int(row, "total", 0),
        .reserved = nb_json_int(row, "reserved", 0),
        .min_unit = nb_json_int(row, "min_unit", 1),
        .max_unit = nb_json_int(row, "max_unit", PLC_MAX_INT),
        .step_size = nb_json_int(row, "step_size", 1),
        .ratio = json_number_value(json_object_get(row, "allocation_ratio")),
        .used = nb_json_int(row, "used", 0),
    };
    enum plc_fit fit = plc_fit(&inv, inv.used, e->amount);
    if (fit == PLC_FIT_OK)
        fit = plc_fit(&inv, inv.used, sum) == PLC_FIT_CAPACITY ? PLC_FIT_CAPACITY : PLC_FIT_OK;
    if (fit == PLC_FIT_CONSTRAINT) {
        NB_WARN("nubo.placement", ctx, NULL,
                "Allocation for %s on resource provider %s violates min_unit, max_unit, "
                "or step_size. Requested: %lld, min_unit: %lld, max_unit: %lld, "
                "step_size: %lld",
                e->rc, e->rp_uuid, e->amount, inv.min_unit, inv.max_unit, inv.step_size);
        return nb_error(ctx, 409, PLC_ERR_DEFAULT,
                        "Unable to allocate inventory: Unable to create allocation for "
                        "'%s' on resource provider '%s'. The requested amount would "
                        "violate inventory constraints.",
                        e->rc, e->rp_uuid);
    }
    if (fit == PLC_FIT_CAPACITY) {
        NB_WARN("nubo.placement", ctx, NULL,
                "Over capacity for %s on resource provider %s. Needed: %lld, Used: %lld, "
                "Capacity: %lld",
                e->rc, e->rp_uuid, e->amount, inv.used,
                plc_capacity(inv.total, inv.reserved, inv.ratio));
        return nb_error(ctx, 409, PLC_ERR_DEFAULT,
                        "Unable to allocate inventory: Unable to create allocation for "
                        "'%s' on resource provider '%s'. The requested amount would "
                        "exceed the capacity.",
                        e->rc, e->rp_uuid);
    }
    return 0;
}

/* Step 3: the capacity check, after the consumers' old allocations are
 * gone. Returns 0 or -1 with 409 naming provider and class. */
static int check_capacity(struct nb_ctx *ctx, struct write_state *st)
{
    _cleanup_json_ json_t *by_rp = json_object(); /* rp_uuid -> inventory rows */
    _cleanup_json_ json_t *rcs = json_array();    /* all classes in play */
    if (load_inventories(ctx, st, by_rp, rcs) < 0)
        return -1;
    /* A provider with no inventory of any class in play. */
    if (check_providers_have_inventory(ctx, by_rp, rcs) < 0)
        return -1;
    _cleanup_json_ json_t *taken = json_object(); /* "rp rc" -> sum in this request */
    for (int i = 0; i < st->n; i++) {
        struct entry *e = &st->e[i];
        char key[320];
        snprintf(key, sizeof(key), "%s %s", e->rp_uuid, e->rc);
        long long sum = json_integer_value(json_object_get(taken, key)) + e->amount;
        json_object_set_new(taken, key, json_integer(sum));
        if (e->amount == 0)
            continue;
        json_t *row = find_inv(json_object_get(by_rp, e->rp_uuid), e->rc);
        if (!row)
            return nb_error(ctx, 409, PLC_ERR_DEFAULT,
                            "Unable to allocate inventory: Inventory for '%s' on resource "
                            "provider '%s' invalid.",
                            e->rc, e->rp_uuid);
        if (check_fit(ctx, e, row, sum) < 0)
            return -1;
    }
    return 0;
}

static int write_locked(struct nb_ctx *ctx, struct plc_consumer_write *w, int n,
                        enum plc_write_mode mode, struct write_state *st)
{
    char now[32];
    nb_now_iso_us(now);
    if (ensure_consumers(ctx, w, n, now) < 0 || collect_entries(ctx, w, n, st) < 0)
        return -1;
    for (int i = 0; i < st->n; i++) {
        if (plc_rc_exists(ctx, st->e[i].rc))
            continue;
        return nb_ctx_failed(ctx) ? -1
                                  : unknown_class(ctx, w, st->e[i].consumer, st->e[i].rc, mode);
    }
    for (int i = 0; i < n; i++)
        if (nb_db_exec(plc_db(), ctx, "DELETE FROM allocations WHERE consumer_id = ?", "s",
                       w[i].uuid) < 0)
            return -1;
    if (check_capacity(ctx, st) < 0)
        return -1;
    for (int i = 0; i < st->n; i++) {
        struct entry *e = &st->e[i];
        if (e->amount == 0)
            continue;
        if (nb_db_exec(plc_db(), ctx,
                       "INSERT INTO allocations (resource_provider_id, consumer_id, "
                       "resource_class, used, created_at) VALUES (?, ?, ?, ?, ?)",
                       "issis", e->rp_id, w[e->consumer].uuid, e->rc, e->amount, now) < 0)
            return -1;
    }
    for (int i = 0; i < st->n; i++) {
        bool first = true;
        for (int k = 0; k < i && first; k++)
            first = st->e[k].rp_id != st->e[i].rp_id;
        if (first && plc_rp_bump(ctx, st->e[i].rp_id, -1) < 0)
            return -1;
    }
    for (int i = 0; i < n; i++) {
        if (nb_db_exec(plc_db(), ctx,
                       "UPDATE consumers SET generation = generation + 1, updated_at = ? "
                       "WHERE uuid = ?",
                       "ss", now, w[i].uuid) < 0 ||
            nb_db_exec(plc_db(), ctx,
                       "DELETE FROM consumers WHERE uuid = ? AND NOT EXISTS (SELECT 1 FROM "
                       "allocations WHERE consumer_id = ?)",
                       "ss", w[i].uuid, w[i].uuid) < 0)
            return -1;
    }
    return 0;
}

int plc_alloc_write_locked(struct nb_ctx *ctx, struct plc_consumer_write *w, int n,
                           enum plc_write_mode mode)
{
    struct write_state st = {.keep = json_array()};
    int rc = write_locked(ctx, w, n, mode, &st);
    free(st.e);
    json_decref(st.keep);
    return rc;
}

/* ---- request parsing ---- */

static int check_string(struct nb_ctx *ctx, json_t *v, const char *what, size_t maxlen)
{
    if (!json_is_string(v)) {
        _cleanup_free_ char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
        return plc_schema_error(ctx, "%s is not of type 'string'", s ? s : "null");
    }
    if (json_string_length(v) < 1)
        return plc_schema_error(ctx, "'' is too short");
    if (json_string_length(v) > maxlen)
        return plc_schema_error(ctx, "'%s' is too long", json_string_value(v));
    (void)what;
    return 0;
}

/* {RC: int >= 1} (minProperties 1) -> new object. */
static json_t *parse_resources(struct nb_ctx *ctx, json_t *res)
{
    if (!json_is_object(res)) {
        plc_schema_error(ctx, "resources is not of type 'object'");
        return NULL;
    }
    if (json_object_size(res) == 0) {
        plc_schema_error(ctx, "{} does not have enough properties");
        return NULL;
    }
    json_t *out = json_object();
    const char *rc;
    json_t *v;
    json_object_foreach (res, rc, v) {
        long long x;
        if (!plc_valid_rc_name(rc)) {
            plc_schema_error(ctx, "Additional properties are not allowed ('%s' was unexpected)",
                             rc);
            json_decref(out);
            return NULL;
        }
        if (!plc_json_is_int(v, &x) || x < 1) {
            _cleanup_free_ char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
            if (!plc_json_is_int(v, &x))
                plc_schema_error(ctx, "%s is not of type 'integer'", s ? s : "null");
            else
                plc_schema_error(ctx, "%lld is less than the minimum of 1", x);
            json_decref(out);
            return NULL;
        }
        json_object_set_new(out, rc, json_integer(x));
    }
    return out;
}

/* Dict form (1.12+) -> {rp_uuid: {rc: n}} (new ref). */
static json_t *parse_alloc_dict(struct nb_ctx *ctx, json_t *allocs, bool allow_empty)
{
    static const char *const keys[] = {"generation", "resources", NULL};
    static const char *const req[] = {"resources", NULL};
    if (!json_is_object(allocs)) {
        plc_schema_error(ctx, "allocations is not of type 'object'");
        return NULL;
    }
    if (!allow_empty && json_object_size(allocs) == 0) {
        plc_schema_error(ctx, "{} does not have enough properties");
        return NULL;
    }
    json_t *out = json_object();
    const char *rp;
    json_t *v;
    long long gen;
    json_object_foreach (allocs, rp, v) {
        json_t *res = NULL;
        if (!uuid_pattern(rp))
            plc_schema_error(ctx, "Additional properties are not allowed ('%s' was unexpected)",
                             rp);
        else if (plc_check_object(ctx, v, keys, req) == 0 &&
                 (!json_object_get(v, "generation") ||
                  plc_json_is_int(json_object_get(v, "generation"), &gen) ||
                  plc_schema_error(ctx, "generation is not of type 'integer'") == 0))
            res = parse_resources(ctx, json_object_get(v, "resources"));
        if (!res) {
            json_decref(out);
            return NULL;
        }
        json_object_set_new(out, rp, res);
    }
    return out;
}

/* List form (before 1.12) -> dict form (new ref). */
static json_t *parse_alloc_list(struct nb_ctx *ctx, json_t *allocs)
{
    static const char *const keys[] = {"resource_provider", "resources", NULL};
    static const char *const rpkeys[] = {"uuid", NULL};
    if (!json_is_array(allocs)) {
        plc_schema_error(ctx, "allocations is not of type 'array'");
        return NULL;
    }
    if (json_array_size(allocs) == 0) {
        plc_schema_error(ctx, "[] is too short");
        return NULL;
    }
    json_t *out = json_object();
    size_t i;
    json_t *item;
    json_array_foreach (allocs, i, item) {
        json_t *res = NULL;
        char tmp[37];
        if (plc_check_object(ctx, item, keys, keys) == 0) {
            json_t *rp = json_object_get(item, "resource_provider");
            if (plc_check_object(ctx, rp, rpkeys, rpkeys) == 0) {
                const char *u = nb_json_str(rp, "uuid");
                if (!u || !plc_uuid_normalize(u, tmp))
                    plc_schema_error(ctx, "'%s' is not a 'uuid'", u ? u : "null");
                else
                    res = parse_resources(ctx, json_object_get(item, "resources"));
                if (res)
                    json_object_set_new(out, u, res);
            }
        }
        if (!res) {
            json_decref(out);
            return NULL;
        }
    }
    return out;
}

int plc_alloc_parse_consumer(struct nb_ctx *ctx, json_t *body, int mv, bool post,
                             struct plc_consumer_write *w)
{
    const char *keys[8] = {"allocations", NULL};
    const char *req[8] = {"allocations", NULL};
    int nk = 1, nr = 1;
    if (mv >= 8) {
        keys[nk++] = "project_id";
        keys[nk++] = "user_id";
        req[nr++] = "project_id";
        req[nr++] = "user_id";
    }
    if (mv >= 28) {
        keys[nk++] = "consumer_generation";
        req[nr++] = "consumer_generation";
    }
    if (mv >= 34)
        keys[nk++] = "mappings";
    if (mv >= 38) {
        keys[nk++] = "consumer_type";
        req[nr++] = "consumer_type";
    }
    keys[nk] = NULL;
    req[nr] = NULL;
    if (plc_check_object(ctx, body, keys, req) < 0)
        return -1;
    if (mv >= 8 && (check_string(ctx, json_object_get(body, "project_id"), "project_id", 255) < 0 ||
                    check_string(ctx, json_object_get(body, "user_id"), "user_id", 255) < 0))
        return -1;
    w->project_id = mv >= 8 ? nb_json_str(body, "project_id") : NULL;
    w->user_id = mv >= 8 ? nb_json_str(body, "user_id") : NULL;
    w->check_generation = mv >= 28;
    if (mv >= 28) {
        json_t *g = json_object_get(body, "consumer_generation");
        w->generation_null = json_is_null(g);
        if (!w->generation_null && !plc_json_is_int(g, &w->generation))
            return plc_schema_error(ctx, "consumer_generation is not of type 'integer', 'null'");
    }
    if (mv >= 34 && json_object_get(body, "mappings") &&
        (!json_is_object(json_object_get(body, "mappings")) ||
         json_object_size(json_object_get(body, "mappings")) == 0))
        return plc_schema_error(ctx, "mappings is not a non-empty 'object'");
    if (mv >= 38) {
        json_t *ct = json_object_get(body, "consumer_type");
        if (check_string(ctx, ct, "consumer_type", 255) < 0)
            return -1;
        if (!plc_valid_rc_name(json_string_value(ct)))
            return plc_schema_error(ctx, "'%s' does not match '^[A-Z0-9_]+$'",
                                    json_string_value(ct));
        w->consumer_type = json_string_value(ct);
    }
    json_t *allocs = json_object_get(body, "allocations");
    w->allocations =
        mv >= 12 ? parse_alloc_dict(ctx, allocs, post || mv >= 28) : parse_alloc_list(ctx, allocs);
    return w->allocations ? 0 : -1;
}

/* ---- handlers ---- */

static int alloc_get(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (plc_require_admin(ctx, "placement:allocations:list") < 0)
        return -1;
    int mv = plc_mv(ctx);
    const char *consumer = nb_req_param(req, "consumer_uuid");
    _cleanup_json_ json_t *rows = nb_db_rows(
        plc_db(), ctx,
        "SELECT a.resource_class, a.used, rp.uuid, rp.generation, c.project_id, c.user_id, "
        "c.generation AS cgen, c.consumer_type FROM allocations a "
        "JOIN resource_providers rp ON rp.id = a.resource_provider_id "
        "JOIN consumers c ON c.uuid = a.consumer_id WHERE a.consumer_id = ? ORDER BY a.id",
        "s", consumer);
    if (!rows)
        return -1;
    json_t *allocs = json_object();
    size_t i;
    json_t *row;
    json_array_foreach (rows, i, row) {
        const char *rp = nb_json_str(row, "uuid");
        json_t *a = json_object_get(allocs, rp);
        if (!a) {
            a = json_pack("{s:I, s:{}}", "generation",
                          (json_int_t)nb_json_int(row, "generation", 0), "resources");
            json_object_set_new(allocs, rp, a);
        }
        json_object_set_new(json_object_get(a, "resources"), nb_json_str(row, "resource_class"),
                            json_integer(nb_json_int(row, "used", 0)));
    }
    json_t *body = json_pack("{s:o}", "allocations", allocs);
    json_t *first = json_array_get(rows, 0);
    if (first && mv >= 12) {
        json_object_set_new(body, "project_id", json_string(nb_json_str(first, "project_id")));
        json_object_set_new(body, "user_id", json_string(nb_json_str(first, "user_id")));
        if (mv >= 28)
            json_object_set_new(body, "consumer_generation",
                                json_integer(nb_json_int(first, "cgen", 0)));
        if (mv >= 38) {
            const char *ct = nb_json_str(first, "consumer_type");
            json_object_set_new(body, "consumer_type", json_string(ct ? ct : "unknown"));
        }
    }
    plc_cache_headers(ctx, resp);
    return nb_resp_json(resp, 200, body);
}

static int write_once(struct nb_ctx *ctx, struct plc_consumer_write *w, int n,
                      enum plc_write_mode mode)
{
    if (nb_db_begin(plc_db(), ctx) < 0)
        return -1;
    if (plc_alloc_write_locked(ctx, w, n, mode) < 0) {
        nb_db_rollback(plc_db());
        return -1;
    }
    return nb_db_commit(plc_db(), ctx);
}

/* plc_alloc_write_locked in its own transaction. On MariaDB two claims on
 * the same providers can deadlock in their capacity checks (each holds the
 * locks of its read and waits for the other's): the loser's transaction is
 * redone from its begin (nb_db_redo: up to NB_DB_REDO_TRIES, with back-off)
 * and then sees the winner's allocations; still conflicting, it is
 * placement's 409 placement.concurrent_update. Never redone on SQLite. */
static int write_and_commit(struct nb_ctx *ctx, struct plc_consumer_write *w, int n,
                            enum plc_write_mode mode)
{
    for (int tries = 1;; tries++) {
        if (write_once(ctx, w, n, mode) == 0)
            return 0;
        if (!nb_db_conflict(plc_db()) || nb_ctx_status(ctx) != 500)
            return -1;
        if (!nb_db_redo(plc_db(), ctx, tries)) {
            nb_ctx_clear_error(ctx);
            return nb_error(ctx, 409, PLC_ERR_CONCURRENT,
                            "Another thread concurrently updated the data. Please retry your "
                            "update");
        }
    }
}

static int alloc_put(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (plc_require_admin(ctx, "placement:allocations:update") < 0)
        return -1;
    int mv = plc_mv(ctx);
    const char *raw = nb_req_param(req, "consumer_uuid");
    char uuid[37];
    if (!plc_uuid_normalize(raw, uuid))
        return nb_error(ctx, 400, PLC_ERR_DEFAULT, "Malformed consumer_uuid: %s", raw);
    json_t *body = plc_body(ctx, req);
    if (!body)
        return -1;
    struct plc_consumer_write w = {.uuid = uuid};
    if (plc_alloc_parse_consumer(ctx, body, mv, false, &w) < 0)
        return -1;
    int rc = write_and_commit(ctx, &w, 1, PLC_WRITE_PUT);
    json_decref(w.allocations);
    if (rc < 0)
        return -1;
    return nb_resp_empty(resp, 204);
}

static int alloc_post(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    int mv = plc_mv(ctx);
    if (mv < 13)
        return nb_error(ctx, 405, PLC_ERR_DEFAULT,
                        "The method specified is not allowed for this resource.");
    if (plc_require_admin(ctx, "placement:allocations:manage") < 0)
        return -1;
    json_t *body = plc_body(ctx, req);
    if (!body)
        return -1;
    if (!json_is_object(body))
        return plc_schema_error(ctx, "body is not of type 'object'");
    if (json_object_size(body) == 0)
        return plc_schema_error(ctx, "{} does not have enough properties");
    size_t n = json_object_size(body);
    struct plc_consumer_write *w = calloc(n, sizeof(*w));
    if (!w)
        return nb_error(ctx, 500, PLC_ERR_DEFAULT, "out of memory");
    int rc = 0, k = 0;
    const char *consumer;
    json_t *v;
    json_object_foreach (body, consumer, v) {
        if (!uuid_pattern(consumer)) {
            rc = plc_schema_error(
                ctx, "Additional properties are not allowed ('%s' was unexpected)", consumer);
            break;
        }
        w[k].uuid = consumer;
        if (plc_alloc_parse_consumer(ctx, v, mv, true, &w[k]) < 0) {
            rc = -1;
            break;
        }
        k++;
    }
    if (rc == 0)
        rc = write_and_commit(ctx, w, k, PLC_WRITE_POST);
    for (int i = 0; i < k; i++)
        json_decref(w[i].allocations);
    free(w);
    if (rc < 0)
        return -1;
    return nb_resp_empty(resp, 204);
}

/* Removes all allocations of a consumer and the consumer; *found tells
 * whether it had any. *_locked. */
static int delete_consumer_locked(struct nb_ctx *ctx, const char *consumer, bool *found)
{
    int n =
        nb_db_exec(plc_db(), ctx, "DELETE FROM allocations WHERE consumer_id = ?", "s", consumer);
    if (n < 0)
        return -1;
    *found = n > 0;
    return nb_db_exec(plc_db(), ctx, "DELETE FROM consumers WHERE uuid = ?", "s", consumer) < 0 ? -1
                                                                                                : 0;
}

/* delete_consumer_locked in its own transaction; with must_exist a
 * consumer without allocations is placement's 404 (nothing changed). On
 * MariaDB the delete can deadlock with a concurrent claim on the same
 * providers, which ends the transaction: it is redone from its begin, as
 * write_and_commit does (nb_db_redo), so that a deleted server does not
 * keep its allocation. 0/-1 (error in ctx). */
static int delete_and_commit(struct nb_ctx *ctx, const char *consumer, bool must_exist)
{
    for (int tries = 1;; tries++) {
        if (nb_db_begin(plc_db(), ctx) < 0)
            return -1;
        bool found = false;
        if (delete_consumer_locked(ctx, consumer, &found) < 0 ||
            (must_exist && !found &&
             nb_error(ctx, 404, PLC_ERR_DEFAULT, "No allocations for consumer '%s'", consumer) < 0))
            nb_db_rollback(plc_db());
        else if (nb_db_commit(plc_db(), ctx) == 0)
            return 0;
        if (!nb_db_redo(plc_db(), ctx, tries))
            return -1;
    }
}

static int alloc_delete(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (plc_require_admin(ctx, "placement:allocations:delete") < 0)
        return -1;
    if (delete_and_commit(ctx, nb_req_param(req, "consumer_uuid"), true) < 0)
        return -1;
    return nb_resp_empty(resp, 204);
}

static int rp_allocs(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (plc_require_admin(ctx, "placement:resource_providers:allocations:list") < 0)
        return -1;
    int mv = plc_mv(ctx);
    const char *uuid = nb_req_param(req, "uuid");
    _cleanup_json_ json_t *rp = plc_rp_get(ctx, uuid);
    if (!rp)
        return nb_ctx_failed(ctx) ? -1
                                  : nb_error(ctx, 404, PLC_ERR_DEFAULT,
                                             "Resource provider '%s' not found: No resource "
                                             "provider with uuid %s found",
                                             uuid, uuid);
    _cleanup_json_ json_t *rows =
        nb_db_rows(plc_db(), ctx,
                   "SELECT a.consumer_id, a.resource_class, a.used, c.generation AS cgen FROM "
                   "allocations a JOIN consumers c ON c.uuid = a.consumer_id WHERE "
                   "a.resource_provider_id = ? ORDER BY a.id",
                   "i", nb_json_int(rp, "id", 0));
    if (!rows)
        return -1;
    json_t *allocs = json_object();
    size_t i;
    json_t *row;
    json_array_foreach (rows, i, row) {
        const char *c = nb_json_str(row, "consumer_id");
        json_t *a = json_object_get(allocs, c);
        if (!a) {
            a = json_pack("{s:{}}", "resources");
            if (mv >= 28)
                json_object_set_new(a, "consumer_generation",
                                    json_integer(nb_json_int(row, "cgen", 0)));
            json_object_set_new(allocs, c, a);
        }
        json_object_set_new(json_object_get(a, "resources"), nb_json_str(row, "resource_class"),
                            json_integer(nb_json_int(row, "used", 0)));
    }
    plc_cache_headers(ctx, resp);
    return nb_resp_json(resp, 200,
                        json_pack("{s:o, s:I}", "allocations", allocs,
                                  "resource_provider_generation",
                                  (json_int_t)nb_json_int(rp, "generation", 0)));
}

/* ---- POST /reshaper (1.30+) ---- */

struct reshape_rp {
    json_t *rp;
    struct plc_invrec *recs;
    int n;
};

static int reshape_parse_inventories(struct nb_ctx *ctx, json_t *invs, struct reshape_rp *out,
                                     int *nout)
{
    static const char *const keys[] = {"resource_provider_generation", "inventories", NULL};
    static const char *const rec_keys[] = {"resource_provider_generation",
                                           "total",
                                           "reserved",
                                           "min_unit",
                                           "max_unit",
                                           "step_size",
                                           "allocation_ratio",
                                           NULL};
    static const char *const rec_req[] = {"total", NULL};
    const char *uuid;
    json_t *v;
    *nout = 0;
    json_object_foreach (invs, uuid, v) {
        if (!uuid_pattern(uuid))
            return plc_schema_error(
                ctx, "Additional properties are not allowed ('%s' was unexpected)", uuid);
        if (plc_check_object(ctx, v, keys, keys) < 0)
            return -1;
        struct reshape_rp *r = &out[(*nout)++];
        r->rp = plc_rp_get(ctx, uuid);
        if (!r->rp)
            return nb_ctx_failed(ctx)
                       ? -1
                       : nb_error(ctx, 400, "placement.resource_provider.not_found",
                                  "Resource provider %s in inventories not found: No resource "
                                  "provider with uuid %s found",
                                  uuid, uuid);
        long long gen = -1;
        plc_json_is_int(json_object_get(v, "resource_provider_generation"), &gen);
        if (gen != nb_json_int(r->rp, "generation", -1))
            return nb_error(ctx, 409, PLC_ERR_CONCURRENT,
                            "resource provider generation conflict for provider %s: actual: "
                            "%lld, given: %lld",
                            uuid, nb_json_int(r->rp, "generation", -1), gen);
        json_t *recs = json_object_get(v, "inventories");
        if (!json_is_object(recs))
            return plc_schema_error(ctx, "inventories is not of type 'object'");
        r->recs = calloc(json_object_size(recs) + 1, sizeof(*r->recs));
        if (!r->recs)
            return nb_error(ctx, 500, PLC_ERR_DEFAULT, "out of memory");
        const char *rc;
        json_t *iv;
        json_object_foreach (recs, rc, iv) {
            struct plc_invrec *ir = &r->recs[r->n++];
            nb_strlcpy(ir->rc, rc, sizeof(ir->rc));
            if (plc_inv_parse(ctx, iv, rec_keys, rec_req, ir) < 0)
                return -1;
        }
    }
    return 0;
}

static int reshape_locked(struct nb_ctx *ctx, struct reshape_rp *rps, int nrp,
                          struct plc_consumer_write *w, int nw)
{
    for (int i = 0; i < nrp; i++) {
        _cleanup_json_ json_t *rp = plc_rp_get_404(ctx, nb_json_str(rps[i].rp, "uuid"));
        if (!rp || (rps[i].n && plc_inv_upsert_locked(ctx, rp, rps[i].recs, rps[i].n) < 0))
            return -1;
    }
    if (plc_alloc_write_locked(ctx, w, nw, PLC_WRITE_POST) < 0)
        return -1;
    for (int i = 0; i < nrp; i++) {
        _cleanup_json_ json_t *rp = plc_rp_get_404(ctx, nb_json_str(rps[i].rp, "uuid"));
        if (!rp ||
            plc_inv_set_locked(ctx, rp, rps[i].recs, rps[i].n, -1, "update conflict: ", true) < 0)
            return -1;
    }
    return 0;
}

static int reshape(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    int mv = plc_mv(ctx);
    if (mv < 30)
        return plc_not_at_version(ctx);
    if (plc_require_admin(ctx, "placement:reshaper:reshape") < 0)
        return -1;
    json_t *body = plc_body(ctx, req);
    if (!body)
        return -1;
    static const char *const keys[] = {"inventories", "allocations", NULL};
    if (plc_check_object(ctx, body, keys, keys) < 0)
        return -1;
    json_t *invs = json_object_get(body, "inventories");
    json_t *allocs = json_object_get(body, "allocations");
    if (!json_is_object(invs) || json_object_size(invs) == 0)
        return plc_schema_error(ctx, "inventories does not have enough properties");
    if (!json_is_object(allocs))
        return plc_schema_error(ctx, "allocations is not of type 'object'");
    size_t nrp = json_object_size(invs), nw = json_object_size(allocs);
    struct reshape_rp *rps = calloc(nrp, sizeof(*rps));
    struct plc_consumer_write *w = calloc(nw + 1, sizeof(*w));
    int nr = 0, k = 0, rc = -1;
    if (!rps || !w) {
        nb_error(ctx, 500, PLC_ERR_DEFAULT, "out of memory");
        goto cleanup;
    }
    if (reshape_parse_inventories(ctx, invs, rps, &nr) < 0)
        goto cleanup;
    const char *consumer;
    json_t *v;
    json_object_foreach (allocs, consumer, v) {
        if (!uuid_pattern(consumer)) {
            plc_schema_error(ctx, "Additional properties are not allowed ('%s' was unexpected)",
                             consumer);
            goto cleanup;
        }
        w[k].uuid = consumer;
        if (plc_alloc_parse_consumer(ctx, v, mv >= 28 ? mv : 28, true, &w[k]) < 0)
            goto cleanup;
        k++;
    }
    if (nb_db_begin(plc_db(), ctx) < 0)
        goto cleanup;
    if (reshape_locked(ctx, rps, nr, w, k) < 0) {
        nb_db_rollback(plc_db());
        goto cleanup;
    }
    rc = nb_db_commit(plc_db(), ctx);
cleanup:
    for (int i = 0; i < nr; i++) {
        json_decref(rps[i].rp);
        free(rps[i].recs);
    }
    for (int i = 0; i < k; i++)
        json_decref(w[i].allocations);
    free(rps);
    free(w);
    return rc < 0 ? -1 : nb_resp_empty(resp, 204);
}

/* ---- in-process ---- */

/* The line placement's requestlog middleware writes for the PUT that the
 * claim stands for, so that runbooks grepping nubo-placement.log for
 * `"PUT /placement/allocations/<uuid>" status: 204` find in-process claims
 * too: remote address "-" (placement's own value when there is none),
 * microversion 1.36 (what Nova's report client sends for this PUT), len 0
 * for the 204 and "-" for a refusal (no body is rendered in-process). */
static void log_claim_request(struct nb_ctx *ctx, const char *uuid, int status)
{
    if (status == 204)
        NB_INFO("nubo.placement.requestlog", ctx, NULL,
                "- \"PUT /placement/allocations/%s\" status: 204 len: 0 microversion: 1.36", uuid);
    else
        NB_INFO("nubo.placement.requestlog", ctx, NULL,
                "- \"PUT /placement/allocations/%s\" status: %d len: - microversion: 1.36", uuid,
                status);
}

int nb_placement_claim(struct nb_ctx *ctx, const char *consumer_uuid, const char *project_id,
                       const char *user_id, const char *rp_uuid, json_t *resources,
                       long long consumer_generation)
{
    char uuid[37];
    if (!plc_uuid_normalize(consumer_uuid, uuid))
        return nb_error(ctx, 400, PLC_ERR_DEFAULT, "Malformed consumer_uuid: %s",
                        consumer_uuid ? consumer_uuid : "(null)");
    if (!json_is_object(resources))
        return nb_error(ctx, 400, PLC_ERR_DEFAULT, "resources must be an object");
    /* Like Nova, leave out zero amounts (e.g. a flavor with no disk). */
    _cleanup_json_ json_t *res = json_object();
    const char *rc;
    json_t *v;
    json_object_foreach (resources, rc, v) {
        long long x;
        if (!plc_valid_rc_name(rc) || !plc_json_is_int(v, &x) || x < 0)
            return nb_error(ctx, 400, PLC_ERR_DEFAULT, "Invalid amount for resource class %s", rc);
        if (x > 0)
            json_object_set_new(res, rc, json_integer(x));
    }
    _cleanup_json_ json_t *allocs = json_object();
    if (json_object_size(res) > 0)
        json_object_set(allocs, rp_uuid, res);
    struct plc_consumer_write w = {
        .uuid = uuid,
        .project_id = project_id,
        .user_id = user_id ? user_id : PLC_INCOMPLETE_USER,
        .check_generation = true,
        .generation_null = consumer_generation < 0,
        .generation = consumer_generation,
        .allocations = allocs,
    };
    if (write_and_commit(ctx, &w, 1, PLC_WRITE_PUT) < 0) {
        log_claim_request(ctx, uuid, nb_ctx_failed(ctx) ? nb_ctx_status(ctx) : 500);
        return -1;
    }
    log_claim_request(ctx, uuid, 204);
    _cleanup_free_ char *what = json_dumps(res, JSON_COMPACT | JSON_SORT_KEYS);
    NB_INFO("nubo.placement", ctx, uuid, "claimed %s on resource provider %s", what ? what : "{}",
            rp_uuid);
    return 0;
}

static int delete_once(struct nb_ctx *ctx, const char *consumer_uuid)
{
    return delete_and_commit(ctx, consumer_uuid, false);
}

/* Redone from its begin when it lost a conflict (MariaDB: a deadlock with a
 * concurrent claim on the same provider, a Galera certification failure):
 * a release that fails leaks the allocation. Deleting twice is harmless. */
int nb_placement_delete_allocations(struct nb_ctx *ctx, const char *consumer_uuid)
{
    int rc;
    for (int tries = 1;
         (rc = delete_once(ctx, consumer_uuid)) < 0 && nb_db_redo(plc_db(), ctx, tries); tries++)
        ;
    return rc;
}

char *nb_placement_consumer_provider(struct nb_ctx *ctx, const char *consumer_uuid)
{
    /* Prefer the root of the tree the allocations are in: the compute node. */
    _cleanup_json_ json_t *row =
        nb_db_row(plc_db(), ctx,
                  "SELECT COALESCE(r.uuid, rp.uuid) AS uuid FROM allocations a "
                  "JOIN resource_providers rp ON rp.id = a.resource_provider_id "
                  "LEFT JOIN resource_providers r ON r.id = rp.root_provider_id "
                  "WHERE a.consumer_id = ? ORDER BY a.id LIMIT 1",
                  "s", consumer_uuid);
    if (!row)
        return NULL;
    return nb_strdup_printf("%s", nb_json_str(row, "uuid"));
}

json_t *nb_placement_list_consumers(struct nb_ctx *ctx)
{
    _cleanup_json_ json_t *rows = nb_db_rows(
        plc_db(), ctx, "SELECT DISTINCT consumer_id FROM allocations ORDER BY consumer_id", "");
    return nb_json_strings(rows, "consumer_id");
}

void plc_routes_allocations(void)
{
    nb_http_route("GET", "/placement/allocations/{consumer_uuid}", alloc_get, 0);
    nb_http_route("PUT", "/placement/allocations/{consumer_uuid}", alloc_put, 0);
    nb_http_route("DELETE", "/placement/allocations/{consumer_uuid}", alloc_delete, 0);
    nb_http_route("POST", "/placement/allocations", alloc_post, 0);
    nb_http_route("GET", "/placement/resource_providers/{uuid}/allocations", rp_allocs, 0);
}

void plc_routes_reshaper(void)
{
    nb_http_route("POST", "/placement/reshaper", reshape, 0);
}

json_t *nb_placement_audit_allocations(struct nb_ctx *ctx)
{
    _cleanup_json_ json_t *rows =
        nb_db_rows(plc_db(), ctx,
                   "SELECT a.consumer_id, rp.uuid AS rp_uuid, rp.name AS rp_name, "
                   "a.resource_class AS rc, a.used, c.project_id, c.user_id, c.generation "
                   "FROM allocations a JOIN resource_providers rp ON rp.id = "
                   "a.resource_provider_id "
                   "LEFT JOIN consumers c ON c.uuid = a.consumer_id "
                   "ORDER BY a.consumer_id, rp.uuid, a.resource_class",
                   "");
    if (!rows)
        return NULL;
    json_t *out = json_object();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        const char *cid = nb_json_str(r, "consumer_id"), *rp = nb_json_str(r, "rp_uuid");
        json_t *c = json_object_get(out, cid);
        if (!c) {
            c = json_pack("{s:s?, s:s?, s:I, s:{}, s:{}}", "project_id",
                          nb_json_str(r, "project_id"), "user_id", nb_json_str(r, "user_id"),
                          "generation", (json_int_t)nb_json_int(r, "generation", 0), "allocations",
                          "providers");
            json_object_set_new(out, cid, c);
        }
        json_t *allocs = json_object_get(c, "allocations");
        json_t *on = json_object_get(allocs, rp);
        if (!on) {
            on = json_object();
            json_object_set_new(allocs, rp, on);
            json_object_set_new(json_object_get(c, "providers"), rp,
                                json_string(nb_json_str(r, "rp_name")));
        }
        json_object_set_new(on, nb_json_str(r, "rc"),
                            json_integer((json_int_t)nb_json_int(r, "used", 0)));
    }
    return out;
}

void nb_placement_use_db(struct nb_db *db)
{
    plc_set_db(db);
}

long long nb_placement_consumer_generation(struct nb_ctx *ctx, const char *consumer_uuid)
{
    return nb_db_int(plc_db(), ctx, -1, "SELECT generation FROM consumers WHERE uuid = ?", "s",
                     consumer_uuid);
}
