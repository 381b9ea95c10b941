/* migrate_disks.c - a live migration's disks and files: what the source's
 * guest has (migration_disks), what the destination prepares before the
 * move (pre_live_migration), and what each side keeps or removes after it
 * (post_live_migration_dest/_source, rollback_live_migration_dest).
 *
 * Paths are the same on both hosts (instances/<uuid>/…, Nova's layout), so
 * the domain XML moves unchanged. On shared storage the files are already
 * there and nothing is made or removed. For block migration libvirt copies
 * the top layer of every writable local disk (NON_SHARED_INC) into a disk
 * that must already exist on the destination with the same virtual size
 * and, for a qcow2 overlay, its base image: pre_live_migration creates
 * them (the base through the image cache, fetched and verified as for a
 * spawn). Read-only disks are not copied by libvirt: the config drive is
 * built again from the instance, as the spawn built it. */
#include "common/cleanup.h"
#include "common/json.h"
#include "common/log.h"
#include "common/proc.h"
#include "common/util.h"
#include "compute/metadata/metadata.h"
#include "compute/virt/libvirt/lv.h"

#include <errno.h>
#include <libxml/parser.h>
#include <libxml/xpath.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* One <disk> of the live domain XML as the disks answer describes it. */
static json_t *disk_json(struct lv *lv, virDomainPtr dom, xmlNodePtr node, const char *dir,
                         const json_t *di)
{
    char path[LV_PATH_MAX] = "", target[32] = "", format[16] = "raw";
    bool readonly = false;
    for (xmlNodePtr c = node->children; c; c = c->next) {
        if (c->type != XML_ELEMENT_NODE)
            continue;
        xmlChar *v = NULL;
        if (!strcmp((const char *)c->name, "source") &&
            (v = xmlGetProp(c, (const xmlChar *)"file")))
            nb_strlcpy(path, (const char *)v, sizeof(path));
        else if (!strcmp((const char *)c->name, "target") &&
                 (v = xmlGetProp(c, (const xmlChar *)"dev")))
            nb_strlcpy(target, (const char *)v, sizeof(target));
        else if (!strcmp((const char *)c->name, "driver") &&
                 (v = xmlGetProp(c, (const xmlChar *)"type")))
            nb_strlcpy(format, (const char *)v, sizeof(format));
        else if (!strcmp((const char *)c->name, "readonly"))
            readonly = true;
        xmlFree(v);
    }
    if (!path[0] || !target[0])
        return NULL;
    virDomainBlockInfo bi = {0};
    virDomainGetBlockInfo(dom, target, &bi, 0);
    size_t dl = strlen(dir);
    bool local = !strncmp(path, dir, dl) && path[dl] == '/';
    char base[LV_PATH_MAX + 64] = "";
    const char *slash = strrchr(path, '/');
    if (local && !strcmp(slash + 1, "disk") && nb_json_str(di, "base") && !strcmp(format, "qcow2"))
        snprintf(base, sizeof(base), "%s/_base/%s", lv->instances_path, nb_json_str(di, "base"));
    return json_pack("{s:s, s:s, s:s, s:I, s:s?, s:s?, s:b, s:b}", "target", target, "path", path,
                     "format", format, "virtual_size", (json_int_t)bi.capacity, "backing",
                     base[0] ? base : NULL, "backing_format",
                     base[0] ? nb_json_str(di, "base_format") : NULL, "readonly", readonly, "local",
                     local);
}

json_t *lv_migration_disks(struct lv *lv, struct nb_ctx *ctx, json_t *inst)
{
    const char *uuid = nb_json_str(inst, "uuid");
    virDomainPtr dom = lv_lookup(lv, ctx, uuid, true);
    if (!dom)
        return NULL;
    _cleanup_free_ char *xml = virDomainGetXMLDesc(dom, 0);
    if (!xml) {
        lv_error(ctx, 500, "cannot read the domain XML of instance %s", uuid);
        virDomainFree(dom);
        return NULL;
    }
    char dir[LV_PATH_MAX];
    lv_instance_dir(lv, uuid, dir, sizeof(dir));
    _cleanup_json_ json_t *di = lv_read_disk_info(dir);
    xmlDocPtr doc = xmlReadMemory(xml, (int)strlen(xml), "domain.xml", NULL,
                                  XML_PARSE_NONET | XML_PARSE_NOERROR);
    xmlXPathContextPtr xp = doc ? xmlXPathNewContext(doc) : NULL;
    xmlXPathObjectPtr r =
        xp ? xmlXPathEvalExpression((const xmlChar *)"/domain/devices/disk[@type='file']", xp)
           : NULL;
    json_t *out = json_array();
    for (int i = 0; r && r->nodesetval && i < r->nodesetval->nodeNr; i++) {
        json_t *d = disk_json(lv, dom, r->nodesetval->nodeTab[i], dir, di);
        if (d)
            json_array_append_new(out, d);
    }
    xmlXPathFreeObject(r);
    xmlXPathFreeContext(xp);
    xmlFreeDoc(doc);
    virDomainFree(dom);
    return out;
}

/* ------------------------------------------------------ destination side */

static int run_qemu_img(struct nb_ctx *ctx, const char *const argv[])
{
    char out[2048];
    int st = nb_run(argv, out, sizeof(out), 120);
    if (st == 0)
        return 0;
    size_t n = strlen(out);
    while (n && (out[n - 1] == '\n' || out[n - 1] == ' '))
        out[--n] = '\0';
    return nb_error(ctx, 500, NULL, "qemu-img failed (exit %d): %s", st, out);
}

/* The empty target of a block migration for disk d (Nova's
 * _create_images_and_backing): same format and virtual size, on the same
 * base image, which the image cache fetches when this host lacks it. */
static int create_target_disk(struct lv *lv, struct nb_ctx *ctx, const json_t *inst,
                              const json_t *d)
{
    const char *path = nb_json_str(d, "path"), *fmt = nb_json_str(d, "format");
    const char *backing = nb_json_str(d, "backing");
    char size[32];
    snprintf(size, sizeof(size), "%lld", nb_json_int(d, "virtual_size", 0));
    if (!fmt || (strcmp(fmt, "qcow2") != 0 && strcmp(fmt, "raw") != 0))
        return nb_error(ctx, 409, NULL, "disk %s of format %s cannot be block migrated", path,
                        fmt ? fmt : "?");
    if (!backing) {
        const char *argv[] = {"qemu-img", "create", "-q", "-f", fmt, path, size, NULL};
        return run_qemu_img(ctx, argv);
    }
    struct lv_base base;
    if (lv_cache_fetch(lv, ctx, nb_json_str(inst, "image_ref"), &base) < 0)
        return -1;
    int rc = 0;
    if (strcmp(base.path, backing) != 0) {
        rc = nb_error(ctx, 409, NULL,
                      "disk %s sits on base %s on the source, but the image cache of host %s "
                      "gives %s for image %s",
                      path, backing, lv->host, base.path, nb_json_str(inst, "image_ref"));
    } else {
        char opts[2 * LV_PATH_MAX + 96];
        snprintf(opts, sizeof(opts), "backing_file=%s,backing_fmt=%s", base.path, base.format);
        const char *argv[] = {"qemu-img", "create", "-q", "-f", "qcow2",
                              "-o",       opts,     path, size, NULL};
        rc = run_qemu_img(ctx, argv);
    }
    lv_cache_unpin(lv, &base);
    return rc;
}

/* The local files of a block migration into dir: target disks (their
 * targets appended to migrate), the config drive, disk.info. 0/-1. */
static int prepare_local(struct lv *lv, struct nb_ctx *ctx, json_t *inst, const json_t *disks,
                         const char *dir, json_t *migrate)
{
    const char *uuid = nb_json_str(inst, "uuid");
    size_t i, dl = strlen(dir);
    json_t *d;
    bool has_root = false;
    json_array_foreach (disks, i, d) {
        const char *path = nb_json_str(d, "path");
        if (!json_is_true(json_object_get(d, "local")))
            continue; /* a volume: its share is reachable from every host */
        if (!path || strncmp(path, dir, dl) != 0 || path[dl] != '/' || strchr(path + dl + 1, '/'))
            return nb_error(ctx, 409, NULL,
                            "disk %s of instance %s is not in the instance directory %s of host "
                            "%s: the hosts' instances_path differ",
                            path ? path : "?", uuid, dir, lv->host);
        if (json_is_true(json_object_get(d, "readonly"))) {
            if (strcmp(path + dl + 1, "disk.config") != 0)
                return nb_error(ctx, 409, NULL,
                                "read-only disk %s of instance %s cannot be block migrated", path,
                                uuid);
            char mac[18];
            lv_mac_for(uuid, mac);
            _cleanup_json_ json_t *nics = json_pack("[{s:s}]", "mac_address", mac);
            if (nb_configdrive_build(ctx, inst, nics, path) < 0)
                return -1;
            NB_INFO(LV_LOG, ctx, uuid, "Creating config drive at %s", path);
            continue;
        }
        if (create_target_disk(lv, ctx, inst, d) < 0)
            return -1;
        has_root = has_root || !strcmp(path + dl + 1, "disk");
        json_array_append_new(migrate, json_string(nb_json_str(d, "target")));
    }
    /* disk.info as the spawn writes it: what later starts read */
    json_t *root = NULL;
    json_array_foreach (disks, i, d)
        if (has_root && json_is_true(json_object_get(d, "local")) &&
            !strcmp(nb_json_str(d, "path") + dl + 1, "disk"))
            root = d;
    _cleanup_json_ json_t *di = root
                                    ? json_pack("{s:s}", "disk_format", nb_json_str(root, "format"))
                                    : json_pack("{s:b}", "boot_from_volume", 1);
    if (root && nb_json_str(root, "backing")) {
        json_object_set_new(di, "base",
                            json_string(strrchr(nb_json_str(root, "backing"), '/') + 1));
        json_object_set_new(di, "base_format",
                            json_string(nb_json_str(root, "backing_format")
                                            ? nb_json_str(root, "backing_format")
                                            : "raw"));
    }
    _cleanup_free_ char *text = nb_json_dump(di);
    char p[LV_PATH_MAX + 16];
    snprintf(p, sizeof(p), "%s/disk.info", dir);
    if (nb_write_file(p, text, strlen(text), 0644) < 0)
        return nb_error(ctx, 500, NULL, "cannot write %s: %s", p, strerror(errno));
    return 0;
}

json_t *lv_pre_live_migration(struct lv *lv, struct nb_ctx *ctx, json_t *inst, const json_t *disks,
                              bool shared, bool block)
{
    const char *uuid = nb_json_str(inst, "uuid");
    char dir[LV_PATH_MAX];
    lv_instance_dir(lv, uuid ? uuid : "", dir, sizeof(dir));
    if (!uuid || !nb_is_uuid(uuid)) {
        nb_error(ctx, 400, NULL, "pre_live_migration: the instance has no valid UUID");
        return NULL;
    }
    json_t *migrate = json_array();
    json_t *out = json_pack("{s:b, s:b, s:s, s:o}", "shared_storage", shared, "block_migration",
                            block, "instance_dir", dir, "migrate_disks", migrate);
    if (shared) {
        if (access(dir, F_OK) != 0) {
            nb_error(ctx, 409, NULL,
                     "The instances path is shared, but the directory %s of instance %s is "
                     "missing on host %s",
                     dir, uuid, lv->host);
            json_decref(out);
            return NULL;
        }
        return out;
    }
    struct stat st;
    if (stat(dir, &st) == 0) {
        nb_error(ctx, 409, "DestinationDiskExists",
                 "The supplied disk path (%s) already exists, it is expected not to exist.", dir);
        json_decref(out);
        return NULL;
    }
    NB_DEBUG(LV_LOG, ctx, uuid, "Creating instance directory: %s", dir);
    if (nb_mkdir_p(dir) < 0 || chmod(dir, 0755) < 0) {
        nb_error(ctx, 500, NULL, "cannot create %s: %s", dir, strerror(errno));
        json_decref(out);
        return NULL;
    }
    if (!block && json_array_size(disks) > 0) {
        json_t *d;
        size_t i;
        json_array_foreach (disks, i, d)
            if (json_is_true(json_object_get(d, "local")) &&
                !json_is_true(json_object_get(d, "readonly"))) {
                nb_error(ctx, 409, "InvalidSharedStorage",
                         "Shared storage live-migration requires either shared storage or "
                         "boot-from-volume with no local disks.");
                break;
            }
    }
    if (nb_ctx_failed(ctx) || prepare_local(lv, ctx, inst, disks, dir, migrate) < 0) {
        nb_rm_rf(dir);
        json_decref(out);
        return NULL;
    }
    return out;
}

int lv_post_live_migration_dest(struct lv *lv, struct nb_ctx *ctx, json_t *inst)
{
    const char *uuid = nb_json_str(inst, "uuid");
    virDomainPtr dom = lv_lookup(lv, ctx, uuid, true);
    if (!dom)
        return -1;
    int rc = 0;
    if (virDomainIsPersistent(dom) != 1) {
        /* the definition the guest now runs with (Nova's
         * post_live_migration_at_destination writes it) */
        _cleanup_free_ char *xml = virDomainGetXMLDesc(dom, VIR_DOMAIN_XML_MIGRATABLE);
        virDomainPtr def = xml ? virDomainDefineXML(virDomainGetConnect(dom), xml) : NULL;
        if (!def)
            rc = lv_error(ctx, 500, "cannot define the migrated domain of instance %s on host %s",
                          uuid, lv->host);
        else
            virDomainFree(def);
    }
    virDomainFree(dom);
    return rc;
}

int lv_post_live_migration_source(struct lv *lv, struct nb_ctx *ctx, json_t *inst, bool shared)
{
    const char *uuid = nb_json_str(inst, "uuid");
    virDomainPtr dom = lv_lookup(lv, ctx, uuid, false);
    if (!dom && nb_ctx_failed(ctx))
        return -1;
    if (dom) {
        int active = virDomainIsActive(dom);
        int rc = 0;
        if (active == 1)
            rc = nb_error(ctx, 500, NULL,
                          "Instance %s still runs on host %s after its live migration", uuid,
                          lv->host);
        else if (virDomainUndefineFlags(dom, VIR_DOMAIN_UNDEFINE_MANAGED_SAVE |
                                                 VIR_DOMAIN_UNDEFINE_NVRAM) < 0 &&
                 virDomainUndefine(dom) < 0)
            rc = lv_error(ctx, 500, "cannot undefine the domain of instance %s", uuid);
        virDomainFree(dom);
        if (rc < 0)
            return -1;
    }
    if (shared)
        return 0;
    char dir[LV_PATH_MAX];
    lv_instance_dir(lv, uuid, dir, sizeof(dir));
    if (nb_rm_rf(dir) < 0)
        return nb_error(ctx, 500, NULL, "cannot remove %s: %s", dir, strerror(errno));
    NB_INFO(LV_LOG, ctx, uuid, "Deleting instance files %s", dir);
    lv_cache_cleanup(lv, ctx);
    return 0;
}

int lv_rollback_live_migration_dest(struct lv *lv, struct nb_ctx *ctx, json_t *inst, bool shared)
{
    const char *uuid = nb_json_str(inst, "uuid");
    virDomainPtr dom = lv_lookup(lv, ctx, uuid, false);
    if (!dom && nb_ctx_failed(ctx))
        return -1;
    if (dom) {
        if (virDomainIsActive(dom) == 1 && virDomainDestroy(dom) < 0 &&
            virDomainIsActive(dom) == 1) {
            int rc = lv_error(ctx, 500, "cannot destroy the domain of instance %s", uuid);
            virDomainFree(dom);
            return rc;
        }
        if (virDomainIsPersistent(dom) == 1)
            virDomainUndefineFlags(dom,
                                   VIR_DOMAIN_UNDEFINE_MANAGED_SAVE | VIR_DOMAIN_UNDEFINE_NVRAM);
        virDomainFree(dom);
    }
    if (shared)
        return 0;
    char dir[LV_PATH_MAX];
    lv_instance_dir(lv, uuid, dir, sizeof(dir));
    if (nb_rm_rf(dir) < 0)
        return nb_error(ctx, 500, NULL, "cannot remove %s: %s", dir, strerror(errno));
    NB_INFO(LV_LOG, ctx, uuid, "Deleting instance files %s", dir);
    lv_cache_cleanup(lv, ctx);
    return 0;
}
