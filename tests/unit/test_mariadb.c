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

/* One side of a deadlock: its first row, then the other side's. */
struct side {
    const char *first, *second;
    volatile int *mine, *other;
    int victim, later, commit;
};

static void *side_main(void *arg)
{
    struct side *s = arg;
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    if (nb_maria_begin(db, &ctx) < 0 ||
        run(&ctx, NULL, "UPDATE t SET n = n + 1 WHERE \"key\" = ?", "s", s->first) != 1)
        return (void *)1;
    *s->mine = 1;
    while (!*s->other)
        sched_yield();
    s->victim = run(&ctx, NULL, "UPDATE t SET n = n + 1 WHERE \"key\" = ?", "s", s->second) < 0;
    nb_ctx_init_system(&ctx, NULL);
    if (s->victim) /* InnoDB rolled it all back: nothing more of it may commit */
        s->later = run(&ctx, NULL, "UPDATE t SET n = 100 WHERE \"key\" = 'dc'", "");
    s->commit = nb_maria_commit(db, &ctx);
    return NULL;
}

/* A deadlock (1213) inside a transaction: the victim's later statements
 * and its commit fail (none runs on its own after InnoDB's rollback); the
 * other side commits. */
static void test_deadlock_fails_the_rest_of_the_transaction(void **state)
{
    (void)state;
    if (!db)
        skip();
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    assert_true(run(&ctx, NULL,
                    "INSERT INTO t (\"key\", n) VALUES ('da', 0), ('db', 0), ('dc', 0) ON "
                    "DUPLICATE KEY UPDATE n = 0",
                    "") >= 0);
    volatile int a_locked = 0, b_locked = 0;
    struct side a = {"da", "db", &a_locked, &b_locked, 0, 0, 0};
    struct side b = {"db", "da", &b_locked, &a_locked, 0, 0, 0};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, side_main, &a);
    pthread_create(&tb, NULL, side_main, &b);
    void *ra, *rb;
    pthread_join(ta, &ra);
    pthread_join(tb, &rb);
    assert_null(ra);
    assert_null(rb);
    assert_int_equal(a.victim + b.victim, 1);
    struct side *victim = a.victim ? &a : &b, *winner = a.victim ? &b : &a;
    assert_int_equal(victim->later, -1);
    assert_int_equal(victim->commit, -1);
    assert_int_equal(winner->commit, 0);
    json_t *rows = json_array();
    assert_int_equal(run(&ctx, rows,
                         "SELECT \"key\", n FROM t WHERE \"key\" IN ('da', 'db', 'dc') ORDER BY 1",
                         ""),
                     0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(json_integer_value(json_object_get(json_array_get(rows, (size_t)i), "n")),
                         i < 2 ? 1 : 0);
    json_decref(rows);
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
        cmocka_unit_test(test_deadlock_fails_the_rest_of_the_transaction),
    };
    return cmocka_run_group_tests(tests, setup_server, teardown_server);
}
