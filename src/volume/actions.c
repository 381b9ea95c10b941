/* actions.c - POST /volume/v3/{project_id}/volumes/{volume_id}/action:
 * os-extend, os-set_bootable, os-update_readonly_flag, os-reset_status
 * (admin), and the attach bookkeeping actions Nova's cinderclient calls
 * (os-reserve, os-unreserve, os-attach, os-detach, os-force_detach (admin),
 * os-begin_detaching, os-roll_detaching), which
 * are the status machine of status.c. os-reserve is Cinder's reserve_volume
 * of the older attach flow: available -> attaching (the attachments API's
 * reservation is "reserved").
 *
 * Extend is Cinder's: new_size must exceed the size, the gigabytes quota
 * must allow the difference, the volume goes available -> extending (in the
 * database) -> available with the new size, or error_extending with
 * qemu-img's message in the log. */
#include "common/cleanup.h"
#include "common/json.h"
#include "common/log.h"
#include "common/pyrepr.h"
#include "common/util.h"
#include "db/db.h"
#include "volume/volume.h"
#include "volume/volume_int.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* new_size as Cinder's volume_size schema: integer or digit string >= 1. */
static int parse_new_size(struct nb_ctx *ctx, const json_t *v, long long *out)
{
    if (json_is_integer(v)) {
        *out = json_integer_value(v);
    } else if (json_is_string(v) && *json_string_value(v)) {
        for (const char *p = json_string_value(v); *p; p++)
            if (!isdigit((unsigned char)*p))
                goto bad;
        *out = atoll(json_string_value(v));
    } else {
        goto bad;
    }
    if (*out >= 1)
        return 0;
bad:;
    _cleanup_free_ char *d = v ? nb_json_dump(v) : strdup("None");
    return nb_error(ctx, 400, NULL,
                    "Invalid input for field/attribute new_size. Value: %s. %s is not valid "
                    "under any of the given schemas",
                    d, d);
}

static int do_extend(struct nb_ctx *ctx, const char *id, json_t *vol, json_t *arg,
                     struct nb_resp *resp)
{
    if (!json_is_object(arg) || !json_object_get(arg, "new_size"))
        return nb_error(ctx, 400, NULL,
                        "Invalid input for field/attribute os-extend. Value: %s. 'new_size' is "
                        "a required property",
                        json_is_object(arg) ? "{}" : "null");
    long long new_size = 0, size = nb_json_int(vol, "size", 0);
    if (parse_new_size(ctx, json_object_get(arg, "new_size"), &new_size) < 0)
        return -1;
    if (new_size <= size)
        return nb_error(ctx, 400, NULL,
                        "Invalid input received: New size for extend must be greater than "
                        "current size. (current: %lld, extended: %lld).",
                        size, new_size);
    struct nb_db *db = nb_vol_env->db;
    static const char *const avail[] = {"available", NULL};
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    int n = nb_vol_quota_check(ctx, nb_json_str(vol, "project_id"), 0, 0, new_size - size);
    if (n == 0) {
        long long per =
            nb_vol_quota_limit(ctx, nb_json_str(vol, "project_id"), "per_volume_gigabytes");
        if (per >= 0 && new_size > per)
            n = nb_error(ctx, 413, NULL,
                         "Requested volume size %lldG is larger than maximum allowed limit "
                         "%lldG.",
                         new_size, per);
    }
    if (n == 0)
        n = nb_vol_set_status(ctx, id, "extending", avail);
    if (n < 0) {
        nb_db_rollback(db);
        return -1;
    }
    if (nb_db_commit(db, ctx) < 0)
        return -1;
    if (n == 0)
        return nb_error(ctx, 400, NULL,
                        "Invalid volume: Volume %s status must be '{'status': 'available'}' to "
                        "extend, currently %s.",
                        id, nb_json_str(vol, "status"));
    struct nb_ctx work;
    nb_ctx_child(&work, ctx);
    char active[128];
    static const char *const extending[] = {"extending", NULL};
    const char *share = nb_json_str(vol, "provider_location");
    nb_vol_chain_lock();
    int rc = nb_vol_active_file(&work, id, active, sizeof(active));
    if (rc == 0)
        rc = nb_vol_backend_extend(&work, share, active, new_size);
    nb_vol_chain_unlock();
    if (rc < 0) {
        nb_vol_set_status(ctx, id, "error_extending", extending);
        NB_ERROR(NB_VOL_LOG, ctx, NULL, "Volume %s extend to %lld GiB failed: %s", id, new_size,
                 nb_ctx_message(&work));
        return nb_resp_empty(resp, 202);
    }
    if (nb_db_exec(db, ctx, "UPDATE volumes SET size = ? WHERE id = ? AND status = 'extending'",
                   "is", new_size, id) < 0)
        return -1;
    nb_vol_set_status(ctx, id, "available", extending);
    NB_INFO(NB_VOL_LOG, ctx, NULL, "Volume %s extended from %lld to %lld GiB", id, size, new_size);
    return nb_resp_empty(resp, 202);
}

static int do_set_bootable(struct nb_ctx *ctx, const char *id, json_t *arg, struct nb_resp *resp)
{
    json_t *b = json_is_object(arg) ? json_object_get(arg, "bootable") : NULL;
    int v = json_is_boolean(b)  ? json_is_true(b)
            : json_is_string(b) ? nb_bool_from_string(json_string_value(b))
                                : -1;
    if (v < 0) {
        _cleanup_free_ char *d = b ? nb_json_dump(b) : strdup("None");
        return nb_error(ctx, 400, NULL,
                        "Invalid input for field/attribute bootable. Value: %s. %s is not of "
                        "type 'boolean', 'string'",
                        d, d);
    }
    if (nb_db_exec(nb_vol_env->db, ctx, "UPDATE volumes SET bootable = ? WHERE id = ?", "bs", v,
                   id) < 0)
        return -1;
    return nb_resp_empty(resp, 200);
}

/* os-update_readonly_flag: the volume must be available; the flag is admin
 * metadata "readonly" ("True"/"False"), which the volume's views show among
 * its metadata and its connection info turns into access_mode "ro". */
static int do_update_readonly(struct nb_ctx *ctx, const char *id, json_t *arg, struct nb_resp *resp)
{
    json_t *b = json_is_object(arg) ? json_object_get(arg, "readonly") : NULL;
    if (!b) {
        _cleanup_free_ char *d = arg ? nb_json_dump(arg) : strdup("None");
        return nb_error(ctx, 400, NULL,
                        "Invalid input for field/attribute os-update_readonly_flag. Value: %s. "
                        "'readonly' is a required property",
                        d);
    }
    int v = json_is_boolean(b)  ? json_is_true(b)
            : json_is_string(b) ? nb_bool_from_string(json_string_value(b))
                                : -1;
    if (v < 0) {
        _cleanup_free_ char *d = nb_json_dump(b);
        return nb_error(ctx, 400, NULL,
                        "Invalid input for field/attribute readonly. Value: %s. %s is not of "
                        "type 'boolean', 'string'",
                        d, d);
    }
    struct nb_db *db = nb_vol_env->db;
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    /* the status is read again inside the transaction that writes the flag */
    _cleanup_json_ json_t *vol = nb_vol_load(ctx, id);
    int rc = vol ? 0 : -1;
    if (rc == 0 && strcmp(nb_json_str(vol, "status"), "available") != 0)
        rc = nb_error(ctx, 400, NULL,
                      "Invalid volume: Volume %s status must be available to update readonly "
                      "flag, but current status is: %s.",
                      id, nb_json_str(vol, "status"));
    if (rc == 0)
        rc = nb_vol_set_admin_metadata(ctx, id, "readonly", v ? "True" : "False");
    if (rc < 0) {
        nb_db_rollback(db);
        return -1;
    }
    if (nb_db_commit(db, ctx) < 0)
        return -1;
    NB_INFO(NB_VOL_LOG, ctx, NULL, "Volume %s readonly flag set to %s", id, v ? "True" : "False");
    return nb_resp_empty(resp, 202);
}

static int do_reset_status(struct nb_ctx *ctx, const char *id, json_t *arg, struct nb_resp *resp)
{
    static const char *const valid[] = {
        "creating",       "available", "deleting",  "error",           "error_deleting",
        "error_managing", "managing",  "attaching", "in-use",          "detaching",
        "maintenance",    "reserved",  "extending", "error_extending", NULL};
    if (!ctx->is_admin)
        return nb_error(ctx, 403, NULL,
                        "Policy doesn't allow volume_extension:volume_admin_actions:reset_status "
                        "to be performed.");
    const char *st = json_is_object(arg) ? nb_json_str(arg, "status") : NULL;
    bool ok = false;
    for (int i = 0; st && valid[i]; i++)
        ok |= strcmp(valid[i], st) == 0;
    if (st && !ok)
        return nb_error(ctx, 400, NULL, "Invalid input received: Must specify a valid status");
    const char *as = json_is_object(arg) ? nb_json_str(arg, "attach_status") : NULL;
    if (as && strcmp(as, "attached") != 0 && strcmp(as, "detached") != 0)
        return nb_error(ctx, 400, NULL,
                        "Invalid input received: Must specify a valid attach status");
    if (!st && !as)
        return nb_error(ctx, 400, NULL,
                        "Invalid input received: Must specify 'status', "
                        "'attach_status' or 'migration_status' for update.");
    if (st && nb_vol_set_status(ctx, id, st, NULL) < 0)
        return -1;
    if (as && nb_db_exec(nb_vol_env->db, ctx, "UPDATE volumes SET attach_status = ? WHERE id = ?",
                         "ss", as, id) < 0)
        return -1;
    NB_INFO(NB_VOL_LOG, ctx, NULL, "Volume %s status reset to %s by an admin", id, st ? st : as);
    return nb_resp_empty(resp, 202);
}

/* os-reserve (Cinder's reserve_volume, of the attach flow before 3.27): an
 * available volume goes to attaching, begin_attach's target, but only from
 * available (a volume reserved by an attachment is not). 0/-1. */
static int do_reserve(struct nb_ctx *ctx, const char *id, struct nb_resp *resp)
{
    struct nb_db *db = nb_vol_env->db;
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    _cleanup_json_ json_t *vol = nb_vol_load(ctx, id);
    int rc = vol ? 0 : -1;
    if (rc == 0 && strcmp(nb_json_str(vol, "status"), "available") != 0)
        rc = nb_error(ctx, 400, NULL,
                      "Invalid volume: Volume status must be available to reserve, but the status "
                      "is %s.",
                      nb_json_str(vol, "status"));
    if (rc == 0)
        rc = nb_volume_transition(ctx, id, NB_VOLUME_BEGIN_ATTACH);
    if (rc < 0) {
        nb_db_rollback(db);
        return -1;
    }
    if (nb_db_commit(db, ctx) < 0)
        return -1;
    return nb_resp_empty(resp, 202);
}

/* os-unreserve: an attaching volume settles on its attachment records
 * (available when it has none); in any other status nothing is done, and
 * that is not an error (Cinder logs it). 0/-1. */
static int do_unreserve(struct nb_ctx *ctx, const char *id, struct nb_resp *resp)
{
    struct nb_db *db = nb_vol_env->db;
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    _cleanup_json_ json_t *vol = nb_vol_load(ctx, id);
    int rc = vol ? 0 : -1;
    if (rc == 0 && strcmp(nb_json_str(vol, "status"), "attaching") == 0)
        rc = nb_vol_settle(ctx, id, false);
    if (rc < 0) {
        nb_db_rollback(db);
        return -1;
    }
    if (nb_db_commit(db, ctx) < 0)
        return -1;
    return nb_resp_empty(resp, 202);
}

/* Cinder's schema of os-attach: mountpoint (1-255 characters) required,
 * instance_uuid (a uuid) or host_name, mode rw or ro, nothing else. */
static int check_attach(struct nb_ctx *ctx, const json_t *arg)
{
    if (!json_is_object(arg)) {
        _cleanup_free_ char *d = nb_pyrepr(arg);
        return nb_error(ctx, 400, NULL,
                        "Invalid input for field/attribute os-attach. Value: %s. %s is not of "
                        "type 'object'",
                        d, d);
    }
    const char *mp = nb_json_str(arg, "mountpoint"), *inst = nb_json_str(arg, "instance_uuid");
    const char *mode = nb_json_str(arg, "mode");
    _cleanup_free_ char *d = nb_pyrepr(arg);
    if (inst && !nb_is_uuid(inst))
        return nb_error(ctx, 400, NULL,
                        "Invalid input for field/attribute instance_uuid. Value: %s. '%s' is not "
                        "a 'uuid'",
                        inst, inst);
    if (mp && (!*mp || strlen(mp) > 255))
        return nb_error(ctx, 400, NULL,
                        "Invalid input for field/attribute mountpoint. Value: %s. '%s' is %s", mp,
                        mp, *mp ? "too long" : "too short");
    if (mode && strcmp(mode, "rw") != 0 && strcmp(mode, "ro") != 0)
        return nb_error(ctx, 400, NULL,
                        "Invalid input for field/attribute mode. Value: %s. '%s' is not one of "
                        "['rw', 'ro']",
                        mode, mode);
    if (!mp)
        return nb_error(ctx, 400, NULL,
                        "Invalid input for field/attribute os-attach. Value: %s. 'mountpoint' "
                        "is a required property",
                        d);
    if (!inst && !nb_json_str(arg, "host_name"))
        return nb_error(ctx, 400, NULL,
                        "Invalid input for field/attribute os-attach. Value: %s. %s is not valid "
                        "under any of the given schemas",
                        d, d);
    return 0;
}

/* os-attach (Cinder's attach of the older flow): an available (or
 * os-reserve'd, attaching) volume is attached at once: begin_attach, then
 * nb_volume_attach's attachment record and in-use, as the conductor does. */
static int do_attach(struct nb_ctx *ctx, const char *id, json_t *vol, json_t *arg,
                     struct nb_resp *resp)
{
    if (check_attach(ctx, arg) < 0)
        return -1;
    if (strcmp(nb_json_str(vol, "status"), "maintenance") == 0)
        return nb_error(ctx, 400, NULL,
                        "Invalid volume: The volume cannot be attached in maintenance mode.");
    if (strcmp(nb_json_str(vol, "status"), "attaching") != 0 &&
        nb_volume_transition(ctx, id, NB_VOLUME_BEGIN_ATTACH) < 0)
        return -1;
    char att[NB_UUID_LEN];
    const char *host = nb_json_str(arg, "host_name");
    if (nb_volume_attach(ctx, id, nb_json_str(arg, "instance_uuid"), host,
                         nb_json_str(arg, "mountpoint"), att) < 0) {
        struct nb_ctx sub;
        nb_ctx_child(&sub, ctx);
        nb_volume_transition(&sub, id, NB_VOLUME_ATTACH_FAILED);
        return -1;
    }
    return nb_resp_empty(resp, 202);
}

/* The attachment_id of an os-detach / os-force_detach body, or the
 * volume's only live attachment into *owner (Cinder's detach with none).
 * Borrowed from arg or *owner; NULL when the volume has no attachment
 * (ctx untouched) or after 400 (more than one). */
static const char *detach_target(struct nb_ctx *ctx, const char *id, const json_t *arg,
                                 json_t **owner)
{
    const char *att = json_is_object(arg) ? nb_json_str(arg, "attachment_id") : NULL;
    if (att)
        return att;
    *owner =
        nb_db_rows(nb_vol_env->db, ctx,
                   "SELECT id FROM volume_attachment WHERE volume_id = ? AND deleted = 0", "s", id);
    if (json_array_size(*owner) > 1)
        nb_error(ctx, 400, NULL,
                 "Invalid volume: Detach volume failed: More than one attachment, but no "
                 "attachment_id provided.");
    return json_array_size(*owner) == 1 ? nb_json_str(json_array_get(*owner, 0), "id") : NULL;
}

/* Cinder's detach of a volume with no attachment: it is set available
 * (through the machine when it can be) and nothing else happens. 0/-1. */
static int detach_nothing(struct nb_ctx *ctx, const char *id, struct nb_resp *resp)
{
    struct nb_db *db = nb_vol_env->db;
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    if (nb_vol_settle(ctx, id, true) < 0) {
        nb_db_rollback(db);
        return -1;
    }
    if (nb_db_commit(db, ctx) < 0)
        return -1;
    NB_INFO(NB_VOL_LOG, ctx, NULL, "Volume detach called, but volume not attached.");
    return nb_resp_empty(resp, 202);
}

/* os-detach: the attachment named (or the volume's only one) goes through
 * begin_detaching and nb_volume_detach, as the conductor's detach. */
static int do_detach(struct nb_ctx *ctx, const char *id, json_t *vol, json_t *arg,
                     struct nb_resp *resp)
{
    _cleanup_json_ json_t *owner = NULL;
    const char *att = detach_target(ctx, id, arg, &owner);
    if (!att)
        return nb_ctx_failed(ctx) ? -1 : detach_nothing(ctx, id, resp);
    if (strcmp(nb_json_str(vol, "status"), "detaching") != 0 &&
        nb_volume_transition(ctx, id, NB_VOLUME_BEGIN_DETACH) < 0)
        return -1;
    if (nb_volume_detach(ctx, id, att) < 0) {
        struct nb_ctx sub;
        nb_ctx_child(&sub, ctx);
        nb_volume_transition(&sub, id, NB_VOLUME_ROLL_DETACHING);
        return -1;
    }
    return nb_resp_empty(resp, 202);
}

/* os-force_detach (admin): the attachment goes whatever the volume's
 * status, which then follows the attachments left (Cinder's detach,
 * finish_detach). */
static int do_force_detach(struct nb_ctx *ctx, const char *id, json_t *vol, json_t *arg,
                           struct nb_resp *resp)
{
    if (!ctx->is_admin)
        return nb_error(ctx, 403, NULL,
                        "Policy doesn't allow volume_extension:volume_admin_actions:force_detach "
                        "to be performed.");
    _cleanup_json_ json_t *owner = NULL;
    const char *att = detach_target(ctx, id, arg, &owner);
    if (!att)
        return nb_ctx_failed(ctx) ? -1 : detach_nothing(ctx, id, resp);
    struct nb_ctx sub; /* its error becomes part of the 400 */
    nb_ctx_child(&sub, ctx);
    if (nb_vol_attachment_delete(&sub, id, att) < 0)
        return nb_error(ctx, 400, NULL,
                        "Error force detaching volume - VolumeAttachmentNotFound: %s",
                        nb_ctx_message(&sub));
    return nb_resp_empty(resp, 202);
}

static const struct {
    const char *action;
    enum nb_volume_op op;
} attach_actions[] = {
    {"os-begin_detaching", NB_VOLUME_BEGIN_DETACH},
    {"os-roll_detaching", NB_VOLUME_ROLL_DETACHING},
};

static int volume_action(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_vol_begin(ctx, req, resp) < 0)
        return -1;
    const char *id = nb_req_param(req, "volume_id");
    if (!req->json || !json_is_object(req->json) || json_object_size(req->json) != 1)
        return nb_error(ctx, 400, NULL, "Malformed request body");
    _cleanup_json_ json_t *vol = nb_vol_load(ctx, id);
    if (!vol)
        return -1;
    if (!ctx->is_member)
        return nb_error(ctx, 403, NULL, "Policy doesn't allow volume:update to be performed.");
    const char *action = json_object_iter_key(json_object_iter(req->json));
    json_t *arg = json_object_get(req->json, action);
    if (strcmp(action, "os-extend") == 0)
        return do_extend(ctx, id, vol, arg, resp);
    if (strcmp(action, "os-set_bootable") == 0)
        return do_set_bootable(ctx, id, arg, resp);
    if (strcmp(action, "os-update_readonly_flag") == 0)
        return do_update_readonly(ctx, id, arg, resp);
    if (strcmp(action, "os-reset_status") == 0)
        return do_reset_status(ctx, id, arg, resp);
    if (strcmp(action, "os-reserve") == 0)
        return do_reserve(ctx, id, resp);
    if (strcmp(action, "os-attach") == 0)
        return do_attach(ctx, id, vol, arg, resp);
    if (strcmp(action, "os-detach") == 0)
        return do_detach(ctx, id, vol, arg, resp);
    if (strcmp(action, "os-force_detach") == 0)
        return do_force_detach(ctx, id, vol, arg, resp);
    if (strcmp(action, "os-unreserve") == 0)
        return do_unreserve(ctx, id, resp);
    for (size_t i = 0; i < sizeof(attach_actions) / sizeof(attach_actions[0]); i++)
        if (strcmp(action, attach_actions[i].action) == 0) {
            if (nb_volume_transition(ctx, id, attach_actions[i].op) < 0)
                return -1;
            return nb_resp_empty(resp, 202);
        }
    return nb_error(ctx, 400, NULL, "There is no such action: %s", action);
}

void nb_vol_actions_routes(void)
{
    nb_http_route("POST", "/volume/v3/{project_id}/volumes/{volume_id}/action", volume_action, 0);
}
