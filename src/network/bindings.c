/* bindings.c - a move of an instance to another host as Neutron sees it
 * (Nova's migrate_instance_finish / setup_networks_on_host after a live or
 * cold migration): the instance's ports get binding:host_id of the host the
 * instance now runs on, so nothing else has to change when the data plane
 * wires ports per host. */
#include "common/log.h"
#include "db/db.h"
#include "network/network.h"
#include "network/ml2_int.h"
#include "network/network_int.h"

int nb_network_bind_instance_host(struct nb_ctx *ctx, const char *instance_uuid, const char *host)
{
    char now[32];
    const char *vif_type = nb_bind_vif_type(ctx, host);
    int n = nb_db_exec(nb_net_env->db, ctx,
                       "UPDATE ports SET binding_host_id = ?, binding_vif_type = ?, status = "
                       "CASE WHEN ? = 'ovs' THEN 'ACTIVE' ELSE status END, updated_at = ?, "
                       "revision_number = revision_number + 1 WHERE device_id = ? AND "
                       "device_owner LIKE 'compute:%' AND binding_host_id != ?",
                       "ssssss", host, vif_type, vif_type, nb_net_now(now), instance_uuid, host);
    if (n > 0) {
        NB_INFO("nubo.network.instance", ctx, instance_uuid, "%d port(s) bound to host %s", n,
                host);
        nb_net_notify(ctx, "ports bound to another host");
    }
    return n;
}
