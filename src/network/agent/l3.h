/* l3.h - the L3 agent's pure part (l3_rules.c): what a router of the host
 * state (netagent.h, "routers") asks of its qrouter-<id> namespace, as
 * text and lists, so that l3.c only runs commands. */
#ifndef NB_NETAGENT_L3_H
#define NB_NETAGENT_L3_H

#include <jansson.h>
#include <stdbool.h>

/* The nft table of a router namespace (one per namespace, so the name
 * cannot collide with another agent's). */
#define NA_L3_TABLE "neutron_l3_agent"

/* The `nft -f` text that replaces the router's NAT table atomically:
 * floating IPs (DNAT of the floating address to the fixed one in
 * prerouting and output, SNAT of the fixed address back to the floating
 * one), then, when enable_snat, SNAT of everything leaving by qg- to the
 * gateway's first IPv4 address, and of DNAT'ed traffic that did not come
 * in by qg- (hairpin). Traffic between the router's interfaces is not
 * translated. Entries with an invalid address are left out. malloc'd. */
char *na_l3_ruleset(const json_t *router);

/* The addresses "ip/prefixlen" a router leg's device must hold: its
 * fixed_ips, and, for the gateway leg (router non-NULL), each floating IP
 * (of floating_ips and port_forwardings) as /32. New list. */
json_t *na_l3_leg_addresses(const json_t *leg, const json_t *router);

/* The router's first IPv4 gateway address, or NULL. Borrowed. */
const char *na_l3_gateway_v4(const json_t *router);

/* The legs of a router: its interfaces then its gateway (if any), each
 * with "gateway": bool. New list. */
json_t *na_l3_legs(const json_t *router);

/* The floating IPs that can be configured (a valid IPv4 floating and
 * fixed address), a new list of the state's entries. */
json_t *na_l3_valid_fips(const json_t *router);

/* The port forwardings that can be configured (valid addresses, ports
 * and protocol), a new list of the state's entries. */
json_t *na_l3_valid_pfs(const json_t *router);

/* The radvd.conf of a router (Neutron's agent/linux/ra.py template): per
 * interface leg with an IPv6 subnet whose ipv6_ra_mode is set, an
 * interface block sending advertisements every min_interval to
 * max_interval seconds (Neutron's defaults: 30, 100) with the
 * network's MTU, the M flag for dhcpv6-stateful, the O flag for
 * dhcpv6-stateless, the SLAAC subnets' DNS servers (3 at most), each
 * prefix on-link and autonomous (slaac, dhcpv6-stateless) or not
 * (dhcpv6-stateful), and the metadata route fe80::a9fe:a9fe/128. NULL when
 * no interface needs advertisements (radvd then does not run). Invalid
 * cidrs, names and addresses are left out. malloc'd. */
char *na_l3_radvd_conf(const json_t *router, int min_interval, int max_interval);

struct na;
struct nb_ctx;
/* radvd.c: makes the router's radvd (in namespace ns) match
 * na_l3_radvd_conf: started, reloaded, or stopped when none is needed.
 * 0/-1 after nb_error. */
int na_radvd_sync(struct na *a, struct nb_ctx *ctx, const json_t *router, const char *ns);
/* Stops the router's radvd and removes its files (a router gone). */
void na_radvd_remove(struct na *a, struct nb_ctx *ctx, const char *router_id);

/* True when s is a valid IPv4 (v4) / IPv6 (!v4) address text. */
bool na_l3_ip_ok(const char *s, bool v4);

#endif
