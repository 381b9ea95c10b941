/* volume_moves.c - the volumes of a server follow it between hosts (Nova's
 * pre_live_migration / post_live_migration / rollback_live_migration
 * attachment handling, _terminate_volume_connections and
 * _update_volume_attachments of resize, finish and revert, and the
 * evacuation's re-attach).
 *
 * A move is two steps, so that the source keeps its connection until the
 * guest has left it:
 *   cond_volumes_attach_to(host): every volume mapping points at an
 *     attachment record of its volume for host (the one already there, or
 *     a new one connected with host's connector) and holds fresh
 *     connection_info from the volume service;
 *   cond_volumes_release_others: every other live record of the volume
 *     to the instance ends (the old host's).
 * Both are idempotent, so a retry or the start-up recovery may run them
 * again. A live migration attaches for the destination before the source
 * starts it and releases the source after it; a rollback attaches back to
 * the source and releases the destination. A cold migration or resize
 * moves both at finish_resize (before the guest starts there: the
 * destination's disk-format check then sees the new connection_info) and
 * back at revert. The mapping's columns change in nb_bdm_set_attachment,
 * the attachment records in the volume service. When the fresh
 * connection_info declares another format than the mapping did, the file
 * changed format behind nubo's back: recorded as reconcile_disk_format
 * records it (the volume's format, a WARNING, the action event). */
#include "common/cleanup.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "compute/bdm.h"
#include "compute/conductor/internal.h"
#include "compute/objects/block_device.h"
#include "volume/volume.h"

#include <stdio.h>
#include <string.h>

/* The instance's live volume mappings (new array), or NULL on error. */
static json_t *volume_bdms(struct conductor *c, struct nb_ctx *ctx, const char *uuid)
{
    _cleanup_json_ json_t *rows = nb_bdm_rows(c->db, ctx, uuid);
    if (!rows)
        return NULL;
    json_t *out = json_array();
    size_t i;
    json_t *b;
    json_array_foreach (rows, i, b)
        if (nb_bdm_is_volume(b) && nb_json_str(b, "volume_id"))
            json_array_append(out, b);
    return out;
}

/* The id of the volume's live record in list for host, or NULL. */
static const char *record_on(const json_t *list, const char *host)
{
    size_t i;
    json_t *r;
    json_array_foreach (list, i, r) {
        const char *h = nb_json_str(r, "attached_host");
        if (h && !strcmp(h, host) && !strcmp(nb_json_str(r, "attach_status"), "attached"))
            return nb_json_str(r, "id");
    }
    return NULL;
}

/* The declared format changed between the mapping's old connection_info
 * and the fresh one: the volume's record follows, a WARNING and the event
 * say so (best-effort: logged). */
static void format_changed(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                           const char *vid, const char *old_fmt, const char *new_fmt,
                           const char *host)
{
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    if (nb_volume_set_format(c->db, &sub, vid, new_fmt) < 0)
        NB_ERROR(LOG_COND, ctx, uuid, "could not record format %s of volume %s: %s", new_fmt, vid,
                 nb_ctx_message(&sub));
    NB_WARN(LOG_COND, ctx, uuid,
            "Disk format of volume %s of instance %s is %s in the database but %s on disk; "
            "corrected with the connection info for host %s",
            vid, uuid, old_fmt, new_fmt, host);
    char details[600];
    snprintf(details, sizeof(details),
             "Volume %s: %s in the database, %s on disk (connection info for host %s)", vid,
             old_fmt, new_fmt, host);
    cond_event_start(c, ctx, uuid, EV_RECONCILE, host);
    cond_event_finish(c, ctx, uuid, EV_RECONCILE, true, details);
}

/* One mapping pointed at a record for host with fresh connection_info.
 * 0/-1 with the reason on ctx. */
static int attach_one(struct conductor *c, struct nb_ctx *ctx, const char *uuid, const char *host,
                      const json_t *bdm)
{
    const char *vid = nb_json_str(bdm, "volume_id");
    const char *cur = nb_json_str(bdm, "attachment_id");
    _cleanup_json_ json_t *list = nb_volume_attachments_for(ctx, vid, uuid);
    if (!list)
        return -1;
    const char *there = record_on(list, host);
    if (there && cur && !strcmp(there, cur))
        return 0; /* already attached for host */
    char att[NB_UUID_LEN] = "";
    if (there)
        nb_strlcpy(att, there, sizeof(att));
    else if (nb_volume_attachment_create_for(ctx, vid, uuid, host, nb_json_str(bdm, "device_name"),
                                             att) < 0)
        return -1;
    _cleanup_json_ json_t *ci = nb_volume_connection_info(ctx, vid);
    _cleanup_free_ char *text = ci ? nb_json_dump(ci) : NULL;
    if (!text || nb_bdm_set_attachment(c->db, ctx, nb_json_int(bdm, "id", 0), att, text) < 0)
        return -1;
    _cleanup_json_ json_t *old = nb_bdm_connection_info(bdm);
    const char *old_fmt = old ? nb_bdm_declared_format(old) : NULL;
    const char *new_fmt = nb_bdm_declared_format(ci);
    if (old_fmt && new_fmt && strcmp(old_fmt, new_fmt))
        format_changed(c, ctx, uuid, vid, old_fmt, new_fmt, host);
    NB_INFO(LOG_COND, ctx, uuid, "Volume %s attached for host %s (attachment %s)", vid, host, att);
    return 0;
}

int cond_volumes_attach_to(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                           const char *host)
{
    _cleanup_json_ json_t *bdms = volume_bdms(c, ctx, uuid);
    if (!bdms)
        return -1;
    size_t i;
    json_t *b;
    json_array_foreach (bdms, i, b)
        if (attach_one(c, ctx, uuid, host, b) < 0)
            return -1;
    return 0;
}

int cond_volumes_release_others(struct conductor *c, struct nb_ctx *ctx, const char *uuid)
{
    _cleanup_json_ json_t *bdms = volume_bdms(c, ctx, uuid);
    if (!bdms)
        return -1;
    size_t i, k;
    json_t *b, *r;
    json_array_foreach (bdms, i, b) {
        const char *vid = nb_json_str(b, "volume_id");
        const char *cur = nb_json_str(b, "attachment_id");
        _cleanup_json_ json_t *list = nb_volume_attachments_for(ctx, vid, uuid);
        if (!list)
            return -1;
        json_array_foreach (list, k, r) {
            const char *id = nb_json_str(r, "id");
            if (cur && !strcmp(id, cur))
                continue;
            if (nb_volume_attachment_delete_for(ctx, vid, id) < 0)
                return -1;
            NB_INFO(LOG_COND, ctx, uuid, "Volume %s: attachment %s of host %s deleted", vid, id,
                    nb_json_str(r, "attached_host") ? nb_json_str(r, "attached_host") : "?");
        }
    }
    return 0;
}

int cond_volumes_move(struct conductor *c, struct nb_ctx *ctx, const char *uuid, const char *host)
{
    return cond_volumes_attach_to(c, ctx, uuid, host) < 0
               ? -1
               : cond_volumes_release_others(c, ctx, uuid);
}
