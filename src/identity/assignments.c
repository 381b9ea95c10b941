/* assignments.c - role grants on projects and domains, and
 * GET /v3/role_assignments.
 *
 * A grant is a row (type, actor_id = user, target_id = project or domain,
 * role_id) of table assignment. The grant API is Keystone's:
 * PUT/HEAD/GET/DELETE /v3/{projects|domains}/{t}/users/{u}/roles/{r} and
 * GET …/users/{u}/roles. /v3/role_assignments lists direct grants, or with
 * ?effective also the roles they imply (admin -> member -> reader), each
 * implied entry linking to its prior role as Keystone does. Grants and
 * listings need the admin role. */
#include "identity/identity_int.h"

#include "common/cleanup.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "db/db.h"

#include <string.h>

#define LOGGER "nubo.identity.assignments"

/* Which kind of target a grant URL names. */
struct target_kind {
    const char *type;       /* NB_IDN_TYPE_PROJECT / NB_IDN_TYPE_DOMAIN */
    const char *param;      /* "project_id" / "domain_id" */
    const char *collection; /* "projects" / "domains" */
    const char *noun;       /* "project" / "domain" */
};

static const struct target_kind project_kind = {NB_IDN_TYPE_PROJECT, "project_id", "projects",
                                                "project"};
static const struct target_kind domain_kind = {NB_IDN_TYPE_DOMAIN, "domain_id", "domains",
                                               "domain"};

/* Checks the target, user and (if role_id) role of a grant URL exist. */
static int check_grant_parts(struct nb_ctx *ctx, const struct target_kind *k, const char *target,
                             const char *user_id, const char *role_id)
{
    _cleanup_json_ json_t *t =
        k == &project_kind ? nb_idn_get_project(ctx, target) : nb_idn_get_domain(ctx, target);
    if (!t)
        return nb_ctx_failed(ctx)
                   ? -1
                   : nb_error(ctx, 404, NB_IDN_E404, "Could not find %s: %s.", k->noun, target);
    _cleanup_json_ json_t *u = nb_idn_get_user(ctx, user_id);
    if (!u)
        return nb_ctx_failed(ctx)
                   ? -1
                   : nb_error(ctx, 404, NB_IDN_E404, "Could not find user: %s.", user_id);
    if (!role_id)
        return 0;
    _cleanup_json_ json_t *r = nb_idn_get_role(ctx, role_id);
    if (!r)
        return nb_ctx_failed(ctx)
                   ? -1
                   : nb_error(ctx, 404, NB_IDN_E404, "Could not find role: %s.", role_id);
    return 0;
}

static long long grant_exists(struct nb_ctx *ctx, const struct target_kind *k, const char *target,
                              const char *user_id, const char *role_id)
{
    return nb_db_int(nb_idn_db(), ctx, -1,
                     "SELECT COUNT(*) FROM assignment WHERE type = ? AND actor_id = ? AND "
                     "target_id = ? AND role_id = ?",
                     "ssss", k->type, user_id, target, role_id);
}

static int not_found_grant(struct nb_ctx *ctx, const char *target, const char *user_id,
                           const char *role_id)
{
    return nb_error(ctx, 404, NB_IDN_E404,
                    "Could not find role assignment with role: %s, user or group: %s, project, "
                    "domain, or system: %s.",
                    role_id, user_id, target);
}

static int grant(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp,
                 const struct target_kind *k)
{
    if (nb_idn_require_admin(ctx, "identity:create_grant") < 0)
        return -1;
    const char *target = nb_req_param(req, k->param), *user_id = nb_req_param(req, "user_id"),
               *role_id = nb_req_param(req, "role_id");
    if (check_grant_parts(ctx, k, target, user_id, role_id) < 0)
        return -1;
    struct nb_db *db = nb_idn_db();
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    long long n = grant_exists(ctx, k, target, user_id, role_id);
    if (n < 0 ||
        (n == 0 && nb_db_exec(db, ctx,
                              "INSERT INTO assignment (type, actor_id, target_id, role_id) "
                              "VALUES (?, ?, ?, ?)",
                              "ssss", k->type, user_id, target, role_id) < 0)) {
        nb_db_rollback(db);
        return -1;
    }
    if (nb_db_commit(db, ctx) < 0)
        return -1;
    NB_INFO(LOGGER, ctx, NULL, "Granted role %s to user %s on %s %s", role_id, user_id, k->noun,
            target);
    return nb_resp_empty(resp, 204);
}

static int check_grant(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp,
                       const struct target_kind *k)
{
    if (nb_idn_require_admin(ctx, "identity:check_grant") < 0)
        return -1;
    const char *target = nb_req_param(req, k->param), *user_id = nb_req_param(req, "user_id"),
               *role_id = nb_req_param(req, "role_id");
    if (check_grant_parts(ctx, k, target, user_id, role_id) < 0)
        return -1;
    long long n = grant_exists(ctx, k, target, user_id, role_id);
    if (n < 0)
        return -1;
    return n ? nb_resp_empty(resp, 204) : not_found_grant(ctx, target, user_id, role_id);
}

static int revoke(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp,
                  const struct target_kind *k)
{
    if (nb_idn_require_admin(ctx, "identity:revoke_grant") < 0)
        return -1;
    const char *target = nb_req_param(req, k->param), *user_id = nb_req_param(req, "user_id"),
               *role_id = nb_req_param(req, "role_id");
    if (check_grant_parts(ctx, k, target, user_id, role_id) < 0)
        return -1;
    int n = nb_db_exec(nb_idn_db(), ctx,
                       "DELETE FROM assignment WHERE type = ? AND actor_id = ? AND target_id = ? "
                       "AND role_id = ?",
                       "ssss", k->type, user_id, target, role_id);
    if (n < 0)
        return -1;
    if (n == 0)
        return not_found_grant(ctx, target, user_id, role_id);
    NB_INFO(LOGGER, ctx, NULL, "Revoked role %s from user %s on %s %s", role_id, user_id, k->noun,
            target);
    return nb_resp_empty(resp, 204);
}

static int list_grants(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp,
                       const struct target_kind *k)
{
    if (nb_idn_require_admin(ctx, "identity:list_grants") < 0)
        return -1;
    const char *target = nb_req_param(req, k->param), *user_id = nb_req_param(req, "user_id");
    if (check_grant_parts(ctx, k, target, user_id, NULL) < 0)
        return -1;
    _cleanup_json_ json_t *rows =
        nb_db_rows(nb_idn_db(), ctx,
                   "SELECT r.* FROM assignment a JOIN role r ON r.id = a.role_id "
                   "WHERE a.type = ? AND a.actor_id = ? AND a.target_id = ? ORDER BY r.name",
                   "sss", k->type, user_id, target);
    if (!rows)
        return -1;
    json_t *items = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r)
        json_array_append_new(items, nb_idn_render_role(r));
    return nb_idn_collection(resp, req, "roles", items);
}

static int grant_project(struct nb_ctx *c, struct nb_req *q, struct nb_resp *r)
{
    return grant(c, q, r, &project_kind);
}
static int check_project(struct nb_ctx *c, struct nb_req *q, struct nb_resp *r)
{
    return check_grant(c, q, r, &project_kind);
}
static int revoke_project(struct nb_ctx *c, struct nb_req *q, struct nb_resp *r)
{
    return revoke(c, q, r, &project_kind);
}
static int list_project(struct nb_ctx *c, struct nb_req *q, struct nb_resp *r)
{
    return list_grants(c, q, r, &project_kind);
}
static int grant_domain(struct nb_ctx *c, struct nb_req *q, struct nb_resp *r)
{
    return grant(c, q, r, &domain_kind);
}
static int check_domain(struct nb_ctx *c, struct nb_req *q, struct nb_resp *r)
{
    return check_grant(c, q, r, &domain_kind);
}
static int revoke_domain(struct nb_ctx *c, struct nb_req *q, struct nb_resp *r)
{
    return revoke(c, q, r, &domain_kind);
}
static int list_domain(struct nb_ctx *c, struct nb_req *q, struct nb_resp *r)
{
    return list_grants(c, q, r, &domain_kind);
}

/* ---- GET /v3/role_assignments ------------------------------------------ */

/* Formats one assignment row as Keystone does. implied_from: the prior
 * role's id when this entry is implied (effective mode), else NULL. */
static json_t *format_assignment(const json_t *a, const char *role_id, const char *role_name,
                                 const char *implied_from, bool names)
{
    bool is_project = strcmp(nb_json_str(a, "type"), NB_IDN_TYPE_PROJECT) == 0;
    const char *target = nb_json_str(a, "target_id"), *user_id = nb_json_str(a, "actor_id");
    json_t *t = json_pack("{s:s}", "id", target);
    json_t *u = json_pack("{s:s}", "id", user_id);
    json_t *r = json_pack("{s:s}", "id", role_id);
    if (names) {
        json_object_set_new(t, "name", json_string(nb_json_str(a, "target_name")));
        if (is_project)
            json_object_set_new(t, "domain",
                                json_pack("{s:s?, s:s?}", "id", nb_json_str(a, "target_domain_id"),
                                          "name", nb_json_str(a, "target_domain_name")));
        json_object_set_new(u, "name", json_string(nb_json_str(a, "user_name")));
        json_object_set_new(u, "domain",
                            json_pack("{s:s?, s:s?}", "id", nb_json_str(a, "user_domain_id"),
                                      "name", nb_json_str(a, "user_domain_name")));
        json_object_set_new(r, "name", json_string(role_name));
    }
    json_t *links =
        json_pack("{s:o}", "assignment",
                  nb_idn_url("/%s/%s/users/%s/roles/%s", is_project ? "projects" : "domains",
                             target, user_id, implied_from ? implied_from : role_id));
    if (implied_from)
        json_object_set_new(links, "prior_role",
                            nb_idn_url("/prior_role/%s/implies/%s", role_id, implied_from));
    return json_pack("{s:{s:o}, s:o, s:o, s:o}", "scope", is_project ? "project" : "domain", t,
                     "user", u, "role", r, "links", links);
}

static bool seen(json_t *set, const json_t *a, const char *role_id)
{
    _cleanup_free_ char *key =
        nb_strdup_printf("%s|%s|%s|%s", nb_json_str(a, "type"), nb_json_str(a, "actor_id"),
                         nb_json_str(a, "target_id"), role_id);
    if (json_object_get(set, key))
        return true;
    json_object_set_new(set, key, json_true());
    return false;
}

/* Adds the roles implied by row a (effective mode), skipping any the same
 * user already holds on the same target. roles_by_name: name -> role row. */
static void add_implied(json_t *out, json_t *set, const json_t *a, const json_t *roles_by_name,
                        const char *role_filter, bool names)
{
    const char *prior_id = nb_json_str(a, "role_id");
    for (const char *name = nb_idn_role_implies(nb_json_str(a, "role_name")); name;
         name = nb_idn_role_implies(name)) {
        const json_t *role = json_object_get(roles_by_name, name);
        if (!role)
            break;
        const char *rid = nb_json_str(role, "id");
        if (seen(set, a, rid))
            continue;
        if (!role_filter || strcmp(role_filter, rid) == 0)
            json_array_append_new(out, format_assignment(a, rid, name, prior_id, names));
    }
}

static int list_role_assignments(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_idn_require_admin(ctx, "identity:list_role_assignments") < 0)
        return -1;
    const char *user_id = nb_req_query(req, "user.id");
    const char *project_id = nb_req_query(req, "scope.project.id");
    const char *domain_id = nb_req_query(req, "scope.domain.id");
    const char *role_id = nb_req_query(req, "role.id");
    bool names = nb_idn_query_true(req, "include_names");
    bool effective = nb_idn_query_true(req, "effective");
    if (project_id && domain_id)
        return nb_error(ctx, 400, NB_IDN_E400, "Specify a domain or project, not both");
    if (user_id && nb_req_query(req, "group.id"))
        return nb_error(ctx, 400, NB_IDN_E400, "Specify a user or group, not both");
    /* nubo has no groups and no system scope: such filters match nothing. */
    if (nb_req_query(req, "group.id") || nb_req_query(req, "scope.system"))
        return nb_idn_collection(resp, req, "role_assignments", json_array());

    struct nb_db *db = nb_idn_db();
    _cleanup_json_ json_t *rows = nb_db_rows(
        db, ctx,
        "SELECT a.type AS type, a.actor_id AS actor_id, a.target_id AS target_id, "
        "a.role_id AS role_id, r.name AS role_name, u.name AS user_name, "
        "u.domain_id AS user_domain_id, ud.name AS user_domain_name, t.name AS target_name, "
        "t.domain_id AS target_domain_id, td.name AS target_domain_name "
        "FROM assignment a JOIN role r ON r.id = a.role_id JOIN user u ON u.id = a.actor_id "
        "LEFT JOIN project ud ON ud.id = u.domain_id JOIN project t ON t.id = a.target_id "
        "LEFT JOIN project td ON td.id = t.domain_id "
        "WHERE (? IS NULL OR a.actor_id = ?) "
        "AND (? IS NULL OR (a.type = 'UserProject' AND a.target_id = ?)) "
        "AND (? IS NULL OR (a.type = 'UserDomain' AND a.target_id = ?)) "
        "ORDER BY a.type, a.target_id, a.actor_id, r.name",
        "ssssss", user_id, user_id, project_id, project_id, domain_id, domain_id);
    if (!rows)
        return -1;
    _cleanup_json_ json_t *roles_by_name = json_object();
    if (effective) {
        _cleanup_json_ json_t *roles = nb_db_rows(db, ctx, "SELECT id, name FROM role", "");
        if (!roles)
            return -1;
        size_t i;
        json_t *r;
        json_array_foreach (roles, i, r)
            json_object_set(roles_by_name, nb_json_str(r, "name"), r);
    }
    _cleanup_json_ json_t *set = json_object();
    json_t *out = json_array();
    size_t i;
    json_t *a;
    /* Direct grants first, so an implied role a user also holds directly is
     * listed once, as the direct grant. */
    json_array_foreach (rows, i, a) {
        seen(set, a, nb_json_str(a, "role_id"));
        if (!role_id || strcmp(role_id, nb_json_str(a, "role_id")) == 0)
            json_array_append_new(out, format_assignment(a, nb_json_str(a, "role_id"),
                                                         nb_json_str(a, "role_name"), NULL, names));
    }
    if (effective)
        json_array_foreach (rows, i, a)
            add_implied(out, set, a, roles_by_name, role_id, names);
    return nb_idn_collection(resp, req, "role_assignments", out);
}

#define PROJECT_GRANTS "/identity/v3/projects/{project_id}/users/{user_id}/roles"
#define DOMAIN_GRANTS "/identity/v3/domains/{domain_id}/users/{user_id}/roles"

void nb_idn_assignment_routes(void)
{
    nb_http_route("PUT", PROJECT_GRANTS "/{role_id}", grant_project, 0);
    nb_http_route("HEAD", PROJECT_GRANTS "/{role_id}", check_project, 0);
    nb_http_route("GET", PROJECT_GRANTS "/{role_id}", check_project, 0);
    nb_http_route("DELETE", PROJECT_GRANTS "/{role_id}", revoke_project, 0);
    nb_http_route("GET", PROJECT_GRANTS, list_project, 0);
    nb_http_route("PUT", DOMAIN_GRANTS "/{role_id}", grant_domain, 0);
    nb_http_route("HEAD", DOMAIN_GRANTS "/{role_id}", check_domain, 0);
    nb_http_route("GET", DOMAIN_GRANTS "/{role_id}", check_domain, 0);
    nb_http_route("DELETE", DOMAIN_GRANTS "/{role_id}", revoke_domain, 0);
    nb_http_route("GET", DOMAIN_GRANTS, list_domain, 0);
    nb_http_route("GET", "/identity/v3/role_assignments", list_role_assignments, 0);
}
