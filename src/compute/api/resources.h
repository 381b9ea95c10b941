/* resources.h - helpers shared by the Compute API resource files that are
 * neither validation (validate.h) nor links (links.h): database row
 * helpers and the compute service's liveness (resources.c), availability
 * zones (availability_zones.c) and keypair fingerprints (keypairs.c). They
 * are not part of the module's public header (api.h). */
#ifndef NB_COMPUTE_RESOURCES_H
#define NB_COMPUTE_RESOURCES_H

#include "common/ctx.h"
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* --- database rows --------------------------------------------------------- */

/* The JSON boolean of an integer column of row. */
json_t *nb_res_row_bool(const json_t *row, const char *key);
/* row[key] copied (new ref), JSON null when absent. */
json_t *nb_res_row_copy(const json_t *row, const char *key);

/* --- services (shared by services, hypervisors, availability zones) -------- */

/* True when a services row counts as up: not forced_down and last_seen_up
 * (else created_at) within [DEFAULT] service_down_time seconds. */
bool nb_res_service_is_up(const json_t *svc);

/* --- availability zones (availability_zones.c) ------------------------------ */

/* {host: "az1[,az2…]"} for every host in an aggregate with an
 * availability_zone (zones in aggregate order, deduplicated). New ref or
 * NULL on a db error. */
json_t *nb_res_aggregate_zones(struct nb_ctx *ctx);
/* The zone Nova shows for a services row (set_availability_zones): the
 * host's aggregate zones or [DEFAULT] default_availability_zone for
 * nova-compute, [DEFAULT] internal_service_availability_zone for the rest.
 * zones is nb_res_aggregate_zones' map. Borrowed from zones or config. */
const char *nb_res_service_zone(const json_t *zones, const json_t *svc);

/* --- keypairs (keypairs.c) ------------------------------------------------ */

/* Nova's ssh fingerprint: checks that public_key is "<type> <base64> [comment]"
 * holding a well-formed key of that type (rsa, dss, ecdsa, ed25519) and
 * writes the MD5 of the decoded blob as colon hex into out[48]. 0, or -1 if
 * the key is not valid. */
int nb_keypair_ssh_fingerprint(const char *public_key, char out[48]);
/* SHA-1 colon hex of a PEM X.509 certificate into out[64]. 0/-1 (then err,
 * of size errlen, says why as cryptography would). */
int nb_keypair_x509_fingerprint(const char *pem, char out[64], char *err, size_t errlen);

#endif
