/* roles.c - /v3/roles and the read-only role implication API.
 *
 * Roles are global (domain_id null), named uniquely. Bootstrap marks admin,
 * member and reader immutable (options {"immutable": true}) as Keystone's
 * bootstrap does, so they cannot be renamed or deleted until an admin clears
 * the option. Deleting a role deletes its assignments. The implications
 * (admin -> member -> reader) are fixed; see implied.c. */
#include "identity/identity_int.h"

#include "common/cleanup.h"
#include "common/json.h"
#include "common/log.h"
#include "db/db.h"

#include <string.h>

#define LOGGER "nubo.identity.roles"

json_t *nb_idn_render_role(const json_t *row)
{
    const char *id = nb_json_str(row, "id");
    const char *desc = nb_json_str(row, "description");
    json_t *options = nb_json_parse(nb_json_str(row, "options"));
    if (!json_is_object(options)) {
        json_decref(options);
        options = json_object();
    }
    const char *domain_id = nb_json_str(row, "domain_id");
    json_t *o =
        json_pack("{s:s, s:s, s:o, s:o, s:o}", "id", id, "name", nb_json_str(row, "name"),
                  "domain_id", domain_id ? json_string(domain_id) : json_null(), "description",
                  desc && *desc ? json_string(desc) : json_null(), "options", options);
    nb_idn_self_link(o, "roles", id);
    return o;
}

static bool is_immutable(const json_t *row)
{
    _cleanup_json_ json_t *opts = nb_json_parse(nb_json_str(row, "options"));
    return json_is_true(json_object_get(opts, "immutable"));
}

static json_t *role_or_404(struct nb_ctx *ctx, const char *id)
{
    json_t *row = nb_idn_get_role(ctx, id);
    if (!row && !nb_ctx_failed(ctx))
        nb_error(ctx, 404, NB_IDN_E404, "Could not find role: %s.", id);
    return row;
}

/* Validates "options": an object whose only known key is immutable (bool). */
static int parse_options(struct nb_ctx *ctx, const json_t *e, const json_t **opts)
{
    *opts = json_object_get(e, "options");
    if (!*opts)
        return 0;
    if (!json_is_object(*opts))
        return nb_error(ctx, 400, NB_IDN_E400,
                        "Invalid input for field 'options': value is not of type 'object'");
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)*opts, k, v) {
        if (strcmp(k, "immutable") != 0 || !(json_is_boolean(v) || json_is_null(v)))
            return nb_error(ctx, 400, NB_IDN_E400,
                            "Invalid input for field 'options': unknown option %s", k);
    }
    return 0;
}

static int list_roles(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_idn_require_admin(ctx, "identity:list_roles") < 0)
        return -1;
    const char *name = nb_req_query(req, "name");
    /* Only global roles exist: a domain filter matches none of them. */
    if (nb_req_query(req, "domain_id"))
        return nb_idn_collection(resp, req, "roles", json_array());
    _cleanup_json_ json_t *rows = nb_db_rows(
        nb_idn_db(), ctx, "SELECT * FROM role WHERE (? IS NULL OR name = ?) ORDER BY name", "ss",
        name, name);
    if (!rows)
        return -1;
    json_t *items = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r)
        json_array_append_new(items, nb_idn_render_role(r));
    return nb_idn_collection(resp, req, "roles", items);
}

static int create_role(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_idn_require_admin(ctx, "identity:create_role") < 0)
        return -1;
    json_t *e = nb_idn_body_entity(ctx, req, "role");
    if (!e)
        return -1;
    const char *name, *desc, *domain_id;
    const json_t *opts;
    if (nb_idn_opt_string(ctx, e, "name", 1, 255, false, &name) < 0 ||
        nb_idn_opt_string(ctx, e, "description", 0, 255, true, &desc) < 0 ||
        nb_idn_opt_string(ctx, e, "domain_id", 1, 64, true, &domain_id) < 0 ||
        parse_options(ctx, e, &opts) < 0)
        return -1;
    if (!name)
        return nb_error(ctx, 400, NB_IDN_E400, "'name' is a required property");
    if (domain_id)
        return nb_error(ctx, 400, NB_IDN_E400,
                        "Invalid input for field 'domain_id': domain-specific roles are not "
                        "supported.");
    struct nb_db *db = nb_idn_db();
    char id[33];
    nb_idn_new_id(id);
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    long long n = nb_db_int(db, ctx, -1, "SELECT COUNT(*) FROM role WHERE name = ?", "s", name);
    if (n != 0) {
        nb_db_rollback(db);
        return n < 0 ? -1
                     : nb_error(ctx, 409, NB_IDN_E409,
                                "Conflict occurred attempting to store role - Duplicate entry "
                                "found with name %s.",
                                name);
    }
    _cleanup_json_ json_t *options = opts ? json_deep_copy(opts) : json_object();
    if (nb_db_exec(db, ctx, "INSERT INTO role (id, name, description, options) VALUES (?, ?, ?, ?)",
                   "sssj", id, name, desc ? desc : "", options) < 0) {
        nb_db_rollback(db);
        return -1;
    }
    if (nb_db_commit(db, ctx) < 0)
        return -1;
    NB_INFO(LOGGER, ctx, NULL, "Created role %s (%s)", id, name);
    _cleanup_json_ json_t *row = nb_idn_get_role(ctx, id);
    return row ? nb_resp_json(resp, 201, json_pack("{s:o}", "role", nb_idn_render_role(row))) : -1;
}

static int show_role(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_idn_require_admin(ctx, "identity:get_role") < 0)
        return -1;
    _cleanup_json_ json_t *row = role_or_404(ctx, nb_req_param(req, "role_id"));
    return row ? nb_resp_json(resp, 200, json_pack("{s:o}", "role", nb_idn_render_role(row))) : -1;
}

static int update_role(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_idn_require_admin(ctx, "identity:update_role") < 0)
        return -1;
    const char *id = nb_req_param(req, "role_id");
    json_t *e = nb_idn_body_entity(ctx, req, "role");
    if (!e)
        return -1;
    _cleanup_json_ json_t *row = role_or_404(ctx, id);
    if (!row)
        return -1;
    const char *name, *desc;
    const json_t *opts;
    if (nb_idn_opt_string(ctx, e, "name", 1, 255, false, &name) < 0 ||
        nb_idn_opt_string(ctx, e, "description", 0, 255, true, &desc) < 0 ||
        parse_options(ctx, e, &opts) < 0)
        return -1;
    /* An immutable role may only have its immutable option cleared. */
    if (is_immutable(row) && (name || json_object_get(e, "description") || !opts ||
                              !json_is_false(json_object_get(opts, "immutable"))))
        return nb_error(ctx, 403, NB_IDN_E403,
                        "Unable to update immutable role resource: `%s. Set resource option "
                        "\"immutable\" to false first.",
                        id);
    struct nb_db *db = nb_idn_db();
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    long long taken =
        name && strcmp(name, nb_json_str(row, "name")) != 0
            ? nb_db_int(db, ctx, -1, "SELECT COUNT(*) FROM role WHERE name = ?", "s", name)
            : 0;
    if (taken != 0) {
        nb_db_rollback(db);
        return taken < 0 ? -1
                         : nb_error(ctx, 409, NB_IDN_E409,
                                    "Conflict occurred attempting to store role - Duplicate "
                                    "entry found with name %s.",
                                    name);
    }
    _cleanup_json_ json_t *merged = nb_json_parse(nb_json_str(row, "options"));
    if (!json_is_object(merged)) {
        json_decref(merged);
        merged = json_object();
    }
    if (opts)
        json_object_update(merged, (json_t *)opts);
    if (nb_db_exec(db, ctx, "UPDATE role SET name = ?, description = ?, options = ? WHERE id = ?",
                   "ssjs", name ? name : nb_json_str(row, "name"),
                   desc
                       ? desc
                       : (json_object_get(e, "description") ? "" : nb_json_str(row, "description")),
                   merged, id) < 0) {
        nb_db_rollback(db);
        return -1;
    }
    if (nb_db_commit(db, ctx) < 0)
        return -1;
    NB_INFO(LOGGER, ctx, NULL, "Updated role %s", id);
    json_decref(row);
    row = nb_idn_get_role(ctx, id);
    return row ? nb_resp_json(resp, 200, json_pack("{s:o}", "role", nb_idn_render_role(row))) : -1;
}

static int delete_role(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_idn_require_admin(ctx, "identity:delete_role") < 0)
        return -1;
    const char *id = nb_req_param(req, "role_id");
    _cleanup_json_ json_t *row = role_or_404(ctx, id);
    if (!row)
        return -1;
    if (is_immutable(row))
        return nb_error(ctx, 403, NB_IDN_E403,
                        "Unable to delete immutable role resource: `%s. Set resource option "
                        "\"immutable\" to false first.",
                        id);
    struct nb_db *db = nb_idn_db();
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    if (nb_db_exec(db, ctx, "DELETE FROM assignment WHERE role_id = ?", "s", id) < 0 ||
        nb_db_exec(db, ctx, "DELETE FROM role WHERE id = ?", "s", id) < 0) {
        nb_db_rollback(db);
        return -1;
    }
    if (nb_db_commit(db, ctx) < 0)
        return -1;
    NB_INFO(LOGGER, ctx, NULL, "Deleted role %s (%s)", id, nb_json_str(row, "name"));
    return nb_resp_empty(resp, 204);
}

/* {"id", "name", "links"} of a role row, as implication lists show roles. */
static json_t *role_ref(const json_t *row)
{
    json_t *o =
        json_pack("{s:s, s:s}", "id", nb_json_str(row, "id"), "name", nb_json_str(row, "name"));
    nb_idn_self_link(o, "roles", nb_json_str(row, "id"));
    return o;
}

/* The inference {"prior_role", "implies": [...]} of a role row, or NULL if it
 * implies nothing (or the implied role is gone). */
static json_t *inference(struct nb_ctx *ctx, const json_t *prior)
{
    const char *implied = nb_idn_role_implies(nb_json_str(prior, "name"));
    if (!implied)
        return NULL;
    _cleanup_json_ json_t *row =
        nb_db_row(nb_idn_db(), ctx, "SELECT * FROM role WHERE name = ?", "s", implied);
    if (!row)
        return NULL;
    return json_pack("{s:o, s:[o]}", "prior_role", role_ref(prior), "implies", role_ref(row));
}

static int list_inferences(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_idn_require_admin(ctx, "identity:list_role_inference_rules") < 0)
        return -1;
    _cleanup_json_ json_t *rows =
        nb_db_rows(nb_idn_db(), ctx, "SELECT * FROM role ORDER BY name", "");
    if (!rows)
        return -1;
    json_t *items = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        json_t *inf = inference(ctx, r);
        if (inf)
            json_array_append_new(items, inf);
    }
    if (nb_ctx_failed(ctx)) {
        json_decref(items);
        return -1;
    }
    return nb_idn_collection(resp, req, "role_inferences", items);
}

static int list_implied(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_idn_require_admin(ctx, "identity:list_implied_roles") < 0)
        return -1;
    _cleanup_json_ json_t *row = role_or_404(ctx, nb_req_param(req, "role_id"));
    if (!row)
        return -1;
    json_t *inf = inference(ctx, row);
    if (!inf) {
        if (nb_ctx_failed(ctx))
            return -1;
        inf = json_pack("{s:o, s:[]}", "prior_role", role_ref(row), "implies");
    }
    json_object_set_new(
        inf, "links",
        json_pack("{s:o}", "self", nb_idn_url("/roles/%s/implies", nb_json_str(row, "id"))));
    return nb_resp_json(resp, 200, json_pack("{s:o}", "role_inference", inf));
}

void nb_idn_role_routes(void)
{
    nb_http_route("GET", "/identity/v3/roles", list_roles, 0);
    nb_http_route("POST", "/identity/v3/roles", create_role, 0);
    nb_http_route("GET", "/identity/v3/roles/{role_id}", show_role, 0);
    nb_http_route("PATCH", "/identity/v3/roles/{role_id}", update_role, 0);
    nb_http_route("DELETE", "/identity/v3/roles/{role_id}", delete_role, 0);
    nb_http_route("GET", "/identity/v3/roles/{role_id}/implies", list_implied, 0);
    nb_http_route("GET", "/identity/v3/role_inferences", list_inferences, 0);
}
