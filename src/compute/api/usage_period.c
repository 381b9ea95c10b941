/* usage_period.c - the date arithmetic of Nova's usage APIs (see
 * usage_period.h).
 *
 * Nova parses its usage dates with Python's datetime.strptime, so what it
 * accepts is what _strptime's regular expressions match ("%m" is
 * 1[0-2]|0[1-9]|[1-9], "%f" one to six digits, a space one or more
 * white-space characters, letters in any case) and what datetime() then
 * takes (a real date, seconds 0-59). Every field of the formats used is
 * followed by a literal or the end, so taking the longest run of digits a
 * field allows and checking its value accepts exactly what the regular
 * expression does. Civil dates convert to days with Howard Hinnant's
 * algorithms (proleptic Gregorian, as Python's datetime). */
#include "compute/api/usage_period.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define US_PER_SEC 1000000LL
#define US_PER_DAY (86400LL * US_PER_SEC)

static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

struct civil {
    int64_t y;
    int m, d, hh, mm, ss, us;
};

static void civil_from_us(int64_t t, struct civil *c)
{
    int64_t z = t >= 0 ? t / US_PER_DAY : -((-t + US_PER_DAY - 1) / US_PER_DAY);
    int64_t rest = t - z * US_PER_DAY; /* 0 <= rest < one day */
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    c->d = (int)(doy - (153 * mp + 2) / 5 + 1);
    c->m = (int)(mp < 10 ? mp + 3 : mp - 9);
    c->y = yoe + era * 400 + (c->m <= 2);
    c->us = (int)(rest % US_PER_SEC);
    rest /= US_PER_SEC;
    c->ss = (int)(rest % 60);
    c->mm = (int)(rest / 60 % 60);
    c->hh = (int)(rest / 3600);
}

static bool is_leap(int64_t y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int days_in_month(int64_t y, int m)
{
    static const int n[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && is_leap(y) ? 29 : n[m - 1];
}

/* datetime(y, m, d, hh, mm, ss, us) as Python checks it. 0/-1. */
static int make_time(const struct civil *c, int64_t *out)
{
    if (c->y < 1 || c->y > 9999 || c->m < 1 || c->m > 12 || c->d < 1 ||
        c->d > days_in_month(c->y, c->m) || c->hh < 0 || c->hh > 23 || c->mm < 0 || c->mm > 59 ||
        c->ss < 0 || c->ss > 59 || c->us < 0 || c->us > 999999)
        return -1;
    *out = days_from_civil(c->y, c->m, c->d) * US_PER_DAY +
           ((int64_t)c->hh * 3600 + c->mm * 60 + c->ss) * US_PER_SEC + c->us;
    return 0;
}

/* Up to max digits at *p into *v (their count into *n); advances *p. */
static void take_digits(const char **p, int max, int *v, int *n)
{
    *v = 0;
    for (*n = 0; *n < max && isdigit((unsigned char)**p); (*n)++, (*p)++)
        *v = *v * 10 + (**p - '0');
}

/* One strptime field at *p (advanced past it) into c. lo/hi bound the
 * two-digit form; one digit is any of [lo1, 9]. 0/-1. */
static int two_digit_field(const char **p, int lo, int hi, int lo1, int *out)
{
    int v, n;
    take_digits(p, 2, &v, &n);
    if (n == 2 ? v < lo || v > hi : n == 1 ? v < lo1 : true)
        return -1;
    *out = v;
    return 0;
}

static int field(const char **p, char f, struct civil *c)
{
    int v, n;
    switch (f) {
    case 'Y':
        take_digits(p, 4, &v, &n);
        c->y = v;
        return n == 4 ? 0 : -1;
    case 'm': return two_digit_field(p, 1, 12, 1, &c->m);
    case 'd':
        if (**p == ' ') { /* "%d" also matches " [1-9]" */
            (*p)++;
            take_digits(p, 1, &v, &n);
            c->d = v;
            return n == 1 && v >= 1 ? 0 : -1;
        }
        return two_digit_field(p, 1, 31, 1, &c->d);
    case 'H': return two_digit_field(p, 0, 23, 0, &c->hh);
    case 'M': return two_digit_field(p, 0, 59, 0, &c->mm);
    case 'S': return two_digit_field(p, 0, 61, 0, &c->ss);
    case 'f':
        take_digits(p, 6, &v, &n);
        if (n == 0)
            return -1;
        for (int i = n; i < 6; i++)
            v *= 10;
        c->us = v;
        return 0;
    default: return -1;
    }
}

int nb_usage_strptime(const char *s, const char *fmt, int64_t *out)
{
    if (!s || !fmt)
        return -1;
    struct civil c = {.y = 1900, .m = 1, .d = 1};
    const char *p = s;
    for (const char *f = fmt; *f; f++) {
        if (*f == '%') {
            if (!*++f || field(&p, *f, &c) < 0)
                return -1;
        } else if (isspace((unsigned char)*f)) {
            if (!isspace((unsigned char)*p))
                return -1;
            while (isspace((unsigned char)*p))
                p++;
        } else if (tolower((unsigned char)*p) != tolower((unsigned char)*f)) {
            return -1;
        } else {
            p++;
        }
    }
    return *p ? -1 : make_time(&c, out);
}

int nb_usage_parse_period_time(const char *s, int64_t *out)
{
    static const char *const fmts[] = {"%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M:%S.%f",
                                       "%Y-%m-%d %H:%M:%S.%f"};
    for (size_t i = 0; i < sizeof(fmts) / sizeof(fmts[0]); i++)
        if (nb_usage_strptime(s, fmts[i], out) == 0)
            return 0;
    return -1;
}

int nb_usage_parse_audit_time(const char *s, int64_t *out)
{
    if (!s)
        return -1;
    return nb_usage_strptime(s, strchr(s, '.') ? "%Y-%m-%d %H:%M:%S.%f" : "%Y-%m-%d %H:%M:%S", out);
}

char *nb_usage_format_time(int64_t t, char buf[32])
{
    struct civil c;
    civil_from_us(t, &c);
    snprintf(buf, 32, "%04lld-%02d-%02dT%02d:%02d:%02d.%06d", (long long)c.y, c.m, c.d, c.hh, c.mm,
             c.ss, c.us);
    return buf;
}

char *nb_usage_format_pystr(int64_t t, char buf[32])
{
    struct civil c;
    civil_from_us(t, &c);
    int n = snprintf(buf, 32, "%04lld-%02d-%02d %02d:%02d:%02d", (long long)c.y, c.m, c.d, c.hh,
                     c.mm, c.ss);
    if (c.us && n > 0 && n < 32)
        snprintf(buf + n, 32 - (size_t)n, ".%06d", c.us);
    return buf;
}

double nb_usage_hours(int64_t launched, int64_t terminated, int64_t start, int64_t stop)
{
    if (terminated != NB_USAGE_NONE && terminated < start)
        return 0;
    if (launched == NB_USAGE_NONE || launched > stop)
        return 0;
    int64_t from = launched > start ? launched : start;
    int64_t to = terminated != NB_USAGE_NONE && terminated < stop ? terminated : stop;
    /* timedelta.total_seconds() / 3600.0: both divisions correctly rounded */
    return (double)(to - from) / 1e6 / 3600.0;
}

bool nb_usage_in_window(int64_t launched, int64_t terminated, int64_t begin, int64_t end)
{
    return launched != NB_USAGE_NONE && launched < end &&
           (terminated == NB_USAGE_NONE || terminated > begin);
}

/* The civil month before (y, m). */
static void month_before(int64_t *y, int *m)
{
    if (*m == 1) {
        *m = 12;
        --*y;
    } else {
        --*m;
    }
}

static int audit_month(const struct civil *now, int64_t before, int off, int64_t *begin,
                       int64_t *end)
{
    struct civil e = {.y = now->y, .m = now->m, .d = off ? off : 1};
    if (make_time(&e, end) < 0)
        return -1;
    if (*end >= before) {
        month_before(&e.y, &e.m);
        if (make_time(&e, end) < 0)
            return -1;
    }
    month_before(&e.y, &e.m);
    return make_time(&e, begin);
}

static int audit_year(const struct civil *now, int64_t before, int off, int64_t *begin,
                      int64_t *end)
{
    struct civil e = {.y = now->y, .m = off ? off : 1, .d = 1};
    if (make_time(&e, end) < 0)
        return -1;
    if (*end >= before) {
        e.y--;
        if (make_time(&e, end) < 0)
            return -1;
    }
    e.y--;
    return make_time(&e, begin);
}

int nb_usage_audit_period(const char *unit, int64_t before, int64_t *begin, int64_t *end)
{
    static const char *const units[] = {"hour", "day", "month", "year"};
    if (!unit)
        return -1;
    size_t len = strcspn(unit, "@");
    int which = -1;
    for (int i = 0; i < 4; i++)
        if (strlen(units[i]) == len && !strncmp(unit, units[i], len))
            which = i;
    long off = 0;
    if (which < 0)
        return -1;
    if (unit[len] == '@') {
        const char *o = unit + len + 1;
        char *endp;
        if (!isdigit((unsigned char)*o) || (off = strtol(o, &endp, 10), *endp) || off > 9999)
            return -1;
    }
    struct civil now;
    civil_from_us(before, &now);
    switch (which) {
    case 0: { /* the hour at minute off */
        struct civil e = now;
        e.mm = (int)off;
        e.ss = e.us = 0;
        if (make_time(&e, end) < 0)
            return -1;
        if (*end >= before)
            *end -= 3600 * US_PER_SEC;
        *begin = *end - 3600 * US_PER_SEC;
        return 0;
    }
    case 1: { /* the day at hour off */
        struct civil e = {.y = now.y, .m = now.m, .d = now.d, .hh = (int)off};
        if (make_time(&e, end) < 0)
            return -1;
        if (*end >= before)
            *end -= US_PER_DAY;
        *begin = *end - US_PER_DAY;
        return 0;
    }
    case 2: return audit_month(&now, before, (int)off, begin, end);
    default: return audit_year(&now, before, (int)off, begin, end);
    }
}
