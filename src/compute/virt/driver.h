/* driver.h - the virt driver vtable, as libvirt's own hypervisor drivers.
 *
 * A driver manages the guests of one or more hosts. The compute agent calls
 * it; the conductor never does. Every entry point returns 0 on success or -1
 * after nb_error() on ctx with a message that says what failed (for a
 * libvirt driver: libvirt's/QEMU's own text). Instances are passed as the
 * JSON the conductor sends: {"uuid", "name", "flavor": {...}, "image_ref",
 * "user_data", "key_data", "metadata", "block_device_mapping": [...], ...}. */
#ifndef NB_VIRT_DRIVER_H
#define NB_VIRT_DRIVER_H

#include "common/ctx.h"
#include "compute/objects/states.h"
#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>

struct nb_host_info {
    char hypervisor_hostname[256];
    char hypervisor_type[32]; /* "QEMU", "fake" */
    long hypervisor_version;  /* e.g. 7002022 for 7.2.22 */
    char cpu_model[64];
    char cpu_vendor[32];
    char cpu_arch[16];
    json_t *cpu_features; /* array of strings, owned by the struct */
    int vcpus;
    long memory_mb;
    long local_gb;
    char host_ip[64];
};

struct nb_guest_info {
    int power_state; /* enum nb_power_state */
};

struct nb_virt_driver;

/* Where a driver gets image data: given by the driver's host (the agent,
 * through set_image_source), so a driver never calls up into it. Both
 * record their error on ctx once and return NULL / -1. */
struct nb_virt_image_source {
    /* The image service's record of an active image, new ref {"id",
     * "disk_format", "size", "virtual_size", "os_hash_algo",
     * "os_hash_value", …}; NULL after 404 or 409 (not active). */
    json_t *(*show)(struct nb_ctx *ctx, const char *image_id);
    /* Writes the image's data into path and its sha512 in hex into
     * hex[129]. 0/-1 (path may be left partly written). */
    int (*download)(struct nb_ctx *ctx, const char *image_id, const char *path, char hex[129]);
};

/* A live migration's progress, as libvirt's job stats give it (bytes). */
struct nb_migration_progress {
    long long memory_total, memory_processed, memory_remaining;
    long long disk_total, disk_processed, disk_remaining;
    bool post_copy; /* switched to post-copy */
};

/* What live_migrate needs; the agent fills it and keeps it while the
 * migration runs (abort and force_complete come from other threads). */
struct nb_live_migration {
    const char *dest_host;    /* the destination's compute host name */
    const char *dest_uri;     /* its hypervisor's migration URI (migration_info "uri") */
    const char *dest_addr;    /* address for the migration data (migration_info "addr") */
    bool block_migration;     /* copy the local disks too */
    const json_t *dest_disks; /* what pre_live_migration answered (may be NULL) */
    /* called from the migrating thread about twice a second */
    void (*progress)(void *opaque, const struct nb_migration_progress *p);
    void *opaque;
    atomic_int abort_requested;          /* set by the agent: stop, the guest stays */
    atomic_int force_complete_requested; /* set by the agent: post-copy or pause */
    /* out */
    bool cancelled; /* live_migrate returned -1 because it was aborted */
    char note[256]; /* what the driver did to make it converge (post-copy, pause, and why),
                       for the instance action event; "" nothing */
};

struct nb_virt_ops {
    const char *name;
    /* Host capacity and CPU; fills *info (cpu_features new ref). */
    int (*host_info)(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                     struct nb_host_info *info);
    int (*spawn)(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                 json_t *instance);
    /* Removes the guest and its local files; absent guest is not an error. */
    int (*destroy)(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                   json_t *instance);
    int (*power_on)(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                    json_t *instance);
    /* timeout_s: graceful shutdown time before a forced stop (0 = force). */
    int (*power_off)(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                     json_t *instance, int timeout_s);
    int (*reboot)(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                  json_t *instance, bool hard);
    /* -1 with 404 recorded when the guest does not exist on host. */
    int (*get_info)(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                    const char *uuid, struct nb_guest_info *info);
    /* UUIDs of guests on host: new JSON object {uuid: power_state}. */
    json_t *(*list)(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host);
    /* pause/unpause: the guest's vCPUs stop/continue (power_state PAUSED/
     * RUNNING); suspend: the guest's memory is saved to disk and the guest
     * stops (libvirt managed save; power_state SHUTDOWN, as Nova reports
     * it); resume: started again from that saved state. */
    int (*pause)(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                 json_t *instance);
    int (*unpause)(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                   json_t *instance);
    int (*suspend)(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                   json_t *instance);
    int (*resume)(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                  json_t *instance);
    /* Serial console text (malloc'd) or NULL. */
    char *(*console_log)(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                         const char *uuid);
    /* Diagnostics of a guest (optional, may be NULL: the agent then answers
     * 501): standard, Nova's 2.48 Diagnostics shape {"state", "driver",
     * "hypervisor", "hypervisor_os", "uptime", "config_drive", "num_cpus",
     * "num_disks", "num_nics", "memory_details", "cpu_details",
     * "nic_details", "disk_details"}; else the older free-form dict as
     * Nova's libvirt driver builds it ("cpu0_time", "memory", "vda_read",
     * …). A new JSON object, or NULL with the error on ctx. */
    json_t *(*diagnostics)(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                           const char *uuid, bool standard);
    /* Volumes (optional, may be NULL: the agent then answers 501). bdm is a
     * block_device_mapping row as in instance["block_device_mapping"]:
     * "connection_info" is the NFS connection_info as JSON text (already
     * reconciled by the agent), "device_name" the target ("/dev/vdb" or
     * "vdb"). attach_volume hot-plugs the volume into a running guest (and
     * does nothing to a guest that is not running: the next start builds the
     * domain from the mappings); detach_volume unplugs it and waits until the
     * guest let go of it (error when the guest does not within the time
     * limit). Both leave the volume's file alone. */
    int (*attach_volume)(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                         json_t *instance, const json_t *bdm);
    int (*detach_volume)(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                         json_t *instance, const json_t *bdm);
    /* Writes a qcow2 image of the guest's local root disk (image-backed
     * instances) to out_path, standalone (no backing file), consistent: a
     * running guest is paused for the copy and continues after it. The
     * guest keeps its power state. Optional (NULL: 501). */
    int (*snapshot)(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                    json_t *instance, const char *out_path);
    /* ---- live migration (optional, all NULL for a driver that cannot
     * move guests: the prechecks then refuse the move) ---- */
    /* What this host offers to migrations, new ref: {"hypervisor_type",
     * "hypervisor_version" (QEMU's, as the compute node's), "libvirt_version",
     * "uri" (where peers reach this host's hypervisor for migrations, from
     * [libvirt] live_migration_scheme / live_migration_inbound_addr /
     * live_migration_uri), "addr" (address for migration data), "mtu" (of
     * the interface holding addr; 0 unknown), "cpu_models" ([names] the
     * hypervisor can give guests: domain capabilities), "guest_cpu" ({"mode",
     * "model", "features"}: the CPU this host gives its guests per [libvirt]
     * cpu_mode / cpu_models), "instances_path", "tls" (bool), "tls_missing"
     * ([paths of absent certificates])}. NULL on error. */
    json_t *(*migration_info)(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host);
    /* Whether this host can run a guest with guest_cpu (the source's
     * "guest_cpu"): under KVM libvirt's CPU comparison, under TCG the model
     * in the domain capabilities. 0; -1 with a message naming the missing
     * model or features. */
    int (*check_cpu)(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                     const json_t *guest_cpu);
    /* Nova's shared-storage test file in the root of the instances path:
     * create one (its name into name), tell whether one exists, remove it. */
    int (*storage_probe_create)(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                                char name[64]);
    int (*storage_probe_exists)(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                                const char *name, bool *exists);
    int (*storage_probe_remove)(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                                const char *name);
    /* Source side: whether this host reaches dest_uri within timeout_ms. 0;
     * -1 with a message naming the URI, host, port and the error. */
    int (*check_migration_target)(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                                  const char *dest_uri, int timeout_ms);
    /* Source side: the instance's disks, new ref [{"target", "path",
     * "format", "virtual_size", "backing" (path or null), "readonly",
     * "local" (not a volume)}]. NULL on error. */
    json_t *(*migration_disks)(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                               json_t *instance);
    /* Destination side before the move (Nova's pre_live_migration): the
     * instance's directory; unless shared_storage, its local disks (empty,
     * same virtual sizes, for block migration; their backing images in the
     * cache) and copies of read-only disks such as the config drive. Answers
     * (new ref) what live_migrate passes on as dest_disks; NULL on error. */
    json_t *(*pre_live_migration)(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                                  json_t *instance, const json_t *disks, bool shared_storage,
                                  bool block_migration);
    /* Source side: moves the running guest to m->dest_uri, peer to peer,
     * returning when it runs there (0), or failed or was aborted (-1, with
     * m->cancelled set for an abort; the guest still runs here). Tuning from
     * [libvirt] live_migration_* (bandwidth, downtime steps, completion
     * timeout and its action, auto-converge, post-copy). */
    int (*live_migrate)(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                        json_t *instance, struct nb_live_migration *m);
    /* After success: the destination defines the guest persistently (as it
     * now runs), the source forgets it and, unless shared_storage, removes
     * its local files. After failure: the destination removes what
     * pre_live_migration made (its files only when not shared) and any
     * domain left behind. */
    int (*post_live_migration_dest)(struct nb_virt_driver *drv, struct nb_ctx *ctx,
                                    const char *host, json_t *instance);
    int (*post_live_migration_source)(struct nb_virt_driver *drv, struct nb_ctx *ctx,
                                      const char *host, json_t *instance, bool shared_storage);
    int (*rollback_live_migration_dest)(struct nb_virt_driver *drv, struct nb_ctx *ctx,
                                        const char *host, json_t *instance, bool shared_storage);
    /* ---- rebuild and evacuate (optional, NULL: the agent answers 501) ----
     * rebuild: the guest of instance on host is made anew with the same
     * identity (UUID, ports, the volumes of its mappings): its domain, if
     * any, is destroyed; unless keep_disk, so is its local root disk, and a
     * new one is made from instance["image_ref"] (as spawn makes it); then
     * the guest is defined and started. keep_disk: an evacuation onto
     * shared storage, where the disk the source ran is here. */
    int (*rebuild)(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                   json_t *instance, bool keep_disk);
    /* Whether the instance's local disk is in this host's instances path
     * (Nova's instance_on_disk): an evacuation's destination then shares
     * the source's storage. A volume-backed instance without local disks
     * is not on disk. */
    int (*instance_on_disk)(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                            json_t *instance, bool *on_disk);
    /* Source side, when its agent comes back after an evacuation: removes
     * the guest still defined here; its local files only when
     * destroy_disks (not when the destination runs the same disk from
     * shared storage). An absent guest is not an error. */
    int (*destroy_evacuated)(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                             json_t *instance, bool destroy_disks);
    /* ---- cold migration and resize (optional: all NULL for a driver that
     * cannot; the agent then fails the step with 501). Nova's
     * migrate_disk_and_power_off, finish_migration, confirm_migration and
     * finish_revert_migration. instance carries the flavor the step is for
     * (finish_migration: the new one; finish_revert_migration: the old);
     * same_host: source and destination are this one host, so the guest's
     * disks stay where they are and nothing is sent. ---- */
    /* Destination, before the move: the instance's directory (and the
     * image's base in the cache) made ready. Answers (new ref) what the
     * source's migrate_disk_and_power_off needs to send the disks there
     * (libvirt: {"uri", "instances_path", "probe"}), or NULL on error. */
    json_t *(*prep_resize)(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                           json_t *instance, const json_t *flavor, bool same_host);
    /* Source: powers the guest off (graceful for timeout_s) and sends its
     * local disks to dest_host as dest (prep_resize's answer) says; its own
     * files stay until confirm_migration. On failure the guest's disks are
     * as before (the agent powers it on again if it ran). */
    int (*migrate_disk_and_power_off)(struct nb_virt_driver *drv, struct nb_ctx *ctx,
                                      const char *host, json_t *instance, const json_t *flavor,
                                      const char *dest_host, const json_t *dest, bool same_host,
                                      int timeout_s);
    /* Destination: defines the guest with instance's (new) flavor on the
     * disks received (the root disk grown to the flavor's root_gb) and
     * starts it when power_on. On failure nothing of it runs. */
    int (*finish_migration)(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                            json_t *instance, bool same_host, bool power_on);
    /* Source, at confirm: the old guest and its files removed (same_host:
     * only what the move kept aside for a revert). */
    int (*confirm_migration)(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                             json_t *instance, bool same_host);
    /* Destination, at revert (or after a failed move): the new guest and
     * the files the move brought removed (same_host: the guest's own disks
     * and what was kept aside stay). Absent guest or files: not an error. */
    int (*revert_migration)(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                            json_t *instance, bool same_host);
    /* Source, at revert: the old guest back on its own disks with instance's
     * (old) flavor, started when power_on. */
    int (*finish_revert_migration)(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                                   json_t *instance, bool same_host, bool power_on);
    /* Lifecycle events (optional, may be NULL): the driver calls
     * cb(opaque, host, uuid, power_state) from its own thread whenever a
     * guest changes state, whoever caused it. The agent uses it to run the
     * power sync without waiting for the period. */
    void (*set_event_callback)(struct nb_virt_driver *drv,
                               void (*cb)(void *opaque, const char *host, const char *uuid,
                                          int power_state),
                               void *opaque);
    /* Where spawn fetches images from (optional, may be NULL for drivers
     * that fetch none); src is borrowed for the driver's life. */
    void (*set_image_source)(struct nb_virt_driver *drv, const struct nb_virt_image_source *src);
    void (*close)(struct nb_virt_driver *drv);
};

struct nb_virt_driver {
    const struct nb_virt_ops *ops;
    void *priv;
};

/* Creates the driver named by [compute] driver ("fake", later "libvirt").
 * hosts: the host names this process runs agents for. NULL on error. */
struct nb_virt_driver *nb_virt_open(const char *name);

/* The fake driver: hosts from [fake] (hosts, cpu_model, vcpus, memory_mb,
 * disk_gb, hypervisor_version); fault injection via
 * nb_virt_fake_fail_spawn(host, n): the next n spawns on host fail (-1 = all),
 * and nb_virt_fake_fail(host, op, n) for op "spawn", "attach_volume",
 * "detach_volume" or "snapshot" (also [fake] fail_<op>_hosts). */
struct nb_virt_driver *nb_virt_fake_open(void);

/* The libvirt driver ([libvirt] connection_uri, virt_type, images_type;
 * [DEFAULT] instances_path). Serves one host: [DEFAULT] host. */
struct nb_virt_driver *nb_virt_libvirt_open(const char *host);
void nb_virt_fake_fail_spawn(const char *host, int n);
void nb_virt_fake_fail(const char *host, const char *op, int n);

#endif
