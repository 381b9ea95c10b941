/* block_device.c - block_device_mapping reads and corrections exported to
 * other modules (see block_device.h). */
#include "compute/objects/block_device.h"

#include "common/cleanup.h"
#include "common/json.h"
#include "common/util.h"
#include "db/db.h"

#include <stdlib.h>
#include <string.h>

json_t *nb_bdm_rows(struct nb_db *db, struct nb_ctx *ctx, const char *instance_uuid)
{
    return nb_db_rows(db, ctx,
                      "SELECT * FROM block_device_mapping WHERE instance_uuid = ? AND deleted = 0 "
                      "ORDER BY boot_index IS NULL, boot_index, id",
                      "s", instance_uuid);
}

char *nb_bdm_connection_info_text(struct nb_db *db, struct nb_ctx *ctx, const char *instance_uuid,
                                  const char *bdm_uuid)
{
    _cleanup_json_ json_t *row = nb_db_row(db, ctx,
                                           "SELECT connection_info FROM block_device_mapping "
                                           "WHERE instance_uuid = ? AND uuid = ? AND deleted = 0",
                                           "ss", instance_uuid, bdm_uuid);
    const char *text = nb_json_str(row, "connection_info");
    return text ? strdup(text) : NULL;
}

int nb_bdm_set_declared_format(struct nb_db *db, struct nb_ctx *ctx, const char *instance_uuid,
                               const char *bdm_uuid, const char *format)
{
    return nb_db_exec(db, ctx,
                      "UPDATE block_device_mapping SET connection_info = "
                      "JSON_SET(connection_info, '$.data.format', ?) WHERE instance_uuid = ? "
                      "AND uuid = ? AND deleted = 0",
                      "sss", format, instance_uuid, bdm_uuid);
}

int nb_bdm_restore_connection_info(struct nb_db *db, struct nb_ctx *ctx, const char *instance_uuid,
                                   const char *bdm_uuid, const char *old, const char *expected)
{
    return nb_db_exec(db, ctx,
                      "UPDATE block_device_mapping SET connection_info = ? WHERE "
                      "instance_uuid = ? AND uuid = ? AND deleted = 0 AND "
                      "connection_info = ?",
                      "ssss", old, instance_uuid, bdm_uuid, expected);
}

int nb_bdm_set_attachment(struct nb_db *db, struct nb_ctx *ctx, long long bdm_id,
                          const char *attachment_id, const char *connection_info)
{
    char now[32];
    nb_now_iso_us(now);
    return nb_db_exec(db, ctx,
                      "UPDATE block_device_mapping SET connection_info = ?, attachment_id = ?, "
                      "updated_at = ? WHERE id = ? AND deleted = 0",
                      "sssi", connection_info, attachment_id, now, bdm_id);
}
