/* snapshot.c - createImage of an image-backed server, as Nova's
 * snapshot_instance: the API has created the image record (queued), set
 * task_state image_snapshot and started action "createImage"; here the
 * task state moves to image_pending_upload, event compute_snapshot_instance
 * starts and the host's agent copies the root disk and uploads it. Its
 * snapshot_result ends it: task state cleared, event finished; on failure
 * the image is deleted (Nova's delete_image_on_error), a fault recorded
 * (wrap_instance_fault) and the event ends in Error. */
#include "common/cleanup.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "compute/compute.h"
#include "compute/conductor/internal.h"
#include "compute/objects/instance.h"
#include "compute/rpc/compute_api.h"
#include "db/db.h"
#include "image/image.h"

#include <stdio.h>
#include <string.h>

/* Clears the snapshot's task state (when it is still the snapshot's). */
static int clear_task(struct conductor *c, struct nb_ctx *ctx, const char *uuid)
{
    int n = (int)nb_instance_transition(
        c->db, ctx, uuid,
        &(struct nb_instance_change){
            .expect_task = {NB_TASK_IMAGE_SNAPSHOT, NB_TASK_IMAGE_SNAPSHOT_PENDING,
                            NB_TASK_IMAGE_PENDING_UPLOAD, NB_TASK_IMAGE_UPLOADING},
            .task_state = NB_NONE,
        },
        NULL);
    nb_ctx_clear_error(ctx); /* a failed update counts as "not in a snapshot task" */
    return n;
}

static void snapshot_failed(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                            const char *image_id, const char *host, const char *message)
{
    struct nb_ctx sub; /* the clean-up is best-effort */
    nb_ctx_child(&sub, ctx);
    if (image_id && nb_image_delete(&sub, image_id) < 0)
        NB_WARN(LOG_COND, ctx, uuid, "Error while trying to clean up image %s: %s", image_id,
                nb_ctx_message(&sub));
    if (clear_task(c, ctx, uuid) == 1)
        cond_fault(c, ctx, uuid, 500, message, message, host);
    cond_event_finish(c, ctx, uuid, EV_SNAPSHOT, false, message);
    cond_action_finish(c, ctx, uuid, "Error");
    NB_ERROR(LOG_COND, ctx, uuid, "Snapshot of the instance to image %s failed: %s",
             image_id ? image_id : "?", message);
}

/* Whether the image is still the empty record the API created (queued):
 * no snapshot has been uploaded into it. */
static bool image_queued(struct nb_ctx *ctx, const char *image_id)
{
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    _cleanup_json_ json_t *img = nb_image_lookup(&sub, image_id);
    const char *st = nb_json_str(img, "status");
    return st && !strcmp(st, "queued");
}

void cond_snapshot_instance(struct conductor *c, struct nb_ctx *ctx, json_t *args)
{
    const char *uuid = nb_json_str(args, "uuid");
    const char *image_id = nb_json_str(args, "image_id");
    _cleanup_json_ json_t *row = cond_instance_get(c, ctx, uuid);
    if (!row || !image_id)
        return;
    const char *host = nb_json_str(row, "host");
    cond_action_start(c, ctx, uuid, "createImage");
    int n = (int)nb_instance_transition(
        c->db, ctx, uuid,
        &(struct nb_instance_change){
            .expect_task = {NB_TASK_IMAGE_SNAPSHOT, NB_TASK_IMAGE_SNAPSHOT_PENDING},
            .expect_has_host = true,
            .task_state = NB_TASK_IMAGE_PENDING_UPLOAD,
        },
        NULL);
    nb_ctx_clear_error(ctx); /* a failed update ends the snapshot like a lost race */
    if (n != 1 && !image_queued(ctx, image_id)) {
        /* the message came twice (redelivered, or resent by an API that
         * had no confirm from the broker): this snapshot runs or ran */
        NB_INFO(LOG_COND, ctx, uuid,
                "snapshot_instance to image %s delivered again: already taken, ignored", image_id);
        return;
    }
    cond_event_start(c, ctx, uuid, EV_SNAPSHOT, host);
    if (n != 1) {
        /* Nova: instance gone or being deleted: the image goes, no fault */
        struct nb_ctx sub; /* best-effort */
        nb_ctx_child(&sub, ctx);
        nb_image_delete(&sub, image_id);
        cond_event_finish(c, ctx, uuid, EV_SNAPSHOT, false, "Instance disappeared during snapshot");
        NB_INFO(LOG_COND, ctx, uuid, "Snapshot not taken: the instance changed state meanwhile");
        return;
    }
    NB_INFO(LOG_COND, ctx, uuid, "instance snapshotting to image %s on host %s", image_id, host);
    json_t *inst = cond_instance_for_agent(c, ctx, row);
    if (nb_compute_snapshot_instance(ctx, host, inst, image_id) < 0) {
        char msg[512];
        snprintf(msg, sizeof(msg), "The compute service of host %s is not reachable.", host);
        snapshot_failed(c, ctx, uuid, image_id, host, msg);
    }
}

void cond_snapshot_result(struct conductor *c, struct nb_ctx *ctx, json_t *args)
{
    const char *uuid = nb_json_str(args, "uuid");
    const char *image_id = nb_json_str(args, "image_id");
    const char *host = nb_json_str(args, "host");
    if (!uuid)
        return;
    if (!json_is_true(json_object_get(args, "ok"))) {
        const char *m = nb_json_str(args, "message");
        snapshot_failed(c, ctx, uuid, image_id, host, m ? m : "The snapshot failed.");
        return;
    }
    clear_task(c, ctx, uuid);
    cond_event_finish(c, ctx, uuid, EV_SNAPSHOT, true, NULL);
    cond_action_finish(c, ctx, uuid, NULL);
    NB_INFO(LOG_COND, ctx, uuid, "Snapshot of the instance uploaded to image %s",
            image_id ? image_id : "?");
}
