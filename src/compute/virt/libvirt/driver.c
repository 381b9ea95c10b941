/* driver.c - the libvirt driver's vtable and its start: options, the
 * instances directory, the connection (conn.c) and the accelerator.
 *
 * One driver serves one host: the machine libvirtd runs on, named by
 * [DEFAULT] host.
 *
 * Every [libvirt] option nubo does not implement (Nova's
 * live_migration_tunnelled, ...) is logged as ignored when the driver starts: an
 * option that is set is either honoured or said to be ignored. */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "compute/virt/libvirt/lv.h"

#include <errno.h>
#include <fcntl.h>
#include <libvirt/virterror.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------- vtable */

#define LV(drv) ((struct lv *)(drv)->priv)

static int op_host_info(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                        struct nb_host_info *info)
{
    (void)host;
    return lv_host_info(LV(drv), ctx, info);
}

static int op_spawn(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host, json_t *inst)
{
    (void)host;
    return lv_spawn(LV(drv), ctx, inst);
}

static int op_destroy(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                      json_t *inst)
{
    (void)host;
    return lv_destroy(LV(drv), ctx, inst);
}

static int op_power_on(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                       json_t *inst)
{
    (void)host;
    return lv_power_on(LV(drv), ctx, inst);
}

static int op_power_off(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                        json_t *inst, int timeout_s)
{
    (void)host;
    return lv_power_off(LV(drv), ctx, inst, timeout_s);
}

static int op_reboot(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host, json_t *inst,
                     bool hard)
{
    (void)host;
    return lv_reboot(LV(drv), ctx, inst, hard);
}

static int op_pause(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host, json_t *inst)
{
    (void)host;
    return lv_pause(LV(drv), ctx, inst, true);
}

static int op_unpause(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                      json_t *inst)
{
    (void)host;
    return lv_pause(LV(drv), ctx, inst, false);
}

static int op_suspend(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                      json_t *inst)
{
    (void)host;
    return lv_suspend(LV(drv), ctx, inst);
}

static int op_resume(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host, json_t *inst)
{
    (void)host;
    return lv_resume(LV(drv), ctx, inst);
}

static int op_get_info(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                       const char *uuid, struct nb_guest_info *info)
{
    (void)host;
    return lv_get_info(LV(drv), ctx, uuid, info);
}

static json_t *op_list(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host)
{
    (void)host;
    return lv_list(LV(drv), ctx);
}

static char *op_console_log(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                            const char *uuid)
{
    (void)host;
    return lv_console_log(LV(drv), ctx, uuid);
}

static json_t *op_diagnostics(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                              const char *uuid, bool standard)
{
    (void)host;
    return lv_diagnostics(LV(drv), ctx, uuid, standard);
}

static int op_attach_volume(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                            json_t *inst, const json_t *bdm)
{
    (void)host;
    return lv_attach_volume(LV(drv), ctx, inst, bdm);
}

static int op_detach_volume(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                            json_t *inst, const json_t *bdm)
{
    (void)host;
    return lv_detach_volume(LV(drv), ctx, inst, bdm);
}

static int op_snapshot(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                       json_t *inst, const char *out_path)
{
    (void)host;
    return lv_snapshot(LV(drv), ctx, inst, out_path);
}

/* cold migration and resize (resize.c) */
static json_t *op_prep_resize(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                              json_t *inst, const json_t *flavor, bool same_host)
{
    (void)host, (void)flavor;
    return lv_prep_resize(LV(drv), ctx, inst, same_host);
}

static int op_migrate_disk(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                           json_t *inst, const json_t *flavor, const char *dest_host,
                           const json_t *dest, bool same_host, int timeout_s)
{
    (void)host, (void)flavor, (void)dest_host;
    return lv_migrate_disk_and_power_off(LV(drv), ctx, inst, dest, same_host, timeout_s);
}

static int op_finish_migration(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                               json_t *inst, bool same_host, bool power_on)
{
    (void)host;
    return lv_finish_migration(LV(drv), ctx, inst, same_host, power_on);
}

static int op_confirm_migration(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                                json_t *inst, bool same_host)
{
    (void)host;
    return lv_confirm_migration(LV(drv), ctx, inst, same_host);
}

static int op_revert_migration(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                               json_t *inst, bool same_host)
{
    (void)host;
    return lv_revert_migration(LV(drv), ctx, inst, same_host);
}

static int op_finish_revert_migration(struct nb_virt_driver *drv, struct nb_ctx *ctx,
                                      const char *host, json_t *inst, bool same_host, bool power_on)
{
    (void)host;
    return lv_finish_revert_migration(LV(drv), ctx, inst, same_host, power_on);
}

static json_t *op_migration_info(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host)
{
    (void)host;
    return lv_migration_info(LV(drv), ctx);
}

static int op_check_cpu(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                        const json_t *guest_cpu)
{
    (void)host;
    return lv_check_cpu(LV(drv), ctx, guest_cpu);
}

static int op_probe_create(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                           char name[64])
{
    (void)host;
    return lv_probe_create(LV(drv), ctx, name);
}

static int op_probe_exists(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                           const char *name, bool *exists)
{
    (void)host;
    return lv_probe_exists(LV(drv), ctx, name, exists);
}

static int op_probe_remove(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                           const char *name)
{
    (void)host;
    return lv_probe_remove(LV(drv), ctx, name);
}

static int op_check_migration_target(struct nb_virt_driver *drv, struct nb_ctx *ctx,
                                     const char *host, const char *dest_uri, int timeout_ms)
{
    (void)host;
    return lv_check_migration_target(LV(drv), ctx, dest_uri, timeout_ms);
}

static json_t *op_migration_disks(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                                  json_t *inst)
{
    (void)host;
    return lv_migration_disks(LV(drv), ctx, inst);
}

static json_t *op_pre_live_migration(struct nb_virt_driver *drv, struct nb_ctx *ctx,
                                     const char *host, json_t *inst, const json_t *disks,
                                     bool shared_storage, bool block_migration)
{
    (void)host;
    /* Nova's pre_live_migration plugs the VIFs before the guest arrives */
    if (lv_plug_vifs(ctx, inst) < 0)
        return NULL;
    return lv_pre_live_migration(LV(drv), ctx, inst, disks, shared_storage, block_migration);
}

static int op_live_migrate(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                           json_t *inst, struct nb_live_migration *m)
{
    (void)host;
    return lv_live_migrate(LV(drv), ctx, inst, m);
}

static int op_post_live_migration_dest(struct nb_virt_driver *drv, struct nb_ctx *ctx,
                                       const char *host, json_t *inst)
{
    (void)host;
    return lv_post_live_migration_dest(LV(drv), ctx, inst);
}

static int op_post_live_migration_source(struct nb_virt_driver *drv, struct nb_ctx *ctx,
                                         const char *host, json_t *inst, bool shared_storage)
{
    (void)host;
    return lv_post_live_migration_source(LV(drv), ctx, inst, shared_storage);
}

static int op_rollback_live_migration_dest(struct nb_virt_driver *drv, struct nb_ctx *ctx,
                                           const char *host, json_t *inst, bool shared_storage)
{
    (void)host;
    return lv_rollback_live_migration_dest(LV(drv), ctx, inst, shared_storage);
}

static void op_set_event_callback(struct nb_virt_driver *drv,
                                  void (*cb)(void *opaque, const char *host, const char *uuid,
                                             int power_state),
                                  void *opaque)
{
    struct lv *lv = LV(drv);
    lv->on_event_opaque = opaque;
    __atomic_store_n(&lv->on_event, cb, __ATOMIC_RELEASE);
}

static void op_set_image_source(struct nb_virt_driver *drv, const struct nb_virt_image_source *src)
{
    __atomic_store_n(&LV(drv)->images, src, __ATOMIC_RELEASE);
}

static void op_close(struct nb_virt_driver *drv)
{
    struct lv *lv = LV(drv);
    lv_conn_close(lv);
    pthread_mutex_destroy(&lv->conn_lock);
    pthread_mutex_destroy(&lv->cache_lock);
    pthread_mutex_destroy(&lv->vt_lock);
    json_decref(lv->cache_pins);
    free(lv);
    free(drv);
}

static const struct nb_virt_ops lv_ops = {
    .name = "libvirt",
    .host_info = op_host_info,
    .spawn = op_spawn,
    .destroy = op_destroy,
    .power_on = op_power_on,
    .power_off = op_power_off,
    .reboot = op_reboot,
    .pause = op_pause,
    .unpause = op_unpause,
    .suspend = op_suspend,
    .resume = op_resume,
    .get_info = op_get_info,
    .list = op_list,
    .console_log = op_console_log,
    .diagnostics = op_diagnostics,
    .attach_volume = op_attach_volume,
    .detach_volume = op_detach_volume,
    .snapshot = op_snapshot,
    .prep_resize = op_prep_resize,
    .migrate_disk_and_power_off = op_migrate_disk,
    .finish_migration = op_finish_migration,
    .confirm_migration = op_confirm_migration,
    .revert_migration = op_revert_migration,
    .finish_revert_migration = op_finish_revert_migration,
    .migration_info = op_migration_info,
    .check_cpu = op_check_cpu,
    .storage_probe_create = op_probe_create,
    .storage_probe_exists = op_probe_exists,
    .storage_probe_remove = op_probe_remove,
    .check_migration_target = op_check_migration_target,
    .migration_disks = op_migration_disks,
    .pre_live_migration = op_pre_live_migration,
    .live_migrate = op_live_migrate,
    .post_live_migration_dest = op_post_live_migration_dest,
    .post_live_migration_source = op_post_live_migration_source,
    .rollback_live_migration_dest = op_rollback_live_migration_dest,
    .rebuild = lv_op_rebuild,
    .instance_on_disk = lv_op_instance_on_disk,
    .destroy_evacuated = lv_op_destroy_evacuated,
    .set_event_callback = op_set_event_callback,
    .set_image_source = op_set_image_source,
    .close = op_close,
};

/* The [libvirt] options this driver reads. */
static const char *const known_options[] = {
    "connection_uri",
    "virt_type",
    "cpu_mode",
    "cpu_models",
    "cpu_model_extra_flags",
    "images_type",
    "kvm_probe_timeout",
    "wait_soft_reboot_seconds",
    "device_detach_timeout",
    /* live migration (migrate.c, migrate_run.c) */
    "live_migration_scheme",
    "live_migration_inbound_addr",
    "live_migration_uri",
    "live_migration_with_native_tls",
    "live_migration_bandwidth",
    "live_migration_downtime",
    "live_migration_downtime_steps",
    "live_migration_downtime_delay",
    "live_migration_completion_timeout",
    "live_migration_timeout_action",
    "live_migration_permit_auto_converge",
    "live_migration_permit_post_copy",
};

/* Logs, once, each [libvirt] option set that nubo does not implement, and
 * extra CPU flags that the guests' CPU mode leaves nowhere to go. */
static void warn_ignored_options(struct lv *lv, struct nb_ctx *ctx)
{
    const char *keys[256];
    int n = nb_conf_keys("libvirt", keys, 256);
    for (int i = 0; i < n; i++) {
        bool known = false;
        for (size_t k = 0; k < sizeof(known_options) / sizeof(known_options[0]); k++)
            known = known || !strcmp(keys[i], known_options[k]);
        if (!known)
            NB_WARN(LV_LOG, ctx, NULL,
                    "[libvirt] %s = %s is ignored: nubo does not implement this option", keys[i],
                    nb_conf_str("libvirt", keys[i], ""));
    }
    const char *flags = nb_conf_str("libvirt", "cpu_model_extra_flags", "");
    if (*flags && !lv->cpu.mode[0])
        NB_WARN(LV_LOG, ctx, NULL,
                "[libvirt] cpu_model_extra_flags = %s is ignored: under virt_type %s the guests "
                "get cpu_mode none (QEMU's default model, no CPU element for the flags)",
                flags, lv->virt_type);
}

/* QEMU runs as another user (libvirt-qemu) and opens the disks under
 * instances_path: every directory above them must be searchable by others. */
static int check_path_traversable(struct nb_ctx *ctx, const char *path)
{
    char buf[LV_PATH_MAX];
    nb_strlcpy(buf, path, sizeof(buf));
    for (;;) {
        struct stat st;
        if (stat(buf, &st) == 0 && !(st.st_mode & S_IXOTH))
            return nb_error(ctx, 500, NULL,
                            "instances_path %s is not usable: %s is mode %03o, so QEMU (which "
                            "runs as libvirt-qemu) cannot reach the disks; make it "
                            "world-searchable (chmod o+x) or choose another [DEFAULT] "
                            "instances_path",
                            path, buf, (unsigned)(st.st_mode & 0777));
        char *slash = strrchr(buf, '/');
        if (!slash || slash == buf)
            return 0;
        *slash = '\0';
    }
}

/* Nova's check: can files in the directory be opened with O_DIRECT
 * (cache='none')? tmpfs cannot. */
static bool supports_direct_io(const char *dir)
{
    char path[LV_PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/.directio.test", dir);
    int fd = open(path, O_CREAT | O_WRONLY | O_DIRECT, 0600);
    if (fd < 0) {
        unlink(path);
        return false;
    }
    close(fd);
    unlink(path);
    return true;
}

struct nb_virt_driver *nb_virt_libvirt_open(const char *host)
{
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    struct lv *lv = calloc(1, sizeof(*lv));
    pthread_mutex_init(&lv->conn_lock, NULL);
    pthread_mutex_init(&lv->cache_lock, NULL);
    pthread_mutex_init(&lv->vt_lock, NULL);
    lv->cache_pins = json_object();
    lv->event_cb_id = -1;
    nb_strlcpy(lv->host, host, sizeof(lv->host));
    nb_strlcpy(lv->uri, nb_conf_str("libvirt", "connection_uri", "qemu:///system"),
               sizeof(lv->uri));
    const char *state = nb_conf_str("DEFAULT", "state_path", "/var/lib/nubo");
    char def[LV_PATH_MAX];
    snprintf(def, sizeof(def), "%s/instances", state);
    nb_strlcpy(lv->instances_path, nb_conf_str("DEFAULT", "instances_path", def),
               sizeof(lv->instances_path));
    const char *it = nb_conf_str("libvirt", "images_type", "qcow2");
    if (!strcmp(it, "default"))
        it = "qcow2";
    struct nb_virt_driver *drv = calloc(1, sizeof(*drv));
    drv->ops = &lv_ops;
    drv->priv = lv;

    lv_errors_silence();
    if (strcmp(it, "qcow2") != 0 && strcmp(it, "raw") != 0) {
        nb_error(&ctx, 500, NULL, "[libvirt] images_type must be qcow2 or raw, not '%s'", it);
        goto fail;
    }
    if (lv_timeout_action() < 0) {
        /* Nova's option has choices: the service does not start on another */
        nb_error(&ctx, 500, NULL,
                 "[libvirt] live_migration_timeout_action must be abort or force_complete, not "
                 "'%s'",
                 nb_conf_str("libvirt", "live_migration_timeout_action", ""));
        goto fail;
    }
    nb_strlcpy(lv->images_type, it, sizeof(lv->images_type));
    char base[LV_PATH_MAX + 8];
    snprintf(base, sizeof(base), "%s/_base", lv->instances_path);
    if (nb_mkdir_p(base) < 0 || chmod(lv->instances_path, 0755) < 0 || chmod(base, 0755) < 0) {
        nb_error(&ctx, 500, NULL, "cannot create %s: %s", base, strerror(errno));
        goto fail;
    }
    if (check_path_traversable(&ctx, lv->instances_path) < 0)
        goto fail;
    nb_strlcpy(lv->cache_mode, supports_direct_io(lv->instances_path) ? "none" : "writeback",
               sizeof(lv->cache_mode));
    if (lv_events_start(lv) < 0) {
        nb_error(&ctx, 500, NULL, "cannot start the libvirt event thread");
        goto fail;
    }
    if (!lv_conn(lv, &ctx))
        goto fail;
    if (lv_resolve_virt_type(lv, &ctx, nb_conf_str("libvirt", "virt_type", "auto")) < 0)
        goto fail;
    warn_ignored_options(lv, &ctx);
    unsigned long ver = 0, lver = 0;
    char cpu_desc[256];
    virConnectGetVersion(lv->conn, &ver);
    virConnectGetLibVersion(lv->conn, &lver);
    NB_INFO(LV_LOG, &ctx, NULL,
            "libvirt driver for host %s: %s (libvirt %lu.%lu.%lu, QEMU %lu.%lu.%lu), virt_type "
            "%s, guest cpu %s, images_type %s, instances_path %s, disk cache %s",
            lv->host, lv->uri, lver / 1000000, lver / 1000 % 1000, lver % 1000, ver / 1000000,
            ver / 1000 % 1000, ver % 1000, lv->virt_type,
            lv_cpu_describe(&lv->cpu, cpu_desc, sizeof(cpu_desc)), lv->images_type,
            lv->instances_path, lv->cache_mode);
    lv_cache_cleanup(lv, &ctx);
    return drv;
fail:
    NB_ERROR(LV_LOG, &ctx, NULL, "the libvirt driver cannot start: %s", nb_ctx_message(&ctx));
    op_close(drv);
    return NULL;
}
