/* test_image_data.c - unit tests of the image data doors of image.h:
 * nb_image_import_file (a local file uploaded as PUT /file would: hashes,
 * format check, sizes, state transitions, the bootstrap placeholder, faults
 * on the source and on the disk) and nb_image_data_open (visibility, status,
 * the data the agents read). Images are made with qemu-img; hashes are
 * checked against OpenSSL's one-shot digests of the source file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "common/config.h"
#include "common/json.h"
#include "common/util.h"
#include "db/db.h"
#include "image/image.h"
#include "image/image_priv.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[] = "/tmp/nubo-test-imgdata-XXXXXX";
static struct nb_env env;

static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sh(const char *fmt, ...)
{
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    if (system(cmd) != 0)
        fail_msg("command failed: %s", cmd);
}

static const char *src_path(const char *name)
{
    static char buf[4][512];
    static int next;
    char *p = buf[next++ % 4];
    snprintf(p, 512, "%s/src/%s", dir, name);
    return p;
}

static const char *data_file(const char *id, const char *suffix)
{
    static char buf[512];
    snprintf(buf, sizeof(buf), "%s/images/%s%s", dir, id, suffix);
    return buf;
}

/* A new queued image owned by project owner (private) with disk_format df. */
static void queued_image(const char *df, const char *owner, char id[NB_UUID_LEN])
{
    char now[32];
    nb_uuid(id);
    nb_now_iso_us(now);
    json_t *rec = json_pack("{s:s, s:s, s:s, s:s, s:b, s:b, s:s, s:s, s:n, s:n, s:n, s:n, s:n, "
                            "s:i, s:i, s:s, s:s, s:s, s:{}, s:[]}",
                            "id", id, "name", "test", "status", "queued", "visibility", "private",
                            "protected", 0, "os_hidden", 0, "disk_format", df, "container_format",
                            "bare", "size", "virtual_size", "checksum", "os_hash_algo",
                            "os_hash_value", "min_disk", 0, "min_ram", 0, "owner", owner,
                            "created_at", now, "updated_at", now, "properties", "tags");
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(nb_image_record_insert(&ctx, rec), 0);
    json_decref(rec);
}

static json_t *record(const char *id)
{
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    json_t *rec = nb_image_record_load(&ctx, id);
    assert_non_null(rec);
    return rec;
}

static void assert_status(const char *id, const char *status)
{
    json_t *rec = record(id);
    assert_string_equal(nb_json_str(rec, "status"), status);
    json_decref(rec);
}

/* Hex digest of the file at path with md. */
static void file_digest(const char *path, const EVP_MD *md, char *out)
{
    size_t len = 0;
    char *data = nb_read_file(path, &len);
    assert_non_null(data);
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    assert_int_equal(EVP_Digest(data, len, d, &n, md, NULL), 1);
    for (unsigned i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", d[i]);
    free(data);
}

static long long file_size(const char *path)
{
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    return (long long)sb.st_size;
}

/* A user context: member of project, not admin. */
static void user_ctx(struct nb_ctx *ctx, const char *project)
{
    nb_ctx_init(ctx);
    nb_strlcpy(ctx->user_id, "u1", sizeof(ctx->user_id));
    nb_strlcpy(ctx->project_id, project, sizeof(ctx->project_id));
    ctx->is_member = ctx->is_reader = true;
}

static void test_import_qcow2_then_open(void **state)
{
    (void)state;
    const char *src = src_path("disk.qcow2");
    sh("qemu-img create -q -f qcow2 '%s' 64M && qemu-img create -q -f raw '%s.raw' 3M && "
       "printf 'nubo' | dd of='%s.raw' bs=1 seek=1048576 conv=notrunc status=none && "
       "qemu-img convert -f raw -O qcow2 '%s.raw' '%s'",
       src, src, src, src, src);
    char id[NB_UUID_LEN];
    queued_image("qcow2", "p1", id);
    struct nb_ctx ctx;
    user_ctx(&ctx, "p1");
    assert_int_equal(nb_image_import_file(&ctx, id, src), 0);
    assert_int_equal(ctx.err_status, 0);

    char md5[33], sha[129];
    file_digest(src, EVP_md5(), md5);
    file_digest(src, EVP_sha512(), sha);
    json_t *rec = record(id);
    assert_string_equal(nb_json_str(rec, "status"), "active");
    assert_string_equal(nb_json_str(rec, "checksum"), md5);
    assert_string_equal(nb_json_str(rec, "os_hash_algo"), "sha512");
    assert_string_equal(nb_json_str(rec, "os_hash_value"), sha);
    assert_int_equal(json_integer_value(json_object_get(rec, "size")), file_size(src));
    assert_int_equal(json_integer_value(json_object_get(rec, "virtual_size")), 3 << 20);
    json_decref(rec);
    assert_int_equal(access(data_file(id, ".partial"), F_OK), -1);

    /* The owner's project opens it; the fd reads what was imported. */
    json_t *info = NULL;
    user_ctx(&ctx, "p1");
    int fd = nb_image_data_open(&ctx, id, &info);
    assert_true(fd >= 0);
    assert_string_equal(nb_json_str(info, "id"), id);
    assert_string_equal(nb_json_str(info, "name"), "test");
    assert_string_equal(nb_json_str(info, "disk_format"), "qcow2");
    assert_string_equal(nb_json_str(info, "container_format"), "bare");
    assert_string_equal(nb_json_str(info, "checksum"), md5);
    assert_string_equal(nb_json_str(info, "os_hash_algo"), "sha512");
    assert_string_equal(nb_json_str(info, "os_hash_value"), sha);
    assert_int_equal(json_integer_value(json_object_get(info, "size")), file_size(src));
    assert_int_equal(json_integer_value(json_object_get(info, "virtual_size")), 3 << 20);
    assert_int_equal(json_object_size(info), 9);
    assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    assert_int_equal(fcntl(fd, F_GETFL) & O_ACCMODE, O_RDONLY);
    size_t len = 0;
    char *want = nb_read_file(src, &len);
    char *got = malloc(len + 1);
    assert_int_equal(pread(fd, got, len + 1, 0), (ssize_t)len);
    assert_memory_equal(got, want, len);
    free(got);
    free(want);
    close(fd);
    json_decref(info);

    /* Another project does not see a private image: 404, no fd. */
    user_ctx(&ctx, "p2");
    info = NULL;
    assert_int_equal(nb_image_data_open(&ctx, id, &info), -1);
    assert_null(info);
    assert_int_equal(ctx.err_status, 404);
    char msg[128];
    snprintf(msg, sizeof(msg), "Image %s could not be found.", id);
    assert_string_equal(ctx.err_msg, msg);
    /* ... nor can import into it (PUT's 404). An active image refuses a
     * second upload with PUT's 409. */
    user_ctx(&ctx, "p2");
    assert_int_equal(nb_image_import_file(&ctx, id, src), -1);
    assert_int_equal(ctx.err_status, 404);
    snprintf(msg, sizeof(msg), "No image found with ID %s", id);
    assert_string_equal(ctx.err_msg, msg);
    user_ctx(&ctx, "p1");
    assert_int_equal(nb_image_import_file(&ctx, id, src), -1);
    assert_int_equal(ctx.err_status, 409);
    assert_string_equal(ctx.err_msg,
                        "Image status transition from active to saving is not allowed");
    assert_status(id, "active");
}

static void test_import_raw_and_refusals(void **state)
{
    (void)state;
    const char *raw = src_path("disk.raw");
    sh("qemu-img create -q -f raw '%s' 4M", raw);
    char id[NB_UUID_LEN];
    struct nb_ctx ctx;

    /* Content that is not the declared format: 400 naming what was found,
     * back to queued, nothing stored. */
    queued_image("qcow2", "p1", id);
    user_ctx(&ctx, "p1");
    assert_int_equal(nb_image_import_file(&ctx, id, raw), -1);
    assert_int_equal(ctx.err_status, 400);
    assert_string_equal(ctx.err_msg, "Image declared qcow2 but its content is raw");
    assert_status(id, "queued");
    assert_int_equal(access(data_file(id, ""), F_OK), -1);
    assert_int_equal(access(data_file(id, ".partial"), F_OK), -1);

    /* A qcow2 with a backing file is refused whatever it declares. */
    const char *backed = src_path("backed.qcow2");
    sh("qemu-img create -q -f qcow2 -b /etc/passwd -F raw '%s'", backed);
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(nb_image_import_file(&ctx, id, backed), -1);
    assert_int_equal(ctx.err_status, 400);
    assert_string_equal(ctx.err_msg, "qcow2 image has a backing file (/etc/passwd); refusing it");
    assert_status(id, "queued");

    /* A reader of the owning project may not upload (403). */
    user_ctx(&ctx, "p1");
    ctx.is_member = false;
    assert_int_equal(nb_image_import_file(&ctx, id, raw), -1);
    assert_int_equal(ctx.err_status, 403);

    /* A missing source file changes nothing. */
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(nb_image_import_file(&ctx, id, src_path("nope")), -1);
    assert_int_equal(ctx.err_status, 400);
    assert_non_null(strstr(ctx.err_msg, "No such file or directory"));
    assert_status(id, "queued");

    /* Unknown image: 404. */
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(nb_image_import_file(&ctx, "00000000-0000-0000-0000-000000000000", raw), -1);
    assert_int_equal(ctx.err_status, 404);

    /* The same record then takes a matching raw file; a raw image's virtual
     * size is its size. */
    queued_image("raw", "p1", id);
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(nb_image_import_file(&ctx, id, raw), 0);
    json_t *rec = record(id);
    assert_string_equal(nb_json_str(rec, "status"), "active");
    assert_int_equal(json_integer_value(json_object_get(rec, "size")), 4 << 20);
    assert_int_equal(json_integer_value(json_object_get(rec, "virtual_size")), 4 << 20);
    json_decref(rec);
}

static void test_import_faults(void **state)
{
    (void)state;
    const char *raw = src_path("fault.raw");
    sh("qemu-img create -q -f raw '%s' 2M", raw);
    char id[NB_UUID_LEN];
    struct nb_ctx ctx;
    queued_image("raw", "p1", id);

    /* The source cannot be read (a directory opens but read fails). */
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(nb_image_import_file(&ctx, id, "/tmp"), -1);
    assert_int_equal(ctx.err_status, 500);
    assert_non_null(strstr(ctx.err_msg, "Error reading image file /tmp"));
    assert_status(id, "queued");
    assert_int_equal(access(data_file(id, ".partial"), F_OK), -1);

    /* The disk is full: the partial file is /dev/full. 413 as Glance, and
     * the image goes back to queued with the partial file removed. */
    assert_int_equal(symlink("/dev/full", data_file(id, ".partial")), 0);
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(nb_image_import_file(&ctx, id, raw), -1);
    assert_int_equal(ctx.err_status, 413);
    assert_non_null(strstr(ctx.err_msg, "No space left on device"));
    assert_status(id, "queued");
    struct stat sb;
    assert_int_equal(lstat(data_file(id, ".partial"), &sb), -1);

    /* Above [image] image_size_cap: 413 in Glance's words. */
    nb_conf_set("image", "image_size_cap", "1048576");
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(nb_image_import_file(&ctx, id, raw), -1);
    nb_conf_set("image", "image_size_cap", "1099511627776");
    assert_int_equal(ctx.err_status, 413);
    assert_string_equal(ctx.err_msg,
                        "The incoming image is too large: The provided image is too large.");
    assert_status(id, "queued");

    /* After the faults the same file goes in. */
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(nb_image_import_file(&ctx, id, raw), 0);
    assert_status(id, "active");

    /* Stored data changed behind nubo's back is not handed out. */
    assert_int_equal(truncate(data_file(id, ""), 1024), 0);
    json_t *info = NULL;
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(nb_image_data_open(&ctx, id, &info), -1);
    assert_null(info);
    assert_int_equal(ctx.err_status, 500);
    assert_non_null(strstr(ctx.err_msg, "1024 bytes stored, 2097152 expected"));
}

static void test_open_not_active(void **state)
{
    (void)state;
    char id[NB_UUID_LEN], msg[160];
    queued_image("raw", "p1", id);
    struct nb_ctx ctx;
    json_t *info = NULL;
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(nb_image_data_open(&ctx, id, &info), -1);
    assert_null(info);
    assert_int_equal(ctx.err_status, 409);
    snprintf(msg, sizeof(msg), "Image %s is not active (status queued).", id);
    assert_string_equal(ctx.err_msg, msg);

    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(nb_image_data_open(&ctx, "missing", &info), -1);
    assert_int_equal(ctx.err_status, 404);
    assert_string_equal(ctx.err_msg, "Image missing could not be found.");

    /* A deleted image is gone. */
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(
        nb_db_exec(env.db, &ctx, "UPDATE images SET deleted = 1 WHERE id = ?", "s", id), 1);
    assert_int_equal(nb_image_data_open(&ctx, id, &info), -1);
    assert_int_equal(ctx.err_status, 404);
}

/* The record nb_image_create_record makes (active, no data) is filled by an
 * import: saving → active, placeholder mark and empty-data hashes gone. */
static void test_placeholder(void **state)
{
    (void)state;
    const char *src = src_path("ph.qcow2");
    sh("qemu-img create -q -f qcow2 '%s' 8M", src);
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    char id[NB_UUID_LEN], again[NB_UUID_LEN], msg[160];
    assert_int_equal(nb_image_create_record(&ctx, "demo", "qcow2", "bare", 0, id), 0);
    json_t *info = NULL;
    assert_int_equal(nb_image_data_open(&ctx, id, &info), -1);
    assert_int_equal(ctx.err_status, 409);
    snprintf(msg, sizeof(msg), "Image %s has no data (a record without an upload).", id);
    assert_string_equal(ctx.err_msg, msg);

    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(nb_image_import_file(&ctx, id, src), 0);
    json_t *rec = record(id);
    assert_string_equal(nb_json_str(rec, "status"), "active");
    assert_null(json_object_get(json_object_get(rec, "properties"), NB_IMAGE_PLACEHOLDER_PROP));
    char md5[33];
    file_digest(src, EVP_md5(), md5);
    assert_string_equal(nb_json_str(rec, "checksum"), md5);
    assert_int_equal(json_integer_value(json_object_get(rec, "virtual_size")), 8 << 20);
    json_decref(rec);
    int fd = nb_image_data_open(&ctx, id, &info);
    assert_true(fd >= 0);
    close(fd);
    json_decref(info);

    /* Bootstrap again: the same record, which keeps its data. */
    assert_int_equal(nb_image_create_record(&ctx, "demo", "qcow2", "bare", 0, again), 0);
    assert_string_equal(again, id);
    assert_int_equal(nb_image_import_file(&ctx, id, src), -1);
    assert_int_equal(ctx.err_status, 409);

    /* A failed fill leaves a queued record, which a later import fills. */
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(nb_image_create_record(&ctx, "demo-raw", "qcow2", "bare", 0, id), 0);
    const char *raw = src_path("ph.raw");
    sh("qemu-img create -q -f raw '%s' 1M", raw);
    assert_int_equal(nb_image_import_file(&ctx, id, raw), -1);
    assert_int_equal(ctx.err_status, 400);
    rec = record(id);
    assert_string_equal(nb_json_str(rec, "status"), "queued");
    assert_true(json_is_null(json_object_get(rec, "checksum")));
    json_decref(rec);
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(nb_image_import_file(&ctx, id, src), 0);
    assert_status(id, "active");
}

static int setup(void **state)
{
    (void)state;
    if (!mkdtemp(dir))
        return -1;
    char path[512];
    snprintf(path, sizeof(path), "%s/src", dir);
    mkdir(path, 0755);
    snprintf(path, sizeof(path), "%s/nubo.sqlite", dir);
    env.db = nb_db_open(path);
    if (!env.db || nb_db_sync(env.db) < 0)
        return -1;
    env.state_path = dir;
    env.region = "RegionTest";
    env.my_host = "test";
    return nb_image_init(&env);
}

static int teardown(void **state)
{
    (void)state;
    nb_db_close(env.db);
    sh("rm -rf '%s'", dir);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_import_qcow2_then_open),
        cmocka_unit_test(test_import_raw_and_refusals),
        cmocka_unit_test(test_import_faults),
        cmocka_unit_test(test_open_not_active),
        cmocka_unit_test(test_placeholder),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
