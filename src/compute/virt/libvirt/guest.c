/* guest.c - the life of a guest under libvirt: spawn, power operations,
 * destroy, state, console.
 *
 * Every instance has instances/<uuid>/ holding disk (qcow2 overlay or raw
 * copy), disk.config (config drive, when asked for), console.log (serial
 * console, appended across boots) and disk.info (the disk's format and the
 * cached base it sits on). A volume-backed instance (a boot volume mapping)
 * has no local disk: its vda is the volume's file and its disk.info says
 * {"boot_from_volume": true}. The domain is persistent, named and UUID'd by
 * the instance UUID. Each start after a stop and each hard reboot redefines
 * it from the database state (lv_domain_xml, with every connected volume of
 * the block device mappings), as Nova's _hard_reboot does. Nothing here
 * touches a volume's file; destroy removes instances/<uuid>/ only. */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/proc.h"
#include "common/util.h"
#include "compute/bdm.h"
#include "compute/metadata/metadata.h"
#include "compute/virt/libvirt/lv.h"
#include "network/agent/netagent.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_CONSOLE_BYTES (100 * 1024) /* Nova's limit */

char *lv_instance_xml(struct lv *lv, struct nb_ctx *ctx, const json_t *inst,
                      const struct lv_volumes *vols, const char *virt_type,
                      const struct lv_cpu *cpu)
{
    const char *uuid = nb_json_str(inst, "uuid");
    char dir[LV_PATH_MAX], disk[LV_PATH_MAX + 8], cfg[LV_PATH_MAX + 16], console[LV_PATH_MAX + 16];
    lv_instance_dir(lv, uuid, dir, sizeof(dir));
    snprintf(disk, sizeof(disk), "%s/disk", dir);
    snprintf(cfg, sizeof(cfg), "%s/disk.config", dir);
    snprintf(console, sizeof(console), "%s/console.log", dir);
    bool from_volume = vols->n > 0 && vols->v[0].boot;
    _cleanup_json_ json_t *di = lv_read_disk_info(dir);
    if (!from_volume && (!di || access(disk, F_OK) != 0)) {
        nb_error(ctx, 500, NULL,
                 "The disk of instance %s is missing on host %s (%s): the instance cannot be "
                 "started",
                 uuid, lv->host, disk);
        return NULL;
    }
    char mac[18];
    lv_mac_for(uuid, mac);
    struct lv_domain_spec spec;
    lv_guest_spec(lv, virt_type, cpu, console, mac, &spec);
    if (!from_volume)
        spec.disks[spec.ndisks++] = (struct lv_disk){
            .path = disk,
            .format = nb_json_str(di, "disk_format") ? nb_json_str(di, "disk_format") : "qcow2",
            .device = "disk",
            .bus = "virtio",
            .target = "vda",
        };
    for (int i = 0; i < vols->n; i++)
        spec.disks[spec.ndisks++] = lv_volume_disk(&vols->v[i]);
    if (access(cfg, F_OK) == 0)
        spec.disks[spec.ndisks++] = (struct lv_disk){
            .path = cfg,
            .format = "raw",
            .device = "cdrom",
            .bus = "ide",
            .target = "hda",
            .readonly = true,
        };
    return lv_domain_xml(inst, &spec);
}

/* A failed virDomainCreate: the error, naming KVM as the cause when QEMU
 * died of it (and, under auto, asking for the virt_type re-check). -1. */
static int start_failed(struct lv *lv, struct nb_ctx *ctx, const json_t *inst,
                        const char *virt_type, const struct lv_cpu *cpu)
{
    const char *uuid = nb_json_str(inst, "uuid");
    if (strcmp(virt_type, "kvm") != 0 || !lv_is_kvm_failure(virGetLastErrorMessage()))
        return lv_error(ctx, 500, "Instance %s failed to start on host %s", uuid, lv->host);
    /* QEMU's lines on one line, without the final stop */
    char msg[700], desc[256];
    nb_strlcpy(msg, virGetLastErrorMessage(), sizeof(msg));
    for (char *p = msg; *p; p++)
        if (*p == '\n')
            *p = ' ';
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '.' || msg[n - 1] == ' '))
        msg[--n] = '\0';
    lv_cpu_describe(cpu, desc, sizeof(desc));
    bool auto_vt = lv->virt_type_auto;
    nb_error(ctx, 500, NULL,
             "Instance %s failed to start on host %s: KVM cannot run this guest (cpu %s): %s. %s",
             uuid, lv->host, desc, msg,
             auto_vt ? "virt_type auto: the host re-checks KVM against TCG before its next start"
                     : "[libvirt] virt_type = kvm is configured: set virt_type = auto or qemu, "
                       "or another [libvirt] cpu_mode");
    NB_ERROR(LV_LOG, ctx, uuid, "%s", nb_ctx_message(ctx));
    lv_kvm_failed(lv, (int)nb_json_int(json_object_get(inst, "flavor"), "vcpus", 1));
    return -1;
}

int lv_plug_vifs(struct nb_ctx *ctx, const json_t *inst)
{
    size_t i;
    json_t *vif;
    json_array_foreach (json_object_get(inst, "network_info"), i, vif)
        if (nb_vif_plug(ctx, vif) < 0) {
            NB_ERROR(LV_LOG, ctx, nb_json_str(inst, "uuid"), "cannot plug VIF %s: %s",
                     nb_json_str(vif, "id"), nb_ctx_message(ctx));
            return -1;
        }
    return 0;
}

/* Defines the domain from the database state (vols: the instance's
 * volumes, from lv_volumes_collect) and starts it; waits until libvirt
 * reports it running. */
static int start_domain(struct lv *lv, struct nb_ctx *ctx, const json_t *inst,
                        const struct lv_volumes *vols)
{
    const char *uuid = nb_json_str(inst, "uuid");
    char dir[LV_PATH_MAX];
    lv_instance_dir(lv, uuid, dir, sizeof(dir));
    /* a volume-backed instance needs no local file to start: its directory
     * (console log) is made again if it went away */
    if (vols->n > 0 && vols->v[0].boot && (nb_mkdir_p(dir) < 0 || chmod(dir, 0755) < 0))
        return nb_error(ctx, 500, NULL, "cannot create %s: %s", dir, strerror(errno));
    char virt_type[16];
    struct lv_cpu cpu;
    if (lv_current_virt(lv, ctx, virt_type, &cpu) < 0)
        return -1;
    _cleanup_free_ char *xml = lv_instance_xml(lv, ctx, inst, vols, virt_type, &cpu);
    if (!xml || lv_plug_vifs(ctx, inst) < 0)
        return -1;
    virConnectPtr conn = lv_conn(lv, ctx);
    if (!conn)
        return -1;
    virDomainPtr dom = virDomainDefineXML(conn, xml);
    if (!dom)
        return lv_error(ctx, 500, "cannot define the domain of instance %s", uuid);
    int rc = 0;
    if (virDomainCreate(dom) < 0)
        rc = start_failed(lv, ctx, inst, virt_type, &cpu);
    for (int i = 0; rc == 0 && i < 200 && lv_dom_state(dom) != VIR_DOMAIN_RUNNING; i++)
        usleep(50 * 1000);
    if (rc == 0 && lv_dom_state(dom) != VIR_DOMAIN_RUNNING)
        rc = nb_error(ctx, 500, NULL, "Instance %s did not reach the running state on host %s",
                      uuid, lv->host);
    /* Nova's network-vif-plugged wait: running only once the taps are wired */
    if (rc == 0 && nb_vif_wait_active(ctx, inst) < 0) {
        NB_ERROR(LV_LOG, ctx, uuid, "%s", nb_ctx_message(ctx));
        if (virDomainDestroy(dom) < 0)
            NB_WARN(LV_LOG, ctx, uuid, "cannot stop the guest whose VIFs failed");
        rc = -1;
    }
    virDomainFree(dom);
    return rc;
}

/* Writes dir/disk.info from di (reference stolen). 0/-1. */
static int write_disk_info(struct nb_ctx *ctx, const char *dir, json_t *di_new)
{
    _cleanup_json_ json_t *di = di_new;
    _cleanup_free_ char *di_text = nb_json_dump(di);
    char dip[LV_PATH_MAX + 16];
    snprintf(dip, sizeof(dip), "%s/disk.info", dir);
    if (nb_write_file(dip, di_text, strlen(di_text), 0644) < 0)
        return nb_error(ctx, 500, NULL, "cannot write %s: %s", dip, strerror(errno));
    return 0;
}

/* image -> cache -> dir/disk, and its disk.info. 0/-1. */
static int create_local_disk(struct lv *lv, struct nb_ctx *ctx, const json_t *inst, const char *dir)
{
    char disk[LV_PATH_MAX + 8];
    snprintf(disk, sizeof(disk), "%s/disk", dir);
    struct lv_base base;
    if (lv_cache_fetch(lv, ctx, nb_json_str(inst, "image_ref"), &base) < 0)
        return -1;
    long long root_gb = nb_json_int(json_object_get(inst, "flavor"), "root_gb", 0);
    int rc = lv_disk_create(lv, ctx, &base, disk, (unsigned long long)root_gb << 30);
    const char *slash = strrchr(base.path, '/');
    if (rc == 0)
        rc = write_disk_info(ctx, dir,
                             json_pack("{s:s, s:s, s:s}", "disk_format", lv->images_type, "base",
                                       slash ? slash + 1 : base.path, "base_format", base.format));
    lv_cache_unpin(lv, &base);
    return rc;
}

int lv_spawn(struct lv *lv, struct nb_ctx *ctx, json_t *inst)
{
    const char *uuid = nb_json_str(inst, "uuid");
    if (!uuid || !nb_is_uuid(uuid))
        return nb_error(ctx, 400, NULL, "spawn: the instance has no valid UUID");
    virDomainPtr old = lv_lookup(lv, ctx, uuid, false);
    if (old) {
        virDomainFree(old);
        return nb_error(ctx, 409, NULL, "Instance %s already exists on host %s.", uuid, lv->host);
    }
    if (nb_ctx_failed(ctx))
        return -1;
    char dir[LV_PATH_MAX], cfg[LV_PATH_MAX + 16];
    lv_instance_dir(lv, uuid, dir, sizeof(dir));
    snprintf(cfg, sizeof(cfg), "%s/disk.config", dir);
    /* volumes first: a missing volume file fails the spawn before any
     * local file is made */
    struct lv_volumes vols;
    if (lv_volumes_collect(lv, ctx, inst, &vols) < 0)
        return -1;
    if (nb_mkdir_p(dir) < 0 || chmod(dir, 0755) < 0)
        return nb_error(ctx, 500, NULL, "cannot create %s: %s", dir, strerror(errno));
    if (vols.n > 0 && vols.v[0].boot) {
        if (write_disk_info(ctx, dir,
                            json_pack("{s:b, s:s}", "boot_from_volume", 1, "volume_id",
                                      vols.v[0].volume_id)) < 0)
            return -1;
    } else if (create_local_disk(lv, ctx, inst, dir) < 0) {
        return -1;
    }

    /* config drive */
    /* the API stores "True" or "" (Nova's instance.config_drive) */
    if (nb_bool_from_string(nb_json_str(inst, "config_drive")) == 1 ||
        nb_conf_bool("compute", "force_config_drive", false) ||
        nb_conf_bool("DEFAULT", "force_config_drive", false)) {
        char mac[18];
        lv_mac_for(uuid, mac);
        _cleanup_json_ json_t *nics = json_pack("[{s:s}]", "mac_address", mac);
        if (nb_configdrive_build(ctx, inst, nics, cfg) < 0)
            return -1;
        NB_INFO(LV_LOG, ctx, uuid, "Creating config drive at %s", cfg);
    }
    return start_domain(lv, ctx, inst, &vols);
}

/* Stops a running domain at once (a domain that stopped meanwhile is no
 * failure). 0/-1. */
static int force_off(struct nb_ctx *ctx, virDomainPtr dom, const char *uuid)
{
    if (virDomainIsActive(dom) == 1 && virDomainDestroy(dom) < 0 && virDomainIsActive(dom) == 1)
        return lv_error(ctx, 500, "cannot destroy the domain of instance %s", uuid);
    return 0;
}

int lv_destroy(struct lv *lv, struct nb_ctx *ctx, json_t *inst)
{
    const char *uuid = nb_json_str(inst, "uuid");
    if (!uuid || !nb_is_uuid(uuid))
        return nb_error(ctx, 400, NULL, "destroy: the instance has no valid UUID");
    virDomainPtr dom = lv_lookup(lv, ctx, uuid, false);
    if (!dom && nb_ctx_failed(ctx))
        return -1;
    if (dom) {
        if (force_off(ctx, dom, uuid) < 0) {
            virDomainFree(dom);
            return -1;
        }
        if (virDomainUndefineFlags(dom, VIR_DOMAIN_UNDEFINE_MANAGED_SAVE |
                                            VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA |
                                            VIR_DOMAIN_UNDEFINE_NVRAM) < 0 &&
            virDomainUndefine(dom) < 0) {
            int rc = lv_error(ctx, 500, "cannot undefine the domain of instance %s", uuid);
            virDomainFree(dom);
            return rc;
        }
        virDomainFree(dom);
    }
    char dir[LV_PATH_MAX];
    lv_instance_dir(lv, uuid, dir, sizeof(dir));
    if (nb_rm_rf(dir) < 0)
        return nb_error(ctx, 500, NULL, "cannot remove %s: %s", dir, strerror(errno));
    NB_INFO(LV_LOG, ctx, uuid, "Deleting instance files %s", dir);
    lv_cache_cleanup(lv, ctx);
    return 0;
}

/* Graceful shutdown for up to timeout_s (the shutdown request repeated
 * every 10 s, as Nova does); true when the guest is off. */
static bool clean_shutdown(struct lv *lv, struct nb_ctx *ctx, virDomainPtr dom, const char *uuid,
                           int timeout_s)
{
    double t0 = nb_time_mono(), last = -1;
    while (nb_time_mono() - t0 < timeout_s) {
        int st = lv_dom_state(dom);
        if (st == VIR_DOMAIN_SHUTOFF || virDomainIsActive(dom) == 0) {
            NB_INFO(LV_LOG, ctx, uuid, "Instance shutdown successfully after %.1f seconds.",
                    nb_time_mono() - t0);
            return true;
        }
        if (last < 0 || nb_time_mono() - last >= 10) {
            if (virDomainShutdown(dom) < 0 && virDomainIsActive(dom) == 1)
                NB_DEBUG(LV_LOG, ctx, uuid, "shutdown request failed: %s",
                         virGetLastErrorMessage());
            last = nb_time_mono();
        }
        usleep(100 * 1000);
    }
    NB_INFO(LV_LOG, ctx, uuid, "Instance failed to shutdown in %d seconds on host %s.", timeout_s,
            lv->host);
    return false;
}

int lv_power_off(struct lv *lv, struct nb_ctx *ctx, json_t *inst, int timeout_s)
{
    const char *uuid = nb_json_str(inst, "uuid");
    virDomainPtr dom = lv_lookup(lv, ctx, uuid, true);
    if (!dom)
        return -1;
    int rc = 0;
    if (virDomainIsActive(dom) == 1) {
        bool off = lv_dom_state(dom) == VIR_DOMAIN_RUNNING && timeout_s > 0 &&
                   clean_shutdown(lv, ctx, dom, uuid, timeout_s);
        if (!off && virDomainDestroy(dom) < 0 && virDomainIsActive(dom) == 1)
            rc = lv_error(ctx, 500, "cannot power off instance %s", uuid);
    }
    virDomainFree(dom);
    return rc;
}

/* Nova's _hard_reboot: destroy, regenerate the XML from the database,
 * define, start. */
static int hard_reboot(struct lv *lv, struct nb_ctx *ctx, json_t *inst)
{
    const char *uuid = nb_json_str(inst, "uuid");
    /* a missing volume file fails the start before the guest is touched */
    struct lv_volumes vols;
    if (lv_volumes_collect(lv, ctx, inst, &vols) < 0)
        return -1;
    virDomainPtr dom = lv_lookup(lv, ctx, uuid, false);
    if (!dom && nb_ctx_failed(ctx))
        return -1;
    if (dom) {
        if (force_off(ctx, dom, uuid) < 0) {
            virDomainFree(dom);
            return -1;
        }
        if (virDomainHasManagedSaveImage(dom, 0) == 1)
            virDomainManagedSaveRemove(dom, 0);
        virDomainFree(dom);
    }
    return start_domain(lv, ctx, inst, &vols);
}

int lv_power_on(struct lv *lv, struct nb_ctx *ctx, json_t *inst)
{
    return hard_reboot(lv, ctx, inst);
}

int lv_reboot(struct lv *lv, struct nb_ctx *ctx, json_t *inst, bool hard)
{
    const char *uuid = nb_json_str(inst, "uuid");
    if (!hard) {
        virDomainPtr dom = lv_lookup(lv, ctx, uuid, true);
        if (!dom)
            return -1;
        int wait = (int)nb_conf_int("libvirt", "wait_soft_reboot_seconds", 120);
        bool ok =
            lv_dom_state(dom) == VIR_DOMAIN_RUNNING && clean_shutdown(lv, ctx, dom, uuid, wait);
        if (ok && lv_plug_vifs(ctx, inst) == 0 && virDomainCreate(dom) == 0) {
            virDomainFree(dom);
            NB_INFO(LV_LOG, ctx, uuid, "Instance soft rebooted successfully.");
            return 0;
        }
        virDomainFree(dom);
        NB_WARN(LV_LOG, ctx, uuid, "Failed to soft reboot instance. Trying hard reboot.");
    }
    if (hard_reboot(lv, ctx, inst) < 0)
        return -1;
    NB_INFO(LV_LOG, ctx, uuid, "Instance rebooted successfully.");
    return 0;
}

/* The one-call operations: look the domain up, call op, report libvirt's
 * error as "cannot <what> instance <uuid>: <reason>". */
static int domain_op(struct lv *lv, struct nb_ctx *ctx, json_t *inst, int (*op)(virDomainPtr),
                     const char *what)
{
    const char *uuid = nb_json_str(inst, "uuid");
    virDomainPtr dom = lv_lookup(lv, ctx, uuid, true);
    if (!dom)
        return -1;
    int rc = op(dom) < 0 ? lv_error(ctx, 500, "cannot %s instance %s", what, uuid) : 0;
    virDomainFree(dom);
    return rc;
}

static int managed_save(virDomainPtr dom)
{
    return virDomainManagedSave(dom, 0);
}

/* Starts the domain (from its managed save image, if any) unless it runs. */
static int create_if_inactive(virDomainPtr dom)
{
    return virDomainIsActive(dom) == 1 ? 0 : virDomainCreate(dom);
}

int lv_pause(struct lv *lv, struct nb_ctx *ctx, json_t *inst, bool pause)
{
    return pause ? domain_op(lv, ctx, inst, virDomainSuspend, "pause")
                 : domain_op(lv, ctx, inst, virDomainResume, "unpause");
}

int lv_suspend(struct lv *lv, struct nb_ctx *ctx, json_t *inst)
{
    return domain_op(lv, ctx, inst, managed_save, "suspend");
}

int lv_resume(struct lv *lv, struct nb_ctx *ctx, json_t *inst)
{
    if (lv_plug_vifs(ctx, inst) < 0)
        return -1;
    return domain_op(lv, ctx, inst, create_if_inactive, "resume");
}

int lv_get_info(struct lv *lv, struct nb_ctx *ctx, const char *uuid, struct nb_guest_info *info)
{
    virDomainPtr dom = lv_lookup(lv, ctx, uuid, true);
    if (!dom)
        return -1;
    info->power_state = lv_power_state(lv_dom_state(dom));
    virDomainFree(dom);
    return 0;
}

json_t *lv_list(struct lv *lv, struct nb_ctx *ctx)
{
    virConnectPtr conn = lv_conn(lv, ctx);
    if (!conn)
        return NULL;
    virDomainPtr *doms = NULL;
    int n = virConnectListAllDomains(conn, &doms, 0);
    if (n < 0) {
        lv_error(ctx, 503, "cannot list the domains of host %s", lv->host);
        return NULL;
    }
    json_t *out = json_object();
    for (int i = 0; i < n; i++) {
        char uuid[VIR_UUID_STRING_BUFLEN];
        const char *name = virDomainGetName(doms[i]);
        if (virDomainGetUUIDString(doms[i], uuid) == 0 && name && !strcmp(name, uuid))
            json_object_set_new(out, uuid, json_integer(lv_power_state(lv_dom_state(doms[i]))));
        virDomainFree(doms[i]);
    }
    free(doms);
    return out;
}

char *lv_console_log(struct lv *lv, struct nb_ctx *ctx, const char *uuid)
{
    char path[LV_PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/%s/console.log", lv->instances_path, uuid ? uuid : "");
    int fd = uuid && nb_is_uuid(uuid) ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    if (fd < 0) {
        nb_error(ctx, 404, NULL, "Guest does not have a console available.");
        return NULL;
    }
    struct stat st;
    off_t start = 0;
    if (fstat(fd, &st) == 0 && st.st_size > MAX_CONSOLE_BYTES)
        start = st.st_size - MAX_CONSOLE_BYTES;
    char *buf = malloc(MAX_CONSOLE_BYTES + 1);
    ssize_t n = pread(fd, buf, MAX_CONSOLE_BYTES, start);
    close(fd);
    if (n < 0)
        n = 0;
    /* The API returns JSON strings: keep text, mark other bytes. */
    size_t w = 0;
    for (ssize_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)buf[i];
        if (c == '\n' || c == '\r' || c == '\t' || (c >= 0x20 && c < 0x7f))
            buf[w++] = (char)c;
        else if (c >= 0x80)
            buf[w++] = '?';
    }
    buf[w] = '\0';
    return buf;
}
