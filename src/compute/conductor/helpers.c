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
#include "compute/objects/instance.h"
#include "db/db.h"
#include "placement/placement.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cond_clear_error(struct nb_ctx *ctx)
{
    ctx->err_status = 0;
    ctx->err_name[0] = '\0';
    ctx->err_msg[0] = '\0';
}

json_t *cond_instance_get(struct conductor *c, struct nb_ctx *ctx, const char *uuid)
{
    json_t *row = uuid ? nb_instance_get(c->db, ctx, uuid, true) : NULL;
    cond_clear_error(ctx);
    return row;
}

json_t *cond_instance_for_agent(struct conductor *c, struct nb_ctx *ctx, json_t *row)
{
    json_t *inst = nb_instance_agent_view(c->db, ctx, row);
    cond_clear_error(ctx);
    return inst;
}

void cond_event_start(struct conductor *c, struct nb_ctx *ctx, const char *uuid, const char *event,
                      const char *host)
{
    if (nb_event_start(c->db, ctx, uuid, event, host) < 0) {
        NB_WARN(LOG_COND, ctx, uuid, "could not record the start of event %s: %s", event,
                ctx->err_msg);
        cond_clear_error(ctx);
    }
}

void cond_event_finish(struct conductor *c, struct nb_ctx *ctx, const char *uuid, const char *event,
                       bool ok, const char *details)
{
    if (nb_event_finish(c->db, ctx, uuid, event, ok ? "Success" : "Error", ok ? NULL : details,
                        details) < 0) {
        NB_WARN(LOG_COND, ctx, uuid, "could not record the end of event %s: %s", event,
                ctx->err_msg);
        cond_clear_error(ctx);
    }
}

void cond_fault(struct conductor *c, struct nb_ctx *ctx, const char *uuid, int code,
                const char *message, const char *details, const char *host)
{
    if (nb_fault_add(c->db, ctx, uuid, code, message, details, host) < 0) {
        NB_ERROR(LOG_COND, ctx, uuid, "could not record fault '%s': %s", message, ctx->err_msg);
        cond_clear_error(ctx);
    }
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
    int n = nb_instance_destroy(c->db, ctx, uuid, false, true);
    if (n < 0) {
        NB_ERROR(LOG_COND, ctx, uuid, "could not delete the instance record: %s", ctx->err_msg);
        return -1;
    }
    /* After the commit: a crash in between leaves an allocation of a deleted
     * instance, which recovery releases. */
    if (nb_placement_delete_allocations(ctx, uuid) < 0) {
        NB_ERROR(LOG_COND, ctx, uuid, "could not release the allocations: %s", ctx->err_msg);
        cond_clear_error(ctx);
    }
    if (n > 0) {
        nb_action_finish(c->db, ctx, uuid, NULL);
        cond_clear_error(ctx);
        NB_INFO(LOG_COND, ctx, uuid, "Instance deleted and its allocations released");
    }
    return 0;
}
