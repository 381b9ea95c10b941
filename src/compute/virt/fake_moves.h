/* fake_moves.h - what fake.c shares with fake_moves.c, the fake
 * driver's live migration: its lock, a host's guests and their state file,
 * the fault-injection table and the per-host configuration. Nothing outside
 * src/compute/virt includes it. */
#ifndef NB_VIRT_FAKE_MOVES_H
#define NB_VIRT_FAKE_MOVES_H

#include "common/ctx.h"
#include "compute/virt/driver.h"
#include <jansson.h>
#include <stdbool.h>

#define FAKE_LOGGER "nubo.compute.virt.fake"

/* The driver's one mutex (guards every host and its guests). */
void fake_lock(struct nb_virt_driver *drv);
void fake_unlock(struct nb_virt_driver *drv);
/* The guests of host ({uuid: guest}, borrowed; lock held), re-read first
 * if the state file changed behind nubo's back; NULL with 404 on ctx when
 * the driver does not run host. */
json_t *fake_host_guests(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host);
/* Writes host's guests to its state file (lock held). */
void fake_host_persist(struct nb_virt_driver *drv, const char *host);
/* Whether the driver runs host. */
bool fake_has_host(struct nb_virt_driver *drv, const char *host);
/* The host's CPU model and hypervisor version (lock not needed: set at
 * open). "" / 0 for an unknown host. */
const char *fake_host_cpu_model(struct nb_virt_driver *drv, const char *host);
long fake_host_hv_version(struct nb_virt_driver *drv, const char *host);
/* True (and one pending failure consumed) if the next op on host fails. */
bool fake_take_failure(const char *host, const char *op);
/* [fake] key.<host>, else [fake] key, else def. */
long fake_conf_int(const char *host, const char *key, long def);
const char *fake_conf_str(const char *host, const char *key, const char *def);
bool fake_conf_bool(const char *host, const char *key, bool def);
/* Appends a timestamped line to the guest's console. */
void fake_console_line(json_t *guest, const char *line);

/* fake_moves.c: the live-migration ops, set into the driver's vtable. */
json_t *fake_migration_info(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host);
int fake_check_cpu(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                   const json_t *guest_cpu);
int fake_storage_probe_create(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                              char name[64]);
int fake_storage_probe_exists(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                              const char *name, bool *exists);
int fake_storage_probe_remove(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                              const char *name);
int fake_check_migration_target(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                                const char *dest_uri, int timeout_ms);
json_t *fake_migration_disks(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                             json_t *instance);
json_t *fake_pre_live_migration(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                                json_t *instance, const json_t *disks, bool shared_storage,
                                bool block_migration);
int fake_live_migrate(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                      json_t *instance, struct nb_live_migration *m);
int fake_post_live_migration_dest(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                                  json_t *instance);
int fake_post_live_migration_source(struct nb_virt_driver *drv, struct nb_ctx *ctx,
                                    const char *host, json_t *instance, bool shared_storage);
int fake_rollback_live_migration_dest(struct nb_virt_driver *drv, struct nb_ctx *ctx,
                                      const char *host, json_t *instance, bool shared_storage);
/* Applies [fake] fail_<op>_hosts for the live-migration ops. */
void fake_moves_configure(void);

#endif
