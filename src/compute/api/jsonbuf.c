/* jsonbuf.c - JSON text written directly into a growing buffer (jsonbuf.h):
 * a page of 1,000 servers is about 1 MB, and building it as jansson values
 * and then dumping them costs several times the time of writing it. */
#include "compute/api/jsonbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- JSON text ------------------------------------------------------------------------ */

void nb_srv_buf_init(struct nb_srv_buf *b)
{
    b->cap = 4096;
    b->len = 0;
    b->s = malloc(b->cap);
    if (!b->s)
        abort();
    b->s[0] = '\0';
}

void nb_srv_buf_free(struct nb_srv_buf *b)
{
    free(b->s);
    b->s = NULL;
    b->len = b->cap = 0;
}

static void buf_reserve(struct nb_srv_buf *b, size_t n)
{
    if (b->len + n + 1 <= b->cap)
        return;
    while (b->len + n + 1 > b->cap)
        b->cap *= 2;
    b->s = realloc(b->s, b->cap);
    if (!b->s)
        abort();
}

void nb_srv_buf_raw(struct nb_srv_buf *b, const char *s, size_t n)
{
    buf_reserve(b, n);
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

void nb_srv_buf_lit(struct nb_srv_buf *b, const char *s)
{
    nb_srv_buf_raw(b, s, strlen(s));
}

void nb_srv_buf_str(struct nb_srv_buf *b, const char *s)
{
    if (!s) {
        nb_srv_buf_raw(b, "null", 4);
        return;
    }
    static const char hex[] = "0123456789abcdef";
    size_t n = strlen(s);
    buf_reserve(b, 6 * n + 2);
    char *o = b->s + b->len;
    *o++ = '"';
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        unsigned char c = *p;
        if (c == '"' || c == '\\') {
            *o++ = '\\';
            *o++ = (char)c;
        } else if (c >= 0x20) {
            *o++ = (char)c;
        } else if (c == '\n') {
            *o++ = '\\';
            *o++ = 'n';
        } else if (c == '\t') {
            *o++ = '\\';
            *o++ = 't';
        } else if (c == '\r') {
            *o++ = '\\';
            *o++ = 'r';
        } else {
            memcpy(o, "\\u00", 4);
            o += 4;
            *o++ = hex[c >> 4];
            *o++ = hex[c & 15];
        }
    }
    *o++ = '"';
    *o = '\0';
    b->len = (size_t)(o - b->s);
}

void nb_srv_buf_int(struct nb_srv_buf *b, long long v)
{
    char tmp[32];
    int n = snprintf(tmp, sizeof(tmp), "%lld", v);
    nb_srv_buf_raw(b, tmp, (size_t)n);
}

/* Writes "key": (with a leading comma unless first). */
void nb_srv_buf_key(struct nb_srv_buf *b, const char *key, bool *first)
{
    if (!*first)
        nb_srv_buf_raw(b, ",", 1);
    *first = false;
    nb_srv_buf_str(b, key);
    nb_srv_buf_raw(b, ":", 1);
}

void nb_srv_buf_json(struct nb_srv_buf *b, const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        bool first = true;
        const char *k;
        json_t *x;
        nb_srv_buf_raw(b, "{", 1);
        json_object_foreach ((json_t *)v, k, x) {
            nb_srv_buf_key(b, k, &first);
            nb_srv_buf_json(b, x);
        }
        nb_srv_buf_raw(b, "}", 1);
        break;
    }
    case JSON_ARRAY: {
        size_t i;
        json_t *x;
        nb_srv_buf_raw(b, "[", 1);
        json_array_foreach ((json_t *)v, i, x) {
            if (i)
                nb_srv_buf_raw(b, ",", 1);
            nb_srv_buf_json(b, x);
        }
        nb_srv_buf_raw(b, "]", 1);
        break;
    }
    case JSON_STRING: nb_srv_buf_str(b, json_string_value(v)); break;
    case JSON_INTEGER: nb_srv_buf_int(b, (long long)json_integer_value(v)); break;
    case JSON_REAL: {
        char *t = json_dumps(v, JSON_ENCODE_ANY);
        nb_srv_buf_lit(b, t ? t : "null");
        free(t);
        break;
    }
    case JSON_TRUE: nb_srv_buf_raw(b, "true", 4); break;
    case JSON_FALSE: nb_srv_buf_raw(b, "false", 5); break;
    default: nb_srv_buf_raw(b, "null", 4);
    }
}

int nb_srv_buf_respond(struct nb_resp *resp, int status, struct nb_srv_buf *b)
{
    resp->status = status;
    resp->raw = b->s;
    resp->raw_len = b->len;
    resp->content_type = "application/json";
    b->s = NULL;
    b->len = b->cap = 0;
    return 0;
}

void nb_srv_buf_put_str(struct nb_srv_buf *b, bool *first, const char *key, const char *v)
{
    nb_srv_buf_key(b, key, first);
    nb_srv_buf_str(b, v);
}

void nb_srv_buf_put_raw(struct nb_srv_buf *b, bool *first, const char *key, const char *json_text)
{
    nb_srv_buf_key(b, key, first);
    nb_srv_buf_lit(b, json_text);
}

void nb_srv_buf_put_int(struct nb_srv_buf *b, bool *first, const char *key, long long v)
{
    nb_srv_buf_key(b, key, first);
    nb_srv_buf_int(b, v);
}

void nb_srv_buf_put_json(struct nb_srv_buf *b, bool *first, const char *key, const json_t *v)
{
    nb_srv_buf_key(b, key, first);
    nb_srv_buf_json(b, v);
}
