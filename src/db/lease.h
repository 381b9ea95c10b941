/* lease.h - named leases in the database, for control planes that share
 * one (issue 13, "Several control planes"; table nubo_leases, 089).
 *
 * A lease is a row (name, holder, expires_at): held by holder until
 * expires_at (epoch seconds on the database's clock, so the hosts' clocks
 * need not agree). Taking one is one atomic statement: the row is created,
 * or moved to the caller if it already holds it or it has expired; of
 * several processes asking at once exactly one gets it. Holders name a
 * process, conventionally "<role>@<host>:<pid>". Works on both engines;
 * the conductor uses it on MariaDB only (conductor/leases.c). */
#ifndef NB_DB_LEASE_H
#define NB_DB_LEASE_H

#include "common/ctx.h"
#include <jansson.h>
#include <stdbool.h>

struct nb_db;

/* Acquires lease name for holder, or renews it when holder has it: it then
 * expires ttl_s seconds from now. 1 held, 0 held by another (unexpired),
 * -1 on a database error (ctx set). */
int nb_lease_acquire(struct nb_db *db, struct nb_ctx *ctx, const char *name, const char *holder,
                     double ttl_s);
/* Takes lease name over from prev (its holder as last read) if it is still
 * prev's and expired, or (force) whatever its expiry. 1 taken, 0 not, -1. */
int nb_lease_take_over(struct nb_db *db, struct nb_ctx *ctx, const char *name, const char *prev,
                       const char *holder, double ttl_s, bool force);
/* Gives lease name up if holder has it: deleted, or (expire) left with
 * expires_at 0, expired for everyone at once (a liveness lease whose
 * holder's unfinished work others should take over). Rows changed, -1. */
int nb_lease_release(struct nb_db *db, struct nb_ctx *ctx, const char *name, const char *holder,
                     bool expire);
/* Every lease: new array of {"name", "holder", "expires_at", "remaining"}
 * (seconds left, negative once expired), or NULL on error. */
json_t *nb_lease_list(struct nb_db *db, struct nb_ctx *ctx);

#endif
