/* block_devices.c - block device mappings in the compute API: the checks
 * Nova's compute API makes against the volume and image services when a
 * server is created (get_bdm_image_metadata, _get_volumes_for_bdms,
 * _validate_bdm), the mappings a volume-backed snapshot image carries
 * (_get_image_defined_bdms, _merge_bdms_lists), the reservation of existing
 * volumes (attachment_create: available -> reserved) and its release, and
 * the guest device name of a new attachment (compute utils'
 * get_next_device_name).
 *
 * Mappings here are JSON objects in the v2 form resolve_bdms (servers.c)
 * builds: source_type, destination_type, boot_index (integer or absent),
 * volume_id / snapshot_id / image_id, volume_size, device_name,
 * delete_on_termination (boolean), ... */
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "compute/api/block_devices.h"
#include "compute/api/instances.h"
#include "compute/api/validate.h"
#include "db/db.h"
#include "image/image.h"
#include "volume/volume.h"

#include <ctype.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GIB (1024LL * 1024 * 1024)

/* ---- device names --------------------------------------------------------- */

int nb_srv_match_device(const char *device, char *prefix, size_t pn, char *letters, size_t ln)
{
    /* (^/dev/x{0,1}[a-z]{0,1}d{0,1})([a-z]+)[0-9]*$ */
    regex_t re;
    if (!device || regcomp(&re, "^(/dev/x?[a-z]?d?)([a-z]+)[0-9]*$", REG_EXTENDED) != 0)
        return -1;
    regmatch_t m[3];
    int rc = regexec(&re, device, 3, m, 0) == 0 ? 0 : -1;
    regfree(&re);
    if (rc < 0)
        return -1;
    snprintf(prefix, pn, "%.*s", (int)(m[1].rm_eo - m[1].rm_so), device + m[1].rm_so);
    snprintf(letters, ln, "%.*s", (int)(m[2].rm_eo - m[2].rm_so), device + m[2].rm_so);
    return 0;
}

/* Nova's get_device_letter: the name without /dev/, without the (x)vd / sd
 * / hd prefix and without partition digits ("/dev/vdb1" -> "b"). */
static void device_letter(const char *name, char *out, size_t n)
{
    if (!strncmp(name, "/dev/", 5))
        name += 5;
    if (name[0] == 'x' && name[1] == 'v' && name[2] == 'd')
        name += 3;
    else if ((name[0] == 'v' || name[0] == 's' || name[0] == 'h') && name[1] == 'd')
        name += 2;
    size_t k = 0;
    for (; *name && k + 1 < n; name++)
        if (!isdigit((unsigned char)*name))
            out[k++] = *name;
    out[k] = '\0';
}

/* Nova's generate_device_letter: a..z, aa..az, ba.. */
static void letter_of_index(int index, char *out, size_t n)
{
    char tmp[16];
    int k = 0;
    int i = index + 1;
    while (i > 0 && k < (int)sizeof(tmp)) {
        i--;
        tmp[k++] = (char)('a' + i % 26);
        i /= 26;
    }
    size_t j = 0;
    while (k > 0 && j + 1 < n)
        out[j++] = tmp[--k];
    out[j] = '\0';
}

static bool letter_used(json_t *used, const char *letter)
{
    size_t i;
    json_t *v;
    json_array_foreach (used, i, v)
        if (!strcmp(json_string_value(v), letter))
            return true;
    return false;
}

int nb_srv_next_device_name(struct nb_ctx *ctx, const char *root_device_name, const json_t *bdms,
                            const char *requested, char *out, size_t n)
{
    char req_prefix[32], req_letter[16] = "";
    if (requested && *requested &&
        nb_srv_match_device(requested, req_prefix, sizeof(req_prefix), req_letter,
                            sizeof(req_letter)) < 0)
        return nb_error(ctx, 400, NULL, "The supplied device path (%s) is invalid.", requested);
    char root[64];
    const char *r = root_device_name && *root_device_name ? root_device_name : "/dev/vda";
    snprintf(root, sizeof(root), "%s%s", strncmp(r, "/dev/", 5) ? "/dev/" : "", r);
    char prefix[32], root_letter[16];
    if (nb_srv_match_device(root, prefix, sizeof(prefix), root_letter, sizeof(root_letter)) < 0)
        return nb_error(ctx, 400, NULL, "The supplied device path (%s) is invalid.", root);
    json_t *used = json_array();
    json_array_append_new(used, json_string(root_letter));
    /* Named mappings take their letter; local disks the driver names itself
     * (ephemeral, swap) take the next free ones, as libvirt lays them out. */
    size_t i;
    json_t *b;
    int unnamed = 0;
    json_array_foreach ((json_t *)bdms, i, b) {
        const char *dev = nb_json_str(b, "device_name");
        char letter[16];
        if (dev && *dev) {
            device_letter(dev, letter, sizeof(letter));
            if (!letter_used(used, letter))
                json_array_append_new(used, json_string(letter));
        } else if (!nb_srv_bdm_is_root(b) && !nb_json_int(b, "no_device", 0)) {
            unnamed++;
        }
    }
    for (int idx = 0; unnamed > 0; idx++) {
        char letter[16];
        letter_of_index(idx, letter, sizeof(letter));
        if (!letter_used(used, letter)) {
            json_array_append_new(used, json_string(letter));
            unnamed--;
        }
    }
    char letter[16];
    if (req_letter[0]) {
        snprintf(letter, sizeof(letter), "%s", req_letter);
        if (letter_used(used, letter)) {
            json_decref(used);
            return nb_error(ctx, 409, NULL, "The supplied device path (%s) is in use.", requested);
        }
    } else {
        for (int idx = 0;; idx++) {
            letter_of_index(idx, letter, sizeof(letter));
            if (!letter_used(used, letter))
                break;
        }
    }
    json_decref(used);
    snprintf(out, n, "%s%s", prefix, letter);
    return 0;
}

/* ---- mappings of a volume-backed snapshot image ------------------------------------- */

bool nb_srv_bdm_is_root(const json_t *b)
{
    json_t *bi = json_object_get(b, "boot_index");
    return json_is_integer(bi) && json_integer_value(bi) == 0;
}

/* The boot_index of a mapping as an integer, or -1 for none. */
static long long boot_index(const json_t *b)
{
    json_t *bi = json_object_get(b, "boot_index");
    if (json_is_integer(bi))
        return json_integer_value(bi);
    if (json_is_string(bi))
        return strtoll(json_string_value(bi), NULL, 10);
    return -1;
}

/* A mapping from an image's block_device_mapping list in the form the rest
 * of create uses: only the v2 fields the rows keep; boot_index an integer
 * or absent, delete_on_termination a boolean. */
static json_t *image_bdm_row(const json_t *in)
{
    static const char *const keys[] = {"source_type", "destination_type", "guest_format",
                                       "device_type", "disk_bus",         "device_name",
                                       "volume_id",   "snapshot_id",      "image_id",
                                       "volume_size", "volume_type",      "tag",
                                       NULL};
    json_t *row = json_object();
    for (const char *const *k = keys; *k; k++) {
        json_t *v = json_object_get(in, *k);
        if (v && !json_is_null(v))
            json_object_set(row, *k, v);
    }
    json_t *bi = json_object_get(in, "boot_index");
    if (json_is_integer(bi) || json_is_string(bi))
        json_object_set_new(row, "boot_index", json_integer(boot_index(in)));
    json_object_set_new(
        row, "delete_on_termination",
        json_boolean(nb_srv_json_truthy(json_object_get(in, "delete_on_termination"))));
    if (nb_srv_json_truthy(json_object_get(in, "no_device")))
        json_object_set_new(row, "no_device", json_true());
    return row;
}

json_t *nb_srv_image_bdms(struct nb_ctx *ctx, const json_t *image)
{
    json_t *out = json_array();
    const char *text = nb_json_str(image, "block_device_mapping");
    if (!text || !*text)
        return out;
    const char *v2 = nb_json_str(image, "bdm_v2");
    if (!v2 || nb_srv_bool_from_string(v2, false) != 1) {
        /* legacy (EC2-style) image mappings are not supported: say so */
        json_decref(out);
        nb_error(ctx, 400, NULL,
                 "Block Device Mapping is Invalid: image %s carries legacy block device "
                 "mappings (bdm_v2 is not set), which nubo does not support.",
                 nb_json_str(image, "id"));
        return NULL;
    }
    json_t *list = json_loads(text, 0, NULL);
    if (!json_is_array(list)) {
        json_decref(list);
        json_decref(out);
        nb_error(ctx, 400, NULL,
                 "Block Device Mapping is Invalid: the block_device_mapping property of image "
                 "%s is not a JSON list.",
                 nb_json_str(image, "id"));
        return NULL;
    }
    size_t i;
    json_t *b;
    json_array_foreach (list, i, b) {
        if (json_is_object(b))
            json_array_append_new(out, image_bdm_row(b));
    }
    json_decref(list);
    return out;
}

/* strip_dev of a device name (borrowed; "" for NULL). */
static const char *strip_dev(const char *name)
{
    if (!name)
        return "";
    return strncmp(name, "/dev/", 5) ? name : name + 5;
}

json_t *nb_srv_merge_bdms(const json_t *image_bdms, const json_t *request_bdms)
{
    bool image_has_root = false;
    size_t i;
    json_t *b;
    json_array_foreach ((json_t *)image_bdms, i, b)
        if (nb_srv_bdm_is_root(b))
            image_has_root = true;
    json_t *out = json_array();
    /* the request's mappings override the image's of the same device; a
     * root image mapping of the request gives way to the image's root */
    json_array_foreach ((json_t *)request_bdms, i, b) {
        const char *src = nb_json_str(b, "source_type");
        if (image_has_root && nb_srv_bdm_is_root(b) && src && !strcmp(src, "image"))
            continue;
        json_array_append(out, b);
    }
    json_array_foreach ((json_t *)image_bdms, i, b) {
        const char *dev = nb_json_str(b, "device_name");
        bool overridden = false;
        size_t j;
        json_t *o;
        json_array_foreach (out, j, o) {
            const char *odev = nb_json_str(o, "device_name");
            if (dev && odev && !strcmp(strip_dev(dev), strip_dev(odev)))
                overridden = true;
        }
        if (!overridden)
            json_array_append(out, b);
    }
    return out;
}

/* ---- checks against the volume and image services ----------------------------------- */

/* Replaces the error a lookup recorded (its 404) with the create's 400. */
static int replace_error(struct nb_ctx *ctx, const char *fmt, const char *id)
{
    nb_ctx_clear_error(ctx);
    return nb_error(ctx, 400, NULL, fmt, id);
}

/* Nova's _validate_bdm boot sequence: boot indexes >= 0 must be 0, 1, 2, …
 * and at least one; image_root counts the image root disk Nova maps for
 * imageRef when no mapping has boot index 0. 0/-1. */
static int check_boot_sequence(struct nb_ctx *ctx, const json_t *bdms, bool image_root)
{
    int count[64] = {0};
    int n = 0;
    bool has_root = false;
    size_t j;
    json_t *r;
    json_array_foreach ((json_t *)bdms, j, r)
        has_root = has_root || nb_srv_bdm_is_root(r);
    /* booting from imageRef without a root mapping: Nova adds the image's */
    if (image_root && !has_root) {
        count[0]++;
        n++;
    }
    size_t i;
    json_t *b;
    json_array_foreach ((json_t *)bdms, i, b) {
        long long idx = json_is_integer(json_object_get(b, "boot_index"))
                            ? json_integer_value(json_object_get(b, "boot_index"))
                            : -1;
        if (idx < 0)
            continue;
        if (idx >= 64)
            goto bad;
        count[idx]++;
        n++;
    }
    for (int k = 0; k < n; k++)
        if (count[k] != 1)
            goto bad;
    if (n > 0)
        return 0;
bad:
    return nb_error(ctx, 400, NULL,
                    "Block Device Mapping is Invalid: Boot sequence for the instance and "
                    "image/block device mapping combination is not valid.");
}

/* The root mapping of a server without imageRef (Nova's
 * get_bdm_image_metadata): its volume must exist and be bootable. */
static int check_root_volume(struct nb_ctx *ctx, const json_t *bdms)
{
    size_t i;
    json_t *b;
    json_array_foreach ((json_t *)bdms, i, b) {
        if (!nb_srv_bdm_is_root(b))
            continue;
        const char *vol = nb_json_str(b, "volume_id");
        const char *snap = nb_json_str(b, "snapshot_id");
        json_t *sv = NULL;
        if (snap && !nb_json_str(b, "image_id")) {
            json_t *s = nb_volume_snapshot_lookup(ctx, snap);
            if (!s)
                return nb_ctx_status(ctx) == 404 ? nb_srv_error_as(ctx, 400, NULL) : -1;
            sv = json_string(nb_json_str(s, "volume_id"));
            vol = json_string_value(sv);
            json_decref(s);
        }
        if (nb_json_str(b, "image_id") || !vol) {
            json_decref(sv);
            return 0;
        }
        json_t *v = nb_volume_lookup(ctx, vol);
        if (!v) {
            if (nb_ctx_status(ctx) == 404)
                replace_error(ctx, "Block Device Mapping is Invalid: failed to get volume %s.",
                              vol);
            json_decref(sv);
            return -1;
        }
        bool bootable = nb_json_int(v, "bootable", 1) != 0;
        json_decref(v);
        if (!bootable) {
            nb_error(ctx, 400, NULL, "Block Device %s is not bootable.", vol);
            json_decref(sv);
            return -1;
        }
        json_decref(sv);
        return 0;
    }
    return 0;
}

/* An image→volume mapping's image: visible and active. */
static int check_bdm_image(struct nb_ctx *ctx, json_t *b, const char *image_ref)
{
    const char *img = nb_json_str(b, "image_id");
    const char *src = nb_json_str(b, "source_type");
    const char *dst = nb_json_str(b, "destination_type");
    bool to_volume = src && !strcmp(src, "image") && dst && !strcmp(dst, "volume");
    if (image_ref && !strcmp(img, image_ref) && !to_volume)
        return 0;
    json_t *found = nb_image_lookup(ctx, img);
    if (!found)
        return nb_ctx_status(ctx) == 400 || nb_ctx_status(ctx) == 404
                   ? replace_error(ctx, "Block Device Mapping is Invalid: failed to get image %s.",
                                   img)
                   : -1;
    const char *st = nb_json_str(found, "status");
    int rc = 0;
    if (to_volume && (!st || strcmp(st, "active")))
        rc = nb_error(ctx, 400, NULL, "Image %s is not active.", img);
    else if (to_volume && nb_json_int(b, "volume_size", 0) <= 0)
        rc = nb_error(ctx, 400, NULL,
                      "Block Device Mapping is Invalid: Images with destination_type 'volume' "
                      "need to have a non-zero size specified");
    json_decref(found);
    return rc;
}

int nb_srv_check_bdms(struct nb_ctx *ctx, json_t *bdms, const char *image_ref, long long num)
{
    size_t k;
    json_t *m;
    /* volume_size may come as a string of digits (the schema allows it) */
    json_array_foreach (bdms, k, m) {
        json_t *vs = json_object_get(m, "volume_size");
        if (json_is_string(vs))
            json_object_set_new(m, "volume_size",
                                json_integer(strtoll(json_string_value(vs), NULL, 10)));
    }
    if (check_boot_sequence(ctx, bdms, image_ref && *image_ref) < 0)
        return -1;
    if ((!image_ref || !*image_ref) && check_root_volume(ctx, bdms) < 0)
        return -1;
    size_t i;
    json_t *b;
    /* _get_volumes_for_bdms: every named volume must exist for the caller */
    json_array_foreach (bdms, i, b) {
        const char *vol = nb_json_str(b, "volume_id");
        if (!vol)
            continue;
        json_t *v = nb_volume_lookup(ctx, vol);
        if (!v)
            return nb_ctx_status(ctx) == 404 ? nb_srv_error_as(ctx, 400, NULL) : -1;
        json_decref(v);
        if (num > 1)
            return nb_error(ctx, 400, NULL,
                            "Cannot attach one or more volumes to multiple instances");
    }
    json_array_foreach (bdms, i, b) {
        const char *src = nb_json_str(b, "source_type");
        const char *dst = nb_json_str(b, "destination_type");
        if (nb_json_str(b, "image_id")) {
            if (check_bdm_image(ctx, b, image_ref) < 0)
                return -1;
        } else if (nb_json_str(b, "volume_id")) {
            json_t *v = nb_volume_lookup(ctx, nb_json_str(b, "volume_id"));
            if (!v)
                return nb_ctx_status(ctx) == 404 ? nb_srv_error_as(ctx, 400, NULL) : -1;
            const char *st = nb_json_str(v, "status");
            if (!st || strcmp(st, "available")) {
                nb_error(ctx, 400, NULL,
                         "Invalid volume: Volume %s status must be available or downloading to "
                         "reserve, but the current status is %s.",
                         nb_json_str(b, "volume_id"), st ? st : "None");
                json_decref(v);
                return -1;
            }
            json_object_set_new(b, "volume_size", json_integer(nb_json_int(v, "size", 0)));
            json_decref(v);
        } else if (nb_json_str(b, "snapshot_id")) {
            json_t *s = nb_volume_snapshot_lookup(ctx, nb_json_str(b, "snapshot_id"));
            if (!s)
                return nb_ctx_status(ctx) == 404
                           ? replace_error(ctx,
                                           "Block Device Mapping is Invalid: failed to get "
                                           "snapshot %s.",
                                           nb_json_str(b, "snapshot_id"))
                           : -1;
            if (nb_json_int(b, "volume_size", 0) <= 0)
                json_object_set_new(b, "volume_size",
                                    json_integer(nb_json_int(s, "volume_size", 0)));
            json_decref(s);
        } else if (src && !strcmp(src, "blank") && dst && !strcmp(dst, "volume") &&
                   nb_json_int(b, "volume_size", 0) <= 0) {
            return nb_error(ctx, 400, NULL,
                            "Block Device Mapping is Invalid: Blank volumes (source: 'blank', "
                            "dest: 'volume') need to have non-zero size");
        }
    }
    return 0;
}

/* ---- reservations ------------------------------------------------------------------- */

int nb_srv_reserve_volumes(struct nb_ctx *ctx, const json_t *bdms)
{
    size_t i;
    json_t *b;
    json_array_foreach ((json_t *)bdms, i, b) {
        const char *vol = nb_json_str(b, "volume_id");
        const char *src = nb_json_str(b, "source_type");
        if (!vol || !src || strcmp(src, "volume"))
            continue;
        if (nb_volume_transition(ctx, vol, NB_VOLUME_RESERVE) < 0) {
            json_t *done = json_array();
            for (size_t k = 0; k < i; k++)
                json_array_append(done, json_array_get(bdms, k));
            nb_srv_unreserve_volumes(ctx, done);
            json_decref(done);
            return -1;
        }
    }
    return 0;
}

void nb_srv_unreserve_volumes(struct nb_ctx *ctx, const json_t *bdms)
{
    size_t i;
    json_t *b;
    json_array_foreach ((json_t *)bdms, i, b) {
        const char *vol = nb_json_str(b, "volume_id");
        const char *src = nb_json_str(b, "source_type");
        if (!vol || !src || strcmp(src, "volume"))
            continue;
        struct nb_ctx sub;
        nb_ctx_child(&sub, ctx);
        if (nb_volume_transition(&sub, vol, NB_VOLUME_UNRESERVE) < 0)
            NB_WARN("nubo.compute.api", ctx, NULL, "could not unreserve volume %s: %s", vol,
                    nb_ctx_message(&sub));
    }
}

json_t *nb_srv_instance_volume_bdms(struct nb_ctx *ctx, const char *instance_uuid)
{
    return nb_db_rows(nb_srv_db(), ctx,
                      "SELECT * FROM block_device_mapping WHERE instance_uuid = ? AND deleted = 0 "
                      "AND volume_id IS NOT NULL AND volume_id != '' ORDER BY id",
                      "s", instance_uuid);
}

void nb_srv_release_volumes(struct nb_ctx *ctx, const json_t *rows)
{
    size_t i;
    json_t *b;
    json_array_foreach ((json_t *)rows, i, b) {
        const char *vol = nb_json_str(b, "volume_id");
        struct nb_ctx sub;
        nb_ctx_child(&sub, ctx);
        json_t *v = vol ? nb_volume_lookup(&sub, vol) : NULL;
        const char *st = nb_json_str(v, "status");
        int rc = 0;
        if (st && !strcmp(st, "reserved")) {
            rc = nb_volume_transition(&sub, vol, NB_VOLUME_UNRESERVE);
        } else if (st && !strcmp(st, "attaching")) {
            rc = nb_volume_transition(&sub, vol, NB_VOLUME_ATTACH_FAILED);
        } else if (st && (!strcmp(st, "in-use") || !strcmp(st, "detaching"))) {
            const char *att = nb_json_str(b, "attachment_id");
            if (!strcmp(st, "in-use"))
                rc = nb_volume_transition(&sub, vol, NB_VOLUME_BEGIN_DETACH);
            if (rc == 0)
                rc = att ? nb_volume_detach(&sub, vol, att)
                         : nb_volume_transition(&sub, vol, NB_VOLUME_DETACHED);
        }
        if (rc == 0 && v && nb_json_int(b, "delete_on_termination", 0))
            rc = nb_volume_delete_for(&sub, vol);
        if (rc < 0)
            NB_WARN("nubo.compute.api", ctx, nb_json_str(b, "instance_uuid"),
                    "could not release volume %s (%s): %s", vol, st, nb_ctx_message(&sub));
        else if (st)
            NB_INFO("nubo.compute.api", ctx, nb_json_str(b, "instance_uuid"),
                    "released volume %s (was %s)%s", vol, st,
                    nb_json_int(b, "delete_on_termination", 0) ? " and deleted it" : "");
        json_decref(v);
    }
}
