/* usage_period.h - the date arithmetic of Nova's usage APIs
 * (os-simple-tenant-usage and os-instance_usage_audit_log): the date-time
 * strings they accept, worded and bounded as Python's strptime takes them,
 * the hours an instance's lifetime overlaps a period, and the audit period
 * last completed before a moment. Times are UTC microseconds since the
 * epoch (int64_t); pure functions, no state. Defined in usage_period.c;
 * private to compute/api (tests/unit/test_usage.c tests it). */
#ifndef NB_COMPUTE_API_USAGE_PERIOD_H
#define NB_COMPUTE_API_USAGE_PERIOD_H

#include <stdbool.h>
#include <stdint.h>

/* No time (a NULL column: never launched, never terminated). */
#define NB_USAGE_NONE INT64_MIN

/* Parses s with one strptime format of Python's, fmt built only of %Y %m
 * %d %H %M %S %f, literal characters (matched ignoring case) and spaces
 * (one or more white-space characters), the whole string matching, the
 * fields in Python's ranges and the date a real one (year 1-9999, no
 * 30 February, seconds below 60). 0 and *out, or -1. */
int nb_usage_strptime(const char *s, const char *fmt, int64_t *out);
/* The start/end of os-simple-tenant-usage (_parse_datetime): one of
 * "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M:%S.%f", "%Y-%m-%d %H:%M:%S.%f". */
int nb_usage_parse_period_time(const char *s, int64_t *out);
/* The {before_timestamp} of os-instance_usage_audit_log/{id}:
 * "%Y-%m-%d %H:%M:%S.%f" when s holds a '.', else "%Y-%m-%d %H:%M:%S". */
int nb_usage_parse_audit_time(const char *s, int64_t *out);

/* t as Nova serialises a datetime (oslo's PERFECT_TIME_FORMAT,
 * "%Y-%m-%dT%H:%M:%S.%f") into buf[32]; returns buf. */
char *nb_usage_format_time(int64_t t, char buf[32]);
/* t as Python's str(datetime): "%Y-%m-%d %H:%M:%S", then ".%f" only when
 * the microseconds are not 0, into buf[32]; returns buf. */
char *nb_usage_format_pystr(int64_t t, char buf[32]);

/* Nova's _hours_for: the hours of [launched, terminated) (terminated
 * NB_USAGE_NONE: still running) inside [start, stop]; 0 when never
 * launched, terminated before start or launched after stop. */
double nb_usage_hours(int64_t launched, int64_t terminated, int64_t start, int64_t stop);
/* Whether Nova's window query (get_active_by_window_joined) returns the
 * instance for [begin, end): launched before end and not terminated at or
 * before begin. */
bool nb_usage_in_window(int64_t launched, int64_t terminated, int64_t begin, int64_t end);

/* Nova's last_completed_audit_period: unit is "hour", "day", "month" or
 * "year", optionally "@<offset>" (minute, hour, day of month, month);
 * *begin and *end of the most recent period that ended before `before`.
 * 0, or -1 for a unit Nova's option would refuse or an offset that makes
 * no date (Nova fails there too). */
int nb_usage_audit_period(const char *unit, int64_t before, int64_t *begin, int64_t *end);

#endif
