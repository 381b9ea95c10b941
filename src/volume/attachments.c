/* attachments.c - Cinder's attachments API (microversion 3.27 and later)
 * under /volume/v3/{project_id}/attachments: list, detail and show, as
 * `openstack volume attachment list --os-volume-api-version 3.27` reads
 * them, and the write side of Cinder's attach flow: create (reserve, and
 * connect when a connector is given), update (connect), the os-complete
 * action (3.44) and delete, as `openstack volume attachment create|set|
 * complete|delete` drive them.
 *
 * The rows are volume_attachment's (attach_records.c and status.c write
 * them, for this API and for the compute conductor alike) through the view
 * "attachments", which adds the project of each attachment's volume: Cinder
 * lists attachments by the project of their volume, and another project's
 * attachment is not found. A deleted attachment is not listed. The views
 * are Cinder's (api/v3/views/attachments.py); show, as Cinder's, sets
 * connection_info.format from the volume's admin metadata. The bodies are
 * checked as Cinder's JSON schemas (api/schemas/attachments.py) check them,
 * with jsonschema's messages. */
#include "common/cleanup.h"
#include "common/json.h"
#include "common/pyrepr.h"
#include "common/util.h"
#include "compute/compute.h"
#include "db/db.h"
#include "volume/volume.h"
#include "volume/volume_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define MV_NEW_ATTACH 27             /* 3.27 */
#define MV_NEW_ATTACH_COMPLETION 44  /* 3.44 */
#define MV_ATTACHMENT_CREATE_MODE 54 /* 3.54 */

static json_t *attachment_load(struct nb_ctx *ctx, const char *id)
{
    json_t *row = nb_db_row(nb_vol_env->db, ctx,
                            "SELECT * FROM attachments WHERE id = ? AND deleted = 0", "s", id);
    if (!row && nb_ctx_failed(ctx))
        return NULL;
    const char *p = row ? nb_json_str(row, "project_id") : NULL;
    if (!row || !(ctx->is_admin || ctx->system || (p && strcmp(p, ctx->project_id) == 0))) {
        json_decref(row);
        nb_error(ctx, 404, NULL,
                 "Volume attachment could not be found with filter: attachment_id = %s.", id);
        return NULL;
    }
    return row;
}

static json_t *field(const json_t *row, const char *key)
{
    json_t *v = json_object_get(row, key);
    return v ? json_incref(v) : json_null();
}

/* A time as Cinder's normalize_time shows it, '' when there is none. */
static json_t *time_field(const json_t *row, const char *key)
{
    const char *t = nb_json_str(row, key);
    return json_string(t ? t : "");
}

static json_t *attachment_view(struct nb_ctx *ctx, const json_t *row, bool detail)
{
    (void)ctx;
    json_t *v = json_object();
    json_object_set_new(v, "id", field(row, "id"));
    json_object_set_new(v, "status", field(row, "attach_status"));
    json_object_set_new(v, "instance", field(row, "instance_uuid"));
    json_object_set_new(v, "volume_id", field(row, "volume_id"));
    if (!detail)
        return v;
    json_object_set_new(v, "attached_at", time_field(row, "attach_time"));
    json_object_set_new(v, "detached_at", time_field(row, "detach_time"));
    json_object_set_new(v, "attach_mode", field(row, "attach_mode"));
    const char *ci = nb_json_str(row, "connection_info");
    json_t *info = ci ? nb_json_parse(ci) : NULL;
    json_object_set_new(v, "connection_info", info ? info : json_null());
    return v;
}

static const struct nb_vol_sort_key attachment_sort_keys[] = {
    {"id", "id"},
    {"created_at", "created_at"},
    {"updated_at", "updated_at"},
    {"volume_id", "volume_id"},
    {"status", "attach_status"},
    {"attach_status", "attach_status"},
    {"instance_id", "instance_uuid"},
    {NULL, NULL},
};

/* The filters of Cinder's resource_filters.json for attachments. */
static bool attachment_matches(struct nb_ctx *ctx, struct nb_req *req, const json_t *row,
                               const json_t *filter)
{
    (void)ctx, (void)filter;
    static const char *const filters[][2] = {{"volume_id", "volume_id"},
                                             {"status", "attach_status"},
                                             {"attach_status", "attach_status"},
                                             {"instance_id", "instance_uuid"}};
    for (size_t i = 0; i < sizeof(filters) / sizeof(filters[0]); i++) {
        const char *want = nb_req_query(req, filters[i][0]);
        const char *have = nb_json_str(row, filters[i][1]);
        if (want && (!have || strcmp(want, have) != 0))
            return false;
    }
    return true;
}

static const struct nb_vol_lister attachment_lister = {
    .table = "attachments",
    .sort_keys = attachment_sort_keys,
    .load = attachment_load,
    .match = attachment_matches,
    .view = attachment_view,
    .min_mv = MV_NEW_ATTACH,
};

static int attachments_index(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    return nb_vol_list(ctx, req, resp, &attachment_lister, false);
}

static int attachments_detail(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    return nb_vol_list(ctx, req, resp, &attachment_lister, true);
}

static int attachments_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_vol_begin(ctx, req, resp) < 0 || nb_vol_require_mv(ctx, MV_NEW_ATTACH) < 0)
        return -1;
    _cleanup_json_ json_t *row = attachment_load(ctx, nb_req_param(req, "attachment_id"));
    if (!row)
        return -1;
    json_t *v = attachment_view(ctx, row, true);
    json_t *info = json_object_get(v, "connection_info");
    if (json_is_object(info)) {
        _cleanup_json_ json_t *fmt =
            nb_db_row(nb_vol_env->db, ctx,
                      "SELECT value FROM volume_admin_metadata WHERE "
                      "volume_id = ? AND \"key\" = 'format' AND deleted = 0",
                      "s", nb_json_str(row, "volume_id"));
        if (fmt && nb_json_str(fmt, "value"))
            json_object_set(info, "format", json_object_get(fmt, "value"));
    }
    return nb_resp_json(resp, 200, json_pack("{s:o}", "attachment", v));
}

/* --- the write side ----------------------------------------------------------- */

/* str() of the Python value Cinder's schema error names. Caller frees. */
static char *py_str(const json_t *v)
{
    return json_is_string(v) ? strdup(json_string_value(v)) : nb_pyrepr(v);
}

/* Cinder's ValidationError for the value at field: "Invalid input for
 * field/attribute <field>. Value: <str(value)>. <jsonschema's message>". */
static int schema_error(struct nb_ctx *ctx, const char *field, const json_t *value, const char *fmt,
                        ...) __attribute__((format(printf, 4, 5)));
static int schema_error(struct nb_ctx *ctx, const char *field, const json_t *value, const char *fmt,
                        ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    _cleanup_free_ char *v = py_str(value);
    return nb_error(ctx, 400, NULL, "Invalid input for field/attribute %s. Value: %s. %s", field, v,
                    msg);
}

static int type_error(struct nb_ctx *ctx, const char *field, const json_t *value, const char *types)
{
    _cleanup_free_ char *r = nb_pyrepr(value);
    return schema_error(ctx, field, value, "%s is not of type %s", r, types);
}

/* {'type': 'string', 'format': 'uuid'} at attachment/<key>, when present. */
static int check_uuid(struct nb_ctx *ctx, const json_t *att, const char *key)
{
    const json_t *v = json_object_get(att, key);
    if (!v)
        return 0;
    if (!json_is_string(v))
        return type_error(ctx, key, v, "'string'");
    if (!nb_is_uuid(json_string_value(v))) {
        _cleanup_free_ char *r = nb_pyrepr(v);
        return schema_error(ctx, key, v, "%s is not a 'uuid'", r);
    }
    return 0;
}

/* additionalProperties: false of the object at field. */
static int check_extra(struct nb_ctx *ctx, const char *field, const json_t *obj,
                       const char *const *allowed)
{
    char extra[256] = "";
    int n = 0;
    _cleanup_json_ json_t *keys = json_array();
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)obj, k, v) {
        bool ok = false;
        for (int i = 0; allowed[i] && !ok; i++)
            ok = strcmp(allowed[i], k) == 0;
        if (!ok)
            json_array_append_new(keys, json_string(k));
    }
    if (!json_array_size(keys))
        return 0;
    /* jsonschema lists them sorted, each repr'd */
    size_t nk = json_array_size(keys);
    for (size_t i = 0; i < nk; i++)
        for (size_t j = i + 1; j < nk; j++)
            if (strcmp(json_string_value(json_array_get(keys, j)),
                       json_string_value(json_array_get(keys, i))) < 0) {
                json_t *a = json_incref(json_array_get(keys, i));
                json_array_set(keys, i, json_array_get(keys, j));
                json_array_set_new(keys, j, a);
            }
    size_t i;
    json_array_foreach (keys, i, v) {
        _cleanup_free_ char *r = nb_pyrepr(v);
        size_t len = strlen(extra);
        snprintf(extra + len, sizeof(extra) - len, "%s%s", n++ ? ", " : "", r);
    }
    const char *verb = nk == 1 ? "was" : "were";
    if (!field)
        return nb_error(ctx, 400, NULL, "Additional properties are not allowed (%s %s unexpected)",
                        extra, verb);
    return schema_error(ctx, field, obj, "Additional properties are not allowed (%s %s unexpected)",
                        extra, verb);
}

/* The "attachment" object of a body (type, then the caller's checks), or
 * NULL after 400. Borrowed. */
static json_t *attachment_body(struct nb_ctx *ctx, struct nb_req *req)
{
    if (!req->json || !json_is_object(req->json)) {
        nb_error(ctx, 400, NULL, "Malformed request body");
        return NULL;
    }
    json_t *att = json_object_get(req->json, "attachment");
    if (att && !json_is_object(att)) {
        type_error(ctx, "attachment", att, "'object'");
        return NULL;
    }
    return att;
}

/* The top level after the attachment's own checks: required, then
 * additionalProperties. */
static int check_top(struct nb_ctx *ctx, struct nb_req *req, const json_t *att)
{
    static const char *const top[] = {"attachment", NULL};
    if (!att)
        return nb_error(ctx, 400, NULL, "'attachment' is a required property");
    return check_extra(ctx, NULL, req->json, top);
}

/* Cinder's create and create_v354 schemas. */
static int check_create(struct nb_ctx *ctx, struct nb_req *req, json_t **att_out)
{
    json_t *att = attachment_body(ctx, req);
    if (nb_ctx_failed(ctx))
        return -1;
    if (att) {
        const json_t *conn = json_object_get(att, "connector");
        const json_t *mode = json_object_get(att, "mode");
        bool with_mode = nb_vol_mv(ctx, MV_ATTACHMENT_CREATE_MODE);
        if (check_uuid(ctx, att, "instance_uuid") < 0)
            return -1;
        if (conn && !json_is_object(conn) && !json_is_null(conn))
            return type_error(ctx, "connector", conn, "'object', 'null'");
        if (check_uuid(ctx, att, "volume_uuid") < 0)
            return -1;
        if (with_mode && mode && !json_is_string(mode))
            return type_error(ctx, "mode", mode, "'string'");
        if (with_mode && mode && strcmp(json_string_value(mode), "rw") != 0 &&
            strcmp(json_string_value(mode), "ro") != 0) {
            _cleanup_free_ char *r = nb_pyrepr(mode);
            return schema_error(ctx, "mode", mode, "%s is not one of ['rw', 'ro']", r);
        }
        if (!json_object_get(att, "volume_uuid"))
            return schema_error(ctx, "attachment", att, "'volume_uuid' is a required property");
        static const char *const keys[] = {"instance_uuid", "connector", "volume_uuid", NULL};
        static const char *const keys_354[] = {"instance_uuid", "connector", "volume_uuid", "mode",
                                               NULL};
        if (check_extra(ctx, "attachment", att, with_mode ? keys_354 : keys) < 0)
            return -1;
    }
    *att_out = att;
    return check_top(ctx, req, att);
}

/* Cinder's update schema. */
static int check_update(struct nb_ctx *ctx, struct nb_req *req, json_t **att_out)
{
    json_t *att = attachment_body(ctx, req);
    if (nb_ctx_failed(ctx))
        return -1;
    if (att) {
        const json_t *conn = json_object_get(att, "connector");
        if (conn && !json_is_object(conn))
            return type_error(ctx, "connector", conn, "'object'");
        if (conn && json_object_size(conn) < 1) {
            _cleanup_free_ char *r = nb_pyrepr(conn);
            return schema_error(ctx, "connector", conn, "%s does not have enough properties", r);
        }
        if (!conn)
            return schema_error(ctx, "attachment", att, "'connector' is a required property");
        static const char *const keys[] = {"connector", NULL};
        if (check_extra(ctx, "attachment", att, keys) < 0)
            return -1;
    }
    *att_out = att;
    return check_top(ctx, req, att);
}

/* nubo's convention for changes: members (and admins) of the project. */
static int check_policy(struct nb_ctx *ctx, const char *policy)
{
    if (ctx->is_member || ctx->is_admin || ctx->system)
        return 0;
    return nb_error(ctx, 403, NULL, "Policy doesn't allow %s to be performed.", policy);
}

/* 200 {"attachment": <detail view of the live record id>}. */
static int answer_attachment(struct nb_ctx *ctx, struct nb_resp *resp, const char *id)
{
    _cleanup_json_ json_t *row = attachment_load(ctx, id);
    if (!row)
        return -1;
    return nb_resp_json(resp, 200,
                        json_pack("{s:o}", "attachment", attachment_view(ctx, row, true)));
}

/* The volume's connection info for attachment id, for a create or update;
 * an error is Cinder's 500 "<prefix>(<message>)." as its controller wraps
 * the volume manager's exceptions. */
static json_t *connect_info(struct nb_ctx *ctx, const char *volume_id, const char *id,
                            const char *prefix)
{
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    json_t *info = nb_vol_attachment_info(&sub, volume_id, id);
    if (!info)
        nb_error(ctx, 500, NULL, "%s(%s).", prefix, nb_ctx_message(&sub));
    return info;
}

/* Cinder's attach_mode of a new record: "ro" when the volume's readonly
 * flag is set (admin metadata, deprecated but still winning), else the
 * mode of the body (3.54), else "null" (honour the connector's). */
static const char *create_mode(struct nb_ctx *ctx, const char *volume_id, const json_t *att)
{
    _cleanup_json_ json_t *am =
        nb_vol_metadata_of(ctx, "volume_admin_metadata", "volume_id", volume_id);
    const char *ro = nb_json_str(am, "readonly");
    if (ro && strcmp(ro, "True") == 0)
        return "ro";
    const char *mode = nb_vol_mv(ctx, MV_ATTACHMENT_CREATE_MODE) ? nb_json_str(att, "mode") : NULL;
    return !mode ? "null" : !strcmp(mode, "ro") ? "ro" : "rw";
}

static int attachments_create(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    json_t *att = NULL;
    if (nb_vol_begin(ctx, req, resp) < 0 || nb_vol_require_mv(ctx, MV_NEW_ATTACH) < 0 ||
        check_create(ctx, req, &att) < 0)
        return -1;
    const char *volume_id = nb_json_str(att, "volume_uuid");
    const char *instance = nb_json_str(att, "instance_uuid");
    json_t *connector = json_object_get(att, "connector");
    _cleanup_json_ json_t *vol = nb_vol_load(ctx, volume_id);
    if (!vol || check_policy(ctx, "volume:attachment_create") < 0)
        return -1;
    char id[NB_UUID_LEN];
    nb_uuid(id);
    /* the connection is described before anything changes, so a backend
     * failure leaves no reservation behind */
    _cleanup_json_ json_t *info = NULL;
    /* an empty connector, as `openstack volume attachment create` sends
     * without --connect, reserves only (Cinder tests its truth) */
    if (json_object_size(connector) > 0 &&
        !(info = connect_info(ctx, volume_id, id, "Unable to create attachment for volume ")))
        return -1;
    const char *mode = create_mode(ctx, volume_id, att);
    if (nb_vol_attachment_reserve(ctx, volume_id, instance, mode, id) < 0)
        return -1;
    if (info && nb_vol_attachment_connect(ctx, id, connector, info, mode) < 0) {
        struct nb_ctx sub;
        nb_ctx_child(&sub, ctx);
        nb_vol_attachment_delete(&sub, volume_id, id);
        return -1;
    }
    return answer_attachment(ctx, resp, id);
}

/* Cinder's attachment_update refuses a second connected record of a volume
 * that is not multiattach ("duplicate connectors"). 0/-1 after its 500. */
static int check_duplicate(struct nb_ctx *ctx, const json_t *vol)
{
    const char *vid = nb_json_str(vol, "id");
    if (nb_json_int(vol, "multiattach", 0))
        return 0;
    long long live = nb_db_int(nb_vol_env->db, ctx, 0,
                               "SELECT COUNT(*) FROM volume_attachment WHERE volume_id = ? AND "
                               "deleted = 0",
                               "s", vid);
    long long connected = nb_db_int(nb_vol_env->db, ctx, 0,
                                    "SELECT COUNT(*) FROM volume_attachment WHERE volume_id = ? "
                                    "AND deleted = 0 AND connection_info IS NOT NULL AND "
                                    "connection_info != '{}'",
                                    "s", vid);
    if (nb_ctx_failed(ctx))
        return -1;
    if (live > 1 && connected > 0)
        return nb_error(ctx, 500, NULL,
                        "Unable to update attachment.(Invalid volume: duplicate connectors "
                        "detected on volume %s).",
                        vid);
    return 0;
}

/* The volume manager's attach mode for an update: the record's, unless it
 * is "null" (then the connector's mode, default "rw"). Borrowed. */
static const char *update_mode(const json_t *row, const json_t *connector)
{
    const char *mode = nb_json_str(row, "attach_mode");
    if (mode && strcmp(mode, "null") != 0)
        return mode;
    if (!mode)
        return NULL;
    json_t *m = json_object_get(connector, "mode");
    return !m ? "rw" : json_is_string(m) ? json_string_value(m) : NULL;
}

static int attachments_update(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    json_t *att = NULL;
    const char *id = nb_req_param(req, "attachment_id");
    if (nb_vol_begin(ctx, req, resp) < 0 || nb_vol_require_mv(ctx, MV_NEW_ATTACH) < 0 ||
        check_update(ctx, req, &att) < 0)
        return -1;
    _cleanup_json_ json_t *row = attachment_load(ctx, id);
    if (!row || check_policy(ctx, "volume:attachment_update") < 0)
        return -1;
    const char *volume_id = nb_json_str(row, "volume_id");
    _cleanup_json_ json_t *vol = nb_vol_load(ctx, volume_id);
    if (!vol)
        return -1;
    const char *status = nb_json_str(vol, "status");
    if (strstr(status, "error"))
        return nb_error(ctx, 500, NULL,
                        "Unable to update attachment.(Invalid volume: Volume attachments can not "
                        "be updated if the volume is in an error state. The Volume %s currently "
                        "has a status of: %s ).",
                        volume_id, status);
    if (check_duplicate(ctx, vol) < 0)
        return -1;
    json_t *connector = json_object_get(att, "connector");
    _cleanup_json_ json_t *info = connect_info(ctx, volume_id, id, "Unable to update attachment.");
    if (!info ||
        nb_vol_attachment_connect(ctx, id, connector, info, update_mode(row, connector)) < 0)
        return -1;
    return answer_attachment(ctx, resp, id);
}

/* Cinder's attachment_deletion_allowed: a record connected for an instance
 * that the compute service still maps (its block device mapping holds this
 * attachment) is the compute API's to detach. 0, or -1 after its 409. */
static int check_not_in_nova(struct nb_ctx *ctx, const json_t *row)
{
    const char *instance = nb_json_str(row, "instance_uuid");
    const char *ci = nb_json_str(row, "connection_info");
    if (!instance || !ci || strcmp(ci, "{}") == 0 || ctx->system)
        return 0;
    int mapped = nb_compute_volume_mapped(nb_vol_env->db, ctx, instance,
                                          nb_json_str(row, "volume_id"), nb_json_str(row, "id"));
    if (mapped < 0)
        return -1;
    if (mapped > 0)
        return nb_error(ctx, 409, NULL, "Detach volume from instance %s using the Compute API",
                        instance);
    return 0;
}

static int attachments_delete(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *id = nb_req_param(req, "attachment_id");
    if (nb_vol_begin(ctx, req, resp) < 0 || nb_vol_require_mv(ctx, MV_NEW_ATTACH) < 0)
        return -1;
    _cleanup_json_ json_t *row = attachment_load(ctx, id);
    if (!row || check_policy(ctx, "volume:attachment_delete") < 0 ||
        check_not_in_nova(ctx, row) < 0)
        return -1;
    const char *volume_id = nb_json_str(row, "volume_id");
    if (nb_vol_attachment_delete(ctx, volume_id, id) < 0)
        return -1;
    /* Cinder answers with the volume's attachments left */
    _cleanup_json_ json_t *left = nb_db_rows(nb_vol_env->db, ctx,
                                             "SELECT * FROM attachments WHERE volume_id = ? AND "
                                             "deleted = 0 ORDER BY created_at, id",
                                             "s", volume_id);
    if (!left)
        return -1;
    json_t *list = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (left, i, r)
        json_array_append_new(list, attachment_view(ctx, r, false));
    return nb_resp_json(resp, 200, json_pack("{s:o}", "attachments", list));
}

static int attachments_action(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *id = nb_req_param(req, "attachment_id");
    if (nb_vol_begin(ctx, req, resp) < 0)
        return -1;
    if (!req->json || !json_is_object(req->json) || json_object_size(req->json) != 1)
        return nb_error(ctx, 400, NULL, "Malformed request body");
    const char *action = json_object_iter_key(json_object_iter(req->json));
    if (strcmp(action, "os-complete") != 0)
        return nb_error(ctx, 400, NULL,
                        "There is no such action: %s. Verify the request body and Content-Type "
                        "header and try again.",
                        action);
    if (nb_vol_require_mv(ctx, MV_NEW_ATTACH_COMPLETION) < 0)
        return -1;
    _cleanup_json_ json_t *row = attachment_load(ctx, id);
    if (!row)
        return -1;
    const char *volume_id = nb_json_str(row, "volume_id");
    _cleanup_json_ json_t *vol = nb_vol_load(ctx, volume_id);
    if (!vol || check_policy(ctx, "volume:attachment_complete") < 0 ||
        nb_vol_attachment_complete(ctx, volume_id, id) < 0)
        return -1;
    return nb_resp_empty(resp, 204);
}

void nb_vol_attachments_routes(void)
{
    nb_http_route("GET", "/volume/v3/{project_id}/attachments", attachments_index, 0);
    nb_http_route("POST", "/volume/v3/{project_id}/attachments", attachments_create, 0);
    nb_http_route("GET", "/volume/v3/{project_id}/attachments/detail", attachments_detail, 0);
    nb_http_route("GET", "/volume/v3/{project_id}/attachments/{attachment_id}", attachments_show,
                  0);
    nb_http_route("PUT", "/volume/v3/{project_id}/attachments/{attachment_id}", attachments_update,
                  0);
    nb_http_route("DELETE", "/volume/v3/{project_id}/attachments/{attachment_id}",
                  attachments_delete, 0);
    nb_http_route("POST", "/volume/v3/{project_id}/attachments/{attachment_id}/action",
                  attachments_action, 0);
}
