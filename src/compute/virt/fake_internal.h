/* fake_internal.h - what the fake driver's files share: fake.c (hosts,
 * guests, the basic ops) and fake_resize.c (cold migration and resize). */
#ifndef NB_VIRT_FAKE_INTERNAL_H
#define NB_VIRT_FAKE_INTERNAL_H

#include "compute/virt/driver.h"

/* The fake driver's cold migration and resize ops (fake_resize.c). Fault
 * injection for them, per host and phase ("prep_resize",
 * "migrate_disk_and_power_off", "finish_migration", "confirm_migration",
 * "revert_migration", "finish_revert_migration"): nb_virt_fake_fail, and
 * $state_path/fake/fail.json ({"<host>": {"<op>": n}}, re-read when it
 * changes) so that a running cloud's tests can inject. */
json_t *nb_virt_fake_prep_resize(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                                 json_t *instance, const json_t *flavor, bool same_host);
int nb_virt_fake_migrate_disk(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                              json_t *instance, const json_t *flavor, const char *dest_host,
                              const json_t *dest, bool same_host, int timeout_s);
int nb_virt_fake_finish_migration(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                                  json_t *instance, bool same_host, bool power_on);
int nb_virt_fake_confirm_migration(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                                   json_t *instance, bool same_host);
int nb_virt_fake_revert_migration(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                                  json_t *instance, bool same_host);
int nb_virt_fake_finish_revert_migration(struct nb_virt_driver *drv, struct nb_ctx *ctx,
                                         const char *host, json_t *instance, bool same_host,
                                         bool power_on);
/* True (and one pending failure consumed) if the next op on host fails
 * (nb_virt_fake_fail's table). */
bool nb_virt_fake_take_failure(const char *host, const char *op);
/* What fake_resize.c gets from fake.c: fn run on the guests ({uuid:
 * guest}) of host a and of host b (b may equal a) under the driver's lock,
 * each host's state file re-read first and written after fn returned 0.
 * -1 with 404 when the driver does not serve a host, else fn's result. */
int nb_virt_fake_with_guests(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *a,
                             const char *b,
                             int (*fn)(struct nb_ctx *ctx, json_t *ga, json_t *gb, void *arg),
                             void *arg);

#endif
