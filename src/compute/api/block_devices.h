/* block_devices.h - block device mappings as the Compute API checks and
 * lays them out (device names, image mappings, volume checks, reservation
 * and release). Defined in block_devices.c; private to compute/api. */
#ifndef NB_COMPUTE_API_BLOCK_DEVICES_H
#define NB_COMPUTE_API_BLOCK_DEVICES_H

#include "common/ctx.h"
#include "common/http.h"
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* ---- block device mappings (block_devices.c) ------------------------------- */

/* Nova's block_device.match_device: "/dev/vdb1" -> prefix "/dev/vd",
 * letters "b". 0, or -1 when device does not have that shape. */
int nb_srv_match_device(const char *device, char *prefix, size_t pn, char *letters, size_t ln);
/* The guest device of a new volume of an instance (Nova's
 * get_next_device_name): the root device's prefix ("/dev/vda" when
 * root_device_name is NULL) and the first letter no mapping of bdms uses
 * (local disks without a name take the next letters, as the driver lays
 * them out), or the requested device's letter. Writes "/dev/vdX" into out.
 * 0, or -1 after 400 "The supplied device path (<d>) is invalid." or 409
 * "The supplied device path (<d>) is in use.". */
int nb_srv_next_device_name(struct nb_ctx *ctx, const char *root_device_name, const json_t *bdms,
                            const char *requested, char *out, size_t n);
/* True when mapping b has boot_index 0. */
bool nb_srv_bdm_is_root(const json_t *b);
/* The mappings a volume-backed snapshot image defines (its properties
 * bdm_v2 and block_device_mapping, a JSON list, as nb_image_lookup shows
 * them) in the form server create stores; an empty array for an image
 * without any. NULL after 400 for a malformed or legacy list. New ref. */
json_t *nb_srv_image_bdms(struct nb_ctx *ctx, const json_t *image);
/* Nova's _check_and_transform_bdm merge for v2 requests: the request's
 * mappings (without its image root when the image defines a root) followed
 * by the image's mappings whose device name the request does not use. New
 * array. */
json_t *nb_srv_merge_bdms(const json_t *image_bdms, const json_t *request_bdms);
/* Nova's checks of a create request's mappings against the volume and
 * image services (get_bdm_image_metadata for a server without image_ref,
 * _get_volumes_for_bdms, _validate_bdm), for num instances. Fills
 * volume_size of existing volumes and of snapshot mappings without one.
 * 0, or -1 after 400 with Nova's message. */
int nb_srv_check_bdms(struct nb_ctx *ctx, json_t *bdms, const char *image_ref, long long num);
/* Reserves the existing volumes (source volume) of bdms: available ->
 * reserved. On a failure the ones already reserved are released. 0/-1. */
int nb_srv_reserve_volumes(struct nb_ctx *ctx, const json_t *bdms);
/* Releases what nb_srv_reserve_volumes reserved (errors are logged, ctx's
 * error is kept). */
void nb_srv_unreserve_volumes(struct nb_ctx *ctx, const json_t *bdms);
/* The live mapping rows of an instance that name a volume. New ref or NULL
 * after a database error. */
json_t *nb_srv_instance_volume_bdms(struct nb_ctx *ctx, const char *instance_uuid);
/* Gives back the volumes of such rows when an instance is deleted where no
 * compute can do it (Nova's _local_cleanup_bdm_volumes): reserved ->
 * available, attaching -> available, in-use -> detached, and deletes those
 * marked delete_on_termination. Errors are logged; ctx's error is kept. */
void nb_srv_release_volumes(struct nb_ctx *ctx, const json_t *rows);

#endif
