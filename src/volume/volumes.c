/* volumes.c - /volume/v3/{project_id}/volumes: create (blank, from a
 * snapshot, from another volume, from an image), list and detail with
 * filters and paging, show, update, delete, and the volume metadata routes.
 *
 * Shapes and wording follow Cinder Zed (api/v3/views/volumes.py and the
 * extensions that add os-vol-*-attr fields and volume_image_metadata;
 * volume/api.py and volume/flows/api/create_volume.py for the checks).
 *
 * Creation runs in the request (or in the compute conductor, through
 * nb_volume_create_for; both share create_volume): the row is written
 * "creating" (with the quota check, in one transaction); the scheduler's part
 * picks a share with room for it (Cinder's NFS capacity rules, see
 * nb_vol_share_eligible) and records it as host and provider_location; the
 * file is made there and its real format recorded as admin metadata
 * "format"; the row becomes "available" before the 202 answers it. When no
 * share has room the request is still accepted, as in Cinder: the volume
 * ends "error" and a user message (GET /messages) says "schedule allocate
 * volume:Could not find any available weighted backend."; any other failure
 * also ends in "error" (qemu-img's message in the log), with no file left.
 * Deletion likewise goes through "deleting" (DELETE and
 * nb_volume_delete_for share delete_volume). */
#include "common/cleanup.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "db/db.h"
#include "image/format.h"
#include "image/image.h"
#include "volume/volume.h"
#include "volume/volume_int.h"

#include <assert.h>
#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GIB (1024LL * 1024 * 1024)

/* --- rows -------------------------------------------------------------------- */

static bool visible(const struct nb_ctx *ctx, const json_t *row)
{
    const char *p = nb_json_str(row, "project_id");
    return ctx->is_admin || ctx->system || (p && strcmp(p, ctx->project_id) == 0);
}

json_t *nb_vol_load(struct nb_ctx *ctx, const char *id)
{
    json_t *row = nb_db_row(nb_vol_env->db, ctx,
                            "SELECT * FROM volumes WHERE id = ? AND deleted = 0", "s", id);
    if (!row && nb_ctx_failed(ctx))
        return NULL;
    if (!row || !visible(ctx, row)) {
        json_decref(row);
        nb_error(ctx, 404, NULL, "Volume %s could not be found.", id);
        return NULL;
    }
    return row;
}

int nb_vol_set_status(struct nb_ctx *ctx, const char *id, const char *status,
                      const char *const *from)
{
    char now[32];
    nb_now_iso_us(now);
    if (!from)
        return nb_db_exec(nb_vol_env->db, ctx,
                          "UPDATE volumes SET status = ?, updated_at = ? WHERE id = ? AND "
                          "deleted = 0",
                          "sss", status, now, id);
    /* at most three allowed statuses, padded with NULL (matches nothing) */
    assert(from[0] && (!from[1] || !from[2] || !from[3]));
    const char *f[3] = {from[0], from[0] ? from[1] : NULL, NULL};
    if (f[1])
        f[2] = from[2];
    return nb_db_exec(nb_vol_env->db, ctx,
                      "UPDATE volumes SET previous_status = status, status = ?, updated_at = ? "
                      "WHERE id = ? AND deleted = 0 AND status IN (?, ?, ?)",
                      "ssssss", status, now, id, f[0], f[1], f[2]);
}

json_t *nb_vol_chain(struct nb_ctx *ctx, const char *volume_id)
{
    return nb_db_rows(nb_vol_env->db, ctx,
                      "SELECT id, provider_location FROM snapshots WHERE volume_id = ? AND "
                      "deleted = 0 AND standalone = 0 AND provider_location IS NOT NULL ORDER BY "
                      "created_at, id",
                      "s", volume_id);
}

int nb_vol_active_file(struct nb_ctx *ctx, const char *volume_id, char *out, size_t n)
{
    _cleanup_json_ json_t *chain = nb_vol_chain(ctx, volume_id);
    if (!chain)
        return -1;
    size_t len = json_array_size(chain);
    if (len)
        nb_strlcpy(out, nb_json_str(json_array_get(chain, len - 1), "provider_location"), n);
    else
        snprintf(out, n, "volume-%s", volume_id);
    return 0;
}

void nb_vol_write_info(struct nb_ctx *ctx, const char *share, const char *volume_id)
{
    _cleanup_json_ json_t *chain = nb_vol_chain(ctx, volume_id);
    char active[128], path[PATH_MAX + 128], name[64];
    if (!chain || nb_vol_active_file(ctx, volume_id, active, sizeof(active)) < 0)
        return;
    snprintf(name, sizeof(name), "volume-%s.info", volume_id);
    nb_vol_file_path(share, name, path, sizeof(path));
    if (!json_array_size(chain)) {
        unlink(path);
        return;
    }
    _cleanup_json_ json_t *info = json_pack("{s:s}", "active", active);
    size_t i;
    json_t *s;
    json_array_foreach (chain, i, s)
        json_object_set_new(info, nb_json_str(s, "id"),
                            json_string(nb_json_str(s, "provider_location")));
    _cleanup_free_ char *text = json_dumps(info, JSON_INDENT(4) | JSON_SORT_KEYS);
    if (nb_write_file(path, text, strlen(text), 0660) < 0)
        NB_WARN(NB_VOL_LOG, ctx, NULL, "Cannot write %s", path);
}

static json_t *attachments_of(struct nb_ctx *ctx, const char *id)
{
    _cleanup_json_ json_t *rows =
        nb_db_rows(nb_vol_env->db, ctx,
                   "SELECT * FROM volume_attachment WHERE volume_id = ? AND deleted = 0 AND "
                   "attach_status = 'attached' ORDER BY created_at",
                   "s", id);
    json_t *list = json_array();
    size_t i;
    json_t *a;
    json_array_foreach (rows, i, a) {
        json_t *o = json_pack("{s:s, s:O, s:s, s:O, s:O, s:O, s:O}", "id", id, "attachment_id",
                              json_object_get(a, "id"), "volume_id", id, "server_id",
                              json_object_get(a, "instance_uuid"), "host_name",
                              ctx->is_admin ? json_object_get(a, "attached_host") : json_null(),
                              "device", json_object_get(a, "mountpoint"), "attached_at",
                              json_object_get(a, "attach_time"));
        json_array_append_new(list, o);
    }
    return list;
}

static json_t *field(const json_t *row, const char *key)
{
    json_t *v = json_object_get(row, key);
    return v ? json_incref(v) : json_null();
}

/* What a detailed view adds to the core of Cinder's view builder: show and
 * the detail list carry the attributes of the extensions (os-vol-tenant-attr,
 * os-vol-host-attr, os-vol-mig-status-attr, os-vol-image-meta), which extend
 * only those two actions; show, the lists and update merge the visible admin
 * metadata (readonly, attached_mode) into "metadata" (add_visible_admin_metadata);
 * create has neither. */
enum {
    VIEW_EXTENSIONS = 1,
    VIEW_ADMIN_METADATA = 2,
};

/* The admin metadata keys Cinder shows among a volume's metadata. */
static void add_visible_admin_metadata(struct nb_ctx *ctx, const char *id, json_t *md)
{
    _cleanup_json_ json_t *am = nb_vol_metadata_of(ctx, "volume_admin_metadata", "volume_id", id);
    static const char *const visible[] = {"readonly", "attached_mode", NULL};
    for (int i = 0; visible[i]; i++) {
        json_t *v = json_object_get(am, visible[i]);
        if (v)
            json_object_set(md, visible[i], v);
    }
}

/* The detailed view of a volume row (Cinder v3 at ctx's microversion);
 * what: VIEW_* flags. */
static json_t *volume_detail(struct nb_ctx *ctx, const json_t *row, unsigned what)
{
    const char *id = nb_json_str(row, "id");
    json_t *v = json_object();
    json_object_set_new(v, "id", json_string(id));
    json_object_set_new(v, "status", field(row, "status"));
    json_object_set_new(v, "size", field(row, "size"));
    json_object_set_new(v, "availability_zone", field(row, "availability_zone"));
    json_object_set_new(v, "created_at", field(row, "created_at"));
    json_object_set_new(v, "updated_at", field(row, "updated_at"));
    json_object_set_new(v, "name", field(row, "display_name"));
    json_object_set_new(v, "description", field(row, "display_description"));
    json_object_set_new(v, "volume_type", json_string(NB_VOL_DEFAULT_TYPE_NAME));
    json_object_set_new(v, "snapshot_id", field(row, "snapshot_id"));
    json_object_set_new(v, "source_volid", field(row, "source_volid"));
    json_t *md = nb_vol_metadata_of(ctx, "volume_metadata", "volume_id", id);
    if (what & VIEW_ADMIN_METADATA)
        add_visible_admin_metadata(ctx, id, md);
    json_object_set_new(v, "metadata", md);
    json_object_set_new(v, "links", nb_vol_links(ctx, "volumes", id));
    json_object_set_new(v, "user_id", field(row, "user_id"));
    json_object_set_new(v, "bootable",
                        json_string(nb_json_int(row, "bootable", 0) ? "true" : "false"));
    json_object_set_new(v, "encrypted", json_false());
    json_object_set_new(v, "replication_status", field(row, "replication_status"));
    json_object_set_new(v, "consistencygroup_id", json_null());
    json_object_set_new(v, "multiattach", json_boolean(nb_json_int(row, "multiattach", 0)));
    json_object_set_new(v, "attachments", attachments_of(ctx, id));
    if (ctx->is_admin)
        json_object_set_new(v, "migration_status", field(row, "migration_status"));
    if (what & VIEW_EXTENSIONS) {
        if (ctx->is_admin) {
            json_object_set_new(v, "os-vol-host-attr:host", field(row, "host"));
            json_object_set_new(v, "os-vol-mig-status-attr:migstat",
                                field(row, "migration_status"));
            json_object_set_new(v, "os-vol-mig-status-attr:name_id", json_null());
        }
        json_object_set_new(v, "os-vol-tenant-attr:tenant_id", field(row, "project_id"));
        json_t *gm = nb_vol_metadata_of(ctx, "volume_glance_metadata", "volume_id", id);
        if (json_object_size(gm))
            json_object_set_new(v, "volume_image_metadata", gm);
        else
            json_decref(gm);
    }
    if (nb_vol_mv(ctx, 13))
        json_object_set_new(v, "group_id", json_null());
    if (ctx->is_admin && nb_vol_mv(ctx, 21))
        json_object_set_new(v, "provider_id", json_null());
    if (nb_vol_mv(ctx, 48)) {
        /* NFS volumes do not share targets; null from 3.69, false before */
        json_object_set_new(v, "shared_targets", nb_vol_mv(ctx, 69) ? json_null() : json_false());
        json_object_set_new(v, "service_uuid", json_null());
    }
    if (ctx->is_admin && nb_vol_mv(ctx, 61))
        json_object_set_new(v, "cluster_name", json_null());
    if (nb_vol_mv(ctx, 63))
        json_object_set_new(v, "volume_type_id", field(row, "volume_type_id"));
    if (nb_vol_mv(ctx, 65))
        json_object_set_new(v, "consumes_quota", json_boolean(nb_json_int(row, "use_quota", 1)));
    return v;
}

static json_t *volume_summary(struct nb_ctx *ctx, const json_t *row)
{
    const char *id = nb_json_str(row, "id");
    return json_pack("{s:s, s:o, s:o}", "id", id, "name", field(row, "display_name"), "links",
                     nb_vol_links(ctx, "volumes", id));
}

/* --- list ---------------------------------------------------------------------- */

/* Parses a metadata filter: JSON or the Python dict repr cinderclient sends
 * ("{'k': 'v'}"). New reference, or NULL when it is not an object. */
static json_t *parse_dict(const char *s)
{
    json_t *j = nb_json_parse(s);
    if (!j) {
        _cleanup_free_ char *c = strdup(s);
        for (char *p = c; *p; p++)
            if (*p == '\'')
                *p = '"';
        j = nb_json_parse(c);
    }
    if (j && !json_is_object(j)) {
        json_decref(j);
        j = NULL;
    }
    return j;
}

/* The metadata filter of a list (NULL when there is none). 0/-1 after 400. */
static int list_filters(struct nb_ctx *ctx, struct nb_req *req, json_t **md)
{
    const char *mdq = nb_req_query(req, "metadata");
    if (mdq && !(*md = parse_dict(mdq)))
        return nb_error(ctx, 400, NULL, "Invalid input received: Invalid metadata filter %s", mdq);
    return 0;
}

/* True when row passes the list filters of req (md: see list_filters). */
static bool matches(struct nb_ctx *ctx, struct nb_req *req, const json_t *row, const json_t *md)
{
    const char *name = nb_req_query(req, "name");
    if (!name)
        name = nb_req_query(req, "display_name");
    const char *dn = nb_json_str(row, "display_name");
    if (name && (!dn || strcmp(name, dn) != 0))
        return false;
    static const char *const exact[] = {"status", "availability_zone", "project_id", NULL};
    for (int i = 0; exact[i]; i++) {
        const char *want = nb_req_query(req, exact[i]), *have = nb_json_str(row, exact[i]);
        if (want && (!have || strcmp(want, have) != 0))
            return false;
    }
    const char *b = nb_req_query(req, "bootable");
    if (b && nb_bool_from_string(b) >= 0 &&
        nb_bool_from_string(b) != (int)nb_json_int(row, "bootable", 0))
        return false;
    const char *size = nb_req_query(req, "size");
    if (size && atoll(size) != nb_json_int(row, "size", -1))
        return false;
    if (md) {
        _cleanup_json_ json_t *have =
            nb_vol_metadata_of(ctx, "volume_metadata", "volume_id", nb_json_str(row, "id"));
        const char *k;
        json_t *v;
        json_object_foreach ((json_t *)md, k, v) {
            const char *hv = nb_json_str(have, k);
            if (!hv || !json_is_string(v) || strcmp(hv, json_string_value(v)) != 0)
                return false;
        }
    }
    return true;
}

static const struct nb_vol_sort_key volume_sort_keys[] = {
    {"id", "id"},
    {"name", "display_name"},
    {"display_name", "display_name"},
    {"status", "status"},
    {"size", "size"},
    {"availability_zone", "availability_zone"},
    {"created_at", "created_at"},
    {"updated_at", "updated_at"},
    {"bootable", "bootable"},
    {"project_id", "project_id"},
    {NULL, NULL},
};

static json_t *volume_list_view(struct nb_ctx *ctx, const json_t *row, bool detail)
{
    return detail ? volume_detail(ctx, row, VIEW_EXTENSIONS | VIEW_ADMIN_METADATA)
                  : volume_summary(ctx, row);
}

/* The count of the page (with_count, 3.45). */
static void list_finish(struct nb_ctx *ctx, struct nb_req *req, json_t *body)
{
    if (nb_vol_mv(ctx, 45) && nb_bool_from_string(nb_req_query(req, "with_count")) == 1)
        json_object_set_new(
            body, "count",
            json_integer((json_int_t)json_array_size(json_object_get(body, "volumes"))));
}

static const struct nb_vol_lister volume_lister = {
    .table = "volumes",
    .sort_keys = volume_sort_keys,
    .load = nb_vol_load,
    .filters = list_filters,
    .match = matches,
    .view = volume_list_view,
    .finish = list_finish,
};

static int volumes_index(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    return nb_vol_list(ctx, req, resp, &volume_lister, false);
}

static int volumes_detail(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    return nb_vol_list(ctx, req, resp, &volume_lister, true);
}

static int volumes_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    _cleanup_json_ json_t *row = nb_vol_begin_load(ctx, req, resp, "volume_id", nb_vol_load, NULL);
    if (!row)
        return -1;
    return nb_resp_json(resp, 200,
                        json_pack("{s:o}", "volume",
                                  volume_detail(ctx, row, VIEW_EXTENSIONS | VIEW_ADMIN_METADATA)));
}

/* For the compute API's proxy (volume.h). */
json_t *nb_volume_show_for(struct nb_ctx *ctx, const char *volume_id)
{
    _cleanup_json_ json_t *row = nb_vol_load(ctx, volume_id);
    return row ? volume_detail(ctx, row, VIEW_ADMIN_METADATA) : NULL;
}

json_t *nb_volume_list_for(struct nb_ctx *ctx)
{
    _cleanup_json_ json_t *rows = nb_db_rows(nb_vol_env->db, ctx,
                                             "SELECT * FROM volumes WHERE deleted = 0 AND "
                                             "project_id = ? ORDER BY created_at DESC, id DESC",
                                             "s", ctx->project_id);
    if (!rows)
        return NULL;
    json_t *list = json_array();
    size_t i;
    json_t *row;
    json_array_foreach (rows, i, row)
        json_array_append_new(list, volume_detail(ctx, row, VIEW_ADMIN_METADATA));
    return list;
}

/* --- create ---------------------------------------------------------------------- */

/* Size as Cinder accepts it: an integer or a string of digits, > 0. Writes
 * it into *size; 0 when absent (null). -1 after 400. */
static int parse_size(struct nb_ctx *ctx, const json_t *v, long long *size)
{
    *size = 0;
    if (!v || json_is_null(v))
        return 0;
    if (json_is_integer(v))
        *size = json_integer_value(v);
    else if (json_is_string(v) && *json_string_value(v)) {
        const char *s = json_string_value(v);
        for (const char *p = s; *p; p++)
            if (!isdigit((unsigned char)*p))
                goto bad;
        *size = atoll(s);
    } else {
        goto bad;
    }
    if (*size > 0)
        return 0;
bad:;
    _cleanup_free_ char *d = json_is_string(v) ? strdup(json_string_value(v)) : nb_json_dump(v);
    return nb_error(ctx, 400, NULL,
                    "Invalid volume size provided for create request: %s (size argument must be "
                    "an integer (or string representation of an integer) and greater than zero).",
                    d);
}

/* What a new volume is made from. */
struct source {
    json_t *snapshot; /* row */
    json_t *volume;   /* row */
    json_t *image;    /* Glance view */
};

static void source_free(struct source *s)
{
    json_decref(s->snapshot);
    json_decref(s->volume);
    json_decref(s->image);
}

/* Validates the image source against size (Cinder's check_image_metadata). */
static int check_image(struct nb_ctx *ctx, const json_t *img, long long size)
{
    const char *id = nb_json_str(img, "id");
    if (strcmp(nb_json_str(img, "status") ? nb_json_str(img, "status") : "", "active") != 0)
        return nb_error(ctx, 400, NULL, "Invalid input received: Image %s is not active.", id);
    long long bytes = nb_json_int(img, "size", 0);
    long long gb = (bytes + GIB - 1) / GIB;
    if (gb > size)
        return nb_error(ctx, 400, NULL,
                        "Invalid input received: Size of specified image %lldGB is larger than "
                        "volume size %lldGB.",
                        gb, size);
    long long min_disk = nb_json_int(img, "min_disk", 0);
    if (size < min_disk)
        return nb_error(ctx, 400, NULL,
                        "Invalid input received: Volume size %lldGB cannot be smaller than the "
                        "image minDisk size %lldGB.",
                        size, min_disk);
    long long vsize = nb_json_int(img, "virtual_size", 0);
    if (vsize > 0 && (vsize + GIB - 1) / GIB > size)
        return nb_error(ctx, 400, NULL,
                        "Image %s is unacceptable: Image virtual size is %lldGB and doesn't fit "
                        "in a volume of size %lldGB.",
                        id, (vsize + GIB - 1) / GIB, size);
    return 0;
}

/* The smallest size (GiB) that holds an image: its virtual size (else its
 * size) rounded up, at least its min_disk and 1. */
static long long image_gb(const json_t *img)
{
    long long bytes = nb_json_int(img, "virtual_size", 0);
    if (bytes <= 0)
        bytes = nb_json_int(img, "size", 0);
    long long gb = (bytes + GIB - 1) / GIB, min_disk = nb_json_int(img, "min_disk", 0);
    if (gb < min_disk)
        gb = min_disk;
    return gb > 0 ? gb : 1;
}

/* Loads and checks the source named in body and settles *size (from an
 * image too when size_from_image; Cinder's API requires a size with an
 * image). 0/-1. */
static int resolve_source(struct nb_ctx *ctx, const json_t *body, struct source *src,
                          long long *size, bool size_from_image)
{
    const char *snap = nb_json_str(body, "snapshot_id");
    const char *vol = nb_json_str(body, "source_volid");
    const char *img = nb_json_str(body, "imageRef");
    if (!img || !*img)
        img = nb_json_str(body, "image_id");
    if (snap) {
        if (!(src->snapshot = nb_vol_snapshot_load(ctx, snap)))
            return -1;
        if (strcmp(nb_json_str(src->snapshot, "status"), "available") != 0)
            return nb_error(ctx, 400, NULL,
                            "Invalid snapshot: Originating snapshot status must be one of "
                            "'available' values");
        long long ssize = nb_json_int(src->snapshot, "volume_size", 0);
        if (!*size)
            *size = ssize;
        if (*size < ssize)
            return nb_error(ctx, 400, NULL,
                            "Invalid input received: Volume size '%lld'GB cannot be smaller than "
                            "the snapshot size %lldGB. They must be >= original snapshot size.",
                            *size, ssize);
    } else if (vol) {
        if (!(src->volume = nb_vol_load(ctx, vol)))
            return -1;
        const char *st = nb_json_str(src->volume, "status");
        if (strcmp(st, "available") != 0 && strcmp(st, "in-use") != 0)
            return nb_error(ctx, 400, NULL,
                            "Invalid volume: Originating source volume status must be one of "
                            "'available, in-use' values");
        long long vsize = nb_json_int(src->volume, "size", 0);
        if (!*size)
            *size = vsize;
        if (*size < vsize)
            return nb_error(ctx, 400, NULL,
                            "Invalid input received: Volume size '%lld'GB cannot be smaller than "
                            "original volume size  %lldGB. They must be >= original volume "
                            "size.",
                            *size, vsize);
    } else if (img && *img) {
        if (!(src->image = nb_image_lookup(ctx, img))) {
            /* Cinder's ImageNotFound is a 404 (Nova's wording is a 400) */
            nb_ctx_clear_error(ctx);
            return nb_error(ctx, 404, NULL, "Image %s could not be found.", img);
        }
        if (!*size && size_from_image)
            *size = image_gb(src->image);
        if (!*size)
            return nb_error(ctx, 400, NULL,
                            "Invalid input received: Volume size 'None' must be an integer and "
                            "greater than 0");
        if (check_image(ctx, src->image, *size) < 0)
            return -1;
    } else if (!*size) {
        return nb_error(ctx, 400, NULL,
                        "Invalid input received: Volume size 'None' must be an integer and "
                        "greater than 0");
    }
    return 0;
}

/* Checks the volume type named in body: the default type by name or id. */
static int check_type(struct nb_ctx *ctx, const json_t *body)
{
    const char *t = nb_json_str(body, "volume_type");
    if (!t || !*t || strcmp(t, NB_VOL_DEFAULT_TYPE_NAME) == 0 ||
        strcmp(t, NB_VOL_DEFAULT_TYPE_ID) == 0)
        return 0;
    return nb_error(ctx, 404, NULL, "Volume type with name %s could not be found.", t);
}

/* Inserts the "creating" row after the quota check, in one transaction.
 * host and provider_location stay NULL until a share is picked. */
static int insert_volume(struct nb_ctx *ctx, const char *id, const json_t *body,
                         const struct source *src, long long size)
{
    struct nb_db *db = nb_vol_env->db;
    char now[32];
    nb_now_iso_us(now);
    const char *name = nb_json_str(body, "name");
    if (!name)
        name = nb_json_str(body, "display_name");
    const char *desc = nb_json_str(body, "description");
    if (!desc)
        desc = nb_json_str(body, "display_description");
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    int rc = nb_vol_quota_check(ctx, ctx->project_id, 1, 0, size);
    if (rc == 0)
        rc = nb_db_exec(
            db, ctx,
            "INSERT INTO volumes (id, created_at, updated_at, deleted, user_id, project_id, "
            "size, availability_zone, status, attach_status, replication_status, display_name, "
            "display_description, snapshot_id, source_volid, volume_type_id, "
            "bootable, multiattach, use_quota) VALUES (?, ?, ?, 0, ?, ?, ?, ?, "
            "'creating', 'detached', 'disabled', ?, ?, ?, ?, ?, ?, 0, 1)",
            "sssssissssssb", id, now, now, ctx->user_id, ctx->project_id, size, nb_vol_az(), name,
            desc, src->snapshot ? nb_json_str(src->snapshot, "id") : NULL,
            src->volume ? nb_json_str(src->volume, "id") : NULL, NB_VOL_DEFAULT_TYPE_ID,
            src->volume ? (int)nb_json_int(src->volume, "bootable", 0) : 0);
    json_t *md = json_object_get(body, "metadata");
    if (rc >= 0 && json_is_object(md))
        rc = nb_vol_metadata_write(ctx, "volume_metadata", "volume_id", id, md, false);
    if (rc < 0) {
        nb_db_rollback(db);
        return -1;
    }
    return nb_db_commit(db, ctx);
}

/* Records the image a volume was made from (Cinder's glance metadata). */
static void record_image(struct nb_ctx *ctx, const char *id, const json_t *img)
{
    static const char *const keys[] = {"image_id", "image_name",       "disk_format",
                                       "checksum", "container_format", "size",
                                       "min_disk", "min_ram",          NULL};
    static const char *const from[] = {
        "id",   "name",     "disk_format", "checksum", "container_format",
        "size", "min_disk", "min_ram",     NULL};
    char now[32];
    nb_now_iso_us(now);
    for (int i = 0; keys[i]; i++) {
        json_t *v = json_object_get(img, from[i]);
        _cleanup_free_ char *s = json_is_string(v) ? strdup(json_string_value(v))
                                 : json_is_integer(v)
                                     ? nb_strdup_printf("%lld", (long long)json_integer_value(v))
                                     : NULL;
        if (s)
            nb_db_exec(nb_vol_env->db, ctx,
                       "INSERT INTO volume_glance_metadata (volume_id, \"key\", value, created_at, "
                       "deleted) VALUES (?, ?, ?, ?, 0)",
                       "ssss", id, keys[i], s, now);
    }
}

/* Makes the file of volume id from src on share. 0/-1 after nb_error. */
static int make_file(struct nb_ctx *ctx, const char *id, const struct source *src, long long size,
                     const char *share)
{
    char path[PATH_MAX + 128], fmt[16], file[128];
    if (src->snapshot && nb_json_int(src->snapshot, "standalone", 0)) {
        /* a standalone copy holds the snapshot's data itself */
        const char *vid = nb_json_str(src->snapshot, "volume_id");
        _cleanup_json_ json_t *svol = nb_db_row(
            nb_vol_env->db, ctx, "SELECT provider_location FROM volumes WHERE id = ?", "s", vid);
        const char *sfile = nb_json_str(src->snapshot, "provider_location");
        if (!svol || !sfile)
            return nb_error(ctx, 500, NULL, "Cannot find the copy of snapshot %s",
                            nb_json_str(src->snapshot, "id"));
        nb_vol_file_path(nb_json_str(svol, "provider_location"), sfile, path, sizeof(path));
    } else if (src->snapshot) {
        /* the snapshot's data: the backing file of its overlay */
        const char *vid = nb_json_str(src->snapshot, "volume_id");
        _cleanup_json_ json_t *chain = nb_vol_chain(ctx, vid);
        _cleanup_json_ json_t *svol = nb_db_row(
            nb_vol_env->db, ctx, "SELECT provider_location FROM volumes WHERE id = ?", "s", vid);
        if (!chain || !svol)
            return nb_error(ctx, 500, NULL, "Cannot find the chain of volume %s", vid);
        snprintf(file, sizeof(file), "volume-%s", vid);
        size_t i;
        json_t *s;
        json_array_foreach (chain, i, s) {
            if (strcmp(nb_json_str(s, "id"), nb_json_str(src->snapshot, "id")) == 0)
                break;
            nb_strlcpy(file, nb_json_str(s, "provider_location"), sizeof(file));
        }
        nb_vol_file_path(nb_json_str(svol, "provider_location"), file, path, sizeof(path));
    } else if (src->volume) {
        if (nb_vol_active_file(ctx, nb_json_str(src->volume, "id"), file, sizeof(file)) < 0)
            return -1;
        nb_vol_file_path(nb_json_str(src->volume, "provider_location"), file, path, sizeof(path));
    } else if (src->image) {
        json_t *info = NULL;
        int fd = nb_image_data_open(ctx, nb_json_str(src->image, "id"), &info);
        if (fd < 0)
            return -1;
        json_decref(info);
        struct nb_format_info fi;
        char err[256], why[512];
        if (nb_format_inspect_fd(fd, &fi, err, sizeof(err)) < 0) {
            close(fd);
            return nb_error(ctx, 500, NULL, "Cannot read image data: %s", err);
        }
        if (nb_format_check_safe(&fi, why, sizeof(why)) < 0) {
            close(fd);
            return nb_error(ctx, 400, NULL, "Image %s is unacceptable: %s",
                            nb_json_str(src->image, "id"), why);
        }
        /* qemu-img reads the image through our descriptor */
        snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)getpid(), fd);
        int rc = nb_vol_backend_create_from(ctx, share, id, path, fi.qemu_driver, size);
        close(fd);
        return rc;
    } else {
        return nb_vol_backend_create(ctx, share, id, size);
    }
    if (nb_vol_detect_format(ctx, path, fmt) < 0)
        return -1;
    return nb_vol_backend_create_from(ctx, share, id, path, fmt, size);
}

/* Cinder's API checks of a create body, the source and the size. 0, or -1
 * after nb_error (nothing written). */
static int check_create(struct nb_ctx *ctx, const json_t *body, struct source *src, long long *size,
                        bool size_from_image)
{
    if (nb_vol_check_name_desc(ctx, body, true) < 0 ||
        parse_size(ctx, json_object_get(body, "size"), size) < 0 || check_type(ctx, body) < 0 ||
        nb_vol_metadata_check(ctx, json_object_get(body, "metadata")) < 0)
        return -1;
    if (json_is_true(json_object_get(body, "multiattach")))
        return nb_error(ctx, 400, NULL,
                        "multiattach parameter has been removed. The default behavior is to use "
                        "multiattach enabled volume types. Contact your administrator to create "
                        "a multiattach enabled volume type and use it to create multiattach "
                        "volumes.");
    const char *az = nb_json_str(body, "availability_zone");
    if (az && strcmp(az, nb_vol_az()) != 0)
        return nb_error(ctx, 400, NULL, "Availability zone '%s' is invalid.", az);
    return resolve_source(ctx, body, src, size, size_from_image);
}

/* The scheduler's part: picks a share for the volume and records it as the
 * volume's host and provider_location. Borrowed share, or NULL after
 * nb_error(ctx) ("Could not find any available weighted backend: ..."). */
static const char *schedule(struct nb_ctx *ctx, const char *id, long long size)
{
    const char *share = nb_vol_pick_share(ctx, size);
    if (!share)
        return NULL;
    _cleanup_free_ char *host = nb_strdup_printf("%s@nfs#nfs", nb_vol_env->my_host);
    char now[32];
    nb_now_iso_us(now);
    if (nb_db_exec(nb_vol_env->db, ctx,
                   "UPDATE volumes SET host = ?, provider_location = ?, scheduled_at = ? WHERE "
                   "id = ?",
                   "ssss", host, share, now, id) < 0)
        return NULL;
    return share;
}

/* Creates the volume of body: checks, quota and the "creating" row, then
 * the share and the file, each step committed; the row ends "available" or
 * "error" (with no file left). The new id goes into id.
 * Returns -1 after nb_error(ctx) when the request is refused before the row
 * exists; 0 when the row exists: then nb_ctx_status(failed) is 0 if the volume
 * is available, else failed holds why it ended in error (a scheduling
 * failure also leaves Cinder's user message). */
static int create_volume(struct nb_ctx *ctx, const json_t *body, bool size_from_image,
                         char id[NB_UUID_LEN], struct nb_ctx *failed)
{
    struct source src = {0};
    long long size;
    if (check_create(ctx, body, &src, &size, size_from_image) < 0) {
        source_free(&src);
        return -1;
    }
    nb_uuid(id);
    if (insert_volume(ctx, id, body, &src, size) < 0) {
        source_free(&src);
        return -1;
    }
    nb_ctx_child(failed, ctx);
    const char *share = schedule(failed, id, size);
    int rc = share ? 0 : -1;
    struct nb_ctx aside; /* for best-effort work whose failure is only logged */
    nb_ctx_child(&aside, ctx);
    if (!share && nb_vol_message_record(&aside, id, NB_VOL_ACTION_SCHEDULE_ALLOCATE_VOLUME,
                                        NB_VOL_DETAIL_NO_BACKEND_AVAILABLE) < 0)
        NB_ERROR(NB_VOL_LOG, ctx, NULL, "Volume %s: no user message: %s", id,
                 nb_ctx_message(&aside));
    bool copies = share && (src.snapshot || src.volume);
    if (copies)
        nb_vol_chain_lock();
    if (rc == 0)
        rc = make_file(failed, id, &src, size, share);
    if (copies)
        nb_vol_chain_unlock();
    if (rc == 0)
        rc = nb_vol_record_format(failed, share, id);
    nb_ctx_clear_error(&aside); /* the message step's failure is logged already */
    if (rc < 0 && share && nb_vol_backend_delete(&aside, share, id) < 0)
        NB_ERROR(NB_VOL_LOG, ctx, NULL, "Volume %s: %s", id, nb_ctx_message(&aside));
    if (rc == 0 && src.image)
        record_image(ctx, id, src.image);
    char now[32];
    nb_now_iso_us(now);
    static const char *const creating[] = {"creating", NULL};
    if (rc == 0) {
        nb_db_exec(nb_vol_env->db, ctx,
                   "UPDATE volumes SET launched_at = ?, bootable = bootable OR ? WHERE id = ?",
                   "sbs", now, src.image != NULL, id);
        nb_vol_set_status(ctx, id, "available", creating);
        NB_INFO(NB_VOL_LOG, ctx, NULL, "Volume %s created: %lld GiB on %s", id, size, share);
    } else {
        nb_vol_set_status(ctx, id, "error", creating);
        NB_ERROR(NB_VOL_LOG, ctx, NULL, "Volume %s creation failed: %s", id,
                 nb_ctx_message(failed));
    }
    source_free(&src);
    return 0;
}

static int volumes_create(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_vol_begin(ctx, req, resp) < 0)
        return -1;
    if (!ctx->is_member)
        return nb_error(ctx, 403, NULL, "Policy doesn't allow volume:create to be performed.");
    json_t *body = nb_vol_body(ctx, req, "volume");
    char id[NB_UUID_LEN];
    struct nb_ctx failed;
    if (!body || create_volume(ctx, body, false, id, &failed) < 0)
        return -1;
    /* accepted either way: a failure shows as status "error" (and a message) */
    _cleanup_json_ json_t *row = nb_vol_load(ctx, id);
    if (!row)
        return -1;
    return nb_resp_json(resp, 202, json_pack("{s:o}", "volume", volume_detail(ctx, row, 0)));
}

int nb_volume_create_for(struct nb_ctx *ctx, const json_t *req, char id_out[37])
{
    char id[NB_UUID_LEN];
    struct nb_ctx failed;
    if (!json_is_object(req))
        return nb_error(ctx, 400, NULL, "Malformed request body");
    if (create_volume(ctx, req, true, id, &failed) < 0)
        return -1;
    nb_strlcpy(id_out, id, NB_UUID_LEN);
    if (nb_ctx_failed(&failed))
        return nb_error(ctx, nb_ctx_status(&failed), nb_ctx_error_name(&failed),
                        "Volume %s ended in error: %s", id, nb_ctx_message(&failed));
    return 0;
}

/* --- admin metadata --------------------------------------------------------------- */

/* Sets key of a volume's admin metadata to value, replacing it (inserting
 * the key if missing), in db's open transaction. 0/-1. */
static int admin_metadata_upsert(struct nb_db *db, struct nb_ctx *ctx, const char *id,
                                 const char *key, const char *value)
{
    char now[32];
    nb_now_iso_us(now);
    int n = nb_db_exec(db, ctx,
                       "UPDATE volume_admin_metadata SET value = ?, updated_at = ? WHERE "
                       "volume_id = ? AND \"key\" = ? AND deleted = 0",
                       "ssss", value, now, id, key);
    if (n == 0)
        n = nb_db_exec(db, ctx,
                       "INSERT INTO volume_admin_metadata (volume_id, \"key\", value, created_at, "
                       "deleted) VALUES (?, ?, ?, ?, 0)",
                       "ssss", id, key, value, now);
    return n < 0 ? -1 : 0;
}

int nb_vol_set_admin_metadata(struct nb_ctx *ctx, const char *id, const char *key,
                              const char *value)
{
    return admin_metadata_upsert(nb_vol_env->db, ctx, id, key, value);
}

/* The format's key removed (soft-deleted) from the volume's admin metadata,
 * in db's open transaction. 0/-1. */
static int admin_format_clear(struct nb_db *db, struct nb_ctx *ctx, const char *volume_id)
{
    char now[32];
    nb_now_iso_us(now);
    return nb_db_exec(db, ctx,
                      "UPDATE volume_admin_metadata SET deleted = id, deleted_at = ? "
                      "WHERE volume_id = ? AND \"key\" = 'format' AND deleted = 0",
                      "ss", now, volume_id) < 0
               ? -1
               : 0;
}

int nb_volume_set_format(struct nb_db *db, struct nb_ctx *ctx, const char *volume_id,
                         const char *format)
{
    if (format && strcmp(format, "raw") != 0 && strcmp(format, "qcow2") != 0)
        return nb_error(ctx, 400, NULL, "Invalid input received: Unsupported volume format %s.",
                        format);
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    int rc = 0;
    if (!format) {
        rc = admin_format_clear(db, ctx, volume_id);
    } else {
        long long n =
            nb_db_int(db, ctx, -1, "SELECT COUNT(*) FROM volumes WHERE id = ? AND deleted = 0", "s",
                      volume_id);
        if (n == 0)
            nb_error(ctx, 404, NULL, "Volume %s could not be found.", volume_id);
        rc = n == 1 ? admin_metadata_upsert(db, ctx, volume_id, "format", format) : -1;
    }
    if (rc < 0) {
        nb_db_rollback(db);
        return -1;
    }
    return nb_db_commit(db, ctx);
}

char *nb_volume_format(struct nb_db *db, struct nb_ctx *ctx, const char *volume_id)
{
    _cleanup_json_ json_t *row = nb_db_row(db, ctx,
                                           "SELECT value FROM volume_admin_metadata WHERE "
                                           "volume_id = ? AND \"key\" = 'format' AND deleted = 0 "
                                           "ORDER BY id DESC LIMIT 1",
                                           "s", volume_id);
    const char *v = nb_json_str(row, "value");
    return v ? strdup(v) : NULL;
}

int nb_vol_record_format(struct nb_ctx *ctx, const char *share, const char *volume_id)
{
    char active[128], path[PATH_MAX + 128], fmt[16];
    if (nb_vol_active_file(ctx, volume_id, active, sizeof(active)) < 0)
        return -1;
    nb_vol_file_path(share, active, path, sizeof(path));
    if (nb_vol_detect_format(ctx, path, fmt) < 0)
        return -1;
    struct nb_ctx sys;
    nb_ctx_init_system(&sys, ctx->request_id);
    if (nb_volume_set_format(nb_vol_env->db, &sys, volume_id, fmt) < 0)
        return nb_error(ctx, nb_ctx_status(&sys), nb_ctx_error_name(&sys), "%s",
                        nb_ctx_message(&sys));
    return 0;
}

/* --- update / delete ----------------------------------------------------------- */

static int volumes_update(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *id = nb_req_param(req, "volume_id");
    json_t *body;
    _cleanup_json_ json_t *row = nb_vol_begin_update(ctx, req, resp, "volume_id", nb_vol_load,
                                                     "volume:update", "volume", &body);
    if (!row)
        return -1;
    static const char *const allowed[] = {
        "name", "description", "display_name", "display_description", "metadata", NULL};
    const char *k;
    json_t *v;
    json_object_foreach (body, k, v) {
        bool ok = false;
        for (int i = 0; allowed[i]; i++)
            ok |= strcmp(allowed[i], k) == 0;
        if (!ok)
            return nb_error(ctx, 400, NULL,
                            "Additional properties are not allowed ('%s' was unexpected)", k);
    }
    if (nb_vol_check_name_desc(ctx, body, true) < 0)
        return -1;
    json_t *md = json_object_get(body, "metadata");
    if (nb_vol_metadata_check(ctx, md) < 0)
        return -1;
    char now[32];
    nb_now_iso_us(now);
    struct nb_db *db = nb_vol_env->db;
    json_t *name = json_object_get(body, "name");
    if (!name)
        name = json_object_get(body, "display_name");
    json_t *desc = json_object_get(body, "description");
    if (!desc)
        desc = json_object_get(body, "display_description");
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    int rc = 0;
    if (name)
        rc = nb_db_exec(db, ctx, "UPDATE volumes SET display_name = ? WHERE id = ?", "ss",
                        json_string_value(name), id);
    if (rc >= 0 && desc)
        rc = nb_db_exec(db, ctx, "UPDATE volumes SET display_description = ? WHERE id = ?", "ss",
                        json_string_value(desc), id);
    if (rc >= 0 && json_is_object(md))
        rc = nb_vol_metadata_write(ctx, "volume_metadata", "volume_id", id, md, true);
    if (rc >= 0)
        rc = nb_db_exec(db, ctx, "UPDATE volumes SET updated_at = ? WHERE id = ?", "ss", now, id);
    if (rc < 0) {
        nb_db_rollback(db);
        return -1;
    }
    if (nb_db_commit(db, ctx) < 0)
        return -1;
    json_decref(row);
    row = nb_vol_load(ctx, id);
    if (!row)
        return -1;
    return nb_resp_json(resp, 200,
                        json_pack("{s:o}", "volume", volume_detail(ctx, row, VIEW_ADMIN_METADATA)));
}

static const char *const deletable[] = {"available",       "error",          "error_restoring",
                                        "error_extending", "error_managing", NULL};

/* The deleting transition: Cinder's conditional update with its filters.
 * 1 when it happened, 0 when the volume does not qualify, -1. */
static int mark_deleting(struct nb_ctx *ctx, const char *id, bool cascade)
{
    char now[32];
    nb_now_iso_us(now);
    struct nb_db *db = nb_vol_env->db;
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    long long undeletable = nb_db_int(
        db, ctx, -1,
        cascade ? "SELECT COUNT(*) FROM snapshots WHERE volume_id = ? AND deleted = 0 AND status "
                  "NOT IN ('available', 'error', 'deleting')"
                : "SELECT COUNT(*) FROM snapshots WHERE volume_id = ? AND deleted = 0",
        "s", id);
    int n = undeletable != 0
                ? 0
                : nb_db_exec(db, ctx,
                             "UPDATE volumes SET previous_status = status, status = 'deleting', "
                             "terminated_at = ?, updated_at = ? WHERE id = ? AND deleted = 0 AND "
                             "attach_status != 'attached' AND migration_status IS NULL AND "
                             "status IN (?, ?, ?, ?, ?)",
                             "ssssssss", now, now, id, deletable[0], deletable[1], deletable[2],
                             deletable[3], deletable[4]);
    if (n > 0 && cascade)
        n = nb_db_exec(db, ctx,
                       "UPDATE snapshots SET status = 'deleting', updated_at = ? WHERE volume_id "
                       "= ? AND deleted = 0",
                       "ss", now, id) < 0
                ? -1
                : 1;
    if (n < 0 || undeletable < 0) {
        nb_db_rollback(db);
        return -1;
    }
    if (nb_db_commit(db, ctx) < 0)
        return -1;
    return n;
}

/* Deletes the volume of row (Cinder's checks: deletable status, not
 * attached, no snapshots unless cascade): deleting, the files removed, then
 * the row (and its snapshots, metadata) marked deleted.
 * Returns -1 after nb_error(ctx) when refused (400) or on a database error;
 * 0 when deleted; 1 when the files could not be removed: the volume is then
 * error_deleting and failed holds why. */
static int delete_volume(struct nb_ctx *ctx, const json_t *row, bool cascade, struct nb_ctx *failed)
{
    const char *id = nb_json_str(row, "id");
    int n = mark_deleting(ctx, id, cascade);
    if (n < 0)
        return -1;
    if (n == 0) {
        _cleanup_free_ char *st = nb_vol_or_str(deletable);
        return nb_error(ctx, 400, NULL,
                        "Invalid volume: Volume status must be %s and must not be migrating, "
                        "attached, belong to a group, have snapshots, awaiting a transfer, or be "
                        "disassociated from snapshots after volume transfer.",
                        st);
    }
    nb_ctx_child(failed, ctx);
    const char *share = nb_json_str(row, "provider_location");
    char now[32];
    nb_now_iso_us(now);
    static const char *const deleting[] = {"deleting", NULL};
    if (share && nb_vol_backend_delete(failed, share, id) < 0) {
        nb_vol_set_status(ctx, id, "error_deleting", deleting);
        NB_ERROR(NB_VOL_LOG, ctx, NULL, "Volume %s deletion failed: %s", id,
                 nb_ctx_message(failed));
        return 1;
    }
    struct nb_db *db = nb_vol_env->db;
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    if (nb_db_exec(db, ctx,
                   "UPDATE snapshots SET status = 'deleted', deleted = 1, deleted_at = ? WHERE "
                   "volume_id = ? AND deleted = 0",
                   "ss", now, id) < 0 ||
        nb_db_exec(db, ctx,
                   "UPDATE volume_metadata SET deleted = 1, deleted_at = ? WHERE volume_id = ? "
                   "AND deleted = 0",
                   "ss", now, id) < 0 ||
        nb_db_exec(db, ctx,
                   "UPDATE volume_admin_metadata SET deleted = 1, deleted_at = ? WHERE volume_id "
                   "= ? AND deleted = 0",
                   "ss", now, id) < 0 ||
        nb_db_exec(db, ctx,
                   "UPDATE volumes SET status = 'deleted', deleted = 1, deleted_at = ?, "
                   "updated_at = ? WHERE id = ?",
                   "sss", now, now, id) < 0) {
        nb_db_rollback(db);
        return -1;
    }
    if (nb_db_commit(db, ctx) < 0)
        return -1;
    NB_INFO(NB_VOL_LOG, ctx, NULL, "Volume %s deleted", id);
    return 0;
}

static int volumes_delete(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    _cleanup_json_ json_t *row =
        nb_vol_begin_load(ctx, req, resp, "volume_id", nb_vol_load, "volume:delete");
    if (!row)
        return -1;
    bool cascade = nb_bool_from_string(nb_req_query(req, "cascade")) == 1;
    struct nb_ctx failed;
    /* a failure to remove the files shows as status error_deleting */
    if (delete_volume(ctx, row, cascade, &failed) < 0)
        return -1;
    return nb_resp_empty(resp, 202);
}

int nb_volume_delete_for(struct nb_ctx *ctx, const char *volume_id)
{
    _cleanup_json_ json_t *row = nb_vol_load(ctx, volume_id);
    if (!row)
        return -1;
    struct nb_ctx failed;
    int rc = delete_volume(ctx, row, false, &failed);
    if (rc == 1)
        return nb_error(ctx, nb_ctx_status(&failed), nb_ctx_error_name(&failed), "%s",
                        nb_ctx_message(&failed));
    return rc;
}

/* --- metadata ------------------------------------------------------------------ */

static int metadata_index(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    return nb_vol_metadata_index(ctx, req, resp, &nb_vol_volume_meta);
}

static int metadata_create(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    return nb_vol_metadata_write_all(ctx, req, resp, &nb_vol_volume_meta, false);
}

static int metadata_replace(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    return nb_vol_metadata_write_all(ctx, req, resp, &nb_vol_volume_meta, true);
}

static int metadata_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    return nb_vol_metadata_show(ctx, req, resp, &nb_vol_volume_meta);
}

static int metadata_update_key(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    return nb_vol_metadata_update_key(ctx, req, resp, &nb_vol_volume_meta);
}

static int metadata_delete(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    return nb_vol_metadata_delete(ctx, req, resp, &nb_vol_volume_meta);
}

void nb_vol_volumes_routes(void)
{
    nb_http_route("GET", "/volume/v3/{project_id}/volumes", volumes_index, 0);
    nb_http_route("GET", "/volume/v3/{project_id}/volumes/detail", volumes_detail, 0);
    nb_http_route("POST", "/volume/v3/{project_id}/volumes", volumes_create, 0);
    nb_http_route("GET", "/volume/v3/{project_id}/volumes/{volume_id}", volumes_show, 0);
    nb_http_route("PUT", "/volume/v3/{project_id}/volumes/{volume_id}", volumes_update, 0);
    nb_http_route("DELETE", "/volume/v3/{project_id}/volumes/{volume_id}", volumes_delete, 0);
    /* "volumes/" with no id: Cinder's router has no such route */
    nb_http_route("PUT", "/volume/v3/{project_id}/volumes", nb_vol_no_resource, 0);
    nb_http_route("DELETE", "/volume/v3/{project_id}/volumes", nb_vol_no_resource, 0);
    nb_http_route("GET", "/volume/v3/{project_id}/volumes/{volume_id}/metadata", metadata_index, 0);
    nb_http_route("POST", "/volume/v3/{project_id}/volumes/{volume_id}/metadata", metadata_create,
                  0);
    nb_http_route("PUT", "/volume/v3/{project_id}/volumes/{volume_id}/metadata", metadata_replace,
                  0);
    nb_http_route("GET", "/volume/v3/{project_id}/volumes/{volume_id}/metadata/{key}",
                  metadata_show, 0);
    nb_http_route("PUT", "/volume/v3/{project_id}/volumes/{volume_id}/metadata/{key}",
                  metadata_update_key, 0);
    nb_http_route("DELETE", "/volume/v3/{project_id}/volumes/{volume_id}/metadata/{key}",
                  metadata_delete, 0);
}
