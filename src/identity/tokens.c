/* tokens.c - token issue, validation and revocation.
 *
 * A token is 32 random bytes in hex, handed to the client once in
 * X-Subject-Token; table token keeps only its SHA-256, the user, the scope
 * (a project, a domain or nothing), the issue and expiry times (whole epoch
 * seconds, so a token validated later renders exactly as when it was issued)
 * and the audit ids Keystone shows. Validation re-reads user, scope and role
 * assignments each time, so disabling a user or project, or removing the last
 * role, invalidates its tokens at once, as Keystone's revocation events do.
 * Expired rows are deleted whenever a token is issued. */
#include "identity/identity.h"
#include "identity/identity_int.h"

#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "db/db.h"

#include <math.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define LOGGER "nubo.identity.tokens"

void nb_idn_token_hash(const char *token, char out[NB_IDN_HEX_LEN])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    if (EVP_Digest(token, strlen(token), md, &n, EVP_sha256(), NULL) != 1 || n != 32)
        abort(); /* SHA-256 cannot fail short of a broken libcrypto */
    for (unsigned int i = 0; i < n; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 15];
    }
    out[64] = '\0';
}

char *nb_idn_time_fmt(double t, char buf[32])
{
    time_t secs = (time_t)t;
    struct tm tm;
    gmtime_r(&secs, &tm);
    strftime(buf, 32, "%Y-%m-%dT%H:%M:%S.000000Z", &tm);
    return buf;
}

/* Keystone's audit ids: 16 random bytes, URL-safe base64 without padding. */
static void new_audit_id(char out[32])
{
    unsigned char raw[16];
    unsigned char b64[32];
    if (RAND_bytes(raw, sizeof(raw)) != 1)
        abort();
    int n = EVP_EncodeBlock(b64, raw, sizeof(raw));
    int j = 0;
    for (int i = 0; i < n && b64[i] != '='; i++)
        out[j++] = b64[i] == '+' ? '-' : b64[i] == '/' ? '_' : (char)b64[i];
    out[j] = '\0';
}

int nb_idn_token_issue(struct nb_ctx *ctx, const struct nb_idn_scope *scope, double expires_at,
                       const json_t *methods, const char *parent_audit,
                       char token_out[NB_IDN_HEX_LEN])
{
    struct nb_db *db = nb_idn_db();
    double now = floor(nb_time_now());
    if (expires_at <= 0)
        expires_at = now + (double)nb_conf_int("token", "expiration", 3600);
    char audit[32], hash[NB_IDN_HEX_LEN];
    new_audit_id(audit);
    nb_random_hex(token_out, NB_IDN_TOKEN_BYTES);
    nb_idn_token_hash(token_out, hash);

    if (nb_db_exec(db, ctx, "DELETE FROM token WHERE expires_at <= ?", "d", now) < 0)
        return -1;
    if (nb_db_exec(
            db, ctx,
            "INSERT INTO token (id_hash, user_id, project_id, domain_id, issued_at, "
            "expires_at, audit_id, audit_chain_id, methods) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            "ssssddssj", hash, scope->user_id, scope->project_id, scope->domain_id, now, expires_at,
            audit, parent_audit, (json_t *)methods) < 0)
        return -1;
    return 0;
}

/* nb_identity_issue_admin_token once the module has a database. */
static int issue_admin_token(struct nb_env *env, struct nb_ctx *ctx, int ttl,
                             char token_out[NB_IDN_HEX_LEN])
{
    _cleanup_json_ json_t *user =
        nb_db_row(env->db, ctx, "SELECT id FROM user WHERE name = 'admin' AND domain_id = ?", "s",
                  NB_IDN_DEFAULT_DOMAIN);
    if (!user)
        return nb_ctx_failed(ctx) ? -1
                                  : nb_error(ctx, 404, NULL,
                                             "Could not find user: admin (domain default); was "
                                             "the cloud bootstrapped?");
    _cleanup_free_ char *project = nb_identity_admin_project_id(env->db, ctx);
    if (!project)
        return nb_ctx_failed(ctx) ? -1
                                  : nb_error(ctx, 404, NULL,
                                             "Could not find project: admin (domain default); "
                                             "was the cloud bootstrapped?");
    const struct nb_idn_scope scope = {.user_id = nb_json_str(user, "id"), .project_id = project};
    _cleanup_json_ json_t *methods = json_pack("[s]", "external");
    char token[NB_IDN_HEX_LEN];
    if (nb_idn_token_issue(ctx, &scope, floor(nb_time_now()) + ttl, methods, NULL, token) < 0)
        return -1;
    NB_INFO(LOGGER, ctx, NULL, "Issued a %d s admin token on project admin for a host tool", ttl);
    memcpy(token_out, token, NB_IDN_HEX_LEN);
    return 0;
}

int nb_identity_issue_admin_token(struct nb_env *env, struct nb_ctx *ctx, int ttl,
                                  char token_out[65])
{
    if (!env || !env->db)
        return nb_error(ctx, 500, NULL, "No database to issue a token in.");
    if (ttl < 1 || ttl > 3600)
        return nb_error(ctx, 400, NULL, "Token lifetime %d s is not between 1 and 3600.", ttl);
    /* The token functions work on the module's database; a tool that did not
     * start the identity service lends it env for this call only. */
    bool lent = !nb_idn_db();
    if (lent)
        nb_idn_set_env(env);
    int rc = issue_admin_token(env, ctx, ttl, token_out);
    if (lent)
        nb_idn_set_env(NULL);
    return rc;
}

/* Adds tok["project"] (or tok["domain"]) and tok["roles"]. Returns 1 when
 * the scope is live, 0 when the token must be refused, -1 on db error. */
static int load_scope(struct nb_ctx *ctx, json_t *tok)
{
    struct nb_db *db = nb_idn_db();
    const char *user_id = nb_json_str(tok, "user_id");
    const char *project_id = nb_json_str(tok, "project_id");
    const char *domain_id = nb_json_str(tok, "domain_id");
    const char *type = NULL, *target = NULL;

    if (project_id) {
        json_t *p = nb_db_row(db, ctx,
                              "SELECT p.id AS id, p.name AS name, p.enabled AS enabled, "
                              "p.domain_id AS domain_id, d.name AS domain_name, "
                              "d.enabled AS domain_enabled FROM project p "
                              "JOIN project d ON d.id = p.domain_id "
                              "WHERE p.id = ? AND p.is_domain = 0",
                              "s", project_id);
        if (!p)
            return ctx && nb_ctx_failed(ctx) ? -1 : 0;
        json_object_set_new(tok, "project", p);
        if (!nb_json_int(p, "enabled", 0) || !nb_json_int(p, "domain_enabled", 0))
            return 0;
        type = NB_IDN_TYPE_PROJECT;
        target = project_id;
    } else if (domain_id) {
        json_t *d = nb_db_row(
            db, ctx, "SELECT id, name, enabled FROM project WHERE id = ? AND is_domain = 1", "s",
            domain_id);
        if (!d)
            return ctx && nb_ctx_failed(ctx) ? -1 : 0;
        json_object_set_new(tok, "domain", d);
        if (!nb_json_int(d, "enabled", 0))
            return 0;
        type = NB_IDN_TYPE_DOMAIN;
        target = domain_id;
    } else {
        json_object_set_new(tok, "roles", json_array());
        return 1;
    }
    json_t *roles = nb_idn_effective_roles(ctx, type, user_id, target);
    if (!roles)
        return -1;
    json_object_set_new(tok, "roles", roles);
    /* A scoped token whose user lost every role there is revoked. */
    return json_array_size(roles) > 0;
}

json_t *nb_idn_token_load(struct nb_ctx *ctx, const char *token, double now)
{
    if (!token || !*token)
        return NULL;
    char hash[NB_IDN_HEX_LEN];
    nb_idn_token_hash(token, hash);
    _cleanup_json_ json_t *tok = nb_db_row(
        nb_idn_db(), ctx,
        "SELECT t.user_id AS user_id, t.project_id AS project_id, t.domain_id AS domain_id, "
        "t.issued_at AS issued_at, t.expires_at AS expires_at, t.audit_id AS audit_id, "
        "t.audit_chain_id AS audit_chain_id, t.methods AS methods, u.name AS user_name, "
        "u.enabled AS user_enabled, u.domain_id AS user_domain_id, "
        "d.name AS user_domain_name, d.enabled AS user_domain_enabled "
        "FROM token t JOIN user u ON u.id = t.user_id "
        "JOIN project d ON d.id = u.domain_id AND d.is_domain = 1 "
        "WHERE t.id_hash = ? AND t.expires_at > ?",
        "sd", hash, now);
    if (!tok)
        return NULL;
    if (!nb_json_int(tok, "user_enabled", 0) || !nb_json_int(tok, "user_domain_enabled", 0))
        return NULL;
    json_t *methods = nb_json_parse(nb_json_str(tok, "methods"));
    json_object_set_new(tok, "methods", json_is_array(methods) ? methods : json_array());
    if (methods && !json_is_array(methods))
        json_decref(methods);
    if (load_scope(ctx, tok) != 1)
        return NULL;
    return NB_STEAL(&tok);
}

void nb_idn_token_to_ctx(struct nb_ctx *ctx, const json_t *tok)
{
    const json_t *p = json_object_get(tok, "project");
    const json_t *d = json_object_get(tok, "domain");
    nb_strlcpy(ctx->user_id, nb_json_str(tok, "user_id"), sizeof(ctx->user_id));
    nb_strlcpy(ctx->user_name, nb_json_str(tok, "user_name"), sizeof(ctx->user_name));
    ctx->project_id[0] = ctx->project_name[0] = '\0';
    /* domain_id: the project's domain for a project-scoped token, the scope
     * for a domain-scoped one, the user's own domain when unscoped. */
    if (p) {
        nb_strlcpy(ctx->project_id, nb_json_str(p, "id"), sizeof(ctx->project_id));
        nb_strlcpy(ctx->project_name, nb_json_str(p, "name"), sizeof(ctx->project_name));
        nb_strlcpy(ctx->domain_id, nb_json_str(p, "domain_id"), sizeof(ctx->domain_id));
    } else if (d) {
        nb_strlcpy(ctx->domain_id, nb_json_str(d, "id"), sizeof(ctx->domain_id));
    } else {
        nb_strlcpy(ctx->domain_id, nb_json_str(tok, "user_domain_id"), sizeof(ctx->domain_id));
    }
    nb_idn_roles_to_ctx(ctx, json_object_get(tok, "roles"));
    char buf[32];
    nb_strlcpy(ctx->token_expires,
               nb_time_iso(json_number_value(json_object_get(tok, "expires_at")), buf),
               sizeof(ctx->token_expires));
}

int nb_idn_authenticate(struct nb_ctx *ctx, const char *token)
{
    json_t *tok = nb_idn_token_load(ctx, token, nb_time_now());
    if (!tok) {
        if (nb_ctx_failed(ctx)) {
            NB_ERROR(LOGGER, ctx, NULL, "token validation failed: %s", nb_ctx_message(ctx));
            return -1;
        }
        return nb_error(ctx, 401, NB_IDN_E401, NB_IDN_UNAUTH_MSG);
    }
    nb_idn_token_to_ctx(ctx, tok);
    json_decref(tok);
    return 0;
}

int nb_idn_token_revoke(struct nb_ctx *ctx, const char *token)
{
    char hash[NB_IDN_HEX_LEN];
    nb_idn_token_hash(token, hash);
    int n = nb_db_exec(nb_idn_db(), ctx, "DELETE FROM token WHERE id_hash = ?", "s", hash);
    return n < 0 ? -1 : n > 0;
}

int nb_idn_tokens_revoke_user(struct nb_ctx *ctx, const char *user_id)
{
    return nb_db_exec(nb_idn_db(), ctx, "DELETE FROM token WHERE user_id = ?", "s", user_id) < 0
               ? -1
               : 0;
}

json_t *nb_idn_token_body(const json_t *tok, bool with_catalog)
{
    char issued[32], expires[32];
    nb_idn_time_fmt(json_number_value(json_object_get(tok, "issued_at")), issued);
    nb_idn_time_fmt(json_number_value(json_object_get(tok, "expires_at")), expires);

    json_t *audit = json_array();
    json_array_append_new(audit, json_string(nb_json_str(tok, "audit_id")));
    if (nb_json_str(tok, "audit_chain_id"))
        json_array_append_new(audit, json_string(nb_json_str(tok, "audit_chain_id")));

    json_t *t = json_pack("{s:O, s:{s:{s:s, s:s}, s:s, s:s, s:n}, s:o, s:s, s:s}", "methods",
                          json_object_get(tok, "methods"), "user", "domain", "id",
                          nb_json_str(tok, "user_domain_id"), "name",
                          nb_json_str(tok, "user_domain_name"), "id", nb_json_str(tok, "user_id"),
                          "name", nb_json_str(tok, "user_name"), "password_expires_at", "audit_ids",
                          audit, "expires_at", expires, "issued_at", issued);
    const json_t *p = json_object_get(tok, "project");
    const json_t *d = json_object_get(tok, "domain");
    const char *catalog_project = NULL;
    if (p) {
        json_object_set_new(t, "project",
                            json_pack("{s:{s:s, s:s}, s:s, s:s}", "domain", "id",
                                      nb_json_str(p, "domain_id"), "name",
                                      nb_json_str(p, "domain_name"), "id", nb_json_str(p, "id"),
                                      "name", nb_json_str(p, "name")));
        json_object_set_new(t, "is_domain", json_false());
        catalog_project = nb_json_str(p, "id");
    } else if (d) {
        json_object_set_new(
            t, "domain",
            json_pack("{s:s, s:s}", "id", nb_json_str(d, "id"), "name", nb_json_str(d, "name")));
    }
    if (p || d) {
        json_object_set(t, "roles", json_object_get(tok, "roles"));
        if (with_catalog)
            json_object_set_new(t, "catalog", nb_idn_catalog(catalog_project));
    }
    return json_pack("{s:o}", "token", t);
}
