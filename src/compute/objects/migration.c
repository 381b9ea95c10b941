/* migration.c - the migrations table (see migration.h): the only SQL that
 * names it. */
#include "compute/objects/migration.h"

#include "common/json.h"
#include "db/db.h"

#include <limits.h>
#include <string.h>

static bool known_type(const char *t)
{
    static const char *const types[] = {NB_MIGRATION_COLD, NB_MIGRATION_RESIZE, NB_MIGRATION_LIVE,
                                        NB_MIGRATION_EVACUATION};
    for (size_t i = 0; t && i < sizeof(types) / sizeof(types[0]); i++)
        if (!strcmp(t, types[i]))
            return true;
    return false;
}

int nb_migration_create(struct nb_db *db, struct nb_ctx *ctx, const struct nb_migration_new *m,
                        char uuid_out[NB_UUID_LEN])
{
    if (!m->instance_uuid || !m->status)
        return nb_error(ctx, 400, NULL, "A migration needs %s.",
                        m->instance_uuid ? "a status" : "an instance_uuid");
    if (!known_type(m->migration_type))
        return nb_error(ctx, 400, NULL, "Invalid migration_type: %s",
                        m->migration_type ? m->migration_type : "(none)");
    char uuid[NB_UUID_LEN], now[32];
    nb_uuid(uuid);
    nb_now_iso_us(now);
    if (nb_db_exec(db, ctx,
                   "INSERT INTO migrations (uuid, instance_uuid, migration_type, status, "
                   "source_compute, source_node, dest_compute, dest_node, dest_host, "
                   "old_instance_type_id, new_instance_type_id, user_id, project_id, created_at, "
                   "updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, CASE WHEN ? THEN ? END, "
                   "CASE WHEN ? THEN ? END, ?, ?, ?, ?)",
                   "sssssssssbibissss", uuid, m->instance_uuid, m->migration_type, m->status,
                   m->source_compute, m->source_node, m->dest_compute, m->dest_node, m->dest_host,
                   m->old_instance_type_id != 0, m->old_instance_type_id,
                   m->new_instance_type_id != 0, m->new_instance_type_id, m->user_id, m->project_id,
                   now, now) < 0)
        return -1;
    nb_strlcpy(uuid_out, uuid, NB_UUID_LEN);
    return 0;
}

json_t *nb_migration_get(struct nb_db *db, struct nb_ctx *ctx, const char *uuid)
{
    json_t *row =
        nb_db_row(db, ctx, "SELECT * FROM migrations WHERE uuid = ? AND deleted = 0", "s", uuid);
    if (!row && !nb_ctx_failed(ctx))
        nb_error(ctx, 404, NULL, "Migration %s could not be found.", uuid);
    return row;
}

json_t *nb_migration_list_by_instance(struct nb_db *db, struct nb_ctx *ctx,
                                      const char *instance_uuid)
{
    return nb_db_rows(db, ctx,
                      "SELECT * FROM migrations WHERE instance_uuid = ? AND deleted = 0 "
                      "ORDER BY created_at DESC, id DESC",
                      "s", instance_uuid);
}

int nb_migration_set_status(struct nb_db *db, struct nb_ctx *ctx, const char *uuid,
                            const char *status, const char *expected_status)
{
    char now[32];
    nb_now_iso_us(now);
    return nb_db_exec(db, ctx,
                      "UPDATE migrations SET status = ?, updated_at = ? WHERE uuid = ? AND "
                      "deleted = 0 AND (? IS NULL OR status = ?)",
                      "sssss", status, now, uuid, expected_status, expected_status);
}

int nb_migration_update(struct nb_db *db, struct nb_ctx *ctx, const char *uuid,
                        const struct nb_migration_change *c)
{
    char now[32];
    nb_now_iso_us(now);
    return nb_db_exec(
        db, ctx,
        "UPDATE migrations SET status = COALESCE(?, status), "
        "source_node = COALESCE(?, source_node), dest_compute = COALESCE(?, dest_compute), "
        "dest_node = COALESCE(?, dest_node), dest_host = COALESCE(?, dest_host), "
        "new_instance_type_id = CASE WHEN ? THEN ? ELSE new_instance_type_id END, "
        "memory_total = CASE WHEN ? THEN ? ELSE memory_total END, "
        "memory_processed = CASE WHEN ? THEN ? ELSE memory_processed END, "
        "memory_remaining = CASE WHEN ? THEN ? ELSE memory_remaining END, "
        "disk_total = CASE WHEN ? THEN ? ELSE disk_total END, "
        "disk_processed = CASE WHEN ? THEN ? ELSE disk_processed END, "
        "disk_remaining = CASE WHEN ? THEN ? ELSE disk_remaining END, updated_at = ? "
        "WHERE uuid = ? AND deleted = 0 AND (? IS NULL OR status = ?)",
        "sssssbibibibibibibissss", c->status, c->source_node, c->dest_compute, c->dest_node,
        c->dest_host, c->new_instance_type_id != 0, c->new_instance_type_id, (int)c->set_memory,
        c->memory_total, (int)c->set_memory, c->memory_processed, (int)c->set_memory,
        c->memory_remaining, (int)c->set_disk, c->disk_total, (int)c->set_disk, c->disk_processed,
        (int)c->set_disk, c->disk_remaining, now, uuid, c->expected_status, c->expected_status);
}

bool nb_migration_in_progress(const char *status)
{
    static const char *const live[] = {NB_MIGRATION_QUEUED, NB_MIGRATION_PREPARING,
                                       NB_MIGRATION_RUNNING, NB_MIGRATION_POST_MIGRATING};
    for (size_t i = 0; status && i < sizeof(live) / sizeof(live[0]); i++)
        if (!strcmp(status, live[i]))
            return true;
    return false;
}

json_t *nb_migration_list(struct nb_db *db, struct nb_ctx *ctx, const struct nb_migration_filter *f)
{
    const char *marker = f->paged ? f->marker : NULL;
    if (marker) {
        json_t *m = nb_db_row(db, ctx, "SELECT id FROM migrations WHERE uuid = ? AND deleted = 0",
                              "s", marker);
        if (!m) {
            if (!nb_ctx_failed(ctx))
                nb_error(ctx, 400, NULL, "Marker %s could not be found.", marker);
            return NULL;
        }
        json_decref(m);
    }
    const char *source = f->host ? NULL : f->source_compute;
    return nb_db_rows(
        db, ctx,
        "SELECT * FROM migrations WHERE deleted = 0 AND hidden = 0 AND NOT ? "
        "AND (? IS NULL OR source_compute = ? OR dest_compute = ?) "
        "AND (? IS NULL OR source_compute = ?) AND (? IS NULL OR status = ?) "
        "AND (? IS NULL OR instance_uuid = ?) AND (? IS NULL OR migration_type = ?) "
        "AND (? IS NULL OR user_id = ?) AND (? IS NULL OR project_id = ?) "
        "AND (? IS NULL OR updated_at >= ?) AND (? IS NULL OR updated_at <= ?) "
        "AND (? IS NULL OR (created_at, id) < "
        "(SELECT created_at, id FROM migrations WHERE uuid = ? AND deleted = 0)) "
        "ORDER BY CASE WHEN ? THEN created_at END DESC, CASE WHEN ? THEN id END DESC, id "
        "LIMIT ?",
        "bsssssssssssssssssssssbbi", f->hidden == 1, f->host, f->host, f->host, source, source,
        f->status, f->status, f->instance_uuid, f->instance_uuid, f->migration_type,
        f->migration_type, f->user_id, f->user_id, f->project_id, f->project_id, f->changes_since,
        f->changes_since, f->changes_before, f->changes_before, marker, marker, (int)f->paged,
        (int)f->paged, f->paged && f->limit >= 0 ? f->limit : LLONG_MAX);
}

json_t *nb_migration_get_by_id_and_instance(struct nb_db *db, struct nb_ctx *ctx, long long id,
                                            const char *instance_uuid)
{
    json_t *row = nb_db_row(db, ctx,
                            "SELECT * FROM migrations WHERE id = ? AND instance_uuid = ? AND "
                            "deleted = 0",
                            "is", id, instance_uuid);
    if (!row && !nb_ctx_failed(ctx))
        nb_error(ctx, 404, NULL, "Migration %lld not found for instance %s", id, instance_uuid);
    return row;
}

json_t *nb_migration_list_in_progress(struct nb_db *db, struct nb_ctx *ctx,
                                      const char *instance_uuid, const char *migration_type)
{
    return nb_db_rows(db, ctx,
                      "SELECT * FROM migrations WHERE instance_uuid = ? AND deleted = 0 AND "
                      "status IN (?, ?, ?, ?) AND (? IS NULL OR migration_type = ?) ORDER BY id",
                      "sssssss", instance_uuid, NB_MIGRATION_QUEUED, NB_MIGRATION_PREPARING,
                      NB_MIGRATION_RUNNING, NB_MIGRATION_POST_MIGRATING, migration_type,
                      migration_type);
}
