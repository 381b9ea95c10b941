/* mariadb_migrate.c - nubo db sync on MariaDB (mariadb.h).
 *
 * MariaDB commits DDL implicitly, so a migration is not one transaction as
 * on SQLite: processes that sync together are serialized by a named lock
 * instead, held on the connection pinned by an (outer) transaction, and a
 * migration is recorded right after its script ran. */
#include "common/log.h"
#include "db/mariadb.h"
#include "db/migrations.h"

#include <stdarg.h>

static long long one_int(struct nb_maria *db, struct nb_ctx *ctx, const char *sql,
                         const char *types, ...)
{
    json_t *rows = json_array();
    va_list ap;
    va_start(ap, types);
    int rc = nb_maria_run(db, ctx, rows, 1, sql, types, ap);
    va_end(ap);
    long long v = -1;
    if (rc >= 0) {
        json_t *row = json_array_get(rows, 0);
        const char *k;
        json_t *val;
        json_object_foreach (row, k, val) {
            v = json_is_integer(val) ? json_integer_value(val) : -1;
            break;
        }
    }
    json_decref(rows);
    return v;
}

static int exec(struct nb_maria *db, struct nb_ctx *ctx, const char *sql, const char *types, ...)
{
    va_list ap;
    va_start(ap, types);
    int rc = nb_maria_run(db, ctx, NULL, 0, sql, types, ap);
    va_end(ap);
    return rc;
}

int nb_maria_version(struct nb_maria *db)
{
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    if (exec(db, &ctx,
             "CREATE TABLE IF NOT EXISTS nubo_migrations (version INTEGER PRIMARY KEY, name "
             "VARCHAR(255) NOT NULL, applied_at DATETIME NOT NULL DEFAULT UTC_TIMESTAMP())",
             "") < 0)
        return -1;
    return (int)one_int(db, &ctx, "SELECT COALESCE(MAX(version), 0) FROM nubo_migrations", "");
}

/* Applies m unless applied; 1 if applied now, 0 if it was, -1. */
static int apply(struct nb_maria *db, struct nb_ctx *ctx, const struct nb_migration *m)
{
    long long done = one_int(db, ctx, "SELECT COUNT(*) FROM nubo_migrations WHERE version = ?", "i",
                             (long long)m->version);
    if (done != 0)
        return done < 0 ? -1 : 0;
    if (nb_maria_script(db, ctx, m->sql) < 0) {
        NB_ERROR("nubo.db", ctx, NULL, "migration %s failed", m->name);
        return -1;
    }
    if (exec(db, ctx, "INSERT INTO nubo_migrations (version, name) VALUES (?, ?)", "is",
             (long long)m->version, m->name) < 0)
        return -1;
    NB_INFO("nubo.db", ctx, NULL, "applied migration %s (MariaDB)", m->name);
    return 1;
}

int nb_maria_sync(struct nb_maria *db)
{
    if (nb_maria_version(db) < 0)
        return -1;
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    if (nb_maria_begin(db, &ctx) < 0) /* pins the connection that holds the lock */
        return -1;
    if (one_int(db, &ctx, "SELECT GET_LOCK('nubo_migrations', 120)", "") != 1) {
        NB_ERROR("nubo.db", &ctx, NULL, "cannot take the lock nubo_migrations");
        nb_maria_rollback(db);
        return -1;
    }
    int applied = 0;
    for (const struct nb_migration *m = nb_migrations_mariadb; m->name; m++) {
        int rc = apply(db, &ctx, m);
        if (rc < 0) {
            applied = -1;
            break;
        }
        applied += rc;
    }
    one_int(db, &ctx, "SELECT RELEASE_LOCK('nubo_migrations')", "");
    if (nb_maria_commit(db, &ctx) < 0)
        return -1;
    return applied;
}
