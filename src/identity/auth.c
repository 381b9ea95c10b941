/* auth.c - /v3/auth: issuing, validating and revoking tokens, and what a
 * token may see (its catalog, projects, domains).
 *
 * POST /v3/auth/tokens takes Keystone's body:
 *   {"auth": {"identity": {"methods": ["password"], "password": {"user":
 *     {"id"} | {"name", "domain": {"id"} | {"name"}}, "password"}}}
 *     | {"methods": ["token"], "token": {"id"}},
 *    "scope": {"project": {"id"} | {"name", "domain"}} | {"domain": …}
 *             | "unscoped" | absent}}
 * Without a scope the user's default project is used when the user has a role
 * there, as Keystone does. Every authentication failure is the same 401, so
 * the answer does not tell which part was wrong; the log says. */
#include "identity/identity_int.h"

#include "common/cleanup.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "db/db.h"

#include <string.h>

#define LOGGER "nubo.identity.auth"

/* A yescrypt hash of a password nobody has (same cost as real ones). */
#define TIMING_DUMMY_HASH                                                                          \
    "$y$j9T$JSu4t5S6AeQB6NuWQPthv.$bvkHFDE0a2z3lXoPIsD.KG5XMqiurEF6BqL5pXBlpu8"

/* Refuses an authentication: logs why (never the secret) and records 401. */
static int auth_failed(struct nb_ctx *ctx, const char *why)
{
    NB_WARN(LOGGER, ctx, NULL, "Authorization failed: %s", why);
    return nb_error(ctx, 401, NB_IDN_E401, NB_IDN_UNAUTH_MSG);
}

static bool has_method(const json_t *methods, const char *m)
{
    size_t i;
    json_t *v;
    json_array_foreach (methods, i, v) {
        if (json_is_string(v) && strcmp(json_string_value(v), m) == 0)
            return true;
    }
    return false;
}

/* The password method: returns the user row (new ref) or NULL after 4xx. */
static json_t *password_user(struct nb_ctx *ctx, const json_t *identity)
{
    const json_t *u = json_object_get(json_object_get(identity, "password"), "user");
    if (!json_is_object(u)) {
        nb_error(ctx, 400, NB_IDN_E400,
                 "Expecting to find user in password. The server could not comply with the "
                 "request since it is either malformed or otherwise incorrect. The client is "
                 "assumed to be in error.");
        return NULL;
    }
    const char *password = nb_json_str(u, "password");
    if (!password) {
        nb_error(ctx, 400, NB_IDN_E400,
                 "Expecting to find password in user. The server could not comply with the "
                 "request since it is either malformed or otherwise incorrect. The client is "
                 "assumed to be in error.");
        return NULL;
    }
    _cleanup_json_ json_t *user = NULL;
    const char *id = nb_json_str(u, "id"), *name = nb_json_str(u, "name");
    if (id) {
        user = nb_idn_get_user(ctx, id);
    } else if (name) {
        const json_t *dref = json_object_get(u, "domain");
        if (!json_is_object(dref)) {
            nb_error(ctx, 400, NB_IDN_E400,
                     "Expecting to find domain in user. The server could not comply with the "
                     "request since it is either malformed or otherwise incorrect. The client "
                     "is assumed to be in error.");
            return NULL;
        }
        _cleanup_json_ json_t *d = nb_idn_find_domain(ctx, dref);
        if (d)
            user =
                nb_db_row(nb_idn_db(), ctx, "SELECT * FROM user WHERE name = ? AND domain_id = ?",
                          "ss", name, nb_json_str(d, "id"));
    } else {
        nb_error(ctx, 400, NB_IDN_E400,
                 "Expecting to find id or name in user. The server could not comply with the "
                 "request since it is either malformed or otherwise incorrect. The client is "
                 "assumed to be in error.");
        return NULL;
    }
    if (nb_ctx_failed(ctx))
        return NULL;
    if (!user) {
        /* Spend the time a real check takes, so that timing does not tell
         * unknown users from wrong passwords. */
        nb_idn_password_verify(password, TIMING_DUMMY_HASH);
        auth_failed(ctx, id ? "unknown user id" : "unknown user name");
        return NULL;
    }
    if (strlen(password) > NB_IDN_MAX_PASSWORD ||
        !nb_idn_password_verify(password, nb_json_str(user, "password_hash"))) {
        NB_WARN(LOGGER, ctx, NULL, "Authorization failed for user %s: wrong password",
                nb_json_str(user, "id"));
        nb_error(ctx, 401, NB_IDN_E401, NB_IDN_UNAUTH_MSG);
        return NULL;
    }
    if (!nb_json_int(user, "enabled", 0)) {
        auth_failed(ctx, "user is disabled");
        return NULL;
    }
    _cleanup_json_ json_t *ud = nb_idn_get_domain(ctx, nb_json_str(user, "domain_id"));
    if (!ud || !nb_json_int(ud, "enabled", 0)) {
        if (!nb_ctx_failed(ctx))
            auth_failed(ctx, "the user's domain is disabled");
        return NULL;
    }
    return NB_STEAL(&user);
}

/* Resolves the requested scope into sc (strings borrowed from req or from
 * *hold). Returns 0, or -1 after a 4xx. */
static int resolve_scope(struct nb_ctx *ctx, const json_t *scope, const json_t *user,
                         struct nb_idn_scope *sc, json_t **hold)
{
    struct nb_db *db = nb_idn_db();
    const char *user_id = nb_json_str(user, "id");
    sc->user_id = user_id;
    if (json_is_string(scope) && strcmp(json_string_value(scope), "unscoped") == 0)
        return 0;
    if (!scope) {
        /* Keystone scopes to the default project when the user may use it. */
        const char *def = nb_json_str(user, "default_project_id");
        if (!def)
            return 0;
        _cleanup_json_ json_t *p = nb_idn_get_project(ctx, def);
        _cleanup_json_ json_t *roles =
            p ? nb_idn_effective_roles(ctx, NB_IDN_TYPE_PROJECT, user_id, def) : NULL;
        if (nb_ctx_failed(ctx))
            return -1;
        if (p && nb_json_int(p, "enabled", 0) && json_array_size(roles) > 0) {
            *hold = NB_STEAL(&p);
            sc->project_id = nb_json_str(*hold, "id");
        }
        return 0;
    }
    if (!json_is_object(scope))
        return nb_error(ctx, 400, NB_IDN_E400, "Invalid input for field 'scope'.");
    const json_t *pref = json_object_get(scope, "project");
    const json_t *dref = json_object_get(scope, "domain");
    if (pref) {
        const char *id = nb_json_str(pref, "id"), *name = nb_json_str(pref, "name");
        json_t *p = NULL;
        if (id) {
            p = nb_idn_get_project(ctx, id);
        } else if (name) {
            _cleanup_json_ json_t *d = nb_idn_find_domain(ctx, json_object_get(pref, "domain"));
            if (!d && !nb_ctx_failed(ctx))
                return auth_failed(ctx, "project scope: unknown domain");
            if (d)
                p = nb_db_row(db, ctx,
                              "SELECT * FROM project WHERE name = ? AND domain_id = ? "
                              "AND is_domain = 0",
                              "ss", name, nb_json_str(d, "id"));
        } else {
            return nb_error(ctx, 400, NB_IDN_E400,
                            "Expecting to find id or name in project. The server could not "
                            "comply with the request since it is either malformed or otherwise "
                            "incorrect. The client is assumed to be in error.");
        }
        if (nb_ctx_failed(ctx))
            return -1;
        if (!p)
            return auth_failed(ctx, "project scope: unknown project");
        *hold = p;
        sc->project_id = nb_json_str(p, "id");
        return 0;
    }
    if (dref) {
        json_t *d = nb_idn_find_domain(ctx, dref);
        if (nb_ctx_failed(ctx))
            return -1;
        if (!d)
            return auth_failed(ctx, "domain scope: unknown domain");
        *hold = d;
        sc->domain_id = nb_json_str(d, "id");
        return 0;
    }
    if (json_object_get(scope, "system"))
        return auth_failed(ctx, "system scope is not supported");
    return nb_error(ctx, 400, NB_IDN_E400, "Invalid input for field 'scope'.");
}

/* Issues the token and answers 201 with it. */
static int issue_and_respond(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp,
                             const struct nb_idn_scope *sc, double expires_at,
                             const json_t *methods, const char *parent_audit)
{
    char token[NB_IDN_HEX_LEN];
    if (nb_idn_token_issue(ctx, sc, expires_at, methods, parent_audit, token) < 0)
        return -1;
    _cleanup_json_ json_t *tok = nb_idn_token_load(ctx, token, nb_time_now());
    if (!tok) {
        if (nb_ctx_failed(ctx))
            return -1;
        nb_idn_token_revoke(ctx, token);
        if (sc->project_id)
            return auth_failed(ctx, "no role on the project, or it is disabled");
        return auth_failed(ctx, "no role on the domain, or it is disabled");
    }
    NB_INFO(LOGGER, ctx, NULL, "Issued token for user %s (project %s, domain %s)", sc->user_id,
            sc->project_id ? sc->project_id : "-", sc->domain_id ? sc->domain_id : "-");
    nb_resp_header(resp, "X-Subject-Token", token);
    return nb_resp_json(resp, 201, nb_idn_token_body(tok, !nb_idn_query_true(req, "nocatalog")));
}

static int create_token(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    json_t *body = nb_req_json_object(ctx, req);
    if (!body)
        return -1;
    const json_t *auth = json_object_get(body, "auth");
    const json_t *identity = json_object_get(auth, "identity");
    const json_t *methods = json_object_get(identity, "methods");
    if (!json_is_object(identity) || !json_is_array(methods) || json_array_size(methods) == 0)
        return nb_error(ctx, 400, NB_IDN_E400,
                        "Expecting to find identity in auth. The server could not comply with "
                        "the request since it is either malformed or otherwise incorrect. The "
                        "client is assumed to be in error.");
    const json_t *scope = json_object_get(auth, "scope");
    _cleanup_json_ json_t *user = NULL;
    _cleanup_json_ json_t *hold = NULL;
    _cleanup_json_ json_t *out_methods = json_array();
    struct nb_idn_scope sc = {0};

    if (has_method(methods, "password")) {
        user = password_user(ctx, identity);
        if (!user)
            return -1;
        json_array_append_new(out_methods, json_string("password"));
        if (resolve_scope(ctx, scope, user, &sc, &hold) < 0)
            return -1;
        return issue_and_respond(ctx, req, resp, &sc, 0, out_methods, NULL);
    }
    if (has_method(methods, "token")) {
        const char *id = nb_json_str(json_object_get(identity, "token"), "id");
        if (!id)
            return nb_error(ctx, 400, NB_IDN_E400,
                            "Expecting to find id in token. The server could not comply with "
                            "the request since it is either malformed or otherwise incorrect. "
                            "The client is assumed to be in error.");
        _cleanup_json_ json_t *parent = nb_idn_token_load(ctx, id, nb_time_now());
        if (!parent)
            return nb_ctx_failed(ctx) ? -1 : auth_failed(ctx, "token method: invalid token");
        user = nb_idn_get_user(ctx, nb_json_str(parent, "user_id"));
        if (!user)
            return nb_ctx_failed(ctx) ? -1 : auth_failed(ctx, "token method: user gone");
        /* Keystone keeps the methods that made the first token, after "token". */
        json_array_append_new(out_methods, json_string("token"));
        size_t i;
        json_t *m;
        json_array_foreach (json_object_get(parent, "methods"), i, m) {
            if (!has_method(out_methods, json_string_value(m)))
                json_array_append(out_methods, m);
        }
        if (resolve_scope(ctx, scope, user, &sc, &hold) < 0)
            return -1;
        const char *chain = nb_json_str(parent, "audit_chain_id");
        /* A re-scoped token never outlives the token it came from. */
        return issue_and_respond(ctx, req, resp, &sc,
                                 json_number_value(json_object_get(parent, "expires_at")),
                                 out_methods, chain ? chain : nb_json_str(parent, "audit_id"));
    }
    return auth_failed(ctx, "unsupported authentication method");
}

/* Loads the X-Subject-Token of req for a caller allowed to see it: admins,
 * and the token's own user. NULL after 404/403. */
static json_t *subject_token(struct nb_ctx *ctx, struct nb_req *req, const char *action)
{
    const char *subject = nb_req_header(req, "X-Subject-Token");
    json_t *tok = subject ? nb_idn_token_load(ctx, subject, nb_time_now()) : NULL;
    if (!tok) {
        if (!nb_ctx_failed(ctx))
            nb_error(ctx, 404, NB_IDN_E404, "Failed to validate token");
        return NULL;
    }
    if (!ctx->is_admin && strcmp(ctx->user_id, nb_json_str(tok, "user_id")) != 0) {
        json_decref(tok);
        nb_idn_forbidden(ctx, action);
        return NULL;
    }
    return tok;
}

static int validate_token(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    _cleanup_json_ json_t *tok = subject_token(ctx, req, "identity:validate_token");
    if (!tok)
        return -1;
    nb_resp_header(resp, "X-Subject-Token", nb_req_header(req, "X-Subject-Token"));
    return nb_resp_json(resp, 200, nb_idn_token_body(tok, !nb_idn_query_true(req, "nocatalog")));
}

static int check_token(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    _cleanup_json_ json_t *tok = subject_token(ctx, req, "identity:check_token");
    if (!tok)
        return -1;
    nb_resp_header(resp, "X-Subject-Token", nb_req_header(req, "X-Subject-Token"));
    return nb_resp_empty(resp, 200);
}

static int revoke_token(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    _cleanup_json_ json_t *tok = subject_token(ctx, req, "identity:revoke_token");
    if (!tok)
        return -1;
    if (nb_idn_token_revoke(ctx, nb_req_header(req, "X-Subject-Token")) < 0)
        return -1;
    NB_INFO(LOGGER, ctx, NULL, "Revoked token of user %s (audit id %s)",
            nb_json_str(tok, "user_id"), nb_json_str(tok, "audit_id"));
    return nb_resp_empty(resp, 204);
}

static int auth_catalog(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    /* The context does not say whether the caller's token is domain-scoped,
     * so look at the token itself. */
    _cleanup_json_ json_t *tok =
        nb_idn_token_load(ctx, nb_req_header(req, "X-Auth-Token"), nb_time_now());
    if (!tok)
        return nb_ctx_failed(ctx) ? -1 : nb_error(ctx, 401, NB_IDN_E401, NB_IDN_UNAUTH_MSG);
    const json_t *p = json_object_get(tok, "project");
    if (!p && !json_object_get(tok, "domain"))
        return nb_error(ctx, 403, NB_IDN_E403,
                        "A project-scoped token is required to produce a service catalog.");
    return nb_idn_collection(resp, req, "catalog", nb_idn_catalog(nb_json_str(p, "id")));
}

static int auth_projects(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    _cleanup_json_ json_t *rows =
        nb_db_rows(nb_idn_db(), ctx,
                   "SELECT DISTINCT p.* FROM project p JOIN assignment a ON a.target_id = p.id "
                   "WHERE a.type = ? AND a.actor_id = ? AND p.is_domain = 0 AND p.enabled = 1 "
                   "ORDER BY p.name",
                   "ss", NB_IDN_TYPE_PROJECT, ctx->user_id);
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

static int auth_domains(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    _cleanup_json_ json_t *rows =
        nb_db_rows(nb_idn_db(), ctx,
                   "SELECT DISTINCT d.* FROM project d JOIN assignment a ON a.target_id = d.id "
                   "WHERE a.type = ? AND a.actor_id = ? AND d.is_domain = 1 AND d.enabled = 1 "
                   "ORDER BY d.name",
                   "ss", NB_IDN_TYPE_DOMAIN, ctx->user_id);
    if (!rows)
        return -1;
    json_t *items = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r)
        json_array_append_new(items, nb_idn_render_domain(r));
    return nb_idn_collection(resp, req, "domains", items);
}

void nb_idn_auth_routes(void)
{
    nb_http_route("POST", "/identity/v3/auth/tokens", create_token, NB_ROUTE_NO_AUTH);
    nb_http_route("GET", "/identity/v3/auth/tokens", validate_token, 0);
    nb_http_route("HEAD", "/identity/v3/auth/tokens", check_token, 0);
    nb_http_route("DELETE", "/identity/v3/auth/tokens", revoke_token, 0);
    nb_http_route("GET", "/identity/v3/auth/catalog", auth_catalog, 0);
    nb_http_route("GET", "/identity/v3/auth/projects", auth_projects, 0);
    nb_http_route("GET", "/identity/v3/auth/domains", auth_domains, 0);
}
