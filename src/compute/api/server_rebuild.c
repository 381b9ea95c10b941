/* server_rebuild.c - the rebuild server action (Nova's servers.py
 * _action_rebuild over compute/api.py rebuild): the body's schema at the
 * request's microversion, the state, lock and image checks, and the one
 * transaction that sets task_state rebuilding with the new image_ref and
 * the attributes the request changes (name, description, metadata, access
 * IPs, disk config, key pair, user data, hostname) and starts action
 * "rebuild"; then the cast to the conductor and the answer: 202 with the
 * server's view, its adminPass (unless [api] enable_instance_password is
 * false) and from 2.57 its user_data, and a Location header.
 *
 * Evacuate lives next door (server_evacuate.c). */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "compute/api/api.h"
#include "compute/api/block_devices.h"
#include "compute/api/instances.h"
#include "compute/api/quotas.h"
#include "compute/api/server_actions.h"
#include "compute/api/server_create.h"
#include "compute/api/server_rebuild.h"
#include "compute/api/server_views.h"
#include "compute/api/validate.h"
#include "compute/compute.h"
#include "compute/objects/instance.h"
#include "compute/rpc/conductor_api.h"
#include "db/db.h"
#include "image/image.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Nova's base64 format: standard alphabet, padded, length a multiple of 4. */
static bool is_base64(const char *s)
{
    size_t n = strlen(s), pad = 0;
    if (n % 4)
        return false;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (ch == '=') {
            pad++;
            continue;
        }
        if (pad || !((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
                     (ch >= '0' && ch <= '9') || ch == '+' || ch == '/'))
            return false;
    }
    return pad <= 2;
}

/* The keys of the rebuild object at ctx's microversion (rebuild,
 * rebuild_v219, _v254, _v257, _v263, _v290). */
static void rebuild_keys(const struct nb_ctx *ctx, const char *keys[16])
{
    int n = 0;
    static const char *const base[] = {"name",       "imageRef",           "adminPass",
                                       "metadata",   "preserve_ephemeral", "OS-DCF:diskConfig",
                                       "accessIPv4", "accessIPv6",         NULL};
    for (int i = 0; base[i]; i++)
        keys[n++] = base[i];
    if (!nb_ctx_mv_ge(ctx, 2, 57))
        keys[n++] = "personality";
    if (nb_ctx_mv_ge(ctx, 2, 19))
        keys[n++] = "description";
    if (nb_ctx_mv_ge(ctx, 2, 54))
        keys[n++] = "key_name";
    if (nb_ctx_mv_ge(ctx, 2, 57))
        keys[n++] = "user_data";
    if (nb_ctx_mv_ge(ctx, 2, 63))
        keys[n++] = "trusted_image_certificates";
    if (nb_ctx_mv_ge(ctx, 2, 90))
        keys[n++] = "hostname";
    keys[n] = NULL;
}

/* key_name (name_or_none), user_data (base64 or null), personality and
 * trusted_image_certificates. 0/-1. */
static int check_rebuild_extras(struct nb_ctx *ctx, const json_t *r)
{
    json_t *v;
    if ((v = json_object_get(r, "key_name")) && !json_is_null(v) &&
        nb_srv_check_string(ctx, "key_name", v, 1, 255, false) < 0)
        return -1;
    if ((v = json_object_get(r, "user_data")) && !json_is_null(v)) {
        if (!json_is_string(v))
            return nb_srv_bad(ctx, "user_data", v, "is not valid under any of the given schemas");
        if (json_string_length(v) > 65535 || !is_base64(json_string_value(v)))
            return nb_srv_bad(ctx, "user_data", v, "is not valid under any of the given schemas");
    }
    if ((v = json_object_get(r, "personality")) && !json_is_array(v))
        return nb_srv_bad(ctx, "personality", v, "is not of type 'array'");
    if ((v = json_object_get(r, "trusted_image_certificates")) && !json_is_null(v)) {
        if (!json_is_array(v))
            return nb_srv_bad(ctx, "trusted_image_certificates", v,
                              "is not of type 'array', 'null'");
        if (json_array_size(v) == 0)
            return nb_srv_bad(ctx, "trusted_image_certificates", v, "is too short");
    }
    if ((v = json_object_get(r, "hostname")) && nb_srv_check_hostname(ctx, v) < 0)
        return -1;
    return 0;
}

int nb_srv_check_rebuild(struct nb_ctx *ctx, json_t *args)
{
    if (!json_is_object(args))
        return nb_srv_bad(ctx, "rebuild", args, "is not of type 'object'");
    if (!json_object_get(args, "imageRef"))
        return nb_error(ctx, 400, NULL,
                        "Invalid input for field/attribute rebuild. Value: {...}. 'imageRef' is a "
                        "required property");
    const char *keys[16];
    rebuild_keys(ctx, keys);
    if (nb_res_only_keys(ctx, "rebuild", args, keys) < 0)
        return -1;
    json_t *v;
    if (nb_srv_check_uuid(ctx, "imageRef", json_object_get(args, "imageRef")) < 0)
        return -1;
    if ((v = json_object_get(args, "name")) && nb_srv_check_name(ctx, "name", v) < 0)
        return -1;
    if ((v = json_object_get(args, "adminPass")) && !json_is_string(v))
        return nb_srv_bad(ctx, "adminPass", v, "is not of type 'string'");
    if ((v = json_object_get(args, "metadata")) && nb_srv_check_metadata(ctx, "metadata", v) < 0)
        return -1;
    if ((v = json_object_get(args, "preserve_ephemeral")) &&
        nb_res_check_bool(ctx, "preserve_ephemeral", v) < 0)
        return -1;
    if ((v = json_object_get(args, "description")) &&
        nb_srv_check_description(ctx, "description", v) < 0)
        return -1;
    if (nb_srv_check_disk_config(ctx, args) < 0 || nb_srv_check_access_ips(ctx, args) < 0)
        return -1;
    return check_rebuild_extras(ctx, args);
}

/* What the checks resolved, for the transaction and the answer. */
struct rebuild_req {
    json_t *inst, *args;
    const char *uuid;
    const char *image_ref; /* the requested image */
    json_t *image;         /* its Glance view */
    json_t *keypair;       /* key_name given and not null */
    bool bfv;
    char admin_pass[13];
    const char *password; /* adminPass or the generated one */
};

/* The root mapping's image (volume-backed servers), or NULL. */
static char *bfv_image(struct nb_ctx *ctx, const char *uuid, bool *bfv)
{
    _cleanup_json_ json_t *rows = nb_srv_instance_volume_bdms(ctx, uuid);
    size_t i;
    json_t *b;
    json_array_foreach (rows, i, b) {
        const char *dst = nb_json_str(b, "destination_type");
        if (nb_srv_bdm_is_root(b) && dst && !strcmp(dst, "volume")) {
            *bfv = true;
            const char *img = nb_json_str(b, "image_id");
            return img ? strdup(img) : NULL;
        }
    }
    return NULL;
}

/* Flavor against image (Nova's _validate_flavor_image_nostatus). 0/-1. */
static int check_flavor_image(struct nb_ctx *ctx, const json_t *flavor, const json_t *image,
                              bool bfv)
{
    if (nb_json_int(flavor, "memory_mb", 0) < nb_json_int(image, "min_ram", 0))
        return nb_error(ctx, 400, NULL, "Flavor's memory is too small for requested image.");
    if (bfv)
        return 0;
    long long gib = 1024LL * 1024 * 1024;
    long long dest = nb_json_int(flavor, "root_gb", 0) * gib;
    long long size = nb_json_int(image, "size", 0);
    long long min_disk = nb_json_int(image, "min_disk", 0) * gib;
    if (dest && size > dest)
        return nb_error(ctx, 400, NULL,
                        "Flavor's disk is too small for requested image. Flavor disk is %lld "
                        "bytes, image is %lld bytes.",
                        dest, size);
    if (dest && min_disk > dest)
        return nb_error(ctx, 400, NULL,
                        "Flavor's disk is smaller than the minimum size specified in image "
                        "metadata. Flavor disk is %lld bytes, minimum size is %lld bytes.",
                        dest, min_disk);
    return 0;
}

/* The image: found, active, acceptable for a volume-backed server, fitting
 * the instance's flavor. 0/-1. */
static int resolve_image(struct nb_ctx *ctx, struct rebuild_req *r)
{
    r->image = nb_image_lookup(ctx, r->image_ref);
    if (!r->image)
        return nb_ctx_status(ctx) == 400 || nb_ctx_status(ctx) == 404
                   ? nb_srv_error_as(ctx, 400, "Cannot find image for rebuild")
                   : -1;
    const char *st = nb_json_str(r->image, "status");
    if (!st || strcmp(st, "active"))
        return nb_error(ctx, 400, NULL, "Image %s is not active.", r->image_ref);
    const char *dc = json_string_value(json_object_get(r->args, "OS-DCF:diskConfig"));
    const char *adc = json_string_value(json_object_get(r->image, "auto_disk_config"));
    if (dc && !strcmp(dc, "AUTO") && adc && !strcmp(adc, "disabled"))
        return nb_error(ctx, 400, NULL, "Requested image %s has automatic disk resize disabled.",
                        r->image_ref);
    _cleanup_free_ char *orig = bfv_image(ctx, r->uuid, &r->bfv);
    const char *iref = nb_json_str(r->inst, "image_ref");
    if (!iref || !*iref)
        r->bfv = true;
    if (r->bfv && (!orig || strcmp(orig, r->image_ref))) {
        if (!nb_ctx_mv_ge(ctx, 2, 93))
            return nb_error(ctx, 400, NULL,
                            "Image %s is unacceptable: Unable to rebuild with a different image "
                            "for a volume-backed server.",
                            r->image_ref);
        return nb_error(ctx, 400, NULL,
                        "Image %s is unacceptable: re-imaging the root volume of a volume-backed "
                        "server is not supported by nubo yet.",
                        r->image_ref);
    }
    if (r->bfv && json_array_size(json_object_get(r->args, "trusted_image_certificates")))
        return nb_error(ctx, 400, NULL,
                        "Image certificate validation is not supported for volume-backed "
                        "servers.");
    _cleanup_json_ json_t *flavor = nb_json_parse(nb_json_str(r->inst, "flavor"));
    return check_flavor_image(ctx, flavor, r->image, r->bfv);
}

/* Key pair, metadata quota and the password. 0/-1. */
static int resolve_rest(struct nb_ctx *ctx, struct rebuild_req *r)
{
    json_t *kn = json_object_get(r->args, "key_name");
    if (json_is_string(kn)) {
        r->keypair = nb_keypair_get(ctx, ctx->user_id, json_string_value(kn));
        if (!r->keypair)
            return nb_ctx_status(ctx) == 404
                       ? nb_srv_error_as(ctx, 400, "Invalid key_name provided.")
                       : -1;
    }
    json_t *md = json_object_get(r->args, "metadata");
    if (md) {
        long long lim[NB_Q_COUNT];
        if (nb_quota_limits(ctx, nb_json_str(r->inst, "project_id"), NULL, lim) < 0)
            return -1;
        if (lim[NB_Q_METADATA_ITEMS] >= 0 &&
            (long long)json_object_size(md) > lim[NB_Q_METADATA_ITEMS])
            return nb_error(ctx, 403, NULL, "Maximum number of metadata items exceeds %lld",
                            lim[NB_Q_METADATA_ITEMS]);
    }
    r->password = json_string_value(json_object_get(r->args, "adminPass"));
    if (!r->password) {
        nb_srv_generate_password(r->admin_pass);
        r->password = r->admin_pass;
    }
    return 0;
}

/* Replaces the instance's metadata with md (Nova's rebuild sets
 * instance.metadata). Joins the caller's transaction. 0/-1. */
static int replace_metadata(struct nb_ctx *ctx, const char *uuid, const json_t *md)
{
    struct nb_db *db = nb_srv_db();
    if (nb_db_exec(db, ctx,
                   "UPDATE instance_metadata SET deleted = id WHERE instance_uuid = ? AND "
                   "deleted = 0",
                   "s", uuid) < 0)
        return -1;
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)md, k, v) {
        if (nb_db_exec(
                db, ctx,
                "INSERT INTO instance_metadata (instance_uuid, \"key\", value) VALUES (?, ?, ?)",
                "sss", uuid, k, json_string_value(v)) < 0)
            return -1;
    }
    return 0;
}

/* The attributes the request changes (name, description, hostname, access
 * IPs, disk config; key pair; user data; metadata). Joins the caller's
 * transaction. 0/-1. */
static int store_attrs(struct nb_ctx *ctx, const struct rebuild_req *r)
{
    json_t *a = r->args;
    struct nb_instance_attrs at;
    _cleanup_free_ char *name = nb_srv_attrs_from_body(a, &at);
    json_t *kn = json_object_get(a, "key_name"), *ud = json_object_get(a, "user_data");
    json_t *tc = json_object_get(a, "trusted_image_certificates");
    struct nb_instance_boot_data bd = {
        .set_key = kn != NULL,
        .key_name = nb_json_str(r->keypair, "name"),
        .key_data = nb_json_str(r->keypair, "public_key"),
        .set_user_data = ud != NULL,
        .user_data = json_string_value(ud),
        .set_trusted_certs = tc != NULL,
        .trusted_certs = json_is_array(tc) ? tc : NULL,
    };
    struct nb_db *db = nb_srv_db();
    if (nb_instance_update_attrs(db, ctx, r->uuid, &at) < 0 ||
        nb_instance_set_boot_data(db, ctx, r->uuid, &bd) < 0)
        return -1;
    json_t *md = json_object_get(a, "metadata");
    return md ? replace_metadata(ctx, r->uuid, md) : 0;
}

/* One transaction: task_state rebuilding (from None, vm_state as checked),
 * image_ref (not for volume-backed servers: an empty image_ref marks
 * them), progress 0, the attributes, action "rebuild". 0/-1. */
static int begin_rebuild(struct nb_ctx *ctx, const struct rebuild_req *r)
{
    struct nb_db *db = nb_srv_db();
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    int n = (int)nb_instance_transition(db, ctx, r->uuid,
                                        &(struct nb_instance_change){
                                            .expect_vm = {nb_json_str(r->inst, "vm_state")},
                                            .expect_task = {NB_NONE},
                                            .task_state = NB_TASK_REBUILDING,
                                            .image_ref = r->bfv ? NULL : r->image_ref,
                                            .reset_progress = true,
                                        },
                                        NULL);
    if (n < 0 ||
        (n == 0 &&
         nb_srv_invalid_state(ctx, "rebuild", r->uuid, "task_state", "(changed meanwhile)") < 0) ||
        store_attrs(ctx, r) < 0 || nb_action_start(db, ctx, r->uuid, "rebuild") < 0) {
        nb_db_rollback(db);
        return -1;
    }
    return nb_db_commit(db, ctx);
}

/* 202 {"server": <view>, "adminPass", "user_data" (2.57)} with Location,
 * the view as Nova's rebuild shows it. 0/-1. */
static int respond_rebuilt(struct nb_ctx *ctx, const struct rebuild_req *r, struct nb_resp *resp)
{
    _cleanup_json_ json_t *inst = nb_srv_instance_get(ctx, r->uuid, false);
    if (!inst)
        return -1;
    struct nb_srv_view_opts o;
    nb_srv_view_opts_update(ctx, &o);
    o.show_keypair = nb_ctx_mv_ge(ctx, 2, 54);
    o.show_server_groups = nb_ctx_mv_ge(ctx, 2, 71);
    o.show_user_data = false;
    _cleanup_json_ json_t *rows = json_pack("[O]", inst);
    struct nb_srv_buf b;
    nb_srv_buf_init(&b);
    if (nb_srv_view_write(ctx, rows, &o, &b) < 0) {
        nb_srv_buf_free(&b);
        return -1;
    }
    json_t *view = json_loadb(b.s, b.len, 0, NULL);
    nb_srv_buf_free(&b);
    if (!view)
        return nb_error(ctx, 500, NULL, "The server view could not be built.");
    if (nb_conf_bool("api", "enable_instance_password", true))
        json_object_set_new(view, "adminPass", json_string(r->password));
    if (nb_ctx_mv_ge(ctx, 2, 57)) {
        const char *ud = nb_json_str(inst, "user_data");
        json_object_set_new(view, "user_data", ud ? json_string(ud) : json_null());
    }
    size_t i;
    json_t *l;
    json_array_foreach (json_object_get(view, "links"), i, l) {
        if (!strcmp(nb_json_str(l, "rel") ? nb_json_str(l, "rel") : "", "self"))
            nb_resp_header(resp, "Location", nb_json_str(l, "href"));
    }
    return nb_resp_json(resp, 202, json_pack("{s:o}", "server", view));
}

int nb_srv_rebuild(struct nb_ctx *ctx, json_t *inst, json_t *args, struct nb_resp *resp)
{
    static const char *const vm[] = {NB_VM_ACTIVE, NB_VM_STOPPED, NB_VM_ERROR, NULL};
    const struct nb_srv_state_rule rule = {vm, nb_srv_none_only, true};
    struct rebuild_req r = {.inst = inst, .args = args, .uuid = nb_json_str(inst, "uuid")};
    r.image_ref = json_string_value(json_object_get(args, "imageRef"));
    const char *project = nb_json_str(inst, "project_id");
    int rc = -1;
    if (nb_srv_policy(ctx, "os_compute_api:servers:rebuild", nb_srv_is_member_of(ctx, project)) <
            0 ||
        (json_object_get(args, "trusted_image_certificates") &&
         nb_srv_policy(ctx, "os_compute_api:servers:rebuild:trusted_certs",
                       nb_srv_is_member_of(ctx, project)) < 0) ||
        nb_srv_check_lock(ctx, inst) < 0 || nb_srv_check_state(ctx, inst, "rebuild", &rule) < 0 ||
        resolve_image(ctx, &r) < 0 || resolve_rest(ctx, &r) < 0 || begin_rebuild(ctx, &r) < 0)
        goto out;
    json_t *pe = json_object_get(args, "preserve_ephemeral");
    const struct nb_rebuild_req req = {
        .uuid = r.uuid,
        .image_ref = r.image_ref,
        .admin_password = r.password,
        .preserve_ephemeral = pe && nb_srv_json_truthy(pe),
    };
    struct nb_bus_undo undo = nb_srv_undo(NB_TASK_REBUILDING, NULL, NULL);
    const char *old_image = nb_json_str(r.inst, "image_ref");
    if (!r.bfv && old_image) /* the new image_ref was stored with the task state */
        json_object_set_new(undo.data, "image_ref", json_string(old_image));
    if (nb_conductor_rebuild_instance(ctx, &req, undo) < 0) {
        nb_srv_not_sent(ctx, r.uuid, "rebuild_instance");
        goto out;
    }
    NB_INFO("nubo.compute.api", ctx, r.uuid, "Rebuilding instance with image %s", r.image_ref);
    rc = respond_rebuilt(ctx, &r, resp);
out:
    json_decref(r.image);
    json_decref(r.keypair);
    return rc;
}
