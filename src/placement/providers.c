/* providers.c - resource providers: /placement/resource_providers[/{uuid}].
 *
 * A provider is a row of resource_providers; trees (1.14) are kept with
 * parent_provider_id and root_provider_id, where a root points at itself.
 * Every change to a provider's inventories, traits or aggregates (1.19+)
 * and every allocation against it increments its generation; callers that
 * state a generation get 409 placement.concurrent_update when it moved.
 * The list handler filters a snapshot (world.c) in memory, so filters by
 * resources, traits and aggregates cost a fixed handful of queries. */
#include "common/cleanup.h"
#include "common/http.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "db/db.h"
#include "placement/internal.h"
#include "placement/placement.h"

#include <stdio.h>
#include <string.h>

#define RP_SELECT                                                                                  \
    "SELECT rp.id, rp.uuid, rp.name, rp.generation, rp.parent_provider_id, "                       \
    "rp.root_provider_id, p.uuid AS parent_provider_uuid, "                                        \
    "COALESCE(r.uuid, rp.uuid) AS root_provider_uuid, rp.created_at, rp.updated_at "               \
    "FROM resource_providers rp "                                                                  \
    "LEFT JOIN resource_providers p ON p.id = rp.parent_provider_id "                              \
    "LEFT JOIN resource_providers r ON r.id = rp.root_provider_id "

json_t *plc_rp_get(struct nb_ctx *ctx, const char *uuid)
{
    return nb_db_row(plc_db(), ctx, RP_SELECT "WHERE rp.uuid = ?", "s", uuid);
}

json_t *plc_rp_get_404(struct nb_ctx *ctx, const char *uuid)
{
    json_t *rp = plc_rp_get(ctx, uuid);
    if (!rp && !nb_ctx_failed(ctx))
        nb_error(ctx, 404, PLC_ERR_DEFAULT, "No resource provider with uuid %s found", uuid);
    return rp;
}

long long plc_rp_bump(struct nb_ctx *ctx, long long rp_id, long long expected)
{
    char now[32];
    nb_now_iso_us(now);
    int n;
    if (expected < 0)
        n = nb_db_exec(plc_db(), ctx,
                       "UPDATE resource_providers SET generation = generation + 1, "
                       "updated_at = ? WHERE id = ?",
                       "si", now, rp_id);
    else
        n = nb_db_exec(plc_db(), ctx,
                       "UPDATE resource_providers SET generation = generation + 1, "
                       "updated_at = ? WHERE id = ? AND generation = ?",
                       "sii", now, rp_id, expected);
    if (n < 0)
        return -1;
    if (n == 0) {
        nb_error(ctx, 409, PLC_ERR_CONCURRENT,
                 "Another thread concurrently updated the resource provider data. "
                 "Please retry your update");
        return -1;
    }
    if (expected >= 0)
        return expected + 1; /* the row matched generation = expected */
    return nb_db_int(plc_db(), ctx, -1, "SELECT generation FROM resource_providers WHERE id = ?",
                     "i", rp_id);
}

/* {"rel": rel, "href": href}, built without json_pack's format parsing
 * (the provider view is in every provider answer and list entry) */
static json_t *rp_link(const char *rel, const char *href)
{
    json_t *l = json_object();
    json_object_set_new_nocheck(l, "rel", json_string(rel));
    json_object_set_new_nocheck(l, "href", json_string(href));
    return l;
}

static json_t *rp_links(const char *uuid, int mv)
{
    char href[160];
    int n = snprintf(href, sizeof(href), "/placement/resource_providers/%s", uuid);
    if (n < 0 || (size_t)n >= sizeof(href) - 16)
        n = 0;
    json_t *links = json_array();
    json_array_append_new(links, rp_link("self", href));
    const char *rels[] = {"inventories", "usages", "aggregates", "traits", "allocations"};
    const int since[] = {0, 0, 1, 6, 11};
    for (size_t i = 0; i < sizeof(rels) / sizeof(rels[0]); i++) {
        if (mv < since[i])
            continue;
        /* self's text, then "/<rel>" */
        snprintf(href + n, sizeof(href) - (size_t)n, "/%s", rels[i]);
        json_array_append_new(links, rp_link(rels[i], href));
        href[n] = '\0';
    }
    return links;
}

static json_t *rp_view_fields(const char *uuid, const char *name, long long gen, const char *parent,
                              const char *root, int mv)
{
    json_t *v = json_object();
    json_object_set_new_nocheck(v, "uuid", json_string(uuid));
    json_object_set_new_nocheck(v, "name", json_string(name));
    json_object_set_new_nocheck(v, "generation", json_integer((json_int_t)gen));
    json_object_set_new_nocheck(v, "links", rp_links(uuid, mv));
    if (mv >= 14) {
        json_object_set_new_nocheck(v, "parent_provider_uuid",
                                    parent ? json_string(parent) : json_null());
        json_object_set_new_nocheck(v, "root_provider_uuid", json_string(root ? root : uuid));
    }
    return v;
}

json_t *plc_rp_view(json_t *row, int mv)
{
    return rp_view_fields(
        nb_json_str(row, "uuid"), nb_json_str(row, "name"), nb_json_int(row, "generation", 0),
        nb_json_str(row, "parent_provider_uuid"), nb_json_str(row, "root_provider_uuid"), mv);
}

/* ---- list ---- */

struct rp_filters {
    const char *name;
    const char *uuid;
    char in_tree[37];
    json_t *resources;      /* {rc: amount} */
    json_t *required;       /* [[t…]…] */
    json_t *forbidden;      /* [t…] */
    json_t *member_of;      /* [[a…]…] */
    json_t *forbidden_aggs; /* [a…] */
};

static void filters_free(struct rp_filters *f)
{
    json_decref(f->resources);
    json_decref(f->required);
    json_decref(f->forbidden);
    json_decref(f->member_of);
    json_decref(f->forbidden_aggs);
}

static int list_parse(struct nb_ctx *ctx, json_t *q, int mv, struct rp_filters *f)
{
    static const char *const k10[] = {"name", "uuid", NULL};
    static const char *const k13[] = {"name", "uuid", "member_of", NULL};
    static const char *const k14[] = {"name", "uuid", "member_of", "resources", "in_tree", NULL};
    static const char *const k4[] = {"name", "uuid", "member_of", "resources", NULL};
    static const char *const k18[] = {"name",    "uuid",     "member_of", "resources",
                                      "in_tree", "required", NULL};
    const char *const *allowed = mv >= 18   ? k18
                                 : mv >= 14 ? k14
                                 : mv >= 4  ? k4
                                 : mv >= 3  ? k13
                                            : k10;
    if (plc_query_check(ctx, q, allowed) < 0)
        return -1;
    f->name = plc_query_last(q, "name");
    f->uuid = plc_query_last(q, "uuid");
    char tmp[37];
    if (f->uuid && !plc_uuid_normalize(f->uuid, tmp))
        return nb_error(ctx, 400, PLC_ERR_DEFAULT,
                        "Invalid query string parameters: '%s' is not a 'uuid'", f->uuid);
    const char *in_tree = plc_query_last(q, "in_tree");
    if (in_tree && !plc_uuid_normalize(in_tree, f->in_tree))
        return nb_error(ctx, 400, PLC_ERR_DEFAULT,
                        "Invalid query string parameters: '%s' is not a 'uuid'", in_tree);
    const char *res = plc_query_last(q, "resources");
    if (res && plc_parse_resources(ctx, res, &f->resources) < 0)
        return -1;
    if (json_object_get(q, "member_of") &&
        plc_parse_member_of(ctx, json_object_get(q, "member_of"), "", mv, &f->member_of,
                            &f->forbidden_aggs) < 0)
        return -1;
    if (json_object_get(q, "required")) {
        if (plc_parse_required(ctx, json_object_get(q, "required"), mv, &f->required,
                               &f->forbidden) < 0)
            return -1;
        if (plc_check_traits_exist(ctx, f->required, f->forbidden,
                                   "Invalid trait(s) in \"required\" parameter: ") < 0)
            return -1;
    }
    if (f->resources) {
        const char *rc;
        json_t *v;
        json_object_foreach (f->resources, rc, v) {
            if (!plc_rc_exists(ctx, rc))
                return nb_ctx_failed(ctx)
                           ? -1
                           : nb_error(ctx, 400, PLC_ERR_DEFAULT,
                                      "Invalid resource class in resources parameter: No "
                                      "such resource class %s.",
                                      rc);
        }
    }
    return 0;
}

static bool rp_matches(const struct plc_rp *rp, const struct rp_filters *f, int tree_root)
{
    if (f->name && strcmp(rp->name, f->name) != 0)
        return false;
    if (f->uuid && strcmp(rp->uuid, f->uuid) != 0)
        return false;
    if (f->in_tree[0] && rp->root != tree_root)
        return false;
    if ((f->required || f->forbidden) && !plc_rp_traits_match(rp, f->required, f->forbidden))
        return false;
    if ((f->member_of || f->forbidden_aggs) &&
        !plc_rp_aggs_match(rp, f->member_of, f->forbidden_aggs))
        return false;
    if (f->resources) {
        const char *rc;
        json_t *v;
        json_object_foreach (f->resources, rc, v) {
            const struct plc_inv *inv = plc_rp_inv(rp, rc);
            if (!inv || plc_fit(inv, inv->used, json_integer_value(v)) != PLC_FIT_OK)
                return false;
        }
    }
    return true;
}

static int rp_list(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (plc_require_admin(ctx, "placement:resource_providers:list") < 0)
        return -1;
    int mv = plc_mv(ctx);
    _cleanup_json_ json_t *q = plc_query(req);
    struct rp_filters f = {0};
    if (list_parse(ctx, q, mv, &f) < 0) {
        filters_free(&f);
        return -1;
    }
    unsigned flags = PLC_W_NAMES | (f.resources ? PLC_W_INV : 0);
    struct plc_world w;
    if (plc_world_load(ctx, &w, flags) < 0) {
        filters_free(&f);
        return -1;
    }
    json_t *list = json_array();
    int tree_root = -2;
    if (f.in_tree[0]) {
        int i = plc_world_index_uuid(&w, f.in_tree);
        tree_root = i >= 0 ? w.rp[i].root : -2;
    }
    if (!f.in_tree[0] || tree_root >= 0) {
        for (int i = 0; i < w.n; i++) {
            const struct plc_rp *rp = &w.rp[i];
            if (!rp_matches(rp, &f, tree_root))
                continue;
            const char *parent = rp->parent >= 0 ? w.rp[rp->parent].uuid : NULL;
            json_array_append_new(list, rp_view_fields(rp->uuid, rp->name, rp->generation, parent,
                                                       w.rp[rp->root].uuid, mv));
        }
    }
    plc_world_free(&w);
    filters_free(&f);
    plc_cache_headers(ctx, resp);
    return nb_resp_json(resp, 200, json_pack("{s:o}", "resource_providers", list));
}

/* ---- create ---- */

/* Resolves an optional parent for a new or re-parented provider. Returns 0
 * and sets *parent (new ref, or NULL for none). */
static int parent_lookup(struct nb_ctx *ctx, json_t *body, json_t **parent, bool *given)
{
    *parent = NULL;
    json_t *p = json_object_get(body, "parent_provider_uuid");
    *given = p != NULL;
    if (!p || json_is_null(p))
        return 0;
    char puuid[37];
    if (!json_is_string(p) || !plc_uuid_normalize(json_string_value(p), puuid)) {
        _cleanup_free_ char *s = json_dumps(p, JSON_ENCODE_ANY | JSON_COMPACT);
        return plc_schema_error(ctx, "%s is not valid under any of the given schemas",
                                s ? s : "null");
    }
    *parent = plc_rp_get(ctx, puuid);
    if (!*parent && nb_ctx_failed(ctx))
        return -1;
    return 0;
}

static int rp_validate_name(struct nb_ctx *ctx, json_t *body)
{
    json_t *name = json_object_get(body, "name");
    if (!json_is_string(name)) {
        _cleanup_free_ char *s = json_dumps(name, JSON_ENCODE_ANY | JSON_COMPACT);
        return plc_schema_error(ctx, "%s is not of type 'string'", s ? s : "null");
    }
    if (json_string_length(name) > 200)
        return plc_schema_error(ctx, "'%s' is too long", json_string_value(name));
    return 0;
}

static int rp_create_locked(struct nb_ctx *ctx, const char *uuid, const char *name, json_t *body)
{
    /* one query for both unique keys; the uuid is named first, as before */
    long long dup = nb_db_int(plc_db(), ctx, 0,
                              "SELECT MAX(CASE WHEN uuid = ? THEN 2 ELSE 1 END) FROM "
                              "resource_providers WHERE uuid = ? OR name = ?",
                              "sss", uuid, uuid, name);
    if (nb_ctx_failed(ctx))
        return -1;
    if (dup)
        return nb_error(ctx, 409, PLC_ERR_DUPLICATE,
                        "Conflicting resource provider %s: %s already exists.",
                        dup == 2 ? "uuid" : "name", dup == 2 ? uuid : name);
    _cleanup_json_ json_t *parent = NULL;
    bool given;
    if (body && parent_lookup(ctx, body, &parent, &given) < 0)
        return -1;
    if (body && given && !json_is_null(json_object_get(body, "parent_provider_uuid"))) {
        char puuid[37];
        plc_uuid_normalize(json_string_value(json_object_get(body, "parent_provider_uuid")), puuid);
        if (strcmp(puuid, uuid) == 0)
            return nb_error(ctx, 400, PLC_ERR_DEFAULT,
                            "Unable to create resource provider \"%s\", %s: Object action "
                            "create failed because: parent provider UUID cannot be same as "
                            "UUID. Please set parent provider UUID to None if there is no "
                            "parent.",
                            name, uuid);
        if (!parent)
            return nb_error(ctx, 400, PLC_ERR_DEFAULT,
                            "Unable to create resource provider \"%s\", %s: Object action "
                            "create failed because: parent provider UUID does not exist.",
                            name, uuid);
    }
    char now[32];
    nb_now_iso_us(now);
    if (nb_db_exec(plc_db(), ctx,
                   "INSERT INTO resource_providers (uuid, name, generation, created_at, "
                   "updated_at) VALUES (?, ?, 0, ?, ?)",
                   "ssss", uuid, name, now, now) < 0)
        return -1;
    long long id = nb_db_last_id(plc_db());
    if (plc_world_changed(ctx) < 0)
        return -1;
    long long parent_id = parent ? nb_json_int(parent, "id", 0) : 0;
    long long root_id = parent ? nb_json_int(parent, "root_provider_id", 0) : id;
    if (parent)
        return nb_db_exec(plc_db(), ctx,
                          "UPDATE resource_providers SET parent_provider_id = ?, "
                          "root_provider_id = ? WHERE id = ?",
                          "iii", parent_id, root_id, id) < 0
                   ? -1
                   : 0;
    return nb_db_exec(plc_db(), ctx,
                      "UPDATE resource_providers SET root_provider_id = ? WHERE id = ?", "ii",
                      root_id, id) < 0
               ? -1
               : 0;
}

static int rp_create(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (plc_require_admin(ctx, "placement:resource_providers:create") < 0)
        return -1;
    int mv = plc_mv(ctx);
    json_t *body = plc_body(ctx, req);
    if (!body)
        return -1;
    static const char *const keys[] = {"name", "uuid", NULL};
    static const char *const keys14[] = {"name", "uuid", "parent_provider_uuid", NULL};
    static const char *const required[] = {"name", NULL};
    if (plc_check_object(ctx, body, mv >= 14 ? keys14 : keys, required) < 0 ||
        rp_validate_name(ctx, body) < 0)
        return -1;
    const char *name = nb_json_str(body, "name");
    char uuid[37];
    json_t *ju = json_object_get(body, "uuid");
    if (ju) {
        if (!json_is_string(ju) || !plc_uuid_normalize(json_string_value(ju), uuid)) {
            _cleanup_free_ char *s = json_dumps(ju, JSON_ENCODE_ANY | JSON_COMPACT);
            return plc_schema_error(ctx, "%s is not a 'uuid'", s ? s : "null");
        }
    } else {
        nb_uuid(uuid);
    }
    if (nb_db_begin(plc_db(), ctx) < 0)
        return -1;
    if (rp_create_locked(ctx, uuid, name, body) < 0) {
        nb_db_rollback(plc_db());
        return -1;
    }
    /* the answer's row, read before the commit that makes it durable */
    _cleanup_json_ json_t *row = mv >= 20 ? plc_rp_get_404(ctx, uuid) : NULL;
    if (mv >= 20 && !row) {
        nb_db_rollback(plc_db());
        return -1;
    }
    if (nb_db_commit(plc_db(), ctx) < 0)
        return -1;
    NB_INFO("nubo.placement", ctx, NULL, "created resource provider %s (%s)", uuid, name);

    char path[128];
    snprintf(path, sizeof(path), "/placement/resource_providers/%s", uuid);
    plc_location(resp, path);
    if (mv < 20)
        return nb_resp_empty(resp, 201);
    plc_cache_headers(ctx, resp);
    return nb_resp_json(resp, 200, plc_rp_view(row, mv));
}

int plc_rp_ensure_locked(struct nb_ctx *ctx, const char *uuid, const char *name)
{
    _cleanup_json_ json_t *row = plc_rp_get(ctx, uuid);
    if (nb_ctx_failed(ctx))
        return -1;
    if (!row)
        return rp_create_locked(ctx, uuid, name, NULL);
    if (strcmp(nb_json_str(row, "name"), name) == 0)
        return 0;
    long long other =
        nb_db_int(plc_db(), ctx, 0, "SELECT id FROM resource_providers WHERE name = ? AND id <> ?",
                  "si", name, nb_json_int(row, "id", 0));
    if (nb_ctx_failed(ctx))
        return -1;
    if (other)
        return nb_error(ctx, 409, PLC_ERR_DUPLICATE,
                        "Conflicting resource provider %s already exists.", name);
    char now[32];
    nb_now_iso_us(now);
    return nb_db_exec(plc_db(), ctx,
                      "UPDATE resource_providers SET name = ?, updated_at = ? WHERE id = ?", "ssi",
                      name, now, nb_json_int(row, "id", 0)) < 0
               ? -1
               : 0;
}

/* ---- show / update / delete ---- */

static int rp_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (plc_require_admin(ctx, "placement:resource_providers:show") < 0)
        return -1;
    _cleanup_json_ json_t *row = plc_rp_get_404(ctx, nb_req_param(req, "uuid"));
    if (!row)
        return -1;
    plc_cache_headers(ctx, resp);
    return nb_resp_json(resp, 200, plc_rp_view(row, plc_mv(ctx)));
}

/* True if candidate is rp itself or one of its descendants. */
static bool in_subtree(struct nb_ctx *ctx, long long rp_id, long long candidate)
{
    long long cur = candidate;
    for (int depth = 0; cur && depth < 1000; depth++) {
        if (cur == rp_id)
            return true;
        cur = nb_db_int(plc_db(), ctx, 0,
                        "SELECT COALESCE(parent_provider_id, 0) FROM resource_providers "
                        "WHERE id = ?",
                        "i", cur);
    }
    return false;
}

/* Sets root_provider_id of rp's whole subtree to new_root. */
static int set_subtree_root(struct nb_ctx *ctx, long long rp_id, long long new_root)
{
    if (nb_db_exec(plc_db(), ctx, "UPDATE resource_providers SET root_provider_id = ? WHERE id = ?",
                   "ii", new_root, rp_id) < 0)
        return -1;
    _cleanup_json_ json_t *kids =
        nb_db_rows(plc_db(), ctx, "SELECT id FROM resource_providers WHERE parent_provider_id = ?",
                   "i", rp_id);
    if (!kids)
        return -1;
    size_t i;
    json_t *k;
    json_array_foreach (kids, i, k) {
        if (set_subtree_root(ctx, nb_json_int(k, "id", 0), new_root) < 0)
            return -1;
    }
    return 0;
}

static int rp_update_parent_locked(struct nb_ctx *ctx, json_t *row, json_t *body, int mv)
{
    const char *uuid = nb_json_str(row, "uuid");
    long long id = nb_json_int(row, "id", 0);
    long long cur_parent = nb_json_int(row, "parent_provider_id", 0);
    bool allow_reparent = mv >= 37;
    _cleanup_json_ json_t *parent = NULL;
    bool given;
    if (parent_lookup(ctx, body, &parent, &given) < 0)
        return -1;
    if (!given)
        return 0;
    if (json_is_null(json_object_get(body, "parent_provider_uuid"))) {
        if (!cur_parent)
            return 0;
        if (!allow_reparent)
            return nb_error(ctx, 400, PLC_ERR_DEFAULT,
                            "Unable to save resource provider %s: Object action update "
                            "failed because: un-parenting a provider is not currently "
                            "allowed.",
                            uuid);
        if (nb_db_exec(plc_db(), ctx,
                       "UPDATE resource_providers SET parent_provider_id = NULL WHERE id = ?", "i",
                       id) < 0)
            return -1;
        return set_subtree_root(ctx, id, id);
    }
    if (!parent)
        return nb_error(ctx, 400, PLC_ERR_DEFAULT,
                        "Unable to save resource provider %s: Object action create failed "
                        "because: parent provider UUID does not exist.",
                        uuid);
    long long pid = nb_json_int(parent, "id", 0);
    if (cur_parent && cur_parent != pid && !allow_reparent)
        return nb_error(ctx, 400, PLC_ERR_DEFAULT,
                        "Unable to save resource provider %s: Object action update failed "
                        "because: re-parenting a provider is not currently allowed.",
                        uuid);
    if (in_subtree(ctx, id, pid))
        return nb_error(ctx, 400, PLC_ERR_DEFAULT,
                        "Unable to save resource provider %s: Object action update failed "
                        "because: creating loop in the provider tree is not allowed.",
                        uuid);
    if (nb_db_exec(plc_db(), ctx,
                   "UPDATE resource_providers SET parent_provider_id = ? WHERE id = ?", "ii", pid,
                   id) < 0)
        return -1;
    return set_subtree_root(ctx, id, nb_json_int(parent, "root_provider_id", pid));
}

static int rp_update_locked(struct nb_ctx *ctx, const char *uuid, json_t *body, int mv)
{
    _cleanup_json_ json_t *row = plc_rp_get_404(ctx, uuid);
    if (!row)
        return -1;
    const char *name = nb_json_str(body, "name");
    long long id = nb_json_int(row, "id", 0);
    long long other =
        nb_db_int(plc_db(), ctx, 0, "SELECT id FROM resource_providers WHERE name = ? AND id <> ?",
                  "si", name, id);
    if (nb_ctx_failed(ctx))
        return -1;
    if (other)
        return nb_error(ctx, 409, PLC_ERR_DUPLICATE,
                        "Conflicting resource provider %s already exists.", name);
    char now[32];
    nb_now_iso_us(now);
    if (nb_db_exec(plc_db(), ctx,
                   "UPDATE resource_providers SET name = ?, updated_at = ? WHERE id = ?", "ssi",
                   name, now, id) < 0 ||
        plc_world_changed(ctx) < 0)
        return -1;
    if (mv >= 14 && rp_update_parent_locked(ctx, row, body, mv) < 0)
        return -1;
    return 0;
}

static int rp_update(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (plc_require_admin(ctx, "placement:resource_providers:update") < 0)
        return -1;
    int mv = plc_mv(ctx);
    const char *uuid = nb_req_param(req, "uuid");
    {
        _cleanup_json_ json_t *exists = plc_rp_get_404(ctx, uuid);
        if (!exists)
            return -1;
    }
    json_t *body = plc_body(ctx, req);
    if (!body)
        return -1;
    static const char *const keys[] = {"name", NULL};
    static const char *const keys14[] = {"name", "parent_provider_uuid", NULL};
    static const char *const required[] = {"name", NULL};
    if (plc_check_object(ctx, body, mv >= 14 ? keys14 : keys, required) < 0 ||
        rp_validate_name(ctx, body) < 0)
        return -1;
    if (nb_db_begin(plc_db(), ctx) < 0)
        return -1;
    if (rp_update_locked(ctx, uuid, body, mv) < 0) {
        nb_db_rollback(plc_db());
        return -1;
    }
    if (nb_db_commit(plc_db(), ctx) < 0)
        return -1;
    _cleanup_json_ json_t *row = plc_rp_get_404(ctx, uuid);
    if (!row)
        return -1;
    plc_cache_headers(ctx, resp);
    return nb_resp_json(resp, 200, plc_rp_view(row, mv));
}

static int rp_delete_locked(struct nb_ctx *ctx, const char *uuid)
{
    _cleanup_json_ json_t *row = plc_rp_get(ctx, uuid);
    if (!row)
        return nb_ctx_failed(ctx)
                   ? -1
                   : nb_error(ctx, 404, PLC_ERR_DEFAULT,
                              "No resource provider with uuid %s found for delete", uuid);
    long long id = nb_json_int(row, "id", 0);
    long long kids = nb_db_int(plc_db(), ctx, 0,
                               "SELECT COUNT(*) FROM resource_providers WHERE "
                               "parent_provider_id = ?",
                               "i", id);
    if (nb_ctx_failed(ctx))
        return -1;
    if (kids)
        return nb_error(ctx, 409, PLC_ERR_RP_PARENT,
                        "Unable to delete parent resource provider %s: It has child resource "
                        "providers.",
                        uuid);
    long long allocs =
        nb_db_int(plc_db(), ctx, 0,
                  "SELECT COUNT(*) FROM allocations WHERE resource_provider_id = ?", "i", id);
    if (nb_ctx_failed(ctx))
        return -1;
    if (allocs)
        return nb_error(ctx, 409, PLC_ERR_RP_INUSE,
                        "Unable to delete resource provider %s: Resource provider has "
                        "allocations.",
                        uuid);
    if (nb_db_exec(plc_db(), ctx, "DELETE FROM inventories WHERE resource_provider_id = ?", "i",
                   id) < 0 ||
        nb_db_exec(plc_db(), ctx,
                   "DELETE FROM resource_provider_aggregates WHERE resource_provider_id = ?", "i",
                   id) < 0 ||
        nb_db_exec(plc_db(), ctx,
                   "DELETE FROM resource_provider_traits WHERE resource_provider_id = ?", "i",
                   id) < 0 ||
        nb_db_exec(plc_db(), ctx, "DELETE FROM resource_providers WHERE id = ?", "i", id) < 0)
        return -1;
    return plc_world_changed(ctx);
}

static int rp_delete(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (plc_require_admin(ctx, "placement:resource_providers:delete") < 0)
        return -1;
    const char *uuid = nb_req_param(req, "uuid");
    if (nb_db_begin(plc_db(), ctx) < 0)
        return -1;
    if (rp_delete_locked(ctx, uuid) < 0) {
        nb_db_rollback(plc_db());
        return -1;
    }
    if (nb_db_commit(plc_db(), ctx) < 0)
        return -1;
    NB_INFO("nubo.placement", ctx, NULL, "deleted resource provider %s", uuid);
    return nb_resp_empty(resp, 204);
}

void plc_routes_providers(void)
{
    nb_http_route("GET", "/placement/resource_providers", rp_list, 0);
    nb_http_route("POST", "/placement/resource_providers", rp_create, 0);
    nb_http_route("GET", "/placement/resource_providers/{uuid}", rp_show, 0);
    nb_http_route("PUT", "/placement/resource_providers/{uuid}", rp_update, 0);
    nb_http_route("DELETE", "/placement/resource_providers/{uuid}", rp_delete, 0);
}

int nb_placement_ensure_provider(struct nb_ctx *ctx, const char *rp_uuid, const char *name)
{
    char uuid[37];
    if (!plc_uuid_normalize(rp_uuid, uuid))
        return nb_error(ctx, 400, PLC_ERR_DEFAULT, "Invalid resource provider uuid %s",
                        rp_uuid ? rp_uuid : "(null)");
    if (!name || !*name || strlen(name) > 200)
        return nb_error(ctx, 400, PLC_ERR_DEFAULT, "Invalid resource provider name");
    if (nb_db_begin(plc_db(), ctx) < 0)
        return -1;
    if (plc_rp_ensure_locked(ctx, uuid, name) < 0) {
        nb_db_rollback(plc_db());
        return -1;
    }
    return nb_db_commit(plc_db(), ctx);
}

/* Deletes provider id's allocations, with Placement's consumer rules:
 * every consumer that had some gets its generation bumped, and those left
 * without any allocation are deleted. 0/-1. */
static int rp_drop_allocations(struct nb_ctx *ctx, long long id)
{
    _cleanup_json_ json_t *consumers = nb_db_rows(
        plc_db(), ctx,
        "SELECT DISTINCT consumer_id FROM allocations WHERE resource_provider_id = ?", "i", id);
    if (!consumers ||
        nb_db_exec(plc_db(), ctx, "DELETE FROM allocations WHERE resource_provider_id = ?", "i",
                   id) < 0)
        return -1;
    char now[32];
    nb_now_iso_us(now);
    size_t i;
    json_t *c;
    json_array_foreach (consumers, i, c) {
        const char *uuid = nb_json_str(c, "consumer_id");
        if (nb_db_exec(plc_db(), ctx,
                       "UPDATE consumers SET generation = generation + 1, updated_at = ? "
                       "WHERE uuid = ?",
                       "ss", now, uuid) < 0 ||
            nb_db_exec(plc_db(), ctx,
                       "DELETE FROM consumers WHERE uuid = ? AND NOT EXISTS (SELECT 1 FROM "
                       "allocations WHERE consumer_id = ?)",
                       "ss", uuid, uuid) < 0)
            return -1;
    }
    return 0;
}

int nb_placement_delete_provider(struct nb_ctx *ctx, const char *rp_uuid)
{
    char uuid[37];
    if (!plc_uuid_normalize(rp_uuid, uuid))
        return 0; /* names no provider */
    /* The tree below the provider, deepest first, as Nova deletes it. */
    _cleanup_json_ json_t *tree =
        nb_db_rows(plc_db(), ctx,
                   "WITH RECURSIVE t(id, depth) AS (SELECT id, 0 FROM resource_providers "
                   "WHERE uuid = ? UNION ALL SELECT rp.id, t.depth + 1 FROM resource_providers "
                   "rp JOIN t ON rp.parent_provider_id = t.id) "
                   "SELECT id FROM t ORDER BY depth DESC, id DESC",
                   "s", uuid);
    if (!tree)
        return -1;
    size_t i;
    json_t *r;
    json_array_foreach (tree, i, r) {
        long long id = nb_json_int(r, "id", 0);
        if (rp_drop_allocations(ctx, id) < 0 ||
            nb_db_exec(plc_db(), ctx, "DELETE FROM inventories WHERE resource_provider_id = ?", "i",
                       id) < 0 ||
            nb_db_exec(plc_db(), ctx,
                       "DELETE FROM resource_provider_traits WHERE resource_provider_id = ?", "i",
                       id) < 0 ||
            nb_db_exec(plc_db(), ctx,
                       "DELETE FROM resource_provider_aggregates WHERE resource_provider_id = ?",
                       "i", id) < 0 ||
            nb_db_exec(plc_db(), ctx, "DELETE FROM resource_providers WHERE id = ?", "i", id) < 0)
            return -1;
    }
    if (json_array_size(tree) == 0)
        return 0;
    if (plc_world_changed(ctx) < 0)
        return -1;
    NB_INFO("nubo.placement", ctx, NULL, "deleted resource provider %s (%zu in its tree)", uuid,
            json_array_size(tree));
    return 1;
}
