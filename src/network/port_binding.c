/* port_binding.c - moving an instance's ports to another host, as Nova's
 * setup_instance_network_on_host does after an evacuation (and
 * migrate_instance_finish after a migration): the binding:host_id of
 * every port the instance owns becomes the new host. */
#include "common/util.h"
#include "db/db.h"
#include "network/network.h"
#include "network/network_int.h"

int nb_network_bind_instance_host(struct nb_ctx *ctx, const char *instance_uuid, const char *host)
{
    char now[32];
    return nb_db_exec(nb_net_env->db, ctx,
                      "UPDATE ports SET binding_host_id = ?, updated_at = ?, "
                      "revision_number = revision_number + 1 WHERE device_id = ? AND "
                      "device_owner LIKE 'compute:%' AND binding_host_id != ?",
                      "ssss", host, nb_net_now(now), instance_uuid, host);
}
