/* live_migrate.h - what the conductor's live-migration files share:
 * live_migrate.c (Nova's LiveMigrationTask and the compute manager's
 * post/rollback steps, driven from the conductor), live_migrate_hosts.c
 * (the facts about a candidate destination, and its claim) and
 * live_migrate_run.c (the move on the source, its end); recovery.c picks
 * up the migrations a restart interrupted. */
#ifndef NB_CONDUCTOR_LIVE_MIGRATE_H
#define NB_CONDUCTOR_LIVE_MIGRATE_H

#include "common/ctx.h"
#include "common/util.h"
#include <jansson.h>
#include <stdbool.h>

struct conductor;

#define LOG_LM "nubo.conductor.tasks.live_migrate"

/* Nova's event names of a live migration. */
#define EV_LM_CONDUCTOR "conductor_live_migrate_instance"
#define EV_LM_CHECK_DEST "compute_check_can_live_migrate_destination"
#define EV_LM_CHECK_SOURCE "compute_check_can_live_migrate_source"
#define EV_LM_PRE "compute_pre_live_migration"
#define EV_LM_RUN "compute_live_migration"
#define EV_LM_POST_DEST "compute_post_live_migration_at_destination"
#define EV_LM_ROLLBACK_DEST "compute_rollback_live_migration_at_destination"

/* One live migration (or its dry run) as the conductor handles it. */
struct lm_task {
    struct conductor *c;
    struct nb_ctx *ctx;
    json_t *row;                 /* the instance row (owned) */
    const char *uuid;            /* borrowed from row */
    const char *source;          /* row's host */
    const char *source_node;     /* row's node */
    const char *migration_uuid;  /* NULL for a dry run */
    const char *block_migration; /* "true", "false", "auto" */
    bool dry_run;
};

/* live_migrate.c: the bus handlers (conductor_api.h) */
void cond_live_migrate_instance(struct conductor *c, struct nb_ctx *ctx, json_t *args);
json_t *cond_check_live_migration(struct conductor *c, struct nb_ctx *ctx, json_t *args);
/* live_migrate_run.c: the source's reports, abort and force-complete */
json_t *cond_live_migration_status(struct conductor *c, struct nb_ctx *ctx, json_t *args);
void cond_live_migration_result(struct conductor *c, struct nb_ctx *ctx, json_t *args);
void cond_live_migration_abort(struct conductor *c, struct nb_ctx *ctx, json_t *args);
void cond_live_migration_force_complete(struct conductor *c, struct nb_ctx *ctx, json_t *args);
/* Finishes migration mig (row) whose guest runs on its destination (note:
 * what made it converge, for the event's details, or NULL), or rolls it
 * back (phase, message: the cause; cancelled: an abort). Used by the result
 * handler and by recovery. A finish first claims the record (a status in
 * progress to post-migrating; mig post-migrating: an interrupted finish
 * resumed) and does nothing when another took it. */
void cond_lm_finish(struct conductor *c, struct nb_ctx *ctx, const json_t *mig, bool shared,
                    const char *note);
void cond_lm_rollback(struct conductor *c, struct nb_ctx *ctx, const json_t *mig, const char *phase,
                      const char *message, bool cancelled, bool shared);

/* What recovery does with a live migration in status (its record's),
 * given whether the source's agent still runs it (1), does not (0) or did
 * not answer (-1): nothing (it ended), leave it (its agent's result ends
 * it), refuse it (interrupted in its prechecks), or ask the destination
 * (the guest there: finished; else rolled back). A post-migrating one (its
 * result was taken, its finish interrupted) goes by the destination
 * whatever source_runs says. */
enum cond_lm_recovery { COND_LM_NONE, COND_LM_LEAVE, COND_LM_REFUSE, COND_LM_BY_DEST };
enum cond_lm_recovery cond_lm_recovery_step(const char *status, int source_runs);

/* A migration whose run was interrupted (why: by what): the source's agent
 * is asked first (up to 10 s); one it still runs is left (logged).
 * Otherwise, with the instance's open events closed: refused when it was
 * in its prechecks, finished when the destination's agent says the guest
 * runs there, else rolled back (after an abort sent to the source).
 * Serialised with the other recoveries and with the migration's result;
 * a migration that ended meanwhile is left alone. */
void cond_lm_recover(struct conductor *c, struct nb_ctx *ctx, const char *migration_uuid,
                     const char *why);
/* host's compute agent registered (it started): the live migrations it was
 * running as their source are recovered, in a thread of their own. */
void cond_lm_source_restarted(struct conductor *c, const char *host);

/* live_migrate_hosts.c */
/* The facts about dest as a destination of t (migrate_checks.h), new ref.
 * claim_evidence: the scheduler's claim on dest (its reply), or NULL: then
 * t's own claim is made (dry run: only weighed) unless the service or
 * destination checks already fail. Each call to an agent runs on a child
 * context; nothing is left on t->ctx. */
json_t *cond_lm_facts(struct lm_task *t, const char *dest, const json_t *scheduled);
/* The compute hosts besides the source, by name (dry run of a scheduled
 * destination). New array. */
json_t *cond_lm_other_hosts(struct lm_task *t);
/* The compute node row of host (first by id), new ref or NULL. */
json_t *cond_lm_node(struct lm_task *t, const char *host);

/* live_migrate.c: handing the instance's allocations between consumers
 * (Nova's migration-consumer model). */
/* Moves the source allocation back from the migration to the instance and
 * drops any destination claim of the instance (best-effort, logged). */
void cond_lm_allocations_back(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                              const char *migration_uuid);

#endif
