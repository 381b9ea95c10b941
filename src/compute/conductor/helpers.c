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
#include "compute/objects/migration.h"
#include "db/db.h"
#include "placement/placement.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

json_t *cond_instance_get(struct conductor *c, struct nb_ctx *ctx, const char *uuid)
{
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    json_t *row = NULL;
    /* a database restart or Galera failover is waited out: a NULL here
     * reads as "deleted meanwhile" and would stop the work in its task state */
    for (int tries = 1; uuid && !(row = nb_instance_get(c->db, &sub, uuid, true)) &&
                        nb_db_redo_or_wait(c->db, &sub, tries);
         tries++)
        ;
    return row;
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

int cond_release_allocations(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                             const char *host)
{
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    int rc;
    /* conflicts are redone inside; a database restart or failover waited out */
    for (int tries = 1; (rc = nb_placement_delete_allocations(&sub, uuid)) < 0 &&
                        nb_db_redo_or_wait(c->db, &sub, tries);
         tries++)
        ;
    if (rc < 0)
        NB_ERROR(LOG_COND, ctx, uuid, "could not release the allocation%s%s: %s",
                 host ? " on " : "s", host ? host : "", nb_ctx_message(&sub));
    return rc;
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
    int n;
    /* redone on a conflict, and through a database restart or Galera
     * failover: the server must not stay in its deleting task state */
    for (int tries = 1; (n = nb_instance_destroy(c->db, ctx, uuid, false, true)) < 0 &&
                        nb_db_redo_or_wait(c->db, ctx, tries);
         tries++)
        ;
    if (n < 0) {
        NB_ERROR(LOG_COND, ctx, uuid, "could not delete the instance record: %s",
                 nb_ctx_message(ctx));
        return -1;
    }
    /* After the commit: a crash in between leaves an allocation of a deleted
     * instance, which recovery releases. */
    bool released = cond_release_allocations(c, ctx, uuid, NULL) == 0;
    if (n > 0) {
        cond_action_finish(c, ctx, uuid, NULL);
        NB_INFO(LOG_COND, ctx, uuid, "Instance deleted%s",
                released ? " and its allocations released" : "");
    }
    return 0;
}

bool cond_still_requested(struct conductor *c, struct nb_ctx *ctx, const json_t *row,
                          const char *task, const char *migration_uuid, const char *status,
                          const char *method)
{
    const char *uuid = nb_json_str(row, "uuid");
    const char *t = nb_json_str(row, "task_state");
    const char *st = NULL;
    _cleanup_json_ json_t *mig = NULL;
    if (migration_uuid) {
        struct nb_ctx sub;
        nb_ctx_child(&sub, ctx);
        mig = nb_migration_get(c->db, &sub, migration_uuid);
        st = nb_json_str(mig, "status");
    }
    if (!strcmp(t ? t : "", task) && (!migration_uuid || (st && !strcmp(st, status))))
        return true;
    NB_INFO(LOG_COND, ctx, uuid, "%s dropped: delivered again or too late (task_state %s%s%s%s%s)",
            method, t ? t : "None", migration_uuid ? ", migration " : "",
            migration_uuid ? migration_uuid : "", migration_uuid ? " " : "",
            migration_uuid ? (st ? st : "gone") : "");
    return false;
}
