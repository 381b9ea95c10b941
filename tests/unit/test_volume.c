/* test_volume.c - unit tests of the volume service's status machine
 * (nb_volume_next_status, and nb_volume_transition / attach / detach on a
 * real database: conditional updates, Cinder's refusal message, attachment
 * rows, attach_status) and of the NFS-style backend (mount point naming by
 * MD5 of the share, the share symlink, volume-<uuid> files, qcow2 overlays
 * for snapshots and their deletion with the data checked by qemu-io, and
 * Nova's NFS connection info), the capacity check of the NFS driver, the
 * user message text, and the conductor's doors (create/delete/snapshot
 * "_for", the free-space refusal, standalone snapshots of in-use volumes,
 * admin metadata "format"). */
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

#include <grp.h>
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

/* --- the attachment records of the 3.27 flow ------------------------------------ */

static void set_status(const char *id, const char *status);

static void test_status_path(void **state)
{
    (void)state;
    enum nb_volume_op ops[8];
    assert_int_equal(nb_vol_status_path("available", "available", ops, 8), 0);
    assert_int_equal(nb_vol_status_path("available", "reserved", ops, 8), 1);
    assert_int_equal(ops[0], NB_VOLUME_RESERVE);
    assert_int_equal(nb_vol_status_path("reserved", "in-use", ops, 8), 2);
    assert_int_equal(ops[0], NB_VOLUME_BEGIN_ATTACH);
    assert_int_equal(ops[1], NB_VOLUME_ATTACHED);
    assert_int_equal(nb_vol_status_path("in-use", "available", ops, 8), 2);
    assert_int_equal(ops[0], NB_VOLUME_BEGIN_DETACH);
    assert_int_equal(ops[1], NB_VOLUME_DETACHED);
    assert_int_equal(nb_vol_status_path("detaching", "in-use", ops, 8), 1);
    assert_int_equal(ops[0], NB_VOLUME_ROLL_DETACHING);
    assert_int_equal(nb_vol_status_path("attaching", "available", ops, 8), 1);
    assert_int_equal(ops[0], NB_VOLUME_ATTACH_FAILED);
    assert_int_equal(nb_vol_status_path("in-use", "reserved", ops, 8), 3);
    assert_int_equal(ops[2], NB_VOLUME_RESERVE);
    /* outside the machine, or too long for the room given */
    assert_int_equal(nb_vol_status_path("error", "available", ops, 8), -1);
    assert_int_equal(nb_vol_status_path("available", "extending", ops, 8), -1);
    assert_int_equal(nb_vol_status_path("in-use", "reserved", ops, 2), -1);
}

static json_t *attachment_row(const char *id)
{
    struct nb_ctx ctx;
    admin_ctx(&ctx);
    return nb_db_row(env.db, &ctx, "SELECT * FROM volume_attachment WHERE id = ?", "s", id);
}

static void assert_attachment(const char *id, const char *status, int deleted)
{
    json_t *a = attachment_row(id);
    assert_non_null(a);
    assert_string_equal(nb_json_str(a, "attach_status"), status);
    assert_int_equal(nb_json_int(a, "deleted", -1), deleted);
    json_decref(a);
}

/* create (reserve) -> update (connect) -> os-complete -> delete, and the
 * volume at each step, as Cinder's attachment API moves it */
static void test_attachment_lifecycle(void **state)
{
    (void)state;
    const char *vol = "66666666-6666-4666-8666-666666666666";
    const char *a1 = "66666666-0000-4000-8000-000000000001";
    const char *inst = "66666666-1111-4111-8111-111111111111";
    add_volume(vol, "available");
    struct nb_ctx ctx;
    admin_ctx(&ctx);
    assert_int_equal(nb_vol_attachment_reserve(&ctx, vol, inst, "null", a1), 0);
    assert_status(vol, "reserved/reserved");
    assert_attachment(a1, "reserved", 0);
    json_t *a = attachment_row(a1);
    assert_string_equal(nb_json_str(a, "connection_info"), "{}");
    assert_string_equal(nb_json_str(a, "instance_uuid"), inst);
    json_decref(a);

    json_t *conn = json_pack("{s:s, s:s}", "host", "host-9", "mountpoint", "/dev/vdc");
    json_t *info = json_pack("{s:s, s:s}", "driver_volume_type", "nfs", "attachment_id", a1);
    assert_int_equal(nb_vol_attachment_connect(&ctx, a1, conn, info, "rw"), 0);
    assert_status(vol, "attaching/attaching");
    assert_attachment(a1, "attaching", 0);
    a = attachment_row(a1);
    assert_string_equal(nb_json_str(a, "attached_host"), "host-9");
    assert_string_equal(nb_json_str(a, "mountpoint"), "/dev/vdc");
    assert_string_equal(nb_json_str(a, "attach_mode"), "rw");
    assert_non_null(nb_json_str(a, "attach_time"));
    assert_non_null(strstr(nb_json_str(a, "connector"), "host-9"));
    json_decref(a);

    assert_int_equal(nb_vol_attachment_complete(&ctx, vol, a1), 0);
    assert_status(vol, "in-use/attached");
    assert_attachment(a1, "attached", 0);

    /* delete goes straight from in-use, through the machine's own steps */
    assert_int_equal(nb_vol_attachment_delete(&ctx, vol, a1), 0);
    assert_status(vol, "available/detached");
    assert_attachment(a1, "detached", 1);
    assert_int_equal(nb_vol_attachment_delete(&ctx, vol, a1), -1);
    assert_int_equal(ctx.err_status, 404);

    /* a reserved or attaching record going frees the volume */
    const char *a2 = "66666666-0000-4000-8000-000000000002";
    admin_ctx(&ctx);
    assert_int_equal(nb_vol_attachment_reserve(&ctx, vol, NULL, "null", a2), 0);
    assert_status(vol, "reserved/reserved");
    assert_int_equal(nb_vol_attachment_delete(&ctx, vol, a2), 0);
    assert_status(vol, "available/detached");
    const char *a3 = "66666666-0000-4000-8000-000000000003";
    assert_int_equal(nb_vol_attachment_reserve(&ctx, vol, inst, "null", a3), 0);
    assert_int_equal(nb_vol_attachment_connect(&ctx, a3, conn, info, NULL), 0);
    assert_status(vol, "attaching/attaching");
    assert_int_equal(nb_vol_attachment_delete(&ctx, vol, a3), 0);
    assert_status(vol, "available/detached");
    json_decref(conn);
    json_decref(info);
}

/* Cinder's reservation rules: one reservation at a time, except for the
 * instance that already holds the volume; error statuses refused */
static void test_attachment_reserve_rules(void **state)
{
    (void)state;
    const char *vol = "77777777-7777-4777-8777-777777777777";
    const char *inst = "77777777-1111-4111-8111-111111111111";
    const char *other = "77777777-2222-4222-8222-222222222222";
    const char *a1 = "77777777-0000-4000-8000-000000000001";
    const char *a2 = "77777777-0000-4000-8000-000000000002";
    const char *a3 = "77777777-0000-4000-8000-000000000003";
    add_volume(vol, "available");
    struct nb_ctx ctx;
    admin_ctx(&ctx);
    assert_int_equal(nb_vol_attachment_reserve(&ctx, vol, inst, "null", a1), 0);
    assert_int_equal(nb_vol_attachment_reserve(&ctx, vol, other, "null", a2), -1);
    assert_int_equal(ctx.err_status, 400);
    assert_string_equal(ctx.err_msg,
                        "Invalid volume: Volume 77777777-7777-4777-8777-777777777777 status must "
                        "be available or downloading to reserve, but the current status is "
                        "reserved.");
    assert_null(attachment_row(a2));
    /* the same instance may (it is moving between hosts) */
    admin_ctx(&ctx);
    assert_int_equal(nb_vol_attachment_reserve(&ctx, vol, inst, "null", a2), 0);
    assert_status(vol, "reserved/reserved");
    assert_int_equal(nb_vol_attachment_complete(&ctx, vol, a1), 0);
    assert_status(vol, "in-use/attached");
    /* the attached record goes: the reserved one left holds the volume */
    assert_int_equal(nb_vol_attachment_delete(&ctx, vol, a1), 0);
    assert_status(vol, "reserved/reserved");
    assert_int_equal(nb_vol_attachment_delete(&ctx, vol, a2), 0);
    assert_status(vol, "available/detached");

    /* the conductor's detach still wants begin_detaching first */
    assert_int_equal(nb_vol_attachment_reserve(&ctx, vol, inst, "null", a3), 0);
    assert_int_equal(nb_vol_attachment_complete(&ctx, vol, a3), 0);
    assert_int_equal(nb_volume_detach(&ctx, vol, a3), -1);
    assert_int_equal(ctx.err_status, 400);
    assert_status(vol, "in-use/attached");
    assert_attachment(a3, "attached", 0);
    admin_ctx(&ctx);
    assert_int_equal(nb_volume_transition(&ctx, vol, NB_VOLUME_BEGIN_DETACH), 0);
    assert_int_equal(nb_volume_detach(&ctx, vol, a3), 0);
    assert_status(vol, "available/detached");

    /* a deleted record decides the volume's status whatever it was (an
     * admin's force detach of a volume reset to error) */
    const char *a4 = "77777777-0000-4000-8000-000000000004";
    admin_ctx(&ctx);
    assert_int_equal(nb_vol_attachment_reserve(&ctx, vol, inst, "null", a4), 0);
    assert_int_equal(nb_vol_attachment_complete(&ctx, vol, a4), 0);
    set_status(vol, "error");
    assert_int_equal(nb_vol_attachment_delete(&ctx, vol, a4), 0);
    assert_status(vol, "available/detached");

    /* error statuses */
    set_status(vol, "error_extending");
    admin_ctx(&ctx);
    assert_int_equal(nb_vol_attachment_reserve(&ctx, vol, inst, "null", a1), -1);
    assert_int_equal(ctx.err_status, 400);
    assert_string_equal(ctx.err_msg,
                        "Invalid volume: Volume attachments can not be created if the volume is "
                        "in an error state. The Volume 77777777-7777-4777-8777-777777777777 "
                        "currently has a status of: error_extending ");
    set_status(vol, "available");
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

/* A volume file is private: its owner and QEMU's group, nobody else
 * (Cinder's secure NFS mode 660), or its owner alone where the host has no
 * QEMU group. */
static void assert_private(const char *path)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    struct group *g = getgrnam("libvirt-qemu");
    if (!g)
        g = getgrnam("qemu");
    unsigned mode = (unsigned)(st.st_mode & 07777);
    if (g && geteuid() == 0) {
        if (mode != 0660 || st.st_gid != g->gr_gid)
            fail_msg("%s: mode %04o gid %u, want 0660 gid %u", path, mode, (unsigned)st.st_gid,
                     (unsigned)g->gr_gid);
    } else if (mode & 0007) {
        fail_msg("%s: mode %04o is readable by others", path, mode);
    }
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
    assert_private(base);
    assert_int_equal(sh("qemu-io -f raw -c 'write -P 0x11 0 64k' %s >/dev/null", base), 0);

    /* a snapshot: a qcow2 overlay on the active file, which it becomes */
    char active[128];
    assert_int_equal(nb_vol_active_file(&ctx, id, active, sizeof(active)), 0);
    assert_string_equal(active, "volume-33333333-3333-4333-8333-333333333333");
    assert_int_equal(nb_vol_backend_snapshot(&ctx, share, id, active, snap), 0);
    snprintf(overlay, sizeof(overlay), "%s/volume-%s.%s", share, id, snap);
    assert_int_equal(nb_vol_detect_format(&ctx, overlay, fmt), 0);
    assert_string_equal(fmt, "qcow2");
    assert_private(overlay);
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

    /* a volume from an image and a copy of a volume: private too */
    const char *id2 = "55555555-5555-4555-8555-555555555555";
    char path2[PATH_MAX];
    assert_int_equal(nb_vol_backend_create_from(&ctx, share, id2, base, "raw", 1), 0);
    snprintf(path2, sizeof(path2), "%s/volume-%s", share, id2);
    assert_private(path2);
    char copy[128];
    snprintf(copy, sizeof(copy), "volume-%s.copy", id2);
    assert_int_equal(nb_vol_backend_copy(&ctx, share, bname, copy), 0);
    snprintf(path2, sizeof(path2), "%s/%s", share, copy);
    assert_private(path2);
    assert_int_equal(nb_vol_backend_delete(&ctx, share, id2), 0);

    /* a file an older nubo left 0644 is made private at start */
    assert_int_equal(chmod(base, 0644), 0);
    assert_int_equal(nb_vol_backend_init(dir), 0);
    assert_private(base);

    admin_ctx(&ctx);
    assert_int_equal(nb_vol_backend_delete(&ctx, share, id), 0);
    assert_int_not_equal(access(base, F_OK), 0);
}

/* --- capacity (Cinder's NFS _is_share_eligible) ---------------------------------- */

#define GB (1024.0 * 1024 * 1024)

static void test_share_eligible(void **state)
{
    (void)state;
    double avail;
    /* 100 GiB share, 10 GiB free, 40 GiB of files: thin, 100 x 20 - 40 */
    struct nb_vol_capacity c = {100 * GB, 10 * GB, 40 * GB};
    assert_true(nb_vol_share_eligible(&c, 1000, true, 20.0, 0, &avail));
    assert_true(avail == 1960 * GB);
    assert_true(nb_vol_share_eligible(&c, 1959, true, 20.0, 0, &avail));
    /* the apparent space must exceed the request */
    assert_false(nb_vol_share_eligible(&c, 1960, true, 20.0, 0, &avail));
    assert_false(nb_vol_share_eligible(&c, 100000, true, 20.0, 0, &avail));
    /* thick (nfs_sparsed_volumes = false): the free space alone */
    assert_true(nb_vol_share_eligible(&c, 9, false, 20.0, 0, &avail));
    assert_true(avail == 10 * GB);
    assert_false(nb_vol_share_eligible(&c, 10, false, 20.0, 0, &avail));
    assert_false(nb_vol_share_eligible(&c, 11, false, 20.0, 0, &avail));
    /* reserved_percentage: 90% used is too full when 15% is reserved */
    assert_false(nb_vol_share_eligible(&c, 1, true, 20.0, 15, &avail));
    assert_true(nb_vol_share_eligible(&c, 1, true, 20.0, 5, &avail));
    /* allocation at the ratio: no more, whatever is asked */
    struct nb_vol_capacity full = {100 * GB, 50 * GB, 2000 * GB};
    assert_false(nb_vol_share_eligible(&full, 1, true, 20.0, 0, &avail));
    assert_true(avail == 0);
    /* ratio 1: thin but not oversubscribed */
    struct nb_vol_capacity one = {100 * GB, 90 * GB, 10 * GB};
    assert_true(nb_vol_share_eligible(&one, 89, true, 1.0, 0, &avail));
    assert_false(nb_vol_share_eligible(&one, 90, true, 1.0, 0, &avail));
    struct nb_vol_capacity empty = {0, 0, 0};
    assert_false(nb_vol_share_eligible(&empty, 1, true, 20.0, 0, &avail));
}

static void test_message_text(void **state)
{
    (void)state;
    char out[256];
    nb_vol_message_text("001", "003", out, sizeof(out));
    assert_string_equal(out, "schedule allocate volume:Could not find any available weighted "
                             "backend.");
    nb_vol_message_text("009", "001", out, sizeof(out));
    assert_string_equal(out, "create snapshot:An unknown error occurred.");
    nb_vol_message_text("999", "999", out, sizeof(out));
    assert_string_equal(out, "unknown action:An unknown error occurred.");
    nb_vol_message_text(NULL, NULL, out, sizeof(out));
    assert_string_equal(out, "unknown action:An unknown error occurred.");
}

/* --- the conductor's doors ----------------------------------------------------------- */

static char *admin_format(const char *id)
{
    struct nb_ctx ctx;
    admin_ctx(&ctx);
    json_t *r = nb_db_row(env.db, &ctx,
                          "SELECT value FROM volume_admin_metadata WHERE volume_id = ? AND key = "
                          "'format' AND deleted = 0",
                          "s", id);
    char *v = r && nb_json_str(r, "value") ? strdup(nb_json_str(r, "value")) : NULL;
    json_decref(r);
    return v;
}

static void assert_format(const char *id, const char *want)
{
    char *f = admin_format(id);
    assert_non_null(f);
    assert_string_equal(f, want);
    free(f);
}

static int count_files(const char *id)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "ls %s/volumes-share | grep -c '^volume-%s' ; true", dir, id);
    FILE *f = popen(cmd, "r");
    int n = -1;
    if (fscanf(f, "%d", &n) != 1)
        n = -1;
    pclose(f);
    return n;
}

static void set_status(const char *id, const char *status)
{
    struct nb_ctx ctx;
    admin_ctx(&ctx);
    assert_int_equal(
        nb_db_exec(env.db, &ctx, "UPDATE volumes SET status = ? WHERE id = ?", "ss", status, id),
        1);
}

static void test_create_for_and_free_space(void **state)
{
    (void)state;
    struct nb_ctx ctx;
    char id[37] = "", big[37] = "";
    admin_ctx(&ctx);
    json_t *req = json_pack("{s:i, s:s}", "size", 1, "name", "bfv");
    assert_int_equal(nb_volume_create_for(&ctx, req, id), 0);
    json_decref(req);
    assert_status(id, "available/detached");
    assert_int_equal(count_files(id), 1);
    assert_format(id, "raw");

    /* more than the share can hold (the quota allowing it): the row ends
     * error, no file, a message */
    admin_ctx(&ctx);
    assert_int_equal(nb_db_exec(env.db, &ctx,
                                "INSERT INTO volume_quotas (project_id, resource, hard_limit) "
                                "VALUES ('p1', 'gigabytes', -1)",
                                ""),
                     1);
    req = json_pack("{s:i}", "size", 10000000);
    assert_int_equal(nb_volume_create_for(&ctx, req, big), -1);
    json_decref(req);
    assert_int_equal(ctx.err_status, 400);
    assert_non_null(strstr(ctx.err_msg, "Could not find any available weighted backend"));
    assert_non_null(strstr(ctx.err_msg, "10000000 GiB was requested"));
    assert_non_null(strstr(ctx.err_msg, "GiB available"));
    assert_int_equal(strlen(big), 36);
    assert_status(big, "error/detached");
    assert_int_equal(count_files(big), 0);
    admin_ctx(&ctx);
    json_t *m = nb_db_row(env.db, &ctx,
                          "SELECT event_id, resource_uuid, message_level FROM messages WHERE "
                          "resource_uuid = ?",
                          "s", big);
    assert_non_null(m);
    assert_string_equal(nb_json_str(m, "event_id"), "VOLUME_VOLUME_001_003");
    assert_string_equal(nb_json_str(m, "message_level"), "ERROR");
    json_decref(m);

    /* refused before a row: bad size, unknown snapshot */
    admin_ctx(&ctx);
    char none[37] = "";
    req = json_pack("{s:i}", "size", -1);
    assert_int_equal(nb_volume_create_for(&ctx, req, none), -1);
    json_decref(req);
    assert_int_equal(ctx.err_status, 400);
    assert_string_equal(none, "");
    admin_ctx(&ctx);
    req = json_pack("{s:s}", "snapshot_id", "55555555-0000-4000-8000-000000000000");
    assert_int_equal(nb_volume_create_for(&ctx, req, none), -1);
    json_decref(req);
    assert_int_equal(ctx.err_status, 404);

    /* attached: the attachment records the connection info; no delete */
    admin_ctx(&ctx);
    char att[37];
    assert_int_equal(nb_volume_transition(&ctx, id, NB_VOLUME_BEGIN_ATTACH), 0);
    assert_int_equal(nb_volume_attach(&ctx, id, "inst-2", "host-2", "/dev/vdb", att), 0);
    json_t *a = nb_db_row(env.db, &ctx,
                          "SELECT connection_info FROM volume_attachment WHERE id = ?", "s", att);
    json_t *ci = nb_json_parse(nb_json_str(a, "connection_info"));
    assert_non_null(ci);
    /* Cinder's flattened shape: the data keys beside the driver's */
    assert_string_equal(nb_json_str(ci, "format"), "raw");
    assert_string_equal(nb_json_str(ci, "driver_volume_type"), "nfs");
    assert_string_equal(nb_json_str(ci, "attachment_id"), att);
    assert_non_null(nb_json_str(ci, "export"));
    assert_non_null(nb_json_str(ci, "mount_point_base"));
    assert_null(json_object_get(ci, "data"));
    json_decref(ci);
    json_decref(a);
    assert_int_equal(nb_volume_delete_for(&ctx, id), -1);
    assert_int_equal(ctx.err_status, 400);
    assert_non_null(strstr(ctx.err_msg, "Invalid volume: Volume status must be available or "
                                        "error or error_restoring"));
    admin_ctx(&ctx);
    assert_int_equal(nb_volume_transition(&ctx, id, NB_VOLUME_BEGIN_DETACH), 0);
    assert_int_equal(nb_volume_detach(&ctx, id, att), 0);

    /* delete: the error volume has no file; the available one loses it */
    admin_ctx(&ctx);
    assert_int_equal(nb_volume_delete_for(&ctx, big), 0);
    assert_int_equal(nb_volume_delete_for(&ctx, id), 0);
    assert_int_equal(count_files(id), 0);
    assert_int_equal(nb_volume_delete_for(&ctx, id), -1);
    assert_int_equal(ctx.err_status, 404);
}

static void test_snapshot_for_in_use(void **state)
{
    (void)state;
    struct nb_ctx ctx;
    char vol[37], s_in_use[37], s_overlay[37], clone[37], path[PATH_MAX];
    admin_ctx(&ctx);
    json_t *req = json_pack("{s:i}", "size", 1);
    assert_int_equal(nb_volume_create_for(&ctx, req, vol), 0);
    json_decref(req);
    snprintf(path, sizeof(path), "%s/volumes-share/volume-%s", dir, vol);
    assert_int_equal(sh("qemu-io -f raw -c 'write -P 0x33 0 64k' %s >/dev/null", path), 0);

    /* in-use without force: refused with Cinder's message */
    set_status(vol, "in-use");
    admin_ctx(&ctx);
    assert_int_equal(nb_volume_snapshot_for(&ctx, vol, "s", NULL, false, s_in_use), -1);
    assert_int_equal(ctx.err_status, 400);
    assert_non_null(strstr(ctx.err_msg, "status must be available, but current status is: "
                                        "in-use."));
    /* with force: a standalone copy; the active file is unchanged */
    admin_ctx(&ctx);
    assert_int_equal(nb_volume_snapshot_for(&ctx, vol, "s", "d", true, s_in_use), 0);
    char active[128];
    assert_int_equal(nb_vol_active_file(&ctx, vol, active, sizeof(active)), 0);
    snprintf(path, sizeof(path), "volume-%s", vol);
    assert_string_equal(active, path);
    assert_format(vol, "raw");
    snprintf(path, sizeof(path), "%s/volumes-share/volume-%s.%s", dir, vol, s_in_use);
    assert_int_equal(sh("qemu-img info %s | grep -q 'file format: raw'", path), 0);
    assert_int_not_equal(sh("qemu-img info %s | grep -q 'backing file'", path), 0);
    json_t *row = nb_db_row(env.db, &ctx, "SELECT standalone, status FROM snapshots WHERE id = ?",
                            "s", s_in_use);
    assert_int_equal(nb_json_int(row, "standalone", -1), 1);
    assert_string_equal(nb_json_str(row, "status"), "available");
    json_decref(row);
    /* the volume's data moves on; a volume from the copy has the old data */
    snprintf(path, sizeof(path), "%s/volumes-share/volume-%s", dir, vol);
    assert_int_equal(sh("qemu-io -f raw -c 'write -P 0x44 0 64k' %s >/dev/null", path), 0);
    req = json_pack("{s:s}", "snapshot_id", s_in_use);
    assert_int_equal(nb_volume_create_for(&ctx, req, clone), 0);
    json_decref(req);
    snprintf(path, sizeof(path), "%s/volumes-share/volume-%s", dir, clone);
    assert_int_equal(sh("qemu-io -f raw -c 'read -P 0x33 0 64k' %s | grep -q 'read 65536'", path),
                     0);

    /* back to available: an overlay, which becomes the active (qcow2) file */
    set_status(vol, "available");
    admin_ctx(&ctx);
    assert_int_equal(nb_volume_snapshot_for(&ctx, vol, NULL, NULL, false, s_overlay), 0);
    assert_int_equal(nb_vol_active_file(&ctx, vol, active, sizeof(active)), 0);
    snprintf(path, sizeof(path), "volume-%s.%s", vol, s_overlay);
    assert_string_equal(active, path);
    assert_format(vol, "qcow2");
    json_t *ci = nb_volume_connection_info(&ctx, vol);
    assert_string_equal(nb_json_str(json_object_get(ci, "data"), "format"), "qcow2");
    json_decref(ci);
    /* the chain holds the overlay only */
    json_t *chain = nb_vol_chain(&ctx, vol);
    assert_int_equal(json_array_size(chain), 1);
    json_decref(chain);

    /* a volume with snapshots cannot be deleted; in-use neither */
    assert_int_equal(nb_volume_delete_for(&ctx, vol), -1);
    assert_int_equal(ctx.err_status, 400);
    assert_non_null(strstr(ctx.err_msg, "have snapshots"));
    set_status(clone, "in-use");
    admin_ctx(&ctx);
    assert_int_equal(nb_volume_delete_for(&ctx, clone), -1);
    assert_int_equal(ctx.err_status, 400);
    set_status(clone, "available");

    /* set_format: only raw or qcow2 */
    admin_ctx(&ctx);
    assert_int_equal(nb_volume_set_format(env.db, &ctx, vol, "vmdk"), -1);
    assert_int_equal(ctx.err_status, 400);
    admin_ctx(&ctx);
    assert_int_equal(nb_volume_set_format(env.db, &ctx, vol, "raw"), 0);
    assert_format(vol, "raw");
    /* inside a caller's transaction it joins it: the caller's rollback
     * drops the change, its commit keeps it */
    admin_ctx(&ctx);
    assert_int_equal(nb_db_begin(env.db, &ctx), 0);
    assert_int_equal(nb_volume_set_format(env.db, &ctx, vol, "qcow2"), 0);
    assert_format(vol, "qcow2");
    nb_db_rollback(env.db);
    assert_format(vol, "raw");
    assert_int_equal(nb_db_begin(env.db, &ctx), 0);
    assert_int_equal(nb_volume_set_format(env.db, &ctx, vol, "qcow2"), 0);
    assert_int_equal(nb_db_commit(env.db, &ctx), 0);
    char *f = nb_volume_format(env.db, &ctx, vol);
    assert_string_equal(f, "qcow2");
    free(f);
    /* NULL clears it (one key, replaced in place, never duplicated) */
    assert_int_equal(nb_db_int(env.db, &ctx, -1,
                               "SELECT COUNT(*) FROM volume_admin_metadata WHERE volume_id = ? "
                               "AND key = 'format'",
                               "s", vol),
                     1);
    assert_int_equal(nb_volume_set_format(env.db, &ctx, vol, NULL), 0);
    assert_null(nb_volume_format(env.db, &ctx, vol));
    assert_int_equal(ctx.err_status, 0);
    assert_int_equal(nb_volume_set_format(env.db, &ctx, vol, "raw"), 0);
    assert_format(vol, "raw");
    /* an unknown volume: 404, nothing written */
    assert_int_equal(nb_volume_set_format(env.db, &ctx, "no-such-volume", "raw"), -1);
    assert_int_equal(ctx.err_status, 404);

    /* the volume's delete removes every file, the copy included */
    admin_ctx(&ctx);
    assert_int_equal(
        nb_db_exec(env.db, &ctx, "UPDATE snapshots SET deleted = 1 WHERE volume_id = ?", "s", vol),
        2);
    /* base, copy, overlay, .info */
    assert_int_equal(count_files(vol), 4);
    assert_int_equal(nb_volume_delete_for(&ctx, vol), 0);
    assert_int_equal(count_files(vol), 0);
    assert_int_equal(nb_volume_delete_for(&ctx, clone), 0);
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
        cmocka_unit_test(test_next_status),
        cmocka_unit_test(test_transitions_db),
        cmocka_unit_test(test_visibility),
        cmocka_unit_test(test_status_path),
        cmocka_unit_test(test_attachment_lifecycle),
        cmocka_unit_test(test_attachment_reserve_rules),
        cmocka_unit_test(test_mount_point_naming),
        cmocka_unit_test(test_backend_files),
        cmocka_unit_test(test_share_eligible),
        cmocka_unit_test(test_message_text),
        cmocka_unit_test(test_create_for_and_free_space),
        cmocka_unit_test(test_snapshot_for_in_use),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
