/* users.c - /v3/users: list, create, show, update, delete, change password,
 * and the projects a user has roles on.
 *
 * Passwords arrive in clear over the API, are hashed at once (password.c) and
 * never echoed back. Like Keystone, disabling a user or setting a new
 * password revokes every token of that user, and deleting a user deletes its
 * role assignments. Writes need the admin role; users may read themselves. */
#include "identity/identity_int.h"

#include "common/cleanup.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "db/db.h"

#include <string.h>

#define LOGGER "nubo.identity.users"

static const char *const user_attrs[] = {"id",
                                         "name",
                                         "domain_id",
                                         "password",
                                         "enabled",
                                         "default_project_id",
                                         "description",
                                         "email",
                                         "options",
                                         "links",
                                         "password_expires_at",
                                         "federated",
                                         NULL};

json_t *nb_idn_render_user(const json_t *row)
{
    const char *id = nb_json_str(row, "id");
    json_t *o =
        json_pack("{s:s, s:s, s:s, s:b, s:n, s:{}}", "id", id, "name", nb_json_str(row, "name"),
                  "domain_id", nb_json_str(row, "domain_id"), "enabled",
                  (int)nb_json_int(row, "enabled", 1), "password_expires_at", "options");
    /* Keystone returns these only when they were set. */
    if (nb_json_str(row, "default_project_id"))
        json_object_set_new(o, "default_project_id",
                            json_string(nb_json_str(row, "default_project_id")));
    const char *desc = nb_json_str(row, "description");
    if (desc && *desc)
        json_object_set_new(o, "description", json_string(desc));
    if (nb_json_str(row, "email"))
        json_object_set_new(o, "email", json_string(nb_json_str(row, "email")));
    nb_idn_merge_extra(o, nb_json_str(row, "extra"));
    nb_idn_self_link(o, "users", id);
    return o;
}

static json_t *user_or_404(struct nb_ctx *ctx, const char *id)
{
    json_t *row = nb_idn_get_user(ctx, id);
    if (!row && !nb_ctx_failed(ctx))
        nb_error(ctx, 404, NB_IDN_E404, "Could not find user: %s.", id);
    return row;
}

/* Checks a default_project_id names a project (not a domain). */
static int check_default_project(struct nb_ctx *ctx, const char *pid)
{
    if (!pid)
        return 0;
    _cleanup_json_ json_t *p = nb_idn_get_project(ctx, pid);
    if (p)
        return 0;
    if (nb_ctx_failed(ctx))
        return -1;
    _cleanup_json_ json_t *d = nb_idn_get_domain(ctx, pid);
    if (d)
        return nb_error(ctx, 400, NB_IDN_E400,
                        "Invalid input for field 'default_project_id': %s is a domain.", pid);
    return nb_ctx_failed(ctx) ? -1
                              : nb_error(ctx, 404, NB_IDN_E404, "Could not find project: %s.", pid);
}

/* Validates a password field: absent/null -> *hash NULL; else hashed. */
static int hash_password(struct nb_ctx *ctx, const json_t *e, bool *given, char **hash)
{
    const char *pw;
    *hash = NULL;
    *given = json_object_get(e, "password") != NULL;
    if (nb_idn_opt_string(ctx, e, "password", 0, NB_IDN_MAX_PASSWORD, true, &pw) < 0)
        return -1;
    if (!pw)
        return 0;
    *hash = nb_idn_password_hash(pw);
    if (!*hash)
        return nb_error(ctx, 500, "Internal Server Error", "Password hashing failed.");
    return 0;
}

static int list_users(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_idn_require_admin(ctx, "identity:list_users") < 0)
        return -1;
    const char *name = nb_req_query(req, "name");
    const char *domain_id = nb_req_query(req, "domain_id");
    long long en = nb_req_query(req, "enabled") ? nb_idn_query_true(req, "enabled") : -1;
    _cleanup_json_ json_t *rows =
        nb_db_rows(nb_idn_db(), ctx,
                   "SELECT * FROM user WHERE (? IS NULL OR name = ?) AND "
                   "(? IS NULL OR domain_id = ?) AND (? < 0 OR enabled = ?) ORDER BY name",
                   "ssssii", name, name, domain_id, domain_id, en, en);
    if (!rows)
        return -1;
    json_t *items = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r)
        json_array_append_new(items, nb_idn_render_user(r));
    return nb_idn_collection(resp, req, "users", items);
}

static int create_user(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_idn_require_admin(ctx, "identity:create_user") < 0)
        return -1;
    json_t *e = nb_idn_body_entity(ctx, req, "user");
    if (!e)
        return -1;
    const char *name, *domain_id, *pid, *desc, *email;
    bool enabled = true, pw_given;
    _cleanup_free_ char *hash = NULL;
    if (nb_idn_opt_string(ctx, e, "name", 1, 255, false, &name) < 0 ||
        nb_idn_opt_string(ctx, e, "domain_id", 1, 64, false, &domain_id) < 0 ||
        nb_idn_opt_string(ctx, e, "default_project_id", 1, 64, true, &pid) < 0 ||
        nb_idn_opt_string(ctx, e, "description", 0, 0, true, &desc) < 0 ||
        nb_idn_opt_string(ctx, e, "email", 0, 255, true, &email) < 0 ||
        nb_idn_opt_bool(ctx, e, "enabled", &enabled) < 0)
        return -1;
    if (!name)
        return nb_error(ctx, 400, NB_IDN_E400, "'name' is a required property");
    if (!domain_id)
        domain_id = *ctx->domain_id ? ctx->domain_id : NB_IDN_DEFAULT_DOMAIN;
    _cleanup_json_ json_t *d = nb_idn_get_domain(ctx, domain_id);
    if (!d)
        return nb_ctx_failed(ctx)
                   ? -1
                   : nb_error(ctx, 404, NB_IDN_E404, "Could not find domain: %s.", domain_id);
    if (check_default_project(ctx, pid) < 0 || hash_password(ctx, e, &pw_given, &hash) < 0)
        return -1;

    struct nb_db *db = nb_idn_db();
    char id[33], now[32];
    nb_idn_new_id(id);
    nb_now_iso_us(now);
    _cleanup_free_ char *extra = nb_idn_extra_from(e, user_attrs, NULL);
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    if (nb_idn_name_taken(ctx, "user", name, domain_id) < 0 ||
        nb_db_exec(db, ctx,
                   "INSERT INTO user (id, name, domain_id, password_hash, enabled, "
                   "default_project_id, description, email, extra, created_at) "
                   "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   "ssssbsssss", id, name, domain_id, hash, enabled, pid, desc ? desc : "", email,
                   extra, now) < 0) {
        nb_db_rollback(db);
        return -1;
    }
    if (nb_db_commit(db, ctx) < 0)
        return -1;
    NB_INFO(LOGGER, ctx, NULL, "Created user %s (%s) in domain %s", id, name, domain_id);
    _cleanup_json_ json_t *row = nb_idn_get_user(ctx, id);
    return row ? nb_resp_json(resp, 201, json_pack("{s:o}", "user", nb_idn_render_user(row))) : -1;
}

static int show_user(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *id = nb_req_param(req, "user_id");
    if (!ctx->is_admin && strcmp(ctx->user_id, id) != 0)
        return nb_idn_forbidden(ctx, "identity:get_user");
    _cleanup_json_ json_t *row = user_or_404(ctx, id);
    return row ? nb_resp_json(resp, 200, json_pack("{s:o}", "user", nb_idn_render_user(row))) : -1;
}

static int update_user(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_idn_require_admin(ctx, "identity:update_user") < 0)
        return -1;
    const char *id = nb_req_param(req, "user_id");
    json_t *e = nb_idn_body_entity(ctx, req, "user");
    if (!e)
        return -1;
    _cleanup_json_ json_t *row = user_or_404(ctx, id);
    if (!row)
        return -1;
    const char *name, *domain_id, *pid, *desc, *email;
    bool enabled = nb_json_int(row, "enabled", 1), pw_given;
    _cleanup_free_ char *hash = NULL;
    if (nb_idn_opt_string(ctx, e, "name", 1, 255, false, &name) < 0 ||
        nb_idn_opt_string(ctx, e, "domain_id", 1, 64, false, &domain_id) < 0 ||
        nb_idn_opt_string(ctx, e, "default_project_id", 1, 64, true, &pid) < 0 ||
        nb_idn_opt_string(ctx, e, "description", 0, 0, true, &desc) < 0 ||
        nb_idn_opt_string(ctx, e, "email", 0, 255, true, &email) < 0 ||
        nb_idn_opt_bool(ctx, e, "enabled", &enabled) < 0 || check_default_project(ctx, pid) < 0 ||
        hash_password(ctx, e, &pw_given, &hash) < 0)
        return -1;
    if (domain_id && strcmp(domain_id, nb_json_str(row, "domain_id")) != 0)
        return nb_error(ctx, 400, NB_IDN_E400, "Update of `domain_id` is not allowed.");
    /* Absent keys keep their value; an explicit null clears it. */
    if (!pid && !json_object_get(e, "default_project_id"))
        pid = nb_json_str(row, "default_project_id");
    if (!desc)
        desc = json_object_get(e, "description") ? "" : nb_json_str(row, "description");
    if (!email && !json_object_get(e, "email"))
        email = nb_json_str(row, "email");
    bool revoke = pw_given || (!enabled && nb_json_int(row, "enabled", 1));

    struct nb_db *db = nb_idn_db();
    _cleanup_free_ char *extra = nb_idn_extra_from(e, user_attrs, nb_json_str(row, "extra"));
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    if ((name && strcmp(name, nb_json_str(row, "name")) != 0 &&
         nb_idn_name_taken(ctx, "user", name, nb_json_str(row, "domain_id")) < 0) ||
        nb_db_exec(db, ctx,
                   "UPDATE user SET name = ?, enabled = ?, default_project_id = ?, "
                   "description = ?, email = ?, extra = ? WHERE id = ?",
                   "sbsssss", name ? name : nb_json_str(row, "name"), enabled, pid, desc, email,
                   extra, id) < 0 ||
        (pw_given && nb_db_exec(db, ctx, "UPDATE user SET password_hash = ? WHERE id = ?", "ss",
                                hash, id) < 0) ||
        (revoke && nb_idn_tokens_revoke_user(ctx, id) < 0)) {
        nb_db_rollback(db);
        return -1;
    }
    if (nb_db_commit(db, ctx) < 0)
        return -1;
    NB_INFO(LOGGER, ctx, NULL, "Updated user %s%s", id, revoke ? "; revoked its tokens" : "");
    json_decref(row);
    row = nb_idn_get_user(ctx, id);
    return row ? nb_resp_json(resp, 200, json_pack("{s:o}", "user", nb_idn_render_user(row))) : -1;
}

static int delete_user(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_idn_require_admin(ctx, "identity:delete_user") < 0)
        return -1;
    const char *id = nb_req_param(req, "user_id");
    _cleanup_json_ json_t *row = user_or_404(ctx, id);
    if (!row)
        return -1;
    struct nb_db *db = nb_idn_db();
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    if (nb_db_exec(db, ctx, "DELETE FROM assignment WHERE actor_id = ?", "s", id) < 0 ||
        nb_idn_tokens_revoke_user(ctx, id) < 0 ||
        nb_db_exec(db, ctx, "DELETE FROM user WHERE id = ?", "s", id) < 0) {
        nb_db_rollback(db);
        return -1;
    }
    if (nb_db_commit(db, ctx) < 0)
        return -1;
    NB_INFO(LOGGER, ctx, NULL, "Deleted user %s (%s)", id, nb_json_str(row, "name"));
    return nb_resp_empty(resp, 204);
}

static int change_password(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *id = nb_req_param(req, "user_id");
    json_t *e = nb_idn_body_entity(ctx, req, "user");
    if (!e)
        return -1;
    const char *orig, *pw;
    if (nb_idn_opt_string(ctx, e, "original_password", 0, NB_IDN_MAX_PASSWORD, false, &orig) < 0 ||
        nb_idn_opt_string(ctx, e, "password", 0, NB_IDN_MAX_PASSWORD, false, &pw) < 0)
        return -1;
    if (!orig || !pw)
        return nb_error(ctx, 400, NB_IDN_E400, "'%s' is a required property",
                        !orig ? "original_password" : "password");
    _cleanup_json_ json_t *row = nb_idn_get_user(ctx, id);
    if (!row && nb_ctx_failed(ctx))
        return -1;
    if (!row || !nb_idn_password_verify(orig, nb_json_str(row, "password_hash")))
        return nb_error(ctx, 401, NB_IDN_E401, NB_IDN_UNAUTH_MSG);
    _cleanup_free_ char *hash = nb_idn_password_hash(pw);
    if (!hash)
        return nb_error(ctx, 500, "Internal Server Error", "Password hashing failed.");
    struct nb_db *db = nb_idn_db();
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    if (nb_db_exec(db, ctx, "UPDATE user SET password_hash = ? WHERE id = ?", "ss", hash, id) < 0 ||
        nb_idn_tokens_revoke_user(ctx, id) < 0) {
        nb_db_rollback(db);
        return -1;
    }
    if (nb_db_commit(db, ctx) < 0)
        return -1;
    NB_INFO(LOGGER, ctx, NULL, "User %s changed its password; its tokens are revoked", id);
    return nb_resp_empty(resp, 204);
}

static int user_projects(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *id = nb_req_param(req, "user_id");
    if (!ctx->is_admin && strcmp(ctx->user_id, id) != 0)
        return nb_idn_forbidden(ctx, "identity:list_user_projects");
    _cleanup_json_ json_t *user = user_or_404(ctx, id);
    if (!user)
        return -1;
    _cleanup_json_ json_t *rows =
        nb_db_rows(nb_idn_db(), ctx,
                   "SELECT DISTINCT p.* FROM project p JOIN assignment a ON a.target_id = p.id "
                   "WHERE a.type = ? AND a.actor_id = ? AND p.is_domain = 0 ORDER BY p.name",
                   "ss", NB_IDN_TYPE_PROJECT, id);
    if (!rows)
        return -1;
    json_t *items = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        json_t *o = nb_idn_render_project(ctx, r);
        if (!o) {
            json_decref(items);
            return -1;
        }
        json_array_append_new(items, o);
    }
    return nb_idn_collection(resp, req, "projects", items);
}

void nb_idn_user_routes(void)
{
    nb_http_route("GET", "/identity/v3/users", list_users, 0);
    nb_http_route("POST", "/identity/v3/users", create_user, 0);
    nb_http_route("GET", "/identity/v3/users/{user_id}", show_user, 0);
    nb_http_route("PATCH", "/identity/v3/users/{user_id}", update_user, 0);
    nb_http_route("DELETE", "/identity/v3/users/{user_id}", delete_user, 0);
    nb_http_route("POST", "/identity/v3/users/{user_id}/password", change_password, 0);
    nb_http_route("GET", "/identity/v3/users/{user_id}/projects", user_projects, 0);
}
