/* test_db_readers.c - SQLite's read connections (db/sqlite.c): a read
 * outside the caller's transaction sees the last committed state without
 * waiting for another thread's transaction, a thread's own transaction
 * reads its own writes, and a writing statement run as a query still runs
 * (on the main connection). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "common/ctx.h"
#include "db/db.h"

#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct nb_db *db;
static sem_t written, checked;

static long long count(void)
{
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    return nb_db_int(db, &ctx, -1, "SELECT COUNT(*) FROM readers_t", "");
}

/* Inserts a row in a transaction and holds it open until the main thread
 * has read. */
static void *writer(void *arg)
{
    (void)arg;
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(nb_db_begin(db, &ctx), 0);
    assert_int_equal(nb_db_exec(db, &ctx, "INSERT INTO readers_t (a) VALUES (2)", ""), 1);
    assert_int_equal(count(), 2); /* its own write, inside its transaction */
    sem_post(&written);
    sem_wait(&checked);
    assert_int_equal(nb_db_commit(db, &ctx), 0);
    return NULL;
}

static void test_readers(void **state)
{
    (void)state;
    char path[] = "/tmp/nubo-readers-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    db = nb_db_open(path);
    assert_non_null(db);
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(nb_db_exec(db, &ctx, "CREATE TABLE readers_t (a INTEGER)", ""), 0);
    assert_int_equal(nb_db_exec(db, &ctx, "INSERT INTO readers_t (a) VALUES (1)", ""), 1);
    assert_int_equal(count(), 1); /* read back at once */

    sem_init(&written, 0, 0);
    sem_init(&checked, 0, 0);
    pthread_t t;
    pthread_create(&t, NULL, writer, NULL);
    sem_wait(&written);
    assert_int_equal(count(), 1); /* not waiting for, nor seeing, the open transaction */
    sem_post(&checked);
    pthread_join(t, NULL);
    assert_int_equal(count(), 2);

    /* a writing statement run as a query */
    json_t *rows = nb_db_rows(db, &ctx, "INSERT INTO readers_t (a) VALUES (3) RETURNING a", "");
    assert_non_null(rows);
    assert_int_equal(json_array_size(rows), 1);
    json_decref(rows);
    assert_int_equal(count(), 3);
    /* reads inside the main thread's transaction see its writes */
    assert_int_equal(nb_db_begin(db, &ctx), 0);
    assert_int_equal(nb_db_exec(db, &ctx, "DELETE FROM readers_t", ""), 3);
    assert_int_equal(count(), 0);
    nb_db_rollback(db);
    assert_int_equal(count(), 3);
    assert_false(nb_ctx_failed(&ctx));

    nb_db_close(db);
    unlink(path);
    char aux[64];
    snprintf(aux, sizeof(aux), "%s-wal", path);
    unlink(aux);
    snprintf(aux, sizeof(aux), "%s-shm", path);
    unlink(aux);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_readers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
