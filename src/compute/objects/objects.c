/* objects.c - the action/event/fault records every compute part writes,
 * and the instance as the agent sees it (see compute.h). */
#include "compute/compute.h"
#include "compute/objects/block_device.h"
#include "common/cleanup.h"
#include "common/json.h"
#include "common/util.h"
#include "db/db.h"

#include <string.h>

int nb_action_start(struct nb_db *db, struct nb_ctx *ctx, const char *instance_uuid,
                    const char *action)
{
    char now[32];
    nb_now_iso_us(now);
    if (nb_db_int(
            db, ctx, 0,
            "SELECT COUNT(*) FROM instance_actions WHERE instance_uuid = ? AND request_id = ?",
            "ss", instance_uuid, ctx->request_id) > 0)
        return 0;
    return nb_db_exec(db, ctx,
                      "INSERT INTO instance_actions (action, instance_uuid, request_id, user_id, "
                      "project_id, start_time, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, "
                      "?, ?)",
                      "ssssssss", action, instance_uuid, ctx->request_id,
                      ctx->user_id[0] ? ctx->user_id : NULL,
                      ctx->project_id[0] ? ctx->project_id : NULL, now, now, now) < 0
               ? -1
               : 0;
}

int nb_action_finish(struct nb_db *db, struct nb_ctx *ctx, const char *instance_uuid,
                     const char *message)
{
    char now[32];
    nb_now_iso_us(now);
    return nb_db_exec(db, ctx,
                      "UPDATE instance_actions SET finish_time = ?, updated_at = ?, "
                      "message = COALESCE(?, message) WHERE instance_uuid = ? AND request_id = ?",
                      "sssss", now, now, message, instance_uuid, ctx->request_id) < 0
               ? -1
               : 0;
}

int nb_event_start(struct nb_db *db, struct nb_ctx *ctx, const char *instance_uuid,
                   const char *event, const char *host)
{
    long long action_id = nb_db_int(db, ctx, 0,
                                    "SELECT id FROM instance_actions WHERE instance_uuid = ? AND "
                                    "request_id = ? ORDER BY id DESC LIMIT 1",
                                    "ss", instance_uuid, ctx->request_id);
    if (action_id < 0)
        return -1;
    if (action_id == 0) {
        /* Work not started by an API request (periodic tasks): make one. */
        if (nb_action_start(db, ctx, instance_uuid, event) < 0)
            return -1;
        action_id = nb_db_int(db, ctx, 0,
                              "SELECT id FROM instance_actions WHERE instance_uuid = ? AND "
                              "request_id = ? ORDER BY id DESC LIMIT 1",
                              "ss", instance_uuid, ctx->request_id);
        if (action_id <= 0)
            return -1;
    }
    char now[32];
    nb_now_iso_us(now);
    if (nb_db_exec(db, ctx, "UPDATE instance_actions SET updated_at = ? WHERE id = ?", "si", now,
                   action_id) < 0)
        return -1;
    return nb_db_exec(db, ctx,
                      "INSERT INTO instance_actions_events (action_id, event, start_time, host, "
                      "created_at) VALUES (?, ?, ?, ?, ?)",
                      "issss", action_id, event, now, host, now) < 0
               ? -1
               : 0;
}

int nb_event_finish(struct nb_db *db, struct nb_ctx *ctx, const char *instance_uuid,
                    const char *event, const char *result, const char *traceback,
                    const char *details)
{
    char now[32];
    nb_now_iso_us(now);
    /* the event's row first, then an update by its id: on MariaDB one
     * UPDATE … WHERE id = (SELECT … same table …) locks what its subquery
     * scans, and concurrent builds then deadlock */
    long long id = nb_db_int(db, ctx, 0,
                             "SELECT e.id FROM instance_actions_events e JOIN instance_actions a "
                             "ON a.id = e.action_id WHERE a.instance_uuid = ? AND a.request_id = "
                             "? AND e.event = ? AND e.finish_time IS NULL ORDER BY e.id DESC "
                             "LIMIT 1",
                             "sss", instance_uuid, ctx->request_id, event);
    if (nb_ctx_failed(ctx))
        return -1;
    int n = id <= 0 ? 0
                    : nb_db_exec(db, ctx,
                                 "UPDATE instance_actions_events SET finish_time = ?, result = ?, "
                                 "traceback = ?, details = ? WHERE id = ? AND finish_time IS NULL",
                                 "ssssi", now, result, traceback, details, id);
    if (n < 0)
        return -1;
    if (n == 0) /* finish of an event never started: record it whole */
        return nb_event_start(db, ctx, instance_uuid, event, NULL) < 0
                   ? -1
                   : nb_event_finish(db, ctx, instance_uuid, event, result, traceback, details);
    if (result && strcmp(result, "Error") == 0)
        nb_db_exec(db, ctx,
                   "UPDATE instance_actions SET message = 'Error' WHERE instance_uuid = ? AND "
                   "request_id = ?",
                   "ss", instance_uuid, ctx->request_id);
    return 0;
}

int nb_fault_add(struct nb_db *db, struct nb_ctx *ctx, const char *instance_uuid, int code,
                 const char *message, const char *details, const char *host)
{
    char now[32];
    nb_now_iso_us(now);
    return nb_db_exec(db, ctx,
                      "INSERT INTO instance_faults (instance_uuid, code, message, details, host, "
                      "created_at) VALUES (?, ?, ?, ?, ?, ?)",
                      "sissss", instance_uuid, (long long)code, message, details, host, now) < 0
               ? -1
               : 0;
}

json_t *nb_fault_latest(struct nb_db *db, struct nb_ctx *ctx, const char *instance_uuid,
                        const char *since)
{
    return nb_db_row(db, ctx,
                     "SELECT code, message, details, host, created_at FROM instance_faults WHERE "
                     "instance_uuid = ? AND deleted = 0 AND (? IS NULL OR created_at >= ?) "
                     "ORDER BY id DESC LIMIT 1",
                     "sss", instance_uuid, since, since);
}

/* The instance as the agent (and the metadata service) gets it. */
json_t *nb_instance_agent_view(struct nb_db *db, struct nb_ctx *ctx, const json_t *row)
{
    const char *uuid = nb_json_str(row, "uuid");
    json_t *inst = json_pack(
        "{s:s?, s:s?, s:s?, s:s?, s:s?, s:s?, s:s?, s:s?, s:s?, s:s?, s:s?, s:s?, s:s?, s:I, s:s?, "
        "s:s?}",
        "uuid", uuid, "name", nb_json_str(row, "display_name"), "hostname",
        nb_json_str(row, "hostname"), "project_id", nb_json_str(row, "project_id"), "user_id",
        nb_json_str(row, "user_id"), "image_ref", nb_json_str(row, "image_ref"), "user_data",
        nb_json_str(row, "user_data"), "key_name", nb_json_str(row, "key_name"), "key_data",
        nb_json_str(row, "key_data"), "config_drive", nb_json_str(row, "config_drive"),
        "availability_zone", nb_json_str(row, "availability_zone"), "host",
        nb_json_str(row, "host"), "node", nb_json_str(row, "node"), "launch_index",
        (json_int_t)nb_json_int(row, "launch_index", 0), "reservation_id",
        nb_json_str(row, "reservation_id"), "root_device_name",
        nb_json_str(row, "root_device_name"));
    json_t *flavor = nb_json_parse(nb_json_str(row, "flavor"));
    json_object_set_new(inst, "flavor", flavor ? flavor : json_object());
    json_t *meta = json_object();
    _cleanup_json_ json_t *mrows = nb_db_rows(
        db, ctx,
        "SELECT \"key\", value FROM instance_metadata WHERE instance_uuid = ? AND deleted = 0", "s",
        uuid);
    size_t i;
    json_t *m;
    json_array_foreach (mrows, i, m) {
        if (nb_json_str(m, "key"))
            json_object_set_new(
                meta, nb_json_str(m, "key"),
                json_string(nb_json_str(m, "value") ? nb_json_str(m, "value") : ""));
    }
    json_object_set_new(inst, "metadata", meta);
    json_t *bdms = nb_bdm_rows(db, ctx, uuid);
    json_object_set_new(inst, "block_device_mapping", bdms ? bdms : json_array());
    /* the ports as the build cached them (the virt driver wires its VIFs) */
    _cleanup_json_ json_t *cache =
        nb_db_row(db, ctx, "SELECT network_info FROM instance_info_caches WHERE instance_uuid = ?",
                  "s", uuid);
    json_t *nw = nb_json_parse(nb_json_str(cache, "network_info"));
    if (!json_is_array(nw)) {
        json_decref(nw);
        nw = json_array();
    }
    json_object_set_new(inst, "network_info", nw);
    return inst;
}
