/* network_int.h - what the files of the network module share (not for other
 * modules: they use network.h).
 *
 * Routing: every /networking route is registered with nb_http_route(), as
 * every service's; the HTTP layer renders a recorded error with the
 * service's renderer (http_service.c) in Neutron's shape {"NeutronError":
 * {"type", "message", "detail"}}. The "type" is the name given to nb_error
 * (Neutron's exception class name, e.g. "NetworkNotFound"); NULL names map
 * to HTTPBadRequest, HTTPNotFound, …
 *
 * Collections: a resource's handler builds the full views it may show
 * (policy already applied) and nb_net_list_respond() applies Neutron's
 * query handling (filters on any attribute, fields=, sort_key/sort_dir,
 * limit/marker/page_reverse with links) and answers.
 *
 * Hooks (filled by helper N2's security_groups.c / subnetpools.c at init,
 * NULL until then): see struct nb_net_hooks. */
#ifndef NB_NETWORK_INT_H
#define NB_NETWORK_INT_H

#include "common/ctx.h"
#include "common/env.h"
#include "common/http.h"

#include <jansson.h>
#include <stdbool.h>

/* The network files register their routes through nb_net_route
 * (notify.c): a POST/PUT/DELETE that succeeds then tells the hosts' agents
 * their state may have changed (after its commit); GET and HEAD routes are
 * registered as they are. */
void nb_net_route(const char *method, const char *pattern, nb_handler_fn fn, int flags);
#define nb_http_route(method, pattern, fn, flags) nb_net_route(method, pattern, fn, flags)

/* The module's environment (set by nb_network_init). */
extern struct nb_env *nb_net_env;

/* Adds an extension to GET /networking/v2.0/extensions. Strings are borrowed
 * (static). Call at init only. */
void nb_net_extension(const char *alias, const char *name, const char *description);
/* Registers GET /networking/v2.0/extensions[/{alias}] (extensions.c). */
void nb_net_extensions_routes(void);

/* Hooks other network files may fill at init. */
struct nb_net_hooks {
    /* Resolves the security groups of a port being created (requested NULL:
     * not given -> the project's default group) or updated (requested a
     * list). Returns a new list of group ids the project may use, or NULL
     * after nb_error (404 SecurityGroupNotFound, …). */
    json_t *(*port_security_groups)(struct nb_ctx *ctx, const char *project_id,
                                    const json_t *requested);
    /* Fills body["cidr"] (and gateway/pools if it wishes) of a subnet being
     * created from body["subnetpool_id"] / use_default_subnetpool. 0/-1. */
    int (*subnet_from_pool)(struct nb_ctx *ctx, const char *project_id, json_t *body);
    /* Called inside the transaction before a port is deleted: -1 after
     * nb_error to refuse (e.g. a router interface port). NULL: allowed. */
    int (*port_delete_check)(struct nb_ctx *ctx, const json_t *port);
};
extern struct nb_net_hooks nb_net_hooks;

/* Init functions of the other network files, called by nb_network_init when
 * linked in (weak). 0/-1. */
int nb_net_security_groups_init(struct nb_env *env) __attribute__((weak));
int nb_net_routers_init(struct nb_env *env) __attribute__((weak));
int nb_net_subnetpools_init(struct nb_env *env) __attribute__((weak));
/* quotas.c: Neutron's quotas API, read side. 0/-1. */
int nb_net_quotas_init(struct nb_env *env);
/* Refuses creating one more resource ("network", "subnet", "port",
 * "router", "floatingip", "security_group", "security_group_rule",
 * "subnetpool") for project beyond its limit: 409 OverQuota "Quota exceeded
 * for resources: ['network']." Projects "" (service ports) and system
 * contexts are not limited. Call inside the create's transaction. 0/-1. */
int nb_net_quota_check(struct nb_ctx *ctx, const char *project, const char *resource);
/* agents.c: GET /v2.0/agents (none run: an empty list). */
void nb_net_agents_init(void);

/* Route registration of each resource file (api.c calls them). 0/-1. */
int nb_net_networks_init(void);
int nb_net_subnets_init(void);
int nb_net_ports_init(void);

/* --- resources shared between files ----------------------------------- */

/* The networks row id as ctx may see it (own project, shared, external, or
 * admin): new ref, or NULL after nb_error 404 NetworkNotFound. */
json_t *nb_net_network_get(struct nb_ctx *ctx, const char *id);
/* True when ctx may see / may change (owner or admin) the network row. */
bool nb_net_network_visible(const struct nb_ctx *ctx, const json_t *row);
bool nb_net_network_owned(const struct nb_ctx *ctx, const json_t *row);

/* The subnets of a network (rows, in creation order). New ref or NULL. */
json_t *nb_net_subnet_rows(struct nb_ctx *ctx, const char *network_id);

/* Create a network / subnet from the inner body as POST does, on behalf of
 * ctx, in their own transaction. View (new ref) or NULL after nb_error. */
json_t *nb_net_network_create(struct nb_ctx *ctx, json_t *body);
json_t *nb_net_subnet_create(struct nb_ctx *ctx, json_t *body);

/* Creates a port from a Neutron "port" body (the inner object, as POST
 * /v2.0/ports takes it, checked the same way, on behalf of ctx: pass an
 * admin ctx to set binding:* or another project's tenant_id). Runs its own
 * transaction: call it outside one. body may be amended (security_groups).
 * Returns the port's view (new ref) or NULL after nb_error. For routers
 * (N2) and the compute side (instance.c). */
json_t *nb_net_port_create(struct nb_ctx *ctx, json_t *body);
/* Gives every port of subnet's network (a subnet row with automatic IPv6
 * addresses) but router interfaces its EUI-64 address on subnet, inside
 * the caller's transaction. 0/-1 after nb_error. */
int nb_net_ports_add_eui64(struct nb_ctx *ctx, const json_t *subnet);
/* Deletes a port as DELETE /v2.0/ports/{id} on behalf of ctx, without the
 * port_delete_check hook. One statement (no transaction needed). 0/-1. */
int nb_net_port_delete(struct nb_ctx *ctx, const char *id);
/* Sets a port's device_id/device_owner (NULL: ""), no policy check. 0/-1
 * (404 PortNotFound). */
int nb_net_port_set_device(struct nb_ctx *ctx, const char *port_id, const char *device_id,
                           const char *device_owner);
/* Replaces the security groups of port id with groups (ids), as a port
 * update of security_groups on behalf of ctx, in its own transaction.
 * 0/-1 after nb_error. */
int nb_net_port_set_groups(struct nb_ctx *ctx, const char *id, const json_t *groups);
/* The view of a ports row (admin-only binding attributes for admins). */
json_t *nb_net_port_view(struct nb_ctx *ctx, const json_t *row);

/* --- requests ---------------------------------------------------------- */

/* The object under key in the request body ({"network": {...}}): 400 when
 * missing or not an object. Borrowed. */
json_t *nb_net_body(struct nb_ctx *ctx, struct nb_req *req, const char *key);

/* The project a create acts for: body's project_id/tenant_id (must agree;
 * another project only for admins), else ctx's. Writes out[NB_ID_LEN]. 0/-1. */
int nb_net_owner(struct nb_ctx *ctx, const json_t *body, char *out);

/* Refuses action on an object the caller can see but does not own (a shared
 * or external network of another project, its subnets, a shared subnet
 * pool): 403 PolicyNotAuthorized "rule:<action> is disallowed by policy", as
 * Neutron's base controller re-raises when the show policy passes. Objects
 * the caller cannot see are 404 (their getters). Returns -1. */
int nb_net_deny(struct nb_ctx *ctx, const char *action);

/* --- responses --------------------------------------------------------- */

/* Answers GET on a collection: views (stolen, a list of objects) filtered,
 * sorted, paged and trimmed to fields= by the request's query, as
 * {collection: [...], collection_links: [...]}. Returns 0. */
int nb_net_list_respond(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp,
                        const char *collection, json_t *views);

/* Creates each body of items (borrowed) with create_one in one transaction,
 * all or nothing, and answers 201: {collection: [views]} for a bulk
 * request, else {key: view} trimmed to fields=. 0/-1. */
int nb_net_create_respond(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp,
                          const char *key, const char *collection, const json_t *items, bool bulk,
                          json_t *(*create_one)(struct nb_ctx *ctx, json_t *body));

/* Answers a single resource {key: view} trimmed to fields=. Steals view. */
int nb_net_show_respond(struct nb_req *req, struct nb_resp *resp, int status, const char *key,
                        json_t *view);

/* True when view passes every filter of the query (used for lists). */
bool nb_net_view_matches(struct nb_req *req, const json_t *view);

/* Adds the standard attributes from row (created_at, updated_at,
 * revision_number, description, tags) and project_id/tenant_id to view. */
void nb_net_std_attrs(json_t *view, const json_t *row);

/* Current time as Neutron shows it: "2026-11-30T06:00:00Z" into buf[32]. */
char *nb_net_now(char *buf);

/* --- validators (validate.c; pure, unit-tested) ------------------------ */

/* An attribute of a resource as neutron_lib's RESOURCE_ATTRIBUTE_MAP has it. */
enum nb_net_attr_type {
    NB_A_STR,  /* string, max_len (0: any) */
    NB_A_BOOL, /* converted to a JSON boolean */
    NB_A_INT,  /* converted to a JSON integer; max_len != 0: non-negative */
    NB_A_UUID,
    NB_A_MAC,
    NB_A_IP,
    NB_A_CIDR,
    NB_A_IPVER, /* 4 or 6 */
    NB_A_LIST,  /* a list (items checked by the resource) */
    NB_A_DICT,
    NB_A_ANY,
};
struct nb_net_attr {
    const char *name;
    enum nb_net_attr_type type;
    bool allow_post, allow_put, required, nullable;
    size_t max_len;
};

/* The request-body walk of Neutron's prepare_request_body over attrs
 * (terminated by a {NULL} entry): unknown attributes, not-allowed ones,
 * required ones, conversion in place, validation. project_id/tenant_id are
 * always known. 0, or -1 after nb_error (400). */
int nb_net_check_attrs(struct nb_ctx *ctx, json_t *body, const struct nb_net_attr *attrs,
                       bool create);

/* create(ctx, body) in a transaction of its own: committed when it gives a
 * view, rolled back when it fails. The view (new ref), or NULL after
 * nb_error. */
json_t *nb_net_create_in_tx(struct nb_ctx *ctx, json_t *body,
                            json_t *(*create)(struct nb_ctx *ctx, json_t *body));

/* Neutron's attribute validators. Each returns NULL when valid, else the
 * reason text (static or into buf[256]), worded as neutron_lib's. */
const char *nb_net_validate_mac(const char *s, char *buf);
const char *nb_net_validate_ip(const char *s, char *buf);
const char *nb_net_validate_cidr(const char *s, char *buf); /* subnet: no host bits */
const char *nb_net_validate_uuid(const char *s, char *buf);
const char *nb_net_validate_string(const json_t *v, size_t max, char *buf);
/* Parses Neutron's boolean forms (true/false, "True"/"false", "1", 0…).
 * 0 with *out, -1 when not a boolean. */
int nb_net_parse_bool(const json_t *v, bool *out);

/* --- IPAM (ipam.c; pure address math, unit-tested) --------------------- */

struct nb_ip {
    int version;             /* 4 or 6 */
    unsigned char bytes[16]; /* network order; v4 uses the first 4 */
};

/* Parses an address. 0/-1. */
int nb_ip_parse(const char *s, struct nb_ip *ip);
/* Formats canonically (v6 compressed) into out[64]. */
char *nb_ip_format(const struct nb_ip *ip, char *out);
/* Parses "addr/len"; *strict: host bits must be zero. 0/-1. */
int nb_cidr_parse(const char *s, struct nb_ip *net, int *prefix, bool strict);
/* -1/0/1 like strcmp, versions must match. */
int nb_ip_cmp(const struct nb_ip *a, const struct nb_ip *b);
/* a + n (n may be negative); wraps within the family. */
void nb_ip_add(struct nb_ip *a, long long n);
/* True when ip lies in net/prefix. */
bool nb_ip_in_cidr(const struct nb_ip *ip, const struct nb_ip *net, int prefix);
/* First and last address of net/prefix. */
void nb_cidr_bounds(const struct nb_ip *net, int prefix, struct nb_ip *first, struct nb_ip *last);

/* Default allocation pools for cidr with gateway (NULL: none) as Neutron
 * makes them: every address but the network/broadcast (v4), the subnet-router
 * anycast (v6, first) and the gateway. New list [{"start","end"}], NULL on a
 * bad cidr. */
json_t *nb_ipam_default_pools(const char *cidr, const char *gateway);

/* Validates pools (list of {"start","end"}) against cidr and gateway
 * (NULL: none) as Neutron's _validate_allocation_pools and
 * _validate_gw_out_of_pools do. 0, or -1 after nb_error (400 InvalidInput /
 * InvalidAllocationPool / OutOfBoundsAllocationPool, 409
 * OverlappingAllocationPools / GatewayConflictWithAllocationPools). */
int nb_ipam_check_pools(struct nb_ctx *ctx, const char *cidr, const char *gateway,
                        const json_t *pools);

/* The first address of pools (in pool order) not in used (a list of address
 * strings), into out[64]. 0, or -1 when all are taken. */
int nb_ipam_first_free(const json_t *pools, const json_t *used, char *out);

/* True when addr (canonical text) is inside one of pools. */
bool nb_ipam_in_pools(const json_t *pools, const char *addr);

/* True when a subnet with these modes (NULL: unset) has automatic
 * addresses, SLAAC or DHCPv6-stateless in either (neutron's
 * ipv6_utils.is_auto_address_subnet). */
bool nb_ipam_auto_address(const char *ra_mode, const char *address_mode);

/* The EUI-64 address of mac ("aa:bb:cc:dd:ee:ff", or with '-') in the
 * IPv6 cidr, as Neutron computes it ((prefix.first + eui64) ^ 1<<57), into
 * out[64]. 0, or -1 on a bad cidr/mac or an IPv4 cidr. */
int nb_ipam_eui64(const char *cidr, const char *mac, char *out);

#endif
