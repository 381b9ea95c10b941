/* test_usage.c - the date arithmetic of the usage APIs
 * (compute/api/usage_period.h): the date-times os-simple-tenant-usage
 * takes, the hours of an instance's lifetime inside a period, the window
 * of instances a report lists, and the audit periods of
 * os-instance_usage_audit_log. The expected values are what Python's
 * datetime and Nova's own functions give for the same input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "compute/api/usage_period.h"

#include <stdio.h>
#include <string.h>

/* 2026-12-08T01:02:03 UTC in microseconds */
#define T0 1796691723000000LL
#define H (3600LL * 1000000)
#define DAY (24 * H)

static void accepted(const char *s, int64_t want)
{
    int64_t t = 0;
    if (nb_usage_parse_period_time(s, &t) != 0)
        fail_msg("'%s' refused", s);
    if (t != want)
        fail_msg("'%s': %lld, want %lld", s, (long long)t, (long long)want);
}

static void refused(const char *s)
{
    int64_t t;
    if (nb_usage_parse_period_time(s, &t) == 0)
        fail_msg("'%s' accepted as %lld", s, (long long)t);
}

/* Nova's three formats as Python's strptime matches them. */
static void test_period_times(void **state)
{
    (void)state;
    accepted("2026-12-08T01:02:03", T0);
    accepted("2026-12-08T01:02:03.5", T0 + 500000);
    accepted("2026-12-08 01:02:03.123456", T0 + 123456);
    accepted("2026-1-8T1:2:3", 1767834123000000LL);
    accepted("2026-12-08t01:02:03", T0);               /* letters in any case */
    accepted("2026-12-08 \t 01:02:03.1", T0 + 100000); /* a space: any white space */
    accepted("2026-12- 8T01:02:03", T0);               /* %d takes " [1-9]" */
    accepted("2024-02-29T00:00:00", 1709164800000000LL);
    refused("2026-12-08 01:02:03"); /* the space format needs the fraction */
    refused("2026-12-08T01:02:03Z");
    refused("2026-12-08T01:02:03+00:00");
    refused("2026-02-30T00:00:00");
    refused("2100-02-29T00:00:00");
    refused("2026-12-08T24:00:00");
    refused("2026-12-08T01:02:60");
    refused("2026-12-08T01:02:03.1234567");
    refused("2026-12-08T01:02:03.");
    refused("0000-01-01T00:00:00");
    refused("2026-13-01T00:00:00");
    refused("2026-00-08T00:00:00");
    refused("26-12-08T00:00:00");
    refused("2026-12-08");
    refused("2026-12-08T01:02:03 ");
    refused(" 2026-12-08T01:02:03");
    refused("");
    int64_t t;
    assert_int_equal(nb_usage_parse_period_time(NULL, &t), -1);
}

static void test_audit_times(void **state)
{
    (void)state;
    int64_t t;
    assert_int_equal(nb_usage_parse_audit_time("2026-12-08 01:02:03", &t), 0);
    assert_true(t == T0);
    assert_int_equal(nb_usage_parse_audit_time("2026-12-08 01:02:03.25", &t), 0);
    assert_true(t == T0 + 250000);
    assert_int_equal(nb_usage_parse_audit_time("invalid_time", &t), -1);
    assert_int_equal(nb_usage_parse_audit_time("2026-12-08T01:02:03", &t), -1);
    assert_int_equal(nb_usage_parse_audit_time("2026-12-08 01:02", &t), -1);
}

static void test_formats(void **state)
{
    (void)state;
    char b[32];
    assert_string_equal(nb_usage_format_time(T0, b), "2026-12-08T01:02:03.000000");
    assert_string_equal(nb_usage_format_time(T0 + 123456, b), "2026-12-08T01:02:03.123456");
    assert_string_equal(nb_usage_format_time(0, b), "1970-01-01T00:00:00.000000");
    assert_string_equal(nb_usage_format_pystr(T0, b), "2026-12-08 01:02:03");
    assert_string_equal(nb_usage_format_pystr(T0 + 123456, b), "2026-12-08 01:02:03.123456");
    /* the round trip the report's SQL window relies on */
    int64_t t;
    assert_int_equal(nb_usage_parse_period_time(nb_usage_format_time(T0 + 7, b), &t), 0);
    assert_true(t == T0 + 7);
}

/* Nova's _hours_for over the period [2026-12-01, 2026-12-08]. */
static void test_hours(void **state)
{
    (void)state;
    int64_t start = 1796083200000000LL, stop = start + 7 * DAY;
    int64_t none = NB_USAGE_NONE;
    /* running since before the period: the whole period */
    assert_true(nb_usage_hours(start - 30 * DAY, none, start, stop) == 168.0);
    /* launched and terminated inside it */
    assert_true(nb_usage_hours(start + DAY + 10 * H, start + DAY + 11 * H + H / 2, start, stop) ==
                1.5);
    /* terminated before it, launched after it, never launched */
    assert_true(nb_usage_hours(start - 30 * DAY, start - DAY, start, stop) == 0);
    assert_true(nb_usage_hours(stop + DAY, none, start, stop) == 0);
    assert_true(nb_usage_hours(none, none, start, stop) == 0);
    /* terminated after it: up to its end; one microsecond as Python says */
    assert_true(nb_usage_hours(stop - 1, stop + DAY, start, stop) == 2.7777777777777777e-10);
    assert_true(nb_usage_hours(start + 2 * DAY + 1, start + 2 * DAY + 2, start, stop) ==
                2.7777777777777777e-10);
    /* running, launched half-way */
    assert_true(nb_usage_hours(stop - 84 * H, none, start, stop) == 84.0);
}

/* get_active_by_window_joined: launched < end, terminated NULL or > begin. */
static void test_window(void **state)
{
    (void)state;
    int64_t b = T0, e = T0 + DAY, none = NB_USAGE_NONE;
    assert_true(nb_usage_in_window(b - H, none, b, e));
    assert_true(nb_usage_in_window(b - H, b + 1, b, e));
    assert_false(nb_usage_in_window(b - H, b, b, e)); /* terminated at the start */
    assert_false(nb_usage_in_window(e, none, b, e));  /* launched at the end */
    assert_true(nb_usage_in_window(e - 1, none, b, e));
    assert_false(nb_usage_in_window(none, none, b, e)); /* never launched */
}

static void period(const char *unit, int64_t before, int64_t want_begin, int64_t want_end)
{
    int64_t b = 0, e = 0;
    if (nb_usage_audit_period(unit, before, &b, &e) != 0)
        fail_msg("%s: refused", unit);
    if (b != want_begin || e != want_end) {
        char x[32], y[32];
        fail_msg("%s before %lld: %s .. %s", unit, (long long)before, nb_usage_format_pystr(b, x),
                 nb_usage_format_pystr(e, y));
    }
}

/* The periods Nova's last_completed_audit_period gives. */
static void test_audit_period(void **state)
{
    (void)state;
    int64_t t;
    /* 2026-12-08 00:24:32 */
    int64_t now = 1796689472000000LL;
    period("month", now, 1793491200000000LL, 1796083200000000LL); /* Nov 1 .. Dec 1 */
    period("month", 1796083200000000LL, 1790812800000000LL, 1793491200000000LL);
    assert_int_equal(nb_usage_parse_audit_time("2026-01-01 00:00:00", &t), 0);
    period("month", t, 1761955200000000LL, 1764547200000000LL); /* 2025-11-01 .. 12-01 */
    assert_int_equal(nb_usage_parse_audit_time("2026-01-10 00:00:00", &t), 0);
    period("month@15", t, 1763164800000000LL, 1765756800000000LL);
    assert_int_equal(nb_usage_parse_audit_time("2026-12-08 00:00:00", &t), 0);
    period("year", t, 1735689600000000LL, 1767225600000000LL);
    assert_int_equal(nb_usage_parse_audit_time("2026-02-01 00:00:00", &t), 0);
    period("year@3", t, 1709251200000000LL, 1740787200000000LL);
    assert_int_equal(nb_usage_parse_audit_time("2026-01-01 00:00:00", &t), 0);
    period("year", t, 1704067200000000LL, 1735689600000000LL);
    assert_int_equal(nb_usage_parse_audit_time("2026-03-01 05:00:00", &t), 0);
    period("day", t, 1772236800000000LL, 1772323200000000LL);
    assert_int_equal(nb_usage_parse_audit_time("2026-03-01 17:59:00", &t), 0);
    period("day@18", t, 1772215200000000LL, 1772301600000000LL);
    period("hour", now, 1796684400000000LL, 1796688000000000LL);
    period("hour@30", now, 1796682600000000LL, 1796686200000000LL);
    assert_int_equal(nb_usage_parse_audit_time("2026-12-08 01:00:00", &t), 0);
    period("hour", t, 1796684400000000LL, 1796688000000000LL);
    /* what Nova's option refuses, and offsets that make no date */
    int64_t b, e;
    assert_int_equal(nb_usage_audit_period("week", now, &b, &e), -1);
    assert_int_equal(nb_usage_audit_period("month@", now, &b, &e), -1);
    assert_int_equal(nb_usage_audit_period("month@x", now, &b, &e), -1);
    assert_int_equal(nb_usage_audit_period("month@31", now, &b, &e), -1); /* no 31 November */
    assert_int_equal(nb_usage_audit_period("day@24", now, &b, &e), -1);
    assert_int_equal(nb_usage_audit_period("year@13", now, &b, &e), -1);
    assert_int_equal(nb_usage_audit_period(NULL, now, &b, &e), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_period_times), cmocka_unit_test(test_audit_times),
        cmocka_unit_test(test_formats),      cmocka_unit_test(test_hours),
        cmocka_unit_test(test_window),       cmocka_unit_test(test_audit_period),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
