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

/* For compute agents filling their image cache: opens the data file of an
 * active image the context may see, read-only. Returns the fd and sets
 * *info to a new {"id", "name", "disk_format", "container_format", "size",
 * "virtual_size", "checksum", "os_hash_algo", "os_hash_value"}; or -1 after
 * nb_error (404 "Image <id> could not be found.", 409 when the image is not
 * active: "Image <id> is not active (status <s>)."). */
int nb_image_data_open(struct nb_ctx *ctx, const char *image_id, json_t **info);
/* Uploads a local file as the data of image id (status queued), exactly as
 * PUT /v2/images/{id}/file would: hashes, format check against the declared
 * disk_format, sizes, status active (killed/queued on failure). 0/-1.
 * Also fills the data-less record nb_image_create_record made (which is
 * active until then): it goes saving → active, or queued on failure. */
int nb_image_import_file(struct nb_ctx *ctx, const char *image_id, const char *path);

#endif
