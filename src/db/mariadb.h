/* mariadb.h - db.h's contract on MariaDB (inside src/db only; db.h's
 * functions forward here when nb_db_open was given a MariaDB URL).
 *
 * A pool of connections (at most NB_MARIA_POOL). A statement outside a
 * transaction borrows any idle connection for its duration; nb_maria_begin
 * pins one to the calling thread until the outermost commit/rollback, and a
 * begin inside it is SAVEPOINT sp_N, as in sqlite.c. Parameters are
 * interpolated on the client as escaped literals (what PyMySQL, oslo.db's
 * driver, does), so `?` and db.h's type string work unchanged. Sessions run
 * with sql_mode ANSI_QUOTES,PIPES_AS_CONCAT,NO_BACKSLASH_ESCAPES,
 * STRICT_TRANS_TABLES (SQLite's quoting), UTC, isolation READ COMMITTED
 * (no gap locks on plain reads: concurrent builds appending to the same
 * tables do not deadlock; capacity checks lock with nb_db_for_update), and
 * CLIENT_FOUND_ROWS (rows matched, as sqlite3_changes counts).
 *
 * Retry: a statement outside a transaction that fails with a deadlock (1213),
 * a lock wait timeout (1205) or a Galera/WSREP error (1047, 1180 whose message
 * names WSREP) is retried with back-off (5 tries, 0.1 s doubling). Inside a
 * transaction db.h cannot redo the caller's work: the error is returned and
 * logged as not retried, and nb_maria_conflict() tells the caller, who may
 * redo its whole transaction (placement's claims do).
 *
 * Lost connections (the server restarted or killed the session: 2006, 2013,
 * 2055, 1927, 4031) are dropped from the pool and reopened on their next
 * use; an idle connection the server closed meanwhile (a restart, a Galera
 * node killed behind a front, wait_timeout) is seen as readable by a poll
 * without a round trip when it is taken from the pool, and reopened before
 * use. A statement outside a transaction that was not executed (2006,
 * 4031), or a read whose answer was lost, and a transaction's first
 * START TRANSACTION, is retried once on a new connection; a write whose
 * answer was lost is not (it may have been applied: the caller gets its 500
 * and nb_maria_unreachable). A transaction that wrote records a token in
 * its connection's nubo_commits row just before its COMMIT: when the
 * COMMIT's answer is lost, the row is read on a new connection (after
 * Galera's causality wait) and the commit reported as what it was,
 * committed, or failed and safe to redo. Inside a
 * transaction the statement fails (500) and so does every later statement
 * and the commit of that transaction, until its rollback returns the
 * connection (the server ended the transaction: nothing may run
 * autocommitted in its place). The same holds after a deadlock or a Galera
 * abort inside a transaction, which the server also rolled back. When no
 * connection can be opened the caller gets the 500 at once. */
#ifndef NB_DB_MARIADB_H
#define NB_DB_MARIADB_H

#include "common/ctx.h"
#include "db/url.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>

#define NB_MARIA_POOL 16

struct nb_maria;

struct nb_maria *nb_maria_open(const struct nb_db_url *u);
void nb_maria_close(struct nb_maria *db);

/* Runs sql; rows (if non-NULL) gets each row up to max_rows (0 = all).
 * Returns the rows changed (matched), or -1 with ctx set (409 constraint). */
int nb_maria_run(struct nb_maria *db, struct nb_ctx *ctx, json_t *rows, int max_rows,
                 const char *sql, const char *types, va_list ap);
/* The AUTO_INCREMENT id of this thread's last insert. */
long long nb_maria_last_id(struct nb_maria *db);

int nb_maria_begin(struct nb_maria *db, struct nb_ctx *ctx);
int nb_maria_commit(struct nb_maria *db, struct nb_ctx *ctx);
void nb_maria_rollback(struct nb_maria *db);
/* Whether this thread's current or last transaction (or statement outside
 * one) failed on a conflict
 * with another one (deadlock, lock wait timeout, Galera certification)
 * that redoing it from its begin may resolve. */
bool nb_maria_conflict(void);
/* Whether it failed because no connection could be opened or one was lost
 * (the server down or restarting). Both reset by an outermost begin and by
 * a statement outside a transaction. */
bool nb_maria_unreachable(void);

/* Fault injection for tests: the calling thread's next outermost COMMIT of
 * a writing transaction behaves as if the connection were lost with the
 * COMMIT sent (2013), after the server applied it (applied) or before. */
void nb_maria_test_lose_commit_answer(bool applied);

/* Deletes the nubo_commits rows (094) not written for max_age_s seconds
 * (at least NB_MARIA_MARKER_MIN_AGE_S): those of pools gone (each process
 * start makes new slots) and of slots idle since. A marker is read back
 * only within seconds of the commit that wrote it (and a live slot's row
 * comes back with its next commit), so none that may still be read is
 * lost. Rows deleted, or -1 (ctx set). */
#define NB_MARIA_MARKER_MIN_AGE_S 300
int nb_maria_prune_commit_markers(struct nb_maria *db, struct nb_ctx *ctx, int max_age_s);

/* Runs a script of ;-separated statements (a migration); 0/-1. */
int nb_maria_script(struct nb_maria *db, struct nb_ctx *ctx, const char *sql);

/* db.h's nb_db_version / nb_db_sync with the MariaDB migrations
 * (src/db/migrations/mariadb/NNN_*.sql, the same numbers as SQLite's),
 * serialized between processes by GET_LOCK('nubo_migrations'). */
int nb_maria_version(struct nb_maria *db);
int nb_maria_sync(struct nb_maria *db);

/* Classifies a server error (pure; unit-tested): */
/* true for 1213, 1205, and 1047/1180 whose message names WSREP */
bool nb_maria_retryable(unsigned err, const char *msg);
/* true for a lost connection: 2006, 2013, 2055, 1927 (killed), 4031 */
bool nb_maria_conn_lost(unsigned err);
/* whether a statement outside a transaction that failed with err may be
 * sent again on a new connection: true when it was not executed (2006: not
 * sent; 4031: the connection was closed before) and, for a lost answer
 * (2013, 2055, 1927), when sql is a read (SELECT, SHOW, EXPLAIN, DESCRIBE) */
bool nb_maria_resend_safe(unsigned err, const char *sql);
/* whether sql is a read: SELECT, SHOW, EXPLAIN, DESCRIBE (after blanks and
 * opening parentheses, any case) */
bool nb_maria_is_read(const char *sql);
/* true for duplicate key, foreign key, NOT NULL and CHECK failures */
bool nb_maria_constraint(unsigned err);
/* sql with each `?` outside '...', "..." and `...` replaced by the next of
 * the n literals in lits (already escaped and quoted), as a new string; as
 * in SQLite, `?NNN` is literal NNN (1-based, may repeat) and a bare `?`
 * the one after the highest so far. NULL (and *found = the number of
 * parameters the SQL needs, -1 for `?0`) when that number is not n. */
char *nb_maria_interpolate(const char *sql, char *const *lits, int n, int *found);

#endif
