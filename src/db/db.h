/* db.h - the one database interface (SQLite; MariaDB in progress: mariadb.h).
 *
 * No module outside src/db/ includes sqlite3.h. Queries take SQL with `?`
 * placeholders and a type string naming each argument:
 *   's' const char * (NULL binds NULL)   'i' long long   'd' double
 *   'b' int (bool, bound as 0/1)           'j' json_t * (bound as compact text, NULL -> NULL)
 * Rows come back as JSON objects keyed by column name (integers, reals,
 * strings, null), which is what the API layers want to shape anyway.
 *
 * Thread-safety: one connection guarded by a recursive mutex. A transaction
 * (nb_db_begin … nb_db_commit/rollback) holds the mutex, so statements made by
 * the same thread inside it see and extend it, and other threads wait; a
 * begin inside it is a savepoint (see nb_db_begin).
 * Prepared statements are cached per SQL text.
 *
 * Errors: functions return -1/NULL, log the SQLite message, and record a 500
 * on ctx when ctx is non-NULL (constraint failures: 409). */
#ifndef NB_DB_H
#define NB_DB_H

#include "common/ctx.h"
#include <jansson.h>

struct nb_db;

/* Opens (creating) the database at path (WAL mode, foreign keys on), or,
 * when path is a MariaDB URL (db/url.h), connects to that database.
 * Returns NULL on error. */
struct nb_db *nb_db_open(const char *path);
void nb_db_close(struct nb_db *db);

/* Applies the numbered migrations in src/db/migrations (compiled in) that
 * have not been applied yet, each in its own transaction. Idempotent.
 * Returns the number applied, or -1. */
int nb_db_sync(struct nb_db *db);
/* Current schema version (highest applied migration), -1 on error. */
int nb_db_version(struct nb_db *db);

/* Runs a statement; returns the number of rows changed, or -1. */
int nb_db_exec(struct nb_db *db, struct nb_ctx *ctx, const char *sql, const char *types, ...);
/* Runs a query; returns a new JSON array of row objects (maybe empty), or NULL. */
json_t *nb_db_rows(struct nb_db *db, struct nb_ctx *ctx, const char *sql, const char *types, ...);
/* First row as a new JSON object; NULL if no row or on error (on error
 * nb_ctx_status(ctx) is set, so callers can tell the two apart). */
json_t *nb_db_row(struct nb_db *db, struct nb_ctx *ctx, const char *sql, const char *types, ...);
/* First column of the first row as an integer; def if no row. -1 on error is
 * ambiguous, so use nb_db_row for values that may be -1. */
long long nb_db_int(struct nb_db *db, struct nb_ctx *ctx, long long def, const char *sql,
                    const char *types, ...);
/* Row ID of the last insert on this connection (call inside a transaction). */
long long nb_db_last_id(struct nb_db *db);

/* Transactions. begin takes the mutex (BEGIN IMMEDIATE); commit/rollback
 * release it. 0/-1.
 *
 * They nest: a begin by the thread that already has a transaction open on
 * this db opens a savepoint (SAVEPOINT sp_N) instead, its commit releases
 * it (RELEASE sp_N) and its rollback undoes only the work since that begin
 * (ROLLBACK TO sp_N; RELEASE sp_N), leaving the outer transaction open. So
 * a module's function that owns a table can wrap its writes in
 * begin … commit/rollback and be called both on its own (its own
 * transaction) and inside a caller's (it joins it: nothing it wrote is
 * durable until the outermost commit, and the caller's rollback drops it).
 * Every begin that returned 0 is closed by exactly one commit or rollback,
 * innermost first. A failed nested commit rolls the savepoint back. After an
 * inner rollback the caller decides whether the outer work still commits;
 * usually it sees the inner function's -1 and rolls back too. */
int nb_db_begin(struct nb_db *db, struct nb_ctx *ctx);
int nb_db_commit(struct nb_db *db, struct nb_ctx *ctx);
/* Rolls back the innermost open transaction (or savepoint) of this thread;
 * a no-op when the thread has none (after a failed begin or commit). */
void nb_db_rollback(struct nb_db *db);

#endif
