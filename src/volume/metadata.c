/* metadata.c - the user metadata of volumes and snapshots: Cinder's checks
 * (check_metadata_properties), reads and writes of the key/value tables
 * (volume_metadata, snapshot_metadata: soft-deleted rows), and the metadata
 * routes of both resources, which differ only in their table, their path
 * parameter and their words (Cinder's volume_metadata.py and
 * snapshot_metadata.py controllers):
 *   GET    .../{id}/metadata         {"metadata": {...}}
 *   POST   .../{id}/metadata         merge, answers the whole metadata
 *   PUT    .../{id}/metadata         replace, answers the whole metadata
 *   GET    .../{id}/metadata/{key}   {"meta": {key: value}}, 404 when unset
 *   PUT    .../{id}/metadata/{key}   {"meta": {key: value}} (that key only)
 *   DELETE .../{id}/metadata/{key}   200, 404 when unset */
#include "common/cleanup.h"
#include "common/json.h"
#include "common/util.h"
#include "db/db.h"
#include "volume/volume_int.h"

#include <string.h>

const struct nb_vol_meta_kind nb_vol_volume_meta = {
    .what = "Volume",
    .param = "volume_id",
    .table = "volume_metadata",
    .column = "volume_id",
    .load = nb_vol_load,
    .update_policy = "volume:update_volume_metadata",
    .delete_policy = "volume:delete_volume_metadata",
};

const struct nb_vol_meta_kind nb_vol_snapshot_meta = {
    .what = "Snapshot",
    .param = "snapshot_id",
    .table = "snapshot_metadata",
    .column = "snapshot_id",
    .load = nb_vol_snapshot_load,
    .update_policy = "volume:update_snapshot_metadata",
    .delete_policy = "volume:delete_snapshot_metadata",
};

json_t *nb_vol_metadata_of(struct nb_ctx *ctx, const char *table, const char *column,
                           const char *id)
{
    _cleanup_free_ char *sql = nb_strdup_printf(
        "SELECT \"key\", value FROM %s WHERE %s = ? AND deleted = 0 ORDER BY id", table, column);
    _cleanup_json_ json_t *rows = nb_db_rows(nb_vol_env->db, ctx, sql, "s", id);
    json_t *md = json_object();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        const char *v = nb_json_str(r, "value");
        json_object_set_new(md, nb_json_str(r, "key"), json_string(v ? v : ""));
    }
    return md;
}

int nb_vol_metadata_check(struct nb_ctx *ctx, const json_t *md)
{
    if (!md || json_is_null(md))
        return 0;
    if (!json_is_object(md))
        return nb_error(ctx, 400, NULL, "Invalid input received: Metadata should be a dict.");
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)md, k, v) {
        if (!*k)
            return nb_error(ctx, 400, NULL, "Invalid metadata: Metadata property key blank.");
        if (strlen(k) > 255)
            return nb_error(ctx, 400, NULL,
                            "Invalid metadata size: Metadata property key %s greater than 255 "
                            "characters.",
                            k);
        if (!json_is_string(v))
            return nb_error(ctx, 400, NULL,
                            "Invalid input for field/attribute metadata. Value: %s is not a "
                            "string.",
                            k);
        if (strlen(json_string_value(v)) > 255)
            return nb_error(ctx, 400, NULL,
                            "Invalid metadata size: Metadata property key %s value greater than "
                            "255 characters.",
                            k);
    }
    return 0;
}

int nb_vol_metadata_write(struct nb_ctx *ctx, const char *table, const char *column, const char *id,
                          const json_t *md, bool replace)
{
    struct nb_db *db = nb_vol_env->db;
    char now[32];
    nb_now_iso_us(now);
    _cleanup_free_ char *drop_all = nb_strdup_printf(
        "UPDATE %s SET deleted = 1, deleted_at = ? WHERE %s = ? AND deleted = 0", table, column);
    _cleanup_free_ char *drop_key = nb_strdup_printf(
        "UPDATE %s SET deleted = 1, deleted_at = ? WHERE %s = ? AND \"key\" = ? AND "
        "deleted = 0",
        table, column);
    _cleanup_free_ char *insert = nb_strdup_printf(
        "INSERT INTO %s (%s, \"key\", value, created_at, deleted) VALUES (?, ?, ?, ?, 0)", table,
        column);
    if (replace && nb_db_exec(db, ctx, drop_all, "ss", now, id) < 0)
        return -1;
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)md, k, v) {
        if (nb_db_exec(db, ctx, drop_key, "sss", now, id, k) < 0 ||
            nb_db_exec(db, ctx, insert, "ssss", id, k, json_string_value(v), now) < 0)
            return -1;
    }
    return 0;
}

/* nb_vol_metadata_write in a transaction of its own. 0/-1. */
static int write_tx(struct nb_ctx *ctx, const struct nb_vol_meta_kind *kind, const char *id,
                    const json_t *md, bool replace)
{
    struct nb_db *db = nb_vol_env->db;
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    if (nb_vol_metadata_write(ctx, kind->table, kind->column, id, md, replace) < 0) {
        nb_db_rollback(db);
        return -1;
    }
    return nb_db_commit(db, ctx);
}

int nb_vol_metadata_index(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp,
                          const struct nb_vol_meta_kind *kind)
{
    const char *id = nb_req_param(req, kind->param);
    _cleanup_json_ json_t *row = nb_vol_begin_load(ctx, req, resp, kind->param, kind->load, NULL);
    if (!row)
        return -1;
    return nb_resp_json(
        resp, 200,
        json_pack("{s:o}", "metadata", nb_vol_metadata_of(ctx, kind->table, kind->column, id)));
}

int nb_vol_metadata_write_all(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp,
                              const struct nb_vol_meta_kind *kind, bool replace)
{
    const char *id = nb_req_param(req, kind->param);
    _cleanup_json_ json_t *row =
        nb_vol_begin_load(ctx, req, resp, kind->param, kind->load, kind->update_policy);
    if (!row)
        return -1;
    json_t *md = nb_vol_body(ctx, req, "metadata");
    if (!md || nb_vol_metadata_check(ctx, md) < 0 || write_tx(ctx, kind, id, md, replace) < 0)
        return -1;
    return nb_resp_json(
        resp, 200,
        json_pack("{s:o}", "metadata", nb_vol_metadata_of(ctx, kind->table, kind->column, id)));
}

int nb_vol_metadata_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp,
                         const struct nb_vol_meta_kind *kind)
{
    const char *id = nb_req_param(req, kind->param), *key = nb_req_param(req, "key");
    _cleanup_json_ json_t *row = nb_vol_begin_load(ctx, req, resp, kind->param, kind->load, NULL);
    if (!row)
        return -1;
    _cleanup_json_ json_t *md = nb_vol_metadata_of(ctx, kind->table, kind->column, id);
    json_t *v = json_object_get(md, key);
    if (!v)
        return nb_error(ctx, 404, NULL, "%s %s has no metadata with key %s.", kind->what, id, key);
    return nb_resp_json(resp, 200, json_pack("{s:{s:O}}", "meta", key, v));
}

int nb_vol_metadata_update_key(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp,
                               const struct nb_vol_meta_kind *kind)
{
    const char *id = nb_req_param(req, kind->param), *key = nb_req_param(req, "key");
    _cleanup_json_ json_t *row =
        nb_vol_begin_load(ctx, req, resp, kind->param, kind->load, kind->update_policy);
    if (!row)
        return -1;
    json_t *meta = nb_vol_body(ctx, req, "meta");
    if (!meta)
        return -1;
    if (!json_object_get(meta, key))
        return nb_error(ctx, 400, NULL, "Request body and URI mismatch");
    if (json_object_size(meta) != 1)
        return nb_error(ctx, 400, NULL, "Request body contains too many items");
    if (nb_vol_metadata_check(ctx, meta) < 0 || write_tx(ctx, kind, id, meta, false) < 0)
        return -1;
    return nb_resp_json(resp, 200, json_pack("{s:O}", "meta", meta));
}

int nb_vol_metadata_delete(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp,
                           const struct nb_vol_meta_kind *kind)
{
    const char *id = nb_req_param(req, kind->param), *key = nb_req_param(req, "key");
    _cleanup_json_ json_t *row =
        nb_vol_begin_load(ctx, req, resp, kind->param, kind->load, kind->delete_policy);
    if (!row)
        return -1;
    char now[32];
    nb_now_iso_us(now);
    _cleanup_free_ char *sql = nb_strdup_printf(
        "UPDATE %s SET deleted = 1, deleted_at = ? WHERE %s = ? AND \"key\" = ? AND "
        "deleted = 0",
        kind->table, kind->column);
    int n = nb_db_exec(nb_vol_env->db, ctx, sql, "sss", now, id, key);
    if (n < 0)
        return -1;
    if (n == 0)
        return nb_error(ctx, 404, NULL, "%s %s has no metadata with key %s.", kind->what, id, key);
    return nb_resp_empty(resp, 200);
}
