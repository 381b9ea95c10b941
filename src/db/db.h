/* db.h - the one database interface (SQLite; MariaDB: mariadb.h).
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
#include <stdbool.h>
#include <stddef.h>

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
/* Whether this thread's current or last transaction failed on a conflict
 * with a concurrent one that redoing it from its begin may resolve: on
 * MariaDB a deadlock (1213), lock wait timeout (1205) or Galera
 * certification failure inside it (db.h reports those as a 500 and cannot
 * redo the caller's work itself). Always false on SQLite, whose writers run
 * one at a time. Reset by each outermost nb_db_begin and each statement
 * outside a transaction. A caller that redoes
 * clears ctx's error first (nb_ctx_clear_error). */
bool nb_db_conflict(const struct nb_db *db);
/* For a caller that redoes its own transaction (begin … commit, run when no
 * transaction is open) when it lost a conflict: after try number tries
 * (1-based) of it failed, whether to run it again. True when nb_db_conflict
 * and tries < NB_DB_REDO_TRIES; then ctx's error has been cleared, the redo
 * logged, and the thread has slept a jittered back-off (20 ms doubling). */
#define NB_DB_REDO_TRIES 6
bool nb_db_redo(struct nb_db *db, struct nb_ctx *ctx, int tries);
/* Whether this thread's current or last transaction (or statement outside
 * one) failed because the database could not be reached (MariaDB: a
 * connection refused or lost, the server down or restarting). Always false
 * on SQLite. Reset by each outermost nb_db_begin and each statement outside
 * a transaction. */
bool nb_db_unreachable(const struct nb_db *db);
/* nb_db_redo, and also while nb_db_unreachable: then once a second, up to
 * NB_DB_OUTAGE_TRIES tries (ctx's error cleared, the wait logged). For
 * background work whose result must not be dropped during a database
 * restart (a build's next step, a spawn's result); requests answer their
 * 500 at once instead. */
#define NB_DB_OUTAGE_TRIES 60
bool nb_db_redo_or_wait(struct nb_db *db, struct nb_ctx *ctx, int tries);

/* Dialect fragments, for the few constructs that have no one text on both
 * engines (MariaDB sessions run with ANSI_QUOTES and PIPES_AS_CONCAT, so
 * "key", "limit" and a || b are written once). Call sites format them in
 * with %s; the text stays fixed per engine, so statement caching still works.
 *   nb_db_json_value: the function giving a JSON path's scalar unquoted, for
 *     comparisons and reads: "json_extract" | "JSON_VALUE" (MariaDB's
 *     JSON_EXTRACT returns JSON text, "a" with its quotes)
 *   nb_db_json_each: a table of one `value` column over a JSON array bound
 *     as the one `?`: "json_each(?)" | JSON_TABLE(?, '$[*]' …) AS json_each
 *     (values up to 255 characters on MariaDB: IDs, names)
 * nb_db_upsert formats into buf (size n) insert (an INSERT … VALUES (…))
 * followed by the engine's upsert clause: on a conflict on the unique key
 * keys (a column list; SQLite needs it, MariaDB uses whichever unique key
 * clashed) each column of cols (comma-separated) takes the inserted value,
 * then extra (assignments such as "deleted = 0"; may be NULL). Returns buf. */
int nb_db_is_mariadb(const struct nb_db *db);
/* MariaDB: nb_maria_prune_commit_markers (rows deleted, -1); SQLite keeps
 * no markers: 0. */
int nb_db_prune_commit_markers(struct nb_db *db, struct nb_ctx *ctx, int max_age_s);
/* How many statements or commits of the calling thread have failed with an
 * error worth retrying the whole transaction for (MariaDB: deadlock 1213,
 * lock wait timeout 1205, Galera/WSREP; never on SQLite), counted when the
 * failure was returned to the caller. A caller that can redo its
 * transaction compares the count before and after a failure. */
unsigned nb_db_retryable_failures(void);
/* nb_db_exec of "INSERT OR IGNORE " (MariaDB: "INSERT IGNORE ") followed by
 * into ("INTO t (…) VALUES (…)"): a row clashing with a unique key is
 * skipped (0 rows changed). MariaDB's IGNORE also turns a foreign-key
 * failure into a skipped row where SQLite returns 409: check parents first. */
int nb_db_insert_ignore(struct nb_db *db, struct nb_ctx *ctx, const char *into, const char *types,
                        ...);
const char *nb_db_json_value(const struct nb_db *db);
/* "" | " FOR UPDATE": for a read inside a transaction that a write of the
 * same transaction depends on (a capacity check). SQLite's transactions
 * (BEGIN IMMEDIATE) already run one at a time; MariaDB's read a snapshot
 * unless the read locks, which then reads the latest committed rows and
 * holds them until commit. Appended to the SELECT (and its subqueries). */
const char *nb_db_for_update(const struct nb_db *db);
const char *nb_db_json_each(const struct nb_db *db);
const char *nb_db_upsert(const struct nb_db *db, char *buf, size_t n, const char *insert,
                         const char *keys, const char *cols, const char *extra);

#endif
