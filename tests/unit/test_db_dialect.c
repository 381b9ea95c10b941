/* test_db_dialect.c - db.h's dialect helpers (nb_db_insert_ignore,
 * nb_db_upsert, nb_db_json_value, nb_db_json_each, nb_db_for_update) and the
 * portable forms the call sites use ("key" quoted, LIKE … ESCAPE,
 * LIKE '%' || ? || '%', group_concat(x)) on SQLite, and on MariaDB too when
 * NUBO_TEST_MARIADB_URL names a scratch database (tests/db/mariadb.sh
 * start; createdb nubo_unit). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "common/ctx.h"
#include "db/db.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void check(struct nb_db *db)
{
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    char sql[512];
    nb_db_exec(db, &ctx, "DROP TABLE IF EXISTS dialect_t", "");
    assert_int_equal(
        nb_db_exec(db, &ctx,
                   nb_db_is_mariadb(db)
                       ? "CREATE TABLE dialect_t (a BIGINT, \"key\" VARCHAR(64), "
                         "value VARCHAR(64), doc MEDIUMTEXT, PRIMARY KEY (a, \"key\"))"
                       : "CREATE TABLE dialect_t (a INTEGER, \"key\" TEXT, value TEXT, "
                         "doc TEXT, PRIMARY KEY (a, \"key\"))",
                   ""),
        0);
    const char *ins = "INTO dialect_t (a, \"key\", value, doc) VALUES (?, ?, ?, ?)";
    assert_int_equal(nb_db_insert_ignore(db, &ctx, ins, "isss", 1LL, "k", "v1", "{\"h\":\"x\"}"),
                     1);
    assert_int_equal(nb_db_insert_ignore(db, &ctx, ins, "isss", 1LL, "k", "v2", "{}"), 0);
    assert_false(nb_ctx_failed(&ctx));
    nb_db_upsert(db, sql, sizeof(sql),
                 "INSERT INTO dialect_t (a, \"key\", value, doc) VALUES (?, ?, ?, ?)", "a, \"key\"",
                 "value, doc", NULL);
    assert_true(nb_db_exec(db, &ctx, sql, "isss", 1LL, "k", "v3", "{\"h\":\"y\"}") > 0);
    assert_int_equal(nb_db_exec(db, &ctx, sql, "isss", 2LL, "password_0", "p", "[]"), 1);
    json_t *r = nb_db_row(db, &ctx, "SELECT value, doc FROM dialect_t WHERE a = 1", "");
    assert_non_null(r);
    assert_string_equal(json_string_value(json_object_get(r, "value")), "v3");
    json_decref(r);
    snprintf(sql, sizeof(sql), "SELECT %s(doc, '$.h') AS h FROM dialect_t WHERE %s(doc, '$.h') = ?",
             nb_db_json_value(db), nb_db_json_value(db));
    r = nb_db_row(db, &ctx, sql, "s", "y");
    assert_non_null(r);
    assert_string_equal(json_string_value(json_object_get(r, "h")), "y");
    json_decref(r);
    snprintf(sql, sizeof(sql),
             "SELECT COUNT(*) FROM dialect_t WHERE \"key\" IN (SELECT value FROM %s)",
             nb_db_json_each(db));
    json_t *keys = json_pack("[s,s,s]", "k", "password_0", "nope");
    assert_int_equal(nb_db_int(db, &ctx, -1, sql, "j", keys), 2);
    json_decref(keys);
    assert_int_equal(nb_db_int(db, &ctx, -1,
                               "SELECT COUNT(*) FROM dialect_t WHERE \"key\" LIKE 'password!_%' "
                               "ESCAPE '!'",
                               ""),
                     1);
    assert_int_equal(nb_db_int(db, &ctx, -1,
                               "SELECT COUNT(*) FROM dialect_t WHERE value LIKE '%' || ? || '%'",
                               "s", "3"),
                     1);
    r = nb_db_row(db, &ctx, "SELECT group_concat(\"key\") AS ks FROM dialect_t", "");
    assert_non_null(r);
    const char *ks = json_string_value(json_object_get(r, "ks"));
    assert_true(!strcmp(ks, "k,password_0") || !strcmp(ks, "password_0,k"));
    json_decref(r);
    assert_int_equal(nb_db_begin(db, &ctx), 0);
    snprintf(sql, sizeof(sql),
             "SELECT a, (SELECT COUNT(*) FROM dialect_t d WHERE d.a = t.a%s) AS n FROM "
             "dialect_t t WHERE a = ?%s",
             nb_db_for_update(db), nb_db_for_update(db));
    assert_int_equal(nb_db_int(db, &ctx, -1, sql, "i", 1LL), 1);
    assert_int_equal(nb_db_commit(db, &ctx), 0);
    assert_false(nb_ctx_failed(&ctx));
    nb_db_exec(db, &ctx, "DROP TABLE dialect_t", "");
}

static void test_sqlite(void **state)
{
    (void)state;
    char path[] = "/tmp/nubo-dialect-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    struct nb_db *db = nb_db_open(path);
    assert_non_null(db);
    assert_false(nb_db_is_mariadb(db));
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
    assert_true(nb_db_is_mariadb(db));
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
