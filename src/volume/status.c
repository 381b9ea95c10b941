/* status.c - the attach side of the volume status machine (see volume.h)
 * and the doors the compute side uses: lookup, transitions, attachment
 * records and NFS connection info.
 *
 * Each transition is one conditional UPDATE (... WHERE status IN (allowed)),
 * Cinder's conditional_update, so two racing callers cannot both win; the
 * status is in the database before the caller is told. */
#include "common/cleanup.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "db/db.h"
#include "volume/volume.h"
#include "volume/volume_int.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

struct transition {
    enum nb_volume_op op;
    const char *name;
    const char *from[3]; /* NULL-terminated */
    const char *to;
    const char *attach_status; /* set with the status, or NULL to leave it */
};

static const struct transition transitions[] = {
    {NB_VOLUME_RESERVE, "reserve", {"available", NULL}, "reserved", NULL},
    {NB_VOLUME_UNRESERVE, "unreserve", {"reserved", NULL}, "available", NULL},
    {NB_VOLUME_BEGIN_ATTACH,
     "begin_attach",
     {"reserved", "available", NULL},
     "attaching",
     "attaching"},
    {NB_VOLUME_ATTACHED, "attached", {"attaching", NULL}, "in-use", "attached"},
    {NB_VOLUME_ATTACH_FAILED, "attach_failed", {"attaching", NULL}, "available", "detached"},
    {NB_VOLUME_BEGIN_DETACH, "begin_detaching", {"in-use", NULL}, "detaching", NULL},
    {NB_VOLUME_DETACHED, "detached", {"detaching", NULL}, "available", "detached"},
    {NB_VOLUME_ROLL_DETACHING, "roll_detaching", {"detaching", NULL}, "in-use", NULL},
};
#define NTRANSITIONS (sizeof(transitions) / sizeof(transitions[0]))

static const struct transition *find(enum nb_volume_op op)
{
    for (size_t i = 0; i < NTRANSITIONS; i++)
        if (transitions[i].op == op)
            return &transitions[i];
    return NULL;
}

const char *nb_volume_next_status(const char *status, enum nb_volume_op op)
{
    const struct transition *t = find(op);
    if (!t || !status)
        return NULL;
    for (int i = 0; t->from[i]; i++)
        if (strcmp(t->from[i], status) == 0)
            return t->to;
    return NULL;
}

const char *nb_volume_op_name(enum nb_volume_op op)
{
    const struct transition *t = find(op);
    return t ? t->name : "unknown";
}

char *nb_vol_or_str(const char *const *items)
{
    char *s = strdup("");
    for (int i = 0; items[i]; i++) {
        char *n = nb_strdup_printf("%s%s%s", s, i ? " or " : "", items[i]);
        free(s);
        s = n;
    }
    return s;
}

json_t *nb_volume_lookup(struct nb_ctx *ctx, const char *volume_id)
{
    return nb_vol_load(ctx, volume_id);
}

int nb_volume_transition(struct nb_ctx *ctx, const char *volume_id, enum nb_volume_op op)
{
    const struct transition *t = find(op);
    _cleanup_json_ json_t *vol = nb_vol_load(ctx, volume_id);
    if (!vol)
        return -1;
    int n = nb_vol_set_status(ctx, volume_id, t->to, t->from);
    if (n < 0)
        return -1;
    if (n == 0) {
        _cleanup_json_ json_t *now = nb_vol_load(ctx, volume_id);
        _cleanup_free_ char *allowed = nb_vol_or_str(t->from);
        return nb_error(ctx, 400, NULL,
                        "Invalid volume: Volume %s status must be %s, but current status is: "
                        "%s.",
                        volume_id, allowed, now ? nb_json_str(now, "status") : "deleted");
    }
    if (t->attach_status &&
        nb_db_exec(nb_vol_env->db, ctx, "UPDATE volumes SET attach_status = ? WHERE id = ?", "ss",
                   t->attach_status, volume_id) < 0)
        return -1;
    NB_INFO(NB_VOL_LOG, ctx, NULL, "Volume %s: %s, status %s", volume_id, t->name, t->to);
    return 0;
}

int nb_volume_attach(struct nb_ctx *ctx, const char *volume_id, const char *instance_uuid,
                     const char *host, const char *mountpoint, char *attachment_id)
{
    struct nb_db *db = nb_vol_env->db;
    char now[32];
    nb_now_iso_us(now);
    nb_uuid(attachment_id);
    /* what the attachments API shows; best effort (the attach itself is done) */
    struct nb_ctx aside = *ctx;
    aside.err_status = 0;
    _cleanup_json_ json_t *info = nb_volume_connection_info(&aside, volume_id);
    _cleanup_free_ char *info_text = info ? nb_json_dump(info) : NULL;
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    if (nb_volume_transition(ctx, volume_id, NB_VOLUME_ATTACHED) < 0 ||
        nb_db_exec(db, ctx,
                   "INSERT INTO volume_attachment (id, volume_id, instance_uuid, attached_host, "
                   "mountpoint, attach_time, attach_mode, attach_status, connection_info, "
                   "created_at, deleted) VALUES (?, ?, ?, ?, ?, ?, 'rw', 'attached', ?, ?, 0)",
                   "ssssssss", attachment_id, volume_id, instance_uuid, host, mountpoint, now,
                   info_text, now) < 0) {
        nb_db_rollback(db);
        return -1;
    }
    return nb_db_commit(db, ctx);
}

int nb_volume_detach(struct nb_ctx *ctx, const char *volume_id, const char *attachment_id)
{
    struct nb_db *db = nb_vol_env->db;
    char now[32];
    nb_now_iso_us(now);
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    int n = nb_db_exec(db, ctx,
                       "UPDATE volume_attachment SET attach_status = 'detached', detach_time = ?, "
                       "deleted = 1, deleted_at = ? WHERE id = ? AND volume_id = ? AND deleted = 0",
                       "ssss", now, now, attachment_id, volume_id);
    if (n == 0)
        nb_error(ctx, 404, NULL, "Volume attachment %s could not be found.", attachment_id);
    if (n <= 0) {
        nb_db_rollback(db);
        return -1;
    }
    long long left = nb_db_int(db, ctx, 0,
                               "SELECT COUNT(*) FROM volume_attachment WHERE volume_id = ? AND "
                               "deleted = 0 AND attach_status = 'attached'",
                               "s", volume_id);
    int rc = nb_volume_transition(ctx, volume_id,
                                  left > 0 ? NB_VOLUME_ROLL_DETACHING : NB_VOLUME_DETACHED);
    if (rc < 0) {
        nb_db_rollback(db);
        return -1;
    }
    return nb_db_commit(db, ctx);
}

json_t *nb_volume_connection_info(struct nb_ctx *ctx, const char *volume_id)
{
    _cleanup_json_ json_t *vol = nb_vol_load(ctx, volume_id);
    if (!vol)
        return NULL;
    const char *share = nb_json_str(vol, "provider_location");
    if (!share) {
        nb_error(ctx, 400, NULL, "Invalid volume: Volume %s has no provider location.", volume_id);
        return NULL;
    }
    char active[128], path[PATH_MAX + 128], fmt[16];
    if (nb_vol_active_file(ctx, volume_id, active, sizeof(active)) < 0)
        return NULL;
    nb_vol_file_path(share, active, path, sizeof(path));
    if (nb_vol_detect_format(ctx, path, fmt) < 0)
        return NULL;
    /* read-only when the readonly flag (os-update_readonly_flag) is set, as
     * Cinder's initialize_connection says it */
    _cleanup_json_ json_t *am =
        nb_vol_metadata_of(ctx, "volume_admin_metadata", "volume_id", volume_id);
    const char *ro = nb_json_str(am, "readonly");
    const char *mode = ro && strcmp(ro, "True") == 0 ? "ro" : "rw";
    /* mount_point_base sits beside data, as the NFS driver returns it */
    return json_pack("{s:s, s:{s:s, s:s, s:s, s:n, s:s, s:b, s:n}, s:s}", "driver_volume_type",
                     "nfs", "data", "export", share, "name", active, "format", fmt, "options",
                     "access_mode", mode, "encrypted", 0, "qos_specs", "mount_point_base",
                     nb_vol_mount_base());
}
