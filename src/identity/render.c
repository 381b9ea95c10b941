/* render.c - the shapes every Keystone response shares.
 *
 * Entities carry {"links": {"self": <url>}}; collections are
 * {<key>: [...], "links": {"self", "previous", "next"}}; policy failures are
 * 403 "You are not authorized to perform the requested action: <rule>.";
 * schema failures are 400 with jsonschema-style messages. Keystone keeps
 * attributes it does not model ("extra") and returns them at the top level,
 * so the entity files keep them in the extra column. */
#include "identity/identity_int.h"

#include "common/cleanup.h"
#include "common/json.h"
#include "common/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

json_t *nb_idn_url(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    _cleanup_free_ char *path = NULL;
    if (vasprintf(&path, fmt, ap) < 0)
        abort();
    va_end(ap);
    _cleanup_free_ char *url = nb_strdup_printf("%s/identity/v3%s", nb_http_base_url(), path);
    return json_string(url);
}

void nb_idn_self_link(json_t *obj, const char *collection, const char *id)
{
    json_object_set_new(obj, "links",
                        json_pack("{s:o}", "self", nb_idn_url("/%s/%s", collection, id)));
}

int nb_idn_collection(struct nb_resp *resp, const struct nb_req *req, const char *key,
                      json_t *items)
{
    _cleanup_free_ char *self = nb_strdup_printf("%s%s", nb_http_base_url(), req->path);
    return nb_resp_json(resp, 200,
                        json_pack("{s:o, s:{s:s, s:n, s:n}}", key, items, "links", "self", self,
                                  "previous", "next"));
}

struct query_probe {
    const char *key;
    bool found;
    bool value;
};

static void probe_query(void *opaque, const char *key, const char *value)
{
    struct query_probe *q = opaque;
    if (strcmp(key, q->key) != 0)
        return;
    q->found = true;
    q->value = !value || !(strcmp(value, "0") == 0 || strcasecmp(value, "false") == 0);
}

bool nb_idn_query_true(const struct nb_req *req, const char *key)
{
    struct query_probe q = {.key = key};
    nb_req_query_each(req, probe_query, &q);
    return q.found && q.value;
}

int nb_idn_forbidden(struct nb_ctx *ctx, const char *action)
{
    return nb_error(ctx, 403, NB_IDN_E403,
                    "You are not authorized to perform the requested action: %s.", action);
}

int nb_idn_require_admin(struct nb_ctx *ctx, const char *action)
{
    return ctx->is_admin || ctx->system ? 0 : nb_idn_forbidden(ctx, action);
}

json_t *nb_idn_body_entity(struct nb_ctx *ctx, struct nb_req *req, const char *key)
{
    json_t *body = nb_req_json_object(ctx, req);
    if (!body)
        return NULL;
    json_t *e = json_object_get(body, key);
    if (!e) {
        nb_error(ctx, 400, NB_IDN_E400, "'%s' is a required property", key);
        return NULL;
    }
    if (!json_is_object(e)) {
        nb_error(ctx, 400, NB_IDN_E400, "Invalid input for field '%s': not of type 'object'", key);
        return NULL;
    }
    return e;
}

int nb_idn_opt_string(struct nb_ctx *ctx, const json_t *obj, const char *key, size_t min,
                      size_t max, bool nullable, const char **out)
{
    *out = NULL;
    json_t *v = json_object_get(obj, key);
    if (!v || (nullable && json_is_null(v)))
        return 0;
    if (!json_is_string(v))
        return nb_error(ctx, 400, NB_IDN_E400,
                        "Invalid input for field '%s': value is not of type 'string'", key);
    size_t n = json_string_length(v);
    if (n < min)
        return nb_error(ctx, 400, NB_IDN_E400, "Invalid input for field '%s': '%s' is too short",
                        key, json_string_value(v));
    if (max && n > max)
        return nb_error(ctx, 400, NB_IDN_E400,
                        "Invalid input for field '%s': value is too long (max %zu)", key, max);
    *out = json_string_value(v);
    return 0;
}

int nb_idn_opt_bool(struct nb_ctx *ctx, const json_t *obj, const char *key, bool *out)
{
    json_t *v = json_object_get(obj, key);
    if (!v)
        return 0;
    if (!json_is_boolean(v))
        return nb_error(ctx, 400, NB_IDN_E400,
                        "Invalid input for field '%s': value is not of type 'boolean'", key);
    *out = json_is_true(v);
    return 0;
}

void nb_idn_new_id(char out[33])
{
    nb_random_hex(out, 16);
}

void nb_idn_merge_extra(json_t *dst, const char *extra)
{
    _cleanup_json_ json_t *e = nb_json_parse(extra);
    if (json_is_object(e))
        json_object_update_missing(dst, e);
}

static bool is_known(const char *key, const char *const *known)
{
    for (; *known; known++)
        if (strcmp(*known, key) == 0)
            return true;
    return false;
}

char *nb_idn_extra_from(const json_t *body, const char *const *known, const char *old)
{
    _cleanup_json_ json_t *extra = nb_json_parse(old);
    if (!json_is_object(extra)) {
        json_decref(extra);
        extra = json_object();
    }
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)body, k, v) {
        if (!is_known(k, known))
            json_object_set(extra, k, v);
    }
    return nb_json_dump(extra);
}
