/* domains.c - /v3/domains: list, show, create, update, delete.
 *
 * Domains are rows of table project with is_domain = 1 and domain_id
 * NB_IDN_ROOT_DOMAIN, as in Keystone. Bootstrap creates "default" (named
 * "Default"), which cannot be deleted. As in Keystone, a domain must be
 * disabled before it is deleted, and deleting it deletes its projects and
 * users with their role assignments and tokens. Writes need the admin role. */
#include "identity/identity_int.h"

#include "common/cleanup.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "db/db.h"

#include <string.h>

#define LOGGER "nubo.identity.domains"

static const char *const domain_attrs[] = {"id",   "name",    "description", "enabled",
                                           "tags", "options", "links",       NULL};

json_t *nb_idn_render_domain(const json_t *row)
{
    json_t *o = json_pack("{s:s, s:s, s:s, s:b, s:[], s:{}}", "id", nb_json_str(row, "id"), "name",
                          nb_json_str(row, "name"), "description",
                          nb_json_str(row, "description") ? nb_json_str(row, "description") : "",
                          "enabled", (int)nb_json_int(row, "enabled", 1), "tags", "options");
    nb_idn_merge_extra(o, nb_json_str(row, "extra"));
    nb_idn_self_link(o, "domains", nb_json_str(row, "id"));
    return o;
}

static int list_domains(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_idn_require_admin(ctx, "identity:list_domains") < 0)
        return -1;
    const char *name = nb_req_query(req, "name");
    const char *enabled = nb_req_query(req, "enabled");
    long long en = enabled ? nb_idn_query_true(req, "enabled") : -1;
    _cleanup_json_ json_t *rows =
        nb_db_rows(nb_idn_db(), ctx,
                   "SELECT * FROM project WHERE is_domain = 1 AND (? IS NULL OR name = ?) "
                   "AND (? < 0 OR enabled = ?) ORDER BY name",
                   "ssii", name, name, en, en);
    if (!rows)
        return -1;
    json_t *items = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r)
        json_array_append_new(items, nb_idn_render_domain(r));
    return nb_idn_collection(resp, req, "domains", items);
}

static int show_domain(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *id = nb_req_param(req, "domain_id");
    /* Keystone lets a token read the domain it (or its project) lives in. */
    if (!ctx->is_admin && strcmp(ctx->domain_id, id) != 0)
        return nb_idn_forbidden(ctx, "identity:get_domain");
    _cleanup_json_ json_t *row = nb_idn_get_domain(ctx, id);
    if (!row)
        return nb_ctx_failed(ctx)
                   ? -1
                   : nb_error(ctx, 404, NB_IDN_E404, "Could not find domain: %s.", id);
    return nb_resp_json(resp, 200, json_pack("{s:o}", "domain", nb_idn_render_domain(row)));
}

static int name_taken(struct nb_ctx *ctx, const char *name)
{
    long long n =
        nb_db_int(nb_idn_db(), ctx, -1,
                  "SELECT COUNT(*) FROM project WHERE name = ? AND is_domain = 1", "s", name);
    if (n < 0)
        return -1;
    if (n > 0)
        return nb_error(ctx, 409, NB_IDN_E409,
                        "Conflict occurred attempting to store domain - Duplicate entry found "
                        "with name %s.",
                        name);
    return 0;
}

int nb_idn_domain_create(struct nb_ctx *ctx, const char *name, const char *description,
                         bool enabled, const char *extra, char id[33])
{
    struct nb_db *db = nb_idn_db();
    char now[32];
    nb_idn_new_id(id);
    nb_now_iso_us(now);
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    if (name_taken(ctx, name) < 0 ||
        nb_db_exec(db, ctx,
                   "INSERT INTO project (id, name, domain_id, description, enabled, is_domain, "
                   "extra, created_at) VALUES (?, ?, ?, ?, ?, 1, ?, ?)",
                   "ssssbss", id, name, NB_IDN_ROOT_DOMAIN, description ? description : "", enabled,
                   extra ? extra : "{}", now) < 0) {
        nb_db_rollback(db);
        return -1;
    }
    if (nb_db_commit(db, ctx) < 0)
        return -1;
    NB_INFO(LOGGER, ctx, NULL, "Created domain %s (%s)", id, name);
    return 0;
}

static int create_domain(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_idn_require_admin(ctx, "identity:create_domain") < 0)
        return -1;
    json_t *e = nb_idn_body_entity(ctx, req, "domain");
    if (!e)
        return -1;
    const char *name, *desc;
    bool enabled = true;
    if (nb_idn_opt_string(ctx, e, "name", 1, 64, false, &name) < 0 ||
        nb_idn_opt_string(ctx, e, "description", 0, 0, true, &desc) < 0 ||
        nb_idn_opt_bool(ctx, e, "enabled", &enabled) < 0)
        return -1;
    if (!name)
        return nb_error(ctx, 400, NB_IDN_E400, "'name' is a required property");
    _cleanup_free_ char *extra = nb_idn_extra_from(e, domain_attrs, NULL);
    char id[33];
    if (nb_idn_domain_create(ctx, name, desc, enabled, extra, id) < 0)
        return -1;
    _cleanup_json_ json_t *row = nb_idn_get_domain(ctx, id);
    return row ? nb_resp_json(resp, 201, json_pack("{s:o}", "domain", nb_idn_render_domain(row)))
               : -1;
}

static json_t *domain_or_404(struct nb_ctx *ctx, const char *id)
{
    json_t *row = nb_idn_get_domain(ctx, id);
    if (!row && !nb_ctx_failed(ctx))
        nb_error(ctx, 404, NB_IDN_E404, "Could not find domain: %s.", id);
    return row;
}

static int update_domain(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_idn_require_admin(ctx, "identity:update_domain") < 0)
        return -1;
    const char *id = nb_req_param(req, "domain_id");
    json_t *e = nb_idn_body_entity(ctx, req, "domain");
    if (!e)
        return -1;
    _cleanup_json_ json_t *row = domain_or_404(ctx, id);
    if (!row)
        return -1;
    const char *name, *desc;
    bool enabled = nb_json_int(row, "enabled", 1);
    if (nb_idn_opt_string(ctx, e, "name", 1, 64, false, &name) < 0 ||
        nb_idn_opt_string(ctx, e, "description", 0, 0, true, &desc) < 0 ||
        nb_idn_opt_bool(ctx, e, "enabled", &enabled) < 0)
        return -1;
    if (!desc)
        desc = json_object_get(e, "description") ? "" : nb_json_str(row, "description");
    struct nb_db *db = nb_idn_db();
    _cleanup_free_ char *extra = nb_idn_extra_from(e, domain_attrs, nb_json_str(row, "extra"));
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    if ((name && strcmp(name, nb_json_str(row, "name")) != 0 && name_taken(ctx, name) < 0) ||
        nb_db_exec(db, ctx,
                   "UPDATE project SET name = ?, description = ?, enabled = ?, extra = ? "
                   "WHERE id = ? AND is_domain = 1",
                   "ssbss", name ? name : nb_json_str(row, "name"), desc, enabled, extra, id) < 0) {
        nb_db_rollback(db);
        return -1;
    }
    if (nb_db_commit(db, ctx) < 0)
        return -1;
    NB_INFO(LOGGER, ctx, NULL, "Updated domain %s", id);
    json_decref(row);
    row = nb_idn_get_domain(ctx, id);
    return row ? nb_resp_json(resp, 200, json_pack("{s:o}", "domain", nb_idn_render_domain(row)))
               : -1;
}

/* Deletes everything that lives in domain id (inside the caller's
 * transaction): users and projects with their grants and tokens. */
static int delete_contents(struct nb_ctx *ctx, struct nb_db *db, const char *id)
{
    static const char *const sql[] = {
        "DELETE FROM token WHERE user_id IN (SELECT id FROM user WHERE domain_id = ?)",
        "DELETE FROM assignment WHERE actor_id IN (SELECT id FROM user WHERE domain_id = ?)",
        "DELETE FROM user WHERE domain_id = ?",
        "DELETE FROM token WHERE project_id IN "
        "(SELECT id FROM project WHERE domain_id = ? AND is_domain = 0)",
        "DELETE FROM assignment WHERE target_id IN "
        "(SELECT id FROM project WHERE domain_id = ? AND is_domain = 0)",
        "DELETE FROM project_tag WHERE project_id IN "
        "(SELECT id FROM project WHERE domain_id = ? AND is_domain = 0)",
        "DELETE FROM project WHERE domain_id = ? AND is_domain = 0",
        "DELETE FROM token WHERE domain_id = ?",
        "DELETE FROM assignment WHERE target_id = ?",
        "DELETE FROM project WHERE id = ? AND is_domain = 1",
    };
    for (size_t i = 0; i < sizeof(sql) / sizeof(sql[0]); i++)
        if (nb_db_exec(db, ctx, sql[i], "s", id) < 0)
            return -1;
    return 0;
}

int nb_idn_domain_delete(struct nb_ctx *ctx, const json_t *row)
{
    const char *id = nb_json_str(row, "id");
    if (strcmp(id, NB_IDN_DEFAULT_DOMAIN) == 0)
        return nb_error(ctx, 403, NB_IDN_E403, "Cannot delete the default domain %s.", id);
    if (nb_json_int(row, "enabled", 1))
        return nb_error(ctx, 403, NB_IDN_E403,
                        "Cannot delete a domain that is enabled, please disable it first.");
    struct nb_db *db = nb_idn_db();
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    if (delete_contents(ctx, db, id) < 0) {
        nb_db_rollback(db);
        return -1;
    }
    if (nb_db_commit(db, ctx) < 0)
        return -1;
    NB_INFO(LOGGER, ctx, NULL, "Deleted domain %s (%s) and everything in it", id,
            nb_json_str(row, "name"));
    return 0;
}

static int delete_domain(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_idn_require_admin(ctx, "identity:delete_domain") < 0)
        return -1;
    const char *id = nb_req_param(req, "domain_id");
    _cleanup_json_ json_t *row = domain_or_404(ctx, id);
    if (!row)
        return -1;
    if (nb_idn_domain_delete(ctx, row) < 0)
        return -1;
    return nb_resp_empty(resp, 204);
}

void nb_idn_domain_routes(void)
{
    nb_http_route("GET", "/identity/v3/domains", list_domains, 0);
    nb_http_route("POST", "/identity/v3/domains", create_domain, 0);
    nb_http_route("GET", "/identity/v3/domains/{domain_id}", show_domain, 0);
    nb_http_route("PATCH", "/identity/v3/domains/{domain_id}", update_domain, 0);
    nb_http_route("DELETE", "/identity/v3/domains/{domain_id}", delete_domain, 0);
}
