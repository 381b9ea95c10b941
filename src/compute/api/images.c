/* images.c - Nova's image proxy: /images, /images/detail, /images/{id}
 * (images.py, up to microversion 2.35) and /images/{id}/metadata[/{key}]
 * (image_metadata.py, up to 2.38), which show Glance images in Nova's
 * shapes. Above those microversions the routes answer a bare 404, as Nova
 * does for a method with no version that matches.
 *
 * Everything goes through the image module (image.h), the way Nova goes
 * through glanceclient: the list passes Nova's filters translated to
 * Glance v2 ones (_extract_query_params_v2), the metadata is the image's
 * Glance properties (what is not a Glance attribute) and a metadata change
 * replaces the whole set (purge_props), after Nova's own metadata_items
 * quota check (403 "Image metadata limit exceeded"). The view is
 * views/images.py: status and progress mapped from Glance's status, a
 * "server" link for a snapshot (property instance_uuid), self, bookmark
 * and Glance alternate links. Nova has no policy rule here: any
 * authenticated user, with Glance deciding what that user may see or
 * change. */
#include "common/cleanup.h"
#include "common/json.h"
#include "common/util.h"
#include "compute/api/api.h"
#include "compute/api/links.h"
#include "compute/api/quotas.h"
#include "compute/api/validate.h"
#include "image/image.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Nova's MAX_PROXY_API_SUPPORT_VERSION and MAX_IMAGE_META_PROXY_API_VERSION. */
#define PROXY_MAX_MINOR 35
#define META_PROXY_MAX_MINOR 38

/* 404 with webob's default text when the microversion is above max_minor
 * (VersionNotFoundForAPIMethod becomes a bare HTTPNotFound). 0 when the
 * method exists at ctx's microversion. */
static int check_version(struct nb_ctx *ctx, int max_minor)
{
    if (nb_ctx_mv_ge(ctx, 2, max_minor + 1))
        return nb_error(ctx, 404, NULL, "The resource could not be found.");
    return 0;
}

/* --- the view (views/images.py) ----------------------------------------- */

/* ViewBuilder._get_status: Glance status to Nova's. */
static const char *nova_status(const char *glance)
{
    static const char *const map[][2] = {
        {"active", "ACTIVE"},   {"queued", "SAVING"},          {"saving", "SAVING"},
        {"deleted", "DELETED"}, {"pending_delete", "DELETED"}, {"killed", "ERROR"},
    };
    for (size_t i = 0; glance && i < sizeof(map) / sizeof(map[0]); i++)
        if (!strcmp(map[i][0], glance))
            return map[i][1];
    return "UNKNOWN";
}

/* ViewBuilder._get_progress. */
static int nova_progress(const char *glance)
{
    if (!glance)
        return 0;
    if (!strcmp(glance, "queued"))
        return 25;
    if (!strcmp(glance, "saving"))
        return 50;
    return !strcmp(glance, "active") ? 100 : 0;
}

/* self, bookmark and the Glance alternate link of an image. New array. */
static json_t *image_links(const char *id)
{
    json_t *links = nb_res_links("images", id);
    _cleanup_free_ char *alt = nb_strdup_printf("%s/image/images/%s", nb_http_base_url(), id);
    json_array_append_new(links, json_pack("{s:s, s:s, s:s}", "rel", "alternate", "type",
                                           "application/vnd.openstack.image", "href", alt));
    return links;
}

/* The properties of a Glance view: what is not a Glance attribute
 * (_extract_attributes_v2). New object. */
static json_t *image_properties(const json_t *glance)
{
    json_t *props = json_object();
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)glance, k, v) {
        if (!nb_image_is_core_attr(k))
            json_object_set(props, k, v);
    }
    return props;
}

/* An integer attribute of a Glance view, 0 when null ("int(x or 0)"; a
 * null size is 0 too, _extract_attributes_v2). */
static json_int_t int_or_zero(const json_t *glance, const char *key)
{
    json_t *v = json_object_get(glance, key);
    return json_is_integer(v) ? json_integer_value(v) : 0;
}

/* ViewBuilder.basic: {"id", "name", "links"}. New ref. */
static json_t *view_basic(const json_t *glance)
{
    const char *id = nb_json_str(glance, "id");
    json_t *name = json_object_get(glance, "name");
    return json_pack("{s:s, s:O, s:o}", "id", id, "name", name ? name : json_null(), "links",
                     image_links(id));
}

/* ViewBuilder.show's image dict. New ref. */
static json_t *view_show(const json_t *glance)
{
    const char *id = nb_json_str(glance, "id");
    const char *status = nb_json_str(glance, "status");
    json_t *name = json_object_get(glance, "name");
    json_t *props = image_properties(glance);
    const char *created = nb_json_str(glance, "created_at");
    const char *updated = nb_json_str(glance, "updated_at");
    json_t *img =
        json_pack("{s:s, s:O, s:I, s:I, s:o, s:o, s:o, s:s, s:i, s:I, s:o}", "id", id, "name",
                  name ? name : json_null(), "minRam", int_or_zero(glance, "min_ram"), "minDisk",
                  int_or_zero(glance, "min_disk"), "metadata", props, "created",
                  created ? json_string(created) : json_null(), "updated",
                  updated ? json_string(updated) : json_null(), "status", nova_status(status),
                  "progress", nova_progress(status), "OS-EXT-IMG-SIZE:size",
                  int_or_zero(glance, "size"), "links", image_links(id));
    const char *server = nb_json_str(props, "instance_uuid");
    if (server)
        json_object_set_new(
            img, "server",
            json_pack("{s:s, s:o}", "id", server, "links", nb_res_links("servers", server)));
    const char *adc = nb_json_str(props, "auto_disk_config");
    if (adc)
        json_object_set_new(
            img, "OS-DCF:diskConfig",
            json_string(nb_srv_bool_from_string(adc, false) == 1 ? "AUTO" : "MANUAL"));
    return img;
}

/* --- lookups ---------------------------------------------------------------- */

/* The Glance view of the {image_id} parameter, or NULL after Nova's 404
 * "Image not found." (other errors, e.g. of the database, are kept). */
static json_t *get_image(struct nb_ctx *ctx, struct nb_req *req)
{
    json_t *img = nb_image_show(ctx, nb_req_param(req, "image_id"));
    if (!img && nb_ctx_status(ctx) == 404)
        nb_srv_error_as(ctx, 404, "Image not found.");
    return img;
}

/* --- list (index, detail) ---------------------------------------------------- */

/* Nova's get_pagination_params for one integer: utils.validate_integer with
 * min_value 0. Sets *out (-1 when absent). 0/-1. */
static int int_param(struct nb_ctx *ctx, const char *name, const char *s, long long *out)
{
    *out = -1;
    if (!s)
        return 0;
    const char *p = s;
    while (isspace((unsigned char)*p))
        p++;
    char *end;
    long long v = strtoll(p, &end, 10);
    while (isspace((unsigned char)*end))
        end++;
    if (end == p || *end)
        return nb_error(ctx, 400, NULL, "Invalid input received: %s must be an integer", name);
    if (v < 0)
        return nb_error(ctx, 400, NULL, "Invalid input received: %s must be >= 0", name);
    *out = v;
    return 0;
}

/* Python's str.lstrip(chars): Nova removes the "property-" prefix of a
 * filter with lstrip('property-'), which strips any leading characters of
 * that set ("property-os_distro" becomes "s_distro"); Glance gets that. */
static const char *lstrip_chars(const char *s, const char *chars)
{
    while (*s && strchr(chars, *s))
        s++;
    return s;
}

/* One query parameter into the Glance v2 filters, as _get_filters and
 * _extract_query_params_v2 translate it; ignored when not a filter. */
static void add_filter(json_t *filters, const char *param, const char *value)
{
    static const char *const direct[][2] = {
        {"name", "name"},        {"status", "status"},        {"minRam", "min_ram"},
        {"minDisk", "min_disk"}, {"server", "instance_uuid"}, {"type", "image_type"},
    };
    if (!strcmp(param, "changes-since")) {
        _cleanup_free_ char *gte = nb_strdup_printf("gte:%s", value);
        json_object_set_new(filters, "updated_at", json_string(gte));
        return;
    }
    if (!strncmp(param, "property-", 9)) {
        json_object_set_new(filters, lstrip_chars(param, "property-"), json_string(value));
        return;
    }
    for (size_t i = 0; i < sizeof(direct) / sizeof(direct[0]); i++) {
        if (strcmp(param, direct[i][0]) != 0)
            continue;
        _cleanup_free_ char *v = strdup(value);
        if (!strcmp(param, "server")) {
            const char *slash = strrchr(value, '/');
            if (slash) { /* the server filter may be a server's href */
                free(v);
                v = strdup(slash + 1);
            }
        } else if (!strcmp(param, "status")) {
            for (char *c = v; *c; c++)
                *c = (char)tolower((unsigned char)*c);
        }
        json_object_set_new(filters, direct[i][1], json_string(v));
    }
}

/* The images of a list request: Nova's filters, marker and limit through
 * the image module. New array or NULL after 400. */
static json_t *list_images(struct nb_ctx *ctx, struct nb_req *req)
{
    _cleanup_json_ json_t *q = nb_srv_query_all(req);
    long long limit, page_size;
    if (int_param(ctx, "limit", nb_srv_query_last(q, "limit"), &limit) < 0 ||
        int_param(ctx, "page_size", nb_srv_query_last(q, "page_size"), &page_size) < 0)
        return NULL;
    _cleanup_json_ json_t *filters = json_object();
    const char *k;
    json_t *vals;
    json_object_foreach (q, k, vals) {
        add_filter(filters, k, nb_srv_query_last(q, k));
    }
    const char *marker = nb_srv_query_last(q, "marker");
    /* _extract_query_params_v2 drops a 0 limit and an empty marker. */
    json_t *images =
        nb_image_list(ctx, filters, marker && *marker ? marker : NULL, limit > 0 ? limit : -1);
    return images;
}

/* ViewBuilder._list_view: the views and the images_links "next" link. */
static int respond_list(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp, bool detail)
{
    if (check_version(ctx, PROXY_MAX_MINOR) < 0)
        return -1;
    _cleanup_json_ json_t *images = list_images(ctx, req);
    if (!images)
        return -1;
    json_t *list = json_array();
    size_t i;
    json_t *img;
    json_array_foreach (images, i, img) {
        json_array_append_new(list, detail ? view_show(img) : view_basic(img));
    }
    json_t *body = json_pack("{s:o}", "images", list);
    size_t n = json_array_size(images);
    nb_res_next_link(body, "images_links", req, detail ? "images/detail" : "images", n,
                     n ? nb_json_str(json_array_get(images, n - 1), "id") : NULL);
    return nb_resp_json(resp, 200, body);
}

static int h_images_index(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    return respond_list(ctx, req, resp, false);
}

static int h_images_detail(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    return respond_list(ctx, req, resp, true);
}

/* --- show, delete ---------------------------------------------------------------- */

static int h_image_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (check_version(ctx, PROXY_MAX_MINOR) < 0)
        return -1;
    _cleanup_json_ json_t *img = get_image(ctx, req);
    if (!img)
        return -1;
    return nb_resp_json(resp, 200, json_pack("{s:o}", "image", view_show(img)));
}

static int h_image_delete(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (check_version(ctx, PROXY_MAX_MINOR) < 0)
        return -1;
    if (nb_image_delete(ctx, nb_req_param(req, "image_id")) < 0) {
        if (nb_ctx_status(ctx) == 404)
            return nb_srv_error_as(ctx, 404, "Image not found.");
        if (nb_ctx_status(ctx) == 403)
            return nb_srv_error_as(ctx, 403, "You are not allowed to delete the image.");
        return -1;
    }
    return nb_resp_empty(resp, 204);
}

/* --- metadata (image_metadata.py) ------------------------------------------------- */

/* The image of a metadata request at a microversion that has it. */
static json_t *meta_image(struct nb_ctx *ctx, struct nb_req *req)
{
    if (check_version(ctx, META_PROXY_MAX_MINOR) < 0)
        return NULL;
    return get_image(ctx, req);
}

/* common.check_img_metadata_properties_quota: the metadata_items quota of
 * the project. 0, or -1 after 403 "Image metadata limit exceeded". */
static int check_meta_quota(struct nb_ctx *ctx, const json_t *props)
{
    long long lim[NB_Q_COUNT];
    if (json_object_size(props) == 0)
        return 0;
    if (nb_quota_limits(ctx, ctx->project_id, NULL, lim) < 0)
        return -1;
    if (lim[NB_Q_METADATA_ITEMS] >= 0 &&
        (long long)json_object_size(props) > lim[NB_Q_METADATA_ITEMS])
        return nb_error(ctx, 403, NULL, "Image metadata limit exceeded");
    return 0;
}

/* image_api.update(..., purge_props=True): props become the image's
 * properties. Glance's refusals come back as Nova translates them. New
 * view, or NULL. */
static json_t *save_properties(struct nb_ctx *ctx, const char *image_id, const json_t *props)
{
    if (check_meta_quota(ctx, props) < 0)
        return NULL;
    json_t *img = nb_image_set_properties(ctx, image_id, props);
    if (!img && nb_ctx_status(ctx) == 403) {
        _cleanup_free_ char *msg = nb_strdup_printf("Not authorized for image %s.", image_id);
        nb_srv_error_as(ctx, 403, msg);
    } else if (!img && nb_ctx_status(ctx) == 404) {
        nb_srv_error_as(ctx, 404, "Image not found.");
    }
    return img;
}

/* The {"metadata": {...}} body of create and update_all (schema create). */
static json_t *metadata_body(struct nb_ctx *ctx, struct nb_req *req)
{
    static const char *const top[] = {"metadata", NULL};
    json_t *md = nb_srv_body_object(ctx, req, "metadata", top);
    if (!md || nb_srv_check_metadata(ctx, "metadata", md) < 0)
        return NULL;
    return md;
}

static int h_meta_index(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    _cleanup_json_ json_t *img = meta_image(ctx, req);
    if (!img)
        return -1;
    return nb_resp_json(resp, 200, json_pack("{s:o}", "metadata", image_properties(img)));
}

static int h_meta_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    _cleanup_json_ json_t *img = meta_image(ctx, req);
    if (!img)
        return -1;
    _cleanup_json_ json_t *props = image_properties(img);
    const char *key = nb_req_param(req, "key");
    json_t *v = json_object_get(props, key);
    if (!v)
        return nb_error(ctx, 404, NULL, "The resource could not be found.");
    json_t *meta = json_object();
    json_object_set(meta, key, v);
    return nb_resp_json(resp, 200, json_pack("{s:o}", "meta", meta));
}

/* POST /images/{id}/metadata: merges the body into the properties. */
static int h_meta_create(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (check_version(ctx, META_PROXY_MAX_MINOR) < 0)
        return -1;
    json_t *md = metadata_body(ctx, req);
    _cleanup_json_ json_t *img = md ? get_image(ctx, req) : NULL;
    if (!img)
        return -1;
    _cleanup_json_ json_t *props = image_properties(img);
    json_object_update(props, md);
    _cleanup_json_ json_t *saved = save_properties(ctx, nb_json_str(img, "id"), props);
    if (!saved)
        return -1;
    return nb_resp_json(resp, 200, json_pack("{s:o}", "metadata", image_properties(saved)));
}

/* PUT /images/{id}/metadata: the body becomes the properties. */
static int h_meta_update_all(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (check_version(ctx, META_PROXY_MAX_MINOR) < 0)
        return -1;
    json_t *md = metadata_body(ctx, req);
    _cleanup_json_ json_t *img = md ? get_image(ctx, req) : NULL;
    if (!img)
        return -1;
    _cleanup_json_ json_t *saved = save_properties(ctx, nb_json_str(img, "id"), md);
    if (!saved)
        return -1;
    return nb_resp_json(resp, 200, json_pack("{s:O}", "metadata", md));
}

/* PUT /images/{id}/metadata/{key}: {"meta": {key: value}} (schema update). */
static int h_meta_update(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    static const char *const top[] = {"meta", NULL};
    if (check_version(ctx, META_PROXY_MAX_MINOR) < 0)
        return -1;
    json_t *meta = nb_srv_body_object(ctx, req, "meta", top);
    if (!meta || nb_srv_check_metadata(ctx, "meta", meta) < 0)
        return -1;
    if (json_object_size(meta) > 1)
        return nb_srv_bad(ctx, "meta", meta, "has too many properties");
    if (json_object_size(meta) < 1)
        return nb_srv_bad(ctx, "meta", meta, "does not have enough properties");
    const char *key = nb_req_param(req, "key");
    json_t *v = json_object_get(meta, key);
    if (!v)
        return nb_error(ctx, 400, NULL, "Request body and URI mismatch");
    _cleanup_json_ json_t *img = get_image(ctx, req);
    if (!img)
        return -1;
    _cleanup_json_ json_t *props = image_properties(img);
    json_object_set(props, key, v);
    _cleanup_json_ json_t *saved = save_properties(ctx, nb_json_str(img, "id"), props);
    if (!saved)
        return -1;
    return nb_resp_json(resp, 200, json_pack("{s:O}", "meta", meta));
}

/* DELETE /images/{id}/metadata/{key}: 204, 404 "Invalid metadata key". */
static int h_meta_delete(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    _cleanup_json_ json_t *img = meta_image(ctx, req);
    if (!img)
        return -1;
    _cleanup_json_ json_t *props = image_properties(img);
    const char *key = nb_req_param(req, "key");
    if (!json_object_get(props, key))
        return nb_error(ctx, 404, NULL, "Invalid metadata key");
    json_object_del(props, key);
    _cleanup_json_ json_t *saved = save_properties(ctx, nb_json_str(img, "id"), props);
    if (!saved)
        return -1;
    return nb_resp_empty(resp, 204);
}

int nb_compute_images_init(struct nb_env *env)
{
    (void)env;
    nb_http_route("GET", "/compute/v2.1/images", h_images_index, 0);
    nb_http_route("GET", "/compute/v2.1/images/detail", h_images_detail, 0);
    nb_http_route("GET", "/compute/v2.1/images/{image_id}", h_image_show, 0);
    nb_http_route("DELETE", "/compute/v2.1/images/{image_id}", h_image_delete, 0);
    nb_http_route("GET", "/compute/v2.1/images/{image_id}/metadata", h_meta_index, 0);
    nb_http_route("POST", "/compute/v2.1/images/{image_id}/metadata", h_meta_create, 0);
    nb_http_route("PUT", "/compute/v2.1/images/{image_id}/metadata", h_meta_update_all, 0);
    nb_http_route("GET", "/compute/v2.1/images/{image_id}/metadata/{key}", h_meta_show, 0);
    nb_http_route("PUT", "/compute/v2.1/images/{image_id}/metadata/{key}", h_meta_update, 0);
    nb_http_route("DELETE", "/compute/v2.1/images/{image_id}/metadata/{key}", h_meta_delete, 0);
    return 0;
}
