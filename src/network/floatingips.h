/* floatingips.h - what floatingips.c offers the other network files
 * (routers.c's checks, instance.c's network info, the agents' RPC and host
 * state), and the hooks it calls after a change. */
#ifndef NB_NETWORK_FLOATINGIPS_H
#define NB_NETWORK_FLOATINGIPS_H

#include "common/ctx.h"

#include <jansson.h>

/* Registers /v2.0/floatingips and chains the port delete check (called by
 * nb_net_routers_init). 0/-1. */
int nb_net_floatingips_init(void);

/* 409 RouterInterfaceInUseByFloatingIP when a floating IP of router_id is
 * associated with an address of cidr on a port of subnet_id. 0/-1. */
int nb_net_fip_check_interface(struct nb_ctx *ctx, const char *router_id, const char *subnet_id,
                               const char *cidr);
/* 409 RouterExternalGatewayInUseByFloatingIp when floating IPs use the
 * router's gateway (on net_id). 0/-1. */
int nb_net_fip_check_gateway(struct nb_ctx *ctx, const char *router_id, const char *net_id);

/* The floating addresses associated with fixed_ip of port_id: a new list
 * of strings (maybe empty). */
json_t *nb_net_fip_addresses(struct nb_ctx *ctx, const char *port_id, const char *fixed_ip);

/* The associated floating IPs of router_id as the host state lists them:
 * [{"id", "floating_ip_address", "fixed_ip_address", "port_id",
 * "status"}]. New ref or NULL. */
json_t *nb_net_fip_of_router(struct nb_ctx *ctx, const char *router_id);

/* update_floatingip_statuses from an L3 agent: statuses {fip id: "ACTIVE"
 * | "DOWN" | "ERROR"} of router_id's floating IPs (NULL: any router).
 * Returns the number changed, or -1. */
int nb_net_fip_update_statuses(struct nb_ctx *ctx, const char *router_id, const json_t *statuses);

/* port_forwardings.c: its routes (called by nb_net_floatingips_init);
 * the forwardings of router_id's floating IPs as the host state lists them
 * [{"id", "floating_ip_address", "protocol", "external_port",
 * "internal_ip_address", "internal_port"}] (new ref or NULL); 409
 * FipInUseByPortForwarding when fip_id has forwardings (0/-1). */
int nb_net_port_forwardings_init(void);
json_t *nb_net_pf_of_router(struct nb_ctx *ctx, const char *router_id);
int nb_net_pf_check_fip_assoc(struct nb_ctx *ctx, const char *fip_id);

/* The router for a floating IP (row of floatingips) to reach ip of
 * port_id, as an association finds it (the port visible to ctx and of the
 * floating IP's project, ip one of its IPv4 addresses). Writes
 * router[NB_UUID_LEN]. 0/-1 (404 ExternalGatewayForFloatingIPNotFound,
 * 400 BadRequest). */
int nb_net_fip_router_for_address(struct nb_ctx *ctx, const json_t *fip, const char *port_id,
                                  const char *ip, char *router);

/* The q-plugin RPC method "update_floatingip_statuses" {"router_id",
 * "statuses"} (netagent.h), for the control side's method table (an
 * nb_bus_handler_fn): answers {"updated": n}. */
json_t *nb_net_rpc_update_floatingip_statuses(void *opaque, struct nb_ctx *ctx, const char *method,
                                              json_t *args);

/* The "routers" of host's state (netagent.h): the routers whose L3 agent
 * is host. l3_hosts lists the hosts with a live L3 agent; each router goes
 * to one of them, the same one while that list does not change (a hash of
 * its id), or to host when l3_hosts is NULL or empty (one host). New list
 * or NULL after nb_error. The networks of the routers' legs belong in the
 * state's "networks" (each leg's "network_id"). */
json_t *nb_net_l3_host_routers(struct nb_ctx *ctx, const char *host, const json_t *l3_hosts);

/* Hooks called after a change, when linked in: the compute side refreshes
 * an instance's network info cache (Nova's network-changed event); the
 * control side tells the agents to fetch their state again. 0/-1. */
struct nb_db;
int nb_compute_network_changed(struct nb_db *db, struct nb_ctx *ctx, const char *instance_uuid)
    __attribute__((weak));
void nb_net_notify_agents(struct nb_ctx *ctx, const char *reason) __attribute__((weak));

#endif
