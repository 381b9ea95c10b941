/* fake_rebuild.c - rebuild and evacuation on fake hosts. A fake guest has
 * no disk, so a rebuild is the guest destroyed and spawned again through
 * the driver's own vtable (so spawn's fault injection and delay apply:
 * [fake] fail_spawn_hosts makes rebuilds and evacuations fail there too),
 * its console showing the new boot with the new image. [fake]
 * shared_storage (default false) says whether the fake hosts share an
 * instances path: an image-backed instance is then "on disk" on every
 * host, and an evacuation keeps its disk; a volume-backed one never has a
 * local disk. */
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "compute/virt/fake_rebuild.h"

int nb_fake_rebuild(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                    json_t *instance, bool keep_disk)
{
    NB_INFO("nubo.compute.virt.fake", ctx, nb_json_str(instance, "uuid"), "fake rebuild on %s (%s)",
            host, keep_disk ? "existing disk" : "disk from the image");
    if (drv->ops->destroy(drv, ctx, host, instance) < 0)
        return -1;
    return drv->ops->spawn(drv, ctx, host, instance);
}

int nb_fake_instance_on_disk(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                             json_t *instance, bool *on_disk)
{
    (void)drv, (void)ctx, (void)host;
    const char *image = nb_json_str(instance, "image_ref");
    *on_disk = nb_conf_bool("fake", "shared_storage", false) && image && *image;
    return 0;
}

int nb_fake_destroy_evacuated(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                              json_t *instance, bool destroy_disks)
{
    (void)destroy_disks; /* a fake guest has no files */
    return drv->ops->destroy(drv, ctx, host, instance);
}
