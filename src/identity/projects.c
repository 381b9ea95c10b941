/* projects.c - /v3/projects: list, create, show, update, delete.
 *
 * A project row is rendered as Keystone does: id, name, domain_id,
 * description, enabled, parent_id (the domain for a top-level project),
 * is_domain false, tags, options, links, plus any extra attributes the
 * creator sent. Writes need the admin role; a token may read its own project.
 * Deleting a project deletes its role assignments and the tokens scoped to
 * it, so nothing can act in it afterwards. */
#include "identity/identity_int.h"

#include "common/cleanup.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "db/db.h"

#include <string.h>

#define LOGGER "nubo.identity.projects"

static const char *const project_attrs[] = {"id",      "name",      "domain_id", "description",
                                            "enabled", "is_domain", "parent_id", "tags",
                                            "options", "links",     NULL};

json_t *nb_idn_render_project(struct nb_ctx *ctx, const json_t *row)
{
    const char *id = nb_json_str(row, "id");
    _cleanup_json_ json_t *tag_rows =
        nb_db_rows(nb_idn_db(), ctx,
                   "SELECT name FROM project_tag WHERE project_id = ? ORDER BY name", "s", id);
    if (!tag_rows)
        return NULL;
    json_t *tags = json_array();
    size_t i;
    json_t *t;
    json_array_foreach (tag_rows, i, t)
        json_array_append_new(tags, json_string(nb_json_str(t, "name")));
    /* A domain shown as a project (is_domain=true lists) has no domain and
     * no parent, as in Keystone. */
    bool is_domain = nb_json_int(row, "is_domain", 0);
    const char *domain_id = is_domain ? NULL : nb_json_str(row, "domain_id");
    const char *parent = nb_json_str(row, "parent_id");
    if (!parent)
        parent = domain_id;
    json_t *o =
        json_pack("{s:s, s:s, s:o, s:s, s:b, s:o, s:b, s:o, s:{}}", "id", id, "name",
                  nb_json_str(row, "name"), "domain_id",
                  domain_id ? json_string(domain_id) : json_null(), "description",
                  nb_json_str(row, "description"), "enabled", (int)nb_json_int(row, "enabled", 1),
                  "parent_id", parent ? json_string(parent) : json_null(), "is_domain", is_domain,
                  "tags", tags, "options");
    nb_idn_merge_extra(o, nb_json_str(row, "extra"));
    nb_idn_self_link(o, "projects", id);
    return o;
}

/* Renders rows (borrowed) into a new array; NULL on error. */
static json_t *render_rows(struct nb_ctx *ctx, const json_t *rows)
{
    json_t *items = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        json_t *o = nb_idn_render_project(ctx, r);
        if (!o) {
            json_decref(items);
            return NULL;
        }
        json_array_append_new(items, o);
    }
    return items;
}

/* Validates the "tags" of a request: absent -> *tags NULL. */
static int parse_tags(struct nb_ctx *ctx, const json_t *e, const json_t **tags)
{
    *tags = json_object_get(e, "tags");
    if (!*tags)
        return 0;
    if (!json_is_array(*tags) || json_array_size(*tags) > 80)
        return nb_error(ctx, 400, NB_IDN_E400,
                        "Invalid input for field 'tags': expected an array of at most 80 tags");
    size_t i;
    json_t *t;
    json_array_foreach (*tags, i, t) {
        const char *s = json_string_value(t);
        if (!s || !*s || strlen(s) > 255 || strpbrk(s, "/,"))
            return nb_error(ctx, 400, NB_IDN_E400,
                            "Invalid input for field 'tags': a tag is a string of 1 to 255 "
                            "characters without '/' or ','");
    }
    return 0;
}

static int store_tags(struct nb_ctx *ctx, const char *id, const json_t *tags)
{
    struct nb_db *db = nb_idn_db();
    if (nb_db_exec(db, ctx, "DELETE FROM project_tag WHERE project_id = ?", "s", id) < 0)
        return -1;
    size_t i;
    json_t *t;
    json_array_foreach (tags, i, t) {
        if (nb_db_int(db, ctx, 0,
                      "SELECT COUNT(*) FROM project_tag WHERE project_id = ? AND name = ?", "ss",
                      id, json_string_value(t)) > 0)
            continue;
        if (nb_db_exec(db, ctx, "INSERT INTO project_tag (project_id, name) VALUES (?, ?)", "ss",
                       id, json_string_value(t)) < 0)
            return -1;
    }
    return 0;
}

static int list_projects(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_idn_require_admin(ctx, "identity:list_projects") < 0)
        return -1;
    const char *name = nb_req_query(req, "name");
    const char *domain_id = nb_req_query(req, "domain_id");
    const char *parent_id = nb_req_query(req, "parent_id");
    long long en = nb_req_query(req, "enabled") ? nb_idn_query_true(req, "enabled") : -1;
    /* is_domain=true lists the domains, shaped as projects, as Keystone does. */
    long long is_domain = nb_idn_query_true(req, "is_domain") ? 1 : 0;
    _cleanup_json_ json_t *rows = nb_db_rows(
        nb_idn_db(), ctx,
        "SELECT * FROM project WHERE is_domain = ? AND (? IS NULL OR name = ?) "
        "AND (? IS NULL OR domain_id = ?) AND (? IS NULL OR COALESCE(parent_id, domain_id) = ?) "
        "AND (? < 0 OR enabled = ?) ORDER BY name",
        "issssssii", is_domain, name, name, domain_id, domain_id, parent_id, parent_id, en, en);
    if (!rows)
        return -1;
    json_t *items = render_rows(ctx, rows);
    return items ? nb_idn_collection(resp, req, "projects", items) : -1;
}

/* Fills domain_id and parent_id of a new project from its request. */
static int project_location(struct nb_ctx *ctx, const json_t *e, const char **domain_id,
                            const char **parent_id, json_t **hold)
{
    const char *did, *pid;
    if (nb_idn_opt_string(ctx, e, "domain_id", 1, 64, false, &did) < 0 ||
        nb_idn_opt_string(ctx, e, "parent_id", 1, 64, true, &pid) < 0)
        return -1;
    if (pid) {
        json_t *parent = nb_idn_get_project(ctx, pid);
        if (!parent && nb_ctx_failed(ctx))
            return -1;
        if (parent) {
            *hold = parent;
            if (did && strcmp(did, nb_json_str(parent, "domain_id")) != 0)
                return nb_error(ctx, 400, NB_IDN_E400,
                                "Cannot create project, since it specifies its domain_id %s, "
                                "but specifies a parent in a different domain (%s).",
                                did, nb_json_str(parent, "domain_id"));
            *domain_id = nb_json_str(parent, "domain_id");
            *parent_id = pid;
            return 0;
        }
        /* A parent that is a domain means a top-level project in it. */
        did = did ? did : pid;
        if (strcmp(did, pid) != 0)
            return nb_error(ctx, 404, NB_IDN_E404, "Could not find project: %s.", pid);
    }
    if (!did)
        did = *ctx->domain_id ? ctx->domain_id : NB_IDN_DEFAULT_DOMAIN;
    _cleanup_json_ json_t *d = nb_idn_get_domain(ctx, did);
    if (!d)
        return nb_ctx_failed(ctx)
                   ? -1
                   : nb_error(ctx, 404, NB_IDN_E404, "Could not find domain: %s.", did);
    *domain_id = did;
    *parent_id = NULL;
    return 0;
}

/* POST /v3/projects with is_domain true creates a domain, answered in the
 * shape of a project. */
static int create_domain_project(struct nb_ctx *ctx, struct nb_resp *resp, const json_t *e,
                                 const char *name, const char *description, bool enabled)
{
    const char *did;
    if (nb_idn_opt_string(ctx, e, "domain_id", 1, 64, true, &did) < 0)
        return -1;
    if (did || json_object_get(e, "parent_id"))
        return nb_error(ctx, 400, NB_IDN_E400,
                        "Invalid input: a project acting as a domain has no domain_id or "
                        "parent_id.");
    _cleanup_free_ char *extra = nb_idn_extra_from(e, project_attrs, NULL);
    char id[33];
    if (nb_idn_domain_create(ctx, name, description, enabled, extra, id) < 0)
        return -1;
    _cleanup_json_ json_t *row = nb_idn_get_domain(ctx, id);
    json_t *o = row ? nb_idn_render_project(ctx, row) : NULL;
    return o ? nb_resp_json(resp, 201, json_pack("{s:o}", "project", o)) : -1;
}

static int create_project(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_idn_require_admin(ctx, "identity:create_project") < 0)
        return -1;
    json_t *e = nb_idn_body_entity(ctx, req, "project");
    if (!e)
        return -1;
    const char *name, *description, *domain_id = NULL, *parent_id = NULL;
    const json_t *tags;
    bool enabled = true, is_domain = false;
    if (nb_idn_opt_string(ctx, e, "name", 1, 64, false, &name) < 0 ||
        nb_idn_opt_string(ctx, e, "description", 0, 0, true, &description) < 0 ||
        nb_idn_opt_bool(ctx, e, "enabled", &enabled) < 0 ||
        nb_idn_opt_bool(ctx, e, "is_domain", &is_domain) < 0 || parse_tags(ctx, e, &tags) < 0)
        return -1;
    if (!name)
        return nb_error(ctx, 400, NB_IDN_E400, "'name' is a required property");
    if (is_domain)
        return create_domain_project(ctx, resp, e, name, description, enabled);
    _cleanup_json_ json_t *hold = NULL;
    if (project_location(ctx, e, &domain_id, &parent_id, &hold) < 0)
        return -1;

    struct nb_db *db = nb_idn_db();
    char id[33], now[32];
    nb_idn_new_id(id);
    nb_now_iso_us(now);
    _cleanup_free_ char *extra = nb_idn_extra_from(e, project_attrs, NULL);
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    if (nb_idn_name_taken(ctx, "project", name, domain_id) < 0 ||
        nb_db_exec(db, ctx,
                   "INSERT INTO project (id, name, domain_id, description, enabled, is_domain, "
                   "parent_id, extra, created_at) VALUES (?, ?, ?, ?, ?, 0, ?, ?, ?)",
                   "ssssbsss", id, name, domain_id, description ? description : "", enabled,
                   parent_id, extra, now) < 0 ||
        (tags && store_tags(ctx, id, tags) < 0)) {
        nb_db_rollback(db);
        return -1;
    }
    if (nb_db_commit(db, ctx) < 0)
        return -1;
    NB_INFO(LOGGER, ctx, NULL, "Created project %s (%s) in domain %s", id, name, domain_id);
    _cleanup_json_ json_t *row = nb_idn_get_project(ctx, id);
    json_t *o = row ? nb_idn_render_project(ctx, row) : NULL;
    return o ? nb_resp_json(resp, 201, json_pack("{s:o}", "project", o)) : -1;
}

/* A project row, or a domain row: Keystone's project API also reaches the
 * domains (they are projects acting as domains). */
static json_t *project_or_404(struct nb_ctx *ctx, const char *id)
{
    json_t *row = nb_db_row(nb_idn_db(), ctx, "SELECT * FROM project WHERE id = ?", "s", id);
    if (!row && !nb_ctx_failed(ctx))
        nb_error(ctx, 404, NB_IDN_E404, "Could not find project: %s.", id);
    return row;
}

static int show_project(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *id = nb_req_param(req, "project_id");
    if (!ctx->is_admin && strcmp(ctx->project_id, id) != 0)
        return nb_idn_forbidden(ctx, "identity:get_project");
    _cleanup_json_ json_t *row = project_or_404(ctx, id);
    json_t *o = row ? nb_idn_render_project(ctx, row) : NULL;
    return o ? nb_resp_json(resp, 200, json_pack("{s:o}", "project", o)) : -1;
}

/* Refuses changes Keystone refuses: moving a project, making it a domain. */
static int check_immovable(struct nb_ctx *ctx, const json_t *e, const json_t *row)
{
    const char *did, *pid;
    bool is_domain = false;
    if (nb_idn_opt_string(ctx, e, "domain_id", 1, 64, false, &did) < 0 ||
        nb_idn_opt_string(ctx, e, "parent_id", 1, 64, true, &pid) < 0 ||
        nb_idn_opt_bool(ctx, e, "is_domain", &is_domain) < 0)
        return -1;
    if (did && strcmp(did, nb_json_str(row, "domain_id")) != 0)
        return nb_error(ctx, 400, NB_IDN_E400, "Update of `domain_id` is not allowed.");
    const char *cur_parent = nb_json_str(row, "parent_id");
    if (!cur_parent)
        cur_parent = nb_json_str(row, "domain_id");
    if (pid && strcmp(pid, cur_parent) != 0)
        return nb_error(ctx, 403, NB_IDN_E403, "Update of `parent_id` is not allowed.");
    if (is_domain)
        return nb_error(ctx, 400, NB_IDN_E400, "Update of `is_domain` is not allowed.");
    return 0;
}

static int update_project(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_idn_require_admin(ctx, "identity:update_project") < 0)
        return -1;
    const char *id = nb_req_param(req, "project_id");
    json_t *e = nb_idn_body_entity(ctx, req, "project");
    if (!e)
        return -1;
    _cleanup_json_ json_t *row = project_or_404(ctx, id);
    if (!row)
        return -1;
    const char *name, *description;
    const json_t *tags;
    bool enabled = nb_json_int(row, "enabled", 1);
    if (nb_idn_opt_string(ctx, e, "name", 1, 64, false, &name) < 0 ||
        nb_idn_opt_string(ctx, e, "description", 0, 0, true, &description) < 0 ||
        nb_idn_opt_bool(ctx, e, "enabled", &enabled) < 0 || parse_tags(ctx, e, &tags) < 0 ||
        check_immovable(ctx, e, row) < 0)
        return -1;
    if (json_is_null(json_object_get(e, "description")))
        description = "";
    struct nb_db *db = nb_idn_db();
    _cleanup_free_ char *extra = nb_idn_extra_from(e, project_attrs, nb_json_str(row, "extra"));
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    if ((name && strcmp(name, nb_json_str(row, "name")) != 0 &&
         nb_idn_name_taken(ctx, "project", name, nb_json_str(row, "domain_id")) < 0) ||
        nb_db_exec(db, ctx,
                   "UPDATE project SET name = ?, description = ?, enabled = ?, extra = ? "
                   "WHERE id = ?",
                   "ssbss", name ? name : nb_json_str(row, "name"),
                   description ? description : nb_json_str(row, "description"), enabled, extra,
                   id) < 0 ||
        (tags && store_tags(ctx, id, tags) < 0)) {
        nb_db_rollback(db);
        return -1;
    }
    if (nb_db_commit(db, ctx) < 0)
        return -1;
    NB_INFO(LOGGER, ctx, NULL, "Updated project %s", id);
    json_decref(row);
    row = project_or_404(ctx, id);
    json_t *o = row ? nb_idn_render_project(ctx, row) : NULL;
    return o ? nb_resp_json(resp, 200, json_pack("{s:o}", "project", o)) : -1;
}

static int delete_project(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_idn_require_admin(ctx, "identity:delete_project") < 0)
        return -1;
    const char *id = nb_req_param(req, "project_id");
    _cleanup_json_ json_t *row = project_or_404(ctx, id);
    if (!row)
        return -1;
    if (nb_json_int(row, "is_domain", 0))
        return nb_idn_domain_delete(ctx, row) < 0 ? -1 : nb_resp_empty(resp, 204);
    struct nb_db *db = nb_idn_db();
    long long children =
        nb_db_int(db, ctx, -1, "SELECT COUNT(*) FROM project WHERE parent_id = ?", "s", id);
    if (children < 0)
        return -1;
    if (children > 0)
        return nb_error(ctx, 403, NB_IDN_E403,
                        "Cannot delete the project %s since it is not a leaf in the hierarchy. "
                        "Use the cascade option if you want to delete a whole subtree.",
                        id);
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    if (nb_db_exec(db, ctx, "DELETE FROM assignment WHERE target_id = ? AND type = ?", "ss", id,
                   NB_IDN_TYPE_PROJECT) < 0 ||
        nb_db_exec(db, ctx, "DELETE FROM token WHERE project_id = ?", "s", id) < 0 ||
        nb_db_exec(db, ctx, "DELETE FROM project_tag WHERE project_id = ?", "s", id) < 0 ||
        nb_db_exec(db, ctx, "DELETE FROM project WHERE id = ? AND is_domain = 0", "s", id) < 0) {
        nb_db_rollback(db);
        return -1;
    }
    if (nb_db_commit(db, ctx) < 0)
        return -1;
    NB_INFO(LOGGER, ctx, NULL, "Deleted project %s (%s)", id, nb_json_str(row, "name"));
    return nb_resp_empty(resp, 204);
}

void nb_idn_project_routes(void)
{
    nb_http_route("GET", "/identity/v3/projects", list_projects, 0);
    nb_http_route("POST", "/identity/v3/projects", create_project, 0);
    nb_http_route("GET", "/identity/v3/projects/{project_id}", show_project, 0);
    nb_http_route("PATCH", "/identity/v3/projects/{project_id}", update_project, 0);
    nb_http_route("DELETE", "/identity/v3/projects/{project_id}", delete_project, 0);
}
