/* os_volumes.c - Nova's volume proxy in front of the Block Storage service
 * (nova/api/openstack/compute/volumes.py, VolumeController and
 * SnapshotController over nova/volume/cinder.py): /os-volumes and
 * /os-snapshots (list, detail, show, create, delete), which Nova removed at
 * 2.36 (a bare 404 from then on).
 *
 * Volumes and snapshots live in the volume module (nb_volume_*_for); this
 * file turns Nova's requests into Cinder's and Cinder's views into Nova's
 * camelCase ones. A volume is {"id", "status", "size", "availabilityZone",
 * "createdAt", "attachments" ([{}] when it is not attached, else its first
 * attachment {"id", "volumeId", "serverId", "device"}), "displayName",
 * "displayDescription", "volumeType", "snapshotId", "metadata"}; a snapshot
 * {"id", "volumeId", "status", "size", "createdAt", "displayName",
 * "displayDescription"}. The summary and detail views are the same. Policy:
 * os_compute_api:os-volumes:* and os_compute_api:os-volumes:snapshots:*,
 * PROJECT_READER_OR_ADMIN for list, detail and show, PROJECT_MEMBER_OR_ADMIN
 * otherwise. */
#include "common/cleanup.h"
#include "common/json.h"
#include "common/util.h"
#include "compute/api/api.h"
#include "compute/api/links.h"
#include "compute/api/proxy.h"
#include "compute/api/validate.h"
#include "volume/volume.h"

#include <stdio.h>
#include <string.h>

#define VOL_RULE "os_compute_api:os-volumes:"

static int policy(struct nb_ctx *ctx, const char *what, bool read)
{
    return nb_proxy_check_version(ctx, NB_PROXY_MAX_MINOR) < 0
               ? -1
               : nb_proxy_policy(ctx, VOL_RULE, what, read, ctx->project_id);
}

static json_t *field(const json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return v ? json_incref(v) : json_null();
}

/* _translate_volume_summary_view of a Cinder view. New reference. */
static json_t *volume_view(const json_t *v)
{
    const char *id = nb_json_str(v, "id");
    json_t *d = json_object();
    json_object_set_new(d, "id", json_string(id));
    json_object_set_new(d, "status", field(v, "status"));
    json_object_set_new(d, "size", field(v, "size"));
    json_object_set_new(d, "availabilityZone", field(v, "availability_zone"));
    json_object_set_new(d, "createdAt", field(v, "created_at"));
    json_t *atts = json_object_get(v, "attachments"), *first = json_array_get(atts, 0);
    json_t *a = json_object();
    if (first) {
        json_object_set_new(a, "id", json_string(id));
        json_object_set_new(a, "volumeId", json_string(id));
        json_object_set_new(a, "serverId", field(first, "server_id"));
        const char *dev = nb_json_str(first, "device");
        if (dev && *dev)
            json_object_set_new(a, "device", json_string(dev));
    }
    json_object_set_new(d, "attachments", json_pack("[o]", a));
    json_object_set_new(d, "displayName", field(v, "name"));
    json_object_set_new(d, "displayDescription", field(v, "description"));
    json_object_set_new(d, "volumeType", field(v, "volume_type"));
    json_object_set_new(d, "snapshotId", field(v, "snapshot_id"));
    json_t *md = json_object_get(v, "metadata");
    json_object_set_new(d, "metadata", json_is_object(md) ? json_incref(md) : json_object());
    return d;
}

/* _translate_snapshot_summary_view of a Cinder view. New reference. */
static json_t *snapshot_view(const json_t *s)
{
    return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "id", field(s, "id"), "volumeId",
                     field(s, "volume_id"), "status", field(s, "status"), "size", field(s, "size"),
                     "createdAt", field(s, "created_at"), "displayName", field(s, "name"),
                     "displayDescription", field(s, "description"));
}

/* common.limited over all, each through view, under key. */
static int respond_page(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp,
                        const char *key, json_t *all, json_t *(*view)(const json_t *))
{
    long long limit = 0, offset = 0;
    const char *l = nb_req_query(req, "limit"), *o = nb_req_query(req, "offset");
    if ((l && nb_srv_query_nonneg_int(ctx, "limit", l, &limit) < 0) ||
        (o && nb_srv_query_nonneg_int(ctx, "offset", o, &offset) < 0))
        return -1;
    long long max = nb_res_max_limit();
    if (limit <= 0 || limit > max)
        limit = max;
    json_t *list = json_array();
    for (size_t i = (size_t)offset;
         i < json_array_size(all) && (long long)json_array_size(list) < limit; i++)
        json_array_append_new(list, view(json_array_get(all, i)));
    return nb_resp_json(resp, 200, json_pack("{s:o}", key, list));
}

/* Cinder's 413 (over quota) is Nova's 403. */
static int over_quota_403(struct nb_ctx *ctx)
{
    return nb_ctx_status(ctx) == 413 ? nb_srv_error_as(ctx, 403, NULL) : -1;
}

/* --- /os-volumes ---------------------------------------------------------------- */

static int volume_list(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp,
                       const char *what)
{
    if (policy(ctx, what, true) < 0)
        return -1;
    _cleanup_json_ json_t *all = nb_volume_list_for(ctx);
    return all ? respond_page(ctx, req, resp, "volumes", all, volume_view) : -1;
}

static int do_vol_list(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    return volume_list(ctx, req, resp, "list");
}

static int do_vol_detail(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    return volume_list(ctx, req, resp, "detail");
}

static int respond_volume(struct nb_ctx *ctx, struct nb_resp *resp, const char *id)
{
    _cleanup_json_ json_t *v = nb_volume_show_for(ctx, id);
    return v ? nb_resp_json(resp, 200, json_pack("{s:o}", "volume", volume_view(v))) : -1;
}

static int do_vol_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (policy(ctx, "show", true) < 0)
        return -1;
    return respond_volume(ctx, resp, nb_req_param(req, "volume_id"));
}

/* volumes_schema.create's checks of body["volume"]; borrowed, or NULL. */
static json_t *volume_body(struct nb_ctx *ctx, struct nb_req *req)
{
    static const char *const top[] = {"volume", NULL};
    static const char *const keys[] = {
        "volume_type",       "metadata",     "snapshot_id",         "size",
        "availability_zone", "display_name", "display_description", NULL};
    json_t *vol = nb_srv_body_object(ctx, req, "volume", top);
    if (!vol || nb_res_only_keys(ctx, "volume", vol, keys) < 0)
        return NULL;
    json_t *size = nb_res_required(ctx, "volume", vol, "size");
    if (!size)
        return NULL;
    if (!json_is_integer(size) && !json_is_string(size)) {
        nb_srv_bad(ctx, "volume/size", size, "is not of type 'integer', 'string'");
        return NULL;
    }
    if (json_is_integer(size) && json_integer_value(size) < 1) {
        nb_srv_bad(ctx, "volume/size", size, "is less than the minimum of 1");
        return NULL;
    }
    const char *s = json_string_value(size);
    if (s && (!*s || strspn(s, "0123456789") != strlen(s))) {
        nb_srv_bad(ctx, "volume/size", size, "does not match '^[0-9]+$'");
        return NULL;
    }
    static const char *const strings[] = {"volume_type",         "snapshot_id",
                                          "availability_zone",   "display_name",
                                          "display_description", NULL};
    char f[64];
    for (int i = 0; strings[i]; i++) {
        json_t *v = json_object_get(vol, strings[i]);
        snprintf(f, sizeof(f), "volume/%s", strings[i]);
        if (v && !json_is_string(v)) {
            nb_srv_bad(ctx, f, v, "is not of type 'string'");
            return NULL;
        }
    }
    json_t *md = json_object_get(vol, "metadata");
    if (md && !json_is_object(md)) {
        nb_srv_bad(ctx, "volume/metadata", md, "is not of type 'object'");
        return NULL;
    }
    return vol;
}

static int do_vol_create(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (policy(ctx, "create", false) < 0)
        return -1;
    json_t *vol = volume_body(ctx, req);
    if (!vol)
        return -1;
    const char *snap = nb_json_str(vol, "snapshot_id");
    if (snap) {
        _cleanup_json_ json_t *s = nb_volume_snapshot_lookup(ctx, snap);
        if (!s)
            return -1;
    }
    _cleanup_json_ json_t *body = json_object();
    static const char *const same[] = {"size",     "snapshot_id", "availability_zone",
                                       "metadata", "volume_type", NULL};
    for (int i = 0; same[i]; i++)
        if (json_object_get(vol, same[i]))
            json_object_set(body, same[i], json_object_get(vol, same[i]));
    if (json_object_get(vol, "display_name"))
        json_object_set(body, "name", json_object_get(vol, "display_name"));
    if (json_object_get(vol, "display_description"))
        json_object_set(body, "description", json_object_get(vol, "display_description"));
    char id[NB_UUID_LEN] = "";
    if (nb_volume_create_for(ctx, body, id) < 0)
        return over_quota_403(ctx);
    return respond_volume(ctx, resp, id);
}

static int do_vol_delete(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (policy(ctx, "delete", false) < 0 ||
        nb_volume_delete_for(ctx, nb_req_param(req, "volume_id")) < 0)
        return -1;
    return nb_resp_empty(resp, 202);
}

/* --- /os-snapshots ---------------------------------------------------------------- */

static int snapshot_list(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp,
                         const char *what)
{
    if (policy(ctx, what, true) < 0)
        return -1;
    _cleanup_json_ json_t *all = nb_volume_snapshot_list_for(ctx);
    return all ? respond_page(ctx, req, resp, "snapshots", all, snapshot_view) : -1;
}

static int do_snap_list(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    return snapshot_list(ctx, req, resp, "snapshots:list");
}

static int do_snap_detail(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    return snapshot_list(ctx, req, resp, "snapshots:detail");
}

static int respond_snapshot(struct nb_ctx *ctx, struct nb_resp *resp, const char *id)
{
    _cleanup_json_ json_t *s = nb_volume_snapshot_show_for(ctx, id);
    return s ? nb_resp_json(resp, 200, json_pack("{s:o}", "snapshot", snapshot_view(s))) : -1;
}

static int do_snap_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (policy(ctx, "snapshots:show", true) < 0)
        return -1;
    return respond_snapshot(ctx, resp, nb_req_param(req, "snapshot_id"));
}

static int do_snap_create(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (policy(ctx, "snapshots:create", false) < 0)
        return -1;
    static const char *const top[] = {"snapshot", NULL};
    static const char *const keys[] = {"volume_id", "force", "display_name", "display_description",
                                       NULL};
    json_t *snap = nb_srv_body_object(ctx, req, "snapshot", top);
    if (!snap || nb_res_only_keys(ctx, "snapshot", snap, keys) < 0)
        return -1;
    json_t *vid = nb_res_required(ctx, "snapshot", snap, "volume_id");
    if (!vid)
        return -1;
    static const char *const strings[] = {"volume_id", "display_name", "display_description", NULL};
    char f[64];
    for (int i = 0; strings[i]; i++) {
        json_t *v = json_object_get(snap, strings[i]);
        snprintf(f, sizeof(f), "snapshot/%s", strings[i]);
        if (v && !json_is_string(v))
            return nb_srv_bad(ctx, f, v, "is not of type 'string'");
    }
    json_t *fv = json_object_get(snap, "force");
    int force = fv ? nb_res_check_bool(ctx, "snapshot/force", fv) : 0;
    if (force < 0)
        return -1;
    char id[NB_UUID_LEN] = "";
    if (nb_volume_snapshot_for(ctx, json_string_value(vid), nb_json_str(snap, "display_name"),
                               nb_json_str(snap, "display_description"), force == 1, id) < 0)
        return over_quota_403(ctx);
    return respond_snapshot(ctx, resp, id);
}

static int do_snap_delete(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (policy(ctx, "snapshots:delete", false) < 0 ||
        nb_volume_snapshot_delete_for(ctx, nb_req_param(req, "snapshot_id")) < 0)
        return -1;
    return nb_resp_empty(resp, 202);
}

NB_PROXY_ROUTE(vol_list)
NB_PROXY_ROUTE(vol_detail)
NB_PROXY_ROUTE(vol_show)
NB_PROXY_ROUTE(vol_create)
NB_PROXY_ROUTE(vol_delete)
NB_PROXY_ROUTE(snap_list)
NB_PROXY_ROUTE(snap_detail)
NB_PROXY_ROUTE(snap_show)
NB_PROXY_ROUTE(snap_create)
NB_PROXY_ROUTE(snap_delete)

int nb_compute_os_volumes_init(struct nb_env *env)
{
    (void)env;
    nb_http_route("GET", "/compute/v2.1/os-volumes", h_vol_list, 0);
    nb_http_route("GET", "/compute/v2.1/os-volumes/detail", h_vol_detail, 0);
    nb_http_route("POST", "/compute/v2.1/os-volumes", h_vol_create, 0);
    nb_http_route("GET", "/compute/v2.1/os-volumes/{volume_id}", h_vol_show, 0);
    nb_http_route("DELETE", "/compute/v2.1/os-volumes/{volume_id}", h_vol_delete, 0);
    nb_http_route("GET", "/compute/v2.1/os-snapshots", h_snap_list, 0);
    nb_http_route("GET", "/compute/v2.1/os-snapshots/detail", h_snap_detail, 0);
    nb_http_route("POST", "/compute/v2.1/os-snapshots", h_snap_create, 0);
    nb_http_route("GET", "/compute/v2.1/os-snapshots/{snapshot_id}", h_snap_show, 0);
    nb_http_route("DELETE", "/compute/v2.1/os-snapshots/{snapshot_id}", h_snap_delete, 0);
    return 0;
}
