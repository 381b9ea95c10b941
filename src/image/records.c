/* records.c - image records in the database (tables images,
 * image_properties, image_tags, image_members), Glance's visibility rule,
 * its image view, and the two lookups the rest of nubo uses (image.h).
 *
 * Timestamps are stored as Nova/Glance database times
 * ("2026-11-29T18:00:00.123456", UTC) and shown as Glance's isotime
 * ("2026-11-29T18:00:00Z"). Deletion is Glance's soft delete: status
 * "deleted", deleted = 1, deleted_at set. */
#include "image/image.h"
#include "image/image_priv.h"
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "db/db.h"
#include "identity/identity.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

static const char *const base_columns[] = {
    "id",        "name",         "status",           "visibility", "protected",
    "os_hidden", "disk_format",  "container_format", "size",       "virtual_size",
    "checksum",  "os_hash_algo", "os_hash_value",    "min_disk",   "min_ram",
    "owner",     "created_at",   "updated_at",       NULL};

const char *nb_image_isotime(const char *stored, char *buf)
{
    double t = stored ? nb_time_parse(stored) : -1;
    if (t < 0)
        return stored;
    return nb_time_iso(t, buf);
}

json_t *nb_image_record_load(struct nb_ctx *ctx, const char *id)
{
    struct nb_db *db = nb_image_env->db;
    json_t *row = nb_db_row(db, ctx, "SELECT * FROM images WHERE id = ? AND deleted = 0", "s", id);
    if (!row)
        return NULL;
    json_t *rec = json_object();
    for (const char *const *c = base_columns; *c; c++) {
        json_t *v = json_object_get(row, *c);
        if (strcmp(*c, "protected") == 0 || strcmp(*c, "os_hidden") == 0)
            json_object_set_new(rec, *c, json_boolean(json_integer_value(v) != 0));
        else
            json_object_set(rec, *c, v ? v : json_null());
    }
    json_decref(row);
    _cleanup_json_ json_t *props = nb_db_rows(
        db, ctx, "SELECT name, value FROM image_properties WHERE image_id = ? ORDER BY rowid", "s",
        id);
    _cleanup_json_ json_t *tags =
        props
            ? nb_db_rows(db, ctx, "SELECT value FROM image_tags WHERE image_id = ? ORDER BY rowid",
                         "s", id)
            : NULL;
    if (!tags) {
        json_decref(rec);
        return NULL;
    }
    json_t *p = json_object(), *t = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (props, i, r) {
        const char *v = nb_json_str(r, "value");
        json_object_set_new(p, nb_json_str(r, "name"), json_string(v ? v : ""));
    }
    json_array_foreach (tags, i, r) {
        json_array_append_new(t, json_string(nb_json_str(r, "value")));
    }
    json_object_set_new(rec, "properties", p);
    json_object_set_new(rec, "tags", t);
    return rec;
}

static bool is_member(struct nb_ctx *ctx, const char *image_id, const char *project)
{
    struct nb_ctx sub;
    nb_ctx_init_system(&sub, ctx->request_id);
    return nb_db_int(nb_image_env->db, &sub, 0,
                     "SELECT COUNT(*) FROM image_members WHERE image_id = ? AND member = ? AND "
                     "deleted = 0",
                     "ss", image_id, project) > 0;
}

bool nb_image_record_visible(struct nb_ctx *ctx, const json_t *rec)
{
    if (ctx->is_admin || ctx->system)
        return true;
    const char *owner = nb_json_str(rec, "owner");
    const char *vis = nb_json_str(rec, "visibility");
    if (!owner)
        return true;
    if (vis && (strcmp(vis, "public") == 0 || strcmp(vis, "community") == 0))
        return true;
    if (!ctx->project_id[0])
        return false;
    if (strcmp(owner, ctx->project_id) == 0)
        return true;
    return vis && strcmp(vis, "shared") == 0 &&
           is_member(ctx, nb_json_str(rec, "id"), ctx->project_id);
}

bool nb_image_record_mutable(const struct nb_ctx *ctx, const json_t *rec)
{
    if (ctx->is_admin || ctx->system)
        return true;
    const char *owner = nb_json_str(rec, "owner");
    return ctx->is_member && owner && strcmp(owner, ctx->project_id) == 0;
}

json_t *nb_image_record_view(const json_t *rec)
{
    json_t *v = json_deep_copy(json_object_get(rec, "properties"));
    if (!v)
        v = json_object();
    static const char *const attrs[] = {
        "name",      "disk_format",  "container_format", "visibility", "size",     "virtual_size",
        "status",    "checksum",     "protected",        "min_ram",    "min_disk", "owner",
        "os_hidden", "os_hash_algo", "os_hash_value",    NULL};
    for (const char *const *a = attrs; *a; a++) {
        json_t *x = json_object_get(rec, *a);
        json_object_set(v, *a, x ? x : json_null());
    }
    const char *id = nb_json_str(rec, "id");
    char c[32], u[32];
    const char *ca = nb_image_isotime(nb_json_str(rec, "created_at"), c);
    const char *ua = nb_image_isotime(nb_json_str(rec, "updated_at"), u);
    json_object_set_new(v, "id", json_string(id));
    json_object_set_new(v, "created_at", ca ? json_string(ca) : json_null());
    json_object_set_new(v, "updated_at", ua ? json_string(ua) : json_null());
    json_t *tags = json_object_get(rec, "tags");
    json_object_set_new(v, "tags", tags ? json_deep_copy(tags) : json_array());
    _cleanup_free_ char *self = nb_strdup_printf("/v2/images/%s", id);
    _cleanup_free_ char *file = nb_strdup_printf("/v2/images/%s/file", id);
    json_object_set_new(v, "self", json_string(self));
    json_object_set_new(v, "file", json_string(file));
    json_object_set_new(v, "schema", json_string("/v2/schemas/image"));
    return v;
}

int nb_image_record_quota(struct nb_ctx *ctx, const json_t *rec)
{
    long pq = nb_conf_int("DEFAULT", "image_property_quota", 128);
    long tq = nb_conf_int("DEFAULT", "image_tag_quota", 128);
    size_t np = json_object_size(json_object_get(rec, "properties"));
    size_t nt = json_array_size(json_object_get(rec, "tags"));
    if (pq >= 0 && (long)np > pq)
        return nb_error(ctx, 413, NULL,
                        "The limit has been exceeded on the number of allowed image properties. "
                        "Attempted: %zu, Maximum: %ld",
                        np, pq);
    if (tq >= 0 && (long)nt > tq)
        return nb_error(ctx, 413, NULL,
                        "The limit has been exceeded on the number of allowed image tags. "
                        "Attempted: %zu, Maximum: %ld",
                        nt, tq);
    return 0;
}

/* Replaces the stored properties and tags of image id with rec's. */
static int write_children(struct nb_ctx *ctx, const char *id, const json_t *rec)
{
    struct nb_db *db = nb_image_env->db;
    if (nb_db_exec(db, ctx, "DELETE FROM image_properties WHERE image_id = ?", "s", id) < 0 ||
        nb_db_exec(db, ctx, "DELETE FROM image_tags WHERE image_id = ?", "s", id) < 0)
        return -1;
    const char *k;
    json_t *v;
    json_object_foreach (json_object_get(rec, "properties"), k, v) {
        if (nb_db_exec(db, ctx,
                       "INSERT INTO image_properties (image_id, name, value) VALUES (?, ?, ?)",
                       "sss", id, k, json_string_value(v)) < 0)
            return -1;
    }
    size_t i;
    json_array_foreach (json_object_get(rec, "tags"), i, v) {
        if (nb_db_insert_ignore(db, ctx, "INTO image_tags (image_id, value) VALUES (?, ?)", "ss",
                                id, json_string_value(v)) < 0)
            return -1;
    }
    return 0;
}

static long long int_or(const json_t *rec, const char *key, long long def)
{
    json_t *v = json_object_get(rec, key);
    return json_is_number(v) ? (long long)json_number_value(v) : def;
}

int nb_image_record_insert(struct nb_ctx *ctx, const json_t *rec)
{
    struct nb_db *db = nb_image_env->db;
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    const char *id = nb_json_str(rec, "id");
    json_t *size = json_object_get(rec, "size"), *vsize = json_object_get(rec, "virtual_size");
    int rc = nb_db_exec(
        db, ctx,
        "INSERT INTO images (id, name, status, visibility, protected, os_hidden, disk_format, "
        "container_format, size, virtual_size, checksum, os_hash_algo, os_hash_value, min_disk, "
        "min_ram, owner, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
        "?, ?, ?, ?, ?)",
        "ssssbbssjjsssiisss", id, nb_json_str(rec, "name"), nb_json_str(rec, "status"),
        nb_json_str(rec, "visibility"), json_is_true(json_object_get(rec, "protected")),
        json_is_true(json_object_get(rec, "os_hidden")), nb_json_str(rec, "disk_format"),
        nb_json_str(rec, "container_format"), json_is_null(size) ? NULL : size,
        json_is_null(vsize) ? NULL : vsize, nb_json_str(rec, "checksum"),
        nb_json_str(rec, "os_hash_algo"), nb_json_str(rec, "os_hash_value"),
        int_or(rec, "min_disk", 0), int_or(rec, "min_ram", 0), nb_json_str(rec, "owner"),
        nb_json_str(rec, "created_at"), nb_json_str(rec, "updated_at"));
    if (rc < 0 || write_children(ctx, id, rec) < 0) {
        nb_db_rollback(db);
        return -1;
    }
    return nb_db_commit(db, ctx);
}

int nb_image_record_save(struct nb_ctx *ctx, json_t *rec)
{
    struct nb_db *db = nb_image_env->db;
    char now[32];
    json_object_set_new(rec, "updated_at", json_string(nb_now_iso_us(now)));
    const char *id = nb_json_str(rec, "id");
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    int rc =
        nb_db_exec(db, ctx,
                   "UPDATE images SET name = ?, visibility = ?, protected = ?, os_hidden = ?, "
                   "disk_format = ?, container_format = ?, min_disk = ?, min_ram = ?, owner = ?, "
                   "updated_at = ? WHERE id = ? AND deleted = 0",
                   "ssbbssiisss", nb_json_str(rec, "name"), nb_json_str(rec, "visibility"),
                   json_is_true(json_object_get(rec, "protected")),
                   json_is_true(json_object_get(rec, "os_hidden")), nb_json_str(rec, "disk_format"),
                   nb_json_str(rec, "container_format"), int_or(rec, "min_disk", 0),
                   int_or(rec, "min_ram", 0), nb_json_str(rec, "owner"), now, id);
    if (rc < 0 || write_children(ctx, id, rec) < 0) {
        nb_db_rollback(db);
        return -1;
    }
    return nb_db_commit(db, ctx);
}

/* --- image.h ------------------------------------------------------------------------- */

json_t *nb_image_lookup(struct nb_ctx *ctx, const char *image_id)
{
    _cleanup_json_ json_t *rec = image_id ? nb_image_record_load(ctx, image_id) : NULL;
    if (!rec && nb_ctx_failed(ctx))
        return NULL;
    if (!rec || !nb_image_record_visible(ctx, rec)) {
        nb_error(ctx, 400, NULL, "Image %s could not be found.", image_id ? image_id : "");
        return NULL;
    }
    return nb_image_record_view(rec);
}

/* Hex digest of no data with md (the checksum of an empty image). */
static void empty_digest(const EVP_MD *md, char *out)
{
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    EVP_Digest("", 0, d, &n, md, NULL);
    for (unsigned i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", d[i]);
}

int nb_image_create_record(struct nb_ctx *ctx, const char *name, const char *disk_format,
                           const char *container_format, long long min_disk, char *id_out)
{
    struct nb_db *db = nb_image_env->db;
    _cleanup_json_ json_t *existing = nb_db_row(
        db, ctx, "SELECT id FROM images WHERE name = ? AND deleted = 0 ORDER BY created_at LIMIT 1",
        "s", name);
    if (existing) {
        nb_strlcpy(id_out, nb_json_str(existing, "id"), NB_UUID_LEN);
        return 0;
    }
    if (nb_ctx_failed(ctx))
        return -1;
    /* Owned by the caller's project, else by the admin project as in
     * devstack (bootstrap runs with a system context). */
    _cleanup_free_ char *admin = NULL;
    const char *owner = ctx->project_id[0] ? ctx->project_id : NULL;
    if (!owner)
        owner = admin = nb_identity_admin_project_id(db, ctx);
    if (nb_ctx_failed(ctx))
        return -1;
    char id[NB_UUID_LEN], now[32], md5[33], sha[129];
    nb_uuid(id);
    nb_now_iso_us(now);
    empty_digest(EVP_md5(), md5);
    empty_digest(EVP_sha512(), sha);
    /* Active with size 0 until the image data arrives; the property says so. */
    _cleanup_json_ json_t *rec = json_pack(
        "{s:s, s:s, s:s, s:s, s:b, s:b, s:s, s:s, s:i, s:n, s:s, s:s, s:s, s:I, s:i, s:o, s:s, "
        "s:s, s:{s:s}, s:[]}",
        "id", id, "name", name, "status", "active", "visibility", "public", "protected", 0,
        "os_hidden", 0, "disk_format", disk_format, "container_format", container_format, "size", 0,
        "virtual_size", "checksum", md5, "os_hash_algo", "sha512", "os_hash_value", sha, "min_disk",
        (json_int_t)min_disk, "min_ram", 0, "owner", owner ? json_string(owner) : json_null(),
        "created_at", now, "updated_at", now, "properties", NB_IMAGE_PLACEHOLDER_PROP, "true",
        "tags");
    if (!rec)
        return nb_error(ctx, 500, NULL, "Cannot build the image record for %s.", name);
    if (nb_image_record_insert(ctx, rec) < 0)
        return -1;
    NB_INFO("nubo.image.api", ctx, NULL, "created image record %s (%s, placeholder without data)",
            id, name);
    nb_strlcpy(id_out, id, NB_UUID_LEN);
    return 0;
}

/* A property value as Nova's Glance client stores it: strings as they are,
 * booleans as Python's str() ("True"/"False"), numbers as text, lists and
 * objects as JSON text (nova.image.glance._convert_to_v2). New string. */
static char *property_text(const json_t *v)
{
    if (json_is_string(v))
        return strdup(json_string_value(v));
    if (json_is_boolean(v))
        return strdup(json_is_true(v) ? "True" : "False");
    if (json_is_integer(v))
        return nb_strdup_printf("%lld", (long long)json_integer_value(v));
    if (json_is_real(v))
        return nb_strdup_printf("%g", json_real_value(v));
    if (json_is_null(v))
        return strdup("None");
    return json_dumps(v, JSON_COMPACT);
}

int nb_image_create_snapshot(struct nb_ctx *ctx, const json_t *attrs, bool no_data, char *id_out)
{
    const char *name = nb_json_str(attrs, "name");
    const char *owner = nb_json_str(attrs, "owner");
    const char *vis = nb_json_str(attrs, "visibility");
    const char *member = nb_json_str(attrs, "member");
    if (!owner)
        owner = ctx->project_id[0] ? ctx->project_id : NULL;
    char id[NB_UUID_LEN], now[32];
    nb_uuid(id);
    nb_now_iso_us(now);
    _cleanup_json_ json_t *props = json_object();
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)json_object_get(attrs, "properties"), k, v) {
        char *text = property_text(v);
        json_object_set_new(props, k, json_string(text ? text : ""));
        free(text);
    }
    char md5[33], sha[129];
    empty_digest(EVP_md5(), md5);
    empty_digest(EVP_sha512(), sha);
    _cleanup_json_ json_t *rec = json_pack(
        "{s:s, s:s?, s:s, s:s, s:b, s:b, s:s?, s:s?, s:o, s:n, s:o, s:o, s:o, s:I, s:I, s:s?, "
        "s:s, s:s, s:O, s:[]}",
        "id", id, "name", name, "status", no_data ? "active" : "queued", "visibility",
        vis ? vis : "private", "protected", 0, "os_hidden", 0, "disk_format",
        nb_json_str(attrs, "disk_format"), "container_format",
        nb_json_str(attrs, "container_format"), "size", no_data ? json_integer(0) : json_null(),
        "virtual_size", "checksum", no_data ? json_string(md5) : json_null(), "os_hash_algo",
        no_data ? json_string("sha512") : json_null(), "os_hash_value",
        no_data ? json_string(sha) : json_null(), "min_disk",
        (json_int_t)nb_json_int(attrs, "min_disk", 0), "min_ram",
        (json_int_t)nb_json_int(attrs, "min_ram", 0), "owner", owner, "created_at", now,
        "updated_at", now, "properties", props, "tags");
    if (!rec || !name)
        return nb_error(ctx, 500, NULL, "Cannot build the snapshot image record %s.",
                        name ? name : "(no name)");
    if (nb_image_record_quota(ctx, rec) < 0 || nb_image_record_insert(ctx, rec) < 0)
        return -1;
    if (member && nb_db_insert_ignore(nb_image_env->db, ctx,
                                      "INTO image_members (image_id, member, status, "
                                      "created_at, updated_at) VALUES (?, ?, 'pending', ?, ?)",
                                      "ssss", id, member, now, now) < 0)
        return -1;
    NB_INFO("nubo.image.api", ctx, NULL, "created snapshot image %s (%s, %s)", id, name,
            no_data ? "active, no data" : "queued");
    nb_strlcpy(id_out, id, NB_UUID_LEN);
    return 0;
}

int nb_image_record_delete(struct nb_ctx *ctx, const char *id)
{
    struct nb_db *db = nb_image_env->db;
    char now[32];
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    if (nb_db_exec(db, ctx,
                   "UPDATE images SET status = 'deleted', deleted = 1, deleted_at = ?, "
                   "updated_at = ? WHERE id = ? AND deleted = 0",
                   "sss", nb_now_iso_us(now), now, id) < 0 ||
        nb_db_exec(db, ctx, "DELETE FROM image_members WHERE image_id = ?", "s", id) < 0) {
        nb_db_rollback(db);
        return -1;
    }
    if (nb_db_commit(db, ctx) < 0)
        return -1;
    nb_image_data_remove(id);
    NB_INFO("nubo.image.api", ctx, NULL, "deleted image %s", id);
    return 0;
}

int nb_image_delete(struct nb_ctx *ctx, const char *image_id)
{
    _cleanup_json_ json_t *rec = nb_image_record_load(ctx, image_id);
    if (!rec && nb_ctx_failed(ctx))
        return -1;
    if (!rec || !nb_image_record_visible(ctx, rec))
        return nb_error(ctx, 404, NULL, "Image %s could not be found.", image_id);
    if (!nb_image_record_mutable(ctx, rec))
        return nb_error(ctx, 403, NULL, "You are not authorized to complete delete_image action.");
    if (json_is_true(json_object_get(rec, "protected")))
        return nb_error(ctx, 403, NULL, "Image %s is protected and cannot be deleted.", image_id);
    return nb_image_record_delete(ctx, image_id);
}

/* The visible record of image_id, or NULL after 404 (Glance's "No image
 * found with ID <id>.") or a database error. New ref. */
static json_t *visible_or_404(struct nb_ctx *ctx, const char *image_id)
{
    json_t *rec = image_id ? nb_image_record_load(ctx, image_id) : NULL;
    if (!rec && nb_ctx_failed(ctx))
        return NULL;
    if (!rec || !nb_image_record_visible(ctx, rec)) {
        json_decref(rec);
        nb_error(ctx, 404, NULL, "No image found with ID %s", image_id ? image_id : "");
        return NULL;
    }
    return rec;
}

json_t *nb_image_show(struct nb_ctx *ctx, const char *image_id)
{
    _cleanup_json_ json_t *rec = visible_or_404(ctx, image_id);
    return rec ? nb_image_record_view(rec) : NULL;
}

/* Appends a JSON-patch path "/<key>" with key escaped as a JSON pointer
 * token (~ as ~0, / as ~1). New string. */
static char *pointer_of(const char *key)
{
    size_t n = 1;
    for (const char *c = key; *c; c++)
        n += (*c == '~' || *c == '/') ? 2 : 1;
    char *out = malloc(n + 1), *o = out;
    if (!out)
        abort();
    *o++ = '/';
    for (const char *c = key; *c; c++) {
        if (*c == '~' || *c == '/') {
            *o++ = '~';
            *o++ = *c == '~' ? '0' : '1';
        } else {
            *o++ = *c;
        }
    }
    *o = '\0';
    return out;
}

/* The JSON patch glanceclient sends to make old properties into props:
 * remove what is gone, add what is new, replace what changed. New array. */
static json_t *properties_patch(const json_t *old, const json_t *props)
{
    json_t *ops = json_array();
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)old, k, v) {
        if (!json_object_get(props, k)) {
            _cleanup_free_ char *path = pointer_of(k);
            json_array_append_new(ops, json_pack("{s:s, s:s}", "op", "remove", "path", path));
        }
    }
    json_object_foreach ((json_t *)props, k, v) {
        json_t *was = json_object_get(old, k);
        if (was && json_equal(was, v))
            continue;
        _cleanup_free_ char *path = pointer_of(k);
        json_array_append_new(ops, json_pack("{s:s, s:s, s:O}", "op", was ? "replace" : "add",
                                             "path", path, "value", v));
    }
    return ops;
}

json_t *nb_image_set_properties(struct nb_ctx *ctx, const char *image_id, const json_t *props)
{
    _cleanup_json_ json_t *rec = visible_or_404(ctx, image_id);
    if (!rec)
        return NULL;
    _cleanup_json_ json_t *ops = properties_patch(json_object_get(rec, "properties"), props);
    if (json_array_size(ops) == 0)
        return nb_image_record_view(rec);
    if (!nb_image_record_mutable(ctx, rec)) {
        nb_error(ctx, 403, NULL, "You are not authorized to complete modify_image action.");
        return NULL;
    }
    char msg[1024];
    int st = nb_image_patch_apply(rec, ops, 10, ctx->is_admin, msg, sizeof(msg));
    if (st) {
        nb_error(ctx, st, NULL, "%s", msg);
        return NULL;
    }
    if (nb_image_record_quota(ctx, rec) < 0 || nb_image_record_save(ctx, rec) < 0)
        return NULL;
    NB_INFO("nubo.image.api", ctx, NULL, "updated the properties of image %s", image_id);
    return nb_image_record_view(rec);
}

bool nb_image_is_core_attr(const char *key)
{
    static const char *const core[] = {"id",
                                       "name",
                                       "status",
                                       "visibility",
                                       "protected",
                                       "os_hidden",
                                       "checksum",
                                       "os_hash_algo",
                                       "os_hash_value",
                                       "owner",
                                       "size",
                                       "virtual_size",
                                       "min_ram",
                                       "min_disk",
                                       "disk_format",
                                       "container_format",
                                       "created_at",
                                       "updated_at",
                                       "tags",
                                       "self",
                                       "file",
                                       "schema",
                                       "direct_url",
                                       "locations",
                                       "stores"};
    for (size_t i = 0; i < sizeof(core) / sizeof(core[0]); i++)
        if (!strcmp(core[i], key))
            return true;
    return false;
}
