/* test_db_url.c - [database] connection URLs (db/url.h): the SQLite forms
 * nubo has always read and the MariaDB forms operators paste from nova.conf. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "db/url.h"

#include <string.h>

static struct nb_db_url parse_ok(const char *conn)
{
    struct nb_db_url u;
    char err[256];
    int rc = nb_db_url_parse(conn, "/var/lib/x", &u, err, sizeof(err));
    if (rc != 0)
        fail_msg("%s: %s", conn, err);
    return u;
}

static void parse_bad(const char *conn, const char *msg_part)
{
    struct nb_db_url u;
    char err[256];
    assert_int_equal(nb_db_url_parse(conn, "/var/lib/x", &u, err, sizeof(err)), -1);
    if (!strstr(err, msg_part))
        fail_msg("%s: message '%s' lacks '%s'", conn, err, msg_part);
}

static void test_sqlite_forms(void **state)
{
    (void)state;
    struct nb_db_url u = parse_ok(NULL);
    assert_int_equal(u.kind, NB_DB_SQLITE);
    assert_string_equal(u.path, "/var/lib/x/nubo.sqlite");
    u = parse_ok("");
    assert_string_equal(u.path, "/var/lib/x/nubo.sqlite");
    u = parse_ok("sqlite:///srv/nubo/nubo.sqlite");
    assert_int_equal(u.kind, NB_DB_SQLITE);
    assert_string_equal(u.path, "/srv/nubo/nubo.sqlite");
    u = parse_ok("sqlite:////abs"); /* SQLAlchemy's absolute form: same file */
    assert_string_equal(u.path, "//abs");
    u = parse_ok("/plain/path.db");
    assert_string_equal(u.path, "/plain/path.db");
    parse_bad("postgresql://u:p@h/db", "not a SQLite");
    parse_bad("relative.db", "not a SQLite");
}

static void test_mariadb_tcp(void **state)
{
    (void)state;
    struct nb_db_url u = parse_ok("mysql+pymysql://nova:secret@127.0.0.1:3307/nova?charset=utf8");
    assert_int_equal(u.kind, NB_DB_MARIADB);
    assert_string_equal(u.user, "nova");
    assert_string_equal(u.password, "secret");
    assert_string_equal(u.host, "127.0.0.1");
    assert_int_equal(u.port, 3307);
    assert_string_equal(u.database, "nova");
    assert_string_equal(u.charset, "utf8");
    assert_int_equal(u.ignored, 0);
    u = parse_ok("mysql://nova@db.example.org/nova_api");
    assert_string_equal(u.user, "nova");
    assert_string_equal(u.password, "");
    assert_string_equal(u.host, "db.example.org");
    assert_int_equal(u.port, 0);
    assert_string_equal(u.database, "nova_api");
    u = parse_ok("mariadb://h/db");
    assert_string_equal(u.user, "");
    assert_string_equal(u.host, "h");
    u = parse_ok("mysql+mysqldb://u:p@[::1]:3310/db");
    assert_string_equal(u.host, "::1");
    assert_int_equal(u.port, 3310);
}

static void test_mariadb_escapes_and_params(void **state)
{
    (void)state;
    /* percent-decoded user and password; a raw '@' in the password splits
     * at the last '@' as SQLAlchemy does */
    struct nb_db_url u = parse_ok("mysql+pymysql://no%40va:p%2Fa%3As@h/nova");
    assert_string_equal(u.user, "no@va");
    assert_string_equal(u.password, "p/a:s");
    u = parse_ok("mysql://u:p@ss@h/nova");
    assert_string_equal(u.password, "p@ss");
    assert_string_equal(u.host, "h");
    u = parse_ok("mysql+pymysql://u:p@localhost/nova?unix_socket=/run/mysqld/mysqld.sock"
                 "&charset=utf8mb4&read_default_file=/etc/my.cnf&plugin=x");
    assert_string_equal(u.host, "localhost");
    assert_string_equal(u.unix_socket, "/run/mysqld/mysqld.sock");
    assert_string_equal(u.charset, "utf8mb4");
    assert_int_equal(u.ignored, 2);
    u = parse_ok("mysql://u:p@/nova?unix_socket=%2Fvar%2Ftmp%2Fs.sock");
    assert_string_equal(u.host, "");
    assert_string_equal(u.unix_socket, "/var/tmp/s.sock");
}

static void test_mariadb_bad(void **state)
{
    (void)state;
    parse_bad("mysql://u:p@h", "no database name");
    parse_bad("mysql://u:p@h?x=1/db", "no database name");
    parse_bad("mysql://u:p@h/", "bad database name");
    parse_bad("mysql://u:p@h/a/b", "bad database name");
    parse_bad("mysql://u:p@h:99999/db", "bad host or port");
    parse_bad("mysql://u:p@h:/db", "bad host or port");
    parse_bad("mysql://u:p@h:3x/db", "bad host or port");
    parse_bad("mysql://u:p@[::1/db", "bad host or port");
    parse_bad("mysql://u:p%zz@h/db", "bad user or password");
    parse_bad("mysql://u:p%2@h/db", "bad user or password");
    parse_bad("mysql://u:p@h/db?charset=latin1", "UTF-8 only");
}

static void test_display_hides_the_password(void **state)
{
    (void)state;
    char b[256];
    assert_string_equal(
        nb_db_url_display("mysql+pymysql://nova:s3cr@t@db:3306/nova?charset=utf8", b, sizeof(b)),
        "mysql+pymysql://nova:***@db:3306/nova?charset=utf8");
    assert_string_equal(nb_db_url_display("mysql://nova@db/nova", b, sizeof(b)),
                        "mysql://nova@db/nova");
    assert_string_equal(nb_db_url_display("mysql://db/nova", b, sizeof(b)), "mysql://db/nova");
    assert_string_equal(nb_db_url_display("/var/lib/nubo/nubo.sqlite", b, sizeof(b)),
                        "/var/lib/nubo/nubo.sqlite");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sqlite_forms),
        cmocka_unit_test(test_mariadb_tcp),
        cmocka_unit_test(test_mariadb_escapes_and_params),
        cmocka_unit_test(test_mariadb_bad),
        cmocka_unit_test(test_display_hides_the_password),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
