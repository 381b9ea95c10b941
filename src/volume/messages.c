/* messages.c - Cinder's user messages: what went wrong with a user's
 * request after it was accepted, for the user to read
 * (GET /volume/v3/{project_id}/messages, `openstack volume message list`,
 * microversion 3.3 and later).
 *
 * A message is recorded where an accepted request fails later (a volume no
 * share can hold is accepted with 202 and ends "error"; its message says
 * why). As in Cinder, a row keeps the action and detail ids, and the text
 * ("schedule allocate volume:Could not find any available weighted
 * backend.") is built from them when shown; event_id is
 * VOLUME_<resource type>_<action>_<detail> (message/api.py). Messages live
 * [volume] message_ttl seconds (guaranteed_until); expired ones are removed
 * when a new one is recorded. */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "db/db.h"
#include "volume/volume.h"
#include "volume/volume_int.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#define MV_MESSAGES 3 /* 3.3 */

/* message_field.Action and message_field.Detail, by id */
static const char *const actions[][2] = {
    {"001", "schedule allocate volume"},
    {"002", "attach volume"},
    {"003", "copy volume to image"},
    {"004", "update attachment"},
    {"005", "copy image to volume"},
    {"006", "unmanage volume"},
    {"007", "extend volume"},
    {"008", "create volume from backend storage"},
    {"009", "create snapshot"},
    {"010", "delete snapshot"},
    {"011", "update snapshot"},
    {"012", "update snapshot metadata"},
    {"013", "create backup"},
    {"014", "delete backup"},
    {"015", "restore backup"},
    {"016", "reimage volume"},
};

static const char *const details[][2] = {
    {"001", "An unknown error occurred."},
    {"002", "Driver is not initialized at present."},
    {"003", "Could not find any available weighted backend."},
    {"004", "Failed to upload volume to image at backend."},
    {"005", "Volume's attach mode is invalid."},
    {"006", "Not enough quota resource for operation."},
    {"007", "Image used for creating volume exceeds available space."},
};

static const char *lookup(const char *const table[][2], size_t n, const char *id)
{
    for (size_t i = 0; id && i < n; i++)
        if (strcmp(table[i][0], id) == 0)
            return table[i][1];
    return NULL;
}

void nb_vol_message_text(const char *action_id, const char *detail_id, char *out, size_t n)
{
    const char *a = lookup(actions, sizeof(actions) / sizeof(actions[0]), action_id);
    const char *d = lookup(details, sizeof(details) / sizeof(details[0]), detail_id);
    /* translate_action falls back to "unknown action", translate_detail to
     * the unknown error */
    snprintf(out, n, "%s:%s", a ? a : "unknown action", d ? d : details[0][1]);
}

/* now + secs, as nb_now_iso_us writes times, into buf[32]. */
static void iso_after(long secs, char *buf)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    time_t t = ts.tv_sec + secs;
    struct tm tm;
    gmtime_r(&t, &tm);
    size_t len = strftime(buf, 32, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + len, 32 - len, ".%06d", (int)(ts.tv_nsec / 1000) % 1000000);
}

int nb_vol_message_record(struct nb_ctx *ctx, const char *resource_uuid, const char *action_id,
                          const char *detail_id)
{
    char id[NB_UUID_LEN], now[32], expires[32], event[64];
    nb_uuid(id);
    nb_now_iso_us(now);
    iso_after(nb_conf_int("volume", "message_ttl", 2592000), expires);
    snprintf(event, sizeof(event), "VOLUME_VOLUME_%s_%s", action_id, detail_id);
    struct nb_db *db = nb_vol_env->db;
    if (nb_db_exec(db, ctx, "DELETE FROM messages WHERE expires_at < ?", "s", now) < 0 ||
        nb_db_exec(db, ctx,
                   "INSERT INTO messages (id, project_id, request_id, resource_type, "
                   "resource_uuid, event_id, detail_id, action_id, message_level, created_at, "
                   "expires_at, deleted) VALUES (?, ?, ?, 'VOLUME', ?, ?, ?, ?, 'ERROR', ?, ?, 0)",
                   "sssssssss", id, ctx->project_id, ctx->request_id, resource_uuid, event,
                   detail_id, action_id, now, expires) < 0)
        return -1;
    char text[256];
    nb_vol_message_text(action_id, detail_id, text, sizeof(text));
    NB_INFO(NB_VOL_LOG, ctx, NULL, "Message %s for volume %s: %s", id, resource_uuid, text);
    return 0;
}

/* --- the API --------------------------------------------------------------------- */

static json_t *message_load(struct nb_ctx *ctx, const char *id)
{
    json_t *row = nb_db_row(nb_vol_env->db, ctx,
                            "SELECT * FROM messages WHERE id = ? AND deleted = 0", "s", id);
    if (!row && nb_ctx_failed(ctx))
        return NULL;
    const char *p = row ? nb_json_str(row, "project_id") : NULL;
    if (!row || !(ctx->is_admin || (p && strcmp(p, ctx->project_id) == 0))) {
        json_decref(row);
        nb_error(ctx, 404, NULL, "Message %s could not be found.", id);
        return NULL;
    }
    return row;
}

static json_t *field(const json_t *row, const char *key)
{
    json_t *v = json_object_get(row, key);
    return v ? json_incref(v) : json_null();
}

/* Cinder's messages view (api/v3/views/messages.py). */
static json_t *message_view(struct nb_ctx *ctx, const json_t *row, bool detail)
{
    (void)detail;
    const char *id = nb_json_str(row, "id");
    char text[256];
    nb_vol_message_text(nb_json_str(row, "action_id"), nb_json_str(row, "detail_id"), text,
                        sizeof(text));
    json_t *v = json_object();
    json_object_set_new(v, "id", json_string(id));
    json_object_set_new(v, "event_id", field(row, "event_id"));
    json_object_set_new(v, "user_message", json_string(text));
    json_object_set_new(v, "message_level", field(row, "message_level"));
    json_object_set_new(v, "created_at", field(row, "created_at"));
    json_object_set_new(v, "guaranteed_until", field(row, "expires_at"));
    json_object_set_new(v, "request_id", field(row, "request_id"));
    json_object_set_new(v, "links", nb_vol_links(ctx, "messages", id));
    if (nb_json_str(row, "resource_type"))
        json_object_set_new(v, "resource_type", field(row, "resource_type"));
    if (nb_json_str(row, "resource_uuid"))
        json_object_set_new(v, "resource_uuid", field(row, "resource_uuid"));
    return v;
}

static const struct nb_vol_sort_key message_sort_keys[] = {
    {"id", "id"},
    {"created_at", "created_at"},
    {"updated_at", "updated_at"},
    {"event_id", "event_id"},
    {"resource_type", "resource_type"},
    {"resource_uuid", "resource_uuid"},
    {"message_level", "message_level"},
    {"request_id", "request_id"},
    {NULL, NULL},
};

/* The filters of Cinder's resource_filters.json for messages. */
static bool message_matches(struct nb_ctx *ctx, struct nb_req *req, const json_t *row,
                            const json_t *filter)
{
    (void)ctx, (void)filter;
    static const char *const exact[] = {"resource_uuid", "resource_type", "event_id",
                                        "request_id",    "message_level", NULL};
    for (int i = 0; exact[i]; i++) {
        const char *want = nb_req_query(req, exact[i]), *have = nb_json_str(row, exact[i]);
        if (want && (!have || strcmp(want, have) != 0))
            return false;
    }
    return true;
}

static const struct nb_vol_lister message_lister = {
    .table = "messages",
    .sort_keys = message_sort_keys,
    .load = message_load,
    .match = message_matches,
    .view = message_view,
    .min_mv = MV_MESSAGES,
    .admin_sees_all = true, /* message_get_all is project_only for non-admins */
};

/* The microversion gate of Cinder's api_version decorator: 404 below 3.3. */
static int messages_begin(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_vol_begin(ctx, req, resp) < 0)
        return -1;
    return nb_vol_require_mv(ctx, MV_MESSAGES);
}

static int messages_index(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    return nb_vol_list(ctx, req, resp, &message_lister, false);
}

static int messages_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (messages_begin(ctx, req, resp) < 0)
        return -1;
    _cleanup_json_ json_t *row = message_load(ctx, nb_req_param(req, "message_id"));
    if (!row)
        return -1;
    return nb_resp_json(resp, 200, json_pack("{s:o}", "message", message_view(ctx, row, true)));
}

static int messages_delete(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (messages_begin(ctx, req, resp) < 0)
        return -1;
    const char *id = nb_req_param(req, "message_id");
    _cleanup_json_ json_t *row = message_load(ctx, id);
    if (!row)
        return -1;
    char now[32];
    nb_now_iso_us(now);
    if (nb_db_exec(nb_vol_env->db, ctx,
                   "UPDATE messages SET deleted = 1, deleted_at = ? WHERE id = ? AND deleted = 0",
                   "ss", now, id) < 0)
        return -1;
    return nb_resp_empty(resp, 204);
}

void nb_vol_messages_routes(void)
{
    nb_http_route("GET", "/volume/v3/{project_id}/messages", messages_index, 0);
    nb_http_route("GET", "/volume/v3/{project_id}/messages/{message_id}", messages_show, 0);
    nb_http_route("DELETE", "/volume/v3/{project_id}/messages/{message_id}", messages_delete, 0);
}
