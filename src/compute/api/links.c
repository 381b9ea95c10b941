/* links.c - the URLs and links of the Compute API's views, and paging
 * (links.h). Links are built from the advertised base URL, or from [api]
 * compute_link_prefix when set, applied as Nova's _update_link_prefix
 * does. */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/sbuf.h"
#include "common/util.h"
#include "compute/api/links.h"
#include "compute/api/validate.h"

#include <stdlib.h>
#include <string.h>

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

json_t *nb_res_bookmark_links(const char *collection, const char *id)
{
    _cleanup_free_ char *book = nb_res_bookmark_url();
    _cleanup_free_ char *bm = nb_strdup_printf("%s/%s/%s", book, collection, id);
    return json_pack("[{s:s, s:s}]", "rel", "bookmark", "href", bm);
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

json_t *nb_res_next_links(struct nb_req *req, const char *collection, const char *last_id)
{
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
    return json_pack("[{s:s, s:s}]", "rel", "next", "href", href);
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
    json_object_set_new(body, key, nb_res_next_links(req, collection, last_id));
}

int nb_res_limit_marker(struct nb_ctx *ctx, struct nb_req *req, long long *limit,
                        const char **marker)
{
    long long max = nb_res_max_limit(), l = max;
    const char *v = nb_req_query(req, "limit");
    if (v && nb_srv_query_nonneg_int(ctx, "limit", v, &l) < 0)
        return -1;
    *limit = l < max ? l : max;
    *marker = nb_req_query(req, "marker");
    return 0;
}
