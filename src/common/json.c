/* json.c - jansson helpers (see json.h). */
#include "common/json.h"

#include <stdarg.h>
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

char *nb_json_dump(const json_t *j)
{
    if (!j)
        return strdup("null");
    char *s = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!s)
        abort();
    return s;
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
