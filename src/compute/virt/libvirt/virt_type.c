/* virt_type.c - which accelerator the guests get: [libvirt] virt_type.
 *
 * kvm and qemu are taken as given (kvm is refused when libvirt reports no
 * KVM for this host). auto verifies instead of assuming: a /dev/kvm that
 * opens does not mean KVM runs guests. Nested KVM on some clouds starts a
 * guest that never executes, and on others QEMU dies setting the MSRs of
 * the host-model CPU ("failed to set MSR 0x10a"), while a guest with QEMU's
 * default CPU runs. So the probe is a guest built as real guests are: the
 * same lv_guest_spec and lv_domain_xml (machine type, SeaBIOS, the guest
 * CPU of cpu.c, virtio disk and NIC, serial console), only its disk (a
 * 512-byte boot sector that enters protected mode as boot loaders do,
 * writes a line to the serial port and halts) and its memory differ. It
 * runs under KVM and under TCG; KVM is chosen only if its probe printed
 * the line within [libvirt] kvm_probe_timeout seconds (default 10). What
 * was compared (the CPU, both times, QEMU's error) is logged with the
 * choice.
 *
 * A faithful probe can still be outrun by the host (KVM breaks later, a
 * guest with more vCPUs fails): a guest start that fails under KVM with a
 * KVM-level QEMU error (lv_is_kvm_failure) fails that build with the cause
 * named, and under auto the next start re-runs the decision with the
 * failed guest's vCPU count, falling back to TCG with a WARNING. */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/proc.h"
#include "common/util.h"
#include "compute/virt/libvirt/lv.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define PROBE_LINE "NUBO-KVM-PROBE-OK"
#define PROBE_MEMORY_MB 32
#define PROBE_DISK_BYTES (1 << 20)

/* Boot sector: from real mode into 32-bit protected mode (as SYSLINUX and
 * every kernel's loader go), an IRET there, then PROBE_LINE on COM1 (port
 * 0x3f8) and halt. Nested KVM on some hosts runs real mode but cannot
 * emulate the protected-mode IRET ("KVM internal error. Suberror: 1",
 * the guest paused): a real-mode-only probe passed there while every real
 * guest then stopped in its boot loader. Loaded at 0x7c00. */
static void probe_sector(unsigned char sec[512])
{
    static const unsigned char code[] = {
        0xFA,                         /* 00 cli */
        0x31, 0xC0,                   /* 01 xor ax, ax */
        0x8E, 0xD8,                   /* 03 mov ds, ax */
        0x8E, 0xD0,                   /* 05 mov ss, ax */
        0xBC, 0x00, 0x7C,             /* 07 mov sp, 0x7c00 */
        0x0F, 0x01, 0x16, 0x60, 0x7C, /* 0a lgdt [0x7c60] */
        0x0F, 0x20, 0xC0,             /* 0f mov eax, cr0 */
        0x0C, 0x01,                   /* 12 or al, 1 (PE) */
        0x0F, 0x22, 0xC0,             /* 14 mov cr0, eax */
        0xEA, 0x1C, 0x7C, 0x08, 0x00, /* 17 jmp 0x08:0x7c1c */
        /* 32-bit code from here */
        0x66, 0xB8, 0x10, 0x00,       /* 1c mov ax, 0x10 */
        0x8E, 0xD8,                   /* 20 mov ds, ax */
        0x8E, 0xC0,                   /* 22 mov es, ax */
        0x8E, 0xD0,                   /* 24 mov ss, ax */
        0xBC, 0x00, 0x7C, 0x00, 0x00, /* 26 mov esp, 0x7c00 */
        0x9C,                         /* 2b pushfd */
        0x6A, 0x08,                   /* 2c push 0x08 */
        0x68, 0x34, 0x7C, 0x00, 0x00, /* 2e push 0x7c34 */
        0xCF,                         /* 33 iretd (to 0x7c34) */
        0x66, 0xBA, 0xF8, 0x03,       /* 34 mov dx, 0x3f8 */
        0xBE, 0x66, 0x7C, 0x00, 0x00, /* 38 mov esi, 0x7c66 (the message) */
        0xAC,                         /* 3d next: lodsb */
        0x84, 0xC0,                   /* 3e test al, al */
        0x74, 0x03,                   /* 40 jz done */
        0xEE,                         /* 42 out dx, al */
        0xEB, 0xF8,                   /* 43 jmp next */
        0xF4,                         /* 45 done: hlt */
        0xEB, 0xFD,                   /* 46 jmp done */
        /* 48 GDT: null, code (0x08) and data (0x10), flat 4 GiB */
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* 48 null */
        0xFF, 0xFF, 0x00, 0x00, 0x00, 0x9A, 0xCF, 0x00, /* 50 code */
        0xFF, 0xFF, 0x00, 0x00, 0x00, 0x92, 0xCF, 0x00, /* 58 data */
        0x17, 0x00, 0x48, 0x7C, 0x00, 0x00,             /* 60 GDT limit 23, base 0x7c48 */
    };
    memset(sec, 0, 512);
    memcpy(sec, code, sizeof(code));
    _Static_assert(sizeof(code) == 0x66, "the message is read at 0x7c66");
    memcpy(sec + sizeof(code), PROBE_LINE "\r\n", sizeof(PROBE_LINE "\r\n"));
    sec[510] = 0x55;
    sec[511] = 0xAA;
}

static bool libvirt_offers_kvm(virConnectPtr conn)
{
    _cleanup_free_ char *caps = virConnectGetCapabilities(conn);
    return caps && strstr(caps, "<domain type='kvm'");
}

char *lv_probe_xml(const struct lv *lv, const char *virt_type, const struct lv_cpu *cpu,
                   const char *dir, int vcpus)
{
    char uuid[NB_UUID_LEN], name[64], mac[18], disk[LV_PATH_MAX + 32], serial[LV_PATH_MAX + 32];
    nb_uuid(uuid);
    lv_mac_for(uuid, mac);
    /* not named by a UUID: the driver's listing and events leave it alone */
    snprintf(name, sizeof(name), "nubo-probe-%s-%d", virt_type, (int)getpid());
    snprintf(disk, sizeof(disk), "%s/boot.img", dir);
    snprintf(serial, sizeof(serial), "%s/serial.log", dir);
    _cleanup_json_ json_t *inst =
        json_pack("{s:s, s:s, s:{s:s, s:i, s:i}}", "uuid", uuid, "name", name, "flavor", "name",
                  "virt-type-probe", "memory_mb", PROBE_MEMORY_MB, "vcpus", vcpus > 0 ? vcpus : 1);
    struct lv_domain_spec spec;
    lv_guest_spec(lv, virt_type, cpu, serial, mac, &spec);
    spec.name = name;
    spec.disks[spec.ndisks++] = (struct lv_disk){
        .path = disk, .format = "raw", .device = "disk", .bus = "virtio", .target = "vda"};
    return lv_domain_xml(inst, &spec);
}

/* Boots the probe under virt_type with cpu. true when it printed its line
 * (*secs: how long that took); why says what was seen either way. */
static bool run_probe(struct lv *lv, virConnectPtr conn, const char *virt_type,
                      const struct lv_cpu *cpu, int vcpus, double *secs, char *why, size_t whylen)
{
    char dir[LV_PATH_MAX + 16], disk[LV_PATH_MAX + 32], serial[LV_PATH_MAX + 32];
    snprintf(dir, sizeof(dir), "%s/_probe-%s", lv->instances_path, virt_type);
    snprintf(disk, sizeof(disk), "%s/boot.img", dir);
    snprintf(serial, sizeof(serial), "%s/serial.log", dir);
    unsigned char sec[512];
    probe_sector(sec);
    nb_rm_rf(dir);
    /* SeaBIOS boots no virtio disk of a single sector: 1 MiB, sparse */
    if (nb_mkdir_p(dir) < 0 || chmod(dir, 0755) < 0 ||
        nb_write_file(disk, (const char *)sec, sizeof(sec), 0644) < 0 ||
        truncate(disk, PROBE_DISK_BYTES) < 0) {
        snprintf(why, whylen, "cannot write the probe disk in %.400s", dir);
        return false;
    }
    _cleanup_free_ char *xml = lv_probe_xml(lv, virt_type, cpu, dir, vcpus);
    double t0 = nb_time_mono();
    virDomainPtr dom = virDomainCreateXML(conn, xml, 0);
    if (!dom) {
        snprintf(why, whylen, "did not start: %s", virGetLastErrorMessage());
        for (char *p = why; *p; p++)
            if (*p == '\n')
                *p = ' '; /* QEMU's lines, on the one log line */
        nb_rm_rf(dir);
        return false;
    }
    double timeout = nb_conf_double("libvirt", "kvm_probe_timeout", 10);
    bool ok = false, paused = false;
    int state = 0, reason = 0;
    while (nb_time_mono() - t0 < timeout) {
        _cleanup_free_ char *out = nb_read_file(serial, NULL);
        if (out && strstr(out, PROBE_LINE)) {
            ok = true;
            break;
        }
        /* QEMU pauses a guest the accelerator failed ("KVM internal
         * error"): no need to wait out the timeout */
        if (virDomainGetState(dom, &state, &reason, 0) == 0 && state == VIR_DOMAIN_PAUSED) {
            paused = true;
            break;
        }
        usleep(50 * 1000);
    }
    *secs = nb_time_mono() - t0;
    if (ok)
        snprintf(why, whylen, "ran in %.2f s", *secs);
    else if (paused)
        snprintf(why, whylen,
                 "was paused by QEMU after %.2f s before printing (paused reason %d: the "
                 "accelerator failed the guest's code, e.g. nested KVM that cannot emulate "
                 "a protected-mode IRET; QEMU's log says which)",
                 *secs, reason);
    else
        snprintf(why, whylen,
                 "started but printed nothing in %.0f s (an accelerator that cannot run "
                 "guests, e.g. broken nested virtualisation)",
                 timeout);
    virDomainDestroy(dom);
    virDomainFree(dom);
    nb_rm_rf(dir);
    return ok;
}

/* auto: probes KVM (when offered) and TCG with the guest CPU of each and
 * picks; the choice and its evidence are logged. */
static int decide_auto(struct lv *lv, struct nb_ctx *ctx, virConnectPtr conn, int vcpus,
                       char vt[16], struct lv_cpu *cpu)
{
    struct lv_cpu kcpu, qcpu;
    char kwhy[1200] = "", qwhy[1200] = "", kdesc[256] = "", qdesc[256];
    double ksecs = 0, qsecs = 0;
    bool kvm_ok = false, offered = libvirt_offers_kvm(conn);
    if (!offered) {
        snprintf(kwhy, sizeof(kwhy), "libvirt offers no KVM on this host (/dev/kvm %s)",
                 access("/dev/kvm", F_OK) == 0 ? "exists but is not usable" : "is missing");
    } else if (lv_guest_cpu(lv, ctx, "kvm", &kcpu) < 0) {
        snprintf(kwhy, sizeof(kwhy), "the guest CPU cannot be had under KVM: %.1000s",
                 nb_ctx_message(ctx));
        nb_ctx_clear_error(ctx); /* handled: the probe goes on without KVM */
    } else {
        char r[600];
        lv_cpu_describe(&kcpu, kdesc, sizeof(kdesc));
        kvm_ok = run_probe(lv, conn, "kvm", &kcpu, vcpus, &ksecs, r, sizeof(r));
        snprintf(kwhy, sizeof(kwhy), "under KVM (cpu %s) it %s", kdesc, r);
    }
    if (lv_guest_cpu(lv, ctx, "qemu", &qcpu) < 0)
        return -1; /* no CPU TCG can run: a configuration error either way */
    lv_cpu_describe(&qcpu, qdesc, sizeof(qdesc));
    bool probed_kvm = kdesc[0] != '\0';
    bool tcg_ok = false;
    if (probed_kvm) {
        char r[600];
        tcg_ok = run_probe(lv, conn, "qemu", &qcpu, vcpus, &qsecs, r, sizeof(r));
        snprintf(qwhy, sizeof(qwhy), "; under TCG (cpu %s) it %s", qdesc, r);
    }
    const char *what = "the probe guest (machine pc, SeaBIOS, virtio disk and NIC, serial "
                       "console, as every guest)";
    if (kvm_ok) {
        nb_strlcpy(vt, "kvm", 16);
        *cpu = kcpu;
        NB_INFO(LV_LOG, ctx, NULL, "virt_type auto: kvm chosen: %s of %d vCPU(s): %s%s", what,
                vcpus, kwhy, qwhy);
        return 0;
    }
    nb_strlcpy(vt, "qemu", 16);
    *cpu = qcpu;
    if (!offered)
        NB_INFO(LV_LOG, ctx, NULL, "virt_type auto: qemu (TCG, cpu %s) chosen: %s", qdesc, kwhy);
    else if (!probed_kvm)
        NB_WARN(LV_LOG, ctx, NULL, "virt_type auto: qemu (TCG, cpu %s) chosen: %s", qdesc, kwhy);
    else if (tcg_ok)
        NB_WARN(LV_LOG, ctx, NULL,
                "virt_type auto: qemu (TCG) chosen: KVM cannot run this host's guests: %s of "
                "%d vCPU(s): %s%s",
                what, vcpus, kwhy, qwhy);
    else
        NB_WARN(LV_LOG, ctx, NULL,
                "virt_type auto: qemu (TCG) chosen, but %s of %d vCPU(s) ran under neither "
                "accelerator, so guests may not start either: %s%s",
                what, vcpus, kwhy, qwhy);
    return 0;
}

/* The decision for wanted (kvm|qemu|auto) into vt and cpu. 0/-1. */
static int decide(struct lv *lv, struct nb_ctx *ctx, const char *wanted, int vcpus, char vt[16],
                  struct lv_cpu *cpu)
{
    virConnectPtr conn = lv_conn(lv, ctx);
    if (!conn)
        return -1;
    if (!strcmp(wanted, "auto"))
        return decide_auto(lv, ctx, conn, vcpus, vt, cpu);
    if (strcmp(wanted, "kvm") != 0 && strcmp(wanted, "qemu") != 0)
        return nb_error(ctx, 500, NULL, "[libvirt] virt_type must be kvm, qemu or auto, not '%s'",
                        wanted);
    if (!strcmp(wanted, "kvm") && !libvirt_offers_kvm(conn))
        return nb_error(ctx, 500, NULL,
                        "[libvirt] virt_type = kvm, but libvirt offers no KVM on host %s "
                        "(is /dev/kvm present and usable?)",
                        lv->host);
    if (lv_guest_cpu(lv, ctx, wanted, cpu) < 0)
        return -1;
    nb_strlcpy(vt, wanted, 16);
    char desc[256];
    NB_INFO(LV_LOG, ctx, NULL, "virt_type %s%s, as configured; guest cpu %s", wanted,
            !strcmp(wanted, "qemu") ? " (TCG)" : "", lv_cpu_describe(cpu, desc, sizeof(desc)));
    return 0;
}

int lv_resolve_virt_type(struct lv *lv, struct nb_ctx *ctx, const char *wanted)
{
    char vt[16];
    struct lv_cpu cpu;
    if (decide(lv, ctx, wanted, 1, vt, &cpu) < 0)
        return -1;
    pthread_mutex_lock(&lv->vt_lock);
    nb_strlcpy(lv->virt_type, vt, sizeof(lv->virt_type));
    lv->cpu = cpu;
    lv->virt_type_auto = !strcmp(wanted, "auto");
    lv->recheck_pending = false;
    pthread_mutex_unlock(&lv->vt_lock);
    return 0;
}

bool lv_is_kvm_failure(const char *msg)
{
    if (!msg)
        return false;
    bool died = strstr(msg, "closed the monitor") || strstr(msg, "while connecting to monitor");
    return died && (strcasestr(msg, "kvm") || strstr(msg, "MSR"));
}

void lv_kvm_failed(struct lv *lv, int vcpus)
{
    pthread_mutex_lock(&lv->vt_lock);
    if (lv->virt_type_auto && !strcmp(lv->virt_type, "kvm")) {
        lv->recheck_pending = true;
        lv->recheck_vcpus = vcpus > 0 ? vcpus : 1;
    }
    pthread_mutex_unlock(&lv->vt_lock);
}

int lv_current_virt(struct lv *lv, struct nb_ctx *ctx, char virt_type[16], struct lv_cpu *cpu)
{
    pthread_mutex_lock(&lv->vt_lock);
    int rc = 0;
    if (lv->recheck_pending) {
        NB_WARN(LV_LOG, ctx, NULL,
                "virt_type auto: KVM failed to start a guest of %d vCPU(s) on host %s; "
                "re-checking the choice of KVM before the next start",
                lv->recheck_vcpus, lv->host);
        char vt[16];
        struct lv_cpu c;
        rc = decide(lv, ctx, "auto", lv->recheck_vcpus, vt, &c);
        if (rc == 0) {
            nb_strlcpy(lv->virt_type, vt, sizeof(lv->virt_type));
            lv->cpu = c;
            lv->recheck_pending = false;
        }
    }
    nb_strlcpy(virt_type, lv->virt_type, 16);
    *cpu = lv->cpu;
    pthread_mutex_unlock(&lv->vt_lock);
    return rc;
}
