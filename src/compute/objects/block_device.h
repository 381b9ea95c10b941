/* block_device.h - the block_device_mapping records as other modules (the
 * doctor) read and correct them: compute owns the table, these are its
 * functions for it. Rows are JSON objects with Nova's columns (see
 * compute/bdm.h for reading them). */
#ifndef NB_COMPUTE_OBJECTS_BLOCK_DEVICE_H
#define NB_COMPUTE_OBJECTS_BLOCK_DEVICE_H

#include "common/ctx.h"
#include <jansson.h>

struct nb_db;

/* The instance's live mappings, boot disk first (boot_index order, then
 * the ones without, by id): new array (maybe empty), or NULL on error. */
json_t *nb_bdm_rows(struct nb_db *db, struct nb_ctx *ctx, const char *instance_uuid);

/* The connection_info text of live mapping bdm_uuid of the instance: a
 * copy the caller frees, or NULL (no such mapping, none set, or an error
 * on ctx). */
char *nb_bdm_connection_info_text(struct nb_db *db, struct nb_ctx *ctx, const char *instance_uuid,
                                  const char *bdm_uuid);

/* The runbook's correction, as it is written there:
 *   UPDATE block_device_mapping SET connection_info = JSON_SET(
 *     connection_info, '$.data.format', ?) WHERE instance_uuid = ? AND
 *     uuid = ? AND deleted = 0
 * Joins the caller's transaction. Returns the rows changed (1 expected), or
 * -1. */
int nb_bdm_set_declared_format(struct nb_db *db, struct nb_ctx *ctx, const char *instance_uuid,
                               const char *bdm_uuid, const char *format);

/* Puts connection_info back to old, only while the mapping still holds
 * expected (a later change wins). Rows changed (0/1), or -1. */
int nb_bdm_restore_connection_info(struct nb_db *db, struct nb_ctx *ctx, const char *instance_uuid,
                                   const char *bdm_uuid, const char *old, const char *expected);

/* A volume mapping's attachment changed (a move, an evacuation): the
 * attachment id and the connection_info text that goes with it, in one
 * UPDATE of mapping bdm_id. Rows changed (1 expected), or -1. */
int nb_bdm_set_attachment(struct nb_db *db, struct nb_ctx *ctx, long long bdm_id,
                          const char *attachment_id, const char *connection_info);

#endif
