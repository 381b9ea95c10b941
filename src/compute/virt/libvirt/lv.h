/* lv.h - what the libvirt driver's files share.
 *
 * cpu.c      the guest CPU: [libvirt] cpu_mode, cpu_models,
 *            cpu_model_extra_flags, resolved per accelerator
 * conn.c     the connection (reopened when libvirtd restarts), libvirt's
 *            errors and the lifecycle-event thread
 * driver.c   the vtable and the driver's start; options nubo ignores
 * guest.c    spawn, power operations, destroy, guest state
 * host.c     host capabilities and capacity (host_info)
 * imagecache.c  instances/_base: images fetched once, verified by sha512;
 *            instance disks on top of them; unused bases removed
 * migrate.c  live migration prechecks: migration_info, check_cpu, the
 *            shared storage probe, check_migration_target
 * migrate_disks.c  a live migration's disks: migration_disks,
 *            pre_live_migration, post/rollback on either side
 * migrate_run.c  live_migrate: libvirt's peer-to-peer migration, watched
 * virt_type.c   [libvirt] virt_type = auto: which accelerator really runs
 *            guests (a probe guest built as real guests are), re-checked
 *            after a KVM-level start failure
 * volume.c   volumes (block_device_mapping) as guest disks: the disks of
 *            a domain start, hot-plug attach/detach; snapshot of the root
 * xml.c      the domain XML, generated from the instance's database state
 * resize.c   cold migration and resize: the disks moved aside, copied or
 *            uploaded to the destination, the guest defined there
 * rebuild.c  rebuild, instance_on_disk and destroy_evacuated (evacuation) */
#ifndef NB_VIRT_LV_H
#define NB_VIRT_LV_H

#include "common/ctx.h"
#include "compute/virt/driver.h"

#include <jansson.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <pthread.h>
#include <stdbool.h>

struct lv_volumes;

#define LV_LOG "nubo.compute.virt.libvirt"
#define LV_PATH_MAX 1024
#define LV_MAX_VOLUMES 25 /* vda..vdy; the domain adds a local root and a config drive */
#define LV_MAX_CPU_FEATURES 32

/* The guest CPU: the <cpu> element every guest (and the virt_type probe)
 * gets. mode "" means no <cpu> element (QEMU's default model). */
struct lv_cpu_feature {
    char name[48];
    bool disable; /* policy 'disable' ("-flag"), else 'require' */
};
struct lv_cpu {
    char mode[24];  /* "", "host-model", "host-passthrough", "custom" */
    char model[64]; /* custom: the model, as libvirt spells it */
    struct lv_cpu_feature features[LV_MAX_CPU_FEATURES];
    int nfeatures;
};

struct lv {
    char host[256];
    char uri[256];
    /* vt_lock guards virt_type, cpu and the re-check fields: a KVM-level
     * start failure makes the next start re-run the auto decision */
    pthread_mutex_t vt_lock;
    char virt_type[16];   /* "kvm" or "qemu", resolved */
    struct lv_cpu cpu;    /* the guest CPU under virt_type */
    bool virt_type_auto;  /* [libvirt] virt_type = auto */
    bool recheck_pending; /* KVM failed a guest: re-run the decision */
    int recheck_vcpus;    /* the failed guest's vCPUs, for the probe */
    char images_type[16]; /* "qcow2" or "raw" */
    char cache_mode[16];  /* disk cache: "none" when O_DIRECT works, else "writeback" */
    char instances_path[LV_PATH_MAX];

    pthread_mutex_t conn_lock; /* guards conn (re)opening */
    virConnectPtr conn;
    int event_cb_id;

    pthread_t event_thread;
    bool event_running, event_stop;
    void (*on_event)(void *opaque, const char *host, const char *uuid, int power_state);
    void *on_event_opaque;

    const struct nb_virt_image_source *images; /* set by the agent; NULL: none yet */

    bool no_post_copy; /* QEMU refused post-copy once: later migrations go without */

    pthread_mutex_t cache_lock; /* instances/_base */
    json_t *cache_pins;         /* base name -> spawns between fetch and disk.info (cache_lock) */
};

/* conn.c */
/* A live connection (reopened if it died), or NULL after nb_error 503
 * "Connection to the hypervisor is broken on host: <host>" + libvirt's
 * reason. Borrowed; valid until the next reopen. */
virConnectPtr lv_conn(struct lv *lv, struct nb_ctx *ctx);
/* Records libvirt's last error: "<what>: <libvirt message>". -1. */
int lv_error(struct nb_ctx *ctx, int status, const char *what, ...)
    __attribute__((format(printf, 3, 4)));
/* Nova's power_state for a libvirt domain state. */
int lv_power_state(int vir_state);
/* libvirt's errors are not printed (they are read where they matter). */
void lv_errors_silence(void);
/* Starts the thread running libvirt's event loop (registered once per
 * process). 0/-1. */
int lv_events_start(struct lv *lv);
/* Stops that thread and closes the connection. */
void lv_conn_close(struct lv *lv);
/* The domain of instance uuid (caller frees with virDomainFree), or NULL:
 * with 404 recorded if must, else with ctx untouched when it does not
 * exist (nb_ctx_status(ctx) set only when libvirt is unreachable). */
virDomainPtr lv_lookup(struct lv *lv, struct nb_ctx *ctx, const char *uuid, bool must);
/* virDomainGetState's state, VIR_DOMAIN_NOSTATE when it cannot be read. */
int lv_dom_state(virDomainPtr dom);

/* guest.c */
int lv_spawn(struct lv *lv, struct nb_ctx *ctx, json_t *inst);
int lv_destroy(struct lv *lv, struct nb_ctx *ctx, json_t *inst);
int lv_power_on(struct lv *lv, struct nb_ctx *ctx, json_t *inst);
int lv_power_off(struct lv *lv, struct nb_ctx *ctx, json_t *inst, int timeout_s);
int lv_reboot(struct lv *lv, struct nb_ctx *ctx, json_t *inst, bool hard);
int lv_pause(struct lv *lv, struct nb_ctx *ctx, json_t *inst, bool pause);
int lv_suspend(struct lv *lv, struct nb_ctx *ctx, json_t *inst);
int lv_resume(struct lv *lv, struct nb_ctx *ctx, json_t *inst);
int lv_get_info(struct lv *lv, struct nb_ctx *ctx, const char *uuid, struct nb_guest_info *info);
json_t *lv_list(struct lv *lv, struct nb_ctx *ctx);
char *lv_console_log(struct lv *lv, struct nb_ctx *ctx, const char *uuid);
/* diag.c: a guest's diagnostics (driver.h's diagnostics op). New JSON
 * object, or NULL with the error on ctx. */
json_t *lv_diagnostics(struct lv *lv, struct nb_ctx *ctx, const char *uuid, bool standard);
/* The domain XML inst starts with now under virt_type and cpu: its local
 * disk (instances/<uuid>/disk, as disk.info says) or boot volume, its
 * volumes (vols), its config drive, its console. New string, or NULL with
 * 500 when its local disk is missing. */
char *lv_instance_xml(struct lv *lv, struct nb_ctx *ctx, const json_t *inst,
                      const struct lv_volumes *vols, const char *virt_type,
                      const struct lv_cpu *cpu);

/* rebuild.c: the vtable's rebuild, instance_on_disk and destroy_evacuated
 * (driver.h) */
int lv_op_rebuild(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host, json_t *inst,
                  bool keep_disk);
int lv_op_instance_on_disk(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                           json_t *inst, bool *on_disk);
int lv_op_destroy_evacuated(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                            json_t *inst, bool destroy_disks);

/* host.c */
int lv_host_info(struct lv *lv, struct nb_ctx *ctx, struct nb_host_info *info);

/* imagecache.c */
struct lv_base {
    char path[LV_PATH_MAX + 64];
    char format[16]; /* real format of the cached file: "raw" / "qcow2" */
    unsigned long long virtual_size;
};
/* Makes sure image_id is in instances/_base (fetched from the image
 * service, sha512 checked against the image's os_hash_value, real format
 * inspected); fills *base. 0/-1. */
int lv_cache_fetch(struct lv *lv, struct nb_ctx *ctx, const char *image_id, struct lv_base *base);
/* lv_cache_fetch pins the base it returns: the cleanup leaves it alone until
 * the caller has written the disk.info that names it (or given up) and
 * calls this. */
void lv_cache_unpin(struct lv *lv, const struct lv_base *base);
/* Creates dir/disk on base: a qcow2 overlay or a raw copy (images_type),
 * of size bytes (0: the image's virtual size). 0/-1. */
int lv_disk_create(struct lv *lv, struct nb_ctx *ctx, const struct lv_base *base,
                   const char *disk_path, unsigned long long size);
/* instances/<uuid> into buf. */
const char *lv_instance_dir(const struct lv *lv, const char *uuid, char *buf, size_t n);
/* instances/<uuid>/disk.info as JSON (new reference) or NULL. */
json_t *lv_read_disk_info(const char *dir);
/* Removes cached bases no instance uses that are older than
 * [image_cache] remove_unused_original_minimum_age_seconds. */
void lv_cache_cleanup(struct lv *lv, struct nb_ctx *ctx);

/* cpu.c */
/* The guest CPU for virt_type from [libvirt] cpu_mode (default host-model
 * under kvm, none under qemu), cpu_models (custom: the first one domcaps,
 * libvirt's domain capabilities XML for virt_type, marks usable; names are
 * matched case-insensitively) and cpu_model_extra_flags ("+f", "-f", "f").
 * -1 with a 500 naming the option: an unknown mode or model, cpu_models
 * without cpu_mode = custom or the reverse, no usable model, a bad flag. */
int lv_cpu_config(struct nb_ctx *ctx, const char *virt_type, const char *domcaps,
                  struct lv_cpu *out);
/* lv_cpu_config with libvirt's domain capabilities for virt_type. 0/-1. */
int lv_guest_cpu(struct lv *lv, struct nb_ctx *ctx, const char *virt_type, struct lv_cpu *out);
/* "host-model", "custom SandyBridge +pcid -hle", "none (QEMU default)". */
const char *lv_cpu_describe(const struct lv_cpu *cpu, char *buf, size_t n);

/* migrate.c, migrate_disks.c, migrate_run.c: the driver ops of the same
 * names (driver.h's contract) */
json_t *lv_migration_info(struct lv *lv, struct nb_ctx *ctx);
int lv_check_cpu(struct lv *lv, struct nb_ctx *ctx, const json_t *guest_cpu);
int lv_probe_create(struct lv *lv, struct nb_ctx *ctx, char name[64]);
int lv_probe_exists(struct lv *lv, struct nb_ctx *ctx, const char *name, bool *exists);
int lv_probe_remove(struct lv *lv, struct nb_ctx *ctx, const char *name);
int lv_check_migration_target(struct lv *lv, struct nb_ctx *ctx, const char *dest_uri,
                              int timeout_ms);
json_t *lv_migration_disks(struct lv *lv, struct nb_ctx *ctx, json_t *inst);
/* Answers {"shared_storage", "block_migration", "instance_dir",
 * "migrate_disks": [targets libvirt copies]}: live_migrate's dest_disks. */
json_t *lv_pre_live_migration(struct lv *lv, struct nb_ctx *ctx, json_t *inst, const json_t *disks,
                              bool shared, bool block);
int lv_live_migrate(struct lv *lv, struct nb_ctx *ctx, json_t *inst, struct nb_live_migration *m);
int lv_post_live_migration_dest(struct lv *lv, struct nb_ctx *ctx, json_t *inst);
int lv_post_live_migration_source(struct lv *lv, struct nb_ctx *ctx, json_t *inst, bool shared);
int lv_rollback_live_migration_dest(struct lv *lv, struct nb_ctx *ctx, json_t *inst, bool shared);
/* The URI peers migrate to this host at: [libvirt] live_migration_uri
 * (deprecated; its one %s is the address) or qemu+<live_migration_scheme
 * tcp|tls|ssh>://<address>/system, the address being
 * live_migration_inbound_addr, else [DEFAULT] my_ip, else the host name.
 * 0; -1 with a 500 naming the bad option. */
int lv_migration_uri(const struct lv *lv, struct nb_ctx *ctx, char *out, size_t n);
/* Host and port of a libvirt URI (driver+transport://[user@]host[:port]/
 * path), the port defaulting to the transport's (tcp 16509, tls 16514, ssh
 * 22). 0, or -1 when the URI names no remote host. */
int lv_uri_host_port(const char *uri, char *host, size_t hn, char *port, size_t pn);
/* Nova's downtime steps for a guest of data_gb GiB: step i, from
 * at_s[i] = live_migration_downtime_delay * data_gb * i seconds, allows
 * ms[i] = base + offset * i of downtime (base = downtime / steps, offset =
 * (downtime - base) / steps), the last one live_migration_downtime. */
struct lv_downtime {
    long long at_s[64];
    long long ms[64];
    int n;
};
void lv_downtime_steps(double data_gb, struct lv_downtime *d);
/* The GiB a live migration copies, as Nova's _live_migration_data_gb: the
 * flavor's RAM (at least 2) plus, for a block migration, the file size of
 * every writable local disk in disks (lv_migration_disks; at least 2 each;
 * a file that cannot be stat'ed is logged and counts 0). */
double lv_migration_data_gb(struct nb_ctx *ctx, const char *uuid, long long memory_mb,
                            const json_t *disks, bool block);
/* [libvirt] live_migration_completion_timeout (seconds per GiB) for a
 * guest of data_gb, truncated to whole seconds as Nova; 0 = no timeout. */
long long lv_completion_timeout_s(double data_gb);
/* Nova's should_trigger_timeout_action: a timeout is set, the migration
 * is not in post-copy, and more than timeout_s seconds went by. */
bool lv_timeout_due(long long timeout_s, double elapsed, bool post_copy);
/* [libvirt] live_migration_timeout_action: LV_TIMEOUT_ABORT (the
 * default), LV_TIMEOUT_FORCE_COMPLETE, -1 for any other value. */
enum { LV_TIMEOUT_ABORT, LV_TIMEOUT_FORCE_COMPLETE };
int lv_timeout_action(void);
/* vm.unprivileged_userfaultfd as read from path (the sysctl's file under
 * /proc/sys), -1 when it cannot be read (no such file: a kernel without
 * userfaultfd, or one older than 5.2). */
int lv_read_unprivileged_userfaultfd(const char *path);
/* Why QEMU likely cannot have post-copy (QEMU 7.2 needs userfaultfd, which
 * the kernel denies a process without CAP_SYS_PTRACE when
 * vm.unprivileged_userfaultfd = 0), from that sysctl (-1 unknown) and the
 * uid QEMU runs as (-1 unknown), into buf: the evidence operators grep
 * for, e.g. "vm.unprivileged_userfaultfd = 0 and QEMU does not run as
 * root (uid 64055)". */
void lv_post_copy_cause(char *buf, size_t n, int unprivileged_userfaultfd, long long qemu_uid);

/* virt_type.c */
/* Resolves [libvirt] virt_type (kvm|qemu|auto) into lv->virt_type and
 * lv->cpu, running the probe guest for auto. 0/-1. */
int lv_resolve_virt_type(struct lv *lv, struct nb_ctx *ctx, const char *wanted);
/* The probe guest's domain XML for virt_type and cpu: lv_guest_spec and
 * lv_domain_xml as a real guest, vcpus vCPUs, 32 MiB, a raw boot sector at
 * dir/boot.img as vda, console at dir/serial.log. New string. */
char *lv_probe_xml(const struct lv *lv, const char *virt_type, const struct lv_cpu *cpu,
                   const char *dir, int vcpus);
/* True when a failed guest start under KVM is KVM's doing: QEMU died at
 * start (the monitor closed) naming KVM or an MSR. */
bool lv_is_kvm_failure(const char *libvirt_msg);
/* Records that KVM could not start a guest of vcpus vCPUs: under auto the
 * next lv_current_virt re-runs the decision. */
void lv_kvm_failed(struct lv *lv, int vcpus);
/* The accelerator and CPU a guest starting now gets (re-checking first
 * when lv_kvm_failed asked for it). 0/-1. */
int lv_current_virt(struct lv *lv, struct nb_ctx *ctx, char virt_type[16], struct lv_cpu *cpu);

/* volume.c */
/* A volume mapping as a guest disk; the strings are the struct's own. */
struct lv_volume {
    char volume_id[64];
    char path[LV_PATH_MAX]; /* the volume's file on this host */
    char format[16];        /* connection_info.data.format: raw / qcow2 */
    char target[16];        /* "vda" for the boot volume, else device_name */
    bool boot;
};
struct lv_volumes {
    struct lv_volume v[LV_MAX_VOLUMES];
    int n;
};
/* The volume mapping bdm of instance uuid as a disk, into *out; target
 * vda when it is the boot volume. -1 with the error recorded when it has
 * no usable connection_info (500), a format other than raw/qcow2 (500), no
 * device name (400) or its file is missing (500, "Volume <id> of instance
 * <uuid>: file <path> is missing on host <host>"). */
int lv_volume_from_bdm(struct lv *lv, struct nb_ctx *ctx, const char *uuid, const json_t *bdm,
                       struct lv_volume *out);
/* Every volume mapping of inst that has connection_info (a row without it
 * is an attach in progress: skipped, unless it is the boot volume), the
 * boot volume first, into *out. Fails as lv_volume_from_bdm, and with 500
 * when two mappings claim the same device (or one claims vda beside a
 * local root disk). Reads nothing but the files' existence. */
int lv_volumes_collect(struct lv *lv, struct nb_ctx *ctx, const json_t *inst,
                       struct lv_volumes *out);
/* The disk libvirt gets for a volume (strings borrowed from v). */
struct lv_disk lv_volume_disk(const struct lv_volume *v);
/* The driver ops of the same names (driver.h's contract). */
int lv_attach_volume(struct lv *lv, struct nb_ctx *ctx, json_t *inst, const json_t *bdm);
int lv_detach_volume(struct lv *lv, struct nb_ctx *ctx, json_t *inst, const json_t *bdm);
int lv_snapshot(struct lv *lv, struct nb_ctx *ctx, json_t *inst, const char *out_path);

/* resize.c: the driver ops of the same names (driver.h's contract) */
json_t *lv_prep_resize(struct lv *lv, struct nb_ctx *ctx, json_t *inst, bool same_host);
int lv_migrate_disk_and_power_off(struct lv *lv, struct nb_ctx *ctx, json_t *inst,
                                  const json_t *dest, bool same_host, int timeout_s);
int lv_finish_migration(struct lv *lv, struct nb_ctx *ctx, json_t *inst, bool same_host,
                        bool power_on);
int lv_confirm_migration(struct lv *lv, struct nb_ctx *ctx, json_t *inst, bool same_host);
int lv_revert_migration(struct lv *lv, struct nb_ctx *ctx, json_t *inst, bool same_host);
int lv_finish_revert_migration(struct lv *lv, struct nb_ctx *ctx, json_t *inst, bool same_host,
                               bool power_on);

/* xml.c */
struct lv_disk {
    const char *path;
    const char *format; /* qemu driver type: raw/qcow2 */
    const char *device; /* "disk" / "cdrom" */
    const char *bus;    /* "virtio" / "ide" */
    const char *target; /* "vda", "hda", … */
    bool readonly;
    const char *serial; /* <serial>: the volume ID for volumes (as Nova), else NULL */
};
struct lv_domain_spec {
    const char *virt_type;
    const char *cache_mode;
    const char *console_path;
    const char *mac_address;
    const struct lv_cpu *cpu; /* NULL: no <cpu> element */
    const char *name;         /* the domain's name; NULL: the instance UUID */
    struct lv_disk disks[LV_MAX_VOLUMES + 2];
    int ndisks;
};
/* Everything of a guest's domain but its identity and disks: accelerator,
 * CPU, disk cache, console file, NIC. Real guests and the virt_type probe
 * both get their spec from here, so the probe boots what guests boot. */
void lv_guest_spec(const struct lv *lv, const char *virt_type, const struct lv_cpu *cpu,
                   const char *console_path, const char *mac_address, struct lv_domain_spec *spec);
/* The domain XML of inst (nb_instance_agent_view's shape). New string. */
char *lv_domain_xml(const json_t *inst, const struct lv_domain_spec *spec);
/* One <disk> element for disk (hot-plug XML of attach/detach), generated
 * as lv_domain_xml generates the domain's disks. New string. */
char *lv_disk_xml(const struct lv_disk *disk, const char *cache_mode);
/* guest.c: nb_vif_plug for each VIF of inst["network_info"] (before a
 * domain is started or received). 0/-1 after nb_error. */
int lv_plug_vifs(struct nb_ctx *ctx, const json_t *inst);
/* Neutron-style MAC (fa:16:3e:xx:xx:xx) derived from the instance UUID. */
void lv_mac_for(const char *uuid, char out[18]);

#endif
