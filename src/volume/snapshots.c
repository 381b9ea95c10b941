/* snapshots.c - /volume/v3/{project_id}/snapshots: create, list, detail,
 * show, update, delete, and the snapshot metadata routes (metadata.c)
 * (Cinder Zed's views and checks).
 *
 * A snapshot of an available volume is a qcow2 overlay (see backend_nfs.c):
 * creating one adds volume-<vol>.<snap> on top of the volume's active file
 * and records it in snapshots.provider_location; the rows of a volume with
 * an overlay, in creation order, are its chain.
 *
 * A snapshot of an in-use volume (force=true, or nb_volume_snapshot_for) must
 * not change the active file, which a running guest has open: it is a
 * standalone copy, volume-<vol>.<snap> made by `qemu-img convert -U` of the
 * active file (crash-consistent, nothing is paused), in the format of new
 * volumes and with no backing file. Its row has standalone = 1 and is not
 * part of the chain: a volume made from it converts the copy itself,
 * deleting it removes the file (whatever the volume's status), and deleting
 * the volume removes it with the volume's other volume-<vol>.* files.
 *
 * Changes to a chain (and reads of it that copy data) hold chain_lock, so
 * concurrent snapshot requests on one volume cannot fork it. Snapshots
 * count against the snapshots and gigabytes quotas, as in Cinder. After a
 * change of the active file the volume's admin metadata "format" is set to
 * the new active file's format. */
#include "common/cleanup.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "db/db.h"
#include "volume/volume.h"
#include "volume/volume_int.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t chain_lock = PTHREAD_MUTEX_INITIALIZER;

void nb_vol_chain_lock(void)
{
    pthread_mutex_lock(&chain_lock);
}

void nb_vol_chain_unlock(void)
{
    pthread_mutex_unlock(&chain_lock);
}

json_t *nb_vol_snapshot_load(struct nb_ctx *ctx, const char *id)
{
    json_t *row = nb_db_row(nb_vol_env->db, ctx,
                            "SELECT * FROM snapshots WHERE id = ? AND deleted = 0", "s", id);
    if (!row && nb_ctx_failed(ctx))
        return NULL;
    const char *p = row ? nb_json_str(row, "project_id") : NULL;
    if (!row || !(ctx->is_admin || ctx->system || (p && strcmp(p, ctx->project_id) == 0))) {
        json_decref(row);
        nb_error(ctx, 404, NULL, "Snapshot %s could not be found.", id);
        return NULL;
    }
    return row;
}

json_t *nb_volume_snapshot_lookup(struct nb_ctx *ctx, const char *snapshot_id)
{
    return nb_vol_snapshot_load(ctx, snapshot_id);
}

static json_t *field(const json_t *row, const char *key)
{
    json_t *v = json_object_get(row, key);
    return v ? json_incref(v) : json_null();
}

/* The view of a snapshot row. extended: the attributes of Cinder's
 * extended_snapshot_attributes extension, which extends only show and the
 * detail list (not create, update or the plain list). */
static json_t *snapshot_view(struct nb_ctx *ctx, const json_t *row, bool extended)
{
    const char *id = nb_json_str(row, "id");
    json_t *v = json_object();
    json_object_set_new(v, "id", json_string(id));
    json_object_set_new(v, "created_at", field(row, "created_at"));
    json_object_set_new(v, "updated_at", field(row, "updated_at"));
    json_object_set_new(v, "name", field(row, "display_name"));
    json_object_set_new(v, "description", field(row, "display_description"));
    json_object_set_new(v, "volume_id", field(row, "volume_id"));
    json_object_set_new(v, "status", field(row, "status"));
    json_object_set_new(v, "size", field(row, "volume_size"));
    json_object_set_new(v, "metadata",
                        nb_vol_metadata_of(ctx, "snapshot_metadata", "snapshot_id", id));
    if (extended) {
        json_object_set_new(v, "os-extended-snapshot-attributes:project_id",
                            field(row, "project_id"));
        json_object_set_new(v, "os-extended-snapshot-attributes:progress", field(row, "progress"));
    }
    if (nb_vol_mv(ctx, 14))
        json_object_set_new(v, "group_snapshot_id", json_null());
    if (nb_vol_mv(ctx, 41))
        json_object_set_new(v, "user_id", field(row, "user_id"));
    if (nb_vol_mv(ctx, 65))
        json_object_set_new(v, "consumes_quota", json_boolean(nb_json_int(row, "use_quota", 1)));
    return v;
}

/* --- list / show ---------------------------------------------------------------- */

static const struct nb_vol_sort_key snapshot_sort_keys[] = {
    {"id", "id"},
    {"name", "display_name"},
    {"display_name", "display_name"},
    {"status", "status"},
    {"size", "volume_size"},
    {"volume_id", "volume_id"},
    {"created_at", "created_at"},
    {"updated_at", "updated_at"},
    {"project_id", "project_id"},
    {NULL, NULL},
};

static bool snapshot_matches(struct nb_ctx *ctx, struct nb_req *req, const json_t *row,
                             const json_t *filter)
{
    (void)ctx;
    (void)filter;
    const char *name = nb_req_query(req, "name");
    if (!name)
        name = nb_req_query(req, "display_name");
    const char *dn = nb_json_str(row, "display_name");
    if (name && (!dn || strcmp(name, dn) != 0))
        return false;
    static const char *const exact[] = {"status", "volume_id", "project_id", NULL};
    for (int i = 0; exact[i]; i++) {
        const char *want = nb_req_query(req, exact[i]), *have = nb_json_str(row, exact[i]);
        if (want && (!have || strcmp(want, have) != 0))
            return false;
    }
    return true;
}

/* index and detail differ by the extension's attributes only */
static json_t *snapshot_list_view(struct nb_ctx *ctx, const json_t *row, bool detail)
{
    return snapshot_view(ctx, row, detail);
}

static const struct nb_vol_lister snapshot_lister = {
    .table = "snapshots",
    .sort_keys = snapshot_sort_keys,
    .load = nb_vol_snapshot_load,
    .match = snapshot_matches,
    .view = snapshot_list_view,
};

static int snapshots_index(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    return nb_vol_list(ctx, req, resp, &snapshot_lister, false);
}

static int snapshots_detail(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    return nb_vol_list(ctx, req, resp, &snapshot_lister, true);
}

static int snapshots_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    _cleanup_json_ json_t *row =
        nb_vol_begin_load(ctx, req, resp, "snapshot_id", nb_vol_snapshot_load, NULL);
    if (!row)
        return -1;
    return nb_resp_json(resp, 200, json_pack("{s:o}", "snapshot", snapshot_view(ctx, row, true)));
}

/* For the compute API's proxy (volume.h). */
json_t *nb_volume_snapshot_show_for(struct nb_ctx *ctx, const char *snapshot_id)
{
    _cleanup_json_ json_t *row = nb_vol_snapshot_load(ctx, snapshot_id);
    return row ? snapshot_view(ctx, row, false) : NULL;
}

json_t *nb_volume_snapshot_list_for(struct nb_ctx *ctx)
{
    _cleanup_json_ json_t *rows = nb_db_rows(nb_vol_env->db, ctx,
                                             "SELECT * FROM snapshots WHERE deleted = 0 AND "
                                             "project_id = ? ORDER BY created_at DESC, id DESC",
                                             "s", ctx->project_id);
    if (!rows)
        return NULL;
    json_t *list = json_array();
    size_t i;
    json_t *row;
    json_array_foreach (rows, i, row)
        json_array_append_new(list, snapshot_view(ctx, row, false));
    return list;
}

/* --- create ------------------------------------------------------------------------ */

/* Cinder's checks of the volume to snapshot: available, or in-use with
 * force. 0/-1 after 400. */
static int check_volume(struct nb_ctx *ctx, const json_t *vol, bool force)
{
    const char *id = nb_json_str(vol, "id"), *st = nb_json_str(vol, "status");
    if (strcmp(st, "error") == 0)
        return nb_error(ctx, 400, NULL,
                        "Invalid volume: The snapshot cannot be created when the volume is in "
                        "error status.");
    if (strcmp(st, "available") == 0 || (force && strcmp(st, "in-use") == 0))
        return 0;
    return nb_error(ctx, 400, NULL,
                    "Invalid volume: Volume %s status must be %s, but current status is: %s.", id,
                    force ? "available, in-use" : "available", st);
}

static int insert_snapshot(struct nb_ctx *ctx, const char *id, const json_t *body,
                           const json_t *vol)
{
    struct nb_db *db = nb_vol_env->db;
    char now[32];
    nb_now_iso_us(now);
    const char *name = nb_json_str(body, "name");
    if (!name)
        name = nb_json_str(body, "display_name");
    const char *desc = nb_json_str(body, "description");
    if (!desc)
        desc = nb_json_str(body, "display_description");
    long long size = nb_json_int(vol, "size", 0);
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    int rc = nb_vol_quota_check(ctx, ctx->project_id, 0, 1, size);
    if (rc == 0)
        rc = nb_db_exec(db, ctx,
                        "INSERT INTO snapshots (id, created_at, updated_at, deleted, volume_id, "
                        "user_id, project_id, status, progress, volume_size, display_name, "
                        "display_description, volume_type_id, use_quota) VALUES (?, ?, ?, 0, ?, "
                        "?, ?, 'creating', '0%', ?, ?, ?, ?, 1)",
                        "ssssssisss", id, now, now, nb_json_str(vol, "id"), ctx->user_id,
                        ctx->project_id, size, name, desc, NB_VOL_DEFAULT_TYPE_ID);
    json_t *md = json_object_get(body, "metadata");
    if (rc >= 0 && json_is_object(md))
        rc = nb_vol_metadata_write(ctx, "snapshot_metadata", "snapshot_id", id, md, false);
    if (rc < 0) {
        nb_db_rollback(db);
        return -1;
    }
    return nb_db_commit(db, ctx);
}

/* Makes the data of snapshot id of volume vol (row): an overlay on top of
 * the active file, or for an in-use volume, whose active file a guest holds
 * open, a standalone copy of it. Records the file (and its kind) in the
 * row; the row ends "available" or "error" (no file left), each committed.
 * Called with the chain lock held. 0, or -1 after nb_error(ctx). */
static int make_snapshot(struct nb_ctx *ctx, const char *id, const json_t *vol)
{
    const char *vid = nb_json_str(vol, "id"), *share = nb_json_str(vol, "provider_location");
    bool standalone = strcmp(nb_json_str(vol, "status"), "in-use") == 0;
    _cleanup_free_ char *file = nb_strdup_printf("volume-%s.%s", vid, id);
    char active[128], now[32];
    int rc = share ? nb_vol_active_file(ctx, vid, active, sizeof(active))
                   : nb_error(ctx, 400, NULL, "Invalid volume: Volume %s has no provider location.",
                              vid);
    if (rc == 0)
        rc = standalone ? nb_vol_backend_copy(ctx, share, active, file)
                        : nb_vol_backend_snapshot(ctx, share, vid, active, id);
    nb_now_iso_us(now);
    struct nb_ctx aside;
    nb_ctx_child(&aside, ctx);
    if (rc == 0 && nb_db_exec(nb_vol_env->db, ctx,
                              "UPDATE snapshots SET status = 'available', progress = '100%', "
                              "provider_location = ?, standalone = ?, updated_at = ? WHERE id = ?",
                              "sbss", file, standalone, now, id) < 0) {
        if (nb_vol_backend_remove(&aside, share, file) < 0)
            NB_ERROR(NB_VOL_LOG, ctx, NULL, "Snapshot %s: %s", id, nb_ctx_message(&aside));
        rc = -1;
    }
    if (rc < 0) {
        nb_db_exec(nb_vol_env->db, &aside,
                   "UPDATE snapshots SET status = 'error', updated_at = ? WHERE id = ?", "ss", now,
                   id);
        NB_ERROR(NB_VOL_LOG, ctx, NULL, "Snapshot %s of volume %s failed: %s", id, vid,
                 nb_ctx_message(ctx));
        return -1;
    }
    if (!standalone) {
        nb_vol_write_info(ctx, share, vid);
        /* the overlay is the active file now */
        if (nb_vol_record_format(&aside, share, vid) < 0)
            NB_ERROR(NB_VOL_LOG, ctx, NULL, "Volume %s: format not recorded: %s", vid,
                     nb_ctx_message(&aside));
    }
    NB_INFO(NB_VOL_LOG, ctx, NULL, "Snapshot %s of volume %s created: %s %s", id, vid,
            standalone ? "standalone copy" : "overlay", file);
    return 0;
}

/* Creates a snapshot of volume_id as POST /snapshots does (body: name,
 * description, metadata), writing its id into id. Returns -1 after
 * nb_error(ctx) when refused before the row exists; 0 when the row exists,
 * nb_ctx_status(failed) then 0 when it is available, else why it is "error". */
static int create_snapshot(struct nb_ctx *ctx, const char *volume_id, const json_t *body,
                           bool force, char id[NB_UUID_LEN], struct nb_ctx *failed)
{
    _cleanup_json_ json_t *vol = nb_vol_load(ctx, volume_id);
    if (!vol || check_volume(ctx, vol, force) < 0)
        return -1;
    nb_uuid(id);
    if (insert_snapshot(ctx, id, body, vol) < 0)
        return -1;
    nb_ctx_child(failed, ctx);
    nb_vol_chain_lock();
    /* the status may have changed (a detach) between the check and the lock */
    json_decref(vol);
    vol = nb_vol_load(failed, volume_id);
    if (vol && check_volume(failed, vol, force) == 0)
        make_snapshot(failed, id, vol);
    else
        nb_db_exec(nb_vol_env->db, ctx,
                   "UPDATE snapshots SET status = 'error' WHERE id = ? AND status = 'creating'",
                   "s", id);
    nb_vol_chain_unlock();
    return 0;
}

static int snapshots_create(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_vol_begin(ctx, req, resp) < 0)
        return -1;
    if (!ctx->is_member)
        return nb_error(ctx, 403, NULL,
                        "Policy doesn't allow volume:create_snapshot to be performed.");
    json_t *body = nb_vol_body(ctx, req, "snapshot");
    if (!body)
        return -1;
    /* Cinder's schema requires the key but allows null, which then is an
     * unknown volume */
    json_t *vj = json_object_get(body, "volume_id");
    if (!vj)
        return nb_error(ctx, 400, NULL,
                        "Invalid input for field/attribute snapshot. Value: %s. 'volume_id' is "
                        "a required property",
                        "{}");
    if (json_is_null(vj))
        return nb_error(ctx, 404, NULL, "Volume None could not be found.");
    if (!json_is_string(vj)) {
        _cleanup_free_ char *d = nb_json_dump(vj);
        return nb_error(ctx, 400, NULL,
                        "Invalid input for field/attribute volume_id. Value: %s. %s is not of "
                        "type 'string', 'null'",
                        d, d);
    }
    const char *vid = json_string_value(vj);
    if (nb_vol_check_name_desc(ctx, body, false) < 0 ||
        nb_vol_metadata_check(ctx, json_object_get(body, "metadata")) < 0)
        return -1;
    json_t *fj = json_object_get(body, "force");
    int force = !fj || json_is_null(fj) ? 0
                : json_is_boolean(fj)   ? json_is_true(fj)
                : json_is_string(fj)    ? nb_bool_from_string(json_string_value(fj))
                                        : -1;
    if (force < 0)
        return nb_error(ctx, 400, NULL, "Invalid value for 'force'");
    char id[NB_UUID_LEN];
    struct nb_ctx failed;
    if (create_snapshot(ctx, vid, body, force, id, &failed) < 0)
        return -1;
    _cleanup_json_ json_t *row = nb_vol_snapshot_load(ctx, id);
    if (!row)
        return -1;
    return nb_resp_json(resp, 202, json_pack("{s:o}", "snapshot", snapshot_view(ctx, row, false)));
}

int nb_volume_snapshot_for(struct nb_ctx *ctx, const char *volume_id, const char *name,
                           const char *description, bool force, char snap_id_out[37])
{
    _cleanup_json_ json_t *body =
        json_pack("{s:s?, s:s?}", "name", name, "description", description);
    char id[NB_UUID_LEN];
    struct nb_ctx failed;
    if (create_snapshot(ctx, volume_id, body, force, id, &failed) < 0)
        return -1;
    nb_strlcpy(snap_id_out, id, NB_UUID_LEN);
    if (nb_ctx_failed(&failed))
        return nb_error(ctx, nb_ctx_status(&failed), nb_ctx_error_name(&failed),
                        "Snapshot %s of volume %s ended in error: %s", id, volume_id,
                        nb_ctx_message(&failed));
    return 0;
}

/* --- update / delete ------------------------------------------------------------ */

static int snapshots_update(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *id = nb_req_param(req, "snapshot_id");
    json_t *body;
    _cleanup_json_ json_t *row =
        nb_vol_begin_update(ctx, req, resp, "snapshot_id", nb_vol_snapshot_load,
                            "volume:update_snapshot", "snapshot", &body);
    if (!row)
        return -1;
    if (!json_object_size(body))
        return nb_error(ctx, 400, NULL, "Missing required element 'snapshot' in request body.");
    if (nb_vol_check_name_desc(ctx, body, false) < 0)
        return -1;
    json_t *name = json_object_get(body, "name");
    if (!name)
        name = json_object_get(body, "display_name");
    json_t *desc = json_object_get(body, "description");
    if (!desc)
        desc = json_object_get(body, "display_description");
    char now[32];
    nb_now_iso_us(now);
    if ((name && nb_db_exec(nb_vol_env->db, ctx,
                            "UPDATE snapshots SET display_name = ?, updated_at = ? WHERE id = ?",
                            "sss", json_string_value(name), now, id) < 0) ||
        (desc && nb_db_exec(nb_vol_env->db, ctx,
                            "UPDATE snapshots SET display_description = ?, updated_at = ? WHERE "
                            "id = ?",
                            "sss", json_string_value(desc), now, id) < 0))
        return -1;
    json_decref(row);
    row = nb_vol_snapshot_load(ctx, id);
    if (!row)
        return -1;
    return nb_resp_json(resp, 200, json_pack("{s:o}", "snapshot", snapshot_view(ctx, row, false)));
}

/* Removes the overlay of snapshot snap from its volume's chain. 0/-1. */
static int remove_overlay(struct nb_ctx *ctx, const json_t *snap, const char *share)
{
    const char *vid = nb_json_str(snap, "volume_id"), *sid = nb_json_str(snap, "id");
    _cleanup_json_ json_t *chain = nb_vol_chain(ctx, vid);
    if (!chain)
        return -1;
    size_t n = json_array_size(chain), k = n;
    for (size_t i = 0; i < n; i++)
        if (strcmp(nb_json_str(json_array_get(chain, i), "id"), sid) == 0)
            k = i;
    if (k == n)
        return 0; /* no overlay: it failed before one was made */
    _cleanup_free_ char *base = nb_strdup_printf("volume-%s", vid);
    const char *backing =
        k == 0 ? base : nb_json_str(json_array_get(chain, k - 1), "provider_location");
    const char *higher =
        k + 1 < n ? nb_json_str(json_array_get(chain, k + 1), "provider_location") : NULL;
    return nb_vol_backend_snapshot_delete(
        ctx, share, nb_json_str(json_array_get(chain, k), "provider_location"), backing, higher);
}

/* Deletes snap (a row ctx may see); a failure to remove its files leaves
 * it error_deleting and is no error of the request. 0/-1. */
static int delete_snapshot(struct nb_ctx *ctx, const json_t *snap)
{
    const char *id = nb_json_str(snap, "id");
    const char *vid = nb_json_str(snap, "volume_id");
    struct nb_ctx sys;
    nb_ctx_init_system(&sys, ctx->request_id);
    _cleanup_json_ json_t *vol = nb_vol_load(&sys, vid);
    if (!vol)
        return nb_error(ctx, 500, NULL, "Volume %s of snapshot %s is gone", vid, id);
    /* a standalone copy is apart from the volume's files: any status will do */
    bool standalone = nb_json_int(snap, "standalone", 0) != 0;
    if (!standalone && strcmp(nb_json_str(vol, "status"), "available") != 0 &&
        strcmp(nb_json_str(vol, "status"), "error") != 0)
        return nb_error(ctx, 400, NULL,
                        "Invalid volume: Volume %s is %s: snapshots of attached or busy volumes "
                        "cannot be deleted yet.",
                        vid, nb_json_str(vol, "status"));
    char now[32];
    nb_now_iso_us(now);
    int n = nb_db_exec(nb_vol_env->db, ctx,
                       "UPDATE snapshots SET status = 'deleting', updated_at = ? WHERE id = ? AND "
                       "deleted = 0 AND status IN ('available', 'error')",
                       "ss", now, id);
    if (n < 0)
        return -1;
    if (n == 0)
        return nb_error(ctx, 400, NULL,
                        "Invalid snapshot: Snapshot status must be available or error and must "
                        "not be part of a group.");
    struct nb_ctx work;
    nb_ctx_child(&work, ctx);
    const char *share = nb_json_str(vol, "provider_location");
    const char *file = nb_json_str(snap, "provider_location");
    nb_vol_chain_lock();
    int rc = !standalone ? remove_overlay(&work, snap, share)
             : file      ? nb_vol_backend_remove(&work, share, file)
                         : 0;
    nb_now_iso_us(now);
    if (rc == 0) {
        nb_db_exec(nb_vol_env->db, ctx,
                   "UPDATE snapshots SET status = 'deleted', deleted = 1, deleted_at = ?, "
                   "updated_at = ? WHERE id = ?",
                   "sss", now, now, id);
        if (!standalone) {
            struct nb_ctx aside;
            nb_ctx_child(&aside, ctx);
            nb_vol_write_info(ctx, share, vid);
            /* the active file may be the one below the merged overlay now */
            if (nb_vol_record_format(&aside, share, vid) < 0)
                NB_ERROR(NB_VOL_LOG, ctx, NULL, "Volume %s: format not recorded: %s", vid,
                         nb_ctx_message(&aside));
        }
        NB_INFO(NB_VOL_LOG, ctx, NULL, "Snapshot %s of volume %s deleted", id, vid);
    } else {
        nb_db_exec(nb_vol_env->db, ctx,
                   "UPDATE snapshots SET status = 'error_deleting', updated_at = ? WHERE id = ?",
                   "ss", now, id);
        NB_ERROR(NB_VOL_LOG, ctx, NULL, "Snapshot %s deletion failed: %s", id,
                 nb_ctx_message(&work));
    }
    nb_vol_chain_unlock();
    return 0;
}

static int snapshots_delete(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    _cleanup_json_ json_t *snap = nb_vol_begin_load(ctx, req, resp, "snapshot_id",
                                                    nb_vol_snapshot_load, "volume:delete_snapshot");
    if (!snap || delete_snapshot(ctx, snap) < 0)
        return -1;
    return nb_resp_empty(resp, 202);
}

int nb_volume_snapshot_delete_for(struct nb_ctx *ctx, const char *snapshot_id)
{
    _cleanup_json_ json_t *snap = nb_vol_snapshot_load(ctx, snapshot_id);
    return snap ? delete_snapshot(ctx, snap) : -1;
}

/* --- metadata (metadata.c) -------------------------------------------------------- */

static int meta_index(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    return nb_vol_metadata_index(ctx, req, resp, &nb_vol_snapshot_meta);
}

static int meta_create(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    return nb_vol_metadata_write_all(ctx, req, resp, &nb_vol_snapshot_meta, false);
}

static int meta_replace(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    return nb_vol_metadata_write_all(ctx, req, resp, &nb_vol_snapshot_meta, true);
}

static int meta_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    return nb_vol_metadata_show(ctx, req, resp, &nb_vol_snapshot_meta);
}

static int meta_update_key(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    return nb_vol_metadata_update_key(ctx, req, resp, &nb_vol_snapshot_meta);
}

static int meta_delete(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    return nb_vol_metadata_delete(ctx, req, resp, &nb_vol_snapshot_meta);
}

void nb_vol_snapshots_routes(void)
{
    nb_http_route("GET", "/volume/v3/{project_id}/snapshots", snapshots_index, 0);
    nb_http_route("GET", "/volume/v3/{project_id}/snapshots/detail", snapshots_detail, 0);
    nb_http_route("POST", "/volume/v3/{project_id}/snapshots", snapshots_create, 0);
    nb_http_route("GET", "/volume/v3/{project_id}/snapshots/{snapshot_id}", snapshots_show, 0);
    nb_http_route("PUT", "/volume/v3/{project_id}/snapshots/{snapshot_id}", snapshots_update, 0);
    nb_http_route("DELETE", "/volume/v3/{project_id}/snapshots/{snapshot_id}", snapshots_delete, 0);
    nb_http_route("PUT", "/volume/v3/{project_id}/snapshots", nb_vol_no_resource, 0);
    nb_http_route("DELETE", "/volume/v3/{project_id}/snapshots", nb_vol_no_resource, 0);
    nb_http_route("GET", "/volume/v3/{project_id}/snapshots/{snapshot_id}/metadata", meta_index, 0);
    nb_http_route("POST", "/volume/v3/{project_id}/snapshots/{snapshot_id}/metadata", meta_create,
                  0);
    nb_http_route("PUT", "/volume/v3/{project_id}/snapshots/{snapshot_id}/metadata", meta_replace,
                  0);
    nb_http_route("GET", "/volume/v3/{project_id}/snapshots/{snapshot_id}/metadata/{key}",
                  meta_show, 0);
    nb_http_route("PUT", "/volume/v3/{project_id}/snapshots/{snapshot_id}/metadata/{key}",
                  meta_update_key, 0);
    nb_http_route("DELETE", "/volume/v3/{project_id}/snapshots/{snapshot_id}/metadata/{key}",
                  meta_delete, 0);
}
