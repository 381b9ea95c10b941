/* server_addresses.h - a server's "addresses" from its cached network
 * info, and the ip/ip6 list filters over the same cache. Defined in
 * server_addresses.c; private to compute/api. */
#ifndef NB_COMPUTE_API_SERVER_ADDRESSES_H
#define NB_COMPUTE_API_SERVER_ADDRESSES_H

#include "common/ctx.h"
#include "compute/api/jsonbuf.h"
#include "common/http.h"
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* Nova's "addresses" of a network_info list (instance_info_caches):
 * {"<network label>": [{"version", "addr"[, "OS-EXT-IPS:type":
 * "fixed"|"floating", "OS-EXT-IPS-MAC:mac_addr" when extend]}…]}, fixed IPs
 * then floating ones per label, labels in VIF order. New ref. */
json_t *nb_srv_addresses(const json_t *network_info, bool extend);
/* The same "addresses" object written to b. */
void nb_srv_write_addresses(struct nb_srv_buf *b, const json_t *network_info, bool extend);
/* The instance's cached network_info ([] when none). New ref, or NULL
 * after a database error. */
json_t *nb_srv_network_info(struct nb_ctx *ctx, const char *instance_uuid);
/* The UUIDs of the instances with a fixed IP that the ip (IPv4) or ip6
 * regular expression matches from its start (Nova's _ip_filter; NULL: not
 * filtered on). New array, or NULL after 400 (bad expression) or a
 * database error. */
json_t *nb_srv_uuids_by_ip(struct nb_ctx *ctx, const char *ip, const char *ip6);

#endif
