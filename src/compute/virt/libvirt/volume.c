/* volume.c - volumes as guest disks under libvirt, and the snapshot of an
 * image-backed guest's root disk.
 *
 * A volume is a file on the NFS-style share (nb_bdm_volume_path of its
 * mapping's connection_info), given to QEMU as a virtio disk with the
 * format the mapping declares (connection_info.data.format) and the volume
 * ID as the disk's serial, as Nova's libvirt driver does. The agent has
 * already reconciled that format with the file's real one; this file never
 * inspects it, so with reconciliation off QEMU reports the mismatch itself
 * ("Image is not in qcow2 format").
 *
 * Every domain start builds the disks from all mappings that have
 * connection_info (lv_volumes_collect), so attached volumes survive a stop.
 * attach/detach change the running guest only (hot-plug, live and persistent
 * config); a guest that is not running gets them at its next start. Detach
 * waits until the guest let go of the disk, repeating the request as Nova's
 * _detach_with_retry does, because a guest may ignore the first unplug
 * request (early in boot, say). Volume files are never created, changed or
 * removed here. */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/proc.h"
#include "common/util.h"
#include "compute/bdm.h"
#include "compute/virt/libvirt/lv.h"

#include <errno.h>
#include <libxml/parser.h>
#include <libxml/xpath.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define DETACH_RETRY_S 5.0      /* a new unplug request this often */
#define SNAPSHOT_TIMEOUT_S 1800 /* qemu-img convert of a root disk */

/* A guest device name as libvirt takes it: vdb, sdc, hda. */
static bool valid_target(const char *t)
{
    if (!*t)
        return false;
    for (; *t; t++)
        if (!((*t >= 'a' && *t <= 'z') || (*t >= '0' && *t <= '9')))
            return false;
    return true;
}

int lv_volume_from_bdm(struct lv *lv, struct nb_ctx *ctx, const char *uuid, const json_t *bdm,
                       struct lv_volume *out)
{
    memset(out, 0, sizeof(*out));
    const char *vid = nb_json_str(bdm, "volume_id");
    nb_strlcpy(out->volume_id, vid ? vid : "", sizeof(out->volume_id));
    out->boot = nb_bdm_is_boot(bdm);
    _cleanup_json_ json_t *ci = nb_bdm_connection_info(bdm);
    if (!ci)
        return nb_error(ctx, 500, NULL,
                        "Volume %s of instance %s has no connection_info: it is not connected "
                        "to host %s",
                        out->volume_id, uuid, lv->host);
    if (nb_bdm_volume_path(ci, out->path, sizeof(out->path)) < 0)
        return nb_error(ctx, 500, NULL,
                        "Volume %s of instance %s: connection_info names no usable file "
                        "(data.export, data.name and mount_point_base are needed)",
                        out->volume_id, uuid);
    const char *fmt = nb_bdm_declared_format(ci);
    if (strcmp(fmt, "raw") != 0 && strcmp(fmt, "qcow2") != 0)
        return nb_error(ctx, 500, NULL,
                        "Volume %s of instance %s: format '%s' in connection_info is not "
                        "supported (raw, qcow2)",
                        out->volume_id, uuid, fmt);
    nb_strlcpy(out->format, fmt, sizeof(out->format));
    if (out->boot)
        nb_strlcpy(out->target, "vda", sizeof(out->target));
    else
        nb_bdm_target(bdm, out->target, sizeof(out->target));
    if (!valid_target(out->target))
        return nb_error(ctx, 400, NULL, "Volume %s of instance %s has no valid device name",
                        out->volume_id, uuid);
    if (access(out->path, F_OK) != 0)
        return nb_error(ctx, 500, NULL, "Volume %s of instance %s: file %s is missing on host %s",
                        out->volume_id, uuid, out->path, lv->host);
    return 0;
}

int lv_volumes_collect(struct lv *lv, struct nb_ctx *ctx, const json_t *inst,
                       struct lv_volumes *out)
{
    const char *uuid = nb_json_str(inst, "uuid");
    const json_t *boot = nb_bdm_boot_volume(inst);
    out->n = 0;
    if (boot && lv_volume_from_bdm(lv, ctx, uuid, boot, &out->v[out->n++]) < 0)
        return -1;
    size_t i;
    json_t *b;
    json_array_foreach (json_object_get(inst, "block_device_mapping"), i, b) {
        if (b == boot || !nb_bdm_is_volume(b) || !nb_json_str(b, "connection_info"))
            continue;
        if (out->n == LV_MAX_VOLUMES)
            return nb_error(ctx, 400, NULL, "Instance %s has more than %d volumes", uuid,
                            LV_MAX_VOLUMES);
        struct lv_volume *v = &out->v[out->n];
        if (lv_volume_from_bdm(lv, ctx, uuid, b, v) < 0)
            return -1;
        v->boot = false; /* only one boot disk: the one found above */
        bool clash = !boot && !strcmp(v->target, "vda"); /* the local root disk */
        for (int k = 0; k < out->n && !clash; k++)
            clash = !strcmp(out->v[k].target, v->target);
        if (clash)
            return nb_error(ctx, 500, NULL,
                            "Volume %s of instance %s: device %s is already used by another "
                            "disk of the instance",
                            v->volume_id, uuid, v->target);
        out->n++;
    }
    return 0;
}

struct lv_disk lv_volume_disk(const struct lv_volume *v)
{
    return (struct lv_disk){
        .path = v->path,
        .format = v->format,
        .device = "disk",
        .bus = "virtio",
        .target = v->target,
        .serial = v->volume_id,
    };
}

/* The source file of the disk at target in the domain's XML (live, or the
 * persistent definition with VIR_DOMAIN_XML_INACTIVE) into src (may be
 * NULL). 1 when such a disk exists, 0 when not, -1 when the XML cannot be
 * read. */
static int disk_at(virDomainPtr dom, unsigned flags, const char *target, char *src, size_t n)
{
    char *xml = virDomainGetXMLDesc(dom, flags);
    if (!xml)
        return -1;
    xmlDocPtr doc = xmlReadMemory(xml, (int)strlen(xml), "domain.xml", NULL,
                                  XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
    free(xml);
    if (!doc)
        return -1;
    char expr[128];
    snprintf(expr, sizeof(expr), "/domain/devices/disk[target/@dev='%s']", target);
    xmlXPathContextPtr xc = xmlXPathNewContext(doc);
    xmlXPathObjectPtr o = xmlXPathEvalExpression((const xmlChar *)expr, xc);
    int found = o && o->nodesetval && o->nodesetval->nodeNr > 0;
    if (found && src) {
        src[0] = '\0';
        for (xmlNodePtr c = o->nodesetval->nodeTab[0]->children; c; c = c->next) {
            if (c->type != XML_ELEMENT_NODE || strcmp((const char *)c->name, "source") != 0)
                continue;
            xmlChar *f = xmlGetProp(c, (const xmlChar *)"file");
            nb_strlcpy(src, f ? (const char *)f : "", n);
            xmlFree(f);
        }
    }
    xmlXPathFreeObject(o);
    xmlXPathFreeContext(xc);
    xmlFreeDoc(doc);
    return found;
}

/* The instance's domain when it is active, else NULL with *rc = 0 (nothing
 * to hot-plug: the next start builds the disks from the mappings) or -1
 * when libvirt is unreachable. */
static virDomainPtr active_domain(struct lv *lv, struct nb_ctx *ctx, const char *uuid,
                                  const char *what, const char *volume_id, int *rc)
{
    *rc = 0;
    virDomainPtr dom = lv_lookup(lv, ctx, uuid, false);
    if (!dom) {
        *rc = nb_ctx_failed(ctx) ? -1 : 0;
        if (*rc == 0)
            NB_INFO(LV_LOG, ctx, uuid,
                    "%s volume %s: the instance has no domain on host %s; its next start "
                    "builds the disks from the block device mappings",
                    what, volume_id, lv->host);
        return NULL;
    }
    if (virDomainIsActive(dom) != 1) {
        NB_INFO(LV_LOG, ctx, uuid,
                "%s volume %s: the instance is not running; its next start builds the disks "
                "from the block device mappings",
                what, volume_id);
        virDomainFree(dom);
        return NULL;
    }
    return dom;
}

int lv_attach_volume(struct lv *lv, struct nb_ctx *ctx, json_t *inst, const json_t *bdm)
{
    const char *uuid = nb_json_str(inst, "uuid");
    struct lv_volume v;
    if (lv_volume_from_bdm(lv, ctx, uuid, bdm, &v) < 0)
        return -1;
    if (v.boot)
        return nb_error(ctx, 400, NULL,
                        "Volume %s is the boot volume of instance %s: it cannot be hot-plugged",
                        v.volume_id, uuid);
    int rc;
    virDomainPtr dom = active_domain(lv, ctx, uuid, "Attaching", v.volume_id, &rc);
    if (!dom)
        return rc;
    char src[LV_PATH_MAX] = "";
    int present = disk_at(dom, 0, v.target, src, sizeof(src));
    if (present == 1 && !strcmp(src, v.path)) {
        NB_INFO(LV_LOG, ctx, uuid, "Volume %s is already attached at /dev/%s", v.volume_id,
                v.target);
    } else if (present == 1) {
        rc = nb_error(ctx, 409, NULL,
                      "Failed to attach volume %s to instance %s: device /dev/%s is already in "
                      "use (%s)",
                      v.volume_id, uuid, v.target, src);
    } else {
        struct lv_disk d = lv_volume_disk(&v);
        _cleanup_free_ char *xml = lv_disk_xml(&d, lv->cache_mode);
        if (virDomainAttachDeviceFlags(dom, xml,
                                       VIR_DOMAIN_AFFECT_LIVE | VIR_DOMAIN_AFFECT_CONFIG) < 0)
            rc = lv_error(ctx, 500, "Failed to attach volume %s at /dev/%s to instance %s",
                          v.volume_id, v.target, uuid);
        else
            NB_INFO(LV_LOG, ctx, uuid, "Attached volume %s at /dev/%s (%s, %s)", v.volume_id,
                    v.target, v.path, v.format);
    }
    virDomainFree(dom);
    return rc;
}

/* Sends the unplug request(s) and polls the live XML until the disk at
 * target is gone or timeout_s passed. 0/-1. */
static int detach_and_wait(struct nb_ctx *ctx, virDomainPtr dom, const char *uuid,
                           const char *target, const char *xml, double timeout_s)
{
    unsigned flags = VIR_DOMAIN_AFFECT_LIVE;
    if (disk_at(dom, VIR_DOMAIN_XML_INACTIVE, target, NULL, 0) == 1)
        flags |= VIR_DOMAIN_AFFECT_CONFIG;
    double t0 = nb_time_mono(), last = -1;
    int attempts = 0;
    for (;;) {
        if (virDomainIsActive(dom) != 1)
            return 0; /* stopped meanwhile: the device went with it */
        int present = disk_at(dom, 0, target, NULL, 0);
        if (present == 0) {
            NB_INFO(LV_LOG, ctx, uuid, "Device %s detached after %.1f seconds (%d request%s)",
                    target, nb_time_mono() - t0, attempts, attempts == 1 ? "" : "s");
            return 0;
        }
        if (nb_time_mono() - t0 >= timeout_s)
            break;
        if (last < 0 || nb_time_mono() - last >= DETACH_RETRY_S) {
            attempts++;
            if (virDomainDetachDeviceFlags(dom, xml, flags) < 0) {
                /* a repeated request while the first is pending fails in QEMU
                 * ("already in the process of unplug"): only the first
                 * request's error is the answer */
                if (attempts == 1 && disk_at(dom, 0, target, NULL, 0) == 1)
                    return lv_error(ctx, 500, "Device detach failed for %s", target);
                NB_DEBUG(LV_LOG, ctx, uuid, "detach request %d for %s: %s", attempts, target,
                         virGetLastErrorMessage());
            }
            flags = VIR_DOMAIN_AFFECT_LIVE; /* the persistent config changed at once */
            last = nb_time_mono();
        }
        usleep(200 * 1000);
    }
    return nb_error(ctx, 500, NULL,
                    "Device detach failed for %s: Unable to detach the device from the live "
                    "config (the guest did not release it within %.0f seconds, %d request%s)",
                    target, timeout_s, attempts, attempts == 1 ? "" : "s");
}

/* False when bdm's connection_info names a file other than src. */
static bool holds_volume(const json_t *bdm, const char *src)
{
    _cleanup_json_ json_t *ci = nb_bdm_connection_info(bdm);
    char path[LV_PATH_MAX];
    return !ci || nb_bdm_volume_path(ci, path, sizeof(path)) < 0 || !strcmp(path, src);
}

int lv_detach_volume(struct lv *lv, struct nb_ctx *ctx, json_t *inst, const json_t *bdm)
{
    const char *uuid = nb_json_str(inst, "uuid");
    const char *vid = nb_json_str(bdm, "volume_id");
    char target[16];
    nb_bdm_target(bdm, target, sizeof(target));
    if (!valid_target(target))
        return nb_error(ctx, 400, NULL, "Volume %s of instance %s has no valid device name",
                        vid ? vid : "?", uuid);
    if (nb_bdm_is_boot(bdm))
        return nb_error(ctx, 400, NULL,
                        "Volume %s is the boot volume of instance %s: it cannot be detached",
                        vid ? vid : "?", uuid);
    int rc;
    virDomainPtr dom = active_domain(lv, ctx, uuid, "Detaching", vid ? vid : "?", &rc);
    if (!dom)
        return rc;
    char src[LV_PATH_MAX] = "";
    int present = disk_at(dom, 0, target, src, sizeof(src));
    if (present < 0) {
        rc = lv_error(ctx, 500, "Device detach failed for %s: cannot read the domain", target);
    } else if (present == 1 && !holds_volume(bdm, src)) {
        rc = nb_error(ctx, 409, NULL,
                      "Volume %s of instance %s is not the disk at %s (that is %s): not detached",
                      vid ? vid : "?", uuid, target, src);
    } else if (present == 0) {
        /* Nova: DiskNotFound while detaching is ignored */
        NB_WARN(LV_LOG, ctx, uuid, "Volume %s: no disk %s in the guest; nothing to detach",
                vid ? vid : "?", target);
    } else {
        /* libvirt matches the device by target; the rest as attach made it */
        struct lv_disk d = {.path = src,
                            .format = "raw",
                            .device = "disk",
                            .bus = "virtio",
                            .target = target,
                            .serial = vid};
        _cleanup_free_ char *xml = lv_disk_xml(&d, lv->cache_mode);
        double timeout = nb_conf_double("libvirt", "device_detach_timeout", 30);
        rc = detach_and_wait(ctx, dom, uuid, target, xml, timeout);
    }
    virDomainFree(dom);
    return rc;
}

int lv_snapshot(struct lv *lv, struct nb_ctx *ctx, json_t *inst, const char *out_path)
{
    const char *uuid = nb_json_str(inst, "uuid");
    if (!uuid || !nb_is_uuid(uuid))
        return nb_error(ctx, 400, NULL, "snapshot: the instance has no valid UUID");
    if (nb_bdm_boot_volume(inst))
        return nb_error(ctx, 400, NULL,
                        "Instance %s is volume-backed: its image is made of volume snapshots, "
                        "not by the virt driver",
                        uuid);
    char dir[LV_PATH_MAX], disk[LV_PATH_MAX + 8];
    lv_instance_dir(lv, uuid, dir, sizeof(dir));
    snprintf(disk, sizeof(disk), "%s/disk", dir);
    _cleanup_json_ json_t *di = lv_read_disk_info(dir);
    const char *fmt = nb_json_str(di, "disk_format");
    if (!di || !fmt || access(disk, F_OK) != 0)
        return nb_error(ctx, 500, NULL,
                        "The disk of instance %s is missing on host %s (%s): no snapshot can "
                        "be made",
                        uuid, lv->host, disk);
    virDomainPtr dom = lv_lookup(lv, ctx, uuid, false);
    if (!dom && nb_ctx_failed(ctx))
        return -1;
    bool paused = false;
    if (dom && lv_dom_state(dom) == VIR_DOMAIN_RUNNING) {
        if (virDomainSuspend(dom) < 0) {
            int rc = lv_error(ctx, 500, "cannot pause instance %s for its snapshot", uuid);
            virDomainFree(dom);
            return rc;
        }
        paused = true;
    }
    double t0 = nb_time_mono();
    const char *argv[] = {"qemu-img", "convert", "-U", "-f",     fmt,
                          "-O",       "qcow2",   disk, out_path, NULL};
    char out[2048];
    int st = nb_run(argv, out, sizeof(out), SNAPSHOT_TIMEOUT_S);
    int rc = 0;
    if (st != 0) {
        size_t n = strlen(out);
        while (n && (out[n - 1] == '\n' || out[n - 1] == ' '))
            out[--n] = '\0';
        rc = nb_error(ctx, 500, NULL,
                      "Snapshot of instance %s failed: qemu-img convert (exit %d): %s", uuid, st,
                      out);
        unlink(out_path);
    }
    if (paused && virDomainResume(dom) < 0) {
        if (rc == 0)
            rc = lv_error(ctx, 500, "cannot resume instance %s after its snapshot", uuid);
        else
            NB_ERROR(LV_LOG, ctx, uuid, "cannot resume the instance after its snapshot: %s",
                     virGetLastErrorMessage());
    }
    if (dom)
        virDomainFree(dom);
    if (rc == 0)
        NB_INFO(LV_LOG, ctx, uuid, "Snapshot of %s (%s) written to %s in %.2f seconds%s", disk, fmt,
                out_path, nb_time_mono() - t0, paused ? " (guest paused meanwhile)" : "");
    return rc;
}
