/* server_snapshot.c - the createImage server action: Nova's
 * _action_create_image (servers.py) over compute/api.py's snapshot and
 * snapshot_volume_backed and compute/utils.py's create_image and
 * initialize_instance_snapshot_metadata.
 *
 * An image-backed server: the API creates the image record (queued,
 * qcow2/bare, Nova's snapshot properties plus the base image's inheritable
 * ones), sets task_state image_snapshot if the server is still idle,
 * records action createImage and casts snapshot_instance to the conductor;
 * the compute agent copies the guest's disk and uploads it into the record
 * (compute/rpc/conductor_api.h). A volume-backed server: the API snapshots each volume of the
 * server (forced: they are in use), and creates an image without data,
 * active with size 0, whose block_device_mapping property lists the
 * snapshots as the mappings a new server boots from; the action is finished
 * at once. */
#include "common/cleanup.h"
#include "common/http.h"
#include "common/json.h"
#include "common/log.h"
#include "common/pyrepr.h"
#include "common/util.h"
#include "compute/api/block_devices.h"
#include "compute/api/instances.h"
#include "compute/api/quotas.h"
#include "compute/api/resources.h"
#include "compute/api/server_snapshot.h"
#include "compute/api/server_actions.h"
#include "compute/api/validate.h"
#include "compute/compute.h"
#include "compute/objects/instance.h"
#include "compute/rpc/conductor_api.h"
#include "db/db.h"
#include "image/image.h"
#include "volume/volume.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Properties a snapshot never inherits: Nova's
 * NON_INHERITABLE_IMAGE_PROPERTIES, the [DEFAULT]
 * non_inheritable_image_properties defaults, the keys too large for system
 * metadata (SM_SKIP_KEYS), and nubo's record marker. */
static const char *const not_inherited[] = {"cinder_encryption_key_id",
                                            "cinder_encryption_key_deletion_policy",
                                            "img_signature",
                                            "img_signature_hash_method",
                                            "img_signature_key_type",
                                            "img_signature_certificate_uuid",
                                            "cache_in_nova",
                                            "bittorrent",
                                            "mappings",
                                            "block_device_mapping",
                                            "img_mappings",
                                            "img_block_device_mapping",
                                            "nubo_placeholder",
                                            NULL};

static bool in_list(const char *s, const char *const *list)
{
    for (; *list; list++)
        if (!strcmp(s, *list))
            return true;
    return false;
}

/* ---- request checks --------------------------------------------------------- */

int nb_srv_check_create_image(struct nb_ctx *ctx, json_t *args)
{
    static const char *const keys[] = {"name", "metadata", NULL};
    if (!json_is_object(args))
        return nb_srv_bad(ctx, "createImage", args, "is not of type 'object'");
    json_t *name = json_object_get(args, "name");
    if (!name) {
        _cleanup_free_ char *repr = nb_pyrepr(args);
        return nb_error(ctx, 400, NULL,
                        "Invalid input for field/attribute createImage. Value: %s. 'name' is a "
                        "required property",
                        repr);
    }
    if (nb_res_only_keys(ctx, "createImage", args, keys) < 0 ||
        nb_srv_check_name(ctx, "name", name) < 0)
        return -1;
    json_t *md = json_object_get(args, "metadata");
    if (md && nb_srv_check_metadata(ctx, "metadata", md) < 0)
        return -1;
    return 0;
}

/* ---- the image record ------------------------------------------------------- */

/* Nova's initialize_instance_snapshot_metadata: the base image's
 * inheritable properties and min_ram/min_disk, the owner's names, the
 * visibility (private, or shared with the server's project when someone
 * else snapshots it), then the request's metadata over all. New ref. */
static json_t *snapshot_attrs(struct nb_ctx *ctx, const json_t *inst, const char *name,
                              const json_t *metadata)
{
    json_t *attrs = json_pack("{s:s, s:{}}", "name", name, "properties");
    json_t *props = json_object_get(attrs, "properties");
    const char *image_ref = nb_json_str(inst, "image_ref");
    if (image_ref && *image_ref) {
        /* the base image as the system sees it: the caller may not see it
         * any more (Nova keeps a copy in the instance's system metadata) */
        struct nb_ctx sys;
        nb_ctx_init_system(&sys, ctx->request_id);
        _cleanup_json_ json_t *base = nb_image_lookup(&sys, image_ref);
        const char *k;
        json_t *v;
        json_object_foreach (base, k, v) {
            if (nb_image_is_core_attr(k) || in_list(k, not_inherited) ||
                !strncmp(k, "os_glance", 9) || !json_is_string(v))
                continue;
            json_object_set(props, k, v);
        }
        if (base) {
            json_object_set_new(attrs, "min_ram", json_integer(nb_json_int(base, "min_ram", 0)));
            json_object_set_new(attrs, "min_disk", json_integer(nb_json_int(base, "min_disk", 0)));
        }
        json_object_set_new(props, "base_image_ref", json_string(image_ref));
    }
    if (ctx->user_name[0])
        json_object_set_new(props, "owner_user_name", json_string(ctx->user_name));
    if (ctx->project_name[0])
        json_object_set_new(props, "owner_project_name", json_string(ctx->project_name));
    const char *owner = nb_json_str(inst, "project_id");
    if (strcmp(owner, ctx->project_id)) {
        json_object_set_new(attrs, "visibility", json_string("shared"));
        json_object_set_new(attrs, "member", json_string(owner));
        json_object_set_new(props, "instance_owner", json_string(owner));
    } else {
        json_object_set_new(attrs, "visibility", json_string("private"));
    }
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)metadata, k, v)
        json_object_set(props, k, v);
    return attrs;
}

/* compute/utils.is_volume_backed_instance: no image, or a volume root. */
static bool volume_backed(const json_t *inst, const json_t *bdms)
{
    const char *image_ref = nb_json_str(inst, "image_ref");
    if (!image_ref || !*image_ref)
        return true;
    size_t i;
    json_t *b;
    json_array_foreach ((json_t *)bdms, i, b) {
        const char *dst = nb_json_str(b, "destination_type");
        if (nb_srv_bdm_is_root(b) && dst && !strcmp(dst, "volume"))
            return true;
    }
    return false;
}

/* A mapping row as an image's block_device_mapping entry
 * (BlockDeviceDict.get_image_mapping: the v2 fields, no connection_info, no
 * database-only fields). */
static json_t *image_mapping(const json_t *row)
{
    static const char *const str_keys[] = {"source_type", "destination_type", "guest_format",
                                           "device_type", "disk_bus",         "device_name",
                                           "snapshot_id", "volume_id",        "image_id",
                                           "tag",         "volume_type",      NULL};
    json_t *m = json_object();
    for (const char *const *k = str_keys; *k; k++)
        json_object_set_new(m, *k, nb_res_row_copy(row, *k));
    json_t *bi = json_object_get(row, "boot_index");
    json_object_set_new(m, "boot_index", json_is_integer(bi) ? json_incref(bi) : json_null());
    json_t *vs = json_object_get(row, "volume_size");
    json_object_set_new(m, "volume_size", json_is_integer(vs) ? json_incref(vs) : json_null());
    json_object_set_new(m, "delete_on_termination",
                        json_boolean(nb_json_int(row, "delete_on_termination", 0) != 0));
    json_object_set_new(m, "no_device", json_null());
    return m;
}

/* ---- volume-backed ------------------------------------------------------------------ */

/* Nova's snapshot_volume_backed: a snapshot of each volume (forced), the
 * mappings as image properties, an image without data. Records action
 * createImage with event api_snapshot_instance. 0/-1. */
static int snapshot_volume_backed(struct nb_ctx *ctx, const json_t *inst, json_t *bdms,
                                  json_t *attrs, char *image_id)
{
    struct nb_db *db = nb_srv_db();
    const char *uuid = nb_json_str(inst, "uuid");
    const char *host = nb_srv_env()->my_host;
    json_t *props = json_object_get(attrs, "properties");
    json_object_del(props, "bdm_v2");
    json_object_del(props, "root_device_name");
    const char *root = nb_json_str(inst, "root_device_name");
    if (root && *root)
        json_object_set_new(props, "root_device_name", json_string(root));
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    if (nb_action_start(db, ctx, uuid, "createImage") < 0 ||
        nb_event_start(db, ctx, uuid, "api_snapshot_instance", host) < 0 ||
        nb_db_commit(db, ctx) < 0) {
        nb_db_rollback(db);
        return -1;
    }
    json_t *mapping = json_array();
    char snap_name[300];
    snprintf(snap_name, sizeof(snap_name), "snapshot for %s", nb_json_str(attrs, "name"));
    size_t i;
    json_t *b;
    int rc = 0;
    json_array_foreach (bdms, i, b) {
        if (nb_json_int(b, "no_device", 0))
            continue;
        const char *dst = nb_json_str(b, "destination_type");
        const char *vol = nb_json_str(b, "volume_id");
        if (!dst || strcmp(dst, "volume")) {
            json_array_append_new(mapping, image_mapping(b));
            continue;
        }
        char snap_id[NB_UUID_LEN];
        _cleanup_json_ json_t *v = vol ? nb_volume_lookup(ctx, vol) : NULL;
        if (!v || nb_volume_snapshot_for(ctx, vol, snap_name, nb_json_str(v, "display_description"),
                                         true, snap_id) < 0) {
            if (!v && !nb_ctx_failed(ctx))
                nb_error(ctx, 409, NULL, "Mapping %s of instance %s has no volume yet.",
                         nb_json_str(b, "uuid"), uuid);
            rc = -1;
            break;
        }
        json_t *m = image_mapping(b);
        json_object_set_new(m, "source_type", json_string("snapshot"));
        json_object_set_new(m, "snapshot_id", json_string(snap_id));
        json_object_set_new(m, "volume_id", json_null());
        json_object_set_new(m, "image_id", json_null());
        json_object_set_new(m, "tag", json_null());
        json_object_set_new(m, "volume_type", json_null());
        json_object_set_new(m, "guest_format", json_null());
        if (!json_is_integer(json_object_get(m, "volume_size")))
            json_object_set_new(m, "volume_size", json_integer(nb_json_int(v, "size", 0)));
        json_array_append_new(mapping, m);
        NB_INFO("nubo.compute.api", ctx, uuid, "snapshot %s of volume %s for image %s", snap_id,
                vol, nb_json_str(attrs, "name"));
    }
    if (rc == 0 && json_array_size(mapping)) {
        json_object_set(props, "block_device_mapping", mapping);
        json_object_set_new(props, "bdm_v2", json_true());
    }
    json_decref(mapping);
    if (rc == 0)
        rc = nb_image_create_snapshot(ctx, attrs, true, image_id);
    struct nb_ctx sub; /* recording the outcome must not change it */
    nb_ctx_child(&sub, ctx);
    if (nb_event_finish(db, &sub, uuid, "api_snapshot_instance", rc == 0 ? "Success" : "Error",
                        NULL, rc == 0 ? NULL : nb_ctx_message(ctx)) < 0 ||
        nb_action_finish(db, &sub, uuid, rc == 0 ? NULL : nb_ctx_message(ctx)) < 0)
        NB_WARN("nubo.compute.api", ctx, uuid, "could not finish action createImage: %s",
                nb_ctx_message(&sub));
    return rc;
}

/* ---- image-backed --------------------------------------------------------------------- */

/* Nova's snapshot: the queued record, task_state image_snapshot (only from
 * None, else the record goes again and 409), action createImage, the cast.
 * create_image's instance_uuid, user_id and image_type go over the
 * inherited properties, the request's metadata over them. */
static int snapshot_image_backed(struct nb_ctx *ctx, const json_t *inst, json_t *attrs,
                                 const json_t *metadata, char *image_id)
{
    struct nb_db *db = nb_srv_db();
    const char *uuid = nb_json_str(inst, "uuid");
    json_t *props = json_object_get(attrs, "properties");
    const char *const own[][2] = {
        {"instance_uuid", uuid}, {"user_id", ctx->user_id}, {"image_type", "snapshot"}};
    for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
        if (!json_object_get(metadata, own[i][0]))
            json_object_set_new(props, own[i][0], json_string(own[i][1]));
    json_object_set_new(attrs, "disk_format", json_string("qcow2"));
    json_object_set_new(attrs, "container_format", json_string("bare"));
    if (nb_image_create_snapshot(ctx, attrs, false, image_id) < 0)
        return -1;
    if (nb_db_begin(db, ctx) < 0)
        goto drop_image;
    int n = (int)nb_instance_transition(
        db, ctx, uuid,
        &(struct nb_instance_change){.expect_task = {NB_NONE},
                                     .task_state = NB_TASK_IMAGE_SNAPSHOT},
        NULL);
    if (n == 0)
        nb_srv_invalid_state(ctx, "createImage", uuid, "task_state", "(changed meanwhile)");
    if (n <= 0 || nb_action_start(db, ctx, uuid, "createImage") < 0) {
        nb_db_rollback(db);
        goto drop_image;
    }
    if (nb_db_commit(db, ctx) < 0)
        goto drop_image;
    /* never sent: the task state is cleared and the image deleted */
    struct nb_bus_undo undo = nb_srv_undo(NB_TASK_IMAGE_SNAPSHOT, NULL, NULL);
    json_object_set_new(undo.data, "drop_image", json_true());
    if (nb_conductor_snapshot_instance(ctx, uuid, image_id, undo) < 0)
        return nb_srv_not_sent(ctx, uuid, "snapshot_instance");
    return 0;
drop_image : {
    struct nb_ctx sub; /* the clean-up keeps the error being reported */
    nb_ctx_child(&sub, ctx);
    if (nb_image_delete(&sub, image_id) < 0)
        NB_WARN("nubo.compute.api", ctx, uuid, "could not delete image %s: %s", image_id,
                nb_ctx_message(&sub));
    return -1;
}
}

/* ---- the action ----------------------------------------------------------------------- */

/* Nova's check_img_metadata_properties_quota (before 2.39). */
static int check_metadata_quota(struct nb_ctx *ctx, const json_t *metadata)
{
    long long lim[NB_Q_COUNT];
    if (!metadata || nb_ctx_mv_ge(ctx, 2, 39))
        return 0;
    if (nb_quota_limits(ctx, ctx->project_id, ctx->user_id, lim) < 0)
        return -1;
    if (lim[NB_Q_METADATA_ITEMS] >= 0 &&
        (long long)json_object_size(metadata) > lim[NB_Q_METADATA_ITEMS])
        return nb_error(ctx, 403, NULL, "Image metadata limit exceeded");
    return 0;
}

int nb_srv_create_image(struct nb_ctx *ctx, json_t *inst, json_t *args, struct nb_resp *resp)
{
    const char *uuid = nb_json_str(inst, "uuid");
    const char *project = nb_json_str(inst, "project_id");
    const char *name = json_string_value(json_object_get(args, "name"));
    json_t *metadata = json_object_get(args, "metadata");
    if (nb_srv_policy(ctx, "os_compute_api:servers:create_image",
                      nb_srv_is_member_of(ctx, project)) < 0 ||
        check_metadata_quota(ctx, metadata) < 0)
        return -1;
    _cleanup_json_ json_t *bdms = nb_db_rows(
        nb_srv_db(), ctx,
        "SELECT * FROM block_device_mapping WHERE instance_uuid = ? AND deleted = 0 ORDER BY id",
        "s", uuid);
    if (!bdms)
        return -1;
    bool vbacked = volume_backed(inst, bdms);
    if (vbacked && nb_srv_policy(ctx, "os_compute_api:servers:create_image:allow_volume_backed",
                                 nb_srv_is_member_of(ctx, project)) < 0)
        return -1;
    static const char *const states[] = {NB_VM_ACTIVE, NB_VM_STOPPED, NB_VM_PAUSED, NB_VM_SUSPENDED,
                                         NULL};
    const char *vm = nb_json_str(inst, "vm_state");
    const char *task = nb_json_str(inst, "task_state");
    if (!vm || !in_list(vm, states))
        return nb_srv_invalid_state(ctx, "createImage", uuid, "vm_state", vm);
    if (task)
        return nb_srv_invalid_state(ctx, "createImage", uuid, "task_state", task);
    _cleanup_json_ json_t *attrs = snapshot_attrs(ctx, inst, name, metadata);
    char image_id[NB_UUID_LEN];
    if ((vbacked ? snapshot_volume_backed(ctx, inst, bdms, attrs, image_id)
                 : snapshot_image_backed(ctx, inst, attrs, metadata, image_id)) < 0)
        return -1;
    NB_INFO("nubo.compute.api", ctx, uuid, "createImage %s: image %s (%s)", name, image_id,
            vbacked ? "volume-backed, done" : "upload to come");
    if (nb_ctx_mv_ge(ctx, 2, 45))
        return nb_resp_json(resp, 202, json_pack("{s:s}", "image_id", image_id));
    _cleanup_free_ char *location =
        nb_strdup_printf("%s/image/images/%s", nb_http_base_url(), image_id);
    nb_resp_header(resp, "Location", location);
    return nb_resp_empty(resp, 202);
}
