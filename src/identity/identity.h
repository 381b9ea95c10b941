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
int nb_identity_bootstrap(struct nb_env *env, const char *admin_password,
                          const char *demo_password);

#endif
