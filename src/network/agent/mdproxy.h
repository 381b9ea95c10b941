/* mdproxy.h - the metadata proxy of the network agent (mdproxy.c): what
 * Neutron's haproxy in the qdhcp namespace and neutron-metadata-agent do
 * together, in the agent's process. Its pure parts, for the tests. */
#ifndef NB_NETAGENT_MDPROXY_H
#define NB_NETAGENT_MDPROXY_H

#include <jansson.h>
#include <stddef.h>

/* The address and port the proxy listens on in every qdhcp namespace. */
#define NA_MD_ADDRESS "169.254.169.254"
#define NA_MD_PORT 80

/* Who may ask on network net_id: [{"ip", "port_id", "device_id",
 * "project_id"}] from the state's compute ports on that network (their
 * fixed IPs) and the network's dhcp_hosts entries that name a device_id
 * (ports bound to other hosts whose DHCP this host serves). Entries
 * without a device_id (no instance) are left out. New ref. */
json_t *na_md_port_table(const json_t *state, const char *net_id);

/* The same for a router of the state: the port tables of the networks of
 * its interfaces (legs), together. New ref. */
json_t *na_md_router_table(const json_t *state, const json_t *router);

/* The instance and project of the port with address ip in table, as
 * Neutron's metadata agent decides it: exactly one port must have it.
 * Returns 1 with *device_id and *project_id (borrowed from table), else 0
 * (none, or several ports). */
int na_md_lookup(const json_t *table, const char *ip, const char **device_id,
                 const char **project_id);

/* The headers sent to the metadata API, exactly those Neutron's agent
 * sends (everything the guest sent is dropped): {"X-Forwarded-For",
 * "X-Instance-ID", "X-Tenant-ID", "X-Instance-ID-Signature" (hex
 * HMAC-SHA256 of the instance ID under secret)}. New ref. */
json_t *na_md_proxy_headers(const char *secret, const char *instance_id, const char *tenant_id,
                            const char *forwarded_for);

/* What the proxy answers for the metadata API's status, as Neutron's
 * agent: 200 and 400/403/404/409 as they are, 500 with "Remote metadata
 * server experienced an internal server error.", anything else 500 with
 * "An unknown error has occurred. Please try your request again.".
 * *explanation: the text of the error page (static). */
int na_md_relay_status(long upstream, const char **explanation);

/* The metadata API's base URL ("http://host:port"), from [metadata]
 * nova_metadata_host / nova_metadata_port (the names of Neutron's
 * metadata_agent.ini), by default the metadata role's own [metadata]
 * listen (127.0.0.1 for a wildcard) and port. buf[n]. */
void na_md_upstream(char *buf, size_t n);

/* Stops every proxy of every agent of the process (closes their sockets).
 * Idempotent. */
void na_mdproxy_stop_all(void);

#endif
