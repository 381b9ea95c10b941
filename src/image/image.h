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
#include <stdbool.h>

int nb_image_init(struct nb_env *env);

/* The Image API as the HTTP layer serves it (http_service.c); its init
 * registers it with its routes. */
struct nb_http_service;
extern const struct nb_http_service nb_image_http_service;
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

/* For the compute API's createImage (Nova's compute_utils.create_image and
 * snapshot_volume_backed): creates the image record of a server snapshot.
 * attrs: "name" (required), "owner" (project; ctx's when absent),
 * "visibility" ("private" when absent), "disk_format", "container_format",
 * "min_disk", "min_ram", "member" (a project added as image member, for a
 * "shared" snapshot of another project's server) and "properties" (an
 * object; strings are stored as they are, other values as Nova's Glance
 * client sends them: booleans as "True"/"False", lists and objects as JSON
 * text). Without no_data the image is queued and waits for
 * nb_image_import_file; with no_data it is active with size 0 and no data
 * (a volume-backed snapshot, whose content is its block_device_mapping
 * property). Writes the id into id_out[37]. 0, or -1 after nb_error (413
 * over the property quota, 500 on a database error). */
int nb_image_create_snapshot(struct nb_ctx *ctx, const json_t *attrs, bool no_data, char *id_out);
/* Deletes an image the context may modify, with its data (Glance's soft
 * delete), e.g. a snapshot record whose upload failed. 0, or -1 after
 * nb_error (404 when it does not exist or is not visible, 403 when ctx may
 * not delete it or it is protected). */
int nb_image_delete(struct nb_ctx *ctx, const char *image_id);

/* For the compute API's image proxy (Nova's images.py, image_metadata.py,
 * which talk to Glance v2): */
/* GET /v2/images/{id}: the Glance v2 view of a visible image (properties
 * flattened), or NULL after 404 "No image found with ID <id>" or a
 * database error. New ref. */
json_t *nb_image_show(struct nb_ctx *ctx, const char *image_id);
/* GET /v2/images followed through every "next" link, as glanceclient's
 * images.list does: the views of the images ctx may see that match
 * filters (an object of Glance v2 query parameters with string values:
 * "name", "status", "updated_at": "gte:<time>", "min_ram", a property
 * name, ...), after marker (NULL: from the start), at most limit of them
 * (-1: all), in Glance's default order. New array, or NULL after Glance's
 * 400/403 (e.g. "No image found with ID <marker>"). */
json_t *nb_image_list(struct nb_ctx *ctx, const json_t *filters, const char *marker,
                      long long limit);
/* Makes props (an object of strings) the image's whole set of properties,
 * as glanceclient's update with remove_props does (one JSON patch: remove,
 * add, replace). Returns the new view, or NULL after 404 (as
 * nb_image_show), 403 (not allowed to modify it; a read-only or reserved
 * attribute named as a property), 413 (image_property_quota). New ref. */
json_t *nb_image_set_properties(struct nb_ctx *ctx, const char *image_id, const json_t *props);

/* True when key is one of Glance's own attributes of an image view ("id",
 * "name", "disk_format", "os_hash_value", ...), false for a property. */
bool nb_image_is_core_attr(const char *key);

#endif
