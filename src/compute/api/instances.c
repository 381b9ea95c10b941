/* instances.c - the module's environment, instance lookup with Nova's
 * visibility rule, and the lock and state refusals (instances.h); the
 * soft delete is compute/objects' nb_instance_destroy. */
#include "common/json.h"
#include "common/util.h"
#include "compute/api/instances.h"
#include "compute/objects/instance.h"
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
        row = nb_instance_get(nb_srv_db(), ctx, uuid, with_deleted);
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
