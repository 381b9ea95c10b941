/* dhcp.h - the pure part of the DHCP phase (dhcp.c): a network of the host
 * state (netagent.h) -> the files and command line of its dnsmasq, as
 * Neutron's dnsmasq driver (neutron/agent/linux/dhcp.py) writes them. */
#ifndef NB_NETAGENT_DHCP_H
#define NB_NETAGENT_DHCP_H

#include <jansson.h>
#include <stdbool.h>

struct na_dhcp_conf {
    const char *domain;     /* [DEFAULT] dns_domain: "openstacklocal" */
    long lease_seconds;     /* [DEFAULT] dhcp_lease_duration: 86400; -1 = infinite */
    bool force_metadata;    /* [dhcp] force_metadata: the metadata route via the DHCP port */
    bool isolated_metadata; /* [dhcp] enable_isolated_metadata */
};

/* --dhcp-hostsfile: "mac,host-<ip>.<domain>,ip" per fixed IP of the
 * network's other ports on a subnet with DHCP ("mac,tag:dhcpv6,name,[ip]"
 * for DHCPv6-stateful; none for SLAAC and DHCPv6-stateless). New string. */
char *na_dhcp_hostsfile(const json_t *net, const struct na_dhcp_conf *conf);
/* --addn-hosts: "ip\tfqdn hostname" per fixed IP. New string. */
char *na_dhcp_addn_hosts(const json_t *net, const struct na_dhcp_conf *conf);
/* --dhcp-optsfile: per subnet with DHCP its DNS servers, classless routes
 * (option 121 and 249: host routes, the metadata route and the default
 * route, RFC 3442) and router. routers is the state's "routers" (a subnet
 * whose gateway is one of their legs is not isolated). New string. */
char *na_dhcp_optsfile(const json_t *net, const json_t *routers, const struct na_dhcp_conf *conf);
/* dnsmasq's argv (a JSON array of strings) with its files in dir. */
json_t *na_dhcp_argv(const json_t *net, const char *dir, const struct na_dhcp_conf *conf);
/* Whether the network's DHCP port answers metadata on 169.254.169.254
 * (some IPv4 subnet with DHCP whose metadata route goes to it). */
bool na_dhcp_serves_metadata(const json_t *net, const json_t *routers,
                             const struct na_dhcp_conf *conf);
/* The leases file text (dnsmasq's --dhcp-leasefile) without the leases
 * the hosts file text hosts no longer allows: an IPv4 lease whose (MAC,
 * address) has no line; an IPv6 lease (keyed by IAID and DUID, no MAC)
 * whose address has no line, or was on a line of old_hosts (the previous
 * hosts file, may be NULL) whose (MAC, address) hosts lacks. *dropped:
 * how many leases went. New string. */
char *na_dhcp_prune_leases(const char *leases, const char *old_hosts, const char *hosts,
                           int *dropped);

#endif
