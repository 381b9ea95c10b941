/* imagecache.c - instances/_base, Nova's image cache.
 *
 * An image is fetched from the image service (through the image source
 * the agent gives the driver, nb_virt_image_source) once per host into
 * _base/<sha1 of the image ID> (Nova's naming), through a .part file whose
 * sha512 must equal the image's os_hash_value before it is renamed into
 * place; a sidecar <name>.info records the image ID, the hash and the real
 * format found by the format inspector (what the file is, not what the
 * image record says). A cached file whose sidecar no longer matches the
 * image's hash is fetched again.
 *
 * Instance disks are qcow2 overlays on the base (backing format given
 * explicitly, so QEMU never probes) or raw copies ([libvirt] images_type).
 * A base is in use while an instance's disk.info names it; unused bases
 * older than [image_cache] remove_unused_original_minimum_age_seconds
 * (Nova's option, default 86400) are removed after each delete. */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/proc.h"
#include "common/util.h"
#include "compute/virt/libvirt/lv.h"
#include "image/format.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void base_name(const char *image_id, char out[41])
{
    unsigned char md[SHA_DIGEST_LENGTH];
    SHA1((const unsigned char *)image_id, strlen(image_id), md);
    for (int i = 0; i < SHA_DIGEST_LENGTH; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

/* The sidecar of a cached base, if it matches hash. */
static json_t *cached_info(const char *info_path, const char *hash)
{
    _cleanup_free_ char *text = nb_read_file(info_path, NULL);
    json_t *j = text ? nb_json_parse(text) : NULL;
    const char *h = nb_json_str(j, "os_hash_value");
    if (!j || !h || !hash || strcmp(h, hash) != 0) {
        json_decref(j);
        return NULL;
    }
    return j;
}

int lv_cache_fetch(struct lv *lv, struct nb_ctx *ctx, const char *image_id, struct lv_base *base)
{
    if (!image_id || !*image_id)
        return nb_error(ctx, 400, NULL, "The instance has no image to boot from");
    const struct nb_virt_image_source *src = __atomic_load_n(&lv->images, __ATOMIC_ACQUIRE);
    if (!src)
        return nb_error(ctx, 500, NULL, "The libvirt driver has no image source");
    _cleanup_json_ json_t *info = src->show(ctx, image_id);
    if (!info)
        return -1;
    const char *want = nb_json_str(info, "os_hash_value");
    if (!want || strcmp(nb_json_str(info, "os_hash_algo") ? nb_json_str(info, "os_hash_algo") : "",
                        "sha512") != 0) {
        return nb_error(ctx, 500, NULL,
                        "Image %s has no sha512 os_hash_value: its data cannot be verified",
                        image_id);
    }
    char name[41], path[LV_PATH_MAX + 64], part[LV_PATH_MAX + 72], info_path[LV_PATH_MAX + 72];
    base_name(image_id, name);
    snprintf(path, sizeof(path), "%s/_base/%s", lv->instances_path, name);
    snprintf(part, sizeof(part), "%s.part", path);
    snprintf(info_path, sizeof(info_path), "%s.info", path);

    pthread_mutex_lock(&lv->cache_lock);
    int rc = 0;
    _cleanup_json_ json_t *have = access(path, F_OK) == 0 ? cached_info(info_path, want) : NULL;
    if (!have) {
        double t0 = nb_time_mono();
        char got[129] = "";
        rc = src->download(ctx, image_id, part, got);
        if (rc == 0 && strcmp(got, want) != 0)
            rc = nb_error(ctx, 500, NULL,
                          "Image %s fetched from the image service does not match its "
                          "os_hash_value (sha512 %s, expected %s): not used",
                          image_id, got, want);
        struct nb_format_info fi;
        char err[512] = "";
        if (rc == 0 && nb_format_inspect_path(part, &fi, err, sizeof(err)) < 0)
            rc = nb_error(ctx, 500, NULL, "cannot inspect image %s: %s", image_id, err);
        char why[512];
        if (rc == 0 && nb_format_check_safe(&fi, why, sizeof(why)) < 0)
            rc = nb_error(ctx, 500, NULL, "Image %s is unsafe to use: %s", image_id, why);
        if (rc == 0 && strcmp(fi.format, "raw") != 0 && strcmp(fi.format, "qcow2") != 0)
            rc = nb_error(ctx, 500, NULL,
                          "Image %s is %s: only raw and qcow2 images can back instance disks",
                          image_id, fi.format);
        if (rc == 0) {
            have = json_pack("{s:s, s:s, s:s, s:I, s:s?}", "image_id", image_id, "os_hash_value",
                             want, "format", fi.format, "virtual_size", (json_int_t)fi.virtual_size,
                             "disk_format", nb_json_str(info, "disk_format"));
            _cleanup_free_ char *text = nb_json_dump(have);
            if (nb_write_file(info_path, text, strlen(text), 0644) < 0 || rename(part, path) < 0)
                rc = nb_error(ctx, 500, NULL, "cannot store %s: %s", path, strerror(errno));
        }
        if (rc < 0)
            unlink(part);
        else
            NB_INFO(LV_LOG, ctx, NULL,
                    "Image %s fetched into the cache as %s (%s, %lld bytes, sha512 verified) "
                    "in %.2f seconds",
                    image_id, path, nb_json_str(have, "format"), nb_json_int(info, "size", 0),
                    nb_time_mono() - t0);
    } else {
        /* in use again: refresh the age used by the cleanup */
        utimensat(AT_FDCWD, path, NULL, 0);
    }
    if (rc == 0) {
        /* pinned until the caller's disk.info names it (lv_cache_unpin) */
        json_object_set_new(lv->cache_pins, name,
                            json_integer(nb_json_int(lv->cache_pins, name, 0) + 1));
        nb_strlcpy(base->path, path, sizeof(base->path));
        nb_strlcpy(base->format, nb_json_str(have, "format"), sizeof(base->format));
        base->virtual_size = (unsigned long long)nb_json_int(have, "virtual_size", 0);
    }
    pthread_mutex_unlock(&lv->cache_lock);
    return rc;
}

static int run_tool(struct nb_ctx *ctx, const char *const argv[])
{
    char out[2048];
    int st = nb_run(argv, out, sizeof(out), 300);
    if (st == 0)
        return 0;
    size_t n = strlen(out);
    while (n && (out[n - 1] == '\n' || out[n - 1] == ' '))
        out[--n] = '\0';
    return nb_error(ctx, 500, NULL, "%s failed (exit %d): %s", argv[0], st, out);
}

int lv_disk_create(struct lv *lv, struct nb_ctx *ctx, const struct lv_base *base,
                   const char *disk_path, unsigned long long size)
{
    if (size == 0)
        size = base->virtual_size;
    if (size < base->virtual_size)
        return nb_error(ctx, 400, NULL,
                        "Flavor's disk is too small for requested image. Flavor disk is %llu "
                        "bytes, image is %llu bytes.",
                        size, base->virtual_size);
    char sz[32], opts[2 * LV_PATH_MAX + 128];
    snprintf(sz, sizeof(sz), "%llu", size);
    if (!strcmp(lv->images_type, "qcow2")) {
        snprintf(opts, sizeof(opts), "backing_file=%s,backing_fmt=%s", base->path, base->format);
        const char *argv[] = {"qemu-img", "create", "-q",      "-f", "qcow2",
                              "-o",       opts,     disk_path, sz,   NULL};
        return run_tool(ctx, argv);
    }
    const char *conv[] = {"qemu-img", "convert", "-q",   "-f",       base->format, "-O",
                          "raw",      "-t",      "none", base->path, disk_path,    NULL};
    const char *conv_wb[] = {"qemu-img", "convert", "-q",       "-f",      base->format,
                             "-O",       "raw",     base->path, disk_path, NULL};
    if (run_tool(ctx, !strcmp(lv->cache_mode, "none") ? conv : conv_wb) < 0)
        return -1;
    const char *resize[] = {"qemu-img", "resize", "-q", "-f", "raw", disk_path, sz, NULL};
    return size > base->virtual_size ? run_tool(ctx, resize) : 0;
}

void lv_cache_unpin(struct lv *lv, const struct lv_base *base)
{
    const char *slash = strrchr(base->path, '/');
    const char *name = slash ? slash + 1 : base->path;
    pthread_mutex_lock(&lv->cache_lock);
    long long n = nb_json_int(lv->cache_pins, name, 0);
    if (n > 1)
        json_object_set_new(lv->cache_pins, name, json_integer(n - 1));
    else
        json_object_del(lv->cache_pins, name);
    pthread_mutex_unlock(&lv->cache_lock);
}

/* Names of the bases the instances of this host use (from disk.info). */
static json_t *bases_in_use(struct lv *lv)
{
    json_t *used = json_object();
    DIR *d = opendir(lv->instances_path);
    if (!d)
        return used;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || e->d_name[0] == '_')
            continue;
        char p[LV_PATH_MAX + 300];
        snprintf(p, sizeof(p), "%s/%s/disk.info", lv->instances_path, e->d_name);
        _cleanup_free_ char *text = nb_read_file(p, NULL);
        _cleanup_json_ json_t *j = text ? nb_json_parse(text) : NULL;
        const char *b = nb_json_str(j, "base");
        if (b)
            json_object_set_new(used, b, json_true());
    }
    closedir(d);
    return used;
}

void lv_cache_cleanup(struct lv *lv, struct nb_ctx *ctx)
{
    double min_age =
        nb_conf_double("image_cache", "remove_unused_original_minimum_age_seconds", 86400);
    if (!nb_conf_bool("image_cache", "remove_unused_base_images", true))
        return;
    char dir[LV_PATH_MAX + 8];
    snprintf(dir, sizeof(dir), "%s/_base", lv->instances_path);
    pthread_mutex_lock(&lv->cache_lock);
    _cleanup_json_ json_t *used = bases_in_use(lv);
    DIR *d = opendir(dir);
    struct dirent *e;
    time_t now = time(NULL);
    while (d && (e = readdir(d))) {
        if (strlen(e->d_name) != 40)
            continue;
        char p[LV_PATH_MAX + 64], info[LV_PATH_MAX + 80];
        snprintf(p, sizeof(p), "%s/%.40s", dir, e->d_name);
        if (json_object_get(used, e->d_name) || json_object_get(lv->cache_pins, e->d_name)) {
            utimensat(AT_FDCWD, p, NULL, 0); /* the age counts from the last use */
            continue;
        }
        snprintf(info, sizeof(info), "%s.info", p);
        struct stat st;
        if (stat(p, &st) < 0 || difftime(now, st.st_mtime) < min_age)
            continue;
        if (unlink(p) == 0) {
            unlink(info);
            NB_INFO(LV_LOG, ctx, NULL, "Removing base or swap file: %s (unused for %.0f s)", p,
                    difftime(now, st.st_mtime));
        }
    }
    if (d)
        closedir(d);
    pthread_mutex_unlock(&lv->cache_lock);
}

const char *lv_instance_dir(const struct lv *lv, const char *uuid, char *buf, size_t n)
{
    snprintf(buf, n, "%s/%s", lv->instances_path, uuid);
    return buf;
}

json_t *lv_read_disk_info(const char *dir)
{
    char p[LV_PATH_MAX + 16];
    snprintf(p, sizeof(p), "%s/disk.info", dir);
    _cleanup_free_ char *text = nb_read_file(p, NULL);
    return text ? nb_json_parse(text) : NULL;
}
