/* migration.h - Nova's Migration object: one record per move of an
 * instance (cold migration, resize, live migration, evacuation), table
 * migrations with Nova's columns (migration 054). The move workflows
 * create it, advance its status and read it; the API lists it
 * (os-migrations, /servers/{id}/migrations).
 *
 * Rows come back as JSON objects with the table's columns. */
#ifndef NB_COMPUTE_OBJECTS_MIGRATION_H
#define NB_COMPUTE_OBJECTS_MIGRATION_H

#include "common/ctx.h"
#include "common/util.h"
#include <jansson.h>
#include <stdbool.h>

struct nb_db;

/* migration_type */
#define NB_MIGRATION_COLD "migration"
#define NB_MIGRATION_RESIZE "resize"
#define NB_MIGRATION_LIVE "live-migration"
#define NB_MIGRATION_EVACUATION "evacuation"

/* status, as Nova's (see COMPAT-NOTES, "Moving servers") */
#define NB_MIGRATION_ACCEPTED "accepted"
#define NB_MIGRATION_QUEUED "queued"
#define NB_MIGRATION_PREPARING "preparing"
#define NB_MIGRATION_RUNNING "running"
#define NB_MIGRATION_POST_MIGRATING "post-migrating"
#define NB_MIGRATION_COMPLETED "completed"
#define NB_MIGRATION_PRE_MIGRATING "pre-migrating"
#define NB_MIGRATION_MIGRATING "migrating"
#define NB_MIGRATION_FINISHED "finished"
#define NB_MIGRATION_CONFIRMED "confirmed"
#define NB_MIGRATION_REVERTED "reverted"
#define NB_MIGRATION_DONE "done"
#define NB_MIGRATION_ERROR "error"
#define NB_MIGRATION_FAILED "failed"
#define NB_MIGRATION_CANCELLED "cancelled"

/* What a new migration records (NULL / 0: not known). */
struct nb_migration_new {
    const char *instance_uuid;  /* required */
    const char *migration_type; /* one of NB_MIGRATION_COLD … _EVACUATION, required */
    const char *status;         /* required */
    const char *source_compute, *source_node;
    const char *dest_compute, *dest_node, *dest_host;
    long long old_instance_type_id, new_instance_type_id;
    const char *user_id, *project_id;
};

/* Creates the record; its new uuid into uuid_out. 0, or -1 (400 for a
 * missing field or an unknown migration_type, 500 from the database). Joins
 * the caller's transaction if one is open. */
int nb_migration_create(struct nb_db *db, struct nb_ctx *ctx, const struct nb_migration_new *m,
                        char uuid_out[NB_UUID_LEN]);

/* The live (not deleted) migration uuid: new ref, or NULL (404 "Migration
 * <uuid> could not be found." or a database error on ctx). */
json_t *nb_migration_get(struct nb_db *db, struct nb_ctx *ctx, const char *uuid);

/* The live migrations of instance_uuid, newest first: new array (maybe
 * empty), or NULL on error. */
json_t *nb_migration_list_by_instance(struct nb_db *db, struct nb_ctx *ctx,
                                      const char *instance_uuid);

/* Sets the status of migration uuid, only while it is expected_status
 * (NULL: any): Nova's migration.save() guarded as instance.save() is.
 * 1 changed, 0 not (gone, or in another status), -1 on error. */
int nb_migration_set_status(struct nb_db *db, struct nb_ctx *ctx, const char *uuid,
                            const char *status, const char *expected_status);

/* What nb_migration_update changes: NULL strings, 0 ids and false flags
 * leave a column as it is. */
struct nb_migration_change {
    const char *status;
    const char *expected_status; /* change only while in this status (NULL: any) */
    const char *source_node, *dest_compute, *dest_node, *dest_host;
    long long new_instance_type_id;
    bool set_memory; /* memory_total/_processed/_remaining (bytes) */
    long long memory_total, memory_processed, memory_remaining;
    bool set_disk; /* disk_total/_processed/_remaining (bytes) */
    long long disk_total, disk_processed, disk_remaining;
};

/* Applies c to live migration uuid (and updated_at), guarded by
 * c->expected_status as nb_migration_set_status is. Joins the caller's
 * transaction. 1 changed, 0 not, -1 on error. */
int nb_migration_update(struct nb_db *db, struct nb_ctx *ctx, const char *uuid,
                        const struct nb_migration_change *c);

/* The filters and paging of Nova's migration_get_all_by_filters
 * (os-migrations). NULL strings and hidden < 0 do not filter. Hidden rows
 * are never listed (the API drops them). */
struct nb_migration_filter {
    const char *host;           /* source_compute or dest_compute */
    const char *source_compute; /* only when host is NULL, as Nova */
    const char *status, *instance_uuid, *migration_type, *user_id, *project_id;
    int hidden; /* 1: only hidden rows (so none), 0 or < 0: not filtered */
    /* updated_at bounds, inclusive, as stored ("YYYY-MM-DDTHH:MM:SS.ffffff") */
    const char *changes_since, *changes_before;
    /* paged: newest first (created_at, id descending), after the migration
     * uuid marker (NULL: from the start), at most limit rows (< 0: all).
     * Not paged: oldest first, marker and limit ignored. */
    bool paged;
    const char *marker;
    long long limit;
};

/* The live, not hidden migrations matching f: new array (maybe empty), or
 * NULL after 400 "Marker <uuid> could not be found." (an unknown or deleted
 * marker) or a database error. */
json_t *nb_migration_list(struct nb_db *db, struct nb_ctx *ctx,
                          const struct nb_migration_filter *f);

/* The migration with id (the integer column) of instance_uuid: new ref, or
 * NULL after 404 "Migration <id> not found for instance <uuid>" (Nova's
 * MigrationNotFoundForInstance) or a database error. */
json_t *nb_migration_get_by_id_and_instance(struct nb_db *db, struct nb_ctx *ctx, long long id,
                                            const char *instance_uuid);

/* The live migrations of instance_uuid in progress (queued, preparing,
 * running, post-migrating) of migration_type (NULL: any), oldest first:
 * new array, or NULL on error. */
json_t *nb_migration_list_in_progress(struct nb_db *db, struct nb_ctx *ctx,
                                      const char *instance_uuid, const char *migration_type);

/* Whether status is one Nova's server migrations API calls in progress
 * (queued, preparing, running, post-migrating). */
bool nb_migration_in_progress(const char *status);

#endif
