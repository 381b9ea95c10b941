/* virt_type.c - which accelerator the guests get: [libvirt] virt_type.
 *
 * kvm and qemu are taken as given (kvm is refused when libvirt reports no
 * KVM for this host). auto verifies instead of assuming: a /dev/kvm that
 * opens does not mean KVM runs guests (nested KVM on some clouds starts a
 * guest that never executes). So when libvirt offers KVM, auto boots a probe
 * guest under KVM: a 512-byte boot sector that writes a line to the serial
 * port and halts, behind the same SeaBIOS real guests use. KVM is chosen
 * only if that line appears within [libvirt] kvm_probe_timeout seconds
 * (default 10); otherwise TCG (virt_type qemu). The choice and its evidence
 * are logged. */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/log.h"
#include "common/proc.h"
#include "common/util.h"
#include "compute/virt/libvirt/lv.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PROBE_LINE "NUBO-KVM-PROBE-OK"

/* Real-mode boot sector: print PROBE_LINE on COM1 (port 0x3f8), halt. */
static void probe_sector(unsigned char sec[512])
{
    static const unsigned char code[] = {
        0x31, 0xC0,       /* xor ax, ax */
        0x8E, 0xD8,       /* mov ds, ax */
        0xFC,             /* cld */
        0xBA, 0xF8, 0x03, /* mov dx, 0x3f8 */
        0xBE, 0x17, 0x7C, /* mov si, 0x7c17 (the message) */
        0xAC,             /* next: lodsb */
        0x84, 0xC0,       /* test al, al */
        0x74, 0x03,       /* jz done */
        0xEE,             /* out dx, al */
        0xEB, 0xF8,       /* jmp next */
        0xFA,             /* done: cli */
        0xF4,             /* hlt */
        0xEB, 0xFD,       /* jmp hlt */
    };
    memset(sec, 0, 512);
    memcpy(sec, code, sizeof(code));
    memcpy(sec + sizeof(code), PROBE_LINE "\r\n", sizeof(PROBE_LINE "\r\n"));
    sec[510] = 0x55;
    sec[511] = 0xAA;
}

static bool libvirt_offers_kvm(virConnectPtr conn)
{
    _cleanup_free_ char *caps = virConnectGetCapabilities(conn);
    return caps && strstr(caps, "<domain type='kvm'");
}

/* Boots the probe under KVM. true when it ran; why says what was seen. */
static bool kvm_probe(struct lv *lv, virConnectPtr conn, char *why, size_t whylen)
{
    char dir[LV_PATH_MAX + 16], disk[LV_PATH_MAX + 32], serial[LV_PATH_MAX + 32];
    snprintf(dir, sizeof(dir), "%s/_probe", lv->instances_path);
    snprintf(disk, sizeof(disk), "%s/boot.img", dir);
    snprintf(serial, sizeof(serial), "%s/serial.log", dir);
    unsigned char sec[512];
    probe_sector(sec);
    nb_rm_rf(dir);
    if (nb_mkdir_p(dir) < 0 || chmod(dir, 0755) < 0 ||
        nb_write_file(disk, (const char *)sec, sizeof(sec), 0644) < 0) {
        snprintf(why, whylen, "cannot write the probe disk in %.400s", dir);
        return false;
    }
    char name[64];
    snprintf(name, sizeof(name), "nubo-kvm-probe-%d", (int)getpid());
    _cleanup_free_ char *xml = nb_strdup_printf(
        "<domain type='kvm'><name>%s</name><memory unit='MiB'>16</memory><vcpu>1</vcpu>"
        "<os><type arch='x86_64' machine='pc'>hvm</type><boot dev='hd'/></os>"
        "<devices><disk type='file' device='disk'><driver name='qemu' type='raw'/>"
        "<source file='%s'/><target dev='hda' bus='ide'/></disk>"
        "<serial type='file'><source path='%s'/></serial><memballoon model='none'/>"
        "</devices></domain>",
        name, disk, serial);
    double t0 = nb_time_mono();
    virDomainPtr dom = virDomainCreateXML(conn, xml, 0);
    if (!dom) {
        snprintf(why, whylen, "the KVM probe guest did not start: %s", virGetLastErrorMessage());
        nb_rm_rf(dir);
        return false;
    }
    double timeout = nb_conf_double("libvirt", "kvm_probe_timeout", 10);
    bool ok = false;
    while (nb_time_mono() - t0 < timeout) {
        _cleanup_free_ char *out = nb_read_file(serial, NULL);
        if (out && strstr(out, PROBE_LINE)) {
            ok = true;
            break;
        }
        usleep(50 * 1000);
    }
    if (ok)
        snprintf(why, whylen, "a KVM probe guest ran in %.2f s", nb_time_mono() - t0);
    else
        snprintf(why, whylen,
                 "a KVM probe guest started but printed nothing in %.0f s (a KVM that cannot "
                 "run guests, e.g. broken nested virtualisation)",
                 timeout);
    virDomainDestroy(dom);
    virDomainFree(dom);
    nb_rm_rf(dir);
    return ok;
}

int lv_resolve_virt_type(struct lv *lv, struct nb_ctx *ctx, const char *wanted)
{
    virConnectPtr conn = lv_conn(lv, ctx);
    if (!conn)
        return -1;
    if (!strcmp(wanted, "qemu")) {
        nb_strlcpy(lv->virt_type, "qemu", sizeof(lv->virt_type));
        NB_INFO(LV_LOG, ctx, NULL, "virt_type qemu (TCG), as configured");
        return 0;
    }
    bool offered = libvirt_offers_kvm(conn);
    if (!strcmp(wanted, "kvm")) {
        if (!offered)
            return nb_error(ctx, 500, NULL,
                            "[libvirt] virt_type = kvm, but libvirt offers no KVM on host %s "
                            "(is /dev/kvm present and usable?)",
                            lv->host);
        nb_strlcpy(lv->virt_type, "kvm", sizeof(lv->virt_type));
        NB_INFO(LV_LOG, ctx, NULL, "virt_type kvm, as configured");
        return 0;
    }
    if (strcmp(wanted, "auto") != 0)
        return nb_error(ctx, 500, NULL, "[libvirt] virt_type must be kvm, qemu or auto, not '%s'",
                        wanted);
    char why[512];
    if (!offered) {
        nb_strlcpy(lv->virt_type, "qemu", sizeof(lv->virt_type));
        NB_INFO(LV_LOG, ctx, NULL,
                "virt_type auto: qemu (TCG) chosen: libvirt offers no KVM on this host "
                "(/dev/kvm %s)",
                access("/dev/kvm", F_OK) == 0 ? "exists but is not usable" : "is missing");
        return 0;
    }
    if (kvm_probe(lv, conn, why, sizeof(why))) {
        nb_strlcpy(lv->virt_type, "kvm", sizeof(lv->virt_type));
        NB_INFO(LV_LOG, ctx, NULL, "virt_type auto: kvm chosen: %s", why);
    } else {
        nb_strlcpy(lv->virt_type, "qemu", sizeof(lv->virt_type));
        NB_WARN(LV_LOG, ctx, NULL, "virt_type auto: qemu (TCG) chosen: %s", why);
    }
    return 0;
}
