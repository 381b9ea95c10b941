/* test_json.c - nb_json_dump prints what jansson's json_dumps(JSON_COMPACT |
 * JSON_ENCODE_ANY) prints, byte for byte, on hand-picked and on random
 * documents. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "common/json.h"

#include <float.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void assert_same_dump(const json_t *j)
{
    char *want = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
    assert_non_null(want);
    size_t len = 0;
    char *got = nb_json_dump_len(j, &len);
    assert_string_equal(got, want);
    assert_int_equal(len, strlen(want));
    free(got);
    free(want);
}

static void test_dump_scalars(void **state)
{
    (void)state;
    const double reals[] = {
        0.0,       -0.0,   1.0,      -3.0,  0.1,     1.5,     1e20,   1e21,
        1e-5,      1e-7,   2.5e-300, 1e300, DBL_MAX, DBL_MIN, 5e-324, 123456789012345678.0,
        4.0 / 3.0, -1e100, 100.0};
    for (size_t i = 0; i < sizeof(reals) / sizeof(reals[0]); i++) {
        json_t *r = json_real(reals[i]);
        assert_same_dump(r);
        json_decref(r);
    }
    const long long ints[] = {0, 1, -1, 42, LLONG_MAX, LLONG_MIN, 1000000007};
    for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++) {
        json_t *n = json_integer(ints[i]);
        assert_same_dump(n);
        json_decref(n);
    }
    json_t *t = json_true(), *f = json_false(), *z = json_null();
    assert_same_dump(t);
    assert_same_dump(f);
    assert_same_dump(z);
    char *null_dump = nb_json_dump(NULL);
    assert_string_equal(null_dump, "null");
    free(null_dump);
}

static void test_dump_strings(void **state)
{
    (void)state;
    char every[128];
    for (int c = 1; c < 128; c++)
        every[c - 1] = (char)c;
    every[127] = '\0';
    json_t *s = json_string(every);
    assert_same_dump(s);
    json_decref(s);
    /* multi-byte UTF-8 passes through; an embedded NUL is \u0000 */
    s = json_string("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 / \\ \"q\"");
    assert_same_dump(s);
    json_decref(s);
    s = json_stringn("a\0b", 3);
    assert_same_dump(s);
    json_decref(s);
    json_t *o = json_pack("{s:s, s:[], s:{}, s:[{}]}", "k\"\n\x01", "v\t", "e", "o", "x");
    assert_same_dump(o);
    json_decref(o);
}

/* the eight-bytes-at-a-time scan: each byte that needs an escape (and
 * bytes next to them, and multi-byte UTF-8) at every offset of strings of
 * every length up to 40, with or without a second escape at the end */
static void test_dump_string_word_scan(void **state)
{
    (void)state;
    static const char *const probes[] = {"\x01", "\x1f", " ", "!",    "\"",       "#",
                                         "[",    "\\",   "]", "\x7f", "\xc3\xa9", "\xe2\x82\xac"};
    char buf[48];
    for (size_t len = 1; len <= 40; len++)
        for (size_t at = 0; at < len; at++)
            for (size_t k = 0; k <= sizeof(probes) / sizeof(probes[0]); k++) {
                /* k == count: an embedded NUL */
                const char *p = k < sizeof(probes) / sizeof(probes[0]) ? probes[k] : "";
                size_t plen = k < sizeof(probes) / sizeof(probes[0]) ? strlen(p) : 1;
                size_t n = len + plen;
                memset(buf, 'a', n);
                memcpy(buf + at, p, plen);
                if (at + plen + 1 < n && len % 2)
                    buf[n - 1] = '"';
                json_t *s = json_stringn(buf, n);
                assert_non_null(s);
                assert_same_dump(s);
                json_decref(s);
            }
}

/* a random document of depth <= depth from the seed */
static json_t *random_doc(unsigned *seed, int depth)
{
    int kind = rand_r(seed) % (depth > 0 ? 8 : 6);
    char buf[24];
    int n = rand_r(seed) % 12;
    for (int i = 0; i < n; i++)
        buf[i] = (char)(1 + rand_r(seed) % 127);
    buf[n] = '\0';
    switch (kind) {
    case 0: return json_string(buf);
    case 1: return json_integer((long long)rand_r(seed) - RAND_MAX / 2);
    case 2:
        return json_real(((double)rand_r(seed) - RAND_MAX / 2) / (1 + rand_r(seed) % 1000) *
                         (rand_r(seed) % 2 ? 1e-9 : 1e9));
    case 3: return json_true();
    case 4: return json_false();
    case 5: return json_null();
    case 6: {
        json_t *a = json_array();
        for (int i = rand_r(seed) % 6; i > 0; i--)
            json_array_append_new(a, random_doc(seed, depth - 1));
        return a;
    }
    default: {
        json_t *o = json_object();
        for (int i = rand_r(seed) % 6; i > 0; i--) {
            char key[8];
            snprintf(key, sizeof(key), "k%d%c", i, (char)(' ' + rand_r(seed) % 90));
            json_object_set_new(o, key, random_doc(seed, depth - 1));
        }
        return o;
    }
    }
}

static void test_dump_random_documents(void **state)
{
    (void)state;
    unsigned seed = 20261204;
    for (int i = 0; i < 2000; i++) {
        json_t *d = random_doc(&seed, 5);
        assert_same_dump(d);
        json_decref(d);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dump_scalars),
        cmocka_unit_test(test_dump_strings),
        cmocka_unit_test(test_dump_string_word_scan),
        cmocka_unit_test(test_dump_random_documents),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
