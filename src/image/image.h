/* image.h - the Glance v2 subset under /image.
 *
 * nb_image_init registers the routes. nb_image_lookup is for the compute
 * API: it finds an image the context may see by ID, returning a new
 * reference to its Glance v2 view (with properties flattened as in the API),
 * or NULL after recording 400 "Image <ref> could not be found." (Nova's
 * wording when booting with an unknown image). */
#ifndef NB_IMAGE_H
#define NB_IMAGE_H

#include "common/ctx.h"
#include "common/env.h"
#include <jansson.h>

int nb_image_init(struct nb_env *env);
json_t *nb_image_lookup(struct nb_ctx *ctx, const char *image_id);
/* Creates an image record (bootstrap): name, disk/container format, public.
 * Returns 0 and writes its id into id_out[37], or -1. Reuses an existing
 * image of that name. */
int nb_image_create_record(struct nb_ctx *ctx, const char *name, const char *disk_format,
                           const char *container_format, long long min_disk, char *id_out);

#endif
