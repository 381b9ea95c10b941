/* netagent.h - the per-host network agent: Neutron's Linux bridge agent,
 * DHCP agent, L3 agent and metadata agent in one thread of the process that
 * runs the host's compute agent (`nubo compute`, or the all-in-one). It
 * owns the host's data plane and never opens the database.
 *
 * How it talks to the control side (the network service, src/network,
 * which answers on bus topic "q-plugin", Neutron's plugin topic):
 *   - cast  "report_state"  {"agent": {"host", "binary", "agent_type",
 *           "topic", "availability_zone", "start_flag": bool,
 *           "configurations": {...}}}   every [agent] report_interval
 *           (30 s) and at start, once per agent type it runs:
 *             "Linux bridge agent" / "neutron-linuxbridge-agent"
 *             "DHCP agent"         / "neutron-dhcp-agent"
 *             "L3 agent"           / "neutron-l3-agent"
 *             "Metadata agent"     / "neutron-metadata-agent"
 *           configurations of the Linux bridge agent carry "local_ip" (the
 *           host's tunnel address, [vxlan] local_ip, default the compute
 *           host's address) and "tunnel_types": ["vxlan"].
 *   - call  "get_host_state" {"host"} -> the host's desired state (below).
 *   - call  "update_device_list" {"host", "devices_up": [port id...],
 *           "devices_down": [port id...], "devices_failed": [{"port_id",
 *           "reason"}]} -> {"devices_up": [...], "devices_down": [...]}
 *           (what was changed). Up: the port's device is wired (tap on
 *           its bridge with its filter loaded, or the DHCP/router leg in
 *           its namespace): status ACTIVE. Down: no device (guest off or
 *           gone): DOWN. Failed: ERROR, the reason kept for the port's
 *           fault (`nubo doctor server`, the server's event).
 *   - call  "update_floatingip_statuses" {"router_id", "statuses":
 *           {fip id: "ACTIVE"|"DOWN"|"ERROR"}}.
 * and the control side casts "host_state_changed" {"reason": text} to
 * topic "q-agent-notifier.<host>" for every host with a live agent after
 * any committed change that can alter a host's state (ports, networks,
 * subnets, security groups and rules, routers, floating IPs, bindings).
 * The agent then fetches the whole state again and reconciles (changes
 * coalesce: one fetch per burst); it also reconciles every [agent]
 * resync_interval (10 s) and scans its devices every [agent]
 * polling_interval (1 s), so a restarted agent or a rebooted host
 * converges and a guest's tap coming or going is reported within a second.
 *
 * The desired state, as "get_host_state" answers it (network/host_state.c
 * builds it; every consumer reads only these keys):
 * {"host": h, "local_ip": "<as reported>",
 *  "networks": [{  // with a port bound to h, DHCP served on h, or a leg of
 *                  // a router hosted on h
 *     "id", "name", "project_id", "admin_state_up", "mtu",
 *     "network_type": "vxlan"|"flat"|"vlan"|"local", "segmentation_id"
 *     (int or null), "physical_network" (or null), "external": bool,
 *     "port_security_enabled": bool,
 *     "bridge": "brq<id[:11]>",
 *     "vxlan_peers": ["<local_ip>", ...],  // other hosts with a port on it
 *     "subnets": [{"id", "cidr", "ip_version", "gateway_ip" (or null),
 *                  "enable_dhcp", "dns_nameservers": [..], "host_routes":
 *                  [{"destination", "nexthop"}], "ipv6_ra_mode",
 *                  "ipv6_address_mode" (or null)}],
 *     "dhcp": null, or when h serves the network's DHCP:
 *             {"port_id", "mac", "namespace": "qdhcp-<network id>",
 *              "tap": "tap<port[:11]>", "dev": "ns-<port[:11]>",
 *              "fixed_ips": [{"subnet_id", "ip_address", "prefixlen"}]},
 *     "dhcp_hosts": [{"port_id", "mac", "subnet_id", "ip_address",
 *                     "hostname", "device_id", "project_id"}]
 *                    // every other port's fixed IPs; [] when "dhcp" is
 *                    // null. device_id ("" when none) and project_id: the
 *                    // metadata proxy answers a guest bound to another
 *                    // host from them (optional: without, only the
 *                    // ports of "ports" are answered)
 *  }],
 *  "ports": [{   // compute ports bound to h (device_owner compute:*)
 *     "id", "network_id", "project_id", "device_id", "mac", "status",
 *     "tap": "tap<id[:11]>", "admin_state_up", "port_security_enabled",
 *     "fixed_ips": [{"subnet_id", "ip_address", "prefixlen", "ip_version"}],
 *     "security_groups": [group id...],
 *     "allowed_address_pairs": [{"ip_address", "mac_address"}],
 *     "migrating_to": host (only while a live migration moves it; the port
 *                     is then listed on both hosts)}],
 *  "security_groups": [{   // those of the ports above, and their remote
 *                          // groups
 *     "id", "stateful",
 *     "rules": [{"id", "direction": "ingress"|"egress", "ethertype":
 *                "IPv4"|"IPv6", "protocol" (null, "tcp", "udp", "icmp",
 *                "ipv6-icmp", ... or a number as a string),
 *                "port_range_min", "port_range_max" (int or null),
 *                "remote_ip_prefix" (or null), "remote_group_id" (or null)}],
 *     "members": ["<ip>", ...]}],  // fixed IPs and address-pair IPs of
 *                                  // every port in the group, any host
 *  "routers": [{   // hosted by h's L3 agent
 *     "id", "name", "project_id", "admin_state_up", "enable_snat",
 *     "namespace": "qrouter-<id>",
 *     "gateway": null or {"port_id", "network_id", "mac", "bridge",
 *                "tap": "tap<port[:11]>", "dev": "qg-<port[:11]>",
 *                "fixed_ips": [{"subnet_id", "ip_address", "prefixlen"}],
 *                "gateway_ip": the external subnet's gateway (or null)},
 *     "interfaces": [{"port_id", "network_id", "mac", "bridge", "tap",
 *                     "dev": "qr-<port[:11]>", "fixed_ips": [...]}],
 *     "routes": [{"destination", "nexthop"}],
 *     "floating_ips": [{"id", "floating_ip_address", "fixed_ip_address",
 *                       "port_id", "status"}],
 *     "port_forwardings": [{"id", "floating_ip_address", "protocol",
 *                           "external_port", "internal_ip_address",
 *                           "internal_port"}]   // optional: [] when absent
 *  }]}
 *
 * Names are Neutron's, so runbook commands work as written (`ip netns exec
 * qdhcp-<net> ping …`, `brctl show brq…`). Everything the agent creates is
 * recorded under its state directory and only that is ever removed: other
 * agents (another nubo on the same machine, another cloud's Neutron) may
 * share the kernel's namespaces. */
#ifndef NB_NETAGENT_H
#define NB_NETAGENT_H

#include "common/ctx.h"
#include "common/env.h"

#include <jansson.h>
#include <stdbool.h>

/* Whether this process runs the network agent for its compute hosts:
 * [network_agent] enabled = auto (the default: yes with the libvirt
 * driver, no with the fake one, whose hosts are not real), true, false. */
bool nb_netagent_wanted(void);

/* Starts the agent of host (the compute host name the ports are bound
 * to): listens on "q-agent-notifier.<host>", reports state, reconciles.
 * Nothing is changed on the host before the first state arrives. 0/-1
 * (logged). */
int nb_netagent_start(struct nb_env *env, const char *host);
/* Stops the agent's thread (before the bus shuts down). The data plane is
 * left as it is: guests keep their network across an agent restart.
 * Idempotent. */
void nb_netagent_stop(void);

/* os-vif's plug for a "bridge" VIF (one entry of network_info, as
 * nb_network_allocate_for_instance describes it): makes sure its bridge
 * (vif["network"]["bridge"]) exists, is up, L2 only, with the network's
 * MTU, so libvirt can put the guest's tap on it. Other VIF types: nothing
 * to do. Called by the virt driver before it starts or receives a guest.
 * 0/-1 after nb_error. */
int nb_vif_plug(struct nb_ctx *ctx, const json_t *vif);
/* Nova's wait for network-vif-plugged: after the guest of inst starts,
 * waits until the plugin reports every "bridge" VIF of inst["network_info"]
 * ACTIVE (the host's agent wired its tap), up to [DEFAULT]
 * vif_plugging_timeout seconds (300; 0: no wait). A port in ERROR fails at
 * once with its reason; a timeout fails when [DEFAULT] vif_plugging_is_fatal
 * (true), else is logged. 0/-1 after nb_error. */
int nb_vif_wait_active(struct nb_ctx *ctx, const json_t *inst);
/* A network-vif-plugged event for port_id (os-server-external-events, as
 * the network service sends it when the port goes ACTIVE): wakes the
 * waits of nb_vif_wait_active, which then ask the plugin again at once. */
void nb_vif_event(const char *port_id, const char *status);

#endif
