/* rebuild.c - the agent's rebuild and evacuation (Nova's compute manager
 * rebuild_instance / _do_rebuild_instance and, at start-up,
 * _destroy_evacuated_instances).
 *
 * rebuild_instance: under the instance lock the driver makes the guest
 * anew from instance["image_ref"] with the same UUID, ports and volumes;
 * a server that was stopped is stopped again afterwards (Nova brings the
 * guest back to its original state). An evacuation onto this host first
 * checks that the guest is not here already and whether its disk is (the
 * driver's instance_on_disk: shared storage), which must agree with what
 * the caller said before 2.14 ("Invalid state of instance files on shared
 * storage"); then the disk is kept, or the guest is rebuilt from the image
 * (a volume-backed server keeps its volume either way). The outcome goes
 * back as rebuild_result.
 *
 * When the agent has registered for the first time, it asks the conductor
 * which instances were evacuated from its host while it was away,
 * destroys the guests it still has of them (their local files only when
 * the destination did not run the same disk from shared storage) and
 * reports each evacuation cleaned, so that the source allocation goes. */
#include "common/cleanup.h"
#include "common/json.h"
#include "common/log.h"
#include "compute/agent/internal.h"
#include "compute/rpc/conductor_api.h"

#include <string.h>

/* Evacuation only: may this host take the guest, and with which disk?
 * *keep: the disk is here (shared storage). 0/-1 (error on ctx). */
static int evacuation_disk(struct agent *a, struct nb_ctx *ctx, json_t *inst, json_t *given,
                           bool *keep)
{
    const char *uuid = nb_json_str(inst, "uuid");
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    struct nb_guest_info gi;
    if (a->drv->ops->get_info(a->drv, &sub, a->host, uuid, &gi) == 0)
        return nb_error(ctx, 409, NULL, "Instance %s already exists.", uuid);
    bool on_disk = false;
    if (a->drv->ops->instance_on_disk &&
        a->drv->ops->instance_on_disk(a->drv, ctx, a->host, inst, &on_disk) < 0)
        return -1;
    if (json_is_boolean(given) && json_is_true(given) != on_disk)
        return nb_error(ctx, 400, NULL, "Invalid state of instance files on shared storage");
    const char *image = nb_json_str(inst, "image_ref");
    if (on_disk)
        NB_INFO(LOG_AGENT, ctx, uuid, "disk on shared storage, evacuating using existing disk");
    else if (image && *image)
        NB_INFO(LOG_AGENT, ctx, uuid, "disk not on shared storage, evacuating from image: '%s'",
                image);
    else
        NB_INFO(LOG_AGENT, ctx, uuid, "disk on volume, evacuating using existing volume");
    *keep = on_disk;
    return 0;
}

/* The rebuild itself (instance lock held). 0/-1 with the error on ctx;
 * *keep says whether an evacuation kept the disk. */
static int do_rebuild(struct agent *a, struct nb_ctx *ctx, json_t *inst, json_t *args, bool *keep)
{
    const struct nb_virt_ops *ops = a->drv->ops;
    bool evacuate = nb_json_str(args, "migration_uuid") != NULL;
    *keep = false;
    if (!ops->rebuild)
        return nb_error(ctx, 501, NULL, "The %s virt driver does not support rebuild.", ops->name);
    if (json_is_true(json_object_get(args, "preserve_ephemeral")))
        return nb_error(ctx, 400, NULL,
                        "The current driver does not support preserving ephemeral partitions.");
    if (evacuate &&
        evacuation_disk(a, ctx, inst, json_object_get(args, "on_shared_storage"), keep) < 0)
        return -1;
    if (nb_agent_verify_disks(a, ctx, inst, NULL) < 0 ||
        ops->rebuild(a->drv, ctx, a->host, inst, *keep) < 0)
        return -1;
    const char *vm = nb_json_str(inst, "vm_state");
    if (vm && !strcmp(vm, "stopped")) {
        NB_INFO(LOG_AGENT, ctx, nb_json_str(inst, "uuid"),
                "bringing vm to original state: 'stopped'");
        return ops->power_off(a->drv, ctx, a->host, inst, 0);
    }
    return 0;
}

void nb_agent_rebuild_instance(struct agent *a, struct nb_ctx *ctx, json_t *args)
{
    json_t *inst = json_object_get(args, "instance");
    const char *uuid = nb_json_str(inst, "uuid");
    const char *mig = nb_json_str(args, "migration_uuid");
    if (!uuid)
        return;
    NB_INFO(LOG_AGENT, ctx, uuid, mig ? "Evacuating instance" : "Rebuilding instance");
    struct nb_ctx dctx;
    nb_ctx_child(&dctx, ctx);
    double t0 = nb_time_mono();
    struct agent_ilock *lk = nb_agent_lock(a, uuid);
    bool keep = false;
    int rc = do_rebuild(a, &dctx, inst, args, &keep);
    if (rc < 0 && mig && nb_ctx_status(&dctx) != 409 && a->drv->ops->destroy_evacuated) {
        struct nb_ctx cctx; /* leave no half-made guest of an evacuation behind */
        nb_ctx_child(&cctx, ctx);
        a->drv->ops->destroy_evacuated(a->drv, &cctx, a->host, inst, !keep);
    }
    int power = nb_agent_guest_power_state(a, ctx, uuid);
    nb_agent_unlock(a, lk);
    __atomic_store_n(&a->dirty, true, __ATOMIC_RELAXED);
    if (rc == 0)
        NB_INFO(LOG_AGENT, ctx, uuid, "Took %.2f seconds to rebuild the instance on %s.",
                nb_time_mono() - t0, a->host);
    else
        NB_ERROR(LOG_AGENT, ctx, uuid, "Setting instance vm_state to ERROR: %s",
                 nb_ctx_message(&dctx));
    const struct nb_rebuild_result r = {
        .uuid = uuid,
        .host = a->host,
        .migration_uuid = mig,
        .ok = rc == 0,
        .message = rc == 0 ? NULL : nb_ctx_message(&dctx),
        .power_state = power,
        .on_shared_storage = keep,
    };
    nb_conductor_rebuild_result(ctx, &r);
}

/* Destroys one evacuated guest still on this host. */
static void destroy_one(struct agent *a, struct nb_ctx *ctx, const json_t *row)
{
    const char *uuid = nb_json_str(row, "uuid");
    bool destroy_disks = json_is_true(json_object_get(row, "destroy_disks")) ||
                         json_is_true(json_object_get(row, "deleted"));
    NB_INFO(LOG_AGENT, ctx, uuid,
            "Destroying instance as it has been evacuated from this host but still exists in "
            "the hypervisor");
    _cleanup_json_ json_t *inst = json_pack("{s:s}", "uuid", uuid);
    struct nb_ctx dctx;
    nb_ctx_child(&dctx, ctx);
    struct agent_ilock *lk = nb_agent_lock(a, uuid);
    int rc = a->drv->ops->destroy_evacuated
                 ? a->drv->ops->destroy_evacuated(a->drv, &dctx, a->host, inst, destroy_disks)
                 : a->drv->ops->destroy(a->drv, &dctx, a->host, inst);
    nb_agent_unlock(a, lk);
    if (rc < 0)
        NB_ERROR(LOG_AGENT, ctx, uuid, "Could not destroy the evacuated guest on %s: %s", a->host,
                 nb_ctx_message(&dctx));
}

int nb_agent_destroy_evacuated(struct agent *a, struct nb_ctx *ctx)
{
    _cleanup_json_ json_t *rows = nb_conductor_evacuated_instances(ctx, a->host, 30000);
    if (!rows) {
        NB_WARN(LOG_AGENT, ctx, NULL, "evacuated instances of %s not known yet: %s", a->host,
                nb_ctx_failed(ctx) ? nb_ctx_message(ctx) : "no answer");
        nb_ctx_clear_error(ctx); /* handled: asked again at the next pass */
        return -1;
    }
    if (!json_array_size(rows))
        return 0;
    _cleanup_json_ json_t *guests = a->drv->ops->list(a->drv, ctx, a->host);
    if (!guests) {
        NB_WARN(LOG_AGENT, ctx, NULL, "evacuated instances of %s not cleaned: %s", a->host,
                nb_ctx_message(ctx));
        nb_ctx_clear_error(ctx); /* handled: asked again at the next pass */
        return -1;
    }
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        const char *uuid = nb_json_str(r, "uuid");
        if (!uuid)
            continue;
        if (json_object_get(guests, uuid))
            destroy_one(a, ctx, r);
        nb_conductor_evacuation_cleaned(ctx, uuid, nb_json_str(r, "migration_uuid"), a->host);
    }
    __atomic_store_n(&a->dirty, true, __ATOMIC_RELAXED);
    return 0;
}
