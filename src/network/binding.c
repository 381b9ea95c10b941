/* binding.c - port binding as ML2 with the linuxbridge mechanism driver
 * decides it: a port bound to a host whose Linux bridge agent is alive is
 * bound "bridge" (vif_details {"port_filter": true, "connectivity": "l2"})
 * and stays DOWN until that agent reports its device up; a host whose
 * agent is dead gets "binding_failed" (Nova then fails the build with
 * "Binding failed for port …"); a host that never had an agent (the fake
 * driver's, which has no data plane) keeps what nubo always did: "ovs",
 * ACTIVE at once. */
#include "network/ml2_int.h"

#include <string.h>

const char *nb_bind_vif_type(struct nb_ctx *ctx, const char *host)
{
    if (!host || !*host)
        return "unbound";
    json_t *alive = nb_agent_alive(ctx, NB_AGENT_LINUXBRIDGE, host);
    if (alive) {
        json_decref(alive);
        return "bridge";
    }
    return nb_agent_known(ctx, NB_AGENT_LINUXBRIDGE, host) ? "binding_failed" : "ovs";
}

const char *nb_bind_status(const char *vif_type)
{
    return !strcmp(vif_type, "ovs") ? "ACTIVE" : "DOWN";
}
