/* rebuild.c - rebuild and evacuation for libvirt guests (Nova's libvirt
 * driver has no rebuild of its own: the compute manager's
 * _rebuild_default_impl destroys the guest and spawns it again; the
 * driver's instance_on_disk tells an evacuation whether the instance's
 * directory is already here).
 *
 * A rebuild undefines the domain but keeps the instance's directory, so
 * the serial console log (console.log, appended to by every start) shows
 * the old boot and then the new one; unless the disk is kept, the local
 * root disk, its disk.info and the config drive go and the guest is
 * spawned again from instance["image_ref"] (through the image cache, as a
 * boot). With the disk kept (an evacuation onto shared storage) the domain
 * is defined again from the database state and started on the existing
 * disk. Volumes are attached from the instance's mappings either way. */
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "compute/virt/libvirt/lv.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define LV(drv) ((struct lv *)(drv)->priv)

/* Stops and undefines the instance's domain, leaving its files. An absent
 * domain is no error. 0/-1. */
static int undefine_keep_files(struct lv *lv, struct nb_ctx *ctx, const char *uuid)
{
    virDomainPtr dom = lv_lookup(lv, ctx, uuid, false);
    if (!dom)
        return nb_ctx_failed(ctx) ? -1 : 0;
    int rc = 0;
    if (virDomainIsActive(dom) == 1 && virDomainDestroy(dom) < 0 && virDomainIsActive(dom) == 1)
        rc = lv_error(ctx, 500, "cannot destroy the domain of instance %s", uuid);
    if (rc == 0 && virDomainHasManagedSaveImage(dom, 0) == 1)
        virDomainManagedSaveRemove(dom, 0);
    if (rc == 0 &&
        virDomainUndefineFlags(dom, VIR_DOMAIN_UNDEFINE_MANAGED_SAVE |
                                        VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA |
                                        VIR_DOMAIN_UNDEFINE_NVRAM) < 0 &&
        virDomainUndefine(dom) < 0)
        rc = lv_error(ctx, 500, "cannot undefine the domain of instance %s", uuid);
    virDomainFree(dom);
    return rc;
}

/* Removes the instance's local root disk, disk.info and config drive
 * (a missing one is fine). 0/-1. */
static int remove_local_disk(struct nb_ctx *ctx, const char *dir)
{
    static const char *const files[] = {"disk", "disk.info", "disk.config"};
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        char p[LV_PATH_MAX + 16];
        snprintf(p, sizeof(p), "%s/%s", dir, files[i]);
        if (unlink(p) < 0 && errno != ENOENT)
            return nb_error(ctx, 500, NULL, "cannot remove %s: %s", p, strerror(errno));
    }
    return 0;
}

int lv_op_rebuild(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host, json_t *inst,
                  bool keep_disk)
{
    (void)host;
    struct lv *lv = LV(drv);
    const char *uuid = nb_json_str(inst, "uuid");
    if (!uuid || !nb_is_uuid(uuid))
        return nb_error(ctx, 400, NULL, "rebuild: the instance has no valid UUID");
    if (undefine_keep_files(lv, ctx, uuid) < 0)
        return -1;
    if (keep_disk) {
        NB_INFO(LV_LOG, ctx, uuid, "Starting the instance on its existing disk");
        return lv_power_on(lv, ctx, inst);
    }
    char dir[LV_PATH_MAX];
    lv_instance_dir(lv, uuid, dir, sizeof(dir));
    if (remove_local_disk(ctx, dir) < 0)
        return -1;
    NB_INFO(LV_LOG, ctx, uuid, "Creating image(s) for the rebuild from %s",
            nb_json_str(inst, "image_ref") && *nb_json_str(inst, "image_ref")
                ? nb_json_str(inst, "image_ref")
                : "the boot volume");
    int rc = lv_spawn(lv, ctx, inst);
    lv_cache_cleanup(lv, ctx); /* the old image's base may be unused now */
    return rc;
}

int lv_op_instance_on_disk(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                           json_t *inst, bool *on_disk)
{
    (void)host, (void)ctx;
    char dir[LV_PATH_MAX];
    lv_instance_dir(LV(drv), nb_json_str(inst, "uuid"), dir, sizeof(dir));
    /* Nova's libvirt instance_on_disk: the instance's path is here and
     * writable (the same directory the source used: shared storage) */
    *on_disk = access(dir, W_OK) == 0;
    NB_INFO(LV_LOG, ctx, nb_json_str(inst, "uuid"), "Checking instance files accessibility %s: %s",
            dir, *on_disk ? "present" : "absent");
    return 0;
}

int lv_op_destroy_evacuated(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                            json_t *inst, bool destroy_disks)
{
    (void)host;
    if (destroy_disks)
        return lv_destroy(LV(drv), ctx, inst);
    return undefine_keep_files(LV(drv), ctx, nb_json_str(inst, "uuid"));
}
