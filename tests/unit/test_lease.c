/* test_lease.c - db/lease.h: acquire, renew, refusal while held, take-over
 * of an expired lease, forced take-over, release (deleted or expired), on
 * SQLite, and on MariaDB too when NUBO_TEST_MARIADB_URL names a scratch
 * database (tests/db/mariadb.sh start; createdb nubo_unit). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "common/ctx.h"
#include "common/json.h"
#include "db/db.h"
#include "db/lease.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The row of lease name, or NULL. New ref. */
static json_t *lease(struct nb_db *db, const char *name)
{
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    json_t *rows = nb_lease_list(db, &ctx);
    assert_non_null(rows);
    json_t *found = NULL;
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r)
        if (!strcmp(nb_json_str(r, "name"), name))
            found = json_incref(r);
    json_decref(rows);
    return found;
}

static void check(struct nb_db *db)
{
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    assert_true(nb_db_sync(db) >= 0);
    nb_db_exec(db, &ctx, "DELETE FROM nubo_leases", "");
    assert_int_equal(nb_lease_acquire(db, &ctx, "l", "a", 30), 1);
    assert_int_equal(nb_lease_acquire(db, &ctx, "l", "a", 30), 1); /* renewed */
    assert_int_equal(nb_lease_acquire(db, &ctx, "l", "b", 30), 0); /* held */
    json_t *row = lease(db, "l");
    assert_string_equal(nb_json_str(row, "holder"), "a");
    double left = json_number_value(json_object_get(row, "remaining"));
    assert_true(left > 25 && left <= 30.5);
    json_decref(row);
    /* not expired: no take-over unless forced */
    assert_int_equal(nb_lease_take_over(db, &ctx, "l", "a", "b", 30, false), 0);
    assert_int_equal(nb_lease_take_over(db, &ctx, "l", "x", "b", 30, true), 0); /* not x's */
    assert_int_equal(nb_lease_take_over(db, &ctx, "l", "a", "b", 30, true), 1);
    assert_int_equal(nb_lease_acquire(db, &ctx, "l", "a", 30), 0);
    /* expired: anyone acquires it, or takes it over */
    assert_int_equal(nb_lease_acquire(db, &ctx, "e", "a", -1), 1);
    row = lease(db, "e");
    assert_true(json_number_value(json_object_get(row, "remaining")) < 0);
    json_decref(row);
    assert_int_equal(nb_lease_take_over(db, &ctx, "e", "a", "c", 30, false), 1);
    assert_int_equal(nb_lease_acquire(db, &ctx, "e", "a", 30), 0);
    /* release: only by its holder; expire leaves the row, expired */
    assert_int_equal(nb_lease_release(db, &ctx, "e", "a", false), 0);
    assert_int_equal(nb_lease_release(db, &ctx, "e", "c", true), 1);
    row = lease(db, "e");
    assert_non_null(row);
    assert_true(json_number_value(json_object_get(row, "remaining")) < 0);
    json_decref(row);
    assert_int_equal(nb_lease_acquire(db, &ctx, "e", "d", 30), 1);
    assert_int_equal(nb_lease_release(db, &ctx, "e", "d", false), 1);
    assert_null(lease(db, "e"));
    assert_false(nb_ctx_failed(&ctx));
    assert_int_equal(nb_db_retryable_failures(), 0);
}

static void test_sqlite(void **state)
{
    (void)state;
    char path[] = "/tmp/nubo-lease-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    struct nb_db *db = nb_db_open(path);
    assert_non_null(db);
    check(db);
    nb_db_close(db);
    unlink(path);
    char aux[64];
    snprintf(aux, sizeof(aux), "%s-wal", path);
    unlink(aux);
    snprintf(aux, sizeof(aux), "%s-shm", path);
    unlink(aux);
}

static void test_mariadb(void **state)
{
    (void)state;
    const char *url = getenv("NUBO_TEST_MARIADB_URL");
    if (!url)
        skip();
    struct nb_db *db = nb_db_open(url);
    assert_non_null(db);
    check(db);
    nb_db_close(db);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sqlite),
        cmocka_unit_test(test_mariadb),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
