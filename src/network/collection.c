/* collection.c - what every Networking handler shares: the module's
 * environment and hooks, request body and owner checks, and the
 * collection handling of neutron/api/v2/base.py: any attribute may filter
 * (repeated keys OR'ed; booleans and integers compared by value), fields=
 * picks keys, sort_key/sort_dir sort (id always breaks ties), and
 * limit/marker/page_reverse page with "<collection>_links" next/previous;
 * then the standard attributes and the create/show/list responses.
 * Declared in network_int.h. */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/sbuf.h"
#include "common/util.h"
#include "db/db.h"
#include "network/network.h"
#include "network/network_int.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct nb_env *nb_net_env;
struct nb_net_hooks nb_net_hooks;

/* --- request helpers ------------------------------------------------------ */

json_t *nb_net_body(struct nb_ctx *ctx, struct nb_req *req, const char *key)
{
    if (!req->json) {
        nb_error(ctx, 400, "HTTPBadRequest", "Resource body required");
        return NULL;
    }
    json_t *o = json_is_object(req->json) ? json_object_get(req->json, key) : NULL;
    if (!json_is_object(req->json)) {
        nb_error(ctx, 400, "HTTPBadRequest", "Body contains invalid data");
    } else if (!o) {
        nb_error(ctx, 400, "HTTPBadRequest", "Unable to find '%s' in request body", key);
    } else if (!json_is_object(o)) {
        nb_error(ctx, 400, "HTTPBadRequest", "Object '%s' contains invalid data", key);
        o = NULL;
    }
    return o;
}

int nb_net_deny(struct nb_ctx *ctx, const char *action)
{
    return nb_error(ctx, 403, "PolicyNotAuthorized", "rule:%s is disallowed by policy", action);
}

int nb_net_owner(struct nb_ctx *ctx, const json_t *body, char *out)
{
    const char *p = nb_json_str(body, "project_id"), *t = nb_json_str(body, "tenant_id");
    if (p && t && strcmp(p, t) != 0)
        return nb_error(ctx, 400, "HTTPBadRequest", "'project_id' and 'tenant_id' do not match");
    const char *owner = p ? p : t;
    if ((json_object_get(body, "project_id") && !p) || (json_object_get(body, "tenant_id") && !t))
        return nb_error(ctx, 400, "HTTPBadRequest",
                        "Invalid input for project_id. Reason: not a valid string.");
    if (owner && strcmp(owner, ctx->project_id) != 0 && !ctx->is_admin)
        return nb_error(ctx, 403, "HTTPForbidden",
                        "Specifying 'project_id' or 'tenant_id' other than the authenticated "
                        "project in request requires admin privileges");
    nb_strlcpy(out, owner ? owner : ctx->project_id, NB_ID_LEN);
    return 0;
}

/* --- collection handling --------------------------------------------------- */

struct query {
    json_t *filters;   /* {key: [values]} */
    json_t *fields;    /* [names] */
    json_t *sort_keys; /* [names] */
    json_t *sort_dirs; /* ["asc"|"desc"] */
    const char *limit, *marker, *page_reverse;
};

static const char *const reserved_keys[] = {"fields", "sort_key",     "sort_dir",      "limit",
                                            "marker", "page_reverse", "shared_filter", NULL};

static void add_query(void *opaque, const char *key, const char *value)
{
    struct query *q = opaque;
    if (!strcmp(key, "fields"))
        json_array_append_new(q->fields, json_string(value));
    else if (!strcmp(key, "sort_key"))
        json_array_append_new(q->sort_keys, json_string(value));
    else if (!strcmp(key, "sort_dir"))
        json_array_append_new(q->sort_dirs, json_string(value));
    for (int i = 0; reserved_keys[i]; i++)
        if (!strcmp(key, reserved_keys[i]))
            return;
    json_t *vals = json_object_get(q->filters, key);
    if (!vals) {
        vals = json_array();
        json_object_set_new(q->filters, key, vals);
    }
    json_array_append_new(vals, json_string(value));
}

static void query_parse(struct nb_req *req, struct query *q)
{
    q->filters = json_object();
    q->fields = json_array();
    q->sort_keys = json_array();
    q->sort_dirs = json_array();
    nb_req_query_each(req, add_query, q);
    q->limit = nb_req_query(req, "limit");
    q->marker = nb_req_query(req, "marker");
    q->page_reverse = nb_req_query(req, "page_reverse");
}

static void query_free(struct query *q)
{
    json_decref(q->filters);
    json_decref(q->fields);
    json_decref(q->sort_keys);
    json_decref(q->sort_dirs);
}

/* True when the attribute value v equals the query text s. */
static bool value_matches(const json_t *v, const char *s)
{
    bool b;
    json_t *js = json_string(s);
    bool eq;
    if (json_is_boolean(v))
        eq = nb_net_parse_bool(js, &b) == 0 && b == json_is_true(v);
    else if (json_is_integer(v))
        eq = strtoll(s, NULL, 10) == json_integer_value(v) && *s;
    else if (json_is_string(v))
        eq = !strcmp(json_string_value(v), s);
    else if (json_is_null(v))
        eq = !*s || !strcasecmp(s, "None") || !strcasecmp(s, "null");
    else
        eq = false;
    json_decref(js);
    return eq;
}

/* fixed_ips=ip_address=X / fixed_ips=subnet_id=Y: any of the port's IPs. */
static bool fixed_ips_match(const json_t *ips, const char *s)
{
    const char *eq = strchr(s, '=');
    if (!eq)
        return false;
    _cleanup_free_ char *key = strndup(s, (size_t)(eq - s));
    size_t i;
    json_t *ip;
    json_array_foreach (ips, i, ip) {
        const char *v = nb_json_str(ip, key);
        if (v && !strcmp(v, eq + 1))
            return true;
    }
    return false;
}

static bool matches(const json_t *filters, const json_t *view)
{
    const char *key;
    json_t *vals;
    json_object_foreach ((json_t *)filters, key, vals) {
        json_t *v = json_object_get(view, key);
        if (!v)
            continue; /* unknown attributes do not filter, as without filter-validation */
        bool any = false;
        size_t i;
        json_t *s;
        json_array_foreach (vals, i, s) {
            const char *t = json_string_value(s);
            if (!strcmp(key, "fixed_ips") ? fixed_ips_match(v, t) : value_matches(v, t))
                any = true;
        }
        if (!any)
            return false;
    }
    return true;
}

bool nb_net_view_matches(struct nb_req *req, const json_t *view)
{
    struct query q;
    query_parse(req, &q);
    bool ok = matches(q.filters, view);
    query_free(&q);
    return ok;
}

static int cmp_values(const json_t *a, const json_t *b)
{
    if (json_is_string(a) && json_is_string(b))
        return strcmp(json_string_value(a), json_string_value(b));
    if (json_is_integer(a) && json_is_integer(b))
        return (json_integer_value(a) > json_integer_value(b)) -
               (json_integer_value(a) < json_integer_value(b));
    if (json_is_boolean(a) && json_is_boolean(b))
        return (int)json_is_true(a) - (int)json_is_true(b);
    return (a != NULL && !json_is_null(a)) - (b != NULL && !json_is_null(b));
}

/* qsort_r order of two views by the query's sort keys and directions
 * (opaque: the struct query), then by id. */
static int cmp_views(const void *pa, const void *pb, void *opaque)
{
    const struct query *q = opaque;
    const json_t *a = *(json_t *const *)pa, *b = *(json_t *const *)pb;
    size_t i;
    json_t *k;
    json_array_foreach (q->sort_keys, i, k) {
        const char *dir = json_string_value(json_array_get(q->sort_dirs, i));
        int c = cmp_values(json_object_get(a, json_string_value(k)),
                           json_object_get(b, json_string_value(k)));
        if (c)
            return dir && !strcmp(dir, "desc") ? -c : c;
    }
    return cmp_values(json_object_get(a, "id"), json_object_get(b, "id"));
}

static int check_sort(struct nb_ctx *ctx, const struct query *q)
{
    if (json_array_size(q->sort_dirs) &&
        json_array_size(q->sort_dirs) != json_array_size(q->sort_keys))
        return nb_error(ctx, 400, "HTTPBadRequest",
                        "The number of sort_keys and sort_dirs must be same");
    size_t i;
    json_t *d;
    json_array_foreach (q->sort_dirs, i, d)
        if (strcmp(json_string_value(d), "asc") && strcmp(json_string_value(d), "desc"))
            return nb_error(ctx, 400, "HTTPBadRequest",
                            "%s is invalid value for sort_dirs, valid value is 'asc' and 'desc'",
                            json_string_value(d));
    return 0;
}

/* A copy of view holding only the requested fields (all when none). */
static json_t *trim(const json_t *fields, json_t *view)
{
    if (!json_array_size(fields))
        return json_incref(view);
    json_t *out = json_object();
    size_t i;
    json_t *f;
    json_array_foreach (fields, i, f) {
        json_t *v = json_object_get(view, json_string_value(f));
        if (v)
            json_object_set(out, json_string_value(f), v);
    }
    return out;
}

/* href of this collection with the query's other keys and a new marker. */
static json_t *page_link(struct nb_req *req, const struct query *q, const char *marker,
                         bool reverse, const char *rel)
{
    struct nb_sbuf b = {0};
    nb_sbuf_str(&b, nb_http_base_url());
    nb_sbuf_str(&b, req->path);
    nb_sbuf_str(&b, "?limit=");
    nb_sbuf_quote_plus(&b, q->limit);
    const char *key;
    json_t *vals;
    json_object_foreach (q->filters, key, vals) {
        size_t i;
        json_t *v;
        json_array_foreach (vals, i, v) {
            nb_sbuf_str(&b, "&");
            nb_sbuf_quote_plus(&b, key);
            nb_sbuf_str(&b, "=");
            nb_sbuf_quote_plus(&b, json_string_value(v));
        }
    }
    /* the same sort order and fields on the next page */
    const char *names[] = {"sort_key", "sort_dir", "fields"};
    const json_t *lists[] = {q->sort_keys, q->sort_dirs, q->fields};
    for (int k = 0; k < 3; k++) {
        size_t i;
        json_t *v;
        json_array_foreach (lists[k], i, v) {
            nb_sbuf_str(&b, "&");
            nb_sbuf_str(&b, names[k]);
            nb_sbuf_str(&b, "=");
            nb_sbuf_quote_plus(&b, json_string_value(v));
        }
    }
    nb_sbuf_str(&b, "&marker=");
    nb_sbuf_quote_plus(&b, marker);
    if (reverse)
        nb_sbuf_str(&b, "&page_reverse=True");
    json_t *l = json_pack("{s:s, s:s}", "href", b.s, "rel", rel);
    free(b.s);
    return l;
}

int nb_net_list_respond(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp,
                        const char *collection, json_t *views)
{
    _cleanup_json_ json_t *all = views;
    struct query q;
    query_parse(req, &q);
    int rc = check_sort(ctx, &q);
    long limit = q.limit ? strtol(q.limit, NULL, 10) : 0;
    if (rc == 0 && q.limit && (limit < 0 || strspn(q.limit, "0123456789-") != strlen(q.limit)))
        rc = nb_error(ctx, 400, "HTTPBadRequest",
                      "Limit must be an integer 0 or greater and not "
                      "'%s'",
                      q.limit);
    if (rc < 0) {
        query_free(&q);
        return -1;
    }
    size_t n = 0, cap = json_array_size(all);
    json_t **sel = calloc(cap ? cap : 1, sizeof(*sel));
    size_t i;
    json_t *v;
    json_array_foreach (all, i, v)
        if (matches(q.filters, v))
            sel[n++] = v;
    qsort_r(sel, n, sizeof(*sel), cmp_views, &q);

    bool reverse = false;
    if (q.page_reverse) {
        json_t *js = json_string(q.page_reverse);
        nb_net_parse_bool(js, &reverse);
        json_decref(js);
    }
    size_t from = 0, to = n;
    if (q.marker) {
        size_t m = 0;
        while (m < n && strcmp(nb_json_str(sel[m], "id"), q.marker))
            m++;
        if (m == n) {
            free(sel);
            query_free(&q);
            return nb_error(ctx, 404, "NotFound", "Marker %s could not be found.", q.marker);
        }
        if (reverse)
            to = m;
        else
            from = m + 1;
    }
    if (limit > 0 && to - from > (size_t)limit) {
        if (reverse)
            from = to - (size_t)limit;
        else
            to = from + (size_t)limit;
    }
    json_t *out = json_array(), *links = json_array();
    for (size_t k = from; k < to; k++)
        json_array_append_new(out, trim(q.fields, sel[k]));
    if (limit > 0 && to > from) {
        bool more_after = to<n, more_before = from> 0;
        if (reverse ? more_before : (size_t)(to - from) == (size_t)limit && more_after)
            json_array_append_new(links, page_link(req, &q,
                                                   nb_json_str(sel[reverse ? from : to - 1], "id"),
                                                   reverse, reverse ? "previous" : "next"));
        if (q.marker)
            json_array_append_new(links, page_link(req, &q,
                                                   nb_json_str(sel[reverse ? to - 1 : from], "id"),
                                                   !reverse, reverse ? "next" : "previous"));
    }
    free(sel);
    query_free(&q);
    json_t *body = json_pack("{s:o}", collection, out);
    if (json_array_size(links)) {
        _cleanup_free_ char *lk = nb_strdup_printf("%s_links", collection);
        json_object_set_new(body, lk, links);
    } else {
        json_decref(links);
    }
    return nb_resp_json(resp, 200, body);
}

int nb_net_show_respond(struct nb_req *req, struct nb_resp *resp, int status, const char *key,
                        json_t *view)
{
    struct query q;
    query_parse(req, &q);
    json_t *t = trim(q.fields, view);
    json_decref(view);
    query_free(&q);
    return nb_resp_json(resp, status, json_pack("{s:o}", key, t));
}

/* --- standard attributes ------------------------------------------------------ */

char *nb_net_now(char *buf)
{
    return nb_now_iso(buf);
}

void nb_net_std_attrs(json_t *view, const json_t *row)
{
    const char *p = nb_json_str(row, "project_id");
    json_object_set_new(view, "tenant_id", json_string(p ? p : ""));
    json_object_set_new(view, "project_id", json_string(p ? p : ""));
    const char *d = nb_json_str(row, "description");
    json_object_set_new(view, "description", json_string(d ? d : ""));
    json_t *tags = nb_json_parse(nb_json_str(row, "tags"));
    json_object_set_new(view, "tags", json_is_array(tags) ? tags : json_array());
    if (tags && !json_is_array(tags))
        json_decref(tags);
    json_object_set_new(view, "created_at", json_string(nb_json_str(row, "created_at")));
    json_object_set_new(view, "updated_at", json_string(nb_json_str(row, "updated_at")));
    json_object_set_new(view, "revision_number",
                        json_integer(nb_json_int(row, "revision_number", 0)));
}

int nb_net_create_respond(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp,
                          const char *key, const char *collection, const json_t *items, bool bulk,
                          json_t *(*create_one)(struct nb_ctx *ctx, json_t *body))
{
    if (nb_db_begin(nb_net_env->db, ctx) < 0)
        return -1;
    json_t *out = json_array();
    for (size_t i = 0; i < json_array_size(items); i++) {
        json_t *v = create_one(ctx, json_array_get(items, i));
        if (!v) {
            nb_db_rollback(nb_net_env->db);
            json_decref(out);
            return -1;
        }
        json_array_append_new(out, v);
    }
    if (nb_db_commit(nb_net_env->db, ctx) < 0) {
        json_decref(out);
        return -1;
    }
    if (bulk)
        return nb_resp_json(resp, 201, json_pack("{s:o}", collection, out));
    json_t *v = json_incref(json_array_get(out, 0));
    json_decref(out);
    return nb_net_show_respond(req, resp, 201, key, v);
}
