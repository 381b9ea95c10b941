/* backend_nfs.c - the NFS-style shared-file volume backend, laid out as
 * Cinder's NFS driver lays out its shares.
 *
 * [volume] shares is a comma list of share strings ("host:/export" or a
 * local directory; default one share, <state_path>/volumes-share). Each
 * share is reached through <mount base>/<md5 hex of the share string>/
 * (base [volume] nfs_mount_point_base, default <state_path>/mnt), and each
 * volume is the file volume-<uuid> there, raw or qcow2 by
 * [volume] volume_format (default raw, as nfs_qcow2_volumes = False).
 *
 * nubo mounts nothing: a share that is an absolute local path is made
 * available by making <base>/<hash> a symlink to that directory (created if
 * missing), so `ls <state>/mnt/<hash>/volume-<uuid>` and `qemu-img info` on
 * it work as on a Cinder host. A "host:/export" share would need an NFS
 * mount; it is refused at start with a logged error and not used.
 *
 * Snapshots follow the NFS driver's snapshot layout: taking one creates the
 * qcow2 overlay volume-<uuid>.<snapshot-uuid> on top of the active file,
 * which becomes the new active file; the snapshot's data is the overlay's
 * backing file, now read-only. Deleting a snapshot commits its overlay into
 * that backing file and re-points the next overlay at it. The chain is kept
 * in the database (snapshots.provider_location), and mirrored for operators
 * in volume-<uuid>.info as Cinder does.
 *
 * A snapshot of an in-use volume cannot add an overlay (the guest holds the
 * active file open): it is a standalone copy, volume-<uuid>.<snapshot-uuid>
 * converted with `qemu-img convert -U` from the active file (see
 * snapshots.c for how the two kinds are told apart).
 *
 * Room for a new volume is judged as Cinder's NFS driver does with
 * nfs_sparsed_volumes = true (its default, and what nubo's sparse raw and
 * qcow2 files are): a share may be provisioned up to its size times
 * [volume] max_over_subscription_ratio (20.0), "provisioned" being the
 * apparent size of its files, unless it is fuller than
 * 100 - [volume] reserved_percentage (0) percent. With
 * nfs_sparsed_volumes = false only the free space counts.
 *
 * Volume files are private, as Cinder's NFS driver makes them with
 * nas_secure_file_permissions (mode 660): readable and writable by their
 * owner and by QEMU's group (libvirt-qemu, or qemu, when the host has it),
 * by nobody else. Each file is created with that mode before qemu-img
 * writes into it, so no tenant's data is ever world-readable; files an
 * older nubo left 0644 are made private at start. QEMU reaches a volume
 * through that group, or through libvirt's dynamic ownership (the disk
 * chowned to QEMU's user while the guest runs).
 *
 * Every file operation runs under one lock, so two requests cannot edit the
 * same chain at once; conversions of large images hold it for their
 * duration (acceptable while all of this runs inside API requests). */
#include "common/config.h"
#include "common/log.h"
#include "common/proc.h"
#include "common/util.h"
#include "image/format.h"
#include "volume/volume.h"
#include "volume/volume_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <grp.h>
#include <limits.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define MAX_SHARES 16
#define GIB (1024LL * 1024 * 1024)

/* Configuration, set once by nb_vol_backend_init. */
static char mount_base[PATH_MAX];
static char shares[MAX_SHARES][PATH_MAX];
static int nshares;
static pthread_mutex_t backend_lock = PTHREAD_MUTEX_INITIALIZER;
static gid_t qemu_gid = (gid_t)-1; /* QEMU's group, when the host has one */

#define PRIVATE_MODE_GROUP 0660 /* Cinder's secure NFS permissions */
#define PRIVATE_MODE_OWNER 0600 /* no QEMU group: owner only */

/* QEMU's group as libvirt packages name it (Debian, then Fedora/RHEL). */
static void find_qemu_group(void)
{
    static const char *const names[] = {"libvirt-qemu", "qemu"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        struct group *g = getgrnam(names[i]);
        if (g) {
            qemu_gid = g->gr_gid;
            return;
        }
    }
}

/* Gives the open file fd QEMU's group and the private mode (owner-only
 * when the group cannot be set). 0/-1 with errno. */
static int private_fd(int fd)
{
    if (qemu_gid != (gid_t)-1 && fchown(fd, (uid_t)-1, qemu_gid) == 0)
        return fchmod(fd, PRIVATE_MODE_GROUP);
    return fchmod(fd, PRIVATE_MODE_OWNER);
}

/* Creates path empty and private, for qemu-img to write into (it keeps an
 * existing file's mode and owner). 0/-1 with the error recorded. */
static int create_private(struct nb_ctx *ctx, const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0 || private_fd(fd) < 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return nb_error(ctx, 500, NULL, "Cannot create %s: %s", path, strerror(e));
    }
    close(fd);
    return 0;
}

/* Makes the volume files of the share at mnt private that are not (a
 * nubo before this one created them 0644). */
static void tighten_share(const char *mnt)
{
    DIR *d = opendir(mnt);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        struct stat st;
        if (strncmp(e->d_name, "volume-", 7) != 0 ||
            fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) ||
            !(st.st_mode & 0007))
            continue;
        int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd >= 0 && private_fd(fd) == 0)
            NB_WARN("nubo.volume.nfs", NULL, NULL,
                    "Volume file %s/%s was mode %04o (readable by every local user); made "
                    "private",
                    mnt, e->d_name, (unsigned)(st.st_mode & 07777));
        if (fd >= 0)
            close(fd);
    }
    closedir(d);
}

void nb_vol_mount_point(const char *base, const char *share, char *out, size_t n)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    char hex[33] = "";
    if (EVP_Digest(share, strlen(share), md, &mdlen, EVP_md5(), NULL) && mdlen == 16)
        for (unsigned i = 0; i < 16; i++)
            snprintf(hex + 2 * i, 3, "%02x", md[i]);
    snprintf(out, n, "%s/%s", base, hex);
}

void nb_volume_mount_point(const char *base, const char *share, char *out, size_t n)
{
    nb_vol_mount_point(base, share, out, n);
}

const char *nb_vol_mount_base(void)
{
    return mount_base;
}

const char *nb_vol_format(void)
{
    const char *f = nb_conf_str("volume", "volume_format", "raw");
    return strcmp(f, "qcow2") == 0 ? "qcow2" : "raw";
}

/* Makes mnt a symlink to dir, replacing a stale symlink. 0/-1 (logged). */
static int link_share(const char *dir, const char *mnt)
{
    char have[PATH_MAX];
    ssize_t len = readlink(mnt, have, sizeof(have) - 1);
    if (len >= 0) {
        have[len] = '\0';
        if (strcmp(have, dir) == 0)
            return 0;
        unlink(mnt);
    } else if (errno == EINVAL) {
        return 0; /* a real directory: the operator mounted something there */
    }
    if (symlink(dir, mnt) < 0) {
        NB_ERROR("nubo.volume.nfs", NULL, NULL, "Cannot link %s to share %s: %s", mnt, dir,
                 strerror(errno));
        return -1;
    }
    return 0;
}

int nb_vol_backend_init(const char *state_path)
{
    snprintf(mount_base, sizeof(mount_base), "%s",
             nb_conf_str("volume", "nfs_mount_point_base", ""));
    if (!mount_base[0])
        snprintf(mount_base, sizeof(mount_base), "%s/mnt", state_path);
    char def[PATH_MAX];
    snprintf(def, sizeof(def), "%s/volumes-share", state_path);
    char *list = strdup(nb_conf_str("volume", "shares", def)), *save = NULL;
    nshares = 0;
    find_qemu_group();
    if (nb_mkdir_p(mount_base) < 0) {
        NB_ERROR("nubo.volume.nfs", NULL, NULL, "Cannot create %s: %s", mount_base,
                 strerror(errno));
        free(list);
        return -1;
    }
    for (char *s = strtok_r(list, ",", &save); s; s = strtok_r(NULL, ",", &save)) {
        while (*s == ' ')
            s++;
        char *e = s + strlen(s);
        while (e > s && e[-1] == ' ')
            *--e = '\0';
        if (!*s || nshares == MAX_SHARES)
            continue;
        if (s[0] != '/') {
            NB_ERROR("nubo.volume.nfs", NULL, NULL,
                     "Share %s is not a local directory: nubo does not mount NFS exports; "
                     "mount it and list the mounted directory instead. Share not used.",
                     s);
            continue;
        }
        char mnt[PATH_MAX];
        nb_vol_mount_point(mount_base, s, mnt, sizeof(mnt));
        if (nb_mkdir_p(s) < 0 || link_share(s, mnt) < 0) {
            NB_ERROR("nubo.volume.nfs", NULL, NULL, "Share %s cannot be used: %s", s,
                     strerror(errno));
            continue;
        }
        nb_strlcpy(shares[nshares++], s, PATH_MAX);
        tighten_share(mnt);
        NB_INFO("nubo.volume.nfs", NULL, NULL, "Share %s available at %s", s, mnt);
    }
    free(list);
    return 0;
}

bool nb_vol_share_eligible(const struct nb_vol_capacity *c, long long size_gb, bool sparse,
                           double ratio, int reserved_percentage, double *available)
{
    double requested = (double)size_gb * GIB;
    if (!sparse)
        ratio = 1.0;
    /* what may still be provisioned: thin, the apparent size (total times
     * the ratio) less what the files already claim; thick, the free space */
    double apparent = c->total * ratio - c->allocated;
    *available = sparse ? apparent : c->available;
    if (*available < 0)
        *available = 0;
    if (c->total <= 0)
        return false;
    double used_ratio = (100.0 - reserved_percentage) / 100.0;
    if ((c->total - c->available) / c->total > used_ratio)
        return false;
    if (*available <= requested)
        return false;
    return c->allocated / c->total < ratio;
}

/* Sizes of the share at mnt: its file system's, and the apparent bytes of
 * the files on it (du -sb --apparent-size --exclude '*snapshot*', as the
 * NFS driver measures what is provisioned). 0/-1. */
static int share_capacity(const char *mnt, struct nb_vol_capacity *c)
{
    struct statvfs sv;
    if (statvfs(mnt, &sv) < 0)
        return -1;
    c->total = (double)sv.f_blocks * sv.f_frsize;
    c->available = (double)sv.f_bavail * sv.f_frsize;
    c->allocated = 0;
    DIR *d = opendir(mnt);
    if (!d)
        return -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        struct stat st;
        if (strstr(e->d_name, "snapshot") ||
            fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
            continue;
        c->allocated += (double)st.st_size;
    }
    closedir(d);
    return 0;
}

const char *nb_vol_pick_share(struct nb_ctx *ctx, long long size_gb)
{
    bool sparse = nb_conf_bool("volume", "nfs_sparsed_volumes", true);
    double ratio = nb_conf_double("volume", "max_over_subscription_ratio", 20.0);
    int reserved = (int)nb_conf_int("volume", "reserved_percentage", 0);
    const char *best = NULL;
    double best_allocated = 0, most_available = -1;
    for (int i = 0; i < nshares; i++) {
        char mnt[PATH_MAX];
        struct nb_vol_capacity c;
        double available;
        nb_vol_mount_point(mount_base, shares[i], mnt, sizeof(mnt));
        if (share_capacity(mnt, &c) < 0)
            continue;
        bool ok = nb_vol_share_eligible(&c, size_gb, sparse, ratio, reserved, &available);
        if (available > most_available)
            most_available = available;
        /* among the eligible shares, the least allocated (as _find_share) */
        if (ok && (!best || c.allocated < best_allocated))
            best = shares[i], best_allocated = c.allocated;
    }
    if (best)
        return best;
    if (most_available < 0)
        nb_error(ctx, 500, NULL,
                 "Could not find any available weighted backend: no usable share (check "
                 "[volume] shares).");
    else
        nb_error(ctx, 400, NULL,
                 "Could not find any available weighted backend: a volume of %lld GiB was "
                 "requested and the shares have %lld GiB available (%s, "
                 "max_over_subscription_ratio %.1f).",
                 size_gb, (long long)(most_available / GIB),
                 sparse ? "sparse volumes" : "thick volumes", sparse ? ratio : 1.0);
    return NULL;
}

void nb_vol_file_path(const char *share, const char *file, char *out, size_t n)
{
    char mnt[PATH_MAX];
    nb_vol_mount_point(mount_base, share, mnt, sizeof(mnt));
    snprintf(out, n, "%s/%s", mnt, file);
}

int nb_vol_detect_format(struct nb_ctx *ctx, const char *path, char *out)
{
    struct nb_format_info fi;
    char err[256];
    if (nb_format_inspect_path(path, &fi, err, sizeof(err)) < 0)
        return nb_error(ctx, 500, NULL, "Cannot read volume file %s: %s", path, err);
    if (strcmp(fi.format, "raw") != 0 && strcmp(fi.format, "qcow2") != 0)
        return nb_error(ctx, 500, NULL, "Volume file %s has unexpected format %s", path, fi.format);
    nb_strlcpy(out, fi.format, 16);
    return 0;
}

/* Runs qemu-img with argv; on failure records 500 with its output. 0/-1. */
static int qemu_img(struct nb_ctx *ctx, const char *const argv[])
{
    char out[2048] = "";
    double timeout = nb_conf_double("volume", "qemu_img_timeout", 3600);
    int rc = nb_run(argv, out, sizeof(out), timeout);
    if (rc == 0)
        return 0;
    size_t n = strlen(out);
    while (n && (out[n - 1] == '\n' || out[n - 1] == ' '))
        out[--n] = '\0';
    NB_ERROR("nubo.volume.nfs", ctx, NULL, "qemu-img %s failed (exit %d): %s", argv[1], rc, out);
    return nb_error(ctx, 500, NULL, "qemu-img %s failed (exit %d): %s", argv[1], rc, out);
}

static void size_arg(long long size_gb, char *out, size_t n)
{
    snprintf(out, n, "%lldG", size_gb);
}

int nb_vol_backend_create(struct nb_ctx *ctx, const char *share, const char *volume_id,
                          long long size_gb)
{
    char path[PATH_MAX + 64], name[64], sz[32];
    snprintf(name, sizeof(name), "volume-%s", volume_id);
    nb_vol_file_path(share, name, path, sizeof(path));
    size_arg(size_gb, sz, sizeof(sz));
    const char *argv[] = {"qemu-img", "create", "-f", nb_vol_format(), path, sz, NULL};
    pthread_mutex_lock(&backend_lock);
    int rc = create_private(ctx, path);
    if (rc == 0 && (rc = qemu_img(ctx, argv)) < 0)
        unlink(path);
    pthread_mutex_unlock(&backend_lock);
    return rc;
}

/* Grows the file at path (format fmt) to size_gb when it is smaller. */
static int grow_to(struct nb_ctx *ctx, const char *path, const char *fmt, long long size_gb)
{
    struct nb_format_info fi;
    char err[256], sz[32];
    if (nb_format_inspect_path(path, &fi, err, sizeof(err)) < 0)
        return nb_error(ctx, 500, NULL, "Cannot read volume file %s: %s", path, err);
    if (fi.virtual_size >= (uint64_t)size_gb * GIB)
        return 0;
    size_arg(size_gb, sz, sizeof(sz));
    const char *argv[] = {"qemu-img", "resize", "-f", fmt, path, sz, NULL};
    return qemu_img(ctx, argv);
}

/* Converts src (format src_fmt, read with -U: a running guest may hold it
 * open) into path through path.part, in format fmt, grown to size_gb when
 * given (> 0) and smaller. No file is left at either name on failure.
 * Called with backend_lock held. */
static int convert_into(struct nb_ctx *ctx, const char *src, const char *src_fmt, const char *fmt,
                        const char *path, long long size_gb)
{
    char part[PATH_MAX + 136];
    snprintf(part, sizeof(part), "%s.part", path);
    const char *argv[] = {"qemu-img", "convert", "-U", "-f", src_fmt, "-O", fmt, src, part, NULL};
    int rc = create_private(ctx, part);
    if (rc == 0)
        rc = qemu_img(ctx, argv);
    if (rc == 0 && size_gb > 0)
        rc = grow_to(ctx, part, fmt, size_gb);
    if (rc == 0 && rename(part, path) < 0)
        rc = nb_error(ctx, 500, NULL, "Cannot rename %s: %s", part, strerror(errno));
    if (rc < 0)
        unlink(part);
    return rc;
}

int nb_vol_backend_create_from(struct nb_ctx *ctx, const char *share, const char *volume_id,
                               const char *src, const char *src_fmt, long long size_gb)
{
    char path[PATH_MAX + 64], name[64];
    snprintf(name, sizeof(name), "volume-%s", volume_id);
    nb_vol_file_path(share, name, path, sizeof(path));
    pthread_mutex_lock(&backend_lock);
    int rc = convert_into(ctx, src, src_fmt, nb_vol_format(), path, size_gb);
    pthread_mutex_unlock(&backend_lock);
    return rc;
}

int nb_vol_backend_copy(struct nb_ctx *ctx, const char *share, const char *active_file,
                        const char *copy_file)
{
    char active[PATH_MAX + 128], path[PATH_MAX + 128], fmt[16];
    nb_vol_file_path(share, active_file, active, sizeof(active));
    nb_vol_file_path(share, copy_file, path, sizeof(path));
    pthread_mutex_lock(&backend_lock);
    int rc = nb_vol_detect_format(ctx, active, fmt);
    if (rc == 0)
        rc = convert_into(ctx, active, fmt, nb_vol_format(), path, 0);
    pthread_mutex_unlock(&backend_lock);
    return rc;
}

int nb_vol_backend_remove(struct nb_ctx *ctx, const char *share, const char *file)
{
    char path[PATH_MAX + 128];
    nb_vol_file_path(share, file, path, sizeof(path));
    pthread_mutex_lock(&backend_lock);
    int rc = 0;
    if (unlink(path) < 0 && errno != ENOENT)
        rc = nb_error(ctx, 500, NULL, "Cannot remove %s: %s", path, strerror(errno));
    pthread_mutex_unlock(&backend_lock);
    return rc;
}

int nb_vol_backend_delete(struct nb_ctx *ctx, const char *share, const char *volume_id)
{
    char pattern[PATH_MAX + 64], name[64];
    snprintf(name, sizeof(name), "volume-%s", volume_id);
    nb_vol_file_path(share, name, pattern, sizeof(pattern));
    int rc = 0;
    pthread_mutex_lock(&backend_lock);
    if (unlink(pattern) < 0 && errno != ENOENT)
        rc = nb_error(ctx, 500, NULL, "Cannot remove %s: %s", pattern, strerror(errno));
    /* overlays, the .info file, a leftover .part */
    nb_strlcpy(pattern + strlen(pattern), ".*", 3);
    glob_t g;
    if (rc == 0 && glob(pattern, 0, NULL, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc && rc == 0; i++)
            if (unlink(g.gl_pathv[i]) < 0 && errno != ENOENT)
                rc = nb_error(ctx, 500, NULL, "Cannot remove %s: %s", g.gl_pathv[i],
                              strerror(errno));
        globfree(&g);
    }
    pthread_mutex_unlock(&backend_lock);
    return rc;
}

int nb_vol_backend_extend(struct nb_ctx *ctx, const char *share, const char *active_file,
                          long long size_gb)
{
    char path[PATH_MAX + 64], fmt[16], sz[32];
    nb_vol_file_path(share, active_file, path, sizeof(path));
    size_arg(size_gb, sz, sizeof(sz));
    pthread_mutex_lock(&backend_lock);
    int rc = nb_vol_detect_format(ctx, path, fmt);
    if (rc == 0) {
        const char *argv[] = {"qemu-img", "resize", "-f", fmt, path, sz, NULL};
        rc = qemu_img(ctx, argv);
    }
    pthread_mutex_unlock(&backend_lock);
    return rc;
}

int nb_vol_backend_snapshot(struct nb_ctx *ctx, const char *share, const char *volume_id,
                            const char *active_file, const char *snapshot_id)
{
    char active[PATH_MAX + 64], path[PATH_MAX + 128], name[128], fmt[16];
    nb_vol_file_path(share, active_file, active, sizeof(active));
    snprintf(name, sizeof(name), "volume-%s.%s", volume_id, snapshot_id);
    nb_vol_file_path(share, name, path, sizeof(path));
    pthread_mutex_lock(&backend_lock);
    int rc = nb_vol_detect_format(ctx, active, fmt);
    if (rc == 0) {
        /* the backing file is named relative to the share, as Cinder does */
        const char *argv[] = {"qemu-img",  "create", "-f", "qcow2", "-b",
                              active_file, "-F",     fmt,  path,    NULL};
        rc = create_private(ctx, path);
        if (rc == 0 && (rc = qemu_img(ctx, argv)) < 0)
            unlink(path);
    }
    pthread_mutex_unlock(&backend_lock);
    return rc;
}

int nb_vol_backend_snapshot_delete(struct nb_ctx *ctx, const char *share, const char *snap_file,
                                   const char *backing_file, const char *higher_file)
{
    char snap[PATH_MAX + 128], backing[PATH_MAX + 128], fmt[16];
    nb_vol_file_path(share, snap_file, snap, sizeof(snap));
    nb_vol_file_path(share, backing_file, backing, sizeof(backing));
    pthread_mutex_lock(&backend_lock);
    const char *commit[] = {"qemu-img", "commit", "-f", "qcow2", snap, NULL};
    int rc = nb_vol_detect_format(ctx, backing, fmt);
    if (rc == 0)
        rc = qemu_img(ctx, commit);
    if (rc == 0 && higher_file) {
        char higher[PATH_MAX + 128];
        nb_vol_file_path(share, higher_file, higher, sizeof(higher));
        /* unsafe rebase: the backing file now holds what snap_file held */
        const char *rebase[] = {"qemu-img",   "rebase", "-u", "-f",   "qcow2", "-b",
                                backing_file, "-F",     fmt,  higher, NULL};
        rc = qemu_img(ctx, rebase);
    }
    if (rc == 0 && unlink(snap) < 0 && errno != ENOENT)
        rc = nb_error(ctx, 500, NULL, "Cannot remove %s: %s", snap, strerror(errno));
    pthread_mutex_unlock(&backend_lock);
    return rc;
}
