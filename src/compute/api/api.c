/* api.c - registers every Compute API resource (see api.h). */
#include "compute/api/api.h"

#include <stdlib.h>

int nb_compute_api_init(struct nb_env *env)
{
    nb_http_service_register(&nb_compute_http_service, true);
    /* one init a line (clang-format would pack the list into columns) */
    /* clang-format off */
    int (*inits[])(struct nb_env *) = {
        nb_compute_versions_init,
        nb_compute_flavors_init,
        nb_compute_keypairs_init,
        nb_compute_availability_zones_init,
        nb_compute_aggregates_init,
        nb_compute_server_groups_init,
        nb_compute_services_init,
        nb_compute_hypervisors_init,
        nb_compute_hosts_init,
        nb_compute_extensions_init,
        nb_compute_servers_init,
        nb_compute_server_actions_init,
        nb_compute_server_metadata_init,
        nb_compute_instance_actions_init,
        nb_compute_migrations_init,
        nb_compute_quotas_init,
        nb_compute_limits_init,
        nb_compute_volume_attachments_init,
        nb_compute_server_ips_init,
        nb_compute_server_interfaces_init,
        nb_compute_server_password_init,
        nb_compute_quota_classes_init,
        nb_compute_server_diagnostics_init,
        nb_compute_server_external_events_init,
        nb_compute_images_init,
        nb_compute_security_groups_init,
        nb_compute_floating_ips_init,
        nb_compute_os_volumes_init,
        nb_compute_simple_tenant_usage_init,
        nb_compute_instance_usage_audit_log_init,
    };
    /* clang-format on */
    for (size_t i = 0; i < sizeof(inits) / sizeof(inits[0]); i++)
        if (inits[i](env) < 0)
            return -1;
    return 0;
}
