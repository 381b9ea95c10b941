/* volume_attachments.c - /compute/v2.1/servers/{id}/os-volume_attachments,
 * as Nova's VolumeAttachmentController (api/openstack/compute/volumes.py)
 * over compute/api.py's attach_volume, detach_volume and swap_volume.
 *
 * An attachment is a block_device_mapping row naming the volume; its id in
 * the API is the volume id. Attach chooses the guest device (the next free
 * /dev/vdX, or the requested one if free), reserves the volume (available
 * -> reserved), inserts the mapping (source and destination volume, no
 * boot index, no connection_info) and the instance action "attach_volume"
 * in one transaction, then casts attach_volume to the conductor, which
 * connects the volume and hot-plugs it (compute/rpc/conductor_api.h). Detach moves the
 * volume to detaching, records "detach_volume" and casts detach_volume.
 * Both answer at once; the volume's status tells the progress. Swapping
 * volumes (PUT with another volume) is checked as Nova does and then
 * refused: nubo cannot migrate volume data. */
#include "common/cleanup.h"
#include "common/json.h"
#include "common/log.h"
#include "common/pyrepr.h"
#include "common/util.h"
#include "compute/api/api.h"
#include "compute/api/block_devices.h"
#include "compute/api/instances.h"
#include "compute/api/links.h"
#include "compute/api/resources.h"
#include "compute/api/server_actions.h"
#include "compute/api/validate.h"
#include "compute/compute.h"
#include "compute/rpc/conductor_api.h"
#include "db/db.h"
#include "volume/volume.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define POLICY "os_compute_api:os-volumes-attachments:"

/* vm_states attach and detach accept (compute/api.py). */
static const char *const attach_states[] = {
    NB_VM_ACTIVE,       NB_VM_PAUSED, NB_VM_STOPPED,           NB_VM_RESIZED,
    NB_VM_SOFT_DELETED, "shelved",    NB_VM_SHELVED_OFFLOADED, NULL};

static bool in_list(const char *s, const char *const *list)
{
    for (; *list; list++)
        if (s && !strcmp(s, *list))
            return true;
    return false;
}

/* The attachment view of a mapping row (_translate_attachment_detail_view). */
static json_t *attachment_view(const struct nb_ctx *ctx, const json_t *bdm)
{
    json_t *d = json_object();
    const char *vol = nb_json_str(bdm, "volume_id");
    bool v289 = nb_ctx_mv_ge(ctx, 2, 89);
    if (!v289)
        json_object_set_new(d, "id", json_string(vol));
    json_object_set_new(d, "volumeId", json_string(vol));
    json_object_set_new(d, "serverId", json_string(nb_json_str(bdm, "instance_uuid")));
    const char *dev = nb_json_str(bdm, "device_name");
    if (dev && *dev)
        json_object_set_new(d, "device", json_string(dev));
    if (nb_ctx_mv_ge(ctx, 2, 70))
        json_object_set_new(d, "tag", nb_res_row_copy(bdm, "tag"));
    if (nb_ctx_mv_ge(ctx, 2, 79))
        json_object_set_new(d, "delete_on_termination",
                            json_boolean(nb_json_int(bdm, "delete_on_termination", 0) != 0));
    if (v289) {
        json_object_set_new(d, "attachment_id", nb_res_row_copy(bdm, "attachment_id"));
        json_object_set_new(d, "bdm_uuid", nb_res_row_copy(bdm, "uuid"));
    }
    return d;
}

/* The live mapping of volume_id on the instance, or NULL after 404
 * "Instance <server> is not attached to volume <volume>". */
static json_t *find_bdm(struct nb_ctx *ctx, const char *server_id, const char *uuid,
                        const char *volume_id)
{
    json_t *row = nb_db_row(nb_srv_db(), ctx,
                            "SELECT * FROM block_device_mapping WHERE instance_uuid = ? AND "
                            "volume_id = ? AND deleted = 0 ORDER BY id DESC LIMIT 1",
                            "ss", uuid, volume_id);
    if (!row && !nb_ctx_failed(ctx))
        nb_error(ctx, 404, NULL, "Instance %s is not attached to volume %s", server_id, volume_id);
    return row;
}

/* The instance of the path and the policy rule, or NULL after 404/403. */
static json_t *instance_for(struct nb_ctx *ctx, struct nb_req *req, const char *rule, bool write)
{
    json_t *inst = nb_srv_instance_get(ctx, nb_req_param(req, "server_id"), false);
    if (!inst)
        return NULL;
    const char *project = nb_json_str(inst, "project_id");
    char name[128];
    snprintf(name, sizeof(name), POLICY "%s", rule);
    bool ok = write ? nb_srv_is_member_of(ctx, project) : nb_srv_is_reader_of(ctx, project);
    if (nb_srv_policy(ctx, name, ok) < 0) {
        json_decref(inst);
        return NULL;
    }
    return inst;
}

/* Nova's _check_request_version for shelved servers before 2.20. */
static int check_shelved(struct nb_ctx *ctx, const json_t *inst, const char *method)
{
    const char *vm = nb_json_str(inst, "vm_state");
    if (vm && (!strcmp(vm, "shelved") || !strcmp(vm, NB_VM_SHELVED_OFFLOADED)) &&
        !nb_ctx_mv_ge(ctx, 2, 20))
        return nb_srv_invalid_state(ctx, method, nb_json_str(inst, "uuid"), "vm_state", vm);
    return 0;
}

/* check_instance_lock then check_instance_state of attach/detach. */
static int check_instance(struct nb_ctx *ctx, const json_t *inst, const char *method)
{
    const char *vm = nb_json_str(inst, "vm_state");
    if (nb_srv_check_lock(ctx, inst) < 0)
        return -1;
    if (!in_list(vm, attach_states))
        return nb_srv_invalid_state(ctx, method, nb_json_str(inst, "uuid"), "vm_state", vm);
    return 0;
}

/* ---- GET: list and show -------------------------------------------------------------- */

static int h_index(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    static const char *const allowed[] = {"limit", "offset", NULL};
    if (nb_ctx_mv_ge(ctx, 2, 75) && nb_res_query_only(ctx, req, allowed) < 0)
        return -1;
    long long limit = 0, offset = 0;
    const char *l = nb_req_query(req, "limit"), *o = nb_req_query(req, "offset");
    if ((l && nb_srv_query_nonneg_int(ctx, "limit", l, &limit) < 0) ||
        (o && nb_srv_query_nonneg_int(ctx, "offset", o, &offset) < 0))
        return -1;
    _cleanup_json_ json_t *inst = instance_for(ctx, req, "index", false);
    if (!inst)
        return -1;
    long long max = nb_res_max_limit();
    if (limit <= 0 || limit > max)
        limit = max;
    /* common.limited pages over all the mappings; only volumes are shown */
    _cleanup_json_ json_t *rows = nb_db_rows(nb_srv_db(), ctx,
                                             "SELECT * FROM block_device_mapping WHERE "
                                             "instance_uuid = ? AND deleted = 0 ORDER BY id "
                                             "LIMIT ? OFFSET ?",
                                             "sii", nb_json_str(inst, "uuid"), limit, offset);
    if (!rows)
        return -1;
    json_t *list = json_array();
    size_t i;
    json_t *b;
    json_array_foreach (rows, i, b) {
        const char *vol = nb_json_str(b, "volume_id");
        if (vol && *vol)
            json_array_append_new(list, attachment_view(ctx, b));
    }
    return nb_resp_json(resp, 200, json_pack("{s:o}", "volumeAttachments", list));
}

static int h_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    _cleanup_json_ json_t *inst = instance_for(ctx, req, "show", false);
    if (!inst)
        return -1;
    _cleanup_json_ json_t *bdm =
        find_bdm(ctx, nb_req_param(req, "server_id"), nb_json_str(inst, "uuid"),
                 nb_req_param(req, "volume_id"));
    if (!bdm)
        return -1;
    return nb_resp_json(resp, 200,
                        json_pack("{s:o}", "volumeAttachment", attachment_view(ctx, bdm)));
}

/* ---- POST: attach -------------------------------------------------------------------- */

/* 400 "'<key>' is a required property" worded as Nova's validator. */
static int required(struct nb_ctx *ctx, const char *field, const json_t *obj, const char *key)
{
    _cleanup_free_ char *repr = nb_pyrepr(obj);
    return nb_error(ctx, 400, NULL,
                    "Invalid input for field/attribute %s. Value: %s. '%s' is a required property",
                    field, repr, key);
}

static int check_device(struct nb_ctx *ctx, const json_t *v)
{
    if (json_is_null(v))
        return 0;
    if (!json_is_string(v))
        return nb_srv_bad(ctx, "device", v, "is not of type 'string', 'null'");
    char p[32], l[16];
    if (nb_srv_match_device(json_string_value(v), p, sizeof(p), l, sizeof(l)) < 0)
        return nb_srv_bad(ctx, "device", v,
                          "does not match '(^/dev/x{0,1}[a-z]{0,1}d{0,1})([a-z]+)[0-9]*$'");
    return 0;
}

static int check_tag(struct nb_ctx *ctx, const json_t *v)
{
    if (nb_srv_check_string(ctx, "tag", v, 1, 60, false) < 0)
        return -1;
    const char *s = json_string_value(v);
    if (strchr(s, '/') || strchr(s, ','))
        return nb_srv_bad(ctx, "tag", v, "does not match '^[^,/]*$'");
    return 0;
}

/* The create / update schemas of volumes.py by microversion. */
static json_t *validate_body(struct nb_ctx *ctx, struct nb_req *req, bool update)
{
    static const char *const top[] = {"volumeAttachment", NULL};
    json_t *att = nb_srv_body_object(ctx, req, "volumeAttachment", top);
    if (!att)
        return NULL;
    const char *allowed[8];
    int n = 0;
    allowed[n++] = "volumeId";
    bool v285 = update && nb_ctx_mv_ge(ctx, 2, 85);
    if (!update || v285)
        allowed[n++] = "device";
    if ((!update && nb_ctx_mv_ge(ctx, 2, 49)) || v285)
        allowed[n++] = "tag";
    if ((!update && nb_ctx_mv_ge(ctx, 2, 79)) || v285)
        allowed[n++] = "delete_on_termination";
    if (v285) {
        allowed[n++] = "serverId";
        allowed[n++] = "id";
    }
    allowed[n] = NULL;
    json_t *v;
    if (!json_object_get(att, "volumeId")) {
        required(ctx, "volumeAttachment", att, "volumeId");
        return NULL;
    }
    if (nb_res_only_keys(ctx, "volumeAttachment", att, allowed) < 0 ||
        nb_srv_check_uuid(ctx, "volumeId", json_object_get(att, "volumeId")) < 0)
        return NULL;
    if ((v = json_object_get(att, "device")) && check_device(ctx, v) < 0)
        return NULL;
    if ((v = json_object_get(att, "tag")) && check_tag(ctx, v) < 0)
        return NULL;
    if ((v = json_object_get(att, "delete_on_termination")) &&
        nb_res_check_bool(ctx, "delete_on_termination", v) < 0)
        return NULL;
    if ((v = json_object_get(att, "serverId")) && nb_srv_check_uuid(ctx, "serverId", v) < 0)
        return NULL;
    if ((v = json_object_get(att, "id")) && nb_srv_check_uuid(ctx, "id", v) < 0)
        return NULL;
    return att;
}

/* Nova's _check_volume_already_attached (non-multiattach volumes): 400 when
 * any live mapping names the volume. */
static int check_not_attached(struct nb_ctx *ctx, const char *volume_id)
{
    _cleanup_json_ json_t *rows = nb_db_rows(nb_srv_db(), ctx,
                                             "SELECT instance_uuid FROM block_device_mapping "
                                             "WHERE volume_id = ? AND deleted = 0 ORDER BY id",
                                             "s", volume_id);
    if (!rows)
        return -1;
    if (!json_array_size(rows))
        return 0;
    char uuids[1024] = "";
    size_t i, len = 0;
    json_t *r;
    json_array_foreach (rows, i, r) {
        int k = snprintf(uuids + len, sizeof(uuids) - len, "%s%s", i ? " " : "",
                         nb_json_str(r, "instance_uuid"));
        if (k < 0 || (size_t)k >= sizeof(uuids) - len)
            break;
        len += (size_t)k;
    }
    return nb_error(ctx, 400, NULL,
                    "Invalid volume: volume %s is already attached to instances: %s", volume_id,
                    uuids);
}

/* Inserts the mapping unless another live mapping of the instance uses the
 * device (a concurrent attach), and the action, in one transaction.
 * bdm_uuid[37] gets the row's uuid. 0/-1 (409 when the device was taken). */
static int insert_attachment(struct nb_ctx *ctx, const char *uuid, const char *volume_id,
                             const char *device, const char *tag, bool dot, char *bdm_uuid)
{
    struct nb_db *db = nb_srv_db();
    char now[32];
    nb_now_iso_us(now);
    nb_uuid(bdm_uuid);
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    int n = nb_db_exec(db, ctx,
                       "INSERT INTO block_device_mapping (uuid, instance_uuid, source_type, "
                       "destination_type, device_type, device_name, boot_index, volume_id, "
                       "delete_on_termination, tag, created_at, updated_at) SELECT ?, ?, "
                       "'volume', 'volume', 'disk', ?, NULL, ?, ?, ?, ?, ? WHERE NOT EXISTS "
                       "(SELECT 1 FROM block_device_mapping WHERE instance_uuid = ? AND "
                       "deleted = 0 AND device_name = ?)",
                       "ssssbsssss", bdm_uuid, uuid, device, volume_id, (int)dot, tag, now, now,
                       uuid, device);
    if (n == 0)
        nb_error(ctx, 409, NULL, "The supplied device path (%s) is in use.", device);
    if (n <= 0 || nb_action_start(db, ctx, uuid, "attach_volume") < 0) {
        nb_db_rollback(db);
        return -1;
    }
    return nb_db_commit(db, ctx);
}

/* Undoes an accepted attach the conductor never heard of. */
/* The undo of an attach never sent to the conductor (nb_bus_undo_fn;
 * args {"uuid", "bdm_uuid", "volume_id"}): the mapping, while nothing was
 * plugged yet (connection_info NULL), is destroyed and the volume
 * unreserved; the action fails. */
#define NOT_SENT "The compute conductor is not available."

static void undo_attachment(struct nb_ctx *ctx, json_t *args, json_t *data, bool late)
{
    (void)data;
    const char *uuid = nb_json_str(args, "uuid"), *volume_id = nb_json_str(args, "volume_id");
    char now[32];
    nb_now_iso_us(now);
    int n =
        nb_db_exec(nb_srv_db(), ctx,
                   "UPDATE block_device_mapping SET deleted = id, deleted_at = ? WHERE uuid = ? "
                   "AND deleted = 0 AND connection_info IS NULL",
                   "ss", now, nb_json_str(args, "bdm_uuid"));
    if (n < 0 || (n == 1 && nb_volume_transition(ctx, volume_id, NB_VOLUME_UNRESERVE) < 0) ||
        nb_action_finish(nb_srv_db(), ctx, uuid, NOT_SENT) < 0)
        NB_WARN("nubo.compute.api", ctx, uuid, "could not undo the attach of volume %s: %s",
                volume_id, nb_ctx_message(ctx));
    else if (late && n == 1)
        NB_ERROR("nubo.compute.api", ctx, uuid,
                 "attach of volume %s never sent to the conductor: undone", volume_id);
}

/* The undo of a detach never sent (args as undo_attachment's): the volume
 * goes back to in-use while it is still detaching; the action fails. */
static void undo_detach(struct nb_ctx *ctx, json_t *args, json_t *data, bool late)
{
    (void)data;
    const char *uuid = nb_json_str(args, "uuid"), *volume_id = nb_json_str(args, "volume_id");
    char status[32] = "";
    _cleanup_json_ json_t *vol = nb_volume_lookup(ctx, volume_id);
    const char *st = vol ? nb_json_str(vol, "status") : NULL;
    snprintf(status, sizeof(status), "%s", st ? st : "");
    nb_ctx_clear_error(ctx);
    if ((!strcmp(status, "detaching") &&
         nb_volume_transition(ctx, volume_id, NB_VOLUME_ROLL_DETACHING) < 0) ||
        nb_action_finish(nb_srv_db(), ctx, uuid, NOT_SENT) < 0)
        NB_WARN("nubo.compute.api", ctx, uuid, "could not undo the detach of volume %s: %s",
                volume_id, nb_ctx_message(ctx));
    else if (late)
        NB_ERROR("nubo.compute.api", ctx, uuid,
                 "detach of volume %s never sent to the conductor: undone", volume_id);
}

static int h_create(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    json_t *att = validate_body(ctx, req, false);
    if (!att)
        return -1;
    _cleanup_json_ json_t *inst = instance_for(ctx, req, "create", true);
    if (!inst)
        return -1;
    const char *server_id = nb_req_param(req, "server_id");
    const char *uuid = nb_json_str(inst, "uuid");
    const char *volume_id = json_string_value(json_object_get(att, "volumeId"));
    const char *device = json_string_value(json_object_get(att, "device"));
    const char *tag = json_string_value(json_object_get(att, "tag"));
    bool dot = nb_srv_json_truthy(json_object_get(att, "delete_on_termination"));
    if (check_shelved(ctx, inst, "attach_volume") < 0 ||
        check_instance(ctx, inst, "attach_volume") < 0)
        return -1;
    _cleanup_json_ json_t *vol = nb_volume_lookup(ctx, volume_id);
    if (!vol || check_not_attached(ctx, volume_id) < 0)
        return -1;
    _cleanup_json_ json_t *bdms = nb_db_rows(
        nb_srv_db(), ctx,
        "SELECT * FROM block_device_mapping WHERE instance_uuid = ? AND deleted = 0 ORDER BY id",
        "s", uuid);
    if (!bdms)
        return -1;
    char dev[64];
    if (nb_srv_next_device_name(ctx, nb_json_str(inst, "root_device_name"), bdms, device, dev,
                                sizeof(dev)) < 0)
        return -1;
    if (nb_volume_transition(ctx, volume_id, NB_VOLUME_RESERVE) < 0)
        return -1;
    char bdm_uuid[NB_UUID_LEN];
    if (insert_attachment(ctx, uuid, volume_id, dev, tag, dot, bdm_uuid) < 0) {
        struct nb_ctx sub;
        nb_ctx_child(&sub, ctx);
        nb_volume_transition(&sub, volume_id, NB_VOLUME_UNRESERVE);
        return -1;
    }
    if (nb_conductor_attach_volume(ctx, uuid, bdm_uuid, volume_id,
                                   (struct nb_bus_undo){undo_attachment, NULL}) < 0)
        return nb_srv_not_sent(ctx, uuid, "attach_volume");
    NB_INFO("nubo.compute.api", ctx, uuid, "Attaching volume %s as %s", volume_id, dev);
    json_t *view = json_pack("{s:s, s:s, s:s, s:s}", "id", volume_id, "serverId", server_id,
                             "volumeId", volume_id, "device", dev);
    if (nb_ctx_mv_ge(ctx, 2, 70))
        json_object_set_new(view, "tag", tag ? json_string(tag) : json_null());
    if (nb_ctx_mv_ge(ctx, 2, 79))
        json_object_set_new(view, "delete_on_termination", json_boolean(dot));
    return nb_resp_json(resp, 200, json_pack("{s:o}", "volumeAttachment", view));
}

/* ---- PUT: update, swap --------------------------------------------------------------- */

/* 2.85's update of the attachment's own attributes: only
 * delete_on_termination may change. */
static int update_regular(struct nb_ctx *ctx, const json_t *inst, const char *server_id,
                          const char *volume_id, json_t *att)
{
    const char *uuid = nb_json_str(inst, "uuid");
    _cleanup_json_ json_t *bdm = find_bdm(ctx, server_id, uuid, volume_id);
    if (!bdm)
        return -1;
    const char *s;
    if ((s = json_string_value(json_object_get(att, "id"))) && strcmp(s, volume_id))
        return nb_error(ctx, 400, NULL, "The id property is not mutable");
    if ((s = json_string_value(json_object_get(att, "serverId"))) && strcmp(s, uuid))
        return nb_error(ctx, 400, NULL, "The serverId property is not mutable");
    json_t *d = json_object_get(att, "device");
    const char *cur = nb_json_str(bdm, "device_name");
    if (d && (json_is_null(d) ? cur != NULL : !cur || strcmp(json_string_value(d), cur)))
        return nb_error(ctx, 400, NULL, "The device property is not mutable");
    json_t *t = json_object_get(att, "tag");
    const char *ctag = nb_json_str(bdm, "tag");
    if (t && (!ctag || strcmp(json_string_value(t), ctag)))
        return nb_error(ctx, 400, NULL, "The tag property is not mutable");
    json_t *dot = json_object_get(att, "delete_on_termination");
    if (!dot)
        return 0;
    char now[32];
    nb_now_iso_us(now);
    return nb_db_exec(nb_srv_db(), ctx,
                      "UPDATE block_device_mapping SET delete_on_termination = ?, updated_at = ? "
                      "WHERE id = ?",
                      "bsi", (int)nb_srv_json_truthy(dot), now,
                      (long long)nb_json_int(bdm, "id", 0)) < 0
               ? -1
               : 0;
}

/* Nova's _update_volume_swap and swap_volume's checks; nubo then refuses:
 * it has no volume migration to copy the old volume's data. */
static int update_swap(struct nb_ctx *ctx, const json_t *inst, const char *server_id,
                       const char *old_id, const char *new_id)
{
    _cleanup_json_ json_t *old_vol = nb_volume_lookup(ctx, old_id);
    if (!old_vol)
        return -1;
    _cleanup_json_ json_t *new_vol = nb_volume_lookup(ctx, new_id);
    if (!new_vol)
        return nb_srv_error_as(ctx, 400, NULL);
    static const char *const swap_states[] = {NB_VM_ACTIVE, NB_VM_PAUSED, NB_VM_RESIZED, NULL};
    const char *vm = nb_json_str(inst, "vm_state");
    if (nb_srv_check_lock(ctx, inst) < 0)
        return -1;
    if (!in_list(vm, swap_states))
        return nb_srv_invalid_state(ctx, "swap_volume", nb_json_str(inst, "uuid"), "vm_state", vm);
    _cleanup_json_ json_t *bdm = find_bdm(ctx, server_id, nb_json_str(inst, "uuid"), old_id);
    if (!bdm)
        return nb_error(ctx, 400, NULL,
                        "Invalid volume: Old volume is attached to a different instance.");
    const char *ast = nb_json_str(new_vol, "attach_status");
    if (ast && !strcmp(ast, "attached"))
        return nb_error(ctx, 400, NULL,
                        "Invalid volume: New volume must be detached in order to "
                        "swap.");
    if (nb_json_int(new_vol, "size", 0) < nb_json_int(old_vol, "size", 0))
        return nb_error(ctx, 400, NULL,
                        "Invalid volume: New volume must be the same size or "
                        "larger.");
    return nb_error(ctx, 400, NULL,
                    "Invalid volume: swapping volume %s for %s is not supported by nubo (no "
                    "volume migration).",
                    old_id, new_id);
}

static int h_update(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    json_t *att = validate_body(ctx, req, true);
    if (!att)
        return -1;
    _cleanup_json_ json_t *inst = nb_srv_instance_get(ctx, nb_req_param(req, "server_id"), false);
    if (!inst)
        return -1;
    const char *id = nb_req_param(req, "volume_id");
    const char *new_id = json_string_value(json_object_get(att, "volumeId"));
    bool only_swap = !nb_ctx_mv_ge(ctx, 2, 85);
    bool swap = only_swap || strcmp(id, new_id);
    if (swap ? nb_srv_policy(ctx, POLICY "swap", ctx->is_admin) < 0
             : nb_srv_policy(ctx, POLICY "update",
                             nb_srv_is_member_of(ctx, nb_json_str(inst, "project_id"))) < 0)
        return -1;
    if (!only_swap && update_regular(ctx, inst, nb_req_param(req, "server_id"), id, att) < 0)
        return -1;
    if (swap && update_swap(ctx, inst, nb_req_param(req, "server_id"), id, new_id) < 0)
        return -1;
    return nb_resp_empty(resp, 202);
}

/* ---- DELETE: detach ------------------------------------------------------------------ */

static int h_delete(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    _cleanup_json_ json_t *inst = instance_for(ctx, req, "delete", true);
    if (!inst)
        return -1;
    const char *server_id = nb_req_param(req, "server_id");
    const char *uuid = nb_json_str(inst, "uuid");
    const char *volume_id = nb_req_param(req, "volume_id");
    if (check_shelved(ctx, inst, "detach_volume") < 0)
        return -1;
    _cleanup_json_ json_t *vol = nb_volume_lookup(ctx, volume_id);
    if (!vol)
        return -1;
    _cleanup_json_ json_t *bdm = find_bdm(ctx, server_id, uuid, volume_id);
    if (!bdm)
        return -1;
    if (nb_srv_bdm_is_root(bdm))
        return nb_error(ctx, 400, NULL, "Cannot detach a root device volume");
    if (check_instance(ctx, inst, "detach_volume") < 0)
        return -1;
    const char *host = nb_json_str(inst, "host");
    if (!host || !*host)
        return nb_error(ctx, 409, NULL, "Instance %s is not ready", uuid);
    if (nb_volume_transition(ctx, volume_id, NB_VOLUME_BEGIN_DETACH) < 0)
        return -1;
    struct nb_db *db = nb_srv_db();
    if (nb_db_begin(db, ctx) < 0 || nb_action_start(db, ctx, uuid, "detach_volume") < 0 ||
        nb_db_commit(db, ctx) < 0) {
        nb_db_rollback(db);
        struct nb_ctx sub;
        nb_ctx_child(&sub, ctx);
        nb_volume_transition(&sub, volume_id, NB_VOLUME_ROLL_DETACHING);
        return -1;
    }
    if (nb_conductor_detach_volume(ctx, uuid, nb_json_str(bdm, "uuid"), volume_id,
                                   (struct nb_bus_undo){undo_detach, NULL}) < 0)
        return nb_srv_not_sent(ctx, uuid, "detach_volume");
    NB_INFO("nubo.compute.api", ctx, uuid, "Detaching volume %s", volume_id);
    return nb_resp_empty(resp, 202);
}

int nb_compute_volume_attachments_init(struct nb_env *env)
{
    (void)env;
    nb_http_route("GET", "/compute/v2.1/servers/{server_id}/os-volume_attachments", h_index, 0);
    nb_http_route("POST", "/compute/v2.1/servers/{server_id}/os-volume_attachments", h_create, 0);
    nb_http_route("GET", "/compute/v2.1/servers/{server_id}/os-volume_attachments/{volume_id}",
                  h_show, 0);
    nb_http_route("PUT", "/compute/v2.1/servers/{server_id}/os-volume_attachments/{volume_id}",
                  h_update, 0);
    nb_http_route("DELETE", "/compute/v2.1/servers/{server_id}/os-volume_attachments/{volume_id}",
                  h_delete, 0);
    return 0;
}
