/* api.c - the Glance v2 image API under /image: version
 * discovery, /v2/images (create, list, show, PATCH, delete), image tags,
 * the schemas, and the image file route.
 *
 * Behaviour and wording follow Glance Zed's images.py: a new image is
 * "queued" and "shared" unless told otherwise, publicizing needs an admin,
 * the list shows public, community (when asked for or owned), owned and
 * accepted shared images, sorted by created_at desc by default, 25 per page
 * (at most 1000) with a relative "next" link. Image data (the /file routes)
 * is in data.c. */
#include "common/sbuf.h"
#include "image/image.h"
#include "image/image_priv.h"
#include "common/cleanup.h"
#include "common/config.h"
#include "common/http.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "db/db.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct nb_env *nb_image_env;

/* --- version discovery ------------------------------------------------------------- */

static json_t *versions_doc(void)
{
    static const char *const ids[] = {"v2.15", "v2.9", "v2.7", "v2.6", "v2.5", "v2.4",
                                      "v2.3",  "v2.2", "v2.1", "v2.0", NULL};
    _cleanup_free_ char *href = nb_strdup_printf("%s/image/v2/", nb_http_base_url());
    json_t *list = json_array();
    for (int i = 0; ids[i]; i++)
        json_array_append_new(list, json_pack("{s:s, s:s, s:[{s:s, s:s}]}", "id", ids[i], "status",
                                              i == 0 ? "CURRENT" : "SUPPORTED", "links", "rel",
                                              "self", "href", href));
    return json_pack("{s:o}", "versions", list);
}

/* GET /image: 300 Multiple Choices, as Glance's version negotiation. */
static int versions_choices(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    (void)ctx, (void)req;
    return nb_resp_json(resp, 300, versions_doc());
}

/* GET /image/versions (explicit) and /image/v2: 200. */
static int versions_explicit(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    (void)ctx, (void)req;
    return nb_resp_json(resp, 200, versions_doc());
}

/* --- schemas -------------------------------------------------------------------------- */

static int schema_image(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    (void)ctx, (void)req;
    return nb_resp_json(resp, 200, nb_image_schema_image());
}

static int schema_images(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    (void)ctx, (void)req;
    return nb_resp_json(resp, 200, nb_image_schema_images());
}

static int schema_member(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    (void)ctx, (void)req;
    return nb_resp_json(resp, 200, nb_image_schema_member());
}

static int schema_members(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    (void)ctx, (void)req;
    return nb_resp_json(resp, 200, nb_image_schema_members());
}

/* --- create --------------------------------------------------------------------------- */

static bool one_of(const char *s, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(*list, s) == 0)
            return true;
    return false;
}

/* The JSON body, or NULL after Glance's 400. */
static json_t *request_body(struct nb_ctx *ctx, struct nb_req *req)
{
    if (req->body_len == 0) {
        nb_error(ctx, 400, NULL, "Body expected in request.");
        return NULL;
    }
    if (!req->json) {
        nb_error(ctx, 400, NULL, "Malformed JSON in request body.");
        return NULL;
    }
    return req->json;
}

/* The attributes of an image that are not custom properties. */
static const char *const base_attrs[] = {
    "checksum",   "created_at", "container_format", "disk_format", "id",   "min_disk", "min_ram",
    "name",       "size",       "virtual_size",     "status",      "tags", "owner",    "updated_at",
    "visibility", "protected",  "os_hidden",        NULL};

/* The create body's shape: an object, no server-side attribute, the
 * schema, custom property names. 0, or -1 after Glance's 400/403. */
static int check_create_body(struct nb_ctx *ctx, json_t *body)
{
    static const char *const disallowed[] = {"direct_url", "self",   "file",
                                             "schema",     "stores", NULL};
    static const char *const reserved[] = {"location", "deleted", "deleted_at", NULL};
    if (!json_is_object(body)) {
        _cleanup_free_ char *r = nb_image_pyrepr(body);
        return nb_error(ctx, 400, NULL,
                        "Provided object does not match schema 'image': %s is not of type "
                        "'object'",
                        r);
    }
    for (const char *const *d = disallowed; *d; d++)
        if (json_object_get(body, *d))
            return nb_error(ctx, 403, NULL, "Attribute '%s' is read-only.", *d);
    char msg[1024];
    if (nb_image_schema_check(body, msg, sizeof(msg)) < 0)
        return nb_error(ctx, 400, NULL, "%s", msg);
    const char *k;
    json_t *v;
    json_object_foreach (body, k, v) {
        if (one_of(k, base_attrs))
            continue;
        if (strlen(k) > 255)
            return nb_error(ctx, 400, NULL,
                            "Custom property should not be greater than 255 characters.");
        if (one_of(k, reserved) || strncmp(k, "os_glance", 9) == 0)
            return nb_error(ctx, 403, NULL, "Attribute '%s' is reserved.", k);
    }
    return 0;
}

/* What the caller may create: the owner (*owner, borrowed, NULL = none),
 * no read-only attribute, the visibility (*vis). 0, or -1 after a 403. */
static int check_create_access(struct nb_ctx *ctx, json_t *body, const char **owner,
                               const char **vis)
{
    static const char *const readonly[] = {"created_at", "updated_at",   "status",
                                           "checksum",   "os_hash_algo", "os_hash_value",
                                           "size",       "virtual_size", NULL};
    /* ImagesController.create: owner defaults to the caller's project, and
     * only admins may create images for another project. */
    *owner = ctx->project_id[0] ? ctx->project_id : NULL;
    json_t *ov = json_object_get(body, "owner");
    if (ov)
        *owner = json_string_value(ov);
    bool own = *owner && strcmp(*owner, ctx->project_id) == 0;
    if (!ctx->is_admin && !(ctx->is_member && own)) {
        if (!own)
            return nb_error(ctx, 403, NULL, "You are not permitted to create images owned by '%s'",
                            *owner ? *owner : "None");
        return nb_error(ctx, 403, NULL, "You are not authorized to complete add_image action.");
    }
    for (const char *const *r = readonly; *r; r++)
        if (json_object_get(body, *r))
            return nb_error(ctx, 403, NULL, "Attribute '%s' is read-only.", *r);
    if (json_object_get(body, "locations"))
        return nb_error(ctx, 403, NULL, "Attribute 'locations' is reserved.");
    *vis = nb_json_str(body, "visibility");
    if (!*vis)
        *vis = "shared";
    if (strcmp(*vis, "public") == 0 && !ctx->is_admin)
        return nb_error(ctx, 403, NULL,
                        "You are not authorized to complete publicize_image action.");
    return 0;
}

/* min_disk and min_ram of the body (reals truncated, 0 when absent). 0, or
 * -1 after a 400 for a negative one. */
static int create_minimums(struct nb_ctx *ctx, json_t *body, long long *min_disk,
                           long long *min_ram)
{
    *min_disk = nb_json_int(body, "min_disk", 0);
    *min_ram = nb_json_int(body, "min_ram", 0);
    if (json_is_real(json_object_get(body, "min_disk")))
        *min_disk = (long long)json_real_value(json_object_get(body, "min_disk"));
    if (json_is_real(json_object_get(body, "min_ram")))
        *min_ram = (long long)json_real_value(json_object_get(body, "min_ram"));
    if (*min_disk < 0 || *min_ram < 0)
        return nb_error(
            ctx, 400, NULL, "Invalid value '%lld' for parameter '%s': Cannot be a negative value",
            *min_disk < 0 ? *min_disk : *min_ram, *min_disk < 0 ? "min_disk" : "min_ram");
    return 0;
}

/* The body's tags without repeats, in first-seen order. New ref. */
static json_t *unique_tags(json_t *body)
{
    json_t *tags = json_array();
    size_t i;
    json_t *v;
    json_array_foreach (json_object_get(body, "tags"), i, v) {
        bool dup = false;
        size_t j;
        json_t *u;
        json_array_foreach (tags, j, u) {
            dup |= json_equal(u, v);
        }
        if (!dup)
            json_array_append(tags, v);
    }
    return tags;
}

/* The new image's record (status queued, custom properties apart). New
 * ref, NULL if it cannot be built. */
static json_t *create_record(json_t *body, const char *id, const char *owner, const char *vis,
                             long long min_disk, long long min_ram)
{
    char now[32];
    nb_now_iso_us(now);
    json_t *props = json_object(), *tags;
    const char *k;
    json_t *v;
    json_object_foreach (body, k, v) {
        if (!one_of(k, base_attrs))
            json_object_set(props, k, v);
    }
    tags = unique_tags(body);
    json_t *name = json_object_get(body, "name");
    json_t *prot = json_object_get(body, "protected"), *hidden = json_object_get(body, "os_hidden");
    json_t *df = json_object_get(body, "disk_format"),
           *cf = json_object_get(body, "container_format");
    return json_pack(
        "{s:s, s:O, s:s, s:s, s:b, s:b, s:O, s:O, s:n, s:n, s:n, s:n, s:n, s:I, s:I, s:o, s:s, "
        "s:s, s:o, s:o}",
        "id", id, "name", name ? name : json_null(), "status", "queued", "visibility", vis,
        "protected", json_is_true(prot), "os_hidden", json_is_true(hidden), "disk_format",
        df ? df : json_null(), "container_format", cf ? cf : json_null(), "size", "virtual_size",
        "checksum", "os_hash_algo", "os_hash_value", "min_disk", (json_int_t)min_disk, "min_ram",
        (json_int_t)min_ram, "owner", owner ? json_string(owner) : json_null(), "created_at", now,
        "updated_at", now, "properties", props, "tags", tags);
}

/* POST /v2/images: validate, build the record, quota, store. */
static int images_create(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    json_t *body = request_body(ctx, req);
    if (!body)
        return -1;
    const char *owner = NULL, *vis = NULL;
    long long min_disk = 0, min_ram = 0;
    if (check_create_body(ctx, body) < 0 || check_create_access(ctx, body, &owner, &vis) < 0 ||
        create_minimums(ctx, body, &min_disk, &min_ram) < 0)
        return -1;

    char id[NB_UUID_LEN];
    const char *given = nb_json_str(body, "id");
    if (given)
        nb_strlcpy(id, given, sizeof(id));
    else
        nb_uuid(id);
    _cleanup_json_ json_t *rec = create_record(body, id, owner, vis, min_disk, min_ram);
    if (!rec)
        return nb_error(ctx, 500, NULL, "Cannot build the image record.");
    if (nb_image_record_quota(ctx, rec) < 0)
        return -1;
    struct nb_db *db = nb_image_env->db;
    if (given && nb_db_int(db, ctx, 0, "SELECT COUNT(*) FROM images WHERE id = ?", "s", id) > 0)
        return nb_error(ctx, 409, NULL, "Image ID %s already exists!", id);
    if (nb_image_record_insert(ctx, rec) < 0)
        return -1;
    NB_INFO("nubo.image.api", ctx, NULL, "created image %s", id);
    _cleanup_free_ char *loc = nb_strdup_printf("%s/image/v2/images/%s", nb_http_base_url(), id);
    nb_resp_header(resp, "Location", loc);
    return nb_resp_json(resp, 201, nb_image_record_view(rec));
}

/* --- list ------------------------------------------------------------------------------ */

/* Query parameters in request order; `last` keeps, per key, the last value
 * at the position of the first occurrence (Python dict(MultiDict)). */
struct params {
    char **keys, **values;
    size_t n, cap;
};

static void params_add(void *opaque, const char *key, const char *value)
{
    struct params *p = opaque;
    if (p->n == p->cap) {
        p->cap = p->cap ? p->cap * 2 : 16;
        p->keys = realloc(p->keys, p->cap * sizeof(char *));
        p->values = realloc(p->values, p->cap * sizeof(char *));
        if (!p->keys || !p->values)
            abort();
    }
    p->keys[p->n] = strdup(key);
    p->values[p->n] = strdup(value ? value : "");
    p->n++;
}

static void params_free(struct params *p)
{
    for (size_t i = 0; i < p->n; i++) {
        free(p->keys[i]);
        free(p->values[i]);
    }
    free(p->keys);
    free(p->values);
}

/* The last value of key, or NULL. */
static const char *params_get(const struct params *p, const char *key)
{
    const char *v = NULL;
    for (size_t i = 0; i < p->n; i++)
        if (strcmp(p->keys[i], key) == 0)
            v = p->values[i];
    return v;
}

/* urlencode(dict(params)) without marker, plus marker=next when given. */
static char *encode_params(const struct params *p, const char *next_marker)
{
    struct nb_sbuf b = {0};
    nb_sbuf_add(&b, "", 0);
    for (size_t i = 0; i < p->n; i++) {
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = strcmp(p->keys[j], p->keys[i]) == 0;
        if (seen || strcmp(p->keys[i], "marker") == 0)
            continue;
        if (b.len)
            nb_sbuf_add(&b, "&", 1);
        nb_sbuf_quote_plus(&b, p->keys[i]);
        nb_sbuf_add(&b, "=", 1);
        nb_sbuf_quote_plus(&b, params_get(p, p->keys[i]));
    }
    if (next_marker) {
        if (b.len)
            nb_sbuf_add(&b, "&", 1);
        nb_sbuf_add(&b, "marker=", 7);
        nb_sbuf_quote_plus(&b, next_marker);
    }
    return b.s;
}

struct sort_spec {
    char keys[16][32];
    bool desc[16];
    int n;
};

static const char *const sort_keys_ok[] = {"name",        "status",     "container_format",
                                           "disk_format", "size",       "id",
                                           "created_at",  "updated_at", NULL};

static int bad_sort_key(struct nb_ctx *ctx, const char *k)
{
    return nb_error(ctx, 400, NULL,
                    "Invalid sort key: %s. It must be one of the following: name, status, "
                    "container_format, disk_format, size, id, created_at, updated_at.",
                    k);
}

static void trim(char *s)
{
    char *b = s;
    while (isspace((unsigned char)*b))
        b++;
    memmove(s, b, strlen(b) + 1);
    for (size_t n = strlen(s); n && isspace((unsigned char)s[n - 1]); n--)
        s[n - 1] = '\0';
}

/* Glance's _get_sorting_params (classic and "sort=k:dir,…" syntax), then the
 * created_at and id tie-breakers of image_get_all. 0/-1. */
static int parse_sorting(struct nb_ctx *ctx, const struct params *p, struct sort_spec *s)
{
    s->n = 0;
    bool dirs_desc[16];
    int ndirs = 0;
    const char *sort = params_get(p, "sort");
    if (sort) {
        if (params_get(p, "sort_key") || params_get(p, "sort_dir"))
            return nb_error(ctx, 400, NULL, "Old and new sorting syntax cannot be combined");
        _cleanup_free_ char *copy = strdup(sort);
        trim(copy);
        char *save = NULL;
        for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
            char *colon = strchr(item, ':');
            char dir[32] = "desc";
            if (colon) {
                *colon = '\0';
                nb_strlcpy(dir, colon + 1, sizeof(dir));
                trim(dir);
                if (!*dir)
                    strcpy(dir, "desc");
            }
            trim(item);
            if (!one_of(item, sort_keys_ok))
                return bad_sort_key(ctx, item);
            if (strcmp(dir, "asc") != 0 && strcmp(dir, "desc") != 0)
                return nb_error(ctx, 400, NULL, "Invalid sort direction: %s", dir);
            if (s->n < 14) {
                nb_strlcpy(s->keys[s->n], item, sizeof(s->keys[0]));
                dirs_desc[ndirs++] = strcmp(dir, "desc") == 0;
                s->n++;
            }
        }
    } else {
        for (size_t i = 0; i < p->n; i++) {
            char v[64];
            nb_strlcpy(v, p->values[i], sizeof(v));
            trim(v);
            if (strcmp(p->keys[i], "sort_key") == 0) {
                if (!one_of(v, sort_keys_ok))
                    return bad_sort_key(ctx, v);
                if (s->n < 14)
                    nb_strlcpy(s->keys[s->n++], v, sizeof(s->keys[0]));
            } else if (strcmp(p->keys[i], "sort_dir") == 0) {
                if (strcmp(v, "asc") != 0 && strcmp(v, "desc") != 0)
                    return nb_error(ctx, 400, NULL, "Invalid sort direction: %s", v);
                if (ndirs < 14)
                    dirs_desc[ndirs++] = strcmp(v, "desc") == 0;
            }
        }
        if (ndirs > 1 && ndirs != s->n)
            return nb_error(ctx, 400, NULL,
                            "Number of sort dirs does not match the number of sort keys");
    }
    if (s->n == 0)
        strcpy(s->keys[s->n++], "created_at");
    if (ndirs == 0)
        dirs_desc[ndirs++] = true;
    for (int i = 0; i < s->n; i++)
        s->desc[i] = ndirs == 1 ? dirs_desc[0] : dirs_desc[i];
    bool default_desc = dirs_desc[0];
    static const char *const ties[] = {"created_at", "id"};
    for (int t = 0; t < 2; t++) {
        bool present = false;
        for (int i = 0; i < s->n; i++)
            present |= strcmp(s->keys[i], ties[t]) == 0;
        if (!present) {
            strcpy(s->keys[s->n], ties[t]);
            s->desc[s->n++] = default_desc;
        }
    }
    return 0;
}

static int cmp_values(const json_t *a, const json_t *b)
{
    bool an = !a || json_is_null(a), bn = !b || json_is_null(b);
    if (an || bn)
        return an == bn ? 0 : (an ? -1 : 1); /* NULLs first, as SQL sorts them */
    if (json_is_number(a) && json_is_number(b)) {
        double x = json_number_value(a), y = json_number_value(b);
        return x < y ? -1 : x > y;
    }
    if (json_is_string(a) && json_is_string(b))
        return strcmp(json_string_value(a), json_string_value(b));
    return 0;
}

static int cmp_records(const json_t *a, const json_t *b, const struct sort_spec *s)
{
    for (int i = 0; i < s->n; i++) {
        int c = cmp_values(json_object_get(a, s->keys[i]), json_object_get(b, s->keys[i]));
        if (c)
            return s->desc[i] ? -c : c;
    }
    return 0;
}

static int qsort_records(const void *x, const void *y, void *spec)
{
    return cmp_records(*(json_t *const *)x, *(json_t *const *)y, spec);
}

/* Every live, non-killed image as a record, with properties and tags. */
static json_t *all_records(struct nb_ctx *ctx)
{
    struct nb_db *db = nb_image_env->db;
    _cleanup_json_ json_t *rows =
        nb_db_rows(db, ctx, "SELECT * FROM images WHERE deleted = 0 AND status != 'killed'", "");
    _cleanup_json_ json_t *props =
        rows ? nb_db_rows(db, ctx,
                          "SELECT p.image_id AS image_id, p.name AS name, p.value AS value FROM "
                          "image_properties p JOIN images i ON i.id = p.image_id AND "
                          "i.deleted = 0 ORDER BY p.rowid",
                          "")
             : NULL;
    _cleanup_json_ json_t *tags =
        props ? nb_db_rows(db, ctx,
                           "SELECT t.image_id AS image_id, t.value AS value FROM image_tags t "
                           "JOIN images i ON i.id = t.image_id AND i.deleted = 0 ORDER BY t.rowid",
                           "")
              : NULL;
    if (!tags)
        return NULL;
    json_t *by_id = json_object();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        json_object_set_new(r, "protected", json_boolean(nb_json_int(r, "protected", 0)));
        json_object_set_new(r, "os_hidden", json_boolean(nb_json_int(r, "os_hidden", 0)));
        json_object_set_new(r, "properties", json_object());
        json_object_set_new(r, "tags", json_array());
        json_object_set(by_id, nb_json_str(r, "id"), r);
    }
    json_array_foreach (props, i, r) {
        json_t *rec = json_object_get(by_id, nb_json_str(r, "image_id"));
        const char *v = nb_json_str(r, "value");
        if (rec)
            json_object_set_new(json_object_get(rec, "properties"), nb_json_str(r, "name"),
                                json_string(v ? v : ""));
    }
    json_array_foreach (tags, i, r) {
        json_t *rec = json_object_get(by_id, nb_json_str(r, "image_id"));
        if (rec)
            json_array_append_new(json_object_get(rec, "tags"),
                                  json_string(nb_json_str(r, "value")));
    }
    json_decref(by_id);
    return json_incref(rows);
}

/* Glance's split_filter_op: "op:value" unless the whole value is an ISO
 * time. Writes op and returns a pointer to the threshold inside v. */
static const char *split_op(const char *v, char *op, size_t n)
{
    const char *colon = strchr(v, ':');
    if (!colon || nb_time_parse(v) >= 0) {
        nb_strlcpy(op, "eq", n);
        return v;
    }
    size_t l = (size_t)(colon - v) < n - 1 ? (size_t)(colon - v) : n - 1;
    memcpy(op, v, l);
    op[l] = '\0';
    return colon + 1;
}

/* The string form of a record value for equality with a query value. */
static void value_text(const json_t *v, char *out, size_t n)
{
    if (!v || json_is_null(v))
        nb_strlcpy(out, "\x01null", n);
    else if (json_is_string(v))
        nb_strlcpy(out, json_string_value(v), n);
    else if (json_is_boolean(v))
        nb_strlcpy(out, json_is_true(v) ? "1" : "0", n);
    else if (json_is_integer(v))
        snprintf(out, n, "%lld", (long long)json_integer_value(v));
    else
        snprintf(out, n, "%g", json_number_value(v));
}

/* Matches "in:" lists (comma separated, double quotes group). */
static bool in_list_match(const char *list, const char *value)
{
    const char *p = list;
    while (*p) {
        char item[512];
        size_t l = 0;
        if (*p == '"') {
            p++;
            while (*p && *p != '"' && l < sizeof(item) - 1) {
                if (*p == '\\' && p[1])
                    p++;
                item[l++] = *p++;
            }
            if (*p == '"')
                p++;
        } else {
            while (*p && *p != ',' && l < sizeof(item) - 1)
                item[l++] = *p++;
        }
        item[l] = '\0';
        if (strcmp(item, value) == 0)
            return true;
        if (*p == ',')
            p++;
    }
    return false;
}

static const char *const image_columns[] = {
    "id",         "name",       "disk_format", "container_format", "size",          "virtual_size",
    "status",     "visibility", "checksum",    "os_hash_algo",     "os_hash_value", "min_disk",
    "min_ram",    "owner",      "protected",   "os_hidden",        "created_at",    "updated_at",
    "deleted_at", "deleted",    NULL};

/* Applies one query filter to rec; 1 match, 0 no match, -1 error on ctx. */
static int filter_match(struct nb_ctx *ctx, const json_t *rec, const char *key, const char *value)
{
    char op[32], text[512];
    size_t kl = strlen(key);
    if (kl > 4 && (strcmp(key + kl - 4, "_min") == 0 || strcmp(key + kl - 4, "_max") == 0)) {
        char col[64];
        nb_strlcpy(col, key, kl - 4 + 1 < sizeof(col) ? kl - 4 + 1 : sizeof(col));
        char *end;
        long long n = strtoll(value, &end, 10);
        if (end == value || *end)
            return nb_error(ctx, 400, NULL,
                            "Unable to filter on a range with a non-numeric value.");
        json_t *v = json_object_get(rec, col);
        if (!json_is_number(v))
            return 0;
        double x = json_number_value(v);
        return strcmp(key + kl - 4, "_min") == 0 ? x >= (double)n : x <= (double)n;
    }
    if (strcmp(key, "created_at") == 0 || strcmp(key, "updated_at") == 0) {
        const char *t = split_op(value, op, sizeof(op));
        double th = nb_time_parse(t);
        if (th < 0)
            return nb_error(ctx, 400, NULL,
                            "Bad \"%s\" query filter format. Use ISO 8601 DateTime notation.", key);
        double x = nb_time_parse(nb_json_str(rec, key));
        if (strcmp(op, "gt") == 0)
            return x > th;
        if (strcmp(op, "gte") == 0)
            return x >= th;
        if (strcmp(op, "lt") == 0)
            return x < th;
        if (strcmp(op, "lte") == 0)
            return x <= th;
        if (strcmp(op, "neq") == 0)
            return x != th;
        if (strcmp(op, "eq") == 0)
            return x == th;
        return nb_error(ctx, 400, NULL, "Unable to filter by unknown operator '%s'.", op);
    }
    static const char *const op_keys[] = {"name",        "id", "status", "container_format",
                                          "disk_format", NULL};
    if (one_of(key, op_keys)) {
        const char *t = split_op(value, op, sizeof(op));
        value_text(json_object_get(rec, key), text, sizeof(text));
        if (strcmp(op, "in") == 0)
            return in_list_match(t, text);
        if (strcmp(op, "eq") == 0)
            return strcmp(t, text) == 0;
        return nb_error(ctx, 400, NULL, "Unable to filter by unknown operator '%s'.", op);
    }
    if (one_of(key, image_columns)) {
        value_text(json_object_get(rec, key), text, sizeof(text));
        return strcmp(value, text) == 0;
    }
    const char *pv = nb_json_str(json_object_get(rec, "properties"), key);
    return pv && strcmp(pv, value) == 0;
}

struct list_query {
    struct params p;
    const char *member_status, *marker, *visibility;
    long long limit;
    int os_hidden, protected_;
    struct sort_spec sort;
};

/* RequestDeserializer.index and the checks of ImagesController.index, on
 * the query parameters in q->p. */
static int parse_list(struct nb_ctx *ctx, struct list_query *q)
{
    static const char *const vis[] = {"community", "public", "private", "shared", "all", NULL};
    static const char *const ms[] = {"pending", "accepted", "rejected", "all", NULL};
    q->visibility = params_get(&q->p, "visibility");
    if (q->visibility && *q->visibility && !one_of(q->visibility, vis))
        return nb_error(ctx, 400, NULL, "Invalid visibility value: %s", q->visibility);
    if (q->visibility && !*q->visibility)
        q->visibility = NULL;
    const char *cs = params_get(&q->p, "changes-since");
    if (cs && *cs)
        return nb_error(ctx, 400, NULL,
                        "The \"changes-since\" filter is no longer available on v2.");
    q->member_status = params_get(&q->p, "member_status");
    if (!q->member_status)
        q->member_status = "accepted";
    if (!one_of(q->member_status, ms))
        return nb_error(ctx, 400, NULL, "Invalid status: %s", q->member_status);
    q->marker = params_get(&q->p, "marker");
    const char *l = params_get(&q->p, "limit");
    q->limit = nb_conf_int("DEFAULT", "limit_param_default", 25);
    if (l) {
        char *end;
        const char *s = l;
        while (isspace((unsigned char)*s))
            s++;
        long long n = strtoll(s, &end, 10);
        while (isspace((unsigned char)*end))
            end++;
        if (end == s || *end)
            return nb_error(ctx, 400, NULL, "limit param must be an integer");
        if (n < 0)
            return nb_error(ctx, 400, NULL, "limit param must be positive");
        q->limit = n;
    }
    if (parse_sorting(ctx, &q->p, &q->sort) < 0)
        return -1;
    long long max = nb_conf_int("DEFAULT", "api_limit_max", 1000);
    if (q->limit > max)
        q->limit = max;
    const char *h = params_get(&q->p, "os_hidden");
    if (!h)
        h = "false";
    if (strcasecmp(h, "true") != 0 && strcasecmp(h, "false") != 0)
        return nb_error(ctx, 400, NULL,
                        "Invalid value '%s' for 'os_hidden' filter. Valid values are 'true' or "
                        "'false'.",
                        h);
    q->os_hidden = strcasecmp(h, "true") == 0;
    const char *pr = params_get(&q->p, "protected");
    q->protected_ = -1;
    if (pr) {
        if (strcmp(pr, "true") != 0 && strcmp(pr, "false") != 0)
            return nb_error(ctx, 400, NULL,
                            "Invalid value '%s' for 'protected' filter. Valid values are 'true' "
                            "or 'false'.",
                            pr);
        q->protected_ = strcmp(pr, "true") == 0;
    }
    return 0;
}

/* _select_images_query and the visibility rules of image_get_all. */
static bool listed(struct nb_ctx *ctx, const json_t *rec, const struct list_query *q,
                   const json_t *memberships)
{
    const char *vis = nb_json_str(rec, "visibility"), *owner = nb_json_str(rec, "owner");
    const char *proj = ctx->project_id[0] ? ctx->project_id : NULL;
    bool owned = proj && owner && strcmp(owner, proj) == 0;
    if (!ctx->is_admin) {
        bool ok = strcmp(vis, "public") == 0 || strcmp(vis, "community") == 0 || owned;
        if (!ok && strcmp(vis, "shared") == 0 && proj) {
            const char *st = nb_json_str(memberships, nb_json_str(rec, "id"));
            ok = st && (strcmp(q->member_status, "all") == 0 || strcmp(st, q->member_status) == 0);
        }
        if (!ok)
            return false;
    }
    if (q->visibility)
        return strcmp(q->visibility, "all") == 0 || strcmp(vis, q->visibility) == 0;
    return strcmp(vis, "community") != 0 || owned;
}

/* {image_id: status} of the memberships of ctx's project. New ref, or
 * NULL after a database error. */
static json_t *member_statuses(struct nb_ctx *ctx)
{
    json_t *mrows = nb_db_rows(nb_image_env->db, ctx,
                               "SELECT image_id, status FROM image_members WHERE member = ? AND "
                               "deleted = 0",
                               "s", ctx->project_id);
    if (!mrows)
        return NULL;
    json_t *memberships = json_object();
    size_t i;
    json_t *r;
    json_array_foreach (mrows, i, r) {
        json_object_set_new(memberships, nb_json_str(r, "image_id"),
                            json_string(nb_json_str(r, "status")));
    }
    json_decref(mrows);
    return memberships;
}

/* Whether rec carries every "tag" of q (trimmed). */
static bool has_tags(const json_t *rec, const struct list_query *q)
{
    bool ok = true;
    for (size_t k = 0; k < q->p.n && ok; k++) {
        if (strcmp(q->p.keys[k], "tag") != 0)
            continue;
        char tag[512];
        nb_strlcpy(tag, q->p.values[k], sizeof(tag));
        trim(tag);
        _cleanup_json_ json_t *t = json_string(tag);
        bool has = false;
        size_t j;
        json_t *u;
        json_array_foreach (json_object_get(rec, "tags"), j, u) {
            has |= json_equal(u, t);
        }
        ok = has;
    }
    return ok;
}

/* Whether rec is listed for q: visible, os_hidden and protected as asked,
 * every filter and tag matching. 1 or 0, -1 after a 400 for a bad filter. */
static int query_match(struct nb_ctx *ctx, const json_t *rec, const struct list_query *q,
                       const json_t *memberships)
{
    static const char *const not_filters[] = {
        "limit", "marker",     "member_status", "tag",       "sort_key", "sort_dir",
        "sort",  "visibility", "os_hidden",     "protected", NULL};
    if (!listed(ctx, rec, q, memberships))
        return 0;
    if (json_is_true(json_object_get(rec, "os_hidden")) != (q->os_hidden == 1))
        return 0;
    if (q->protected_ >= 0 &&
        json_is_true(json_object_get(rec, "protected")) != (q->protected_ == 1))
        return 0;
    for (size_t k = 0; k < q->p.n; k++) {
        const char *key = q->p.keys[k];
        if (one_of(key, not_filters))
            continue;
        int m = filter_match(ctx, rec, key, params_get(&q->p, key));
        if (m < 0)
            return -1;
        if (m != 1)
            return 0;
    }
    return has_tags(rec, q);
}

/* The page of list after marker_rec (NULL = from the start) in q's sort
 * order, at most q->limit image views. New ref. */
static json_t *sorted_page(json_t *list, const json_t *marker_rec, const struct list_query *q)
{
    size_t n = json_array_size(list);
    json_t **items = calloc(n ? n : 1, sizeof(*items));
    if (!items)
        abort();
    size_t i;
    for (i = 0; i < n; i++)
        items[i] = json_array_get(list, i);
    qsort_r(items, n, sizeof(*items), qsort_records, (void *)&q->sort);
    json_t *page = json_array();
    for (i = 0; i < n && (long long)json_array_size(page) < q->limit; i++) {
        if (marker_rec && cmp_records(items[i], marker_rec, &q->sort) <= 0)
            continue;
        json_array_append_new(page, nb_image_record_view(items[i]));
    }
    free(items);
    return page;
}

/* The images ctx's project may see: image_get_all's visibility rules, the
 * filters, tags, marker and sorting of q, at most q->limit of them. A new
 * array of image views, or NULL after an error. */
static json_t *select_images(struct nb_ctx *ctx, const struct list_query *q)
{
    json_t *records = NULL, *memberships = NULL, *list = NULL, *page = NULL;
    if (!ctx->is_admin && !ctx->is_reader) {
        nb_error(ctx, 403, NULL, "You are not authorized to complete get_images action.");
        goto out;
    }
    if (!(records = all_records(ctx)))
        goto out;
    if (!(memberships = member_statuses(ctx)))
        goto out;

    json_t *marker_rec = NULL;
    list = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (records, i, r) {
        if (q->marker && strcmp(nb_json_str(r, "id"), q->marker) == 0)
            marker_rec = r;
        int m = query_match(ctx, r, q, memberships);
        if (m < 0)
            goto out;
        if (m)
            json_array_append(list, r);
    }
    if (q->marker && (!marker_rec || !nb_image_record_visible(ctx, marker_rec))) {
        if (marker_rec)
            nb_error(ctx, 403, NULL, "Forbidding request, image %s not visible", q->marker);
        else
            nb_error(ctx, 400, NULL, "No image found with ID %s", q->marker);
        goto out;
    }
    page = sorted_page(list, marker_rec, q);
out:
    json_decref(list);
    json_decref(records);
    json_decref(memberships);
    return page;
}

static int images_index(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    struct list_query q = {0};
    nb_req_query_each(req, params_add, &q.p);
    json_t *page = parse_list(ctx, &q) == 0 ? select_images(ctx, &q) : NULL;
    if (!page) {
        params_free(&q.p);
        return -1;
    }
    char *query = encode_params(&q.p, NULL);
    char *first = *query ? nb_strdup_printf("/v2/images?%s", query) : strdup("/v2/images");
    json_t *body = json_pack("{s:o, s:s, s:s}", "images", page, "first", first, "schema",
                             "/v2/schemas/images");
    free(query);
    free(first);
    size_t np = json_array_size(page);
    if (np && (long long)np == q.limit) {
        const char *last = nb_json_str(json_array_get(page, np - 1), "id");
        char *nq = encode_params(&q.p, last);
        char *next = nb_strdup_printf("/v2/images?%s", nq);
        json_object_set_new(body, "next", json_string(next));
        free(nq);
        free(next);
    }
    params_free(&q.p);
    return nb_resp_json(resp, 200, body);
}

json_t *nb_image_list(struct nb_ctx *ctx, const json_t *filters, const char *marker,
                      long long limit)
{
    struct list_query q = {0};
    const char *key;
    json_t *v;
    json_object_foreach ((json_t *)filters, key, v) {
        if (json_is_string(v))
            params_add(&q.p, key, json_string_value(v));
    }
    if (marker)
        params_add(&q.p, "marker", marker);
    json_t *page = NULL;
    if (parse_list(ctx, &q) == 0) {
        /* A client following the "next" links gets every page. */
        q.limit = limit >= 0 ? limit : LLONG_MAX;
        page = select_images(ctx, &q);
    }
    params_free(&q.p);
    return page;
}

/* --- show, update, delete --------------------------------------------------------------- */

/* The visible record of the {image_id} parameter, or NULL after 404 with
 * not_found_fmt (one %s for the id) or a db error. */
static json_t *visible_record(struct nb_ctx *ctx, struct nb_req *req, const char *not_found_fmt)
{
    const char *id = nb_req_param(req, "image_id");
    json_t *rec = nb_image_record_load(ctx, id);
    if (!rec && nb_ctx_failed(ctx))
        return NULL;
    if (!rec || !nb_image_record_visible(ctx, rec)) {
        json_decref(rec);
        nb_error(ctx, 404, NULL, not_found_fmt, id);
        return NULL;
    }
    return rec;
}

static int images_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    _cleanup_json_ json_t *rec = visible_record(ctx, req, "No image found with ID %s");
    if (!rec)
        return -1;
    return nb_resp_json(resp, 200, nb_image_record_view(rec));
}

static int images_update(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *ct = nb_req_header(req, "Content-Type");
    char mime[128] = "";
    if (ct) {
        nb_strlcpy(mime, ct, sizeof(mime));
        mime[strcspn(mime, ";")] = '\0';
        trim(mime);
    }
    int draft = strcasecmp(mime, "application/openstack-images-v2.1-json-patch") == 0   ? 10
                : strcasecmp(mime, "application/openstack-images-v2.0-json-patch") == 0 ? 4
                                                                                        : 0;
    if (!draft) {
        nb_resp_header(resp, "Accept-Patch",
                       "application/openstack-images-v2.0-json-patch, "
                       "application/openstack-images-v2.1-json-patch");
        return nb_error(ctx, 415, NULL,
                        "The request media type %s is not supported by this server.",
                        ct ? ct : "None");
    }
    json_t *body = request_body(ctx, req);
    if (!body)
        return -1;
    /* Glance's deserializer checks every operation before the lookup. */
    char msg[1024];
    int st = nb_image_patch_check(body, draft, msg, sizeof(msg));
    if (st)
        return nb_error(ctx, st, NULL, "%s", msg);
    _cleanup_json_ json_t *rec = visible_record(ctx, req, "No image found with ID %s");
    if (!rec)
        return -1;
    if (json_array_size(body) > 0 && !nb_image_record_mutable(ctx, rec))
        return nb_error(ctx, 403, NULL, "You are not authorized to complete modify_image action.");
    _cleanup_json_ json_t *probe = json_deep_copy(rec);
    st = nb_image_patch_apply(probe, body, draft, ctx->is_admin, msg, sizeof(msg));
    if (st)
        return nb_error(ctx, st, NULL, "%s", msg);
    if (json_array_size(body) > 0) {
        if (nb_image_record_quota(ctx, probe) < 0 || nb_image_record_save(ctx, probe) < 0)
            return -1;
        NB_INFO("nubo.image.api", ctx, NULL, "updated image %s", nb_json_str(probe, "id"));
    }
    return nb_resp_json(resp, 200, nb_image_record_view(probe));
}

static int images_delete(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    _cleanup_json_ json_t *rec = visible_record(ctx, req, "Failed to find image %s to delete");
    if (!rec)
        return -1;
    const char *id = nb_json_str(rec, "id");
    if (!nb_image_record_mutable(ctx, rec))
        return nb_error(ctx, 403, NULL, "You are not authorized to complete delete_image action.");
    if (json_is_true(json_object_get(rec, "protected")))
        return nb_error(ctx, 403, NULL, "Image %s is protected and cannot be deleted.", id);
    if (nb_image_record_delete(ctx, id) < 0)
        return -1;
    return nb_resp_empty(resp, 204);
}

/* --- tags ---------------------------------------------------------------------------------- */

static int tags_update(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *id = nb_req_param(req, "image_id"), *tag = nb_req_param(req, "tag");
    _cleanup_json_ json_t *probe = json_pack("{s:[s]}", "tags", tag);
    char msg[1024];
    if (nb_image_schema_check(probe, msg, sizeof(msg)) < 0)
        return nb_error(ctx, 400, NULL, "%s", msg);
    _cleanup_json_ json_t *rec = visible_record(ctx, req, "Image %s not found.");
    if (!rec)
        return -1;
    if (!nb_image_record_mutable(ctx, rec))
        return nb_error(ctx, 403, NULL, "Not allowed to update tags for image %s.", id);
    json_t *tags = json_object_get(rec, "tags");
    _cleanup_json_ json_t *t = json_string(tag);
    bool has = false;
    size_t i;
    json_t *u;
    json_array_foreach (tags, i, u) {
        has |= json_equal(u, t);
    }
    if (!has) {
        json_array_append(tags, t);
        struct nb_ctx sub;
        nb_ctx_init(&sub);
        if (nb_image_record_quota(&sub, rec) < 0)
            return nb_error(ctx, 413, NULL, "Image tag limit exceeded for image %s: %s:", id,
                            nb_ctx_message(&sub));
        if (nb_image_record_save(ctx, rec) < 0)
            return -1;
    }
    return nb_resp_empty(resp, 204);
}

static int tags_delete(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *id = nb_req_param(req, "image_id"), *tag = nb_req_param(req, "tag");
    _cleanup_json_ json_t *rec = visible_record(ctx, req, "Image %s not found.");
    if (!rec)
        return -1;
    if (!nb_image_record_mutable(ctx, rec))
        return nb_error(ctx, 403, NULL, "Not allowed to delete tags for image %s.", id);
    json_t *tags = json_object_get(rec, "tags");
    size_t i;
    json_t *u;
    json_array_foreach (tags, i, u) {
        if (strcmp(json_string_value(u), tag) == 0) {
            json_array_remove(tags, i);
            return nb_image_record_save(ctx, rec) < 0 ? -1 : nb_resp_empty(resp, 204);
        }
    }
    return nb_error(ctx, 404, NULL, "The resource could not be found.");
}

int nb_image_init(struct nb_env *env)
{
    nb_image_env = env;
    nb_http_service_register(&nb_image_http_service, false);
    nb_http_route("GET", "/image", versions_choices, NB_ROUTE_NO_AUTH);
    nb_http_route("GET", "/image/versions", versions_explicit, NB_ROUTE_NO_AUTH);
    nb_http_route("GET", "/image/v2", versions_explicit, NB_ROUTE_NO_AUTH);
    nb_http_route("GET", "/image/v2/schemas/image", schema_image, 0);
    nb_http_route("GET", "/image/v2/schemas/images", schema_images, 0);
    nb_http_route("GET", "/image/v2/schemas/member", schema_member, 0);
    nb_http_route("GET", "/image/v2/schemas/members", schema_members, 0);
    nb_http_route("POST", "/image/v2/images", images_create, 0);
    nb_http_route("GET", "/image/v2/images", images_index, 0);
    nb_http_route("GET", "/image/v2/images/{image_id}", images_show, 0);
    nb_http_route("PATCH", "/image/v2/images/{image_id}", images_update, 0);
    nb_http_route("DELETE", "/image/v2/images/{image_id}", images_delete, 0);
    nb_http_route("PUT", "/image/v2/images/{image_id}/tags/{tag}", tags_update, 0);
    nb_http_route("DELETE", "/image/v2/images/{image_id}/tags/{tag}", tags_delete, 0);
    nb_image_data_init();
    nb_image_members_init();
    return 0;
}
