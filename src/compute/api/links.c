/* links.c - the URLs and links of the Compute API's views, and paging
 * (links.h). Links are built from the advertised base URL, or from [api]
 * compute_link_prefix when set. */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "common/sbuf.h"
#include "compute/api/links.h"
#include "compute/api/validate.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

/* ---- links ------------------------------------------------------------------ */

char *nb_srv_url_v21(void)
{
    const char *prefix = nb_conf_str("api", "compute_link_prefix", NULL);
    return nb_strdup_printf("%s/compute/v2.1", prefix && *prefix ? prefix : nb_http_base_url());
}

char *nb_srv_url_bookmark(void)
{
    const char *prefix = nb_conf_str("api", "compute_link_prefix", NULL);
    return nb_strdup_printf("%s/compute", prefix && *prefix ? prefix : nb_http_base_url());
}

/* The links of one resource given both URL prefixes. */
static json_t *links_with(const char *v21, const char *bm, const char *collection, const char *id)
{
    char self[512], book[512];
    snprintf(self, sizeof(self), "%s/%s/%s", v21, collection, id);
    snprintf(book, sizeof(book), "%s/%s/%s", bm, collection, id);
    json_t *a = json_object(), *b = json_object();
    json_object_set_new_nocheck(a, "rel", json_string_nocheck("self"));
    json_object_set_new(a, "href", json_string(self));
    json_object_set_new_nocheck(b, "rel", json_string_nocheck("bookmark"));
    json_object_set_new(b, "href", json_string(book));
    json_t *links = json_array();
    json_array_append_new(links, a);
    json_array_append_new(links, b);
    return links;
}

json_t *nb_srv_links(const char *collection, const char *id)
{
    char *v21 = nb_srv_url_v21(), *bm = nb_srv_url_bookmark();
    json_t *links = links_with(v21, bm, collection, id);
    free(v21);
    free(bm);
    return links;
}

json_t *nb_srv_bookmark_links(const char *collection, const char *id)
{
    char *bm = nb_srv_url_bookmark();
    char *book = nb_strdup_printf("%s/%s/%s", bm, collection, id);
    json_t *links = json_pack("[{s:s, s:s}]", "rel", "bookmark", "href", book);
    free(bm);
    free(book);
    return links;
}

/* Appends s to *buf percent-encoded as Python's urlencode (quote_plus). */
static void url_encode_append(char **buf, size_t *len, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(s);
    *buf = realloc(*buf, *len + 3 * n + 1);
    char *o = *buf + *len;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            *p == '-' || *p == '_' || *p == '.' || *p == '~') {
            *o++ = (char)*p;
        } else if (*p == ' ') {
            *o++ = '+';
        } else {
            *o++ = '%';
            *o++ = hex[*p >> 4];
            *o++ = hex[*p & 15];
        }
    }
    *o = '\0';
    *len = (size_t)(o - *buf);
}

static int cmp_keys(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

json_t *nb_srv_next_link(struct nb_req *req, const char *collection, const char *marker)
{
    /* Nova: the request's parameters (last value per key), sorted by key,
     * with marker set to the last item shown. */
    json_t *q = nb_srv_query_all(req);
    json_object_set_new(q, "marker", json_pack("[s]", marker));
    size_t nkeys = json_object_size(q);
    const char **keys = calloc(nkeys ? nkeys : 1, sizeof(*keys));
    size_t k = 0;
    const char *key;
    json_t *val;
    json_object_foreach (q, key, val)
        keys[k++] = key;
    qsort(keys, nkeys, sizeof(*keys), cmp_keys);
    char *v21 = nb_srv_url_v21();
    char *buf = nb_strdup_printf("%s/%s?", v21, collection);
    size_t len = strlen(buf);
    for (size_t i = 0; i < nkeys; i++) {
        if (i) {
            buf = realloc(buf, len + 2);
            buf[len++] = '&';
            buf[len] = '\0';
        }
        url_encode_append(&buf, &len, keys[i]);
        buf = realloc(buf, len + 2);
        buf[len++] = '=';
        buf[len] = '\0';
        url_encode_append(&buf, &len, nb_srv_query_last(q, keys[i]));
    }
    json_t *links = json_pack("[{s:s, s:s}]", "rel", "next", "href", buf);
    free(buf);
    free(v21);
    free(keys);
    json_decref(q);
    return links;
}

/* --- links ------------------------------------------------------------------ */

/* Applies Nova's _update_link_prefix(orig, prefix): the prefix's scheme and
 * host replace the original ones and its path is put in front. malloc'd. */
static char *apply_link_prefix(const char *orig)
{
    const char *prefix = nb_conf_str("api", "compute_link_prefix", NULL);
    if (!prefix || !*prefix)
        return strdup(orig);
    const char *o = strstr(orig, "://"), *p = strstr(prefix, "://");
    const char *opath = o ? strchr(o + 3, '/') : NULL;
    const char *ppath = p ? strchr(p + 3, '/') : NULL;
    size_t phost = ppath ? (size_t)(ppath - prefix) : strlen(prefix);
    char *out =
        nb_strdup_printf("%.*s%s%s", (int)phost, prefix, ppath ? ppath : "", opath ? opath : "");
    for (size_t n = strlen(out); n > 0 && out[n - 1] == '/'; n--)
        out[n - 1] = '\0';
    return out;
}

char *nb_res_bookmark_url(void)
{
    _cleanup_free_ char *raw = nb_strdup_printf("%s/compute", nb_http_base_url());
    return apply_link_prefix(raw);
}

char *nb_res_api_url(void)
{
    _cleanup_free_ char *raw = nb_strdup_printf("%s/compute/v2.1", nb_http_base_url());
    return apply_link_prefix(raw);
}

json_t *nb_res_links(const char *collection, const char *id)
{
    _cleanup_free_ char *api = nb_res_api_url();
    _cleanup_free_ char *book = nb_res_bookmark_url();
    _cleanup_free_ char *self = nb_strdup_printf("%s/%s/%s", api, collection, id);
    _cleanup_free_ char *bm = nb_strdup_printf("%s/%s/%s", book, collection, id);
    return json_pack("[{s:s, s:s}, {s:s, s:s}]", "rel", "self", "href", self, "rel", "bookmark",
                     "href", bm);
}

long long nb_res_max_limit(void)
{
    return nb_conf_int("api", "max_limit", 1000);
}

/* --- query strings ------------------------------------------------------------ */

struct qparam {
    char *key, *value;
};

struct qlist {
    struct qparam *items;
    size_t n, cap;
};

static void qlist_add(void *opaque, const char *key, const char *value)
{
    struct qlist *l = opaque;
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 8;
        l->items = realloc(l->items, l->cap * sizeof(*l->items));
        if (!l->items)
            abort();
    }
    l->items[l->n].key = strdup(key);
    l->items[l->n].value = strdup(value ? value : "");
    l->n++;
}

static void qlist_free(struct qlist *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->items[i].key);
        free(l->items[i].value);
    }
    free(l->items);
}

static int qparam_cmp(const void *a, const void *b)
{
    const struct qparam *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : strcmp(x->value, y->value);
}

static void add_pair(struct nb_sbuf *b, const char *k, const char *v)
{
    if (b->len)
        nb_sbuf_add(b, "&", 1);
    nb_sbuf_quote_plus(b, k);
    nb_sbuf_add(b, "=", 1);
    nb_sbuf_quote_plus(b, v);
}

void nb_res_next_link(json_t *body, const char *key, struct nb_req *req, const char *collection,
                      size_t nitems, const char *last_id)
{
    long long max = nb_res_max_limit();
    const char *lim = nb_req_query(req, "limit");
    long long want = lim ? strtoll(lim, NULL, 10) : max;
    if (want > max)
        want = max;
    if (!want || (size_t)want != nitems || !last_id)
        return;

    /* OrderedDict(sorted(params.items())) then params["marker"] = last id. */
    struct qlist q = {0};
    nb_req_query_each(req, qlist_add, &q);
    if (q.n)
        qsort(q.items, q.n, sizeof(*q.items), qparam_cmp);
    struct nb_sbuf qs = {0};
    nb_sbuf_str(&qs, "");
    bool have_marker = false;
    for (size_t i = 0; i < q.n; i++) {
        if (i + 1 < q.n && strcmp(q.items[i].key, q.items[i + 1].key) == 0)
            continue; /* a repeated key keeps its last (largest) value */
        bool is_marker = strcmp(q.items[i].key, "marker") == 0;
        have_marker |= is_marker;
        add_pair(&qs, q.items[i].key, is_marker ? last_id : q.items[i].value);
    }
    if (!have_marker)
        add_pair(&qs, "marker", last_id);
    qlist_free(&q);
    _cleanup_free_ char *api = nb_res_api_url();
    _cleanup_free_ char *href = nb_strdup_printf("%s/%s?%s", api, collection, qs.s);
    free(qs.s);
    json_object_set_new(body, key, json_pack("[{s:s, s:s}]", "rel", "next", "href", href));
}

/* A non-negative integer query value as parameter_types.non_negative_integer
 * checks it. 0/-1. */
static int query_nonneg(struct nb_ctx *ctx, const char *name, const char *v, long long *out)
{
    if (!*v)
        return nb_error(ctx, 400, NULL,
                        "Invalid input for query parameters %s. Value: . '' is too short", name);
    for (const char *p = v; *p; p++)
        if (!isdigit((unsigned char)*p))
            return nb_error(ctx, 400, NULL,
                            "Invalid input for query parameters %s. Value: %s. '%s' does not "
                            "match '^[0-9]*$'",
                            name, v, v);
    *out = strtoll(v, NULL, 10);
    return 0;
}

int nb_res_limit_marker(struct nb_ctx *ctx, struct nb_req *req, long long *limit,
                        const char **marker)
{
    long long max = nb_res_max_limit(), l = max;
    const char *v = nb_req_query(req, "limit");
    if (v && query_nonneg(ctx, "limit", v, &l) < 0)
        return -1;
    *limit = l < max ? l : max;
    *marker = nb_req_query(req, "marker");
    return 0;
}
