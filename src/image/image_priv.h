/* image_priv.h - what the files of the image module share (not public).
 *
 * An image is handled as a "record": a JSON object with Glance's base
 * attributes (id, name, status, visibility, protected, os_hidden,
 * disk_format, container_format, size, virtual_size, checksum, os_hash_algo,
 * os_hash_value, min_disk, min_ram, owner, created_at, updated_at), plus
 * "properties" (object of extra string properties) and "tags" (array of
 * strings). records.c loads and saves records; patch.c applies a JSON patch
 * to a record without touching the database; schema.c holds Glance's image
 * schema and its validation; api.c and members.c are the HTTP handlers. */
#ifndef NB_IMAGE_PRIV_H
#define NB_IMAGE_PRIV_H

#include "common/ctx.h"
#include "common/env.h"
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* The environment given to nb_image_init (borrowed for the process life). */
extern struct nb_env *nb_image_env;

/* --- schema.c ------------------------------------------------------------------ */

/* True if key is one of Glance's base image properties (schema
 * "properties"), e.g. "name", "tags", "locations". */
bool nb_image_is_base_property(const char *key);
/* Validates obj (an object of image properties, possibly partial) against
 * Glance's image schema: base properties by their types, enums and
 * lengths, others must be strings. 0, or -1 with msg set to Glance's
 * "Provided object does not match schema 'image': <reason>". */
int nb_image_schema_check(const json_t *obj, char *msg, size_t msglen);
/* The schema documents served under /v2/schemas/. New refs. */
json_t *nb_image_schema_image(void);
json_t *nb_image_schema_images(void);
json_t *nb_image_schema_member(void);
json_t *nb_image_schema_members(void);
/* Python's repr() of a JSON value ('x', 1, True, None, […], {…}). malloc'd. */
char *nb_image_pyrepr(const json_t *v);

/* --- patch.c -------------------------------------------------------------------- */

/* Applies a Glance image PATCH body (an array of operations, JSON-patch
 * draft 10 for application/openstack-images-v2.1-json-patch or draft 4 for
 * the v2.0 media type) to rec in place, as Glance's RequestDeserializer.update
 * and ImagesController.update do: every operation is parsed and validated
 * first, then applied in order. is_admin decides the admin-only changes
 * (visibility public, owner). Returns 0, or the HTTP status of the refusal
 * (400, 403, 409) with Glance's message in msg; rec may then be partly
 * changed and must be discarded. Does not touch the database. */
int nb_image_patch_apply(json_t *rec, const json_t *ops, int draft, bool is_admin, char *msg,
                         size_t msglen);
/* Only the parsing and validation phase of nb_image_patch_apply (400/403),
 * which Glance runs before looking the image up. */
int nb_image_patch_check(const json_t *ops, int draft, char *msg, size_t msglen);

/* --- records.c -------------------------------------------------------------------- */

/* The property ("true") that marks the record nb_image_create_record makes:
 * active with size 0 until data is imported into it (data.c). */
#define NB_IMAGE_PLACEHOLDER_PROP "nubo_placeholder"

/* The live (not deleted) image record by id, or NULL: not found (no error
 * recorded) or a database error (recorded in ctx). New ref. */
json_t *nb_image_record_load(struct nb_ctx *ctx, const char *id);
/* Glance's is_image_visible: admin, no owner, public or community, owned by
 * ctx's project, or shared with it as a member. */
bool nb_image_record_visible(struct nb_ctx *ctx, const json_t *rec);
/* True if ctx may modify or delete rec (admin, or member of the owning
 * project: modify_image / delete_image). */
bool nb_image_record_mutable(const struct nb_ctx *ctx, const json_t *rec);
/* Inserts rec (all base attributes, properties, tags) as a new image. 0/-1. */
int nb_image_record_insert(struct nb_ctx *ctx, const json_t *rec);
/* Writes rec's base attributes, properties and tags over the stored image
 * and sets updated_at (also in rec). 0/-1. */
int nb_image_record_save(struct nb_ctx *ctx, json_t *rec);
/* Glance's soft delete of image id (status deleted, members dropped) and
 * the removal of its data. 0/-1. */
int nb_image_record_delete(struct nb_ctx *ctx, const char *id);
/* Glance's image view of a record (ResponseSerializer._format_image). */
json_t *nb_image_record_view(const json_t *rec);
/* Checks the property and tag quotas ([DEFAULT] image_property_quota and
 * image_tag_quota, 128): 413 with Glance's wording. 0/-1. */
int nb_image_record_quota(struct nb_ctx *ctx, const json_t *rec);
/* ISO "2026-11-29T18:00:00Z" of a stored timestamp (Glance's isotime).
 * buf must hold 32 bytes. */
const char *nb_image_isotime(const char *stored, char *buf);

/* --- members.c --------------------------------------------------------------------- */

/* Registers the member routes. */
void nb_image_members_init(void);

/* --- data.c ------------------------------------------------------------------------ */

/* Registers GET/PUT /v2/images/{image_id}/file (streamed upload, download). */
void nb_image_data_init(void);
/* Removes the stored data of image id (also a partial upload). */
void nb_image_data_remove(const char *id);

#endif
