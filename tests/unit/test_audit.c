/* test_audit.c - unit tests of the cloud audit's pure parts
 * (compute/audit.h): which migration statuses still move (a stuck one is
 * reported), which may hold allocations (an orphan is not reported while
 * they do), and the age of a stored timestamp; and a finding's shape. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "common/json.h"
#include "compute/audit.h"

#include <string.h>

static void test_moving(void **state)
{
    (void)state;
    const char *live[] = {"accepted", "queued", "preparing", "running", "post-migrating"};
    const char *cold[] = {"pre-migrating", "migrating", "post-migrating", "confirming",
                          "reverting"};
    for (size_t i = 0; i < 5; i++) {
        assert_true(nb_audit_migration_moving(live[i]));
        assert_true(nb_audit_migration_moving(cold[i]));
    }
    const char *final[] = {"completed", "confirmed", "reverted", "error",
                           "failed",    "cancelled", "finished", "done"};
    for (size_t i = 0; i < sizeof(final) / sizeof(final[0]); i++)
        assert_false(nb_audit_migration_moving(final[i]));
    assert_true(nb_audit_migration_moving("some-new-status"));
    assert_false(nb_audit_migration_moving(NULL));
}

static void test_holds(void **state)
{
    (void)state;
    assert_true(nb_audit_migration_holds("running"));
    assert_true(nb_audit_migration_holds("finished")); /* waits for confirm */
    assert_true(nb_audit_migration_holds("done"));     /* evacuation: source clean-up */
    assert_false(nb_audit_migration_holds("confirmed"));
    assert_false(nb_audit_migration_holds("error"));
    assert_false(nb_audit_migration_holds("completed"));
}

static void test_age(void **state)
{
    (void)state;
    double t = nb_audit_age("2020-01-01T00:00:00.000000", 1577836800.0 + 90);
    assert_true(t > 89.5 && t < 90.5);
    assert_true(nb_audit_age(NULL, 1e9) < 0);
    assert_true(nb_audit_age("", 1e9) < 0);
    assert_true(nb_audit_age("not a time", 1e9) < 0);
}

static void test_add(void **state)
{
    (void)state;
    json_t *out = json_array();
    nb_audit_add(out, "PROBLEM", "orphan allocation", "u1",
                 json_pack("{s:s}", "action", "delete_allocations"), "held %d", 2);
    nb_audit_add(out, "OK", "stuck task", NULL, NULL, "none");
    assert_int_equal(json_array_size(out), 2);
    json_t *f = json_array_get(out, 0);
    assert_string_equal(nb_json_str(f, "evidence"), "held 2");
    assert_string_equal(nb_json_str(f, "subject"), "u1");
    assert_string_equal(nb_json_str(json_object_get(f, "fix"), "action"), "delete_allocations");
    assert_string_equal(nb_json_str(json_array_get(out, 1), "subject"), "");
    assert_null(json_object_get(json_array_get(out, 1), "fix"));
    json_decref(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_moving),
        cmocka_unit_test(test_holds),
        cmocka_unit_test(test_age),
        cmocka_unit_test(test_add),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
