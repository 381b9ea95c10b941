/* attach_records.c - the attachment records of Cinder's attach flow of
 * microversion 3.27 and later (volume/api.py attachment_create /
 * attachment_update, the os-complete action; the delete is status.c's
 * finish_detach): a record is reserved, then connected (a host's connector
 * in, the NFS connection info out), then attached.
 *
 * Each step writes the record and lets the volume settle on what its live
 * records say (nb_vol_settle: Cinder's _get_statuses_from_attachments,
 * reached through the transitions of status.c), in one transaction, before
 * the caller answers. So a reserved record holds the volume "reserved", a
 * connected one "attaching", an attached one "in-use". The checks Cinder
 * makes before reserving (error statuses, the statuses a volume may be
 * reserved from, the same-instance exception) are made inside that
 * transaction, so two racing reservations cannot both pass them.
 * nb_volume_attachment_state reads a volume and its attachment to a server
 * for `nubo doctor`; nb_volume_attachment_create_for / _delete_for /
 * nb_volume_attachments_for are the compute side's doors for a server that
 * moves between hosts (a record for the new host, the old one ended). */
#include "common/cleanup.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "db/db.h"
#include "volume/volume.h"
#include "volume/volume_int.h"

#include <stdio.h>
#include <string.h>

/* Cinder's _attachment_reserve gate: an available volume (or in-use, when
 * multiattach), or one already reserved or in use by the same instance
 * (an instance moving between hosts). 0, or -1 after Cinder's 400. */
static int reserve_allowed(struct nb_ctx *ctx, const json_t *vol, const char *instance_uuid)
{
    const char *id = nb_json_str(vol, "id"), *status = nb_json_str(vol, "status");
    if (strstr(status, "error"))
        return nb_error(ctx, 400, NULL,
                        "Invalid volume: Volume attachments can not be created if the volume is "
                        "in an error state. The Volume %s currently has a status of: %s ",
                        id, status);
    bool multi = nb_json_int(vol, "multiattach", 0) != 0;
    static const char *const single[] = {"available", "downloading", NULL};
    static const char *const multiple[] = {"available", "in-use", "downloading", NULL};
    const char *const *allowed = multi ? multiple : single;
    for (int i = 0; allowed[i]; i++)
        if (strcmp(allowed[i], status) == 0)
            return 0;
    if (instance_uuid && (!strcmp(status, "in-use") || !strcmp(status, "reserved")) &&
        nb_db_int(nb_vol_env->db, ctx, 0,
                  "SELECT COUNT(*) FROM volume_attachment WHERE volume_id = ? AND "
                  "instance_uuid = ? AND deleted = 0",
                  "ss", id, instance_uuid) > 0)
        return 0;
    if (nb_ctx_failed(ctx))
        return -1;
    _cleanup_free_ char * or = nb_vol_or_str(allowed);
    return nb_error(ctx, 400, NULL,
                    "Invalid volume: Volume %s status must be %s to reserve, but the current "
                    "status is %s.",
                    id, or, status);
}

int nb_vol_attachment_reserve(struct nb_ctx *ctx, const char *volume_id, const char *instance_uuid,
                              const char *attach_mode, const char *attachment_id)
{
    struct nb_db *db = nb_vol_env->db;
    char now[32];
    nb_now_iso_us(now);
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    _cleanup_json_ json_t *vol = nb_vol_load(ctx, volume_id);
    if (!vol || reserve_allowed(ctx, vol, instance_uuid) < 0 ||
        nb_db_exec(db, ctx,
                   "INSERT INTO volume_attachment (id, volume_id, instance_uuid, attach_mode, "
                   "attach_status, connection_info, created_at, deleted) VALUES (?, ?, ?, ?, "
                   "'reserved', '{}', ?, 0)",
                   "sssss", attachment_id, volume_id, instance_uuid, attach_mode, now) < 0 ||
        nb_vol_settle(ctx, volume_id, false) < 0) {
        nb_db_rollback(db);
        return -1;
    }
    if (nb_db_commit(db, ctx) < 0)
        return -1;
    NB_INFO(NB_VOL_LOG, ctx, NULL, "Volume %s: attachment %s reserved for %s", volume_id,
            attachment_id, instance_uuid ? instance_uuid : "(no instance)");
    return 0;
}

/* A string member of the connector; def when it is absent, NULL when it is
 * null (Cinder's connector.get(key, def)). */
static const char *connector_str(const json_t *connector, const char *key, const char *def)
{
    const json_t *v = json_object_get(connector, key);
    return !v ? def : json_is_string(v) ? json_string_value(v) : NULL;
}

int nb_vol_attachment_connect(struct nb_ctx *ctx, const char *attachment_id,
                              const json_t *connector, const json_t *info, const char *attach_mode)
{
    struct nb_db *db = nb_vol_env->db;
    char now[32];
    nb_now_iso_us(now);
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    _cleanup_json_ json_t *row =
        nb_db_row(db, ctx, "SELECT volume_id FROM volume_attachment WHERE id = ? AND deleted = 0",
                  "s", attachment_id);
    int rc = row ? 0 : -1;
    if (!row && !nb_ctx_failed(ctx))
        nb_error(ctx, 404, NULL,
                 "Volume attachment could not be found with filter: attachment_id = %s.",
                 attachment_id);
    if (rc == 0 &&
        nb_db_exec(db, ctx,
                   "UPDATE volume_attachment SET attach_status = 'attaching', connector = ?, "
                   "connection_info = ?, attached_host = ?, mountpoint = ?, attach_time = ?, "
                   "attach_mode = ?, updated_at = ? WHERE id = ?",
                   "jjssssss", connector, info, connector_str(connector, "host", ""),
                   connector_str(connector, "mountpoint", "na"), now, attach_mode, now,
                   attachment_id) < 0)
        rc = -1;
    if (rc < 0 || nb_vol_settle(ctx, nb_json_str(row, "volume_id"), false) < 0) {
        nb_db_rollback(db);
        return -1;
    }
    if (nb_db_commit(db, ctx) < 0)
        return -1;
    NB_INFO(NB_VOL_LOG, ctx, NULL, "Volume %s: attachment %s connected to host %s",
            nb_json_str(row, "volume_id"), attachment_id,
            nb_json_str(connector, "host") ? nb_json_str(connector, "host") : "?");
    return 0;
}

int nb_vol_attachment_complete(struct nb_ctx *ctx, const char *volume_id, const char *attachment_id)
{
    struct nb_db *db = nb_vol_env->db;
    char now[32];
    nb_now_iso_us(now);
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    int n = nb_db_exec(db, ctx,
                       "UPDATE volume_attachment SET attach_status = 'attached', updated_at = ? "
                       "WHERE id = ? AND volume_id = ? AND deleted = 0",
                       "sss", now, attachment_id, volume_id);
    if (n == 0)
        nb_error(ctx, 404, NULL,
                 "Volume attachment could not be found with filter: attachment_id = %s.",
                 attachment_id);
    if (n <= 0 || nb_vol_settle(ctx, volume_id, false) < 0) {
        nb_db_rollback(db);
        return -1;
    }
    if (nb_db_commit(db, ctx) < 0)
        return -1;
    NB_INFO(NB_VOL_LOG, ctx, NULL, "Volume %s: attachment %s attached", volume_id, attachment_id);
    return 0;
}

int nb_volume_attachment_state(struct nb_db *db, struct nb_ctx *ctx, const char *volume_id,
                               const char *instance_uuid, json_t **volume, json_t **attachment)
{
    *attachment = NULL;
    *volume = nb_db_row(db, ctx,
                        "SELECT status, attach_status, size, bootable FROM volumes WHERE id = ? "
                        "AND deleted = 0",
                        "s", volume_id);
    if (!*volume)
        return nb_ctx_failed(ctx) ? -1 : 0;
    *attachment = nb_db_row(db, ctx,
                            "SELECT id, attached_host, mountpoint, attach_status FROM "
                            "volume_attachment WHERE volume_id = ? AND instance_uuid = ? AND "
                            "deleted = 0 ORDER BY created_at DESC LIMIT 1",
                            "ss", volume_id, instance_uuid);
    if (!*attachment && nb_ctx_failed(ctx)) {
        json_decref(*volume);
        *volume = NULL;
        return -1;
    }
    return 0;
}

int nb_volume_attachment_create_for(struct nb_ctx *ctx, const char *volume_id,
                                    const char *instance_uuid, const char *host,
                                    const char *mountpoint, char *attachment_id)
{
    nb_uuid(attachment_id);
    /* described first, so a backend failure leaves no record behind */
    _cleanup_json_ json_t *info = nb_vol_attachment_info(ctx, volume_id, attachment_id);
    if (!info)
        return -1;
    const char *mode = nb_json_str(info, "access_mode") ? nb_json_str(info, "access_mode") : "rw";
    _cleanup_json_ json_t *connector = json_pack(
        "{s:s, s:s, s:s, s:s, s:b}", "host", host, "mountpoint", mountpoint ? mountpoint : "na",
        "platform", "x86_64", "os_type", "linux", "multipath", 0);
    if (nb_vol_attachment_reserve(ctx, volume_id, instance_uuid, mode, attachment_id) < 0)
        return -1;
    if (nb_vol_attachment_connect(ctx, attachment_id, connector, info, mode) < 0 ||
        nb_vol_attachment_complete(ctx, volume_id, attachment_id) < 0) {
        struct nb_ctx sub; /* the first error stays ctx's */
        nb_ctx_child(&sub, ctx);
        nb_vol_attachment_delete(&sub, volume_id, attachment_id);
        return -1;
    }
    return 0;
}

int nb_volume_attachment_delete_for(struct nb_ctx *ctx, const char *volume_id,
                                    const char *attachment_id)
{
    return nb_vol_attachment_delete(ctx, volume_id, attachment_id);
}

json_t *nb_volume_attachments_for(struct nb_ctx *ctx, const char *volume_id,
                                  const char *instance_uuid)
{
    return nb_db_rows(nb_vol_env->db, ctx,
                      "SELECT id, attached_host, attach_status FROM volume_attachment WHERE "
                      "volume_id = ? AND instance_uuid = ? AND deleted = 0 ORDER BY created_at, id",
                      "ss", volume_id, instance_uuid);
}
