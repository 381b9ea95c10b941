/* json.c - jansson helpers (see json.h). */
#include "common/json.h"
#include "common/sbuf.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *nb_json_str(const json_t *obj, const char *key)
{
    return json_string_value(json_object_get(obj, key));
}

long long nb_json_int(const json_t *obj, const char *key, long long def)
{
    json_t *v = json_object_get(obj, key);
    return json_is_integer(v) ? json_integer_value(v) : def;
}

json_t *nb_json_parse(const char *text)
{
    if (!text)
        return NULL;
    return json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
}

/* ---- compact dump: what json_dumps(JSON_COMPACT | JSON_ENCODE_ANY)
 * prints, byte for byte, without its per-container loop-check table
 * (a string key printed with %p and a hash insert for every object and
 * array: 40% of a 1,003-candidate allocation_candidates answer) ---- */

/* Appends n bytes; the buffer grows by doubling (aborts on out-of-memory). */
static inline void put(struct nb_sbuf *b, const char *s, size_t n)
{
    nb_sbuf_add(b, s, n);
}

/* Whether any of the 8 bytes at p is below 0x20, '"' or '\\' (the bytes
 * dump_string escapes): the "has a byte less than n" and "has a zero
 * byte" word tests, exact as booleans. */
static inline bool word_needs_escape(const char *p)
{
    uint64_t w;
    memcpy(&w, p, sizeof(w));
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    uint64_t q = w ^ (ones * '"'), bs = w ^ (ones * '\\');
    return (((w - ones * 0x20) & ~w) | ((q - ones) & ~q) | ((bs - ones) & ~bs)) & highs;
}

/* Whether none of s[0..n) needs an escape. */
static inline bool string_is_plain(const char *s, size_t n)
{
    if (n < 8) {
        for (size_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char)s[i];
            if (c < 0x20 || c == '"' || c == '\\')
                return false;
        }
        return true;
    }
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        if (word_needs_escape(s + i))
            return false;
    /* the last (overlapping) word covers the tail */
    return i == n || !word_needs_escape(s + n - 8);
}

static void dump_string(struct nb_sbuf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    if (string_is_plain(s, n)) {
        nb_sbuf_reserve(b, n + 2);
        char *o = b->s + b->len;
        o[0] = '"';
        memcpy(o + 1, s, n);
        o[n + 1] = '"';
        o[n + 2] = '\0';
        b->len += n + 2;
        return;
    }
    put(b, "\"", 1);
    size_t run = 0; /* bytes before i that need no escape */
    for (size_t i = 0; i < n; i++) {
        /* eight bytes at a time while none needs an escape (most strings
         * are UUIDs and class names) */
        while (i + 8 <= n && !word_needs_escape(s + i))
            i += 8;
        if (i >= n)
            break;
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        put(b, s + run, i - run);
        run = i + 1;
        char esc[7] = {'\\', 0};
        size_t elen = 2;
        switch (c) {
        case '"': esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\b': esc[1] = 'b'; break;
        case '\f': esc[1] = 'f'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        default:
            memcpy(esc + 1, "u00", 3);
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
            elen = 6;
        }
        put(b, esc, elen);
    }
    put(b, s + run, n - run);
    put(b, "\"", 1);
}

/* "%lld" without printf */
static void dump_integer(struct nb_sbuf *b, long long v)
{
    char buf[24], *p = buf + sizeof(buf);
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        *--p = '-';
    put(b, p, (size_t)(buf + sizeof(buf) - p));
}

/* jansson's real: %.17g, ".0" when it reads as an integer, the exponent
 * without '+' or leading zeros */
static void dump_real(struct nb_sbuf *b, double v)
{
    char buf[64];
    int len = snprintf(buf, sizeof(buf) - 2, "%.17g", v);
    if (len < 0)
        return;
    for (char *p = buf; *p; p++)
        if (*p == ',')
            *p = '.'; /* a locale's decimal comma */
    if (!strchr(buf, '.') && !strchr(buf, 'e')) {
        memcpy(buf + len, ".0", 3);
        len += 2;
    }
    char *e = strchr(buf, 'e');
    if (e) {
        char *start = e + 1, *end = start + 1;
        if (*start == '-')
            start++;
        while (*end == '0')
            end++;
        if (end != start) {
            memmove(start, end, strlen(end) + 1);
            len = (int)strlen(buf);
        }
    }
    put(b, buf, (size_t)len);
}

static void dump_value(struct nb_sbuf *b, const json_t *j)
{
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        put(b, "{", 1);
        const char *k;
        json_t *v;
        bool first = true;
        json_object_foreach ((json_t *)j, k, v) {
            if (!first)
                put(b, ",", 1);
            first = false;
            dump_string(b, k, strlen(k));
            put(b, ":", 1);
            dump_value(b, v);
        }
        put(b, "}", 1);
        break;
    }
    case JSON_ARRAY: {
        put(b, "[", 1);
        size_t n = json_array_size(j);
        for (size_t i = 0; i < n; i++) {
            if (i)
                put(b, ",", 1);
            dump_value(b, json_array_get(j, i));
        }
        put(b, "]", 1);
        break;
    }
    case JSON_STRING: dump_string(b, json_string_value(j), json_string_length(j)); break;
    case JSON_INTEGER: dump_integer(b, json_integer_value(j)); break;
    case JSON_REAL: dump_real(b, json_real_value(j)); break;
    case JSON_TRUE: put(b, "true", 4); break;
    case JSON_FALSE: put(b, "false", 5); break;
    case JSON_NULL: put(b, "null", 4); break;
    }
}

void nb_json_put_str(struct nb_sbuf *b, const char *s)
{
    if (!b->s)
        nb_sbuf_add(b, "", 0); /* put() needs a buffer */
    dump_string(b, s, strlen(s));
}

void nb_json_put_int(struct nb_sbuf *b, long long v)
{
    if (!b->s)
        nb_sbuf_add(b, "", 0);
    dump_integer(b, v);
}

char *nb_json_dump_len(const json_t *j, size_t *len)
{
    struct nb_sbuf b = {0};
    nb_sbuf_add(&b, "", 0); /* put() needs a buffer */
    if (j)
        dump_value(&b, j);
    else
        nb_sbuf_add(&b, "null", 4);
    *len = b.len;
    return b.s;
}

char *nb_json_dump(const json_t *j)
{
    size_t len;
    return nb_json_dump_len(j, &len);
}

json_t *nb_json_pack_text(const char *fmt, ...)
{
    va_list ap;
    char *s = NULL;
    va_start(ap, fmt);
    if (vasprintf(&s, fmt, ap) < 0)
        abort();
    va_end(ap);
    json_error_t err;
    json_t *j = json_loads(s, 0, &err);
    if (!j) {
        fprintf(stderr, "nb_json_pack_text: %s in %s\n", err.text, s);
        abort();
    }
    free(s);
    return j;
}

json_t *nb_json_strings(const json_t *rows, const char *key)
{
    if (!rows)
        return NULL;
    json_t *out = json_array();
    size_t i;
    json_t *r;
    json_array_foreach ((json_t *)rows, i, r) {
        const char *v = nb_json_str(r, key);
        if (v)
            json_array_append_new(out, json_string(v));
    }
    return out;
}

void nb_json_set_add(json_t *set, const char *s)
{
    size_t i;
    json_t *v;
    json_array_foreach (set, i, v)
        if (!strcmp(json_string_value(v), s))
            return;
    json_array_append_new(set, json_string(s));
}
