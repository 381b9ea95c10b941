/* test_mariadb.c - the MariaDB backend (db/mariadb.h): the pure parts always;
 * against a server when NUBO_TEST_MARIADB_URL names a scratch database
 * (tests/db/mariadb.sh start; createdb nubo_unit), skipped otherwise. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "common/ctx.h"
#include "db/mariadb.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void test_interpolate(void **state)
{
    (void)state;
    char *lits[] = {"'a'", "7"};
    int found;
    char *q = nb_maria_interpolate("SELECT ? AS \"?\", '?''?' || ? FROM `t?`", lits, 2, &found);
    assert_string_equal(q, "SELECT 'a' AS \"?\", '?''?' || 7 FROM `t?`");
    free(q);
    assert_null(nb_maria_interpolate("SELECT ?, ?, ?", lits, 2, &found));
    assert_int_equal(found, 3);
    q = nb_maria_interpolate("SELECT ?2, ?1 = ?1, ?", lits, 2, &found);
    assert_null(q); /* the bare ? after ?2 is the third */
    assert_int_equal(found, 3);
    q = nb_maria_interpolate("SELECT ?2, ?1 = ?1, '?3' || ?2", lits, 2, &found);
    assert_string_equal(q, "SELECT 7, 'a' = 'a', '?3' || 7");
    free(q);
    q = nb_maria_interpolate("SELECT ?1, ?", lits, 2, &found);
    assert_string_equal(q, "SELECT 'a', 7");
    free(q);
    assert_null(nb_maria_interpolate("SELECT ?0", lits, 2, &found));
    assert_int_equal(found, -1);
}

static void test_error_classes(void **state)
{
    (void)state;
    assert_true(nb_maria_retryable(1213, "Deadlock found"));
    assert_true(nb_maria_retryable(1205, "Lock wait timeout exceeded"));
    assert_true(nb_maria_retryable(1047, "WSREP has not yet prepared node for application use"));
    assert_true(nb_maria_retryable(1180, "Got error 6 \"No such device\" during COMMIT: WSREP"));
    assert_false(nb_maria_retryable(1047, "Unknown command"));
    assert_false(nb_maria_retryable(1062, "Duplicate entry"));
    assert_true(nb_maria_constraint(1062));
    assert_true(nb_maria_constraint(1452));
    assert_true(nb_maria_constraint(4025));
    assert_false(nb_maria_constraint(1213));
    /* not executed: any statement may be sent again */
    assert_true(nb_maria_resend_safe(2006, "UPDATE t SET n = n + 1"));
    assert_true(nb_maria_resend_safe(4031, "INSERT INTO t VALUES (1)"));
    /* the answer lost: reads again, writes never (they may have been applied) */
    assert_true(nb_maria_resend_safe(2013, "SELECT n FROM t"));
    assert_true(nb_maria_resend_safe(2013, "  (select 1) UNION (SELECT 2)"));
    assert_true(nb_maria_resend_safe(2055, "show status"));
    assert_false(nb_maria_resend_safe(2013, "UPDATE t SET n = n + 1"));
    assert_false(nb_maria_resend_safe(2013, "INSERT INTO t SELECT * FROM u"));
    assert_false(nb_maria_resend_safe(1927, "DELETE FROM t"));
    assert_false(nb_maria_resend_safe(2013, "SELECTED"));
    assert_false(nb_maria_resend_safe(1213, "SELECT 1"));
    assert_false(nb_maria_resend_safe(2013, NULL));
}

static struct nb_maria *db;

static int run(struct nb_ctx *ctx, json_t *rows, const char *sql, const char *types, ...)
{
    va_list ap;
    va_start(ap, types);
    int rc = nb_maria_run(db, ctx, rows, 0, sql, types, ap);
    va_end(ap);
    return rc;
}

static int setup_server(void **state)
{
    (void)state;
    const char *url = getenv("NUBO_TEST_MARIADB_URL");
    struct nb_db_url u;
    char err[256];
    if (!url || nb_db_url_parse(url, NULL, &u, err, sizeof(err)) < 0 || u.kind != NB_DB_MARIADB)
        return 0;
    db = nb_maria_open(&u);
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    if (db && (run(&ctx, NULL, "DROP TABLE IF EXISTS t", "") < 0 ||
               run(&ctx, NULL,
                   "CREATE TABLE t (id INTEGER PRIMARY KEY AUTO_INCREMENT, \"key\" VARCHAR(64) "
                   "UNIQUE, n BIGINT, x DOUBLE, doc MEDIUMTEXT)",
                   "") < 0))
        return -1;
    return 0;
}

static void test_statements(void **state)
{
    (void)state;
    if (!db)
        skip();
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    json_t *doc = json_pack("{s:{s:s}}", "data", "format", "raw");
    assert_int_equal(run(&ctx, NULL, "INSERT INTO t (\"key\", n, x, doc) VALUES (?, ?, ?, ?)",
                         "sidj", "it's a \\ key", 42LL, 1.5, doc),
                     1);
    json_decref(doc);
    json_t *rows = json_array();
    assert_int_equal(run(&ctx, rows,
                         "SELECT \"key\", n, x, JSON_VALUE(doc, '$.data.format') AS f, "
                         "COUNT(*) AS c, NULL AS z, 'a' || 'b' AS ab FROM t WHERE n = ?",
                         "i", 42LL),
                     0);
    json_t *r = json_array_get(rows, 0);
    assert_string_equal(json_string_value(json_object_get(r, "key")), "it's a \\ key");
    assert_int_equal(json_integer_value(json_object_get(r, "n")), 42);
    assert_true(json_real_value(json_object_get(r, "x")) == 1.5);
    assert_string_equal(json_string_value(json_object_get(r, "f")), "raw");
    assert_int_equal(json_integer_value(json_object_get(r, "c")), 1);
    assert_true(json_is_null(json_object_get(r, "z")));
    assert_string_equal(json_string_value(json_object_get(r, "ab")), "ab");
    json_decref(rows);
    /* duplicate key: 409 on ctx */
    assert_int_equal(run(&ctx, NULL, "INSERT INTO t (\"key\") VALUES (?)", "s", "it's a \\ key"),
                     -1);
    assert_int_equal(nb_ctx_status(&ctx), 409);
    nb_ctx_init_system(&ctx, NULL);
    /* rows matched, not changed (as sqlite3_changes) */
    assert_int_equal(run(&ctx, NULL, "UPDATE t SET n = 42 WHERE n = 42", ""), 1);
    assert_int_equal(run(&ctx, NULL, "SELECT ?", "ss", "a", "b"), -1);
    assert_int_equal(nb_ctx_status(&ctx), 500);
}

static void test_transactions(void **state)
{
    (void)state;
    if (!db)
        skip();
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(nb_maria_begin(db, &ctx), 0);
    assert_int_equal(run(&ctx, NULL, "INSERT INTO t (\"key\") VALUES ('outer')", ""), 1);
    long long id = nb_maria_last_id(db);
    assert_true(id > 0);
    assert_int_equal(nb_maria_begin(db, &ctx), 0); /* SAVEPOINT sp_2 */
    assert_int_equal(run(&ctx, NULL, "INSERT INTO t (\"key\") VALUES ('inner')", ""), 1);
    nb_maria_rollback(db); /* only the inner insert */
    assert_int_equal(nb_maria_commit(db, &ctx), 0);
    json_t *rows = json_array();
    assert_int_equal(
        run(&ctx, rows, "SELECT id FROM t WHERE \"key\" IN ('outer', 'inner') ORDER BY id", ""), 0);
    assert_int_equal(json_array_size(rows), 1);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(rows, 0), "id")), id);
    json_decref(rows);
    nb_maria_rollback(db); /* none open: a no-op */
}

/* Each thread inserts in its own transactions: the pool pins one
 * connection per thread, so every row of a rolled-back transaction is gone. */
static void *worker(void *arg)
{
    long k = (long)arg;
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    for (int i = 0; i < 20; i++) {
        char key[64];
        snprintf(key, sizeof(key), "w%ld-%d", k, i);
        if (nb_maria_begin(db, &ctx) < 0)
            return (void *)1;
        if (run(&ctx, NULL, "INSERT INTO t (\"key\", n) VALUES (?, ?)", "si", key, (long long)k) !=
            1)
            return (void *)2;
        if (i % 2)
            nb_maria_rollback(db);
        else if (nb_maria_commit(db, &ctx) < 0)
            return (void *)3;
    }
    return NULL;
}

static void test_pool_threads(void **state)
{
    (void)state;
    if (!db)
        skip();
    pthread_t th[8];
    for (long k = 0; k < 8; k++)
        pthread_create(&th[k], NULL, worker, (void *)(k + 100));
    for (int k = 0; k < 8; k++) {
        void *rc;
        pthread_join(th[k], &rc);
        assert_null(rc);
    }
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    json_t *rows = json_array();
    assert_int_equal(run(&ctx, rows, "SELECT COUNT(*) AS c FROM t WHERE n >= 100", ""), 0);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(rows, 0), "c")), 8 * 10);
    json_decref(rows);
}

/* Holds the lock on the row 'outer' for 2.5 s, in a transaction. */
static void *locker(void *arg)
{
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    if (nb_maria_begin(db, &ctx) < 0 ||
        run(&ctx, NULL, "UPDATE t SET n = 1 WHERE \"key\" = 'outer'", "") != 1)
        return (void *)1;
    *(volatile int *)arg = 1;
    struct timespec ts = {2, 500000000L};
    nanosleep(&ts, NULL);
    return nb_maria_commit(db, &ctx) < 0 ? (void *)2 : NULL;
}

#define WAIT_1S "SET STATEMENT innodb_lock_wait_timeout = 1 FOR "

/* A lock wait timeout (1205): a single statement is retried until the
 * holder commits; inside a transaction it is returned (500), not retried. */
static void test_retry_lock_wait(void **state)
{
    (void)state;
    if (!db)
        skip();
    volatile int held = 0;
    pthread_t th;
    pthread_create(&th, NULL, locker, (void *)&held);
    while (!held)
        sched_yield();
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(nb_maria_begin(db, &ctx), 0);
    assert_int_equal(run(&ctx, NULL, WAIT_1S "UPDATE t SET n = 3 WHERE \"key\" = 'outer'", ""), -1);
    assert_int_equal(nb_ctx_status(&ctx), 500);
    nb_maria_rollback(db);
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(run(&ctx, NULL, WAIT_1S "UPDATE t SET n = 2 WHERE \"key\" = 'outer'", ""), 1);
    void *rc;
    pthread_join(th, &rc);
    assert_null(rc);
    json_t *rows = json_array();
    assert_int_equal(run(&ctx, rows, "SELECT n FROM t WHERE \"key\" = 'outer'", ""), 0);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(rows, 0), "n")), 2);
    json_decref(rows);
}

/* Kills every session of the test's user, the pool's connections (the
 * last KILL's own among them; its errors do not matter); how many. */
static int kill_all(void)
{
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    json_t *rows = json_array();
    if (run(&ctx, rows,
            "SELECT ID AS id FROM information_schema.PROCESSLIST WHERE USER = "
            "SUBSTRING_INDEX(CURRENT_USER(), '@', 1) ORDER BY ID = CONNECTION_ID()",
            "") < 0) {
        json_decref(rows);
        return -1;
    }
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        nb_ctx_init_system(&ctx, NULL);
        run(&ctx, NULL, "KILL CONNECTION ?", "i",
            (long long)json_integer_value(json_object_get(r, "id")));
    }
    int n = (int)json_array_size(rows);
    json_decref(rows);
    return n;
}

/* The server ended the pool's connections (a restart, wait_timeout): a
 * statement outside a transaction and a begin reopen them and go on, on
 * every connection of the pool. */
static void test_reconnect(void **state)
{
    (void)state;
    if (!db)
        skip();
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    assert_true(kill_all() > 1);
    for (int i = 0; i < 3; i++)
        assert_int_equal(run(&ctx, NULL, "UPDATE t SET n = n WHERE \"key\" = 'outer'", ""), 1);
    assert_true(kill_all() > 0);
    assert_int_equal(nb_maria_begin(db, &ctx), 0);
    assert_int_equal(run(&ctx, NULL, "INSERT INTO t (\"key\") VALUES ('reconnected')", ""), 1);
    assert_int_equal(nb_maria_commit(db, &ctx), 0);
    assert_false(nb_ctx_failed(&ctx));
    assert_true(kill_all() > 0);
    pthread_t th[8];
    for (long k = 0; k < 8; k++)
        pthread_create(&th[k], NULL, worker, (void *)(k + 200));
    for (int k = 0; k < 8; k++) {
        void *rc;
        pthread_join(th[k], &rc);
        assert_null(rc);
    }
    json_t *rows = json_array();
    assert_int_equal(run(&ctx, rows, "SELECT COUNT(*) AS c FROM t WHERE n >= 200", ""), 0);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(rows, 0), "c")), 8 * 10);
    json_decref(rows);
}

/* A COMMIT whose answer was lost: read back from the transaction's marker,
 * reported committed when the server applied it (not to be redone), failed
 * and unreachable (safe to redo) when it did not. */
static void test_commit_answer_lost(void **state)
{
    (void)state;
    if (!db)
        skip();
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(run(&ctx, NULL,
                         "CREATE TABLE nubo_commits (slot VARCHAR(64) PRIMARY KEY, "
                         "marker CHAR(16) NOT NULL)",
                         ""),
                     0);
    assert_int_equal(nb_maria_begin(db, &ctx), 0);
    assert_int_equal(run(&ctx, NULL, "INSERT INTO t (\"key\") VALUES ('commit-applied')", ""), 1);
    nb_maria_test_lose_commit_answer(true);
    assert_int_equal(nb_maria_commit(db, &ctx), 0);
    assert_false(nb_ctx_failed(&ctx));
    assert_false(nb_maria_unreachable());

    assert_int_equal(nb_maria_begin(db, &ctx), 0);
    assert_int_equal(run(&ctx, NULL, "INSERT INTO t (\"key\") VALUES ('commit-lost')", ""), 1);
    nb_maria_test_lose_commit_answer(false);
    assert_int_equal(nb_maria_commit(db, &ctx), -1);
    assert_int_equal(nb_ctx_status(&ctx), 500);
    assert_true(nb_maria_unreachable());
    nb_maria_rollback(db); /* a no-op: the commit ended it */

    nb_ctx_init_system(&ctx, NULL);
    json_t *rows = json_array();
    assert_int_equal(run(&ctx, rows,
                         "SELECT \"key\" FROM t WHERE \"key\" IN ('commit-applied', 'commit-lost')",
                         ""),
                     0);
    assert_int_equal(json_array_size(rows), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(rows, 0), "key")),
                        "commit-applied");
    json_decref(rows);
    /* the suites after this one migrate the same database (093 creates it) */
    assert_int_equal(run(&ctx, NULL, "DROP TABLE nubo_commits", ""), 0);
}

static void *kill_one(void *arg)
{
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    return run(&ctx, NULL, "KILL CONNECTION ?", "i", *(long long *)arg) < 0 ? (void *)1 : NULL;
}

static long long count_key(const char *key)
{
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    json_t *rows = json_array();
    run(&ctx, rows, "SELECT COUNT(*) AS c FROM t WHERE \"key\" = ?", "s", key);
    long long c = json_integer_value(json_object_get(json_array_get(rows, 0), "c"));
    json_decref(rows);
    return c;
}

static long long count_slots(const char *where)
{
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    json_t *rows = json_array();
    char sql[200];
    snprintf(sql, sizeof(sql), "SELECT COUNT(*) AS c FROM nubo_commits WHERE %s", where);
    run(&ctx, rows, sql, "");
    long long c = json_integer_value(json_object_get(json_array_get(rows, 0), "c"));
    json_decref(rows);
    return c;
}

/* Markers not written for the bound are deleted (slots of pools gone, a
 * live slot idle since), those written since are kept, a live slot's
 * commit writes its row again; never under the minimum bound. */
static void test_commit_markers_pruned(void **state)
{
    (void)state;
    if (!db)
        skip();
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(run(&ctx, NULL,
                         "CREATE TABLE nubo_commits (slot VARCHAR(64) PRIMARY KEY, "
                         "marker CHAR(16) NOT NULL)",
                         ""),
                     0);
    /* as 094 adds it: rows of before get the migration's time */
    assert_int_equal(run(&ctx, NULL, "INSERT INTO nubo_commits VALUES ('old-0', 'a')", ""), 1);
    assert_int_equal(run(&ctx, NULL,
                         "ALTER TABLE nubo_commits ADD COLUMN updated_at TIMESTAMP NOT NULL "
                         "DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP",
                         ""),
                     0);
    assert_int_equal(run(&ctx, NULL,
                         "INSERT INTO nubo_commits (slot, marker, updated_at) VALUES "
                         "('gone-0', 'b', NOW() - INTERVAL 2 HOUR), "
                         "('gone-1', 'c', NOW() - INTERVAL 10 MINUTE), ('fresh-0', 'd', NOW())",
                         ""),
                     3);
    /* this pool's slot: written by a commit, then aged, then written again */
    assert_int_equal(nb_maria_begin(db, &ctx), 0);
    assert_int_equal(run(&ctx, NULL, "INSERT INTO t (\"key\") VALUES ('marker-1')", ""), 1);
    assert_int_equal(nb_maria_commit(db, &ctx), 0);
    assert_int_equal(count_slots("slot NOT IN ('old-0', 'gone-0', 'gone-1', 'fresh-0')"), 1);
    assert_int_equal(run(&ctx, NULL,
                         "UPDATE nubo_commits SET updated_at = NOW() - INTERVAL 3 HOUR WHERE slot "
                         "NOT IN ('old-0', 'gone-0', 'gone-1', 'fresh-0')",
                         ""),
                     1);
    assert_int_equal(nb_maria_begin(db, &ctx), 0);
    assert_int_equal(run(&ctx, NULL, "INSERT INTO t (\"key\") VALUES ('marker-2')", ""), 1);
    assert_int_equal(nb_maria_commit(db, &ctx), 0);

    /* below the minimum bound: pruned as at the minimum (10 minutes old goes) */
    assert_int_equal(nb_maria_prune_commit_markers(db, &ctx, 1), 2);
    assert_int_equal(count_slots("slot IN ('gone-0', 'gone-1')"), 0);
    assert_int_equal(count_slots("slot IN ('old-0', 'fresh-0')"), 2);
    assert_int_equal(count_slots("updated_at > NOW() - INTERVAL 1 MINUTE"), 3);
    assert_int_equal(nb_maria_prune_commit_markers(db, &ctx, 3600), 0);
    assert_false(nb_ctx_failed(&ctx));
    /* a commit whose answer is lost still reads its marker back */
    assert_int_equal(nb_maria_begin(db, &ctx), 0);
    assert_int_equal(run(&ctx, NULL, "INSERT INTO t (\"key\") VALUES ('marker-3')", ""), 1);
    nb_maria_test_lose_commit_answer(true);
    assert_int_equal(nb_maria_commit(db, &ctx), 0);
    assert_int_equal(count_key("marker-3"), 1);
    assert_int_equal(run(&ctx, NULL, "DROP TABLE nubo_commits", ""), 0);
}

/* A connection lost inside a transaction: that statement, every later one
 * (nothing runs autocommitted on a new connection) and the commit fail
 * with a 500; nothing of the transaction is written; the next one works. */
static void test_lost_in_transaction(void **state)
{
    (void)state;
    if (!db)
        skip();
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(nb_maria_begin(db, &ctx), 0);
    assert_int_equal(run(&ctx, NULL, "INSERT INTO t (\"key\") VALUES ('lost-1')", ""), 1);
    json_t *rows = json_array();
    assert_int_equal(run(&ctx, rows, "SELECT CONNECTION_ID() AS id", ""), 0);
    long long id = json_integer_value(json_object_get(json_array_get(rows, 0), "id"));
    json_decref(rows);
    pthread_t th;
    void *rc;
    pthread_create(&th, NULL, kill_one, &id);
    pthread_join(th, &rc);
    assert_null(rc);
    assert_int_equal(run(&ctx, NULL, "INSERT INTO t (\"key\") VALUES ('lost-2')", ""), -1);
    assert_int_equal(nb_ctx_status(&ctx), 500);
    assert_false(nb_maria_conflict());
    assert_int_equal(run(&ctx, NULL, "INSERT INTO t (\"key\") VALUES ('lost-3')", ""), -1);
    assert_int_equal(nb_maria_begin(db, &ctx), -1); /* no savepoint either */
    assert_int_equal(nb_maria_commit(db, &ctx), -1);
    nb_maria_rollback(db); /* none open any more: a no-op */
    assert_int_equal(count_key("lost-1") + count_key("lost-2") + count_key("lost-3"), 0);
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(nb_maria_begin(db, &ctx), 0);
    assert_int_equal(run(&ctx, NULL, "INSERT INTO t (\"key\") VALUES ('after-lost')", ""), 1);
    assert_int_equal(nb_maria_commit(db, &ctx), 0);
    assert_int_equal(count_key("after-lost"), 1);
}

/* Two transactions lock 'dl-a' and 'dl-b' in opposite orders. */
struct dl_arg {
    const char *first, *second;
    pthread_barrier_t *bar;
    int rc, after;
    bool conflict;
};

static void *deadlocker(void *arg)
{
    struct dl_arg *a = arg;
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    if (nb_maria_begin(db, &ctx) < 0)
        return (void *)1;
    if (run(&ctx, NULL, "UPDATE t SET n = 7 WHERE \"key\" = ?", "s", a->first) != 1)
        return (void *)2;
    pthread_barrier_wait(a->bar);
    a->rc = run(&ctx, NULL, "UPDATE t SET n = 8 WHERE \"key\" = ?", "s", a->second);
    a->conflict = nb_maria_conflict();
    if (a->rc < 0) {
        /* the server rolled the transaction back: this must not autocommit */
        a->after = run(&ctx, NULL, "UPDATE t SET n = 9 WHERE \"key\" = ?", "s", a->first);
        nb_maria_rollback(db);
        return NULL;
    }
    return nb_maria_commit(db, &ctx) < 0 ? (void *)3 : NULL;
}

/* A real deadlock (1213): the victim's statement fails with the conflict
 * flagged for its caller to redo, and nothing after it runs. */
static void test_deadlock(void **state)
{
    (void)state;
    if (!db)
        skip();
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(
        run(&ctx, NULL, "INSERT INTO t (\"key\", n) VALUES ('dl-a', 0), ('dl-b', 0)", ""), 2);
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, 2);
    struct dl_arg a = {"dl-a", "dl-b", &bar, 0, 0, false};
    struct dl_arg b = {"dl-b", "dl-a", &bar, 0, 0, false};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, deadlocker, &a);
    pthread_create(&tb, NULL, deadlocker, &b);
    void *ra, *rb;
    pthread_join(ta, &ra);
    pthread_join(tb, &rb);
    pthread_barrier_destroy(&bar);
    assert_null(ra);
    assert_null(rb);
    assert_true((a.rc < 0) != (b.rc < 0)); /* one victim */
    struct dl_arg *v = a.rc < 0 ? &a : &b, *w = a.rc < 0 ? &b : &a;
    assert_true(v->conflict);
    assert_false(w->conflict);
    assert_int_equal(v->after, -1);
    json_t *rows = json_array();
    assert_int_equal(run(&ctx, rows, "SELECT n FROM t WHERE \"key\" IN ('dl-a', 'dl-b')", ""), 0);
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) /* the winner's 7 and 8, none of the victim's 9 */
        assert_true(json_integer_value(json_object_get(r, "n")) != 9);
    json_decref(rows);
    assert_int_equal(nb_maria_begin(db, &ctx), 0); /* an outermost begin resets the flag */
    assert_false(nb_maria_conflict());
    nb_maria_rollback(db);
}

static int teardown_server(void **state)
{
    (void)state;
    if (db) {
        struct nb_ctx ctx;
        nb_ctx_init_system(&ctx, NULL);
        run(&ctx, NULL, "DROP TABLE t", "");
    }
    nb_maria_close(db);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_interpolate),
        cmocka_unit_test(test_error_classes),
        cmocka_unit_test(test_statements),
        cmocka_unit_test(test_transactions),
        cmocka_unit_test(test_pool_threads),
        cmocka_unit_test(test_retry_lock_wait),
        cmocka_unit_test(test_reconnect),
        cmocka_unit_test(test_lost_in_transaction),
        cmocka_unit_test(test_deadlock),
        cmocka_unit_test(test_commit_answer_lost),
        cmocka_unit_test(test_commit_markers_pruned),
    };
    return cmocka_run_group_tests(tests, setup_server, teardown_server);
}
