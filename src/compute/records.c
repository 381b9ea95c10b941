/* records.c - what the other modules and the host tools need of compute's
 * own tables, which only code under src/compute names in SQL (issue 10:
 * one owner per table, src/db/owners.tsv): the default flavors an
 * all-in-one is seeded with, the service rows `nubo status` reports, and
 * whether an instance still maps a volume attachment (Cinder asks before
 * it deletes one), and the action events of a request (`nubo trace`). Each function runs on
 * the caller's connection to the shared database, so it works in any
 * process that has one open, with or without the compute API. */
#include "common/util.h"
#include "compute/compute.h"
#include "db/db.h"

int nb_flavor_seed(struct nb_db *db, struct nb_ctx *ctx, const char *flavorid, const char *name,
                   int memory_mb, int vcpus, int root_gb)
{
    char now[32];
    nb_now_iso_us(now);
    int n = nb_db_insert_ignore(db, ctx,
                                "INTO flavors (flavorid, name, memory_mb, vcpus, root_gb, "
                                "created_at) VALUES (?, ?, ?, ?, ?, ?)",
                                "ssiiis", flavorid, name, (long long)memory_mb, (long long)vcpus,
                                (long long)root_gb, now);
    return n < 0 ? -1 : n > 0;
}

json_t *nb_service_list(struct nb_db *db, struct nb_ctx *ctx)
{
    return nb_db_rows(db, ctx,
                      "SELECT host, \"binary\", topic, report_count, disabled, disabled_reason, "
                      "forced_down, last_seen_up, version, created_at, updated_at FROM services "
                      "WHERE deleted = 0 ORDER BY \"binary\", host",
                      "");
}

int nb_compute_volume_mapped(struct nb_db *db, struct nb_ctx *ctx, const char *instance_uuid,
                             const char *volume_id, const char *attachment_id)
{
    long long n = nb_db_int(db, ctx, -1,
                            "SELECT COUNT(*) FROM block_device_mapping WHERE instance_uuid = ? AND "
                            "volume_id = ? AND attachment_id = ? AND deleted = 0",
                            "sss", instance_uuid, volume_id, attachment_id);
    return n < 0 ? -1 : n > 0;
}

json_t *nb_request_events(struct nb_db *db, struct nb_ctx *ctx, const char *request_id)
{
    return nb_db_rows(db, ctx,
                      "SELECT a.action, a.instance_uuid, a.message AS action_message, e.event, "
                      "e.start_time, e.finish_time, e.result, e.host, e.traceback, e.details "
                      "FROM instance_actions a JOIN instance_actions_events e ON e.action_id = "
                      "a.id WHERE a.request_id = ? AND a.deleted = 0 AND e.deleted = 0 ORDER BY "
                      "e.start_time, e.id",
                      "s", request_id);
}
