/* policy.h - one policy table for every API service.
 *
 * Each route of every service (identity, compute, image, volume, networking,
 * placement) has one entry {method, pattern, rule, name} in table.c. The HTTP
 * layer calls the guard (nb_policy_guard) for every routed request, after the
 * token check and before the handler: a caller whose roles do not satisfy the
 * route's rule is refused with 403 in the service's own words, naming the
 * OpenStack policy rule ("rule:create_network is disallowed by policy",
 * "Policy doesn't allow os_compute_api:servers:create to be performed.", …).
 * This is the coarse, role-only gate of the services' default policies as
 * deployed with enforce_new_defaults (reader: read only; member: writes in
 * its own project; admin: everything). What needs the object (own project or
 * another, shared networks, image visibility) stays in the handlers, which
 * answer 404 for objects the caller cannot see and 403 for visible ones it
 * may not change.
 *
 * nb_policy_check_routes() runs at start-up once every module registered its
 * routes: a route without an entry (or an entry without a route) stops the
 * start, so a new endpoint cannot be added without deciding who may call it.
 * `nubo policy list` prints the table; the e2e policy matrix is generated
 * from it. */
#ifndef NB_POLICY_H
#define NB_POLICY_H

#include "common/ctx.h"
#include "common/http.h"

#include <stdbool.h>
#include <stddef.h>

enum nb_policy_rule {
    NB_POLICY_PUBLIC, /* no token (NB_ROUTE_NO_AUTH routes: version documents, token create) */
    NB_POLICY_ANY,    /* any valid token; the handler decides (self-service identity calls) */
    NB_POLICY_READER, /* a role on the token's project: reader, member or admin */
    NB_POLICY_MEMBER, /* member (or admin): writes in the caller's own project */
    NB_POLICY_ADMIN,  /* admin only */
};

struct nb_policy_entry {
    const char *method;
    const char *pattern; /* exactly as registered with nb_http_route() */
    enum nb_policy_rule rule;
    const char *name; /* the OpenStack policy rule named in a refusal */
};

/* The table (static storage); *n gets its length. */
const struct nb_policy_entry *nb_policy_table(size_t *n);

/* The entry for method + pattern, or NULL. */
const struct nb_policy_entry *nb_policy_find(const char *method, const char *pattern);

/* "public", "any", "reader", "member", "admin". */
const char *nb_policy_rule_str(enum nb_policy_rule rule);

/* True when ctx's roles satisfy rule (internal system contexts always do). */
bool nb_policy_allows(const struct nb_ctx *ctx, enum nb_policy_rule rule);

/* The HTTP guard (nb_guard_fn): 0 when the route's rule allows the caller,
 * else -1 after nb_error(ctx, 403, …) in the service's words. A route
 * without an entry is refused with 500 (nb_policy_check_routes() stops the
 * start before that can happen). */
int nb_policy_guard(struct nb_ctx *ctx, struct nb_req *req, const char *pattern);

/* Checks the registered routes against the table: every route has an entry
 * whose rule is PUBLIC exactly when the route is NB_ROUTE_NO_AUTH, and, when
 * every_service (every service module registered its routes), every entry
 * has a route. Logs each mismatch (ERROR, nubo.policy) and returns their
 * count (0 when all is well). */
int nb_policy_check_routes(bool every_service);

/* Installs the guard with the HTTP layer. */
void nb_policy_init(void);

#endif
