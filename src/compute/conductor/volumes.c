/* volumes.c - the volumes of an instance, as Nova's compute manager and
 * nova/virt/block_device.py handle them: the build's block_device_mapping
 * step, attach and detach of a running server's volumes, their cleanup when
 * the server goes, and the disk-format reconciliation the agents ask for.
 *
 * A volume mapping is attached when its row carries connection_info (the NFS
 * connector's JSON text, from the volume service) and attachment_id (the
 * volume's attachment record); the volume is then in-use. The volume side
 * moves through the volume service's status machine (volume.h): each step is
 * its conditional update, made before the next is announced. The conductor
 * writes the mapping rows; the agent only plugs and unplugs. */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "compute/bdm.h"
#include "compute/compute.h"
#include "compute/conductor/internal.h"
#include "compute/objects/instance.h"
#include "compute/rpc/compute_api.h"
#include "db/db.h"
#include "volume/volume.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *str_or(const char *s, const char *def)
{
    return s ? s : def;
}

/* The live mappings of the instance (boot disk first). New ref, or NULL. */
static json_t *live_bdms(struct conductor *c, struct nb_ctx *ctx, const char *uuid)
{
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    return nb_db_rows(c->db, &sub,
                      "SELECT * FROM block_device_mapping WHERE instance_uuid = ? AND "
                      "deleted = 0 ORDER BY boot_index IS NULL, boot_index, id",
                      "s", uuid);
}

/* The mappings whose volumes a cleanup must let go: the live ones, and
 * deleted ones still holding an attachment (deleted by a delete that ran
 * while the build was attaching them). New ref, or NULL. */
static json_t *bdms_to_release(struct conductor *c, struct nb_ctx *ctx, const char *uuid)
{
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    return nb_db_rows(c->db, &sub,
                      "SELECT * FROM block_device_mapping WHERE instance_uuid = ? AND "
                      "(deleted = 0 OR attachment_id IS NOT NULL) AND destination_type = "
                      "'volume' AND volume_id IS NOT NULL ORDER BY id",
                      "s", uuid);
}

/* One live mapping of the instance by its uuid. New ref, or NULL. */
static json_t *bdm_by_uuid(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                           const char *bdm_uuid)
{
    if (!uuid || !bdm_uuid)
        return NULL;
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    return nb_db_row(c->db, &sub,
                     "SELECT * FROM block_device_mapping WHERE uuid = ? AND "
                     "instance_uuid = ? AND deleted = 0",
                     "ss", bdm_uuid, uuid);
}

/* The volume's status ("" when it is gone or not visible). */
static void volume_status(struct nb_ctx *ctx, const char *volume_id, char *out, size_t n)
{
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    _cleanup_json_ json_t *vol = nb_volume_lookup(&sub, volume_id);
    nb_strlcpy(out, str_or(nb_json_str(vol, "status"), ""), n);
}

/* Applies a volume transition whose failure must not stop the caller (a
 * rollback, a cleanup): logged as a WARNING. */
static void transition_quietly(struct nb_ctx *ctx, const char *uuid, const char *volume_id,
                               enum nb_volume_op op)
{
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    if (nb_volume_transition(&sub, volume_id, op) < 0)
        NB_WARN(LOG_COND, ctx, uuid, "Volume %s: %s failed: %s", volume_id, nb_volume_op_name(op),
                nb_ctx_message(&sub));
}

/* ---- device names -------------------------------------------------------- */

static bool target_used(json_t *bdms, const char *target)
{
    size_t i;
    json_t *b;
    json_array_foreach (bdms, i, b) {
        char t[64];
        nb_bdm_target(b, t, sizeof(t));
        if (!strcmp(t, target))
            return true;
    }
    return false;
}

/* Names the devices Nova's _add_missing_dev_names would: the boot disk is
 * /dev/vda, every other volume keeps its requested name or gets the next
 * free /dev/vdX. Writes the new names into the rows of bdms (and the
 * database). 0/-1. */
static int name_devices(struct conductor *c, struct nb_ctx *ctx, json_t *bdms)
{
    size_t i;
    json_t *b;
    json_array_foreach (bdms, i, b) {
        char t[64];
        nb_bdm_target(b, t, sizeof(t));
        const char *want = NULL;
        char buf[32];
        if (nb_bdm_is_boot(b)) {
            if (strcmp(t, "vda") != 0)
                want = "/dev/vda";
        } else if (nb_bdm_is_volume(b) && !t[0]) {
            for (char l = 'b'; l <= 'z' && !want; l++) {
                snprintf(buf, sizeof(buf), "vd%c", l);
                if (!target_used(bdms, buf)) {
                    snprintf(buf, sizeof(buf), "/dev/vd%c", l);
                    want = buf;
                }
            }
            if (!want)
                return nb_error(ctx, 400, NULL, "No free device name left for volume %s.",
                                str_or(nb_json_str(b, "volume_id"), "(new)"));
        }
        if (!want)
            continue;
        if (nb_db_exec(c->db, ctx, "UPDATE block_device_mapping SET device_name = ? WHERE id = ?",
                       "si", want, nb_json_int(b, "id", 0)) < 0)
            return -1;
        json_object_set_new(b, "device_name", json_string(want));
    }
    return 0;
}

/* ---- volume creation (source image / snapshot / blank) -------------------- */

/* Creates the volume a mapping with source image, snapshot or blank asks
 * for (Nova's DriverImageBlockDevice / DriverSnapshotBlockDevice /
 * DriverBlankBlockDevice; the volume service creates it synchronously) and
 * stores its id in the row (and in bdm). 0/-1. */
static int create_volume(struct conductor *c, struct nb_ctx *ctx, const char *uuid, json_t *bdm)
{
    const char *src = str_or(nb_json_str(bdm, "source_type"), "");
    _cleanup_json_ json_t *req = json_object();
    json_t *size = json_object_get(bdm, "volume_size");
    if (json_is_integer(size))
        json_object_set(req, "size", size);
    if (!strcmp(src, "image")) {
        json_object_set_new(req, "imageRef", json_string(str_or(nb_json_str(bdm, "image_id"), "")));
        json_object_set_new(req, "name", json_string(""));
    } else if (!strcmp(src, "snapshot")) {
        json_object_set_new(req, "snapshot_id",
                            json_string(str_or(nb_json_str(bdm, "snapshot_id"), "")));
        json_object_set_new(req, "name", json_string(""));
    } else if (!strcmp(src, "blank")) {
        char name[64];
        snprintf(name, sizeof(name), "%s-blank-vol", uuid);
        json_object_set_new(req, "name", json_string(name));
    } else {
        return nb_error(ctx, 400, NULL,
                        "Block Device Mapping is Invalid: source type %s has no "
                        "volume to attach.",
                        src);
    }
    /* Nova passes the instance's zone only when cross-zone attach is off */
    if (!nb_conf_bool("cinder", "cross_az_attach", true)) {
        _cleanup_json_ json_t *row = cond_instance_get(c, ctx, uuid);
        if (nb_json_str(row, "availability_zone"))
            json_object_set_new(req, "availability_zone",
                                json_string(nb_json_str(row, "availability_zone")));
    }
    char vid[NB_UUID_LEN] = "";
    int rc = nb_volume_create_for(ctx, req, vid);
    if (!vid[0])
        return -1; /* refused before the volume existed */
    /* the id is stored even when the volume ended in error, so the cleanup
     * finds it (delete_on_termination) */
    char now[32];
    nb_now_iso_us(now);
    struct nb_ctx sub; /* runs even after a failed create, whose error stays ctx's */
    nb_ctx_child(&sub, ctx);
    if (nb_db_exec(c->db, &sub,
                   "UPDATE block_device_mapping SET volume_id = ?, updated_at = ? WHERE id = ?",
                   "ssi", vid, now, nb_json_int(bdm, "id", 0)) < 0 &&
        rc == 0)
        return nb_ctx_forward_error(ctx, &sub);
    json_object_set_new(bdm, "volume_id", json_string(vid));
    if (rc == 0)
        NB_INFO(LOG_COND, ctx, uuid, "Created volume %s (source %s) for the instance", vid, src);
    return rc;
}

/* ---- attach ------------------------------------------------------------- */

/* First half of an attach: the volume to attaching (from reserved or
 * available) and its connection_info into the mapping. 0/-1; on -1 the
 * volume is back where it was. */
static int begin_attach(struct conductor *c, struct nb_ctx *ctx, const char *uuid, json_t *bdm)
{
    const char *vid = nb_json_str(bdm, "volume_id");
    if (nb_volume_transition(ctx, vid, NB_VOLUME_BEGIN_ATTACH) < 0)
        return -1;
    _cleanup_json_ json_t *ci = nb_volume_connection_info(ctx, vid);
    _cleanup_free_ char *text = ci ? nb_json_dump(ci) : NULL;
    char now[32];
    nb_now_iso_us(now);
    if (!text || nb_db_exec(c->db, ctx,
                            "UPDATE block_device_mapping SET connection_info = ?, updated_at = ? "
                            "WHERE id = ?",
                            "ssi", text, now, nb_json_int(bdm, "id", 0)) < 0) {
        transition_quietly(ctx, uuid, vid, NB_VOLUME_ATTACH_FAILED); /* leaves ctx's error */
        return nb_error(ctx, 500, NULL, "Volume %s has no connection info.", vid);
    }
    json_object_set_new(bdm, "connection_info", json_string(text));
    return 0;
}

/* Second half: the volume in-use with an attachment record (host,
 * mountpoint = device name), whose id goes into the mapping. On -1 the
 * volume is back to available. */
static int complete_attach(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                           const char *host, json_t *bdm)
{
    const char *vid = nb_json_str(bdm, "volume_id");
    char att[NB_UUID_LEN] = "";
    if (nb_volume_attach(ctx, vid, uuid, host, nb_json_str(bdm, "device_name"), att) < 0) {
        transition_quietly(ctx, uuid, vid, NB_VOLUME_ATTACH_FAILED); /* leaves ctx's error */
        return nb_error(ctx, 500, NULL, "Volume %s could not be attached.", vid);
    }
    char now[32];
    nb_now_iso_us(now);
    if (nb_db_exec(c->db, ctx,
                   "UPDATE block_device_mapping SET attachment_id = ?, updated_at = ? WHERE id = ?",
                   "ssi", att, now, nb_json_int(bdm, "id", 0)) < 0)
        return -1;
    json_object_set_new(bdm, "attachment_id", json_string(att));
    NB_INFO(LOG_COND, ctx, uuid, "Volume %s attached at %s (attachment %s)", vid,
            str_or(nb_json_str(bdm, "device_name"), "?"), att);
    return 0;
}

int cond_prep_block_devices(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                            const char *host, char *msg, size_t n)
{
    _cleanup_json_ json_t *bdms = live_bdms(c, ctx, uuid);
    int rc = -1;
    if (!bdms) {
        nb_error(ctx, 500, NULL, "Could not read the block device mappings.");
        goto out;
    }
    if (name_devices(c, ctx, bdms) < 0)
        goto out;
    size_t i;
    json_t *b;
    json_array_foreach (bdms, i, b) {
        if (!nb_bdm_is_volume(b) || nb_json_str(b, "attachment_id"))
            continue; /* local disk, or attached by an earlier attempt */
        if (!nb_json_str(b, "volume_id") && create_volume(c, ctx, uuid, b) < 0)
            goto out;
        if (begin_attach(c, ctx, uuid, b) < 0 || complete_attach(c, ctx, uuid, host, b) < 0)
            goto out;
    }
    if (nb_instance_default_root_device(c->db, ctx, uuid, "/dev/vda") < 0)
        goto out;
    rc = 0;
out:
    if (rc < 0) {
        snprintf(msg, n, "%s",
                 nb_ctx_failed(ctx) ? nb_ctx_message(ctx) : "Failure prepping block device.");
        nb_ctx_clear_error(ctx); /* handled: the caller aborts the build with msg */
        NB_ERROR(LOG_COND, ctx, uuid, "Instance failed block device setup: %s", msg);
    }
    return rc;
}

/* ---- cleanup (delete, aborted build) ------------------------------------- */

/* Lets go of one mapping's volume: detached from this instance if it is
 * attached to it, back to available if it was only reserved for it. The
 * mapping keeps its volume_id but loses connection_info and attachment_id,
 * so a second cleanup does not touch the volume again. */
static void release_volume(struct conductor *c, struct nb_ctx *ctx, const char *uuid, json_t *b)
{
    const char *vid = nb_json_str(b, "volume_id");
    const char *att = nb_json_str(b, "attachment_id");
    char status[32];
    volume_status(ctx, vid, status, sizeof(status));
    if (att && (!strcmp(status, "in-use") || !strcmp(status, "detaching"))) {
        if (!strcmp(status, "in-use"))
            transition_quietly(ctx, uuid, vid, NB_VOLUME_BEGIN_DETACH);
        struct nb_ctx sub;
        nb_ctx_child(&sub, ctx);
        if (nb_volume_detach(&sub, vid, att) < 0) {
            NB_WARN(LOG_COND, ctx, uuid, "Failed to detach volume: %s due to %s", vid,
                    nb_ctx_message(&sub));
            transition_quietly(ctx, uuid, vid, NB_VOLUME_ROLL_DETACHING);
            return;
        }
        NB_INFO(LOG_COND, ctx, uuid, "Volume %s detached", vid);
    } else if (!att && !strcmp(status, "attaching")) {
        transition_quietly(ctx, uuid, vid, NB_VOLUME_ATTACH_FAILED);
    } else if (!att && !strcmp(status, "reserved")) {
        transition_quietly(ctx, uuid, vid, NB_VOLUME_UNRESERVE);
    }
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    nb_db_exec(c->db, &sub,
               "UPDATE block_device_mapping SET connection_info = NULL, attachment_id = NULL "
               "WHERE id = ?",
               "i", nb_json_int(b, "id", 0));
}

void cond_cleanup_volumes(struct conductor *c, struct nb_ctx *ctx, const char *uuid)
{
    _cleanup_json_ json_t *bdms = bdms_to_release(c, ctx, uuid);
    size_t i;
    json_t *b;
    json_array_foreach (bdms, i, b) {
        const char *vid = nb_json_str(b, "volume_id");
        release_volume(c, ctx, uuid, b);
        if (nb_json_int(b, "delete_on_termination", 0) == 0)
            continue;
        struct nb_ctx sub; /* a cleanup: each step best-effort */
        nb_ctx_child(&sub, ctx);
        if (nb_volume_delete_for(&sub, vid) < 0) {
            NB_WARN(LOG_COND, ctx, uuid, "Failed to delete volume: %s due to %s", vid,
                    nb_ctx_message(&sub));
            continue;
        }
        char now[32];
        nb_now_iso_us(now);
        nb_db_exec(c->db, &sub,
                   "UPDATE block_device_mapping SET deleted = id, deleted_at = COALESCE("
                   "deleted_at, ?) WHERE id = ?",
                   "si", now, nb_json_int(b, "id", 0));
        NB_INFO(LOG_COND, ctx, uuid, "Volume %s deleted (delete_on_termination)", vid);
    }
}

/* ---- attach_volume / detach_volume of a built server --------------------- */

/* Ends a failed attach as Nova's attach_volume does: the mapping is
 * destroyed, the volume goes back to available, a fault (wrap_instance_
 * fault) and the event's Error record the message. */
static void attach_failed(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                          const char *bdm_uuid, const char *vid, const char *host,
                          const char *message)
{
    char now[32], status[32];
    nb_now_iso_us(now);
    struct nb_ctx sub; /* best-effort: the attach has failed already */
    nb_ctx_child(&sub, ctx);
    nb_db_exec(c->db, &sub,
               "UPDATE block_device_mapping SET deleted = id, deleted_at = ? WHERE uuid = ? AND "
               "instance_uuid = ? AND deleted = 0",
               "sss", now, bdm_uuid, uuid);
    if (vid) {
        volume_status(ctx, vid, status, sizeof(status));
        if (!strcmp(status, "attaching"))
            transition_quietly(ctx, uuid, vid, NB_VOLUME_ATTACH_FAILED);
        else if (!strcmp(status, "reserved"))
            transition_quietly(ctx, uuid, vid, NB_VOLUME_UNRESERVE);
    }
    cond_fault(c, ctx, uuid, 500, message, message, host);
    cond_event_finish(c, ctx, uuid, EV_ATTACH, false, message);
    cond_action_finish(c, ctx, uuid, "Error");
    NB_ERROR(LOG_COND, ctx, uuid, "Failed to attach volume %s: %s", str_or(vid, "?"), message);
}

void cond_attach_volume(struct conductor *c, struct nb_ctx *ctx, json_t *args)
{
    const char *uuid = nb_json_str(args, "uuid");
    const char *bdm_uuid = nb_json_str(args, "bdm_uuid");
    const char *vid = nb_json_str(args, "volume_id");
    _cleanup_json_ json_t *row = cond_instance_get(c, ctx, uuid);
    if (!row || !bdm_uuid || !vid || nb_json_int(row, "deleted", 0) != 0)
        return;
    const char *host = nb_json_str(row, "host");
    _cleanup_json_ json_t *bdm = bdm_by_uuid(c, ctx, uuid, bdm_uuid);
    if (bdm && nb_json_str(bdm, "connection_info")) {
        /* delivered twice (redelivered, or resent by an API that had no
         * confirm from the broker): the first one is attaching it */
        NB_INFO(LOG_COND, ctx, uuid,
                "attach_volume of volume %s delivered again: already attached, ignored", vid);
        return;
    }
    cond_action_start(c, ctx, uuid, "attach_volume");
    cond_event_start(c, ctx, uuid, EV_ATTACH, host);
    char msg[1100];
    if (!bdm || strcmp(str_or(nb_json_str(bdm, "volume_id"), ""), vid) != 0) {
        snprintf(msg, sizeof(msg), "Block device mapping %s of volume %s could not be found.",
                 bdm_uuid, vid);
        attach_failed(c, ctx, uuid, bdm_uuid, vid, host, msg);
        return;
    }
    if (!host) {
        snprintf(msg, sizeof(msg), "Instance %s is not on any host.", uuid);
        attach_failed(c, ctx, uuid, bdm_uuid, vid, host, msg);
        return;
    }
    if (begin_attach(c, ctx, uuid, bdm) < 0) {
        snprintf(msg, sizeof(msg), "%s", nb_ctx_message(ctx));
        nb_ctx_clear_error(ctx); /* handled: the attach fails with msg */
        attach_failed(c, ctx, uuid, bdm_uuid, vid, host, msg);
        return;
    }
    NB_INFO(LOG_COND, ctx, uuid, "Attaching volume %s to %s on host %s", vid,
            str_or(nb_json_str(bdm, "device_name"), "?"), host);
    json_t *inst = cond_instance_for_agent(c, ctx, row);
    if (nb_compute_attach_volume(ctx, host, inst, bdm) < 0) {
        snprintf(msg, sizeof(msg), "The compute service of host %s is not reachable.", host);
        attach_failed(c, ctx, uuid, bdm_uuid, vid, host, msg);
    }
}

void cond_recover_attaches(struct conductor *c, const struct cond_scope *s, struct nb_ctx *ctx,
                           long long max_bdm_id)
{
    _cleanup_json_ json_t *rows = nb_db_rows(
        c->db, ctx,
        "SELECT b.uuid AS bdm_uuid, b.instance_uuid, b.volume_id, b.connection_info, i.host, "
        "i.nubo_conductor FROM block_device_mapping b JOIN instances i ON i.uuid = "
        "b.instance_uuid WHERE b.deleted = 0 AND b.id <= ? AND b.destination_type = 'volume' "
        "AND b.volume_id IS NOT NULL AND b.attachment_id IS NULL AND i.deleted = 0 AND "
        "i.task_state IS NULL AND i.vm_state <> 'building' AND i.id <= ? ORDER BY b.id",
        "ii", max_bdm_id, s->max_id);
    nb_ctx_clear_error(ctx); /* a failed query: nothing to do this time */
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        const char *uuid = nb_json_str(r, "instance_uuid"), *vid = nb_json_str(r, "volume_id");
        if (!cond_scope_row(s, r))
            continue;
        char status[32];
        volume_status(ctx, vid, status, sizeof(status));
        struct nb_ctx actx;
        cond_ctx_for_action(c, &actx, uuid, "attach_volume");
        if (nb_json_str(r, "connection_info")) {
            if (!strcmp(status, "attaching"))
                NB_WARN(LOG_COND, &actx, uuid,
                        "Volume %s was being attached when nubo stopped; the agent of host %s "
                        "may have it: left attaching for its result",
                        vid, str_or(nb_json_str(r, "host"), "?"));
            continue;
        }
        if (strcmp(status, "reserved") != 0 && strcmp(status, "attaching") != 0)
            continue;
        /* acknowledged, but nothing reached the agent: as if it had failed.
         * The mapping goes first, only while still without connection_info
         * (an attach_volume waiting in the broker may begin meanwhile). */
        char now[32];
        nb_now_iso_us(now);
        if (nb_db_exec(c->db, &actx,
                       "UPDATE block_device_mapping SET deleted = id, deleted_at = ? WHERE uuid = "
                       "? AND deleted = 0 AND connection_info IS NULL",
                       "ss", now, nb_json_str(r, "bdm_uuid")) != 1) {
            nb_ctx_clear_error(&actx);
            continue;
        }
        NB_WARN(LOG_COND, &actx, uuid,
                "The attach of volume %s (%s) was interrupted before it began: undoing it", vid,
                status);
        cond_close_open_events(c, &actx, uuid);
        attach_failed(c, &actx, uuid, nb_json_str(r, "bdm_uuid"), vid, nb_json_str(r, "host"),
                      "Interrupted: nubo stopped before the volume was attached.");
    }
}

void cond_attach_result(struct conductor *c, struct nb_ctx *ctx, json_t *args)
{
    const char *uuid = nb_json_str(args, "uuid");
    const char *bdm_uuid = nb_json_str(args, "bdm_uuid");
    const char *vid = nb_json_str(args, "volume_id");
    const char *host = nb_json_str(args, "host");
    if (!uuid || !bdm_uuid)
        return;
    char msg[1100];
    if (!json_is_true(json_object_get(args, "ok"))) {
        attach_failed(c, ctx, uuid, bdm_uuid, vid, host,
                      str_or(nb_json_str(args, "message"), "The attach failed."));
        return;
    }
    _cleanup_json_ json_t *bdm = bdm_by_uuid(c, ctx, uuid, bdm_uuid);
    if (!bdm) {
        snprintf(msg, sizeof(msg),
                 "Block device mapping %s was removed while volume %s was being attached.",
                 bdm_uuid, str_or(vid, "?"));
        attach_failed(c, ctx, uuid, bdm_uuid, vid, host, msg);
        return;
    }
    if (complete_attach(c, ctx, uuid, host, bdm) < 0) {
        snprintf(msg, sizeof(msg), "%s", nb_ctx_message(ctx));
        nb_ctx_clear_error(ctx); /* handled: the attach fails with msg */
        attach_failed(c, ctx, uuid, bdm_uuid, vid, host, msg);
        return;
    }
    cond_event_finish(c, ctx, uuid, EV_ATTACH, true, NULL);
    cond_action_finish(c, ctx, uuid, NULL);
}

/* The volume is off the guest: attachment closed (volume available), the
 * mapping destroyed. 0/-1. */
static int complete_detach(struct conductor *c, struct nb_ctx *ctx, json_t *bdm)
{
    const char *vid = nb_json_str(bdm, "volume_id");
    const char *att = nb_json_str(bdm, "attachment_id");
    if (att ? nb_volume_detach(ctx, vid, att) < 0
            : nb_volume_transition(ctx, vid, NB_VOLUME_DETACHED) < 0)
        return -1;
    char now[32];
    nb_now_iso_us(now);
    /* the attachment is closed: a later cleanup must not look for it */
    return nb_db_exec(c->db, ctx,
                      "UPDATE block_device_mapping SET deleted = id, deleted_at = ?, "
                      "attachment_id = NULL WHERE id = ?",
                      "si", now, nb_json_int(bdm, "id", 0)) < 0
               ? -1
               : 0;
}

static void detach_failed(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                          const char *vid, const char *host, const char *message)
{
    if (vid)
        transition_quietly(ctx, uuid, vid, NB_VOLUME_ROLL_DETACHING);
    cond_fault(c, ctx, uuid, 500, message, message, host);
    cond_event_finish(c, ctx, uuid, EV_DETACH, false, message);
    cond_action_finish(c, ctx, uuid, "Error");
    NB_ERROR(LOG_COND, ctx, uuid, "Failed to detach volume %s: %s", str_or(vid, "?"), message);
}

static void detach_done(struct conductor *c, struct nb_ctx *ctx, const char *uuid, json_t *bdm,
                        const char *host)
{
    const char *vid = nb_json_str(bdm, "volume_id");
    if (complete_detach(c, ctx, bdm) < 0) {
        char msg[1100];
        snprintf(msg, sizeof(msg), "%s", nb_ctx_message(ctx));
        nb_ctx_clear_error(ctx); /* handled: the detach fails with msg */
        detach_failed(c, ctx, uuid, vid, host, msg);
        return;
    }
    cond_event_finish(c, ctx, uuid, EV_DETACH, true, NULL);
    cond_action_finish(c, ctx, uuid, NULL);
    NB_INFO(LOG_COND, ctx, uuid, "Volume %s detached", str_or(vid, "?"));
}

void cond_detach_volume(struct conductor *c, struct nb_ctx *ctx, json_t *args)
{
    const char *uuid = nb_json_str(args, "uuid");
    const char *vid = nb_json_str(args, "volume_id");
    _cleanup_json_ json_t *row = cond_instance_get(c, ctx, uuid);
    if (!row || !vid || nb_json_int(row, "deleted", 0) != 0)
        return;
    const char *host = nb_json_str(row, "host");
    _cleanup_json_ json_t *bdm = bdm_by_uuid(c, ctx, uuid, nb_json_str(args, "bdm_uuid"));
    char status[32];
    volume_status(ctx, vid, status, sizeof(status));
    if (!bdm && strcmp(status, "detaching") != 0) {
        /* delivered twice: the first one detached it */
        NB_INFO(LOG_COND, ctx, uuid,
                "detach_volume of volume %s delivered again: already detached, ignored", vid);
        return;
    }
    cond_action_start(c, ctx, uuid, "detach_volume");
    cond_event_start(c, ctx, uuid, EV_DETACH, host);
    if (!bdm || strcmp(str_or(nb_json_str(bdm, "volume_id"), ""), vid) != 0) {
        char msg[512];
        snprintf(msg, sizeof(msg), "Volume %s is not attached to instance %s.", vid, uuid);
        detach_failed(c, ctx, uuid, vid, host, msg);
        return;
    }
    if (!host || !nb_json_str(bdm, "connection_info")) {
        /* nothing plugged anywhere: only the records change */
        detach_done(c, ctx, uuid, bdm, host);
        return;
    }
    NB_INFO(LOG_COND, ctx, uuid, "Detaching volume %s from %s on host %s", vid,
            str_or(nb_json_str(bdm, "device_name"), "?"), host);
    json_t *inst = cond_instance_for_agent(c, ctx, row);
    if (nb_compute_detach_volume(ctx, host, inst, bdm) < 0) {
        char msg[512];
        snprintf(msg, sizeof(msg), "The compute service of host %s is not reachable.", host);
        detach_failed(c, ctx, uuid, vid, host, msg);
    }
}

void cond_detach_result(struct conductor *c, struct nb_ctx *ctx, json_t *args)
{
    const char *uuid = nb_json_str(args, "uuid");
    const char *vid = nb_json_str(args, "volume_id");
    const char *host = nb_json_str(args, "host");
    if (!uuid)
        return;
    if (!json_is_true(json_object_get(args, "ok"))) {
        detach_failed(c, ctx, uuid, vid, host,
                      str_or(nb_json_str(args, "message"), "The detach failed."));
        return;
    }
    _cleanup_json_ json_t *bdm = bdm_by_uuid(c, ctx, uuid, nb_json_str(args, "bdm_uuid"));
    if (!bdm) {
        /* the instance was deleted meanwhile: its cleanup released the volume */
        cond_event_finish(c, ctx, uuid, EV_DETACH, true, NULL);
        return;
    }
    detach_done(c, ctx, uuid, bdm, host);
}

/* ---- reconcile_disk_format ------------------------------------------------ */

/* Corrects connection_info.data.format of the mapping and the volume's
 * admin metadata in one transaction. Returns the new connection_info text
 * (caller frees), or NULL after nb_error. */
static char *correct_format(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                            const char *bdm_uuid, const char *vid, const char *new_format)
{
    char now[32];
    nb_now_iso_us(now);
    if (nb_db_begin(c->db, ctx) < 0)
        return NULL;
    _cleanup_json_ json_t *bdm = nb_db_row(c->db, ctx,
                                           "SELECT id, connection_info FROM block_device_mapping "
                                           "WHERE uuid = ? AND instance_uuid = ? AND volume_id = ? "
                                           "AND deleted = 0",
                                           "sss", bdm_uuid, uuid, vid);
    json_t *ci = bdm ? nb_bdm_connection_info(bdm) : NULL;
    char *text = NULL;
    if (!ci) {
        nb_error(ctx, 404, NULL, "Volume %s of instance %s has no connection info.", vid, uuid);
        goto fail;
    }
    json_t *data = json_object_get(ci, "data");
    if (!json_is_object(data))
        json_object_set_new(ci, "data", data = json_object());
    json_object_set_new(data, "format", json_string(new_format));
    text = nb_json_dump(ci);
    json_decref(ci);
    /* conditional on the text read, so a concurrent change is not lost */
    int n = nb_db_exec(c->db, ctx,
                       "UPDATE block_device_mapping SET connection_info = ?, updated_at = ? "
                       "WHERE id = ? AND connection_info = ?",
                       "ssis", text, now, nb_json_int(bdm, "id", 0),
                       nb_json_str(bdm, "connection_info"));
    if (n != 1) {
        if (n == 0)
            nb_error(ctx, 409, NULL, "The mapping of volume %s changed meanwhile.", vid);
        goto fail;
    }
    if (nb_volume_set_format(c->db, ctx, vid, new_format) < 0)
        goto fail;
    if (nb_db_commit(c->db, ctx) < 0) {
        free(text);
        return NULL;
    }
    return text;
fail:
    nb_db_rollback(c->db);
    free(text);
    return NULL;
}

json_t *cond_reconcile_disk_format(struct conductor *c, struct nb_ctx *ctx, json_t *args)
{
    const char *uuid = nb_json_str(args, "uuid");
    const char *bdm_uuid = nb_json_str(args, "bdm_uuid");
    const char *vid = nb_json_str(args, "volume_id");
    const char *path = str_or(nb_json_str(args, "path"), "?");
    const char *old_fmt = str_or(nb_json_str(args, "old_format"), "?");
    const char *new_fmt = nb_json_str(args, "new_format");
    const char *host = nb_json_str(args, "host");
    if (!uuid || !bdm_uuid || !vid || !new_fmt ||
        (strcmp(new_fmt, "raw") != 0 && strcmp(new_fmt, "qcow2") != 0))
        return json_pack("{s:b, s:s}", "ok", 0, "message",
                         "reconcile_disk_format needs uuid, bdm_uuid, volume_id and a "
                         "new_format of raw or qcow2");
    _cleanup_free_ char *text = correct_format(c, ctx, uuid, bdm_uuid, vid, new_fmt);
    if (!text) {
        char msg[1200];
        snprintf(msg, sizeof(msg), "Could not correct the disk format of volume %s: %s", vid,
                 nb_ctx_message(ctx));
        nb_ctx_clear_error(ctx); /* handled: the agent gets it in the reply */
        NB_ERROR(LOG_COND, ctx, uuid, "%s", msg);
        return json_pack("{s:b, s:s}", "ok", 0, "message", msg);
    }
    NB_WARN(LOG_COND, ctx, uuid,
            "Disk format of volume %s of instance %s is %s in the database but %s on disk (%s); "
            "corrected",
            vid, uuid, old_fmt, new_fmt, path);
    cond_event_start(c, ctx, uuid, EV_RECONCILE, host);
    char details[1200];
    snprintf(details, sizeof(details), "Volume %s: %s in the database, %s on disk (%s)", vid,
             old_fmt, new_fmt, path);
    cond_event_finish(c, ctx, uuid, EV_RECONCILE, true, details);
    return json_pack("{s:b, s:s}", "ok", 1, "connection_info", text);
}
