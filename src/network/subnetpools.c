/* subnetpools.c - /networking/v2.0/subnetpools (Neutron's subnet_allocation
 * extension: neutron/db/db_base_plugin_v2.py create/update/delete_subnetpool,
 * neutron/ipam/subnet_alloc.py) and the allocation of a subnet's CIDR from a
 * pool (nb_net_hooks.subnet_from_pool, called by subnets.c).
 *
 * A pool is a set of prefixes of one IP version, kept compact (overlapping
 * and adjacent prefixes merged, as netaddr.IPSet.compact does), with
 * min/default/max prefix lengths. A subnet from the pool asks for a prefix
 * length (default_prefixlen unless given) or a specific CIDR. The free space
 * is the pool's prefixes minus the CIDRs of the subnets already made from
 * it, split into maximal aligned blocks; as Neutron, an "any" request takes
 * the first address of the smallest free block that is large enough. A pool
 * with subnets cannot be deleted (400 SubnetPoolDeleteError).
 *
 * Address math is on unsigned __int128, so IPv4 and IPv6 share it. */
#include "common/cleanup.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "db/db.h"
#include "network/network_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SP_LOG "nubo.network.subnetpools"
#define MAX_BLOCKS 512

typedef unsigned __int128 u128;

/* A CIDR as a number: net has no host bits. */
struct block {
    int version, len;
    u128 net;
};

static int bits_of(int version)
{
    return version == 4 ? 32 : 128;
}

static u128 size_of(const struct block *b)
{
    int host = bits_of(b->version) - b->len;
    return host >= 128 ? 0 : (u128)1 << host; /* 0 stands for 2^128 (::/0) */
}

static u128 last_of(const struct block *b)
{
    return b->net + size_of(b) - 1;
}

/* Parses a CIDR (host bits dropped unless strict). 0/-1. */
static int block_parse(const char *s, struct block *b, bool strict)
{
    struct nb_ip ip;
    int len;
    if (nb_cidr_parse(s, &ip, &len, strict) < 0)
        return -1;
    b->version = ip.version;
    b->len = len;
    b->net = 0;
    for (int i = 0; i < (ip.version == 4 ? 4 : 16); i++)
        b->net = (b->net << 8) | ip.bytes[i];
    return 0;
}

static char *block_format(const struct block *b, char *out)
{
    struct nb_ip ip = {.version = b->version};
    int n = b->version == 4 ? 4 : 16;
    u128 v = b->net;
    for (int i = n - 1; i >= 0; i--, v >>= 8)
        ip.bytes[i] = (unsigned char)(v & 0xff);
    char a[64];
    snprintf(out, 80, "%s/%d", nb_ip_format(&ip, a), b->len);
    return out;
}

static bool overlaps(const struct block *a, const struct block *b)
{
    return a->net <= last_of(b) && b->net <= last_of(a);
}

static bool contains(const struct block *outer, const struct block *inner)
{
    return outer->len <= inner->len && outer->net <= inner->net && last_of(inner) <= last_of(outer);
}

static int cmp_addr(const void *x, const void *y)
{
    const struct block *a = x, *b = y;
    if (a->net != b->net)
        return a->net < b->net ? -1 : 1;
    return a->len - b->len;
}

/* Merges blocks in place into the fewest CIDRs covering the same addresses
 * (netaddr.IPSet.compact); sorted by address. Returns the new count. */
static int compact(struct block *b, int n)
{
    bool changed = true;
    while (changed) {
        changed = false;
        qsort(b, (size_t)n, sizeof(*b), cmp_addr);
        int m = 0;
        for (int i = 0; i < n; i++) {
            if (m && contains(&b[m - 1], &b[i])) {
                changed = true;
                continue;
            }
            /* two halves of one parent become the parent */
            if (m && b[m - 1].len == b[i].len && b[i].len > 0 &&
                b[m - 1].net + size_of(&b[i]) == b[i].net &&
                (b[m - 1].net & ((size_of(&b[i]) << 1) - 1)) == 0) {
                b[m - 1].len--;
                changed = true;
                continue;
            }
            b[m++] = b[i];
        }
        n = m;
    }
    return n;
}

/* Appends to out the maximal aligned blocks of whole that no used block
 * overlaps. -1 when out is full. */
static int subtract(const struct block *whole, const struct block *used, int nused,
                    struct block *out, int *nout)
{
    bool hit = false;
    for (int i = 0; i < nused; i++) {
        if (contains(&used[i], whole))
            return 0;
        hit = hit || overlaps(&used[i], whole);
    }
    if (!hit) {
        if (*nout >= MAX_BLOCKS)
            return -1;
        out[(*nout)++] = *whole;
        return 0;
    }
    struct block lo = {whole->version, whole->len + 1, whole->net};
    struct block hi = {whole->version, whole->len + 1, whole->net + size_of(&lo)};
    if (subtract(&lo, used, nused, out, nout) < 0)
        return -1;
    return subtract(&hi, used, nused, out, nout);
}

/* --- rows and views ------------------------------------------------------- */

static json_t *col(const json_t *row, const char *key)
{
    json_t *v = json_object_get(row, key);
    return v ? json_incref(v) : json_null();
}

static json_t *prefixes_of(struct nb_ctx *ctx, const char *id)
{
    _cleanup_json_ json_t *rows =
        nb_db_rows(nb_net_env->db, ctx,
                   "SELECT cidr FROM subnetpoolprefixes WHERE subnetpool_id = ?", "s", id);
    if (!rows)
        return NULL;
    struct block b[MAX_BLOCKS];
    int n = 0;
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r)
        if (n < MAX_BLOCKS && block_parse(nb_json_str(r, "cidr"), &b[n], false) == 0)
            n++;
    qsort(b, (size_t)n, sizeof(b[0]), cmp_addr);
    json_t *out = json_array();
    char buf[80];
    for (int k = 0; k < n; k++)
        json_array_append_new(out, json_string(block_format(&b[k], buf)));
    return out;
}

static json_t *pool_view(struct nb_ctx *ctx, const json_t *row)
{
    json_t *prefixes = prefixes_of(ctx, nb_json_str(row, "id"));
    if (!prefixes)
        return NULL;
    json_t *v = json_object();
    json_object_set_new(v, "id", col(row, "id"));
    json_object_set_new(v, "name", col(row, "name"));
    json_object_set_new(v, "ip_version", col(row, "ip_version"));
    json_object_set_new(v, "default_prefixlen", col(row, "default_prefixlen"));
    json_object_set_new(v, "min_prefixlen", col(row, "min_prefixlen"));
    json_object_set_new(v, "max_prefixlen", col(row, "max_prefixlen"));
    json_object_set_new(v, "is_default", json_boolean(nb_json_int(row, "is_default", 0)));
    json_object_set_new(v, "shared", json_boolean(nb_json_int(row, "shared", 0)));
    json_object_set_new(v, "default_quota", col(row, "default_quota"));
    json_object_set_new(v, "address_scope_id", col(row, "address_scope_id"));
    json_object_set_new(v, "prefixes", prefixes);
    nb_net_std_attrs(v, row);
    return v;
}

static bool may_use(const struct nb_ctx *ctx, const json_t *row)
{
    const char *p = nb_json_str(row, "project_id");
    return ctx->is_admin || ctx->system || nb_json_int(row, "shared", 0) ||
           (p && !strcmp(p, ctx->project_id));
}

/* The pool id visible to ctx, or NULL after 404 SubnetPoolNotFound. */
static json_t *pool_load(struct nb_ctx *ctx, const char *id)
{
    json_t *row = nb_db_row(nb_net_env->db, ctx, "SELECT * FROM subnetpools WHERE id = ?", "s", id);
    if (!row && nb_ctx_failed(ctx))
        return NULL;
    if (!row || !may_use(ctx, row)) {
        json_decref(row);
        nb_error(ctx, 404, "SubnetPoolNotFound", "Subnet pool %s could not be found.", id);
        return NULL;
    }
    return row;
}

/* --- reading a create/update (SubnetPoolReader) ------------------------------ */

struct pool {
    int version;
    struct block prefixes[MAX_BLOCKS];
    int nprefixes;
    long long min_len, max_len, default_len;
};

/* Parses body["prefixes"] (type:subnet_list), checks one version and
 * compacts. 0/-1. */
static int read_prefixes(struct nb_ctx *ctx, const json_t *list, struct pool *p)
{
    if (!json_is_array(list) || json_array_size(list) == 0)
        return json_is_array(list)
                   ? nb_error(ctx, 400, "EmptySubnetPoolPrefixList",
                              "Empty subnet pool prefix list.")
                   : nb_error(ctx, 400, "HTTPBadRequest",
                              "Invalid input for prefixes. Reason: '%s' is not "
                              "a list.",
                              json_string_value(list) ? json_string_value(list) : "None");
    p->nprefixes = 0;
    p->version = 0;
    size_t i;
    json_t *v;
    json_array_foreach (list, i, v) {
        char buf[256];
        const char *s = json_string_value(v);
        const char *why = nb_net_validate_cidr(s, buf);
        if (why)
            return nb_error(ctx, 400, "HTTPBadRequest", "Invalid input for prefixes. Reason: %s.",
                            why);
        if (p->nprefixes >= MAX_BLOCKS)
            return nb_error(ctx, 400, "HTTPBadRequest", "Too many prefixes.");
        struct block *b = &p->prefixes[p->nprefixes++];
        block_parse(s, b, false);
        if (p->version && b->version != p->version)
            return nb_error(ctx, 400, "PrefixVersionMismatch",
                            "Cannot mix IPv4 and IPv6 prefixes in a subnet pool.");
        p->version = b->version;
    }
    p->nprefixes = compact(p->prefixes, p->nprefixes);
    return 0;
}

static int bounds_error(struct nb_ctx *ctx, const char *type, long long len, const char *base,
                        long long base_len)
{
    return nb_error(ctx, 400, "IllegalSubnetPoolPrefixBounds",
                    "Illegal prefix bounds: %s=%lld, %s=%lld.", type, len, base, base_len);
}

/* _read_prefix_bounds: min defaults to 8 (v4) / 64 (v6), max to the address
 * size, default to min; then Neutron's three checks. 0/-1. */
static int read_bounds(struct nb_ctx *ctx, const json_t *body, struct pool *p)
{
    p->min_len = nb_json_int(body, "min_prefixlen", p->min_len);
    p->max_len = nb_json_int(body, "max_prefixlen", p->max_len);
    p->default_len = nb_json_int(body, "default_prefixlen", p->default_len);
    if (p->min_len > p->max_len)
        return bounds_error(ctx, "min_prefixlen", p->min_len, "max_prefixlen", p->max_len);
    if (p->max_len > bits_of(p->version))
        return bounds_error(ctx, "max_prefixlen", p->max_len, "ip_version_max",
                            bits_of(p->version));
    if (p->default_len < p->min_len)
        return bounds_error(ctx, "default_prefixlen", p->default_len, "min_prefixlen", p->min_len);
    if (p->default_len > p->max_len)
        return bounds_error(ctx, "default_prefixlen", p->default_len, "max_prefixlen", p->max_len);
    return 0;
}

static const struct nb_net_attr pool_attrs[] = {
    {"name", NB_A_STR, true, true, true, false, 255},
    {"prefixes", NB_A_LIST, true, true, true, false, 0},
    {"default_quota", NB_A_INT, true, true, false, true, 1},
    {"default_prefixlen", NB_A_INT, true, true, false, false, 1},
    {"min_prefixlen", NB_A_INT, true, true, false, false, 1},
    {"max_prefixlen", NB_A_INT, true, true, false, false, 1},
    {"is_default", NB_A_BOOL, true, true, false, false, 0},
    {"shared", NB_A_BOOL, true, false, false, false, 0},
    {"address_scope_id", NB_A_ANY, true, true, false, true, 0},
    {"description", NB_A_STR, true, true, false, false, 255},
    {NULL, 0, false, false, false, false, 0},
};

/* Name is type:not_empty_string; admin-only attributes; no address scopes. */
static int check_pool_body(struct nb_ctx *ctx, const json_t *body, const char *action)
{
    const char *name = nb_json_str(body, "name");
    if (json_object_get(body, "name") && (!name || !name[0]))
        return nb_error(ctx, 400, "HTTPBadRequest",
                        "Invalid input for name. Reason: '%s' Blank strings are not permitted.",
                        name ? name : "None");
    static const char *const admin_attrs[] = {"shared", "is_default"};
    for (int i = 0; i < 2; i++)
        if (json_is_true(json_object_get(body, admin_attrs[i])) && !ctx->is_admin)
            return nb_error(ctx, 403, "PolicyNotAuthorized",
                            "(rule:%s_subnetpool and rule:%s_subnetpool:%s) is disallowed by "
                            "policy",
                            action, action, admin_attrs[i]);
    json_t *scope = json_object_get(body, "address_scope_id");
    if (scope && !json_is_null(scope))
        return nb_error(ctx, 404, "AddressScopeNotFound", "Address scope %s could not be found.",
                        json_string_value(scope) ? json_string_value(scope) : "None");
    return 0;
}

/* 400 when another default pool of the version exists (except id). 0/-1. */
static int check_default_unique(struct nb_ctx *ctx, int version, const char *id)
{
    _cleanup_json_ json_t *row =
        nb_db_row(nb_net_env->db, ctx,
                  "SELECT id FROM subnetpools WHERE is_default = 1 AND ip_version = ? AND id != ?",
                  "is", (long long)version, id ? id : "");
    if (row)
        return nb_error(ctx, 400, "InvalidInput",
                        "Invalid input for operation: A default subnetpool for this IP family "
                        "has already been set. Only one default may exist per IP family.");
    return nb_ctx_failed(ctx) ? -1 : 0;
}

static int write_prefixes(struct nb_ctx *ctx, const char *id, const struct pool *p)
{
    if (nb_db_exec(nb_net_env->db, ctx, "DELETE FROM subnetpoolprefixes WHERE subnetpool_id = ?",
                   "s", id) < 0)
        return -1;
    char buf[80];
    for (int i = 0; i < p->nprefixes; i++)
        if (nb_db_exec(nb_net_env->db, ctx,
                       "INSERT INTO subnetpoolprefixes (subnetpool_id, cidr) VALUES (?, ?)", "ss",
                       id, block_format(&p->prefixes[i], buf)) < 0)
            return -1;
    return 0;
}

static int respond_pool(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp, int status,
                        const char *id)
{
    _cleanup_json_ json_t *row = pool_load(ctx, id);
    if (!row)
        return -1;
    json_t *v = pool_view(ctx, row);
    if (!v)
        return -1;
    return nb_net_show_respond(req, resp, status, "subnetpool", v);
}

/* --- handlers ---------------------------------------------------------------- */

static int insert_pool(struct nb_ctx *ctx, const char *id, const char *project, const json_t *body,
                       const struct pool *p)
{
    char now[32];
    nb_net_now(now);
    const char *desc = nb_json_str(body, "description");
    json_t *quota = json_object_get(body, "default_quota");
    char quota_s[24];
    snprintf(quota_s, sizeof(quota_s), "%lld", json_integer_value(quota));
    return nb_db_exec(nb_net_env->db, ctx,
                      "INSERT INTO subnetpools (id, project_id, name, description, ip_version, "
                      "default_prefixlen, min_prefixlen, max_prefixlen, shared, is_default, "
                      "default_quota, created_at, updated_at) "
                      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                      "ssssiiiibbsss", id, project, nb_json_str(body, "name"), desc ? desc : "",
                      (long long)p->version, p->default_len, p->min_len, p->max_len,
                      json_is_true(json_object_get(body, "shared")),
                      json_is_true(json_object_get(body, "is_default")),
                      json_is_integer(quota) ? quota_s : NULL, now, now);
}

static int pool_create(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    json_t *body = nb_net_body(ctx, req, "subnetpool");
    char project[NB_ID_LEN];
    struct pool p;
    if (!body || nb_net_check_attrs(ctx, body, pool_attrs, true) < 0 ||
        check_pool_body(ctx, body, "create") < 0 || nb_net_owner(ctx, body, project) < 0 ||
        nb_net_quota_check(ctx, project, "subnetpool") < 0 ||
        read_prefixes(ctx, json_object_get(body, "prefixes"), &p) < 0)
        return -1;
    p.min_len = p.version == 4 ? 8 : 64;
    p.max_len = bits_of(p.version);
    p.default_len = nb_json_int(body, "min_prefixlen", p.min_len);
    if (read_bounds(ctx, body, &p) < 0)
        return -1;
    char id[NB_UUID_LEN];
    nb_uuid(id);
    struct nb_db *db = nb_net_env->db;
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    if ((json_is_true(json_object_get(body, "is_default")) &&
         check_default_unique(ctx, p.version, NULL) < 0) ||
        insert_pool(ctx, id, project, body, &p) < 0 || write_prefixes(ctx, id, &p) < 0) {
        nb_db_rollback(db);
        return -1;
    }
    if (nb_db_commit(db, ctx) < 0)
        return -1;
    NB_INFO(SP_LOG, ctx, NULL, "created subnet pool %s", id);
    return respond_pool(ctx, req, resp, 201, id);
}

static int pool_list(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    _cleanup_json_ json_t *rows =
        nb_db_rows(nb_net_env->db, ctx, "SELECT * FROM subnetpools ORDER BY rowid", "");
    if (!rows)
        return -1;
    json_t *views = json_array();
    size_t i;
    json_t *row;
    json_array_foreach (rows, i, row) {
        if (!may_use(ctx, row))
            continue;
        json_t *v = pool_view(ctx, row);
        if (!v) {
            json_decref(views);
            return -1;
        }
        json_array_append_new(views, v);
    }
    return nb_net_list_respond(ctx, req, resp, "subnetpools", views);
}

static int pool_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    return respond_pool(ctx, req, resp, 200, nb_req_param(req, "subnetpool_id"));
}

/* Only the owner (or an admin) may do action ("update_subnetpool", …) on a
 * pool; other projects see a shared pool but may only use it (403). */
static int check_owner(struct nb_ctx *ctx, const json_t *row, const char *action)
{
    const char *p = nb_json_str(row, "project_id");
    if (ctx->is_admin || ctx->system || (p && !strcmp(p, ctx->project_id)))
        return 0;
    return nb_net_deny(ctx, action);
}

/* The updated pool: new prefixes must include the old ones
 * (_update_subnetpool_dict), then the bounds checks. 0/-1. */
static int read_update(struct nb_ctx *ctx, const json_t *body, const json_t *row, struct pool *p)
{
    _cleanup_json_ json_t *old = prefixes_of(ctx, nb_json_str(row, "id"));
    if (!old)
        return -1;
    struct pool cur;
    if (read_prefixes(ctx, old, &cur) < 0)
        return -1;
    *p = cur;
    json_t *want = json_object_get(body, "prefixes");
    if (want) {
        if (read_prefixes(ctx, want, p) < 0)
            return -1;
        for (int i = 0; i < cur.nprefixes; i++) {
            bool covered = false;
            for (int k = 0; k < p->nprefixes && !covered; k++)
                covered = p->prefixes[k].version == cur.version &&
                          contains(&p->prefixes[k], &cur.prefixes[i]);
            if (!covered)
                return nb_error(ctx, 400, "IllegalSubnetPoolPrefixUpdate",
                                "Illegal update to prefixes: Existing prefixes must be a subset "
                                "of the new prefixes.");
        }
    }
    p->min_len = nb_json_int(row, "min_prefixlen", 0);
    p->max_len = nb_json_int(row, "max_prefixlen", 0);
    p->default_len = nb_json_int(row, "default_prefixlen", 0);
    return read_bounds(ctx, body, p);
}

static int update_row(struct nb_ctx *ctx, const char *id, const json_t *body, const struct pool *p)
{
    char now[32];
    nb_net_now(now);
    json_t *quota = json_object_get(body, "default_quota");
    json_t *is_default = json_object_get(body, "is_default");
    int rc = nb_db_exec(nb_net_env->db, ctx,
                        "UPDATE subnetpools SET name = COALESCE(?, name), "
                        "description = COALESCE(?, description), default_prefixlen = ?, "
                        "min_prefixlen = ?, max_prefixlen = ?, updated_at = ?, "
                        "revision_number = revision_number + 1 WHERE id = ?",
                        "ssiiiss", nb_json_str(body, "name"), nb_json_str(body, "description"),
                        p->default_len, p->min_len, p->max_len, now, id);
    if (rc >= 0 && quota) {
        char q[24];
        snprintf(q, sizeof(q), "%lld", json_integer_value(quota));
        rc =
            nb_db_exec(nb_net_env->db, ctx, "UPDATE subnetpools SET default_quota = ? WHERE id = ?",
                       "ss", json_is_integer(quota) ? q : NULL, id);
    }
    if (rc >= 0 && is_default)
        rc = nb_db_exec(nb_net_env->db, ctx, "UPDATE subnetpools SET is_default = ? WHERE id = ?",
                        "bs", json_is_true(is_default), id);
    if (rc >= 0 && json_object_get(body, "prefixes"))
        rc = write_prefixes(ctx, id, p);
    return rc < 0 ? -1 : 0;
}

static int pool_update(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *id = nb_req_param(req, "subnetpool_id");
    json_t *body = nb_net_body(ctx, req, "subnetpool");
    if (!body || nb_net_check_attrs(ctx, body, pool_attrs, false) < 0 ||
        check_pool_body(ctx, body, "update") < 0)
        return -1;
    struct nb_db *db = nb_net_env->db;
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    _cleanup_json_ json_t *row = pool_load(ctx, id);
    struct pool p;
    if (!row || check_owner(ctx, row, "update_subnetpool") < 0 ||
        read_update(ctx, body, row, &p) < 0 ||
        (json_is_true(json_object_get(body, "is_default")) &&
         check_default_unique(ctx, p.version, id) < 0) ||
        update_row(ctx, id, body, &p) < 0) {
        nb_db_rollback(db);
        return -1;
    }
    if (nb_db_commit(db, ctx) < 0)
        return -1;
    return respond_pool(ctx, req, resp, 200, id);
}

static int pool_delete(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *id = nb_req_param(req, "subnetpool_id");
    struct nb_db *db = nb_net_env->db;
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    _cleanup_json_ json_t *row = pool_load(ctx, id);
    if (row && check_owner(ctx, row, "delete_subnetpool") == 0 &&
        nb_db_int(db, ctx, 0, "SELECT COUNT(*) FROM subnets WHERE subnetpool_id = ?", "s", id) > 0)
        nb_error(ctx, 400, "SubnetPoolDeleteError",
                 "Unable to delete subnet pool: Subnet pool has existing allocations.");
    if (!nb_ctx_failed(ctx))
        nb_db_exec(db, ctx, "DELETE FROM subnetpools WHERE id = ?", "s", id);
    if (nb_ctx_failed(ctx)) {
        nb_db_rollback(db);
        return -1;
    }
    if (nb_db_commit(db, ctx) < 0)
        return -1;
    NB_INFO(SP_LOG, ctx, NULL, "deleted subnet pool %s", id);
    return nb_resp_empty(resp, 204);
}

/* --- allocation (the subnet side) ---------------------------------------------- */

/* The CIDRs of the subnets already made from pool_id. Returns the count or
 * -1. */
static int allocated(struct nb_ctx *ctx, const char *pool_id, const char *project, int version,
                     struct block *used, long long *project_units)
{
    _cleanup_json_ json_t *rows =
        nb_db_rows(nb_net_env->db, ctx,
                   "SELECT cidr, project_id FROM subnets WHERE subnetpool_id = ?", "s", pool_id);
    if (!rows)
        return -1;
    int n = 0;
    int unit = version == 4 ? 32 : 64;
    *project_units = 0;
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        if (n >= MAX_BLOCKS || block_parse(nb_json_str(r, "cidr"), &used[n], false) < 0)
            continue;
        const char *p = nb_json_str(r, "project_id");
        if (p && !strcmp(p, project) && used[n].len <= unit + 62 && used[n].len >= unit - 62)
            *project_units += used[n].len <= unit ? 1LL << (unit - used[n].len) : 0;
        n++;
    }
    return n;
}

static int cmp_len_desc(const void *x, const void *y)
{
    const struct block *a = x, *b = y;
    if (a->len != b->len)
        return b->len - a->len;
    return cmp_addr(x, y);
}

/* Picks (want->len set, want->net 0) or checks (want given) a CIDR of the
 * pool. 0/-1. */
static int allocate(struct nb_ctx *ctx, const json_t *pool, const struct pool *p, bool specific,
                    const char *project, struct block *want)
{
    struct block used[MAX_BLOCKS], free_[MAX_BLOCKS];
    long long units;
    int nused = allocated(ctx, nb_json_str(pool, "id"), project, p->version, used, &units);
    if (nused < 0)
        return -1;
    json_t *quota = json_object_get(pool, "default_quota");
    int unit = p->version == 4 ? 32 : 64;
    if (json_is_integer(quota) && json_integer_value(quota) > 0 && want->len <= unit &&
        unit - want->len < 62 && units + (1LL << (unit - want->len)) > json_integer_value(quota))
        return nb_error(ctx, 409, "SubnetPoolQuotaExceeded",
                        "Per-tenant subnet pool prefix quota exceeded.");
    int nfree = 0;
    for (int i = 0; i < p->nprefixes; i++)
        if (subtract(&p->prefixes[i], used, nused, free_, &nfree) < 0)
            return nb_error(ctx, 500, NULL, "The subnet pool is too fragmented.");
    qsort(free_, (size_t)nfree, sizeof(free_[0]), cmp_len_desc);
    for (int i = 0; i < nfree; i++) {
        if (specific && contains(&free_[i], want))
            return 0;
        if (!specific && free_[i].len <= want->len) {
            want->net = free_[i].net;
            return 0;
        }
    }
    if (specific)
        return nb_error(ctx, 500, "SubnetAllocationError",
                        "Failed to allocate subnet: Cannot allocate requested subnet from the "
                        "available set of prefixes.");
    return nb_error(ctx, 500, "SubnetAllocationError",
                    "Failed to allocate subnet: Insufficient prefix space to allocate subnet "
                    "size /%d.",
                    want->len);
}

/* The pool a subnet create names: subnetpool_id, or the default pool of its
 * ip_version with use_default_subnetpool. NULL (no pool, no error) or a
 * new reference; NULL after nb_error too (nb_ctx_status(ctx) tells). */
static json_t *pool_of_subnet(struct nb_ctx *ctx, const json_t *body)
{
    json_t *id = json_object_get(body, "subnetpool_id");
    if (id && !json_is_null(id)) {
        if (!json_is_string(id)) {
            nb_error(ctx, 400, "HTTPBadRequest",
                     "Invalid input for subnetpool_id. Reason: is not a valid UUID.");
            return NULL;
        }
        return pool_load(ctx, json_string_value(id));
    }
    if (!json_is_true(json_object_get(body, "use_default_subnetpool")))
        return NULL;
    long long version = nb_json_int(body, "ip_version", 4);
    json_t *row = nb_db_row(nb_net_env->db, ctx,
                            "SELECT * FROM subnetpools WHERE is_default = 1 AND ip_version = ?",
                            "i", version);
    if (!row && !nb_ctx_failed(ctx))
        nb_error(ctx, 400, "BadRequest",
                 "Bad subnets request: No default subnetpool found for IPv%lld.", version);
    return row;
}

/* nb_net_hooks.subnet_from_pool. */
static int subnet_from_pool(struct nb_ctx *ctx, const char *project_id, json_t *body)
{
    _cleanup_json_ json_t *pool = pool_of_subnet(ctx, body);
    if (!pool)
        return nb_ctx_failed(ctx) ? -1 : 0;
    _cleanup_json_ json_t *prefixes = prefixes_of(ctx, nb_json_str(pool, "id"));
    struct pool p;
    if (!prefixes || read_prefixes(ctx, prefixes, &p) < 0)
        return -1;
    long long version = nb_json_int(body, "ip_version", p.version);
    if (version != p.version)
        return nb_error(ctx, 400, "BadRequest",
                        "Bad subnets request: Cannot allocate IPv%lld subnet from IPv%d subnet "
                        "pool.",
                        version, p.version);
    struct block want = {.version = p.version};
    const char *cidr = nb_json_str(body, "cidr");
    bool specific = cidr != NULL;
    if (specific && block_parse(cidr, &want, false) < 0)
        return nb_error(ctx, 400, "HTTPBadRequest",
                        "Invalid input for cidr. Reason: '%s' is not a valid IP subnet.", cidr);
    if (!specific)
        want.len = (int)nb_json_int(body, "prefixlen", nb_json_int(pool, "default_prefixlen", 0));
    long long max = nb_json_int(pool, "max_prefixlen", 0),
              min = nb_json_int(pool, "min_prefixlen", 0);
    if (want.len > max)
        return nb_error(ctx, 400, "MaxPrefixSubnetAllocationError",
                        "Unable to allocate subnet with prefix length %d, maximum allowed prefix "
                        "is %lld.",
                        want.len, max);
    if (want.len < min)
        return nb_error(ctx, 400, "MinPrefixSubnetAllocationError",
                        "Unable to allocate subnet with prefix length %d, minimum allowed prefix "
                        "is %lld.",
                        want.len, min);
    if (allocate(ctx, pool, &p, specific, project_id, &want) < 0)
        return -1;
    char buf[80];
    json_object_set_new(body, "cidr", json_string(block_format(&want, buf)));
    json_object_set_new(body, "subnetpool_id", json_string(nb_json_str(pool, "id")));
    json_object_set_new(body, "ip_version", json_integer(p.version));
    json_object_del(body, "prefixlen");
    json_object_del(body, "use_default_subnetpool");
    return 0;
}

int nb_net_subnetpools_init(struct nb_env *env)
{
    (void)env;
    nb_http_route("GET", "/networking/v2.0/subnetpools", pool_list, 0);
    nb_http_route("POST", "/networking/v2.0/subnetpools", pool_create, 0);
    nb_http_route("GET", "/networking/v2.0/subnetpools/{subnetpool_id}", pool_show, 0);
    nb_http_route("PUT", "/networking/v2.0/subnetpools/{subnetpool_id}", pool_update, 0);
    nb_http_route("DELETE", "/networking/v2.0/subnetpools/{subnetpool_id}", pool_delete, 0);
    nb_net_extension("subnet_allocation", "Subnet Allocation",
                     "Enables allocation of subnets "
                     "from a subnet pool");
    nb_net_extension("default-subnetpools", "Default Subnetpools",
                     "Provides ability to mark and use a subnetpool as the default.");
    nb_net_hooks.subnet_from_pool = subnet_from_pool;
    return 0;
}
