/* pending.c - weak placeholders for entry points whose modules are still
 * being written, so the tree links meanwhile. A real definition anywhere
 * overrides these (the library is linked whole). Each fails loudly. */
#include "common/log.h"
#include "compute/agent/agent.h"
#include "compute/api/api.h"
#include "compute/conductor/conductor.h"
#include "compute/scheduler/scheduler.h"
#include "identity/identity.h"
#include "image/image.h"
#include "placement/placement.h"

#define PENDING(decl)                                                                              \
    __attribute__((weak)) decl                                                                     \
    {                                                                                              \
        NB_WARN("nubo.main", NULL, NULL, "%s is not implemented yet", __func__);                   \
        return 0;                                                                                  \
    }

PENDING(int nb_identity_init(struct nb_env *env))
PENDING(int nb_identity_bootstrap(struct nb_env *env, const char *a, const char *d))
PENDING(int nb_image_init(struct nb_env *env))
PENDING(int nb_placement_init(struct nb_env *env))
PENDING(int nb_conductor_start(struct nb_env *env))
PENDING(int nb_scheduler_start(struct nb_env *env))
PENDING(int nb_compute_agent_start(struct nb_env *env, struct nb_virt_driver *drv, const char *h))
PENDING(int nb_compute_versions_init(struct nb_env *env))
PENDING(int nb_compute_flavors_init(struct nb_env *env))
PENDING(int nb_compute_keypairs_init(struct nb_env *env))
PENDING(int nb_compute_availability_zones_init(struct nb_env *env))
PENDING(int nb_compute_aggregates_init(struct nb_env *env))
PENDING(int nb_compute_server_groups_init(struct nb_env *env))
PENDING(int nb_compute_services_init(struct nb_env *env))
PENDING(int nb_compute_hypervisors_init(struct nb_env *env))
PENDING(int nb_compute_servers_init(struct nb_env *env))
PENDING(int nb_compute_server_actions_init(struct nb_env *env))
PENDING(int nb_compute_server_metadata_init(struct nb_env *env))
PENDING(int nb_compute_instance_actions_init(struct nb_env *env))
PENDING(int nb_compute_quotas_init(struct nb_env *env))
PENDING(int nb_compute_limits_init(struct nb_env *env))

__attribute__((weak)) void nb_compute_agents_stop(void) {}
__attribute__((weak)) struct nb_virt_driver *nb_virt_open(const char *name)
{
    NB_ERROR("nubo.main", NULL, NULL, "virt driver %s is not implemented yet", name);
    return NULL;
}
__attribute__((weak)) int nb_image_create_record(struct nb_ctx *ctx, const char *name,
                                                 const char *df, const char *cf, long long md,
                                                 char *id_out)
{
    (void)ctx, (void)name, (void)df, (void)cf, (void)md;
    id_out[0] = '\0';
    return 0;
}
