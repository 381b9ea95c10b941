/* fake_rebuild.h - the fake driver's rebuild and evacuation ops
 * (fake_rebuild.c), for fake.c's vtable. Private to compute/virt. */
#ifndef NB_VIRT_FAKE_REBUILD_H
#define NB_VIRT_FAKE_REBUILD_H

#include "compute/virt/driver.h"

int nb_fake_rebuild(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                    json_t *instance, bool keep_disk);
int nb_fake_instance_on_disk(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                             json_t *instance, bool *on_disk);
int nb_fake_destroy_evacuated(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                              json_t *instance, bool destroy_disks);

#endif
