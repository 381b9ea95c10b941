/* configdrive.c - the config drive: the metadata documents (documents.c)
 * written into a private temporary directory, made into an ISO 9660 image
 * labelled config-2 by genisoimage with Nova's own flags (Joliet and Rock
 * Ridge, so cloud-init finds openstack/latest/meta_data.json), and the
 * directory removed whatever happened. genisoimage runs without a shell;
 * its stderr becomes the error message when it fails. */
#include "compute/metadata/metadata.h"
#include "compute/metadata/internal.h"

#include "common/proc.h"
#include "common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Writes data[len] to dir/path (0644), making the parents. nb_md_file_fn. */
static int write_doc(void *opaque, struct nb_ctx *ctx, const char *path, const char *data,
                     size_t len)
{
    const char *dir = opaque;
    char full[PATH_MAX];
    snprintf(full, sizeof(full), "%s/%s", dir, path);
    char *slash = strrchr(full, '/');
    *slash = '\0';
    int rc = nb_mkdir_p(full);
    *slash = '/';
    int fd = rc < 0 ? -1 : open(full, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    size_t off = 0;
    while (fd >= 0 && off < len) {
        ssize_t w = write(fd, data + off, len - off);
        if (w < 0 && errno != EINTR)
            break;
        off += w > 0 ? (size_t)w : 0;
    }
    int err = errno;
    if (fd < 0 || off < len || close(fd) < 0)
        return nb_error(ctx, 500, NULL, "Cannot write the config drive file %s: %s", full,
                        strerror(off < len ? err : errno));
    return 0;
}

/* Runs genisoimage on dir. 0, or -1 after nb_error with its message. */
static int make_iso(struct nb_ctx *ctx, const char *dir, const char *iso_path)
{
    const char *const argv[] = {"genisoimage",
                                "-o",
                                iso_path,
                                "-ldots",
                                "-allow-lowercase",
                                "-allow-multidot",
                                "-l",
                                "-publisher",
                                "nubo",
                                "-quiet",
                                "-J",
                                "-r",
                                "-V",
                                "config-2",
                                dir,
                                NULL};
    char out[2048];
    int st = nb_run(argv, out, sizeof(out), 120);
    if (st == 0)
        return 0;
    if (st == 127)
        return nb_error(ctx, 500, NULL, "genisoimage not found: install the genisoimage package");
    if (st > 128)
        return nb_error(ctx, 500, NULL, "genisoimage was killed by signal %d: %s", st - 128, out);
    return nb_error(ctx, 500, NULL, "genisoimage failed with exit code %d: %s", st, out);
}

int nb_configdrive_build(struct nb_ctx *ctx, const json_t *inst, const json_t *nics,
                         const char *iso_path)
{
    const char *tmp = getenv("TMPDIR");
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/nubo-configdrive-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) /* mode 0700: the documents hold the user data */
        return nb_error(ctx, 500, NULL, "Cannot create a directory for the config drive: %s",
                        strerror(errno));
    int rc = nb_md_files(ctx, inst, nics, write_doc, dir);
    if (rc == 0 && (rc = make_iso(ctx, dir, iso_path)) < 0)
        unlink(iso_path); /* no half-written drive left behind */
    if (rc == 0 && chmod(iso_path, 0644) < 0)
        rc = nb_error(ctx, 500, NULL, "Cannot set the mode of %s: %s", iso_path, strerror(errno));
    if (nb_rm_rf(dir) < 0 && rc == 0)
        rc = nb_error(ctx, 500, NULL, "Cannot remove the config drive directory %s: %s", dir,
                      strerror(errno));
    return rc;
}
