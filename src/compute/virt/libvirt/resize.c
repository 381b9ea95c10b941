/* resize.c - cold migration and resize under libvirt, as Nova's libvirt
 * driver does them (migrate_disk_and_power_off, finish_migration,
 * confirm_migration, finish_revert_migration):
 *
 * The source powers the guest off and renames instances/<uuid> to
 * instances/<uuid>_resize, which is what a revert comes back to. The
 * guest's files (disk, disk.info, disk.config, console.log) then reach
 * instances/<uuid> of the destination: by a local copy when both see the
 * same instances path (the same host, or shared storage, found as Nova
 * finds it: a probe file the destination made in the root of its
 * instances path is visible here), else over the migration transport, a
 * libvirt storage-volume upload through the destination's libvirtd (a
 * transient "dir" pool on the destination's instance directory). The
 * destination's copy carries a marker (resize.dest) until
 * finish_migration, so that a failed move removes only what it brought.
 *
 * finish_migration rebases a qcow2 overlay onto the destination's own
 * image cache (prep_resize fetched the base there), grows the root disk
 * to the new flavor's root_gb, and defines the domain from the database
 * state (the new flavor) - started unless the guest was off. confirm
 * removes <uuid>_resize and the source's domain; revert removes the
 * destination's guest and copy, renames <uuid>_resize back and defines
 * the old guest again (old flavor). */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/proc.h"
#include "common/util.h"
#include "compute/virt/libvirt/lv.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MARKER "resize.dest"

/* The files of an instance directory a move carries (the marker first). */
static const char *const moved_files[] = {"disk", "disk.info", "disk.config", "console.log", NULL};

static int tool(struct nb_ctx *ctx, const char *const argv[])
{
    char out[2048];
    int st = nb_run(argv, out, sizeof(out), 600);
    if (st == 0)
        return 0;
    size_t n = strlen(out);
    while (n && (out[n - 1] == '\n' || out[n - 1] == ' '))
        out[--n] = '\0';
    return nb_error(ctx, 500, NULL, "%s failed (exit %d): %s", argv[0], st, out);
}

static bool exists(const char *path)
{
    return access(path, F_OK) == 0;
}

/* instances/<uuid> and instances/<uuid>_resize. */
static void dirs(const struct lv *lv, const char *uuid, char dir[LV_PATH_MAX],
                 char bak[LV_PATH_MAX + 8])
{
    lv_instance_dir(lv, uuid, dir, LV_PATH_MAX);
    snprintf(bak, LV_PATH_MAX + 8, "%s_resize", dir);
}

json_t *lv_prep_resize(struct lv *lv, struct nb_ctx *ctx, json_t *inst, bool same_host)
{
    const char *uuid = nb_json_str(inst, "uuid");
    if (!uuid || !nb_is_uuid(uuid)) {
        nb_error(ctx, 400, NULL, "prep_resize: the instance has no valid UUID");
        return NULL;
    }
    char probe[96], path[LV_PATH_MAX + 100];
    /* where the source reaches this host's libvirtd: the live migrations'
     * URI ([libvirt] live_migration_scheme / _inbound_addr / _uri) */
    _cleanup_json_ json_t *info = lv_migration_info(lv, ctx);
    if (!info)
        return NULL;
    snprintf(probe, sizeof(probe), ".nubo-resize-probe-%s", uuid);
    if (!same_host) {
        virDomainPtr dom = lv_lookup(lv, ctx, uuid, false);
        if (dom) {
            virDomainFree(dom);
            nb_error(ctx, 409, NULL, "Instance %s already exists on host %s.", uuid, lv->host);
            return NULL;
        }
        if (nb_ctx_failed(ctx))
            return NULL;
        snprintf(path, sizeof(path), "%s/%s", lv->instances_path, probe);
        if (nb_write_file(path, "", 0, 0644) < 0) {
            nb_error(ctx, 500, NULL, "cannot write %s: %s", path, strerror(errno));
            return NULL;
        }
        const char *image = nb_json_str(inst, "image_ref");
        struct lv_base base;
        if (image && *image) { /* the overlay's base, in this host's cache */
            if (lv_cache_fetch(lv, ctx, image, &base) < 0) {
                unlink(path);
                return NULL;
            }
            lv_cache_unpin(lv, &base);
        }
    }
    return json_pack("{s:s?, s:s, s:s}", "uri", nb_json_str(info, "uri"), "instances_path",
                     lv->instances_path, "probe", probe);
}

/* Copies the guest's files of bak into dir (the same filesystem: same host
 * or shared storage), the marker first. 0/-1. */
static int copy_local(struct nb_ctx *ctx, const char *bak, const char *dir)
{
    char path[LV_PATH_MAX + 32], from[LV_PATH_MAX + 32];
    if (nb_mkdir_p(dir) < 0 || chmod(dir, 0755) < 0)
        return nb_error(ctx, 500, NULL, "cannot create %s: %s", dir, strerror(errno));
    snprintf(path, sizeof(path), "%s/" MARKER, dir);
    if (nb_write_file(path, "", 0, 0644) < 0)
        return nb_error(ctx, 500, NULL, "cannot write %s: %s", path, strerror(errno));
    for (int i = 0; moved_files[i]; i++) {
        snprintf(from, sizeof(from), "%s/%s", bak, moved_files[i]);
        snprintf(path, sizeof(path), "%s/%s", dir, moved_files[i]);
        if (!exists(from))
            continue;
        const char *argv[] = {"cp", "--sparse=always", "--reflink=auto", from, path, NULL};
        if (tool(ctx, argv) < 0)
            return -1;
    }
    return 0;
}

/* The sparse stream's callbacks over a file descriptor (as virsh's
 * vol-upload --sparse): data read from the file, holes found with
 * SEEK_DATA / SEEK_HOLE and skipped, so a sparse disk travels as its
 * data. */
static int src_read(virStreamPtr st, char *data, size_t nbytes, void *opaque)
{
    (void)st;
    return (int)read(*(int *)opaque, data, nbytes);
}

static int src_in_data(virStreamPtr st, int *in_data, long long *length, void *opaque)
{
    (void)st;
    int fd = *(int *)opaque;
    off_t cur = lseek(fd, 0, SEEK_CUR), end = lseek(fd, 0, SEEK_END);
    if (cur < 0 || end < 0 || lseek(fd, cur, SEEK_SET) < 0)
        return -1;
    off_t data = lseek(fd, cur, SEEK_DATA);
    if (data < 0 && errno != ENXIO)
        return -1;
    if (data < 0 || data > cur) { /* a hole up to the next data (or the end) */
        *in_data = 0;
        *length = (data < 0 ? end : data) - cur;
    } else {
        off_t hole = lseek(fd, cur, SEEK_HOLE);
        if (hole < 0)
            return -1;
        *in_data = 1;
        *length = hole - cur;
    }
    return lseek(fd, cur, SEEK_SET) < 0 ? -1 : 0;
}

static int src_skip(virStreamPtr st, long long length, void *opaque)
{
    (void)st;
    return lseek(*(int *)opaque, (off_t)length, SEEK_CUR) < 0 ? -1 : 0;
}

/* Streams the file at path into vol, sparse. 0/-1. */
static int upload_one(struct nb_ctx *ctx, virConnectPtr dconn, virStorageVolPtr vol,
                      const char *path, long long size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return nb_error(ctx, 500, NULL, "cannot read %s: %s", path, strerror(errno));
    virStreamPtr st = virStreamNew(dconn, 0);
    int rc = st && virStorageVolUpload(vol, st, 0, (unsigned long long)size,
                                       VIR_STORAGE_VOL_UPLOAD_SPARSE_STREAM) == 0
                 ? 0
                 : -1;
    if (rc < 0)
        lv_error(ctx, 500, "cannot start the upload of %s", path);
    if (rc == 0 && virStreamSparseSendAll(st, src_read, src_in_data, src_skip, &fd) < 0)
        rc = lv_error(ctx, 500, "upload of %s failed", path);
    if (rc == 0 && virStreamFinish(st) < 0)
        rc = lv_error(ctx, 500, "upload of %s failed at its end", path);
    else if (rc < 0 && st)
        virStreamAbort(st);
    if (st)
        virStreamFree(st);
    close(fd);
    return rc;
}

/* One file of bak as volume name of pool. 0/-1. */
static int upload_file(struct nb_ctx *ctx, virConnectPtr dconn, virStoragePoolPtr pool,
                       const char *bak, const char *name)
{
    char path[LV_PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/%s", bak, name);
    struct stat stt;
    long long size = 0;
    if (strcmp(name, MARKER)) {
        if (stat(path, &stt) < 0)
            return 0; /* a file this guest does not have */
        size = (long long)stt.st_size;
    }
    virStorageVolPtr old = virStorageVolLookupByName(pool, name);
    if (old) {
        virStorageVolDelete(old, 0);
        virStorageVolFree(old);
    }
    char xml[512];
    snprintf(xml, sizeof(xml),
             "<volume><name>%s</name><capacity unit='bytes'>%lld</capacity><allocation "
             "unit='bytes'>0</allocation><target><format "
             "type='raw'/><permissions><mode>0644</mode></permissions></target></volume>",
             name, size);
    virStorageVolPtr vol = virStorageVolCreateXML(pool, xml, 0);
    if (!vol)
        return lv_error(ctx, 500, "cannot create %s on the destination", name);
    int rc = size > 0 ? upload_one(ctx, dconn, vol, path, size) : 0;
    virStorageVolFree(vol);
    return rc;
}

/* Sends the guest's files of bak to the destination's instance directory
 * (dest_dir) through its libvirtd at uri: a transient dir pool there, a
 * volume upload per file, the marker first. 0/-1. */
static int upload(struct lv *lv, struct nb_ctx *ctx, const char *uuid, const char *uri,
                  const char *dest_dir, const char *bak)
{
    virConnectPtr dconn = virConnectOpen(uri);
    if (!dconn)
        return lv_error(ctx, 503, "cannot reach the destination's libvirtd at %s", uri);
    char xml[LV_PATH_MAX + 256];
    snprintf(xml, sizeof(xml),
             "<pool type='dir'><name>nubo-resize-%.8s</name><target><path>%s</path>"
             "<permissions><mode>0755</mode></permissions></target></pool>",
             uuid, dest_dir);
    virStoragePoolPtr pool =
        virStoragePoolCreateXML(dconn, xml, VIR_STORAGE_POOL_CREATE_WITH_BUILD);
    int rc = pool ? 0 : lv_error(ctx, 500, "cannot open %s on the destination (%s)", dest_dir, uri);
    double t0 = nb_time_mono();
    if (rc == 0)
        rc = upload_file(ctx, dconn, pool, bak, MARKER);
    for (int i = 0; rc == 0 && moved_files[i]; i++)
        rc = upload_file(ctx, dconn, pool, bak, moved_files[i]);
    if (pool) {
        virStoragePoolDestroy(pool); /* transient: gone, its files stay */
        virStoragePoolFree(pool);
    }
    virConnectClose(dconn);
    if (rc == 0)
        NB_INFO(LV_LOG, ctx, uuid, "Disks of the instance sent to %s:%s in %.2f s", uri, dest_dir,
                nb_time_mono() - t0);
    (void)lv;
    return rc;
}

int lv_migrate_disk_and_power_off(struct lv *lv, struct nb_ctx *ctx, json_t *inst,
                                  const json_t *dest, bool same_host, int timeout_s)
{
    const char *uuid = nb_json_str(inst, "uuid");
    char dir[LV_PATH_MAX], bak[LV_PATH_MAX + 8], probe[LV_PATH_MAX + 100];
    if (!uuid || !nb_is_uuid(uuid))
        return nb_error(ctx, 400, NULL, "resize: the instance has no valid UUID");
    dirs(lv, uuid, dir, bak);
    snprintf(probe, sizeof(probe), "%s/%s", lv->instances_path,
             nb_json_str(dest, "probe") ? nb_json_str(dest, "probe") : "-");
    bool shared = same_host || exists(probe);
    if (!shared && !nb_json_str(dest, "uri"))
        return nb_error(ctx, 500, NULL,
                        "The destination of instance %s gave no URI to send its disks to", uuid);
    if (lv_power_off(lv, ctx, inst, timeout_s) < 0)
        return -1;
    if (exists(bak) && nb_rm_rf(bak) < 0)
        return nb_error(ctx, 500, NULL, "cannot remove %s: %s", bak, strerror(errno));
    if (rename(dir, bak) < 0)
        return nb_error(ctx, 500, NULL, "cannot move %s to %s: %s", dir, bak, strerror(errno));
    int rc;
    if (shared) {
        rc = copy_local(ctx, bak, dir);
    } else {
        char dest_dir[LV_PATH_MAX + 64];
        snprintf(dest_dir, sizeof(dest_dir), "%s/%s",
                 nb_json_str(dest, "instances_path") ? nb_json_str(dest, "instances_path")
                                                     : lv->instances_path,
                 uuid);
        rc = upload(lv, ctx, uuid, nb_json_str(dest, "uri"), dest_dir, bak);
    }
    if (rc < 0) { /* the source as it was: its directory back */
        if (shared)
            nb_rm_rf(dir);
        if (rename(bak, dir) < 0)
            NB_ERROR(LV_LOG, ctx, uuid, "cannot move %s back to %s: %s", bak, dir, strerror(errno));
        return -1;
    }
    NB_INFO(LV_LOG, ctx, uuid, "Instance powered off and its disks %s (originals kept in %s)",
            same_host ? "copied on this host"
            : shared  ? "copied on the shared instances path"
                      : "sent to the destination",
            bak);
    return 0;
}

/* The guest's domain defined from the database state (inst), without
 * starting it. 0/-1. */
static int define_only(struct lv *lv, struct nb_ctx *ctx, const json_t *inst)
{
    struct lv_volumes vols;
    char virt_type[16];
    struct lv_cpu cpu;
    if (lv_volumes_collect(lv, ctx, inst, &vols) < 0 ||
        lv_current_virt(lv, ctx, virt_type, &cpu) < 0)
        return -1;
    _cleanup_free_ char *xml = lv_instance_xml(lv, ctx, inst, &vols, virt_type, &cpu);
    virConnectPtr conn = xml ? lv_conn(lv, ctx) : NULL;
    if (!conn)
        return -1;
    virDomainPtr dom = virDomainDefineXML(conn, xml);
    if (!dom)
        return lv_error(ctx, 500, "cannot define the domain of instance %s",
                        nb_json_str(inst, "uuid"));
    virDomainFree(dom);
    return 0;
}

/* The guest on this host's disks with inst's flavor: defined, and started
 * when power_on (a start redefines it from the database, as every start). */
static int bring_up(struct lv *lv, struct nb_ctx *ctx, json_t *inst, bool power_on)
{
    return power_on ? lv_power_on(lv, ctx, inst) : define_only(lv, ctx, inst);
}

/* A qcow2 overlay rebased (unsafe: the same data) onto this host's cached
 * base, and the local root disk grown to root_gb. 0/-1. */
static int adapt_disk(struct lv *lv, struct nb_ctx *ctx, const char *dir, long long root_gb)
{
    _cleanup_json_ json_t *di = lv_read_disk_info(dir);
    if (!di || json_is_true(json_object_get(di, "boot_from_volume")))
        return 0;
    char disk[LV_PATH_MAX + 8], base[LV_PATH_MAX + 64], size[32];
    snprintf(disk, sizeof(disk), "%s/disk", dir);
    const char *fmt = nb_json_str(di, "disk_format") ? nb_json_str(di, "disk_format") : "qcow2";
    const char *name = nb_json_str(di, "base");
    if (!strcmp(fmt, "qcow2") && name) {
        snprintf(base, sizeof(base), "%s/_base/%s", lv->instances_path, name);
        const char *bfmt = nb_json_str(di, "base_format") ? nb_json_str(di, "base_format") : "raw";
        const char *argv[] = {"qemu-img", "rebase", "-q", "-u", "-f", fmt,
                              "-b",       base,     "-F", bfmt, disk, NULL};
        if (tool(ctx, argv) < 0)
            return -1;
    }
    if (root_gb <= 0)
        return 0;
    char info[4096];
    const char *q[] = {"qemu-img", "info", "--output=json", "-f", fmt, disk, NULL};
    if (nb_run(q, info, sizeof(info), 60) != 0)
        return nb_error(ctx, 500, NULL, "qemu-img info %s failed: %s", disk, info);
    _cleanup_json_ json_t *j = nb_json_parse(info);
    long long vsize = nb_json_int(j, "virtual-size", 0);
    if (vsize >= root_gb << 30)
        return 0;
    snprintf(size, sizeof(size), "%lld", root_gb << 30);
    const char *grow[] = {"qemu-img", "resize", "-q", "-f", fmt, disk, size, NULL};
    if (tool(ctx, grow) < 0)
        return -1;
    NB_INFO(LV_LOG, NULL, NULL, "%s grown from %lld to %lld bytes", disk, vsize, root_gb << 30);
    return 0;
}

int lv_finish_migration(struct lv *lv, struct nb_ctx *ctx, json_t *inst, bool same_host,
                        bool power_on)
{
    const char *uuid = nb_json_str(inst, "uuid");
    char dir[LV_PATH_MAX], bak[LV_PATH_MAX + 8], path[LV_PATH_MAX + 100];
    dirs(lv, uuid, dir, bak);
    snprintf(path, sizeof(path), "%s/.nubo-resize-probe-%s", lv->instances_path, uuid);
    unlink(path);
    snprintf(path, sizeof(path), "%s/disk.info", dir);
    if (!exists(path))
        return nb_error(ctx, 500, NULL,
                        "The disks of instance %s did not arrive on host %s (%s is missing)", uuid,
                        lv->host, path);
    if (chmod(dir, 0755) < 0)
        return nb_error(ctx, 500, NULL, "cannot open %s to QEMU: %s", dir, strerror(errno));
    long long root_gb = nb_json_int(json_object_get(inst, "flavor"), "root_gb", 0);
    if (adapt_disk(lv, ctx, dir, root_gb) < 0 || bring_up(lv, ctx, inst, power_on) < 0)
        return -1;
    snprintf(path, sizeof(path), "%s/" MARKER, dir);
    unlink(path);
    (void)same_host;
    return 0;
}

/* Stops and undefines the domain of uuid on this host (none: fine). */
static int forget_domain(struct lv *lv, struct nb_ctx *ctx, const char *uuid, bool *had)
{
    virDomainPtr dom = lv_lookup(lv, ctx, uuid, false);
    *had = dom != NULL;
    if (!dom)
        return nb_ctx_failed(ctx) ? -1 : 0;
    int rc = 0;
    if (virDomainIsActive(dom) == 1 && virDomainDestroy(dom) < 0 && virDomainIsActive(dom) == 1)
        rc = lv_error(ctx, 500, "cannot stop the domain of instance %s", uuid);
    if (rc == 0 &&
        virDomainUndefineFlags(dom, VIR_DOMAIN_UNDEFINE_MANAGED_SAVE |
                                        VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA |
                                        VIR_DOMAIN_UNDEFINE_NVRAM) < 0 &&
        virDomainUndefine(dom) < 0)
        rc = lv_error(ctx, 500, "cannot undefine the domain of instance %s", uuid);
    virDomainFree(dom);
    return rc;
}

int lv_confirm_migration(struct lv *lv, struct nb_ctx *ctx, json_t *inst, bool same_host)
{
    const char *uuid = nb_json_str(inst, "uuid");
    char dir[LV_PATH_MAX], bak[LV_PATH_MAX + 8];
    dirs(lv, uuid, dir, bak);
    bool had = false;
    if (!same_host && forget_domain(lv, ctx, uuid, &had) < 0)
        return -1;
    if (nb_rm_rf(bak) < 0)
        return nb_error(ctx, 500, NULL, "cannot remove %s: %s", bak, strerror(errno));
    NB_INFO(LV_LOG, ctx, uuid, "Deleting instance files %s", bak);
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    lv_cache_cleanup(lv, &sub);
    return 0;
}

int lv_revert_migration(struct lv *lv, struct nb_ctx *ctx, json_t *inst, bool same_host)
{
    const char *uuid = nb_json_str(inst, "uuid");
    char dir[LV_PATH_MAX], bak[LV_PATH_MAX + 8], marker[LV_PATH_MAX + 32], probe[LV_PATH_MAX + 100];
    dirs(lv, uuid, dir, bak);
    snprintf(probe, sizeof(probe), "%s/.nubo-resize-probe-%s", lv->instances_path, uuid);
    unlink(probe);
    if (same_host && !exists(bak)) /* nothing of the move here: the guest's own files stay */
        return 0;
    snprintf(marker, sizeof(marker), "%s/" MARKER, dir);
    bool brought = exists(marker);
    bool had = false;
    if (forget_domain(lv, ctx, uuid, &had) < 0)
        return -1;
    if ((brought || had || same_host) && nb_rm_rf(dir) < 0)
        return nb_error(ctx, 500, NULL, "cannot remove %s: %s", dir, strerror(errno));
    return 0;
}

int lv_finish_revert_migration(struct lv *lv, struct nb_ctx *ctx, json_t *inst, bool same_host,
                               bool power_on)
{
    const char *uuid = nb_json_str(inst, "uuid");
    char dir[LV_PATH_MAX], bak[LV_PATH_MAX + 8];
    dirs(lv, uuid, dir, bak);
    (void)same_host;
    if (exists(bak)) {
        if (exists(dir) && nb_rm_rf(dir) < 0)
            return nb_error(ctx, 500, NULL, "cannot remove %s: %s", dir, strerror(errno));
        if (rename(bak, dir) < 0)
            return nb_error(ctx, 500, NULL, "cannot move %s back to %s: %s", bak, dir,
                            strerror(errno));
    } else if (!exists(dir)) {
        return nb_error(ctx, 500, NULL,
                        "The disks of instance %s are gone from host %s (neither %s nor %s)", uuid,
                        lv->host, bak, dir);
    }
    return bring_up(lv, ctx, inst, power_on);
}
