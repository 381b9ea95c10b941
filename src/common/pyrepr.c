/* pyrepr.c - Python's repr() of JSON values, for error messages that must
 * read as OpenStack's (its jsonschema validators print Python values:
 * `Value: {'name': 'x'}`, `True`, `None`, shortest round-trip floats). */
#include "common/sbuf.h"
#include "common/pyrepr.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- links ------------------------------------------------------------------ */

/* Applies the API's _update_link_prefix(orig, prefix) (view builders): the prefix's scheme and
 * host replace the original ones and its path is put in front. malloc'd. */

/* repr() of a str: single quotes unless it holds ' and no ". */
static void repr_string(struct nb_sbuf *b, const char *s)
{
    char q = (strchr(s, '\'') && !strchr(s, '"')) ? '"' : '\'';
    nb_sbuf_add(b, &q, 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char tmp[8];
        if (*p == '\\')
            nb_sbuf_str(b, "\\\\");
        else if (*p == (unsigned char)q)
            tmp[0] = '\\', tmp[1] = (char)q, nb_sbuf_add(b, tmp, 2);
        else if (*p == '\n')
            nb_sbuf_str(b, "\\n");
        else if (*p == '\t')
            nb_sbuf_str(b, "\\t");
        else if (*p == '\r')
            nb_sbuf_str(b, "\\r");
        else if (*p < 0x20 || *p == 0x7f)
            snprintf(tmp, sizeof(tmp), "\\x%02x", *p), nb_sbuf_str(b, tmp);
        else
            nb_sbuf_add(b, (const char *)p, 1);
    }
    nb_sbuf_add(b, &q, 1);
}

static void repr_value(struct nb_sbuf *b, const json_t *v)
{
    char tmp[64];
    switch (json_typeof(v)) {
    case JSON_STRING: repr_string(b, json_string_value(v)); break;
    case JSON_INTEGER:
        snprintf(tmp, sizeof(tmp), "%lld", (long long)json_integer_value(v));
        nb_sbuf_str(b, tmp);
        break;
    case JSON_REAL: {
        double d = json_real_value(v);
        snprintf(tmp, sizeof(tmp), "%.17g", d);
        /* prefer the shortest form that reads back the same, as Python does */
        for (int prec = 1; prec <= 17; prec++) {
            char t2[64];
            snprintf(t2, sizeof(t2), "%.*g", prec, d);
            if (strtod(t2, NULL) == d) {
                memcpy(tmp, t2, sizeof(t2));
                break;
            }
        }
        if (!strpbrk(tmp, ".eEn"))
            strcat(tmp, ".0");
        nb_sbuf_str(b, tmp);
        break;
    }
    case JSON_TRUE: nb_sbuf_str(b, "True"); break;
    case JSON_FALSE: nb_sbuf_str(b, "False"); break;
    case JSON_NULL: nb_sbuf_str(b, "None"); break;
    case JSON_ARRAY: {
        nb_sbuf_str(b, "[");
        size_t i;
        json_t *item;
        json_array_foreach (v, i, item) {
            if (i)
                nb_sbuf_str(b, ", ");
            repr_value(b, item);
        }
        nb_sbuf_str(b, "]");
        break;
    }
    case JSON_OBJECT: {
        nb_sbuf_str(b, "{");
        const char *k;
        json_t *item;
        bool first = true;
        json_object_foreach ((json_t *)v, k, item) {
            if (!first)
                nb_sbuf_str(b, ", ");
            first = false;
            repr_string(b, k);
            nb_sbuf_str(b, ": ");
            repr_value(b, item);
        }
        nb_sbuf_str(b, "}");
        break;
    }
    }
}

char *nb_pyrepr(const json_t *v)
{
    struct nb_sbuf b = {0};
    nb_sbuf_str(&b, "");
    if (v)
        repr_value(&b, v);
    else
        nb_sbuf_str(&b, "None");
    return b.s;
}
