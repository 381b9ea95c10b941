/* instances.c - the module's environment, instance lookup with Nova's
 * visibility rule, the lock and state refusals, and the soft delete of an
 * instance and what hangs off it (instances.h). */
#include "common/json.h"
#include "common/util.h"
#include "compute/api/instances.h"
#include "db/db.h"

#include <string.h>

static const struct nb_env *srv_env;

void nb_srv_env_set(const struct nb_env *env)
{
    srv_env = env;
}

const struct nb_env *nb_srv_env(void)
{
    return srv_env;
}
struct nb_db *nb_srv_db(void)
{
    return srv_env->db;
}

/* ---- instances ------------------------------------------------------------------ */

json_t *nb_srv_instance_get(struct nb_ctx *ctx, const char *uuid, bool with_deleted)
{
    json_t *row = NULL;
    if (uuid && nb_is_uuid(uuid)) {
        row = nb_db_row(nb_srv_db(), ctx,
                        with_deleted ? "SELECT * FROM instances WHERE uuid = ? "
                                       "ORDER BY deleted ASC, id DESC"
                                     : "SELECT * FROM instances WHERE uuid = ? AND deleted = 0",
                        "s", uuid);
        if (!row && nb_ctx_failed(ctx))
            return NULL;
    }
    if (row && !ctx->is_admin && strcmp(nb_json_str(row, "project_id"), ctx->project_id) != 0) {
        json_decref(row);
        row = NULL;
    }
    if (!row)
        nb_error(ctx, 404, NULL, "Instance %s could not be found.", uuid ? uuid : "");
    return row;
}

int nb_srv_check_lock(struct nb_ctx *ctx, const json_t *inst)
{
    if (nb_json_int(inst, "locked", 0) && !ctx->is_admin)
        return nb_error(ctx, 409, NULL, "Instance %s is locked", nb_json_str(inst, "uuid"));
    return 0;
}

int nb_srv_invalid_state(struct nb_ctx *ctx, const char *action, const char *uuid, const char *attr,
                         const char *state)
{
    return nb_error(ctx, 409, NULL, "Cannot '%s' instance %s while it is in %s %s", action, uuid,
                    attr, state ? state : "None");
}

/* Soft-deletes an instance row and what hangs off it, as Nova's local
 * delete then instance.destroy() do, in the caller's transaction. With
 * only_unscheduled, only while the instance has no host (the conductor may
 * be placing it). Returns the number of instances deleted (0/1) or -1. */
int nb_srv_destroy_instance(struct nb_ctx *ctx, const char *uuid, bool only_unscheduled)
{
    struct nb_db *db = nb_srv_db();
    char now[32];
    nb_now_iso_us(now);
    int n = nb_db_exec(db, ctx,
                       only_unscheduled
                           ? "UPDATE instances SET vm_state = 'deleted', task_state = NULL, "
                             "progress = 0, terminated_at = ?, deleted_at = ?, updated_at = ?, "
                             "deleted = id WHERE uuid = ? AND deleted = 0 AND "
                             "(host IS NULL OR host = '')"
                           : "UPDATE instances SET vm_state = 'deleted', task_state = NULL, "
                             "progress = 0, terminated_at = ?, deleted_at = ?, updated_at = ?, "
                             "deleted = id WHERE uuid = ? AND deleted = 0",
                       "ssss", now, now, now, uuid);
    if (n <= 0)
        return n;
    if (nb_db_exec(db, ctx,
                   "UPDATE instance_metadata SET deleted = id WHERE instance_uuid = ? AND "
                   "deleted = 0",
                   "s", uuid) < 0 ||
        nb_db_exec(db, ctx,
                   "UPDATE instance_system_metadata SET deleted = id WHERE instance_uuid = ? AND "
                   "deleted = 0",
                   "s", uuid) < 0 ||
        nb_db_exec(db, ctx,
                   "UPDATE block_device_mapping SET deleted = id, deleted_at = ? WHERE "
                   "instance_uuid = ? AND deleted = 0",
                   "ss", now, uuid) < 0 ||
        nb_db_exec(db, ctx,
                   "UPDATE instance_faults SET deleted = id WHERE instance_uuid = ? AND "
                   "deleted = 0",
                   "s", uuid) < 0 ||
        nb_db_exec(db, ctx,
                   "UPDATE instance_info_caches SET deleted = id, deleted_at = ? WHERE "
                   "instance_uuid = ? AND deleted = 0",
                   "ss", now, uuid) < 0 ||
        nb_db_exec(db, ctx, "DELETE FROM tags WHERE resource_id = ?", "s", uuid) < 0 ||
        nb_db_exec(db, ctx, "DELETE FROM instance_group_member WHERE instance_uuid = ?", "s",
                   uuid) < 0)
        return -1;
    return 1;
}
