/* identity_int.h - what the files of the identity module share.
 *
 * The public API is identity.h (init, bootstrap). Everything here is private
 * to src/identity/ and to its unit tests: password hashing, token issue and
 * validation, role implication, the catalog, and the small helpers that give
 * every Keystone response the same shape (links, collections, errors).
 *
 * Storage follows Keystone: domains are rows of table project with
 * is_domain = 1 and domain_id = NB_IDN_ROOT_DOMAIN; role assignments are rows
 * of table assignment with type "UserProject" or "UserDomain"; tokens are
 * random and only their SHA-256 is stored. */
#ifndef NB_IDENTITY_INT_H
#define NB_IDENTITY_INT_H

#include "common/ctx.h"
#include "common/env.h"
#include "common/http.h"
#include "identity/state.h"
#include <jansson.h>
#include <stdbool.h>

struct nb_db;

/* Keystone's parent of every domain row in table project. */
#define NB_IDN_ROOT_DOMAIN "<<keystone.domain.root>>"
#define NB_IDN_DEFAULT_DOMAIN "default"
#define NB_IDN_TYPE_PROJECT "UserProject"
#define NB_IDN_TYPE_DOMAIN "UserDomain"

/* Keystone error titles: the identity error body is
 * {"error": {"code", "title", "message"}} with title = the status's reason
 * phrase (http_service.c); they name the error nb_error records. */
#define NB_IDN_E400 "Bad Request"
#define NB_IDN_E401 "Unauthorized"
#define NB_IDN_E403 "Forbidden"
#define NB_IDN_E404 "Not Found"
#define NB_IDN_E409 "Conflict"
#define NB_IDN_UNAUTH_MSG "The request you have made requires authentication."

/* Keystone caps passwords at 4096 characters ([identity] max_password_length). */
#define NB_IDN_MAX_PASSWORD 4096

/* ---- password.c --------------------------------------------------------- */

/* Hashes password with yescrypt and a fresh salt. Returns the crypt(3)
 * string (malloc'd, caller frees), or NULL if libcrypt fails. */
char *nb_idn_password_hash(const char *password);
/* True if password matches the crypt(3) string hash. NULL/empty hash (a user
 * without password) never matches. Comparison is constant time. */
bool nb_idn_password_verify(const char *password, const char *hash);

/* ---- implied.c: role implication --------------------------------------- */

enum {
    NB_IDN_ROLE_ADMIN = 1 << 0,
    NB_IDN_ROLE_MEMBER = 1 << 1,
    NB_IDN_ROLE_READER = 1 << 2,
};
/* The bit of a built-in role name, 0 for other roles. */
unsigned nb_idn_role_bit(const char *name);
/* Keystone's default implications: admin implies member, member implies
 * reader. Returns bits with every implied role added. */
unsigned nb_idn_role_closure(unsigned bits);
/* The name a role implies directly ("admin" -> "member", "member" ->
 * "reader"), or NULL. Borrowed static string. */
const char *nb_idn_role_implies(const char *name);
/* Effective roles of user_id on target_id (type NB_IDN_TYPE_PROJECT or
 * NB_IDN_TYPE_DOMAIN): direct assignments plus the roles they imply, as a
 * new array of {"id", "name"}, direct roles first. NULL on database error
 * (recorded on ctx). */
json_t *nb_idn_effective_roles(struct nb_ctx *ctx, const char *type, const char *user_id,
                               const char *target_id);
/* Fills ctx->is_admin/is_member/is_reader from an array of {"name"}. */
void nb_idn_roles_to_ctx(struct nb_ctx *ctx, const json_t *roles);

/* ---- tokens.c ----------------------------------------------------------- */

#define NB_IDN_TOKEN_BYTES 32
#define NB_IDN_HEX_LEN 65 /* 64 hex chars + NUL */

/* Writes the lower-case hex SHA-256 of token into out. */
void nb_idn_token_hash(const char *token, char out[NB_IDN_HEX_LEN]);

/* What a token is scoped to; at most one of project_id/domain_id is set. */
struct nb_idn_scope {
    const char *user_id;
    const char *project_id; /* NULL unless project-scoped */
    const char *domain_id;  /* NULL unless domain-scoped */
};

/* Issues a token for scope: stores its hash with expiry expires_at (epoch
 * seconds; <= 0 means now + [token] expiration), methods (array of strings,
 * borrowed) and the audit chain (parent_audit: the audit id of the token this
 * one was made from, or NULL). Also deletes expired tokens. Writes the token
 * into token_out. 0, or -1 after recording the error on ctx. */
int nb_idn_token_issue(struct nb_ctx *ctx, const struct nb_idn_scope *scope, double expires_at,
                       const json_t *methods, const char *parent_audit,
                       char token_out[NB_IDN_HEX_LEN]);

/* Loads a live token: not expired, user (and its domain) enabled, the scope
 * target enabled and, when scoped, with at least one role. Returns a new
 * object with the token columns, "user" {id, name, domain_id, domain_name},
 * "project"/"domain" when scoped, and "roles" (effective, [{id, name}]), or
 * NULL when the token is not valid (nothing recorded on ctx) or on database
 * error (recorded: check nb_ctx_status(ctx)). now is the current epoch time. */
json_t *nb_idn_token_load(struct nb_ctx *ctx, const char *token, double now);

/* Fills ctx's identity from a token loaded by nb_idn_token_load. */
void nb_idn_token_to_ctx(struct nb_ctx *ctx, const json_t *tok);

/* The auth hook: 0 and ctx filled, or -1 after a 401 on ctx. */
int nb_idn_authenticate(struct nb_ctx *ctx, const char *token);
/* The HTTP layer's reject hook (http_service.c): answers a request whose
 * token is missing or failed the check as keystonemiddleware does on every
 * service: 401 in the identity shape plus WWW-Authenticate (another error
 * the check recorded, a 500, is answered as recorded). */
void nb_idn_reject(struct nb_ctx *ctx, struct nb_resp *resp);

/* Deletes the token. 1 if it existed, 0 if not, -1 on database error. */
int nb_idn_token_revoke(struct nb_ctx *ctx, const char *token);
/* Deletes every token of user_id (disable, password change, delete). 0/-1. */
int nb_idn_tokens_revoke_user(struct nb_ctx *ctx, const char *user_id);

/* Formats epoch seconds the way Keystone prints token times:
 * "2026-11-29T18:00:00.000000Z". buf holds 32 bytes. Returns buf. */
char *nb_idn_time_fmt(double t, char buf[32]);

/* Renders the {"token": {...}} body of a token loaded by nb_idn_token_load.
 * The catalog is included for scoped tokens unless with_catalog is false.
 * New reference, never NULL. */
json_t *nb_idn_token_body(const json_t *tok, bool with_catalog);

/* ---- catalog.c ---------------------------------------------------------- */

/* The v3 catalog as a token carries it; project_id NULL (domain-scoped)
 * leaves out endpoints whose URL needs a project. New reference. */
json_t *nb_idn_catalog(const char *project_id);
void nb_idn_catalog_routes(void);

/* ---- render.c: shared response shaping --------------------------------- */

/* base URL + "/identity/v3" + printf(fmt, ...), as a new JSON string. */
json_t *nb_idn_url(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Sets obj["links"] = {"self": <base>/identity/v3/<collection>/<id>}. */
void nb_idn_self_link(json_t *obj, const char *collection, const char *id);
/* Wraps items (stolen) as {key: items, "links": {"self", "previous", "next"}}
 * and answers 200 with it. Returns 0. */
int nb_idn_collection(struct nb_resp *resp, const struct nb_req *req, const char *key,
                      json_t *items);
/* Keystone's query booleans: present with no value or anything but
 * "0"/"false" is true. */
bool nb_idn_query_true(const struct nb_req *req, const char *key);
/* Records Keystone's 403 for a policy failure on action (e.g.
 * "identity:create_project"). Returns -1. */
int nb_idn_forbidden(struct nb_ctx *ctx, const char *action);
/* 0 if ctx has the admin role, else nb_idn_forbidden(action). */
int nb_idn_require_admin(struct nb_ctx *ctx, const char *action);
/* The entity object body[key] of a create/update request, or NULL after a
 * 400 on ctx. Borrowed. */
json_t *nb_idn_body_entity(struct nb_ctx *ctx, struct nb_req *req, const char *key);
/* Validates an optional string field: absent -> *out = NULL, 0; a string of
 * min..max chars (max 0: unlimited) -> *out = it, 0; else 400 and -1. With
 * nullable, JSON null is accepted as absent. */
int nb_idn_opt_string(struct nb_ctx *ctx, const json_t *obj, const char *key, size_t min,
                      size_t max, bool nullable, const char **out);
/* Validates an optional boolean: absent -> *out unchanged, 0; else 400, -1. */
int nb_idn_opt_bool(struct nb_ctx *ctx, const json_t *obj, const char *key, bool *out);
/* A new 32-hex-character id, like Keystone's uuid4().hex. */
void nb_idn_new_id(char out[33]);
/* Copies into dst every key of the JSON-object text extra (a column). */
void nb_idn_merge_extra(json_t *dst, const char *extra);
/* Builds the JSON text of the keys of body that are not in known (a
 * NULL-terminated list), merged over the JSON-object text old (may be NULL).
 * Keystone keeps such keys ("extra") and returns them. Caller frees. */
char *nb_idn_extra_from(const json_t *body, const char *const *known, const char *old);

/* ---- lookups shared by several resources (lookup.c) -------------------- */

/* Rows by id; NULL if absent (nothing recorded) or on database error
 * (recorded). New references. Projects exclude domains and vice versa. */
json_t *nb_idn_get_project(struct nb_ctx *ctx, const char *id);
json_t *nb_idn_get_domain(struct nb_ctx *ctx, const char *id);
json_t *nb_idn_get_user(struct nb_ctx *ctx, const char *id);
json_t *nb_idn_get_role(struct nb_ctx *ctx, const char *id);
/* Resolves a {"id"} or {"name"} domain reference to a domain row, NULL if
 * not found or on error (check nb_ctx_status(ctx)). */
json_t *nb_idn_find_domain(struct nb_ctx *ctx, const json_t *ref);

/* Creates a domain (domains.c): 409 if the name is taken. extra is the JSON
 * text of extra attributes (NULL: none). id receives its id. 0/-1. */
int nb_idn_domain_create(struct nb_ctx *ctx, const char *name, const char *description,
                         bool enabled, const char *extra, char id[33]);

/* Deletes the (disabled, non-default) domain row and everything in it:
 * its projects and users with their grants and tokens. 0, or -1 (403 when
 * refused). */
int nb_idn_domain_delete(struct nb_ctx *ctx, const json_t *row);

/* ---- renderers ---------------------------------------------------------- */

json_t *nb_idn_render_project(struct nb_ctx *ctx, const json_t *row);
json_t *nb_idn_render_domain(const json_t *row);
json_t *nb_idn_render_user(const json_t *row);
json_t *nb_idn_render_role(const json_t *row);

/* ---- route registration, one per file ---------------------------------- */

void nb_idn_auth_routes(void);
void nb_idn_domain_routes(void);
void nb_idn_project_routes(void);
void nb_idn_user_routes(void);
void nb_idn_role_routes(void);
void nb_idn_assignment_routes(void);

/* 0 if no row of kind ("project" or "user") has name in domain_id; else
 * -1 with Keystone's 409 "Duplicate entry" recorded (or a database error). */
int nb_idn_name_taken(struct nb_ctx *ctx, const char *kind, const char *name,
                      const char *domain_id);

#endif
