/* network.h - the Networking service (Neutron API v2.0 subset, under
 * /networking; catalog type "network") and what compute needs of it.
 *
 * nb_network_init registers the routes. The rest is for the compute API and
 * conductor, the way Nova uses Neutron (nova/network/neutron.py): validate
 * the requested networks at create, allocate ports when the build reaches
 * its networking step, describe them as Nova's network_info model (what
 * instance_info_caches.network_info stores and the server view's
 * "addresses" is built from), and release them on delete. Each function
 * runs with the checks and messages of the matching API call, on behalf of
 * ctx's project; an error is recorded in ctx once (nb_error). */
#ifndef NB_NETWORK_H
#define NB_NETWORK_H

#include "common/ctx.h"
#include "common/env.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* Registers the /networking routes; keeps env->db. 0/-1. */
int nb_network_init(struct nb_env *env);

/* The Networking API as the HTTP layer serves it (http_service.c); its init
 * registers it with its routes. */
struct nb_http_service;
extern const struct nb_http_service nb_network_http_service;

/* The agents' side of the network service (agent_rpc.c): listens on bus
 * topic "q-plugin" for the host agents' report_state, get_host_state,
 * update_device_list and update_floatingip_statuses (network/agent/
 * netagent.h gives the messages and the state's shape), and from then on
 * casts "host_state_changed" to the agents after every change they must
 * see. Call in the process that serves the Networking API (it opens the
 * database). 0/-1. */
int nb_network_rpc_start(struct nb_env *env);

/* Seeds the network an all-in-one starts with (devstack's): a shared
 * "private" network with subnet "private-subnet" 10.0.0.0/26 ([network]
 * seed_private_cidr), owned by the admin project, and, only when [network]
 * seed_public_cidr is set, an external "public" one. Idempotent. Call after
 * the identity bootstrap. 0/-1. */
int nb_network_seed_defaults(struct nb_env *env);

/* Checks a server create's networks as Nova's API does before it accepts
 * the request. requested is "auto", "none", or a list of
 * {"uuid"?, "port"?, "fixed_ip"?, "tag"?} (the body's "networks" as the
 * compute API validated its shape; NULL = not given, like "auto" before
 * 2.37). Every network must exist and be usable by ctx's project (its own,
 * shared, or ctx is admin): else 400 "Network <id> could not be found."; a
 * port must exist (404 "Port id <id> could not be found.") and be unbound
 * (409 "Port <id> is still in use."); a fixed_ip must be a valid address.
 * "auto"/NULL with more than one usable network and no default: 409
 * "Multiple possible networks found, use a Network ID to be more
 * specific.". 0/-1. */
int nb_network_validate_request(struct nb_ctx *ctx, const json_t *requested);

/* Allocates (or binds) one port per requested network for the instance, as
 * Nova's allocate_for_instance: device_id = instance_uuid, device_owner =
 * "compute:<az>", binding:host_id = host, status ACTIVE, a MAC fa:16:3e:…,
 * one fixed IP per subnet from its allocation pools (or the requested
 * fixed_ip). "auto"/NULL: the one usable network (none usable: no port, not
 * an error); "none": no port. Ports made before a failure are removed
 * again. On success *network_info (new reference) is Nova's network_info
 * model, a list with one entry per port:
 *   {"id": <port id>, "address": <mac>, "type": "ovs", "devname":
 *    "tap<port id[:11]>", "vnic_type": "normal", "active": true,
 *    "preserve_on_delete": <true for a port the user passed>,
 *    "network": {"id", "label": <network name>, "bridge": "br-int",
 *                "subnets": [{"cidr", "version", "gateway": {"address",
 *                  "type": "gateway", "version"}, "dns": [{"address", …}],
 *                  "ips": [{"address", "type": "fixed", "version",
 *                           "floating_ips": []}], "routes": []}],
 *                "meta": {"tenant_id", "mtu"}}}
 * When host has a live Linux bridge agent (a real data plane), the port is
 * bound as Neutron's linuxbridge mechanism binds it: binding:vif_type
 * "bridge", binding:vif_details {"port_filter": true, "connectivity":
 * "l2"}, status DOWN until the agent reports the device up; the entry's
 * "type" is then "bridge", "network"."bridge" "brq<network id[:11]>" and
 * "details" {"port_filter": true}. A host without one (the fake driver's)
 * keeps "ovs"/"br-int" and status ACTIVE, as today.
 * 0, or -1 after nb_error (400 unknown network, 409 "IP address … already
 * allocated in subnet …" / "No more IP addresses available on network …"). */
int nb_network_allocate_for_instance(struct nb_ctx *ctx, const char *instance_uuid,
                                     const char *host, const char *az, const json_t *requested,
                                     json_t **network_info);

/* The same, the ports made getting the security groups named (names or
 * ids in the instance's project, ctx->project_id; "default" its default
 * group; unknown: 400 SecurityGroupNotFound) instead of the default one,
 * as Nova passes the server's security_groups to the ports it creates. */
int nb_network_allocate_for_instance_sg(struct nb_ctx *ctx, const char *instance_uuid,
                                        const char *host, const char *az, const json_t *requested,
                                        const json_t *security_groups, json_t **network_info);

/* Deletes the instance's ports (those the user passed are unbound and kept:
 * device_id/device_owner/binding:host_id cleared). Idempotent; 0/-1. */
int nb_network_deallocate_for_instance(struct nb_ctx *ctx, const char *instance_uuid);

/* The instance moved to host (a live or cold migration ended there): its
 * ports' binding:host_id becomes host and their binding:profile loses
 * "migrating_to" (bindings.c). Ports changed (0 when
 * none needed it), or -1 after nb_error. */
int nb_network_bind_instance_host(struct nb_ctx *ctx, const char *instance_uuid, const char *host);

/* A live migration of the instance to host starts: its ports' binding:profile
 * gets "migrating_to": host (Nova's setup_networks_on_host before
 * pre_live_migration), so the host state lists them on both hosts and the
 * destination's agent wires them for the incoming guest. host NULL: the
 * migration was rolled back, "migrating_to" goes (nb_network_bind_instance_
 * host clears it as well when the move ends). Ports changed, or -1 after
 * nb_error (bindings.c). */
int nb_network_set_migrating_to(struct nb_ctx *ctx, const char *instance_uuid, const char *host);

/* What a move of the instance to host needs of the data plane (the live
 * migration's "ports" precheck): {"ports": [{"id", "network_id",
 * "network_type", "mtu", "vif_type"}], "agent": null (host has no Linux
 * bridge agent) or {"host", "admin_state_up", "age_s" (since its last
 * report, -1 never), "down_time" ([DEFAULT] agent_down_time, 75), "alive",
 * "local_ip", "tunnel_types"}}. New reference, or NULL after nb_error. */
json_t *nb_network_move_facts(struct nb_ctx *ctx, const char *instance_uuid, const char *host);

/* The instances that own ports: the distinct device_id of the ports whose
 * device_owner is "compute:<az>" (Neutron's GET /ports?device_owner=
 * compute:...), as a new JSON array of strings, or NULL after nb_error.
 * The conductor's start-up recovery asks which of them are gone. */
json_t *nb_network_port_devices(struct nb_ctx *ctx);

/* The instance's current network_info built from its ports (same shape as
 * above; [] when it has none). New reference, or NULL after nb_error. */
json_t *nb_network_info_for_instance(struct nb_ctx *ctx, const char *instance_uuid);

/* The instance's ports as Nova's os-interface lists them: a new array of
 * {"port_state", "fixed_ips": [{"subnet_id", "ip_address"}], "port_id",
 * "net_id", "mac_addr"}, or NULL after nb_error. */
json_t *nb_network_interface_attachments(struct nb_ctx *ctx, const char *instance_uuid);

/* What `nubo doctor server` checks of the instance's ports, read from the
 * network tables of db (the doctor opens the database itself): a new array
 * with one object per compute port of the instance (its ports row) plus
 * "ips" (its fixed IPs, comma-separated, "" if none), "network_name",
 * "network_mtu", "dhcp_ports": [{"id", "binding_host_id", "status"}] of
 * its network and "security_groups" (as nb_sg_port_groups gives them). NULL after a database error
 * recorded on ctx. */
struct nb_db;
json_t *nb_network_doctor_ports(struct nb_db *db, struct nb_ctx *ctx, const char *instance_uuid);
/* Every port bound to a host (binding:host_id set), for the cloud audit
 * (`nubo doctor cloud`): a new array of {"id", "device_id", "device_owner",
 * "binding_host_id", "status"}, or NULL after a database error on ctx. */
json_t *nb_network_bound_ports(struct nb_db *db, struct nb_ctx *ctx);

/* --- the metadata path through security groups (sg_metadata.c) ---------- */

/* Whether one security-group rule (a securitygrouprules row or its API
 * view) lets a guest's request to the metadata service out: an egress IPv4
 * rule whose protocol is none, 0 or TCP, whose port range is none or holds
 * 80, and whose remote_ip_prefix is none or holds 169.254.169.254. A rule
 * by remote group never does. Pure. */
bool nb_sg_rule_allows_metadata(const json_t *rule);

/* The first rule of groups ([{"id", "name", "rules": [...]}, ...]) that
 * nb_sg_rule_allows_metadata, and its group in *group (may be NULL); both
 * borrowed from groups. NULL when none does. Pure. */
const json_t *nb_sg_groups_allow_metadata(const json_t *groups, const json_t **group);

/* The security groups of a port, read from db: a new array of {"id",
 * "name" ("" for a group no longer there), "stateful", "known", "rules":
 * [rows with id, direction, ethertype, protocol, port_range_min/max,
 * remote_ip_prefix, remote_group_id]}, in binding order. NULL after a
 * database error on ctx. */
json_t *nb_sg_port_groups(struct nb_db *db, struct nb_ctx *ctx, const char *port_id);

/* Whether the instance's guest is cut off from the metadata service by its
 * security groups: 1 when it has compute ports and every one has port
 * security with groups that allow no metadata request (their names and ids
 * then go to groups[n], "" for none), 0 when some port lets it through or
 * there is no port, -1 after a database error on ctx. */
int nb_network_metadata_denied(struct nb_ctx *ctx, const char *instance_uuid, char *groups,
                               size_t n);

/* --- security groups for the compute API's proxy (security_groups.c,
 * sg_instance.c) ---------------------------------------------------------
 * Each runs as the matching /v2.0/security-group* call on behalf of ctx
 * (same checks, same errors recorded once with nb_error) and returns
 * Neutron's view: a group with its "security_group_rules", or a rule. Views
 * are new references, NULL after nb_error. A body is the request's inner
 * object and may be amended. */
/* The groups of ctx's project (every project's when all_projects and ctx is
 * admin), its default group made on first use. */
json_t *nb_network_sg_list(struct nb_ctx *ctx, bool all_projects);
json_t *nb_network_sg_show(struct nb_ctx *ctx, const char *id);
json_t *nb_network_sg_create(struct nb_ctx *ctx, json_t *body);
json_t *nb_network_sg_update(struct nb_ctx *ctx, const char *id, json_t *body);
int nb_network_sg_delete(struct nb_ctx *ctx, const char *id);
json_t *nb_network_sg_rule_create(struct nb_ctx *ctx, json_t *body);
json_t *nb_network_sg_rule_show(struct nb_ctx *ctx, const char *id);
int nb_network_sg_rule_delete(struct nb_ctx *ctx, const char *id);

/* neutronclient's find_resourceid_by_name_or_id for a security group: the
 * group of that id visible to ctx, else the one of that name in ctx's
 * project. Writes its id (NB_UUID_LEN) and returns 0; -1 after nb_error:
 * 404 "Unable to find security_group with name or id '<x>'", 409 "Multiple
 * security_group matches found for name '<x>', use an ID to be more
 * specific.". */
int nb_network_sg_find(struct nb_ctx *ctx, const char *name_or_id, char *id);

/* The groups bound to the instance's ports (device_id), each once, in the
 * order first met, as Neutron views. New array, or NULL after nb_error. */
json_t *nb_network_instance_security_groups(struct nb_ctx *ctx, const char *instance_uuid);

/* The servers' security groups as Nova's server view shows them (16
 * servers a query): a new object uuid -> [{"name": <group name, or id when
 * it has none>}], one entry per port and group, for the uuids (strings)
 * whose ports have groups; NULL after nb_error. */
json_t *nb_network_instances_sg_names(struct nb_ctx *ctx, const json_t *uuids);

/* Adds group sg_id to every port of the instance (add) or takes it off
 * every port that has it, as a port update of security_groups would, and
 * tells the agents. 0; 1 when remove found the group on no port; -1 after
 * nb_error (404 when the instance has no port; 400
 * PortSecurityAndIPRequiredForSecurityGroups for a port without port
 * security). */
int nb_network_instance_sg_change(struct nb_ctx *ctx, const char *instance_uuid, const char *sg_id,
                                  bool add);

/* --- floating IPs for the compute API's proxy (floatingips.c) -----------
 * Each runs as the matching /v2.0/floatingips call on behalf of ctx (same
 * checks, same errors recorded once with nb_error) and returns Neutron's
 * view (with "port_details"); new references, NULL after nb_error. */
/* The floating IPs of project_id (NULL: those ctx sees, every project's
 * for an admin), in creation order. */
json_t *nb_network_fip_list(struct nb_ctx *ctx, const char *project_id);
json_t *nb_network_fip_show(struct nb_ctx *ctx, const char *id);
/* body: the request's "floatingip" object (may be amended). */
json_t *nb_network_fip_create(struct nb_ctx *ctx, json_t *body);
json_t *nb_network_fip_update(struct nb_ctx *ctx, const char *id, json_t *body);
int nb_network_fip_delete(struct nb_ctx *ctx, const char *id);
/* The external networks (router:external), Nova's floating IP pools:
 * [{"id", "name"}] in creation order. */
json_t *nb_network_fip_pools(struct nb_ctx *ctx);

#endif
