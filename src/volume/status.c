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

/* Applies op if the volume is in one of the statuses it is allowed from:
 * 1 applied, 0 not allowed (nothing recorded), -1 after nb_error. */
static int transition_try(struct nb_ctx *ctx, const char *volume_id, enum nb_volume_op op)
{
    const struct transition *t = find(op);
    int n = nb_vol_set_status(ctx, volume_id, t->to, t->from);
    if (n <= 0)
        return n;
    if (t->attach_status &&
        nb_db_exec(nb_vol_env->db, ctx, "UPDATE volumes SET attach_status = ? WHERE id = ?", "ss",
                   t->attach_status, volume_id) < 0)
        return -1;
    NB_INFO(NB_VOL_LOG, ctx, NULL, "Volume %s: %s, status %s", volume_id, t->name, t->to);
    return 1;
}

int nb_volume_transition(struct nb_ctx *ctx, const char *volume_id, enum nb_volume_op op)
{
    const struct transition *t = find(op);
    _cleanup_json_ json_t *vol = nb_vol_load(ctx, volume_id);
    if (!vol)
        return -1;
    int n = transition_try(ctx, volume_id, op);
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
    return 0;
}

int nb_vol_status_path(const char *from, const char *to, enum nb_volume_op *ops, int max)
{
    /* breadth-first over the statuses of the table; at most one node per
     * transition target plus the start */
    enum { NMAX = NTRANSITIONS + 1 };
    const char *node[NMAX] = {from};
    int prev[NMAX] = {-1}, via[NMAX] = {0}, count = 1;
    for (int head = 0; head < count; head++) {
        if (strcmp(node[head], to) == 0) {
            int len = 0;
            for (int i = head; prev[i] >= 0; i = prev[i])
                len++;
            if (len > max)
                return -1;
            for (int i = head, k = len; prev[i] >= 0; i = prev[i])
                ops[--k] = transitions[via[i]].op;
            return len;
        }
        for (size_t t = 0; t < NTRANSITIONS; t++) {
            const char *next = nb_volume_next_status(node[head], transitions[t].op);
            bool seen = !next;
            for (int i = 0; i < count && !seen; i++)
                seen = strcmp(node[i], next) == 0;
            if (seen || count == NMAX)
                continue;
            node[count] = next;
            prev[count] = head;
            via[count++] = (int)t;
        }
    }
    return -1;
}

/* Cinder's _get_statuses_from_attachments: the volume's attach_status is
 * the first, alphabetically, of its live attachments' statuses, errors
 * aside (attached < attaching < detaching < reserved), or detached; its
 * status is that, with attached read as in-use and detached as available. */
static int statuses_from_attachments(struct nb_ctx *ctx, const char *volume_id, char *status,
                                     char *attach_status, size_t n)
{
    _cleanup_json_ json_t *row =
        nb_db_row(nb_vol_env->db, ctx,
                  "SELECT attach_status FROM volume_attachment WHERE volume_id = ? AND deleted = "
                  "0 AND substr(attach_status, 1, 6) != 'error_' ORDER BY attach_status LIMIT 1",
                  "s", volume_id);
    if (!row && nb_ctx_failed(ctx))
        return -1;
    const char *as =
        row && nb_json_str(row, "attach_status") ? nb_json_str(row, "attach_status") : "detached";
    nb_strlcpy(attach_status, as, n);
    nb_strlcpy(status,
               !strcmp(as, "attached")   ? "in-use"
               : !strcmp(as, "detached") ? "available"
                                         : as,
               n);
    return 0;
}

int nb_vol_settle(struct nb_ctx *ctx, const char *volume_id, bool override)
{
    char want[32], attach_status[32];
    _cleanup_json_ json_t *vol = nb_vol_load(ctx, volume_id);
    if (!vol || statuses_from_attachments(ctx, volume_id, want, attach_status, sizeof(want)) < 0)
        return -1;
    const char *status = nb_json_str(vol, "status");
    enum nb_volume_op ops[NTRANSITIONS];
    int n = nb_vol_status_path(status, want, ops, (int)NTRANSITIONS);
    if (n < 0 && override) {
        /* Cinder's volume_detached: the records decide, whatever the status */
        NB_WARN(NB_VOL_LOG, ctx, NULL, "Volume %s was %s; its attachments say %s", volume_id,
                status, want);
        if (nb_vol_set_status(ctx, volume_id, want, NULL) < 0)
            return -1;
        n = 0;
    }
    if (n < 0) {
        /* outside the attach machine (error, maintenance, ...): an operator's
         * state, which the attachment bookkeeping does not override */
        NB_WARN(NB_VOL_LOG, ctx, NULL, "Volume %s is %s; its attachments say %s; left as it is",
                volume_id, status, want);
        return 0;
    }
    for (int i = 0; i < n; i++)
        if (nb_volume_transition(ctx, volume_id, ops[i]) < 0)
            return -1;
    return nb_db_exec(nb_vol_env->db, ctx, "UPDATE volumes SET attach_status = ? WHERE id = ?",
                      "ss", attach_status, volume_id) < 0
               ? -1
               : 0;
}

int nb_volume_attach(struct nb_ctx *ctx, const char *volume_id, const char *instance_uuid,
                     const char *host, const char *mountpoint, char *attachment_id)
{
    struct nb_db *db = nb_vol_env->db;
    char now[32];
    nb_now_iso_us(now);
    nb_uuid(attachment_id);
    /* what the attachments API shows; best effort (the attach itself is done) */
    struct nb_ctx aside;
    nb_ctx_child(&aside, ctx);
    _cleanup_json_ json_t *info = nb_vol_attachment_info(&aside, volume_id, attachment_id);
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

/* Cinder's finish_detach: the attachment is marked detached (and deleted),
 * then the volume settles on what its other attachments say. With
 * detaching_only (the conductor's detach, which begins with
 * begin_detaching), a volume in another status is refused with the
 * detached transition's message and nothing changes. */
static int finish_detach(struct nb_ctx *ctx, const char *volume_id, const char *attachment_id,
                         bool detaching_only)
{
    struct nb_db *db = nb_vol_env->db;
    char now[32];
    nb_now_iso_us(now);
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    int n = 1;
    if (detaching_only) {
        _cleanup_json_ json_t *vol = nb_vol_load(ctx, volume_id);
        const char *status = vol ? nb_json_str(vol, "status") : NULL;
        if (!vol)
            n = -1;
        else if (!nb_volume_next_status(status, NB_VOLUME_DETACHED))
            n = nb_error(ctx, 400, NULL,
                         "Invalid volume: Volume %s status must be detaching, but current "
                         "status is: %s.",
                         volume_id, status);
    }
    if (n > 0)
        n = nb_db_exec(db, ctx,
                       "UPDATE volume_attachment SET attach_status = 'detached', detach_time = ?, "
                       "deleted = 1, deleted_at = ? WHERE id = ? AND volume_id = ? AND deleted = 0",
                       "ssss", now, now, attachment_id, volume_id);
    if (n == 0)
        nb_error(ctx, 404, NULL, "Volume attachment %s could not be found.", attachment_id);
    if (n <= 0 || nb_vol_settle(ctx, volume_id, !detaching_only) < 0) {
        nb_db_rollback(db);
        return -1;
    }
    return nb_db_commit(db, ctx);
}

int nb_volume_detach(struct nb_ctx *ctx, const char *volume_id, const char *attachment_id)
{
    return finish_detach(ctx, volume_id, attachment_id, true);
}

int nb_vol_attachment_delete(struct nb_ctx *ctx, const char *volume_id, const char *attachment_id)
{
    return finish_detach(ctx, volume_id, attachment_id, false);
}

json_t *nb_vol_attachment_info(struct nb_ctx *ctx, const char *volume_id, const char *attachment_id)
{
    json_t *info = nb_volume_connection_info(ctx, volume_id);
    if (!info)
        return NULL;
    json_t *flat = json_deep_copy(json_object_get(info, "data"));
    json_object_del(info, "data");
    json_object_update(flat, info);
    json_decref(info);
    json_object_set_new(flat, "attachment_id", json_string(attachment_id));
    return flat;
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
