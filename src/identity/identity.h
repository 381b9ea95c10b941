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

#endif
