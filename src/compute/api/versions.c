/* versions.c - Compute API version discovery, and the URL, paging and
 * validation helpers the other resource files share (resources.h).
 *
 * Discovery answers without a token, as nova's oscomputeversions apps do:
 *   GET /compute          {"versions": [v2.0, v2.1]}
 *   GET /compute/v2.1     {"version": v2.1 with media-types}
 *   GET /compute/v2       {"version": v2.0 (the legacy v2 API)}
 * Links are built from the advertised base URL, or from [api]
 * compute_link_prefix when set (Nova's _update_link_prefix). */
#include "common/sbuf.h"
#include "compute/api/api.h"
#include "compute/api/resources.h"
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/pyrepr.h"
#include "common/util.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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

struct only_ctx {
    const char *const *allowed;
    char bad[512];
    int nbad;
};

static void only_cb(void *opaque, const char *key, const char *value)
{
    (void)value;
    struct only_ctx *o = opaque;
    for (const char *const *a = o->allowed; *a; a++)
        if (strcmp(*a, key) == 0)
            return;
    if (strstr(o->bad, key) && o->nbad)
        return;
    size_t n = strlen(o->bad);
    snprintf(o->bad + n, sizeof(o->bad) - n, "%s'%s'", o->nbad ? ", " : "", key);
    o->nbad++;
}

int nb_res_query_only(struct nb_ctx *ctx, struct nb_req *req, const char *const *allowed)
{
    struct only_ctx o = {.allowed = allowed};
    nb_req_query_each(req, only_cb, &o);
    if (!o.nbad)
        return 0;
    return nb_error(ctx, 400, NULL, "Additional properties are not allowed (%s %s unexpected)",
                    o.bad, o.nbad == 1 ? "was" : "were");
}

/* --- policy -------------------------------------------------------------------- */

int nb_res_deny(struct nb_ctx *ctx, const char *rule)
{
    return nb_error(ctx, 403, NULL, "Policy doesn't allow %s to be performed.", rule);
}

int nb_res_admin(struct nb_ctx *ctx, const char *rule)
{
    return ctx->is_admin ? 0 : nb_res_deny(ctx, rule);
}

char *nb_res_pyrepr(const json_t *v)
{
    return nb_pyrepr(v);
}

char *nb_res_pystr(const json_t *v)
{
    if (v && json_is_string(v))
        return strdup(json_string_value(v));
    return nb_res_pyrepr(v);
}

int nb_res_bad_field(struct nb_ctx *ctx, const char *field, const json_t *value, const char *why)
{
    if (!field)
        return nb_error(ctx, 400, NULL, "%s", why);
    _cleanup_free_ char *v = nb_res_pystr(value);
    return nb_error(ctx, 400, NULL, "Invalid input for field/attribute %s. Value: %s. %s", field, v,
                    why);
}

/* --- JSON body checks ------------------------------------------------------------------- */

int nb_res_only_keys(struct nb_ctx *ctx, const char *field, const json_t *obj,
                     const char *const *allowed)
{
    struct nb_sbuf bad = {0};
    int nbad = 0;
    const char *k;
    json_t *item;
    nb_sbuf_str(&bad, "");
    json_object_foreach ((json_t *)obj, k, item) {
        bool ok = false;
        for (const char *const *a = allowed; *a && !ok; a++)
            ok = strcmp(*a, k) == 0;
        if (ok)
            continue;
        if (nbad++)
            nb_sbuf_str(&bad, ", ");
        json_t *ks = json_string(k);
        char *r = nb_pyrepr(ks);
        nb_sbuf_str(&bad, r);
        free(r);
        json_decref(ks);
    }
    if (!nbad) {
        free(bad.s);
        return 0;
    }
    _cleanup_free_ char *why =
        nb_strdup_printf("Additional properties are not allowed (%s %s unexpected)", bad.s,
                         nbad == 1 ? "was" : "were");
    free(bad.s);
    return nb_res_bad_field(ctx, field, obj, why);
}

json_t *nb_res_required(struct nb_ctx *ctx, const char *field, const json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    if (v)
        return v;
    _cleanup_free_ char *why = nb_strdup_printf("'%s' is a required property", key);
    nb_res_bad_field(ctx, field, obj, why);
    return NULL;
}

json_t *nb_res_body_object(struct nb_ctx *ctx, struct nb_req *req, const char *wrapper,
                           const char *const *allowed)
{
    json_t *body = req->json;
    if (!body || !json_is_object(body)) {
        _cleanup_free_ char *r = nb_res_pyrepr(body);
        if (!body)
            nb_error(ctx, 400, NULL, "The request body is invalid.");
        else
            nb_error(ctx, 400, NULL, "%s is not of type 'object'", r);
        return NULL;
    }
    const char *top[] = {wrapper, NULL};
    json_t *w = nb_res_required(ctx, NULL, body, wrapper);
    if (!w || nb_res_only_keys(ctx, NULL, body, top) < 0)
        return NULL;
    if (!json_is_object(w)) {
        _cleanup_free_ char *r = nb_res_pyrepr(w);
        _cleanup_free_ char *why = nb_strdup_printf("%s is not of type 'object'", r);
        nb_res_bad_field(ctx, wrapper, w, why);
        return NULL;
    }
    if (allowed && nb_res_only_keys(ctx, wrapper, w, allowed) < 0)
        return NULL;
    return w;
}

/* Number of code points in a UTF-8 string. */
static long utf8_len(const char *s)
{
    long n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if ((*p & 0xC0) != 0x80)
            n++;
    return n;
}

static int type_error(struct nb_ctx *ctx, const char *field, const json_t *v, const char *types)
{
    _cleanup_free_ char *r = nb_res_pyrepr(v);
    _cleanup_free_ char *why = nb_strdup_printf("%s is not of type %s", r, types);
    return nb_res_bad_field(ctx, field, v, why);
}

int nb_res_check_string(struct nb_ctx *ctx, const char *field, const json_t *v, int minlen,
                        int maxlen)
{
    if (!json_is_string(v))
        return type_error(ctx, field, v, "'string'");
    long n = utf8_len(json_string_value(v));
    if (n < minlen || (maxlen >= 0 && n > maxlen)) {
        _cleanup_free_ char *r = nb_res_pyrepr(v);
        _cleanup_free_ char *why =
            nb_strdup_printf("%s is too %s", r, n < minlen ? "short" : "long");
        return nb_res_bad_field(ctx, field, v, why);
    }
    return 0;
}

/* Decodes one UTF-8 code point at *p, advancing it; -1 on a bad sequence. */
static long utf8_next(const unsigned char **p)
{
    const unsigned char *s = *p;
    long cp;
    int extra;
    if (s[0] < 0x80)
        cp = s[0], extra = 0;
    else if ((s[0] & 0xE0) == 0xC0)
        cp = s[0] & 0x1F, extra = 1;
    else if ((s[0] & 0xF0) == 0xE0)
        cp = s[0] & 0x0F, extra = 2;
    else if ((s[0] & 0xF8) == 0xF0)
        cp = s[0] & 0x07, extra = 3;
    else
        return -1;
    for (int i = 1; i <= extra; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return -1;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    *p = s + 1 + extra;
    return cp;
}

/* Unicode's horizontal space separators (category Zs). */
static bool is_zs(long cp)
{
    return cp == 0x20 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
           cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

/* Nova's _is_printable over its range (code points below 0xFFFF): not a
 * control/format/surrogate/private character and not a line or paragraph
 * separator. Unassigned code points are not told apart. */
static bool is_printable(long cp)
{
    if (cp < 0x20 || (cp >= 0x7F && cp <= 0x9F) || cp >= 0xFFFF)
        return false;
    if (cp == 0xAD || (cp >= 0x200B && cp <= 0x200F) || (cp >= 0x202A && cp <= 0x202E) ||
        (cp >= 0x2060 && cp <= 0x206F) || cp == 0xFEFF || (cp >= 0xFFF9 && cp <= 0xFFFB))
        return false; /* Cf */
    if (cp == 0x2028 || cp == 0x2029)
        return false; /* Zl, Zp */
    if ((cp >= 0xD800 && cp <= 0xDFFF) || (cp >= 0xE000 && cp <= 0xF8FF))
        return false; /* Cs, Co */
    return true;
}

bool nb_res_name_ok(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    long first = -2, last = -2;
    while (*p) {
        long cp = utf8_next(&p);
        if (cp < 0 || !is_printable(cp))
            return false;
        if (first == -2)
            first = cp;
        last = cp;
    }
    if (first == -2)
        return true; /* the empty string matches the regex; minLength refuses it */
    return !is_zs(first) && !is_zs(last);
}

bool nb_res_name_ws_ok(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    bool nonblank = false;
    while (*p) {
        long cp = utf8_next(&p);
        if (cp < 0 || !is_printable(cp))
            return false;
        nonblank |= !is_zs(cp);
    }
    return nonblank;
}

int nb_res_check_name(struct nb_ctx *ctx, const char *field, const json_t *v)
{
    if (nb_res_check_string(ctx, field, v, 1, 255) < 0)
        return -1;
    if (!nb_res_name_ok(json_string_value(v)))
        return nb_error(ctx, 400, NULL,
                        "An invalid 'name' value was provided. The name must be: printable "
                        "characters. Can not start or end with whitespace.");
    return 0;
}

int nb_res_check_int(struct nb_ctx *ctx, const char *field, const json_t *v, long long min,
                     long long max, long long *out)
{
    long long n;
    if (json_is_integer(v)) {
        n = json_integer_value(v);
    } else if (json_is_string(v)) {
        const char *s = json_string_value(v);
        for (const char *p = s; *p; p++)
            if (!isdigit((unsigned char)*p)) {
                _cleanup_free_ char *r = nb_res_pyrepr(v);
                _cleanup_free_ char *why = nb_strdup_printf("%s does not match '^[0-9]+$'", r);
                return nb_res_bad_field(ctx, field, v, why);
            }
        if (!*s) {
            _cleanup_free_ char *why = strdup("'' does not match '^[0-9]+$'");
            return nb_res_bad_field(ctx, field, v, why);
        }
        n = strtoll(s, NULL, 10);
    } else {
        return type_error(ctx, field, v, "'integer', 'string'");
    }
    if (n < min || n > max) {
        _cleanup_free_ char *r = nb_res_pyrepr(v);
        _cleanup_free_ char *why =
            n < min ? nb_strdup_printf("%s is less than the minimum of %lld", r, min)
                    : nb_strdup_printf("%s is greater than the maximum of %lld", r, max);
        return nb_res_bad_field(ctx, field, v, why);
    }
    *out = n;
    return 0;
}

static const char *const bool_true[] = {"True", "TRUE", "true", "1",   "ON", "On",
                                        "on",   "YES",  "Yes",  "yes", NULL};
static const char *const bool_false[] = {"False", "FALSE", "false", "0",  "OFF", "Off",
                                         "off",   "NO",    "No",    "no", NULL};

int nb_res_check_bool(struct nb_ctx *ctx, const char *field, const json_t *v)
{
    if (json_is_boolean(v))
        return json_is_true(v) ? 1 : 0;
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        for (int i = 0; bool_true[i]; i++)
            if (strcmp(s, bool_true[i]) == 0)
                return 1;
        for (int i = 0; bool_false[i]; i++)
            if (strcmp(s, bool_false[i]) == 0)
                return 0;
        _cleanup_free_ char *r = nb_res_pyrepr(v);
        _cleanup_free_ char *why = nb_strdup_printf(
            "%s is not one of [True, 'True', 'TRUE', 'true', '1', 'ON', 'On', 'on', 'YES', "
            "'Yes', 'yes', False, 'False', 'FALSE', 'false', '0', 'OFF', 'Off', 'off', 'NO', "
            "'No', 'no']",
            r);
        nb_res_bad_field(ctx, field, v, why);
        return -1;
    }
    type_error(ctx, field, v, "'boolean', 'string'");
    return -1;
}

int nb_res_parse_bool(const char *s)
{
    return nb_bool_from_string(s);
}

bool nb_res_is_none_string(const char *s)
{
    return s && strcasecmp(s, "none") == 0;
}

/* --- rows and services ---------------------------------------------------------- */

json_t *nb_res_row_bool(const json_t *row, const char *key)
{
    return json_boolean(nb_json_int(row, key, 0) != 0);
}

json_t *nb_res_row_copy(const json_t *row, const char *key)
{
    json_t *v = json_object_get(row, key);
    return v ? json_deep_copy(v) : json_null();
}

bool nb_res_service_is_up(const json_t *svc)
{
    if (nb_json_int(svc, "forced_down", 0))
        return false;
    const char *hb = nb_json_str(svc, "last_seen_up");
    if (!hb || !*hb)
        hb = nb_json_str(svc, "created_at");
    double t = nb_time_parse(hb);
    if (t < 0)
        return false;
    double elapsed = nb_time_now() - t;
    if (elapsed < 0)
        elapsed = -elapsed;
    return elapsed <= (double)nb_conf_int("DEFAULT", "service_down_time", 60);
}

/* --- version discovery ----------------------------------------------------------- */

/* One entry of Nova's VERSIONS table; full adds media-types and describedby
 * as build_version does, else only a self link (build_versions). */
static json_t *version_obj(bool v21, bool full)
{
    char max[16], min[16];
    snprintf(max, sizeof(max), "%d.%d", NB_COMPUTE_MV_MAX_MAJOR, NB_COMPUTE_MV_MAX_MINOR);
    snprintf(min, sizeof(min), "%d.%d", NB_COMPUTE_MV_MIN_MAJOR, NB_COMPUTE_MV_MIN_MINOR);
    _cleanup_free_ char *book = nb_res_bookmark_url();
    _cleanup_free_ char *self = nb_strdup_printf("%s/%s/", book, v21 ? "v2.1" : "v2");
    json_t *v =
        json_pack("{s:s, s:s, s:s, s:s, s:s}", "id", v21 ? "v2.1" : "v2.0", "status",
                  v21 ? "CURRENT" : "SUPPORTED", "version", v21 ? max : "", "min_version",
                  v21 ? min : "", "updated", v21 ? "2013-07-23T11:33:21Z" : "2011-01-21T11:33:21Z");
    json_t *links = json_pack("[{s:s, s:s}]", "rel", "self", "href", self);
    if (full) {
        json_array_append_new(links, json_pack("{s:s, s:s, s:s}", "rel", "describedby", "type",
                                               "text/html", "href", "http://docs.openstack.org/"));
        json_object_set_new(v, "media-types",
                            json_pack("[{s:s, s:s}]", "base", "application/json", "type",
                                      v21 ? "application/vnd.openstack.compute+json;version=2.1"
                                          : "application/vnd.openstack.compute+json;version=2"));
    }
    json_object_set_new(v, "links", links);
    return v;
}

static int versions_index(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    (void)ctx, (void)req;
    return nb_resp_json(
        resp, 200,
        json_pack("{s:[o, o]}", "versions", version_obj(false, false), version_obj(true, false)));
}

static int version_v21(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    (void)ctx, (void)req;
    return nb_resp_json(resp, 200, json_pack("{s:o}", "version", version_obj(true, true)));
}

static int version_v20(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    (void)ctx, (void)req;
    return nb_resp_json(resp, 200, json_pack("{s:o}", "version", version_obj(false, true)));
}

int nb_compute_versions_init(struct nb_env *env)
{
    (void)env;
    nb_http_route("GET", "/compute", versions_index, NB_ROUTE_NO_AUTH);
    nb_http_route("GET", "/compute/v2.1", version_v21, NB_ROUTE_NO_AUTH);
    nb_http_route("GET", "/compute/v2", version_v20, NB_ROUTE_NO_AUTH);
    return 0;
}
