/* test_trace.c - unit tests of `nubo trace`'s log-line reading: oslo.log's
 * line shape (time, pid, level, logger, the request context, the message),
 * the role a line belongs to, and request IDs given with or without req-. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "cmd/trace.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static void test_parses_an_oslo_log_line(void **state)
{
    (void)state;
    struct nb_trace_rec r = {0};
    assert_true(nb_trace_parse_line(
        "2026-12-03 11:37:33.045 29722 ERROR nubo.compute.manager [req-8ef22e7b-2997-417c-9779-"
        "ef60fdb9b694 u p] [instance: d3fc] Build failed\n",
        &r));
    struct tm tm = {.tm_year = 126,
                    .tm_mon = 11,
                    .tm_mday = 3,
                    .tm_hour = 11,
                    .tm_min = 37,
                    .tm_sec = 33,
                    .tm_isdst = -1};
    double want = (double)mktime(&tm) + 0.045;
    assert_true(r.t > want - 1e-6 && r.t < want + 1e-6);
    assert_int_equal(r.pid, 29722);
    assert_string_equal(r.level, "ERROR");
    assert_string_equal(r.logger, "nubo.compute.manager");
    assert_string_equal(r.msg, "[instance: d3fc] Build failed");
    assert_true(r.failed);
    free(r.msg);
    assert_true(
        nb_trace_parse_line("2026-12-03 11:37:33.045 1 WARNING nubo.api.wsgi no context", &r));
    assert_string_equal(r.msg, "no context");
    assert_false(r.failed);
    free(r.msg);
    assert_false(nb_trace_parse_line("Traceback (most recent call last):", &r));
    assert_false(nb_trace_parse_line("2026-12-03 11:37:33 1 INFO x y", &r));
}

static void test_role_of_a_line(void **state)
{
    (void)state;
    char role[32];
    nb_trace_role("/x/nubo-compute.log", "nubo.compute.api", role, sizeof(role));
    assert_string_equal(role, "api");
    nb_trace_role("/x/nubo-compute.log", "nubo.compute.manager", role, sizeof(role));
    assert_string_equal(role, "compute");
    nb_trace_role("/x/nubo-api.log", "nubo.scheduler.filters", role, sizeof(role));
    assert_string_equal(role, "scheduler");
    nb_trace_role("/x/nubo-network.log.1", "dnsmasq", role, sizeof(role));
    assert_string_equal(role, "network");
    nb_trace_role("/x/other.log", "dnsmasq", role, sizeof(role));
    assert_string_equal(role, "dnsmasq");
}

static void test_request_ids(void **state)
{
    (void)state;
    char out[64];
    assert_true(nb_trace_request_id("req-8ef22e7b-2997-417c-9779-ef60fdb9b694", out));
    assert_string_equal(out, "req-8ef22e7b-2997-417c-9779-ef60fdb9b694");
    assert_true(nb_trace_request_id("8ef22e7b-2997-417c-9779-ef60fdb9b694", out));
    assert_string_equal(out, "req-8ef22e7b-2997-417c-9779-ef60fdb9b694");
    assert_false(nb_trace_request_id("req-8ef22e7b", out));
    assert_false(nb_trace_request_id("8ef22e7b2997417c9779ef60fdb9b694", out));
    assert_false(nb_trace_request_id("", out));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parses_an_oslo_log_line),
        cmocka_unit_test(test_role_of_a_line),
        cmocka_unit_test(test_request_ids),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
