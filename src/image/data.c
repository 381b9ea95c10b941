/* data.c - image data: PUT and GET /v2/images/{id}/file, and the two
 * in-process doors to the same data (image.h): nb_image_import_file, which
 * uploads a local file exactly as PUT does, and nb_image_data_open, which
 * compute agents use to fill their image cache.
 *
 * Upload is streamed (NB_ROUTE_STREAM_BODY): the image goes queued → saving
 * (committed before any byte is read), each chunk is written to
 * $state_path/images/<id>.partial, hashed (md5 for checksum, sha512 for
 * os_hash_value) and fed to the format inspector; nothing is held whole in
 * memory. At the end the content must be safe and match the declared
 * disk_format; then the file is fsync'd and renamed to images/<id> and the
 * image becomes active with size, virtual_size and the hashes. A refused or
 * failed upload (bad content, I/O error, client gone) removes the partial
 * file and puts the image back to queued, as Glance does. The HTTP handlers
 * and the import share that core (upload_begin, upload_write,
 * upload_complete, upload_fail); they differ only in where the bytes come
 * from. Download sends the file from disk with Content-MD5 set to the hex
 * checksum, as Glance does; 204 when the image has no data. */
#include "image/image.h"
#include "image/image_priv.h"
#include "image/format.h"
#include "common/cleanup.h"
#include "common/config.h"
#include "common/http.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "db/db.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Bytes read from a local file per step of an import. */
#define IMPORT_CHUNK (1024 * 1024)

struct upload {
    char id[64];
    char disk_format[64];
    bool volume_snapshot; /* Nova's image of a volume-backed server */
    char partial[4096], final[4096];
    int fd;
    uint64_t size, cap;
    EVP_MD_CTX *md5, *sha512;
    struct nb_format_inspector *ins;
};

/* Path of the stored data of image id (suffix "" or ".partial") into buf. */
static void data_path(char *buf, size_t n, const char *id, const char *suffix)
{
    snprintf(buf, n, "%s/images/%s%s", nb_image_env->state_path, id, suffix);
}

void nb_image_data_remove(const char *id)
{
    char p[4096];
    data_path(p, sizeof(p), id, "");
    unlink(p);
    data_path(p, sizeof(p), id, ".partial");
    unlink(p);
}

static void upload_free(struct upload *u)
{
    if (!u)
        return;
    if (u->fd >= 0)
        close(u->fd);
    EVP_MD_CTX_free(u->md5);
    EVP_MD_CTX_free(u->sha512);
    nb_format_inspector_free(u->ins);
    free(u);
}

/* Removes the partial data and puts the image back to queued. */
static void upload_fail(struct nb_ctx *ctx, struct upload *u, const char *why)
{
    if (u->fd >= 0) {
        close(u->fd);
        u->fd = -1;
    }
    unlink(u->partial);
    struct nb_ctx sub;
    nb_ctx_init(&sub);
    char now[32];
    nb_db_exec(nb_image_env->db, &sub,
               "UPDATE images SET status = 'queued', updated_at = ? WHERE id = ? AND "
               "deleted = 0 AND status = 'saving'",
               "ss", nb_now_iso_us(now), u->id);
    NB_WARN("nubo.image.api", ctx, NULL,
            "image %s: upload failed after %llu bytes (%s); back to queued", u->id,
            (unsigned long long)u->size, why);
}

/* True if rec is the bootstrap record of nb_image_create_record: active,
 * marked by the placeholder property, never given data. */
static bool is_placeholder(const json_t *rec)
{
    const char *mark = nb_json_str(json_object_get(rec, "properties"), NB_IMAGE_PLACEHOLDER_PROP);
    json_t *size = json_object_get(rec, "size");
    return mark && strcmp(mark, "true") == 0 && strcmp(nb_json_str(rec, "status"), "active") == 0 &&
           (json_is_null(size) || json_integer_value(size) == 0);
}

/* Moves image id to saving: from queued, or (fill_placeholder) from the
 * bootstrap placeholder, which then loses its placeholder hashes and mark.
 * Returns 1, 0 when the image was not in that state any more, or -1. */
static int mark_saving(struct nb_ctx *ctx, const char *id, bool fill_placeholder)
{
    struct nb_db *db = nb_image_env->db;
    char now[32];
    nb_now_iso_us(now);
    if (!fill_placeholder)
        return nb_db_exec(db, ctx,
                          "UPDATE images SET status = 'saving', updated_at = ? WHERE id = ? AND "
                          "deleted = 0 AND status = 'queued'",
                          "ss", now, id);
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    int n = nb_db_exec(db, ctx,
                       "UPDATE images SET status = 'saving', size = NULL, virtual_size = NULL, "
                       "checksum = NULL, os_hash_algo = NULL, os_hash_value = NULL, "
                       "updated_at = ? WHERE id = ? AND deleted = 0 AND status = 'active'",
                       "ss", now, id);
    if (n > 0 && nb_db_exec(db, ctx, "DELETE FROM image_properties WHERE image_id = ? AND name = ?",
                            "ss", id, NB_IMAGE_PLACEHOLDER_PROP) < 0)
        n = -1;
    if (n <= 0) {
        nb_db_rollback(db);
        return n;
    }
    return nb_db_commit(db, ctx) < 0 ? -1 : 1;
}

/* Checks that rec may take data now, opens the partial file and marks the
 * image saving. allow_placeholder also accepts the bootstrap placeholder
 * (imports only; over HTTP it is an active image like any other). Returns
 * the upload (freed by upload_free), or NULL after nb_error. */
static struct upload *upload_begin(struct nb_ctx *ctx, const json_t *rec, bool allow_placeholder)
{
    const char *id = nb_json_str(rec, "id"), *status = nb_json_str(rec, "status");
    if (!nb_image_record_mutable(ctx, rec)) {
        nb_error(ctx, 403, NULL, "You are not authorized to complete upload_image action.");
        return NULL;
    }
    const char *df = nb_json_str(rec, "disk_format"), *cf = nb_json_str(rec, "container_format");
    if (!df || !*df || !cf || !*cf) {
        nb_error(ctx, 400, NULL,
                 "Properties disk_format, container_format must be set prior to saving data.");
        return NULL;
    }
    bool fill = allow_placeholder && is_placeholder(rec);
    if (strcmp(status, "queued") != 0 && !fill) {
        nb_error(ctx, 409, NULL, "Image status transition from %s to saving is not allowed",
                 status);
        return NULL;
    }
    struct upload *u = calloc(1, sizeof(*u));
    if (!u) {
        nb_error(ctx, 500, NULL, "Out of memory.");
        return NULL;
    }
    u->fd = -1;
    long long cap = nb_conf_int("image", "image_size_cap", 1099511627776LL);
    u->cap = cap > 0 ? (uint64_t)cap : 0;
    nb_strlcpy(u->id, id, sizeof(u->id));
    nb_strlcpy(u->disk_format, df, sizeof(u->disk_format));
    u->volume_snapshot =
        json_object_get(json_object_get(rec, "properties"), "block_device_mapping") != NULL;
    data_path(u->partial, sizeof(u->partial), id, ".partial");
    data_path(u->final, sizeof(u->final), id, "");
    u->md5 = EVP_MD_CTX_new();
    u->sha512 = EVP_MD_CTX_new();
    u->ins = nb_format_inspector_new();
    if (!u->md5 || !u->sha512 || !u->ins || EVP_DigestInit_ex(u->md5, EVP_md5(), NULL) != 1 ||
        EVP_DigestInit_ex(u->sha512, EVP_sha512(), NULL) != 1) {
        upload_free(u);
        nb_error(ctx, 500, NULL, "Cannot set up the upload of image %s.", id);
        return NULL;
    }
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s/images", nb_image_env->state_path);
    if (nb_mkdir_p(dir) < 0 ||
        (u->fd = open(u->partial, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0) {
        int e = errno;
        upload_free(u);
        nb_error(ctx, 500, NULL, "Cannot store image data for image %s: %s", id, strerror(e));
        return NULL;
    }
    int n = mark_saving(ctx, id, fill);
    if (n <= 0) {
        unlink(u->partial);
        upload_free(u);
        if (n == 0)
            nb_error(ctx, 409, NULL, "Image status transition from %s to saving is not allowed",
                     "saving");
        return NULL;
    }
    NB_INFO("nubo.image.api", ctx, NULL, "image %s: upload started%s, status saving", id,
            fill ? " (filling the bootstrap placeholder)" : "");
    return u;
}

/* Stores, hashes and inspects the next len bytes of the image. 0/-1 (the
 * caller then calls upload_fail). */
static int upload_write(struct nb_ctx *ctx, struct upload *u, const char *data, size_t len)
{
    /* The HTTP layer stops a streamed body at the cap before it gets here;
     * this holds it for imports too. */
    assert(u->size <= u->cap);
    if (len > u->cap - u->size)
        return nb_error(ctx, 413, NULL,
                        "The incoming image is too large: The provided image is too large.");
    for (size_t off = 0; off < len;) {
        ssize_t n = write(u->fd, data + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            return nb_error(ctx, e == ENOSPC ? 413 : 500, NULL,
                            "Error writing image data for image %s: %s", u->id, strerror(e));
        }
        off += (size_t)n;
    }
    if (EVP_DigestUpdate(u->md5, data, len) != 1 || EVP_DigestUpdate(u->sha512, data, len) != 1 ||
        nb_format_inspector_feed(u->ins, data, len) < 0)
        return nb_error(ctx, 500, NULL, "Out of memory while inspecting image %s.", u->id);
    u->size += len;
    return 0;
}

static void hexdigest(EVP_MD_CTX *md, char *out)
{
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_DigestFinal_ex(md, d, &n);
    for (unsigned int i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", d[i]);
    out[2 * n] = '\0';
}

/* Whether an empty upload is refused (why written). Glance takes any; nubo
 * takes one whose disk_format an empty file is (raw, or the AMI kinds Nova
 * does not compare), and the image of a volume-backed server, whose disks
 * are the volume snapshots its block_device_mapping names (Nova uploads
 * nothing for it, declared qcow2). A format with a header (qcow2, vmdk, …)
 * cannot be empty: such an image could never boot. */
static bool empty_refused(const struct upload *u, char *why, size_t n)
{
    static const char *const may_be_empty[] = {"raw", "ami", "aki", "ari", NULL};
    const char *declared = u->disk_format;
    if (u->volume_snapshot)
        return false;
    for (const char *const *f = may_be_empty; *f; f++)
        if (!strcmp(declared, *f))
            return false;
    snprintf(why, n, "Image declared %s but it has no data (0 bytes)", declared);
    return true;
}

/* Checks the content, publishes the file and activates the image. 0, or -1
 * after nb_error with the image back to queued. */
static int upload_complete(struct nb_ctx *ctx, struct upload *u)
{
    struct nb_format_info info;
    char err[512], why[512];
    if (nb_format_inspector_finish(u->ins, &info, err, sizeof(err)) < 0) {
        upload_fail(ctx, u, err);
        return nb_error(ctx, 500, NULL, "Could not inspect image %s: %s", u->id, err);
    }
    if (u->size > 0 ? nb_format_check_safe(&info, why, sizeof(why)) < 0 ||
                          nb_format_check_declared(&info, u->disk_format, why, sizeof(why)) < 0
                    : empty_refused(u, why, sizeof(why))) {
        upload_fail(ctx, u, why);
        return nb_error(ctx, 400, NULL, "%s", why);
    }
    if (fsync(u->fd) < 0 || close(u->fd) < 0) {
        int e = errno;
        u->fd = -1;
        upload_fail(ctx, u, strerror(e));
        return nb_error(ctx, 500, NULL, "Error writing image data for image %s: %s", u->id,
                        strerror(e));
    }
    u->fd = -1;
    if (rename(u->partial, u->final) < 0) {
        int e = errno;
        upload_fail(ctx, u, strerror(e));
        return nb_error(ctx, 500, NULL, "Error storing image data for image %s: %s", u->id,
                        strerror(e));
    }
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s/images", nb_image_env->state_path);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    char md5[2 * EVP_MAX_MD_SIZE + 1], sha[2 * EVP_MAX_MD_SIZE + 1], now[32];
    hexdigest(u->md5, md5);
    hexdigest(u->sha512, sha);
    long long vsize = u->size > 0 && info.virtual_size ? (long long)info.virtual_size : -1;
    int n =
        vsize >= 0
            ? nb_db_exec(nb_image_env->db, ctx,
                         "UPDATE images SET status = 'active', size = ?, "
                         "virtual_size = ?, checksum = ?, os_hash_algo = 'sha512', "
                         "os_hash_value = ?, updated_at = ? WHERE id = ? AND "
                         "deleted = 0 AND status = 'saving'",
                         "iissss", (long long)u->size, vsize, md5, sha, nb_now_iso_us(now), u->id)
            : nb_db_exec(nb_image_env->db, ctx,
                         "UPDATE images SET status = 'active', size = ?, "
                         "checksum = ?, os_hash_algo = 'sha512', os_hash_value = ?, "
                         "updated_at = ? WHERE id = ? AND deleted = 0 AND "
                         "status = 'saving'",
                         "issss", (long long)u->size, md5, sha, nb_now_iso_us(now), u->id);
    if (n <= 0) {
        unlink(u->final);
        if (n < 0)
            return -1;
        return nb_error(ctx, 409, NULL,
                        "Image %s could not be found after upload. The image may have been "
                        "deleted during the upload.",
                        u->id);
    }
    NB_INFO("nubo.image.api", ctx, NULL,
            "image %s: uploaded %llu bytes (%s, virtual size %llu), now active", u->id,
            (unsigned long long)u->size, u->size ? info.format : "empty",
            (unsigned long long)info.virtual_size);
    return 0;
}

/* The record of image id if ctx may see it, or NULL after 404 (Glance's
 * wording for the data routes) or a db error. */
static json_t *visible(struct nb_ctx *ctx, const char *id)
{
    json_t *rec = nb_image_record_load(ctx, id);
    if (!rec && nb_ctx_failed(ctx))
        return NULL;
    if (!rec || !nb_image_record_visible(ctx, rec)) {
        json_decref(rec);
        nb_error(ctx, 404, NULL, "No image found with ID %s", id);
        return NULL;
    }
    return rec;
}

/* --- HTTP ---------------------------------------------------------------------------- */

static int upload_chunk(struct nb_ctx *ctx, struct nb_req *req, const char *data, size_t len)
{
    return upload_write(ctx, req->body_opaque, data, len);
}

static void upload_abort(struct nb_ctx *ctx, struct nb_req *req)
{
    struct upload *u = req->body_opaque;
    upload_fail(ctx, u, nb_ctx_failed(ctx) ? nb_ctx_message(ctx) : "aborted");
    upload_free(u);
    req->body_opaque = NULL;
}

static int upload_end(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    struct upload *u = req->body_opaque;
    int rc = upload_complete(ctx, u);
    upload_free(u);
    req->body_opaque = NULL;
    return rc < 0 ? -1 : nb_resp_empty(resp, 204);
}

/* PUT /file: checks, marks the image saving and sets up the stream. */
static int file_upload(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *ct = nb_req_header(req, "Content-Type");
    if (ct && !nb_startswith(ct, "application/octet-stream"))
        return nb_error(ctx, 415, NULL,
                        "The request media type %s is not supported by this server.", ct);
    _cleanup_json_ json_t *rec = visible(ctx, nb_req_param(req, "image_id"));
    if (!rec)
        return -1;
    struct upload *u = upload_begin(ctx, rec, false);
    if (!u)
        return -1;
    req->body_chunk = upload_chunk;
    req->body_end = upload_end;
    req->body_abort = upload_abort;
    req->body_opaque = u;
    (void)resp;
    return 0;
}

/* GET /file: the stored data streamed from disk, or 204 without data. */
static int file_download(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    _cleanup_json_ json_t *rec = visible(ctx, nb_req_param(req, "image_id"));
    if (!rec)
        return -1;
    if (strcmp(nb_json_str(rec, "status"), "deactivated") == 0 && !ctx->is_admin)
        return nb_error(ctx, 403, NULL,
                        "The requested image has been deactivated. Image data "
                        "download is forbidden.");
    if (strcmp(nb_json_str(rec, "status"), "active") != 0)
        return nb_resp_empty(resp, 204);
    char path[4096];
    data_path(path, sizeof(path), nb_json_str(rec, "id"), "");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd < 0)
        return nb_resp_empty(resp, 204); /* a record without data (bootstrap) */
    if (fstat(fd, &sb) < 0) {
        close(fd);
        return nb_error(ctx, 500, NULL, "Cannot read image data: %s", strerror(errno));
    }
    const char *sum = nb_json_str(rec, "checksum");
    if (sum && *sum)
        nb_resp_header(resp, "Content-MD5", sum);
    return nb_resp_file(resp, 200, fd, (uint64_t)sb.st_size, "application/octet-stream");
}

void nb_image_data_init(void)
{
    nb_http_route("GET", "/image/v2/images/{image_id}/file", file_download, 0);
    nb_http_route("PUT", "/image/v2/images/{image_id}/file", file_upload, NB_ROUTE_STREAM_BODY);
}

/* --- image.h ------------------------------------------------------------------------- */

/* Feeds everything read from src to u. 0, or -1 after nb_error. */
static int import_stream(struct nb_ctx *ctx, struct upload *u, int src, const char *path)
{
    _cleanup_free_ char *buf = malloc(IMPORT_CHUNK);
    if (!buf)
        return nb_error(ctx, 500, NULL, "Out of memory.");
    for (;;) {
        ssize_t n = read(src, buf, IMPORT_CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return nb_error(ctx, 500, NULL, "Error reading image file %s: %s", path,
                            strerror(errno));
        if (n == 0)
            return 0;
        if (upload_write(ctx, u, buf, (size_t)n) < 0)
            return -1;
    }
}

int nb_image_import_file(struct nb_ctx *ctx, const char *image_id, const char *path)
{
    int src = open(path, O_RDONLY | O_CLOEXEC);
    if (src < 0)
        return nb_error(ctx, 400, NULL, "Cannot read image file %s: %s", path, strerror(errno));
    int rc = -1;
    json_t *rec = visible(ctx, image_id);
    struct upload *u = rec ? upload_begin(ctx, rec, true) : NULL;
    if (!u)
        goto cleanup;
    NB_INFO("nubo.image.api", ctx, NULL, "image %s: importing %s", image_id, path);
    if (import_stream(ctx, u, src, path) < 0)
        upload_fail(ctx, u, nb_ctx_message(ctx));
    else
        rc = upload_complete(ctx, u);
cleanup:
    upload_free(u);
    json_decref(rec);
    close(src);
    return rc;
}

int nb_image_data_open(struct nb_ctx *ctx, const char *image_id, json_t **info)
{
    *info = NULL;
    _cleanup_json_ json_t *rec = nb_image_record_load(ctx, image_id);
    if (!rec && nb_ctx_failed(ctx))
        return -1;
    if (!rec || !nb_image_record_visible(ctx, rec))
        return nb_error(ctx, 404, NULL, "Image %s could not be found.", image_id);
    const char *status = nb_json_str(rec, "status");
    if (strcmp(status, "active") != 0)
        return nb_error(ctx, 409, NULL, "Image %s is not active (status %s).", image_id, status);
    char path[4096];
    data_path(path, sizeof(path), image_id, "");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT)
        return nb_error(ctx, 409, NULL, "Image %s has no data (a record without an upload).",
                        image_id);
    if (fd < 0)
        return nb_error(ctx, 500, NULL, "Cannot open the data of image %s: %s", image_id,
                        strerror(errno));
    /* The stored file is what was hashed and activated; a different size
     * means it was changed behind our back. */
    struct stat sb;
    if (fstat(fd, &sb) < 0) {
        int e = errno;
        close(fd);
        return nb_error(ctx, 500, NULL, "Cannot read the data of image %s: %s", image_id,
                        strerror(e));
    }
    json_t *size = json_object_get(rec, "size");
    long long want = json_is_integer(size) ? (long long)json_integer_value(size) : -1;
    if ((long long)sb.st_size != want) {
        close(fd);
        return nb_error(ctx, 500, NULL,
                        "The data of image %s does not match its record (%lld bytes stored, "
                        "%lld expected).",
                        image_id, (long long)sb.st_size, want);
    }
    static const char *const keys[] = {
        "id",           "name",     "disk_format",  "container_format", "size",
        "virtual_size", "checksum", "os_hash_algo", "os_hash_value",    NULL};
    json_t *out = json_object();
    for (const char *const *k = keys; *k; k++) {
        json_t *v = json_object_get(rec, *k);
        json_object_set(out, *k, v ? v : json_null());
    }
    *info = out;
    return fd;
}
