/* sg.h - security groups of the network agent: the pure renderer
 * (sg_render.c: host state -> one nft script) and its apply (sg.c,
 * na_sg_sync in internal.h).
 *
 * Two tables per agent, both named after na_tag() so agents sharing the
 * machine's root namespace never touch each other's:
 *   table bridge nubo_port_<tag>: anti-spoofing of what each filtered port
 *     sends (MAC, ARP, IPv4/IPv6 source against its fixed IPs and allowed
 *     address pairs; no DHCP or router-advertisement answers from a VM, no
 *     VLAN-tagged frames) and the port identity passed on in the packet
 *     mark: bits 16-31 = the sending port's index, bits 0-15 = the
 *     receiving port's (the bridge family has no conntrack here).
 *   table inet nubo_sg_<tag>: one conntrack zone per bridge (raw
 *     prerouting), and in forward, for packets on this agent's bridges only
 *     (br_netfilter shows the bridge as iif/oif), the sender's egress chain
 *     (allowed: return) then the receiver's ingress chain (allowed:
 *     accept); each ends in drop, as Neutron's port chains do. */
#ifndef NB_NETAGENT_SG_H
#define NB_NETAGENT_SG_H

#include <jansson.h>
#include <stdbool.h>

struct na_sg_plan {
    char *script;  /* nft -f input: replaces both tables whole, or (no port
                      needs them) deletes them */
    bool empty;    /* no port needs a filter */
    json_t *ports; /* ids of the ports filtered */
    /* What the filters allow, for conntrack cleanup after a change:
     * {"ports": {port id: {"zone": n, "ips": [ip...], "groups": [id...],
     *            "rules": {key: {"direction", "ethertype", "protocol"}}}},
     *  "members": {group id: {"IPv4": [ip...], "IPv6": [...]}}} */
    json_t *flows;
};

/* The two table names of tag: out of at least 32 bytes each. */
void na_sg_table_names(const char *tag, char *bridge_table, char *inet_table);

/* Renders the filters of state's ports for the agent tagged tag. 0, or -1
 * with *err (a static message) on a state it cannot read. */
int na_sg_render(const json_t *state, const char *tag, struct na_sg_plan *out, const char **err);
void na_sg_plan_free(struct na_sg_plan *p);

/* The conntrack commands that delete the entries old_flows allowed and
 * new_flows no longer does (a removed rule of a port's group, a removed
 * group member, a group the port left), as Neutron's ip_conntrack runs
 * them: each an array of argv strings starting with "conntrack". New
 * array (empty when nothing to cut). */
json_t *na_sg_conntrack_cuts(const json_t *old_flows, const json_t *new_flows);

/* The conntrack zone of a network for the agent tagged tag (1-65535, a
 * hash, so agents on one machine rarely share one). */
int na_sg_zone(const char *tag, const char *network_id);

#endif
