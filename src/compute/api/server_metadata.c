/* server_metadata.c - the labels users put on a server:
 * /servers/{id}/metadata[/{key}] as Nova's server_metadata.py (list, merge
 * with POST, replace with PUT, one item with GET/PUT/DELETE), and
 * /servers/{id}/tags[/{tag}] as server_tags.py (from 2.26).
 *
 * Metadata changes follow compute/api.py: refused while the server is
 * locked (for non-admins) or not in a stable state, and limited by the
 * metadata_items quota. Tag changes need a server in a stable vm_state and
 * at most 50 tags. */
#include "common/json.h"
#include "common/pyrepr.h"
#include "common/util.h"
#include "compute/api/api.h"
#include "compute/api/instances.h"
#include "compute/api/links.h"
#include "compute/api/quotas.h"
#include "compute/api/validate.h"
#include "db/db.h"

#include <stdlib.h>
#include <string.h>

/* The live metadata of an instance as {key: value}. New ref or NULL. */
static json_t *load_metadata(struct nb_ctx *ctx, const char *uuid)
{
    json_t *rows =
        nb_db_rows(nb_srv_db(), ctx,
                   "SELECT \"key\", value FROM instance_metadata WHERE instance_uuid = ? AND "
                   "deleted = 0 ORDER BY id",
                   "s", uuid);
    if (!rows)
        return NULL;
    json_t *md = json_object();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        const char *v = nb_json_str(r, "value");
        json_object_set_new(md, nb_json_str(r, "key"), json_string(v ? v : ""));
    }
    json_decref(rows);
    return md;
}

/* The instance for a metadata request, with the policy rule checked
 * (write: PROJECT_MEMBER_OR_ADMIN, else reader). */
static json_t *get_server(struct nb_ctx *ctx, struct nb_req *req, const char *rule, bool write)
{
    json_t *inst = nb_srv_instance_get(ctx, nb_req_param(req, "server_id"), false);
    if (!inst)
        return NULL;
    const char *project = nb_json_str(inst, "project_id");
    bool ok = write ? nb_srv_is_member_of(ctx, project) : nb_srv_is_reader_of(ctx, project);
    if (nb_srv_policy(ctx, rule, ok) < 0) {
        json_decref(inst);
        return NULL;
    }
    return inst;
}

/* compute/api.py's update/delete_instance_metadata preconditions. */
static int check_writable(struct nb_ctx *ctx, const json_t *inst, const char *action)
{
    static const char *const vm_ok[] = {"active", "paused", "suspended", "stopped"};
    if (nb_srv_check_lock(ctx, inst) < 0)
        return -1;
    const char *vm = nb_json_str(inst, "vm_state");
    const char *task = nb_json_str(inst, "task_state");
    const char *uuid = nb_json_str(inst, "uuid");
    bool ok = false;
    for (size_t i = 0; i < 4 && !ok; i++)
        ok = vm && !strcmp(vm, vm_ok[i]);
    if (!ok)
        return nb_srv_invalid_state(ctx, action, uuid, "vm_state", vm);
    if (task)
        return nb_srv_invalid_state(ctx, action, uuid, "task_state", task);
    return 0;
}

/* Writes md as the instance's metadata: with replace, keys not in md are
 * removed. Checks the metadata_items quota on the result. Returns the
 * resulting metadata (new ref) or NULL. */
static json_t *save_metadata(struct nb_ctx *ctx, const json_t *inst, json_t *md, bool replace)
{
    const char *uuid = nb_json_str(inst, "uuid");
    struct nb_db *db = nb_srv_db();
    long long lim[NB_Q_COUNT];
    if (nb_quota_limits(ctx, nb_json_str(inst, "project_id"), NULL, lim) < 0 ||
        nb_db_begin(db, ctx) < 0)
        return NULL;
    json_t *cur = load_metadata(ctx, uuid);
    json_t *result = NULL;
    if (!cur)
        goto fail;
    result = replace ? json_deep_copy(md) : json_deep_copy(cur);
    if (!replace)
        json_object_update(result, md);
    if (lim[NB_Q_METADATA_ITEMS] >= 0 &&
        (long long)json_object_size(result) > lim[NB_Q_METADATA_ITEMS]) {
        nb_error(ctx, 403, NULL, "Maximum number of metadata items exceeds %lld",
                 lim[NB_Q_METADATA_ITEMS]);
        goto fail;
    }
    const char *k;
    json_t *v;
    if (replace) {
        json_object_foreach (cur, k, v) {
            if (!json_object_get(md, k) &&
                nb_db_exec(db, ctx,
                           "UPDATE instance_metadata SET deleted = id WHERE instance_uuid = ? AND "
                           "\"key\" = ? AND deleted = 0",
                           "ss", uuid, k) < 0)
                goto fail;
        }
    }
    json_object_foreach (md, k, v) {
        json_t *old = json_object_get(cur, k);
        if (old && json_equal(old, v))
            continue;
        int rc = old ? nb_db_exec(db, ctx,
                                  "UPDATE instance_metadata SET value = ? WHERE instance_uuid = ? "
                                  "AND \"key\" = ? AND deleted = 0",
                                  "sss", json_string_value(v), uuid, k)
                     : nb_db_exec(db, ctx,
                                  "INSERT INTO instance_metadata (instance_uuid, \"key\", value) "
                                  "VALUES (?, ?, ?)",
                                  "sss", uuid, k, json_string_value(v));
        if (rc < 0)
            goto fail;
    }
    json_decref(cur);
    if (nb_db_commit(db, ctx) < 0) {
        json_decref(result);
        return NULL;
    }
    return result;
fail:
    json_decref(cur);
    json_decref(result);
    nb_db_rollback(db);
    return NULL;
}

static int h_index(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    json_t *inst = get_server(ctx, req, "os_compute_api:server-metadata:index", false);
    if (!inst)
        return -1;
    json_t *md = load_metadata(ctx, nb_json_str(inst, "uuid"));
    json_decref(inst);
    if (!md)
        return -1;
    return nb_resp_json(resp, 200, json_pack("{s:o}", "metadata", md));
}

/* POST (merge) and PUT (replace) of the whole set. */
static int write_all(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp, bool replace)
{
    static const char *const top[] = {"metadata", NULL};
    json_t *md = nb_srv_body_object(ctx, req, "metadata", top);
    if (!md || nb_srv_check_metadata(ctx, "metadata", md) < 0)
        return -1;
    json_t *inst = get_server(ctx, req,
                              replace ? "os_compute_api:server-metadata:update_all"
                                      : "os_compute_api:server-metadata:create",
                              true);
    if (!inst)
        return -1;
    json_t *result = NULL;
    if (check_writable(ctx, inst, "update metadata") == 0)
        result = save_metadata(ctx, inst, md, replace);
    json_decref(inst);
    if (!result)
        return -1;
    return nb_resp_json(resp, 200, json_pack("{s:o}", "metadata", result));
}

static int h_create(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    return write_all(ctx, req, resp, false);
}

static int h_update_all(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    return write_all(ctx, req, resp, true);
}

static int h_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    json_t *inst = get_server(ctx, req, "os_compute_api:server-metadata:show", false);
    if (!inst)
        return -1;
    json_t *md = load_metadata(ctx, nb_json_str(inst, "uuid"));
    json_decref(inst);
    if (!md)
        return -1;
    const char *key = nb_req_param(req, "key");
    json_t *v = json_object_get(md, key);
    int rc = v ? nb_resp_json(resp, 200, json_pack("{s:{s:O}}", "meta", key, v))
               : nb_error(ctx, 404, NULL, "Metadata item was not found");
    json_decref(md);
    return rc;
}

static int h_update(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    static const char *const top[] = {"meta", NULL};
    json_t *meta = nb_srv_body_object(ctx, req, "meta", top);
    if (!meta || nb_srv_check_metadata(ctx, "meta", meta) < 0)
        return -1;
    if (json_object_size(meta) > 1)
        return nb_srv_bad(ctx, "meta", meta, "has too many properties");
    if (json_object_size(meta) < 1)
        return nb_srv_bad(ctx, "meta", meta, "does not have enough properties");
    json_t *inst = get_server(ctx, req, "os_compute_api:server-metadata:update", true);
    if (!inst)
        return -1;
    int rc = -1;
    if (!json_object_get(meta, nb_req_param(req, "key"))) {
        nb_error(ctx, 400, NULL, "Request body and URI mismatch");
    } else if (check_writable(ctx, inst, "update metadata") == 0) {
        json_t *result = save_metadata(ctx, inst, meta, false);
        if (result) {
            json_decref(result);
            rc = nb_resp_json(resp, 200, json_pack("{s:O}", "meta", meta));
        }
    }
    json_decref(inst);
    return rc;
}

static int h_delete(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    json_t *inst = get_server(ctx, req, "os_compute_api:server-metadata:delete", true);
    if (!inst)
        return -1;
    const char *uuid = nb_json_str(inst, "uuid");
    const char *key = nb_req_param(req, "key");
    int rc = -1;
    json_t *md = load_metadata(ctx, uuid);
    if (!md)
        goto out;
    if (!json_object_get(md, key)) {
        nb_error(ctx, 404, NULL, "Metadata item was not found");
        goto out;
    }
    if (check_writable(ctx, inst, "delete metadata") < 0)
        goto out;
    if (nb_db_exec(
            nb_srv_db(), ctx,
            "UPDATE instance_metadata SET deleted = id WHERE instance_uuid = ? AND \"key\" = ? "
            "AND deleted = 0",
            "ss", uuid, key) < 0)
        goto out;
    rc = nb_resp_empty(resp, 204);
out:
    json_decref(md);
    json_decref(inst);
    return rc;
}

/* ---- tags ------------------------------------------------------------------------------ */

#define MAX_TAGS 50

/* The server for a tags request: 404 before 2.26 (as a missing route). */
static json_t *tag_server(struct nb_ctx *ctx, struct nb_req *req, const char *rule, bool write)
{
    if (!nb_ctx_mv_ge(ctx, 2, 26)) {
        nb_error(ctx, 404, NULL, "The resource could not be found.");
        return NULL;
    }
    return get_server(ctx, req, rule, write);
}

/* server_tags.py's _check_instance_in_valid_state. */
static int tags_writable(struct nb_ctx *ctx, const json_t *inst, const char *action)
{
    static const char *const ok[] = {"active", "paused", "suspended", "stopped"};
    const char *vm = nb_json_str(inst, "vm_state");
    for (size_t i = 0; i < 4; i++)
        if (vm && !strcmp(vm, ok[i]))
            return 0;
    return nb_srv_invalid_state(ctx, action, nb_json_str(inst, "uuid"), "vm_state", vm);
}

static json_t *load_tags(struct nb_ctx *ctx, const char *uuid)
{
    json_t *rows = nb_db_rows(nb_srv_db(), ctx,
                              "SELECT tag FROM tags WHERE resource_id = ? ORDER BY tag", "s", uuid);
    if (!rows)
        return NULL;
    json_t *tags = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r)
        json_array_append(tags, json_object_get(r, "tag"));
    json_decref(rows);
    return tags;
}

/* parameter_types.tag: 1-60 characters without "/" or ",". NULL if valid,
 * else jsonschema's complaint. */
static const char *tag_problem(const json_t *v)
{
    if (!json_is_string(v))
        return "is not of type 'string'";
    const char *s = json_string_value(v);
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        n += (*p & 0xc0) != 0x80;
    if (n < 1)
        return "is too short";
    if (n > 60)
        return "is too long";
    if (strchr(s, '/') || strchr(s, ','))
        return "does not match '^[^,/]*$'";
    return NULL;
}

static int h_tags_index(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    json_t *inst = tag_server(ctx, req, "os_compute_api:os-server-tags:index", false);
    if (!inst)
        return -1;
    json_t *tags = load_tags(ctx, nb_json_str(inst, "uuid"));
    json_decref(inst);
    return tags ? nb_resp_json(resp, 200, json_pack("{s:o}", "tags", tags)) : -1;
}

static int h_tag_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    json_t *inst = tag_server(ctx, req, "os_compute_api:os-server-tags:show", false);
    if (!inst)
        return -1;
    const char *tag = nb_req_param(req, "tag");
    long long n = nb_db_int(nb_srv_db(), ctx, -1,
                            "SELECT COUNT(*) FROM tags WHERE resource_id = ? AND tag = ?", "ss",
                            nb_json_str(inst, "uuid"), tag);
    int rc = n < 0   ? -1
             : n > 0 ? nb_resp_empty(resp, 204)
                     : nb_error(ctx, 404, NULL, "Server %s has no tag '%s'",
                                nb_req_param(req, "server_id"), tag);
    json_decref(inst);
    return rc;
}

static int h_tags_update_all(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (!nb_ctx_mv_ge(ctx, 2, 26))
        return nb_error(ctx, 404, NULL, "The resource could not be found.");
    static const char *const top[] = {"tags", NULL};
    json_t *body = nb_req_json_object(ctx, req);
    if (!body)
        return -1;
    json_t *tags = json_object_get(body, "tags");
    if (!tags)
        return nb_error(ctx, 400, NULL, "'tags' is a required property");
    if (nb_res_only_keys(ctx, NULL, body, top) < 0)
        return -1;
    if (!json_is_array(tags))
        return nb_srv_bad(ctx, "tags", tags, "is not of type 'array'");
    if (json_array_size(tags) > MAX_TAGS)
        return nb_srv_bad(ctx, "tags", tags, "is too long");
    size_t i;
    json_t *t;
    json_array_foreach (tags, i, t) {
        const char *why = tag_problem(t);
        if (why)
            return nb_srv_bad(ctx, "tags", t, why);
    }
    json_t *inst = get_server(ctx, req, "os_compute_api:os-server-tags:update_all", true);
    if (!inst)
        return -1;
    const char *uuid = nb_json_str(inst, "uuid");
    struct nb_db *db = nb_srv_db();
    int rc = -1;
    json_t *result = NULL;
    if (tags_writable(ctx, inst, "update tags") < 0 || nb_db_begin(db, ctx) < 0)
        goto out;
    if (nb_db_exec(db, ctx, "DELETE FROM tags WHERE resource_id = ?", "s", uuid) < 0)
        goto fail;
    json_array_foreach (tags, i, t) {
        if (nb_db_insert_ignore(db, ctx, "INTO tags (resource_id, tag) VALUES (?, ?)", "ss", uuid,
                                json_string_value(t)) < 0)
            goto fail;
    }
    if (nb_db_commit(db, ctx) < 0 || !(result = load_tags(ctx, uuid)))
        goto out;
    rc = nb_resp_json(resp, 200, json_pack("{s:o}", "tags", result));
    goto out;
fail:
    nb_db_rollback(db);
out:
    json_decref(inst);
    return rc;
}

static int h_tag_update(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (!nb_ctx_mv_ge(ctx, 2, 26))
        return nb_error(ctx, 404, NULL, "The resource could not be found.");
    if (req->json && !json_is_null(req->json))
        return nb_srv_bad(ctx, "body", req->json, "is not of type 'null'");
    json_t *inst = get_server(ctx, req, "os_compute_api:os-server-tags:update", true);
    if (!inst)
        return -1;
    const char *uuid = nb_json_str(inst, "uuid");
    const char *tag = nb_req_param(req, "tag");
    json_t *tagv = json_string(tag);
    int rc = -1;
    json_t *tags = NULL;
    if (tags_writable(ctx, inst, "update tag") < 0)
        goto out;
    const char *why = tag_problem(tagv);
    if (why) {
        char *r = nb_pyrepr(tagv);
        nb_error(ctx, 400, NULL,
                 "Tag '%s' is invalid. It must be a non empty string without characters '/' and "
                 "','. Validation error message: %s %s",
                 tag, r, why);
        free(r);
        goto out;
    }
    if (!(tags = load_tags(ctx, uuid)))
        goto out;
    size_t i;
    json_t *t;
    json_array_foreach (tags, i, t)
        if (!strcmp(json_string_value(t), tag)) {
            rc = nb_resp_empty(resp, 204);
            goto out;
        }
    if (json_array_size(tags) >= MAX_TAGS) {
        nb_error(ctx, 400, NULL, "The number of tags exceeded the per-server limit %d", MAX_TAGS);
        goto out;
    }
    if (nb_db_insert_ignore(nb_srv_db(), ctx, "INTO tags (resource_id, tag) VALUES (?, ?)", "ss",
                            uuid, tag) < 0)
        goto out;
    char *v21 = nb_res_api_url();
    char *loc = nb_strdup_printf("%s/servers/%s/tags/%s", v21, uuid, tag);
    nb_resp_header(resp, "Location", loc);
    free(loc);
    free(v21);
    rc = nb_resp_empty(resp, 201);
out:
    json_decref(tagv);
    json_decref(tags);
    json_decref(inst);
    return rc;
}

static int delete_tags(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp, bool all)
{
    if (!nb_ctx_mv_ge(ctx, 2, 26))
        return nb_error(ctx, 404, NULL, "The resource could not be found.");
    json_t *inst = get_server(ctx, req,
                              all ? "os_compute_api:os-server-tags:delete_all"
                                  : "os_compute_api:os-server-tags:delete",
                              true);
    if (!inst)
        return -1;
    const char *uuid = nb_json_str(inst, "uuid");
    const char *tag = nb_req_param(req, "tag");
    int rc = -1;
    if (tags_writable(ctx, inst, all ? "delete tags" : "delete tag") == 0) {
        int n =
            all ? nb_db_exec(nb_srv_db(), ctx, "DELETE FROM tags WHERE resource_id = ?", "s", uuid)
                : nb_db_exec(nb_srv_db(), ctx, "DELETE FROM tags WHERE resource_id = ? AND tag = ?",
                             "ss", uuid, tag);
        if (n >= 0 && !all && n == 0)
            nb_error(ctx, 404, NULL, "Instance %s has no tag '%s'", uuid, tag);
        else if (n >= 0)
            rc = nb_resp_empty(resp, 204);
    }
    json_decref(inst);
    return rc;
}

static int h_tag_delete(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    return delete_tags(ctx, req, resp, false);
}

static int h_tags_delete_all(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    return delete_tags(ctx, req, resp, true);
}

int nb_compute_server_metadata_init(struct nb_env *env)
{
    (void)env;
    nb_http_route("GET", "/compute/v2.1/servers/{server_id}/metadata", h_index, 0);
    nb_http_route("POST", "/compute/v2.1/servers/{server_id}/metadata", h_create, 0);
    nb_http_route("PUT", "/compute/v2.1/servers/{server_id}/metadata", h_update_all, 0);
    nb_http_route("GET", "/compute/v2.1/servers/{server_id}/metadata/{key}", h_show, 0);
    nb_http_route("PUT", "/compute/v2.1/servers/{server_id}/metadata/{key}", h_update, 0);
    nb_http_route("DELETE", "/compute/v2.1/servers/{server_id}/metadata/{key}", h_delete, 0);
    nb_http_route("GET", "/compute/v2.1/servers/{server_id}/tags", h_tags_index, 0);
    nb_http_route("PUT", "/compute/v2.1/servers/{server_id}/tags", h_tags_update_all, 0);
    nb_http_route("DELETE", "/compute/v2.1/servers/{server_id}/tags", h_tags_delete_all, 0);
    nb_http_route("GET", "/compute/v2.1/servers/{server_id}/tags/{tag}", h_tag_show, 0);
    nb_http_route("PUT", "/compute/v2.1/servers/{server_id}/tags/{tag}", h_tag_update, 0);
    nb_http_route("DELETE", "/compute/v2.1/servers/{server_id}/tags/{tag}", h_tag_delete, 0);
    return 0;
}
