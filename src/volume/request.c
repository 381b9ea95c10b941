/* request.c - what every Block Storage handler shares: the module's
 * environment, the per-request prologue (microversion, project in the
 * URL), body and name checks, links, paging and the paged lists.
 *
 * nb_vol_begin does Cinder's microversion negotiation (the HTTP layer does
 * none for volume): "OpenStack-API-Version: volume 3.x", 3.0 when absent,
 * the maximum for "latest", 406 outside 3.0-3.70 (Cinder Zed's range).
 * Declared in request.h. */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/pyrepr.h"
#include "common/sbuf.h"
#include "common/util.h"
#include "db/db.h"
#include "volume/volume.h"
#include "volume/request.h"
#include "volume/volume_int.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct nb_env *nb_vol_env;

/* --- the prologue ------------------------------------------------------------ */

static int negotiate(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *hdr = nb_req_header(req, "OpenStack-API-Version");
    char v[32] = "";
    if (hdr) {
        /* "volume 3.44" possibly among other services */
        _cleanup_free_ char *copy = strdup(hdr);
        char *save = NULL;
        for (char *it = strtok_r(copy, ",", &save); it; it = strtok_r(NULL, ",", &save)) {
            while (*it == ' ')
                it++;
            if (strncasecmp(it, "volume ", 7) == 0) {
                char *p = it + 7;
                while (*p == ' ')
                    p++;
                nb_strlcpy(v, p, sizeof(v));
                char *e = v + strlen(v);
                while (e > v && e[-1] == ' ')
                    *--e = '\0';
            }
        }
    }
    int maj = 3, min = NB_VOL_MV_MIN;
    if (strcasecmp(v, "latest") == 0) {
        min = NB_VOL_MV_MAX;
    } else if (v[0]) {
        char *end;
        long a = strtol(v, &end, 10), b = -1;
        if (*end == '.' && isdigit((unsigned char)end[1]))
            b = strtol(end + 1, &end, 10);
        if (b < 0 || *end)
            return nb_error(ctx, 400, NULL,
                            "API Version String %s is of invalid format. Must be of format "
                            "MajorNum.MinorNum.",
                            v);
        if (a != 3 || b < NB_VOL_MV_MIN || b > NB_VOL_MV_MAX)
            return nb_error(ctx, 406, "notAcceptable",
                            "Version %s is not supported by the API. Minimum is 3.%d and maximum "
                            "is 3.%d.",
                            v, NB_VOL_MV_MIN, NB_VOL_MV_MAX);
        maj = (int)a, min = (int)b;
    }
    ctx->mv_major = maj;
    ctx->mv_minor = min;
    char out[32];
    snprintf(out, sizeof(out), "volume %d.%d", maj, min);
    nb_resp_header(resp, "OpenStack-API-Version", out);
    nb_resp_header(resp, "Vary", "OpenStack-API-Version");
    return 0;
}

int nb_vol_begin(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (negotiate(ctx, req, resp) < 0)
        return -1;
    const char *pid = nb_req_param(req, "project_id");
    if (pid && strcmp(pid, ctx->project_id) != 0)
        return nb_error(ctx, 400, NULL, "Malformed request url");
    return 0;
}

bool nb_vol_mv(const struct nb_ctx *ctx, int minor)
{
    return ctx->mv_major == 3 && ctx->mv_minor >= minor;
}

int nb_vol_require_mv(struct nb_ctx *ctx, int minor)
{
    if (!nb_vol_mv(ctx, minor))
        return nb_error(ctx, 404, NULL, "The resource could not be found.");
    return 0;
}

json_t *nb_vol_body(struct nb_ctx *ctx, struct nb_req *req, const char *key)
{
    if (!req->json || !json_is_object(req->json)) {
        nb_error(ctx, 400, NULL, "Malformed request body");
        return NULL;
    }
    json_t *o = json_object_get(req->json, key);
    if (!o) {
        nb_error(ctx, 400, NULL, "Missing required element '%s' in request body.", key);
        return NULL;
    }
    if (!json_is_object(o)) {
        _cleanup_free_ char *d = nb_json_dump(o);
        nb_error(ctx, 400, NULL,
                 "Invalid input for field/attribute %s. Value: %s. %s is not of "
                 "type 'object'",
                 key, d, d);
        return NULL;
    }
    return o;
}

/* Characters (code points) of the UTF-8 text s[0..n). */
static size_t utf8_chars(const char *s, size_t n)
{
    size_t chars = 0;
    for (size_t i = 0; i < n; i++)
        chars += ((unsigned char)s[i] & 0xc0) != 0x80;
    return chars;
}

/* One name or description field (see nb_vol_check_name_desc). */
static int check_text_field(struct nb_ctx *ctx, const json_t *body, const char *key,
                            const char *entity, bool volume)
{
    json_t *v = json_object_get(body, key);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v)) {
        _cleanup_free_ char *r = nb_pyrepr(v);
        return nb_error(ctx, 400, NULL,
                        "Invalid input for field/attribute %s. Value: %s. %s is not of type "
                        "'string', 'null'",
                        key, r, r);
    }
    const char *s = json_string_value(v);
    size_t len = json_string_length(v);
    if (volume) { /* str.strip() of the format checker */
        while (len && isspace((unsigned char)*s))
            s++, len--;
        while (len && isspace((unsigned char)s[len - 1]))
            len--;
    }
    size_t chars = utf8_chars(s, len);
    if (chars <= 255)
        return 0;
    if (volume)
        return nb_error(ctx, 400, NULL,
                        "Invalid input received: %s has %zu characters, more than 255.", entity,
                        chars);
    _cleanup_free_ char *r = nb_pyrepr(v);
    return nb_error(ctx, 400, NULL,
                    "Invalid input for field/attribute %s. Value: %s. %s is too long", key,
                    json_string_value(v), r);
}

int nb_vol_check_name_desc(struct nb_ctx *ctx, const json_t *body, bool volume)
{
    static const char *const fields[][2] = {{"name", "name"},
                                            {"display_name", "name"},
                                            {"description", "description"},
                                            {"display_description", "description"}};
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
        if (check_text_field(ctx, body, fields[i][0], fields[i][1], volume) < 0)
            return -1;
    return 0;
}

const char *nb_vol_az(void)
{
    return nb_conf_str("volume", "storage_availability_zone", "nova");
}

json_t *nb_vol_links(const struct nb_ctx *ctx, const char *collection, const char *id)
{
    const char *base = nb_http_base_url();
    _cleanup_free_ char *self =
        nb_strdup_printf("%s/volume/v3/%s/%s/%s", base, ctx->project_id, collection, id);
    _cleanup_free_ char *book =
        nb_strdup_printf("%s/volume/%s/%s/%s", base, ctx->project_id, collection, id);
    return json_pack("[{s:s, s:s}, {s:s, s:s}]", "href", self, "rel", "self", "href", book, "rel",
                     "bookmark");
}

/* --- paging ------------------------------------------------------------------ */

static void copy_query(void *opaque, const char *key, const char *value)
{
    struct nb_sbuf *sb = opaque;
    if (strcmp(key, "marker") == 0)
        return;
    if (sb->len)
        nb_sbuf_str(sb, "&");
    nb_sbuf_quote_plus(sb, key);
    nb_sbuf_str(sb, "=");
    nb_sbuf_quote_plus(sb, value);
}

void nb_vol_next_link(struct nb_req *req, json_t *body, const char *key, const char *collection,
                      json_t *items, long limit)
{
    size_t n = json_array_size(items);
    if (!n || (long)n < limit)
        return;
    const char *last = nb_json_str(json_array_get(items, n - 1), "id");
    struct nb_sbuf sb = {0};
    nb_req_query_each(req, copy_query, &sb);
    const char *pid = nb_req_param(req, "project_id");
    _cleanup_free_ char *href =
        nb_strdup_printf("%s/volume/v3/%s/%s?%s%smarker=%s", nb_http_base_url(), pid ? pid : "",
                         collection, sb.s ? sb.s : "", sb.len ? "&" : "", last);
    free(sb.s);
    _cleanup_free_ char *k = nb_strdup_printf("%s_links", key);
    json_object_set_new(body, k, json_pack("[{s:s, s:s}]", "href", href, "rel", "next"));
}

int nb_vol_page_parse(struct nb_ctx *ctx, struct nb_req *req, const struct nb_vol_sort_key *keys,
                      struct nb_vol_page *page)
{
    long max = nb_conf_int("volume", "osapi_max_limit", 1000);
    page->limit = max;
    page->marker = nb_req_query(req, "marker");
    page->order[0] = '\0';
    const char *l = nb_req_query(req, "limit");
    if (l) {
        char *end;
        long v = strtol(l, &end, 10);
        if (end == l || *end)
            return nb_error(ctx, 400, NULL, "limit param must be an integer");
        if (v < 0)
            return nb_error(ctx, 400, NULL, "limit param must be positive");
        page->limit = v < max ? v : max;
    }
    const char *sort = nb_req_query(req, "sort");
    const char *skey = nb_req_query(req, "sort_key"), *sdir = nb_req_query(req, "sort_dir");
    if (sort && (skey || sdir))
        return nb_error(ctx, 400, NULL,
                        "The 'sort_key' and 'sort_dir' parameters are deprecated and cannot be "
                        "used with the 'sort' parameter.");
    _cleanup_free_ char *spec =
        sort ? strdup(sort)
             : nb_strdup_printf("%s:%s", skey ? skey : "created_at", sdir ? sdir : "desc");
    bool has_id = false;
    char *save = NULL;
    for (char *it = strtok_r(spec, ",", &save); it; it = strtok_r(NULL, ",", &save)) {
        while (*it == ' ')
            it++;
        char *dir = strchr(it, ':');
        if (dir)
            *dir++ = '\0';
        else
            dir = "desc";
        if (strcasecmp(dir, "asc") != 0 && strcasecmp(dir, "desc") != 0)
            return nb_error(ctx, 400, NULL, "Unknown sort direction, must be 'desc' or 'asc'");
        const char *col = NULL;
        for (int i = 0; keys[i].api; i++)
            if (strcmp(keys[i].api, it) == 0)
                col = keys[i].column;
        if (!col)
            return nb_error(ctx, 400, NULL, "Invalid input received: Invalid sort key %s", it);
        has_id |= strcmp(col, "id") == 0;
        size_t len = strlen(page->order);
        snprintf(page->order + len, sizeof(page->order) - len, "%s%s %s", len ? ", " : "", col,
                 strcasecmp(dir, "asc") == 0 ? "ASC" : "DESC");
    }
    if (!has_id) {
        size_t len = strlen(page->order);
        snprintf(page->order + len, sizeof(page->order) - len, ", id DESC");
    }
    return 0;
}

/* The load and member check of nb_vol_begin_load/nb_vol_begin_update. */
static json_t *load_checked(struct nb_ctx *ctx, struct nb_req *req, const char *param,
                            nb_vol_load_fn load, const char *policy)
{
    json_t *row = load(ctx, nb_req_param(req, param));
    if (!row)
        return NULL;
    if (policy && !ctx->is_member) {
        json_decref(row);
        nb_error(ctx, 403, NULL, "Policy doesn't allow %s to be performed.", policy);
        return NULL;
    }
    return row;
}

json_t *nb_vol_begin_load(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp,
                          const char *param, nb_vol_load_fn load, const char *policy)
{
    if (nb_vol_begin(ctx, req, resp) < 0)
        return NULL;
    return load_checked(ctx, req, param, load, policy);
}

json_t *nb_vol_begin_update(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp,
                            const char *param, nb_vol_load_fn load, const char *policy,
                            const char *body_key, json_t **body)
{
    if (nb_vol_begin(ctx, req, resp) < 0 || !(*body = nb_vol_body(ctx, req, body_key)))
        return NULL;
    return load_checked(ctx, req, param, load, policy);
}

/* --- lists ------------------------------------------------------------------- */

int nb_vol_no_resource(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_vol_begin(ctx, req, resp) < 0)
        return -1;
    return nb_error(ctx, 404, NULL, "The resource could not be found.");
}

int nb_vol_list(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp,
                const struct nb_vol_lister *lister, bool detail)
{
    struct nb_vol_page page;
    if (nb_vol_begin(ctx, req, resp) < 0 || nb_vol_require_mv(ctx, lister->min_mv) < 0 ||
        nb_vol_page_parse(ctx, req, lister->sort_keys, &page) < 0)
        return -1;
    bool every_project =
        ctx->is_admin &&
        (lister->admin_sees_all || nb_bool_from_string(nb_req_query(req, "all_tenants")) == 1);
    _cleanup_json_ json_t *filter = NULL;
    if (lister->filters && lister->filters(ctx, req, &filter) < 0)
        return -1;
    if (page.marker) {
        _cleanup_json_ json_t *m = lister->load(ctx, page.marker);
        if (!m)
            return -1;
    }
    _cleanup_free_ char *sql =
        nb_strdup_printf("SELECT * FROM %s WHERE deleted = 0 AND (? OR project_id = ?) ORDER BY %s",
                         lister->table, page.order);
    _cleanup_json_ json_t *rows =
        nb_db_rows(nb_vol_env->db, ctx, sql, "bs", every_project, ctx->project_id);
    if (!rows)
        return -1;
    json_t *items = json_array();
    bool past_marker = page.marker == NULL;
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        if (!past_marker) {
            past_marker = strcmp(nb_json_str(r, "id"), page.marker) == 0;
            continue;
        }
        if ((long)json_array_size(items) >= page.limit)
            break;
        if (lister->match(ctx, req, r, filter))
            json_array_append_new(items, lister->view(ctx, r, detail));
    }
    json_t *body = json_pack("{s:o}", lister->table, items);
    _cleanup_free_ char *collection =
        nb_strdup_printf("%s%s", lister->table, detail ? "/detail" : "");
    nb_vol_next_link(req, body, lister->table, collection, items, page.limit);
    if (lister->finish)
        lister->finish(ctx, req, body);
    return nb_resp_json(resp, 200, body);
}
