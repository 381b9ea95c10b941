/* identity.h - the Keystone v3 subset under /identity.
 *
 * nb_identity_init registers the routes and the token check that every other
 * service's requests go through. nb_identity_bootstrap creates the default
 * domain, roles admin/member/reader, the admin project and user and the demo
 * project and member user (idempotent: existing ones are kept, passwords
 * reset to the given ones). */
#ifndef NB_IDENTITY_H
#define NB_IDENTITY_H

#include "common/ctx.h"
#include "common/env.h"

struct nb_db;

int nb_identity_init(struct nb_env *env);

/* The Identity API as the HTTP layer serves it (http_service.c); its init
 * registers it with its routes. */
struct nb_http_service;
extern const struct nb_http_service nb_identity_http_service;
int nb_identity_bootstrap(struct nb_env *env, const char *admin_password,
                          const char *demo_password);

/* Issues a token for an operator tool run as root on a host with database
 * access (`nubo doctor`), so that it can call the API without a password:
 * the bootstrap admin user ("admin" in the default domain) scoped to the
 * admin project ("admin"), valid ttl seconds (1..3600), auth method
 * "external" (authenticated by the host, as Keystone's REMOTE_USER). Like
 * any token only its SHA-256 is stored, and validation still requires the
 * user, the project and an assignment to be live. Writes the token (64 hex
 * characters) into token_out. 0, or -1 after recording the error on ctx
 * (404 when the admin user or project is missing, 400 for a bad ttl). */
int nb_identity_issue_admin_token(struct nb_env *env, struct nb_ctx *ctx, int ttl,
                                  char token_out[65]);

/* --- for the other services, which never read identity's tables (see
 * src/db/owners.tsv). Each runs on db, the caller's own connection to the
 * shared database: the identity module need not be initialised in the
 * caller's process. */

/* Whether project_id names a row of Keystone's project table, as Nova's
 * identity.verify_project_id asks Keystone (GET /v3/projects/{id}, which
 * finds a domain too: a domain is a project row with is_domain). 1 yes,
 * 0 no, -1 after a database error recorded on ctx. */
int nb_identity_project_exists(struct nb_db *db, struct nb_ctx *ctx, const char *project_id);
/* The id of the admin project nb_identity_bootstrap creates ("admin" in the
 * default domain), the owner devstack gives the records a cloud starts
 * with. A new string (caller frees), or NULL when there is none (not yet
 * bootstrapped; nb_ctx_status(ctx) stays 0) or after a database error
 * recorded on ctx. */
char *nb_identity_admin_project_id(struct nb_db *db, struct nb_ctx *ctx);

#endif
