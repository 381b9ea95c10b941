/* lease.c - named leases in table nubo_leases (lease.h). */
#include "db/lease.h"
#include "db/db.h"

#include <stdio.h>

/* The database's clock in epoch seconds, as an SQL expression. */
static const char *now_sql(struct nb_db *db)
{
    return nb_db_is_mariadb(db) ? "UNIX_TIMESTAMP(NOW(6))"
                                : "((julianday('now') - 2440587.5) * 86400.0)";
}

int nb_lease_acquire(struct nb_db *db, struct nb_ctx *ctx, const char *name, const char *holder,
                     double ttl_s)
{
    char sql[512];
    snprintf(sql, sizeof(sql), "INTO nubo_leases (name, holder, expires_at) VALUES (?, ?, %s + ?)",
             now_sql(db));
    int n = nb_db_insert_ignore(db, ctx, sql, "ssd", name, holder, ttl_s);
    if (n != 0)
        return n < 0 ? -1 : 1;
    snprintf(sql, sizeof(sql),
             "UPDATE nubo_leases SET holder = ?, expires_at = %s + ? WHERE name = ? AND "
             "(holder = ? OR expires_at < %s)",
             now_sql(db), now_sql(db));
    n = nb_db_exec(db, ctx, sql, "sdss", holder, ttl_s, name, holder);
    return n < 0 ? -1 : n > 0;
}

int nb_lease_take_over(struct nb_db *db, struct nb_ctx *ctx, const char *name, const char *prev,
                       const char *holder, double ttl_s, bool force)
{
    char sql[512];
    snprintf(sql, sizeof(sql),
             "UPDATE nubo_leases SET holder = ?, expires_at = %s + ? WHERE name = ? AND holder = "
             "? AND (? OR expires_at < %s)",
             now_sql(db), now_sql(db));
    int n = nb_db_exec(db, ctx, sql, "sdssb", holder, ttl_s, name, prev, (int)force);
    return n < 0 ? -1 : n > 0;
}

int nb_lease_release(struct nb_db *db, struct nb_ctx *ctx, const char *name, const char *holder,
                     bool expire)
{
    if (expire)
        return nb_db_exec(db, ctx,
                          "UPDATE nubo_leases SET expires_at = 0 WHERE name = ? AND holder = ?",
                          "ss", name, holder);
    return nb_db_exec(db, ctx, "DELETE FROM nubo_leases WHERE name = ? AND holder = ?", "ss", name,
                      holder);
}

json_t *nb_lease_list(struct nb_db *db, struct nb_ctx *ctx)
{
    char sql[256];
    snprintf(sql, sizeof(sql),
             "SELECT name, holder, expires_at, expires_at - %s AS remaining FROM nubo_leases "
             "ORDER BY name",
             now_sql(db));
    return nb_db_rows(db, ctx, sql, "");
}
