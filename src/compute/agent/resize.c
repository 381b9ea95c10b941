/* resize.c - the agent's side of cold migration and resize: the calls
 * prep_resize, resize_instance, finish_resize, confirm_resize,
 * revert_resize and finish_revert_resize (compute_api.h), each one driver
 * op under the instance's lock, answered {"ok": true, …} or {"ok": false,
 * "message", "guest_lost"}. The conductor writes every state.
 *
 * resize_instance refuses, before touching the guest, to shrink the local
 * disks of an image-backed server (Nova's "Resize error: Unable to resize
 * disk down."); if sending the disks fails after the power-off, the guest
 * is started again when it ran, and the answer says whether that worked.
 * Before a guest starts (finish_resize, finish_revert_resize) its volume
 * files' formats are checked as for every domain start. */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "compute/agent/internal.h"
#include "compute/rpc/compute_api.h"

#include <string.h>

/* The answer of a step: ok (with the guest's power state when asked), or
 * the error on dctx. */
static json_t *answer(struct agent *a, struct nb_ctx *ctx, struct nb_ctx *dctx, int rc,
                      const char *step, const char *uuid, bool lost, bool with_power)
{
    __atomic_store_n(&a->dirty, true, __ATOMIC_RELAXED);
    if (rc < 0) {
        NB_ERROR(LOG_AGENT, ctx, uuid, "%s failed on %s: %s", step, a->host, nb_ctx_message(dctx));
        return json_pack("{s:b, s:s, s:b}", "ok", 0, "message", nb_ctx_message(dctx), "guest_lost",
                         lost);
    }
    json_t *r = json_pack("{s:b}", "ok", 1);
    if (with_power) {
        struct nb_ctx sub;
        nb_ctx_child(&sub, ctx);
        struct nb_guest_info gi = {NB_POWER_NOSTATE};
        a->drv->ops->get_info(a->drv, &sub, a->host, uuid, &gi);
        json_object_set_new(r, "power_state", json_integer(gi.power_state));
    }
    return r;
}

/* 501 when the driver cannot move guests. */
static int unsupported(struct agent *a, struct nb_ctx *dctx)
{
    return nb_error(dctx, 501, NULL,
                    "The %s virt driver does not support cold migration or resize.",
                    a->drv->ops->name);
}

json_t *nb_agent_prep_resize(void *opaque, struct nb_ctx *ctx, const char *method, json_t *args)
{
    (void)method;
    struct agent *a = opaque;
    json_t *inst = json_object_get(args, "instance");
    const char *uuid = nb_json_str(inst, "uuid");
    json_t *flavor = json_object_get(args, "flavor");
    struct nb_ctx dctx;
    nb_ctx_child(&dctx, ctx);
    if (!a->drv->ops->prep_resize)
        return answer(a, ctx, &dctx, unsupported(a, &dctx), "prep_resize", uuid, false, false);
    struct agent_ilock *lk = nb_agent_lock(a, uuid);
    json_t *dest = a->drv->ops->prep_resize(a->drv, &dctx, a->host, inst, flavor,
                                            json_is_true(json_object_get(args, "same_host")));
    nb_agent_unlock(a, lk);
    if (!dest)
        return answer(a, ctx, &dctx, -1, "prep_resize", uuid, false, false);
    /* Nova's resize claim on the destination; runbooks look for it */
    NB_INFO("nubo.compute.claims", ctx, uuid, "Claim successful on node %s (flavor %s)", a->node,
            nb_json_str(flavor, "name") ? nb_json_str(flavor, "name") : "?");
    json_t *r = answer(a, ctx, &dctx, 0, "prep_resize", uuid, false, false);
    json_object_set_new(r, "dest", dest);
    return r;
}

/* Nova's libvirt check in migrate_disk_and_power_off: the local disks of
 * an image-backed server cannot shrink. 0/-1 (ResizeError wording). */
static int check_disk_down(struct nb_ctx *ctx, const json_t *inst, const json_t *flavor)
{
    const char *image = nb_json_str(inst, "image_ref");
    const json_t *cur = json_object_get(inst, "flavor");
    if (!json_is_object(flavor))
        return 0;
    if (image && *image && nb_json_int(flavor, "root_gb", 0) < nb_json_int(cur, "root_gb", 0))
        return nb_error(ctx, 400, NULL, "Resize error: Unable to resize disk down.");
    if (nb_json_int(flavor, "ephemeral_gb", 0) < nb_json_int(cur, "ephemeral_gb", 0))
        return nb_error(ctx, 400, NULL, "Resize error: Unable to resize ephemeral disks down.");
    return 0;
}

json_t *nb_agent_resize_instance(void *opaque, struct nb_ctx *ctx, const char *method, json_t *args)
{
    (void)method;
    struct agent *a = opaque;
    json_t *inst = json_object_get(args, "instance");
    const char *uuid = nb_json_str(inst, "uuid");
    struct nb_ctx dctx;
    nb_ctx_child(&dctx, ctx);
    if (!a->drv->ops->migrate_disk_and_power_off)
        return answer(a, ctx, &dctx, unsupported(a, &dctx), "resize_instance", uuid, false, false);
    if (check_disk_down(&dctx, inst, json_object_get(args, "flavor")) < 0)
        return answer(a, ctx, &dctx, -1, "resize_instance", uuid, false, false);
    struct agent_ilock *lk = nb_agent_lock(a, uuid);
    struct nb_guest_info gi = {NB_POWER_NOSTATE};
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    a->drv->ops->get_info(a->drv, &sub, a->host, uuid, &gi);
    bool ran = gi.power_state == NB_POWER_RUNNING;
    int timeout = (int)nb_conf_int("compute", "shutdown_timeout",
                                   nb_conf_int("DEFAULT", "shutdown_timeout", 60));
    NB_INFO(LOG_AGENT, ctx, uuid, "Migrating instance to %s (migration %s)",
            nb_json_str(args, "dest_host") ? nb_json_str(args, "dest_host") : "?",
            nb_json_str(args, "migration_uuid") ? nb_json_str(args, "migration_uuid") : "?");
    int rc = a->drv->ops->migrate_disk_and_power_off(
        a->drv, &dctx, a->host, inst, json_object_get(args, "flavor"),
        nb_json_str(args, "dest_host"), json_object_get(args, "dest"),
        json_is_true(json_object_get(args, "same_host")), timeout);
    bool lost = false;
    if (rc < 0 && ran) { /* as it was: running again */
        struct nb_ctx pctx;
        nb_ctx_child(&pctx, ctx);
        struct nb_guest_info now = {NB_POWER_NOSTATE};
        if (a->drv->ops->get_info(a->drv, &pctx, a->host, uuid, &now) < 0 ||
            (now.power_state != NB_POWER_RUNNING &&
             a->drv->ops->power_on(a->drv, &pctx, a->host, inst) < 0)) {
            lost = true;
            NB_ERROR(LOG_AGENT, ctx, uuid,
                     "could not start the guest again after the failed move: %s",
                     nb_ctx_message(&pctx));
        }
    }
    nb_agent_unlock(a, lk);
    return answer(a, ctx, &dctx, rc, "resize_instance", uuid, lost, false);
}

json_t *nb_agent_finish_resize(void *opaque, struct nb_ctx *ctx, const char *method, json_t *args)
{
    (void)method;
    struct agent *a = opaque;
    json_t *inst = json_object_get(args, "instance");
    const char *uuid = nb_json_str(inst, "uuid");
    bool revert = !strcmp(method, NB_COMPUTE_FINISH_REVERT_RESIZE);
    const char *step = revert ? "finish_revert_resize" : "finish_resize";
    struct nb_ctx dctx;
    nb_ctx_child(&dctx, ctx);
    int (*fn)(struct nb_virt_driver *, struct nb_ctx *, const char *, json_t *, bool, bool) =
        revert ? a->drv->ops->finish_revert_migration : a->drv->ops->finish_migration;
    if (!fn)
        return answer(a, ctx, &dctx, unsupported(a, &dctx), step, uuid, revert, false);
    struct agent_ilock *lk = nb_agent_lock(a, uuid);
    int rc = nb_agent_verify_disks(a, &dctx, inst, NULL);
    if (rc == 0)
        rc = fn(a->drv, &dctx, a->host, inst, json_is_true(json_object_get(args, "same_host")),
                json_is_true(json_object_get(args, "power_on")));
    nb_agent_unlock(a, lk);
    if (rc == 0)
        NB_INFO(LOG_AGENT, ctx, uuid, "%s on %s with flavor %s",
                revert ? "Resize reverted" : "Instance moved", a->host,
                nb_json_str(json_object_get(inst, "flavor"), "name")
                    ? nb_json_str(json_object_get(inst, "flavor"), "name")
                    : "?");
    return answer(a, ctx, &dctx, rc, step, uuid, revert, true);
}

/* confirm_resize on the source, revert_resize on the destination: the
 * guest and files of that side go. */
json_t *nb_agent_drop_resize(void *opaque, struct nb_ctx *ctx, const char *method, json_t *args)
{
    struct agent *a = opaque;
    json_t *inst = json_object_get(args, "instance");
    const char *uuid = nb_json_str(inst, "uuid");
    bool confirm = !strcmp(method, NB_COMPUTE_CONFIRM_RESIZE);
    const char *step = confirm ? "confirm_resize" : "revert_resize";
    struct nb_ctx dctx;
    nb_ctx_child(&dctx, ctx);
    int (*fn)(struct nb_virt_driver *, struct nb_ctx *, const char *, json_t *, bool) =
        confirm ? a->drv->ops->confirm_migration : a->drv->ops->revert_migration;
    if (!fn)
        return answer(a, ctx, &dctx, unsupported(a, &dctx), step, uuid, false, false);
    struct agent_ilock *lk = nb_agent_lock(a, uuid);
    int rc = fn(a->drv, &dctx, a->host, inst, json_is_true(json_object_get(args, "same_host")));
    nb_agent_unlock(a, lk);
    if (rc == 0)
        NB_INFO(LOG_AGENT, ctx, uuid, "%s: the %s guest's files on %s are removed",
                confirm ? "Resize confirmed" : "Resize reverted", confirm ? "old" : "new", a->host);
    return answer(a, ctx, &dctx, rc, step, uuid, false, false);
}
