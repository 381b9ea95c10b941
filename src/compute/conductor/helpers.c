/* helpers.c - the instance helpers every conductor workflow shares: the
 * instance row and its agent view, events and faults that log instead of
 * failing, the local delete, and the cast to a host's agent (see helpers.h;
 * internal.h for the concurrency rule they follow). */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "compute/compute.h"
#include "compute/conductor/helpers.h"
#include "compute/conductor/internal.h"
#include "db/db.h"
#include "placement/placement.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

json_t *cond_instance_get(struct conductor *c, struct nb_ctx *ctx, const char *uuid)
{
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    return uuid ? nb_db_row(c->db, &sub, "SELECT * FROM instances WHERE uuid = ?", "s", uuid)
                : NULL;
}

json_t *cond_instance_for_agent(struct conductor *c, struct nb_ctx *ctx, json_t *row)
{
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    return nb_instance_agent_view(c->db, &sub, row);
}

/* Logs (WARNING) that a record kept on sub, a child of ctx, failed (rc < 0):
 * "could not record <what><name>: <sub's message>". */
static void unrecorded(int rc, const struct nb_ctx *ctx, const struct nb_ctx *sub, const char *uuid,
                       const char *what, const char *name)
{
    if (rc < 0)
        NB_WARN(LOG_COND, ctx, uuid, "could not record %s%s: %s", what, name, nb_ctx_message(sub));
}

void cond_event_start(struct conductor *c, struct nb_ctx *ctx, const char *uuid, const char *event,
                      const char *host)
{
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    unrecorded(nb_event_start(c->db, &sub, uuid, event, host), ctx, &sub, uuid,
               "the start of event ", event);
}

void cond_event_finish(struct conductor *c, struct nb_ctx *ctx, const char *uuid, const char *event,
                       bool ok, const char *details)
{
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    unrecorded(nb_event_finish(c->db, &sub, uuid, event, ok ? "Success" : "Error",
                               ok ? NULL : details, details),
               ctx, &sub, uuid, "the end of event ", event);
}

void cond_fault(struct conductor *c, struct nb_ctx *ctx, const char *uuid, int code,
                const char *message, const char *details, const char *host)
{
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    if (nb_fault_add(c->db, &sub, uuid, code, message, details, host) < 0)
        NB_ERROR(LOG_COND, ctx, uuid, "could not record fault '%s': %s", message,
                 nb_ctx_message(&sub));
}

void cond_action_start(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                       const char *action)
{
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    unrecorded(nb_action_start(c->db, &sub, uuid, action), ctx, &sub, uuid, "the start of action ",
               action);
}

void cond_action_finish(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                        const char *result)
{
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    unrecorded(nb_action_finish(c->db, &sub, uuid, result), ctx, &sub, uuid,
               "the end of the action", "");
}

void cond_release_allocations(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                              const char *host)
{
    (void)c;
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    if (nb_placement_delete_allocations(&sub, uuid) < 0)
        NB_ERROR(LOG_COND, ctx, uuid, "could not release the allocation%s%s: %s",
                 host ? " on " : "s", host ? host : "", nb_ctx_message(&sub));
}

int cond_local_delete(struct conductor *c, struct nb_ctx *ctx, const char *uuid)
{
    /* The guest is gone (or never was): its volumes are let go first, as
     * Nova's _shutdown_instance / _cleanup_volumes, while the mappings still
     * say which they are. */
    cond_cleanup_volumes(c, ctx, uuid);
    /* Its ports too (Nova's _try_deallocate_network), before the row is
     * deleted: a crash in between leaves a delete that is run again. */
    cond_deallocate_networks(c, ctx, uuid);
    char now[32];
    nb_now_iso_us(now);
    if (nb_db_begin(c->db, ctx) < 0)
        return -1;
    int n =
        nb_db_exec(c->db, ctx,
                   "UPDATE instances SET deleted = id, vm_state = 'deleted', task_state = NULL, "
                   "power_state = 0, deleted_at = ?, terminated_at = ?, updated_at = ? "
                   "WHERE uuid = ? AND deleted = 0",
                   "ssss", now, now, now, uuid);
    if (n < 0 ||
        nb_db_exec(c->db, ctx,
                   "UPDATE block_device_mapping SET deleted = id, deleted_at = ? "
                   "WHERE instance_uuid = ? AND deleted = 0",
                   "ss", now, uuid) < 0 ||
        nb_db_exec(
            c->db, ctx,
            "UPDATE instance_metadata SET deleted = id WHERE instance_uuid = ? AND deleted = 0",
            "s", uuid) < 0 ||
        nb_db_exec(
            c->db, ctx,
            "UPDATE instance_faults SET deleted = id WHERE instance_uuid = ? AND deleted = 0", "s",
            uuid) < 0 ||
        nb_db_exec(c->db, ctx, "DELETE FROM tags WHERE resource_id = ?", "s", uuid) < 0 ||
        nb_db_exec(c->db, ctx,
                   "UPDATE instance_system_metadata SET deleted = id WHERE instance_uuid = ? AND "
                   "deleted = 0",
                   "s", uuid) < 0 ||
        nb_db_exec(c->db, ctx, "DELETE FROM instance_group_member WHERE instance_uuid = ?", "s",
                   uuid) < 0 ||
        nb_db_exec(c->db, ctx,
                   "UPDATE instance_info_caches SET deleted = id, deleted_at = ? WHERE "
                   "instance_uuid = ? AND deleted = 0",
                   "ss", now, uuid) < 0) {
        nb_db_rollback(c->db);
        NB_ERROR(LOG_COND, ctx, uuid, "could not delete the instance record: %s",
                 nb_ctx_message(ctx));
        return -1;
    }
    if (nb_db_commit(c->db, ctx) < 0)
        return -1;
    /* After the commit: a crash in between leaves an allocation of a deleted
     * instance, which recovery releases. */
    cond_release_allocations(c, ctx, uuid, NULL);
    if (n > 0) {
        cond_action_finish(c, ctx, uuid, NULL);
        NB_INFO(LOG_COND, ctx, uuid, "Instance deleted and its allocations released");
    }
    return 0;
}
