/* vxlan.h - the VXLAN part of the L2 phase (vxlan.c): Neutron's Linux
 * bridge agent with head-end replication. For every vxlan network of the
 * host state that has peers (netagent.h "vxlan_peers"), a device
 * vxlan-<segmentation_id> (local = the state's "local_ip", dstport 4789,
 * learning off, MTU = the network's) is a port of the network's bridge
 * brq<net[:11]>, and its forwarding database floods to every peer with one
 * all-zero entry each (`bridge fdb append 00:00:00:00:00:00 dev vxlan-<vni>
 * dst <peer>`). Devices of networks that left the host, or lost their
 * last peer, are removed (only those the agent recorded as its own). */
#ifndef NB_NETAGENT_VXLAN_H
#define NB_NETAGENT_VXLAN_H

#include "common/ctx.h"
#include "network/agent/internal.h"

#include <jansson.h>

#define NA_VXLAN_PORT 4789
#define NA_VXLAN_ZERO_MAC "00:00:00:00:00:00"

/* Pure: the VXLAN devices state wants on this host, a new array of
 * {"dev": "vxlan-<vni>", "vni", "network_id", "bridge", "mtu", "local_ip",
 *  "peers": [ip...] (sorted, without duplicates or the local address)},
 * in the order of the state's networks. Networks that are not vxlan, have
 * no segmentation id or no peers are left out. */
json_t *na_vxlan_plan(const json_t *state);

/* Pure: the peers flooded to now, from `bridge fdb show dev <dev>` output:
 * the dst of each all-zero entry. New array. */
json_t *na_vxlan_fdb_peers(const char *fdb_text);

/* Pure: whether an existing device, as `ip -d -j link show dev <dev>`
 * describes it (its array's first object), has the wanted VNI, local
 * address, port and learning off; else it is recreated. */
bool na_vxlan_link_matches(const json_t *link, const json_t *want);

/* na_vxlan_sync (internal.h) makes the host's VXLAN devices match the
 * state: 0, or -1 after nb_error (the other networks are still done). */

#endif
