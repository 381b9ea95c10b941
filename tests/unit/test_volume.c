/* test_volume.c - unit tests of the volume service's status machine
 * (nb_volume_next_status, and nb_volume_transition / attach / detach on a
 * real database: conditional updates, Cinder's refusal message, attachment
 * rows, attach_status) and of the NFS-style backend (mount point naming by
 * MD5 of the share, the share symlink, volume-<uuid> files, qcow2 overlays
 * for snapshots and their deletion with the data checked by qemu-io, and
 * Nova's NFS connection info). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "common/config.h"
#include "common/json.h"
#include "common/util.h"
#include "db/db.h"
#include "volume/volume.h"
#include "volume/volume_int.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[] = "/tmp/nubo-test-volume-XXXXXX";
static struct nb_env env;

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    return system(cmd);
}

static void admin_ctx(struct nb_ctx *ctx)
{
    nb_ctx_init(ctx);
    strcpy(ctx->project_id, "p1");
    strcpy(ctx->user_id, "u1");
    ctx->is_admin = ctx->is_member = ctx->is_reader = true;
}

/* Inserts a volume row in status on the default share. */
static void add_volume(const char *id, const char *status)
{
    struct nb_ctx ctx;
    admin_ctx(&ctx);
    char share[600];
    snprintf(share, sizeof(share), "%s/volumes-share", dir);
    assert_int_equal(nb_db_exec(env.db, &ctx,
                                "INSERT INTO volumes (id, project_id, user_id, size, status, "
                                "attach_status, provider_location, deleted) VALUES (?, 'p1', "
                                "'u1', 1, ?, 'detached', ?, 0)",
                                "sss", id, status, share),
                     1);
}

static char *status_of(const char *id)
{
    struct nb_ctx ctx;
    admin_ctx(&ctx);
    json_t *r =
        nb_db_row(env.db, &ctx, "SELECT status, attach_status FROM volumes WHERE id = ?", "s", id);
    assert_non_null(r);
    char *s = nb_strdup_printf("%s/%s", nb_json_str(r, "status"), nb_json_str(r, "attach_status"));
    json_decref(r);
    return s;
}

static void assert_status(const char *id, const char *want)
{
    char *s = status_of(id);
    assert_string_equal(s, want);
    free(s);
}

/* --- the pure machine ------------------------------------------------------- */

static void test_next_status(void **state)
{
    (void)state;
    assert_string_equal(nb_volume_next_status("available", NB_VOLUME_RESERVE), "reserved");
    assert_string_equal(nb_volume_next_status("reserved", NB_VOLUME_UNRESERVE), "available");
    assert_string_equal(nb_volume_next_status("reserved", NB_VOLUME_BEGIN_ATTACH), "attaching");
    assert_string_equal(nb_volume_next_status("available", NB_VOLUME_BEGIN_ATTACH), "attaching");
    assert_string_equal(nb_volume_next_status("attaching", NB_VOLUME_ATTACHED), "in-use");
    assert_string_equal(nb_volume_next_status("attaching", NB_VOLUME_ATTACH_FAILED), "available");
    assert_string_equal(nb_volume_next_status("in-use", NB_VOLUME_BEGIN_DETACH), "detaching");
    assert_string_equal(nb_volume_next_status("detaching", NB_VOLUME_DETACHED), "available");
    assert_string_equal(nb_volume_next_status("detaching", NB_VOLUME_ROLL_DETACHING), "in-use");
    /* refused */
    assert_null(nb_volume_next_status("in-use", NB_VOLUME_RESERVE));
    assert_null(nb_volume_next_status("creating", NB_VOLUME_BEGIN_ATTACH));
    assert_null(nb_volume_next_status("error", NB_VOLUME_ATTACHED));
    assert_null(nb_volume_next_status("available", NB_VOLUME_ATTACHED));
    assert_null(nb_volume_next_status("available", NB_VOLUME_BEGIN_DETACH));
    assert_null(nb_volume_next_status("extending", NB_VOLUME_DETACHED));
    assert_null(nb_volume_next_status("deleting", NB_VOLUME_UNRESERVE));
    assert_null(nb_volume_next_status(NULL, NB_VOLUME_RESERVE));
    assert_string_equal(nb_volume_op_name(NB_VOLUME_BEGIN_DETACH), "begin_detaching");
}

/* --- transitions in the database ------------------------------------------------ */

static void test_transitions_db(void **state)
{
    (void)state;
    struct nb_ctx ctx;
    const char *id = "11111111-1111-4111-8111-111111111111";
    add_volume(id, "available");
    admin_ctx(&ctx);
    assert_int_equal(nb_volume_transition(&ctx, id, NB_VOLUME_RESERVE), 0);
    assert_status(id, "reserved/detached");
    assert_int_equal(nb_volume_transition(&ctx, id, NB_VOLUME_BEGIN_ATTACH), 0);
    assert_status(id, "attaching/attaching");

    /* a refused transition leaves the row alone and says why, as Cinder */
    assert_int_equal(nb_volume_transition(&ctx, id, NB_VOLUME_RESERVE), -1);
    assert_int_equal(ctx.err_status, 400);
    assert_string_equal(ctx.err_msg, "Invalid volume: Volume 11111111-1111-4111-8111-111111111111 "
                                     "status must be available, but current status is: "
                                     "attaching.");
    assert_status(id, "attaching/attaching");

    admin_ctx(&ctx);
    char att[NB_UUID_LEN];
    assert_int_equal(nb_volume_attach(&ctx, id, "inst-1", "host-1", "/dev/vdb", att), 0);
    assert_status(id, "in-use/attached");
    json_t *a = nb_db_row(env.db, &ctx, "SELECT * FROM volume_attachment WHERE id = ?", "s", att);
    assert_non_null(a);
    assert_string_equal(nb_json_str(a, "instance_uuid"), "inst-1");
    assert_string_equal(nb_json_str(a, "attach_status"), "attached");
    json_decref(a);

    /* detach needs begin_detaching first */
    assert_int_equal(nb_volume_detach(&ctx, id, att), -1);
    assert_status(id, "in-use/attached");
    admin_ctx(&ctx);
    assert_int_equal(nb_volume_transition(&ctx, id, NB_VOLUME_BEGIN_DETACH), 0);
    assert_int_equal(nb_volume_transition(&ctx, id, NB_VOLUME_ROLL_DETACHING), 0);
    assert_status(id, "in-use/attached");
    assert_int_equal(nb_volume_transition(&ctx, id, NB_VOLUME_BEGIN_DETACH), 0);
    assert_status(id, "detaching/attached");
    assert_int_equal(nb_volume_detach(&ctx, id, att), 0);
    assert_status(id, "available/detached");
    assert_int_equal(nb_db_int(env.db, &ctx, -1,
                               "SELECT COUNT(*) FROM volume_attachment WHERE volume_id = ? AND "
                               "deleted = 0",
                               "s", id),
                     0);
    /* a failed attach rolls back to available */
    admin_ctx(&ctx);
    assert_int_equal(nb_volume_transition(&ctx, id, NB_VOLUME_BEGIN_ATTACH), 0);
    assert_int_equal(nb_volume_transition(&ctx, id, NB_VOLUME_ATTACH_FAILED), 0);
    assert_status(id, "available/detached");
}

static void test_visibility(void **state)
{
    (void)state;
    const char *id = "22222222-2222-4222-8222-222222222222";
    add_volume(id, "available");
    struct nb_ctx ctx;
    nb_ctx_init(&ctx);
    strcpy(ctx.project_id, "other");
    ctx.is_member = ctx.is_reader = true;
    assert_null(nb_volume_lookup(&ctx, id));
    assert_int_equal(ctx.err_status, 404);
    assert_string_equal(ctx.err_msg, "Volume 22222222-2222-4222-8222-222222222222 could not be "
                                     "found.");
    assert_int_equal(nb_volume_transition(&ctx, id, NB_VOLUME_RESERVE), -1);
    assert_status(id, "available/detached");
    admin_ctx(&ctx);
    json_t *v = nb_volume_lookup(&ctx, id);
    assert_non_null(v);
    assert_string_equal(nb_json_str(v, "status"), "available");
    json_decref(v);
}

/* --- the backend ------------------------------------------------------------------ */

static void test_mount_point_naming(void **state)
{
    (void)state;
    char out[PATH_MAX];
    nb_vol_mount_point("/var/lib/nubo/mnt", "127.0.0.1:/srv/nfs", out, sizeof(out));
    /* md5("127.0.0.1:/srv/nfs"), as Cinder's RemoteFS names mount points */
    assert_string_equal(out, "/var/lib/nubo/mnt/d5c077640592c9381d280865cf41ecf2");

    /* the default share is a local directory reached through a symlink */
    char share[600], mnt[PATH_MAX], link[PATH_MAX + 16];
    snprintf(share, sizeof(share), "%s/volumes-share", dir);
    nb_vol_mount_point(nb_vol_mount_base(), share, mnt, sizeof(mnt));
    ssize_t n = readlink(mnt, link, sizeof(link) - 1);
    assert_true(n > 0);
    link[n] = '\0';
    assert_string_equal(link, share);
    char want_base[PATH_MAX + 16];
    snprintf(want_base, sizeof(want_base), "%s/mnt", dir);
    assert_string_equal(nb_vol_mount_base(), want_base);
    nb_vol_file_path(share, "volume-x", link, sizeof(link));
    snprintf(want_base, sizeof(want_base), "%s/volume-x", mnt);
    assert_string_equal(link, want_base);
}

static void test_backend_files(void **state)
{
    (void)state;
    struct nb_ctx ctx;
    admin_ctx(&ctx);
    const char *id = "33333333-3333-4333-8333-333333333333";
    const char *snap = "44444444-4444-4444-8444-444444444444";
    char share[600], base[PATH_MAX], overlay[PATH_MAX], fmt[16];
    snprintf(share, sizeof(share), "%s/volumes-share", dir);
    add_volume(id, "available");
    assert_int_equal(nb_vol_backend_create(&ctx, share, id, 1), 0);
    /* the file is where an operator looks for it, raw by default */
    snprintf(base, sizeof(base), "%s/volume-%s", share, id);
    struct stat sb;
    assert_int_equal(stat(base, &sb), 0);
    assert_int_equal(sb.st_size, 1073741824);
    assert_int_equal(nb_vol_detect_format(&ctx, base, fmt), 0);
    assert_string_equal(fmt, "raw");
    assert_int_equal(sh("qemu-io -f raw -c 'write -P 0x11 0 64k' %s >/dev/null", base), 0);

    /* a snapshot: a qcow2 overlay on the active file, which it becomes */
    char active[128];
    assert_int_equal(nb_vol_active_file(&ctx, id, active, sizeof(active)), 0);
    assert_string_equal(active, "volume-33333333-3333-4333-8333-333333333333");
    assert_int_equal(nb_vol_backend_snapshot(&ctx, share, id, active, snap), 0);
    snprintf(overlay, sizeof(overlay), "%s/volume-%s.%s", share, id, snap);
    assert_int_equal(nb_vol_detect_format(&ctx, overlay, fmt), 0);
    assert_string_equal(fmt, "qcow2");
    assert_int_equal(sh("qemu-img info %s | grep -q 'backing file: volume-%s'", overlay, id), 0);
    char now[32];
    nb_now_iso_us(now);
    char file[128];
    snprintf(file, sizeof(file), "volume-%s.%s", id, snap);
    assert_int_equal(nb_db_exec(env.db, &ctx,
                                "INSERT INTO snapshots (id, volume_id, project_id, status, "
                                "volume_size, provider_location, created_at, deleted) VALUES (?, "
                                "?, 'p1', 'available', 1, ?, ?, 0)",
                                "ssss", snap, id, file, now),
                     1);
    assert_int_equal(nb_vol_active_file(&ctx, id, active, sizeof(active)), 0);
    assert_string_equal(active, file);

    /* writes after the snapshot land in the overlay; the base keeps the snapshot's data */
    assert_int_equal(sh("qemu-io -f qcow2 -c 'write -P 0x22 0 64k' %s >/dev/null", overlay), 0);
    assert_int_equal(sh("qemu-io -f raw -c 'read -P 0x11 0 64k' %s | grep -q 'read 65536'", base),
                     0);

    /* extend grows the active file */
    assert_int_equal(nb_vol_backend_extend(&ctx, share, active, 2), 0);
    assert_int_equal(sh("qemu-img info %s | grep -q 'virtual size: 2 GiB'", overlay), 0);

    /* connection info names the active file and its format */
    json_t *ci = nb_volume_connection_info(&ctx, id);
    assert_non_null(ci);
    assert_string_equal(nb_json_str(ci, "driver_volume_type"), "nfs");
    json_t *data = json_object_get(ci, "data");
    assert_string_equal(nb_json_str(data, "export"), share);
    assert_string_equal(nb_json_str(data, "name"), file);
    assert_string_equal(nb_json_str(data, "format"), "qcow2");
    assert_true(json_is_null(json_object_get(data, "options")));
    assert_string_equal(nb_json_str(ci, "mount_point_base"), nb_vol_mount_base());
    json_decref(ci);

    /* deleting the snapshot commits the overlay into the base */
    char bname[80];
    snprintf(bname, sizeof(bname), "volume-%s", id);
    assert_int_equal(nb_vol_backend_snapshot_delete(&ctx, share, file, bname, NULL), 0);
    assert_int_not_equal(access(overlay, F_OK), 0);
    assert_int_equal(sh("qemu-io -f raw -c 'read -P 0x22 0 64k' %s | grep -q 'read 65536'", base),
                     0);
    assert_int_equal(sh("qemu-img info %s | grep -q 'virtual size: 2 GiB'", base), 0);

    /* a failure carries qemu-img's message */
    admin_ctx(&ctx);
    assert_int_equal(nb_vol_backend_extend(&ctx, share, "volume-missing", 3), -1);
    assert_int_equal(ctx.err_status, 500);
    assert_non_null(strstr(ctx.err_msg, "volume-missing"));

    admin_ctx(&ctx);
    assert_int_equal(nb_vol_backend_delete(&ctx, share, id), 0);
    assert_int_not_equal(access(base, F_OK), 0);
}

static int setup(void **state)
{
    (void)state;
    if (!mkdtemp(dir))
        return -1;
    char path[512];
    snprintf(path, sizeof(path), "%s/nubo.sqlite", dir);
    env.db = nb_db_open(path);
    if (!env.db || nb_db_sync(env.db) < 0)
        return -1;
    env.state_path = dir;
    env.region = "RegionTest";
    env.my_host = "test";
    return nb_volume_init(&env);
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
        cmocka_unit_test(test_next_status),   cmocka_unit_test(test_transitions_db),
        cmocka_unit_test(test_visibility),    cmocka_unit_test(test_mount_point_naming),
        cmocka_unit_test(test_backend_files),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
