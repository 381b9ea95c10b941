/* attachments.c - the read side of Cinder's attachments API (microversion
 * 3.27 and later): GET /volume/v3/{project_id}/attachments, .../detail and
 * .../attachments/{attachment_id}, as `openstack volume attachment list
 * --os-volume-api-version 3.27` reads them.
 *
 * The rows are volume_attachment's (written by nb_volume_attach and
 * nb_volume_detach, see status.c) through the view "attachments", which adds
 * the project of each attachment's volume: Cinder lists attachments by the
 * project of their volume. A detached attachment is deleted, so it is not
 * listed. The views are Cinder's (api/v3/views/attachments.py); show, as
 * Cinder's, sets connection_info.format from the volume's admin metadata. */
#include "common/cleanup.h"
#include "common/json.h"
#include "common/util.h"
#include "db/db.h"
#include "volume/volume.h"
#include "volume/volume_int.h"

#include <string.h>

#define MV_NEW_ATTACH 27 /* 3.27 */

static json_t *attachment_load(struct nb_ctx *ctx, const char *id)
{
    json_t *row = nb_db_row(nb_vol_env->db, ctx,
                            "SELECT * FROM attachments WHERE id = ? AND deleted = 0", "s", id);
    if (!row && ctx->err_status)
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
        _cleanup_json_ json_t *fmt = nb_db_row(nb_vol_env->db, ctx,
                                               "SELECT value FROM volume_admin_metadata WHERE "
                                               "volume_id = ? AND key = 'format' AND deleted = 0",
                                               "s", nb_json_str(row, "volume_id"));
        if (fmt && nb_json_str(fmt, "value"))
            json_object_set(info, "format", json_object_get(fmt, "value"));
    }
    return nb_resp_json(resp, 200, json_pack("{s:o}", "attachment", v));
}

void nb_vol_attachments_routes(void)
{
    nb_http_route("GET", "/volume/v3/{project_id}/attachments", attachments_index, 0);
    nb_http_route("GET", "/volume/v3/{project_id}/attachments/detail", attachments_detail, 0);
    nb_http_route("GET", "/volume/v3/{project_id}/attachments/{attachment_id}", attachments_show,
                  0);
}
