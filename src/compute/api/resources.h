/* resources.h - helpers shared by the Compute API resource files (versions,
 * flavors, keypairs, availability zones, aggregates, server groups, services,
 * hypervisors): the links Nova puts in its views, paging, query-string
 * checks, policy refusals and the wording of Nova's JSON-schema validator.
 *
 * The link, paging and validation helpers live in versions.c (the file that
 * knows the API's URLs); the keypair crypto helpers live in keypairs.c. They
 * are not part of the module's public header (api.h). */
#ifndef NB_COMPUTE_RESOURCES_H
#define NB_COMPUTE_RESOURCES_H

#include "common/ctx.h"
#include "common/http.h"
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* Nova's db_const.MAX_INT, the upper bound of flavor integers. */
#define NB_RES_MAX_INT 0x7FFFFFFFLL

/* --- links and paging ------------------------------------------------------ */

/* "<base>/compute/v2.1", or [api] compute_link_prefix applied as Nova does.
 * Returns a malloc'd string. */
char *nb_res_api_url(void);
/* "<base>/compute" (the bookmark base, without the version). malloc'd. */
char *nb_res_bookmark_url(void);
/* Nova's _get_links: [{"rel": "self", "href": <api>/<collection>/<id>},
 * {"rel": "bookmark", "href": <bookmark>/<collection>/<id>}]. New ref. */
json_t *nb_res_links(const char *collection, const char *id);
/* [api] max_limit (Nova's default 1000). */
long long nb_res_max_limit(void);
/* Nova's get_limit_and_marker: limit is min(query limit, max_limit) and must
 * be a non-negative integer (400 otherwise, worded as the query schema).
 * *marker is borrowed from req (NULL if absent). 0/-1. */
int nb_res_limit_marker(struct nb_ctx *ctx, struct nb_req *req, long long *limit,
                        const char **marker);
/* Nova's _get_collection_links: when nitems equals min(limit param,
 * max_limit), sets body[key] = [{"rel": "next", "href": <api>/<collection>?
 * <sorted query with marker=last_id>}]. */
void nb_res_next_link(json_t *body, const char *key, struct nb_req *req, const char *collection,
                      size_t nitems, const char *last_id);
/* Refuses query parameters not named in allowed (NULL-terminated), as the
 * query schemas with additionalProperties False do (2.75+ for most). 0/-1. */
int nb_res_query_only(struct nb_ctx *ctx, struct nb_req *req, const char *const *allowed);

/* --- policy ------------------------------------------------------------------ */

/* Records Nova's 403 "Policy doesn't allow <rule> to be performed.", -1. */
int nb_res_deny(struct nb_ctx *ctx, const char *rule);
/* 0 if ctx is admin, else nb_res_deny(rule). */
int nb_res_admin(struct nb_ctx *ctx, const char *rule);

/* --- input validation in Nova's words ----------------------------------------- */

/* Python's repr() of a JSON value as jsonschema prints it ('x', 1, True,
 * None, {'a': 1}, ['b']). malloc'd. */
char *nb_res_pyrepr(const json_t *v);
/* Python's str(): strings unquoted, everything else as nb_res_pyrepr. */
char *nb_res_pystr(const json_t *v);
/* 400 "Invalid input for field/attribute <field>. Value: <str(v)>. <why>",
 * or just <why> when field is NULL (an error at the top of the body). -1. */
int nb_res_bad_field(struct nb_ctx *ctx, const char *field, const json_t *value, const char *why);
/* The body must be an object holding key `wrapper` that is an object; the
 * wrapper may only hold the keys in allowed (NULL-terminated). Returns the
 * wrapper (borrowed) or NULL after a 400 worded as Nova's validator. */
json_t *nb_res_body_object(struct nb_ctx *ctx, struct nb_req *req, const char *wrapper,
                           const char *const *allowed);
/* Checks that obj only holds keys in allowed; field names obj in the message
 * (NULL at top level). 0/-1. */
int nb_res_only_keys(struct nb_ctx *ctx, const char *field, const json_t *obj,
                     const char *const *allowed);
/* Required key of obj (field names obj). Borrowed value or NULL after 400. */
json_t *nb_res_required(struct nb_ctx *ctx, const char *field, const json_t *obj, const char *key);
/* A string of minlen..maxlen characters (code points). 0/-1. */
int nb_res_check_string(struct nb_ctx *ctx, const char *field, const json_t *v, int minlen,
                        int maxlen);
/* parameter_types.name: a string of 1..255 printable characters that does
 * not start or end with whitespace (InvalidName wording). 0/-1. */
int nb_res_check_name(struct nb_ctx *ctx, const char *field, const json_t *v);
/* Same rule for a plain C string; true when valid. */
bool nb_res_name_ok(const char *s);
/* name_with_leading_trailing_spaces: printable with at least one
 * non-space character (edge spaces allowed). */
bool nb_res_name_ws_ok(const char *s);
/* An integer given as a JSON integer or a string of digits, within
 * [min, max] (Nova's volume_size / flavor_param types). 0/-1. */
int nb_res_check_int(struct nb_ctx *ctx, const char *field, const json_t *v, long long min,
                     long long max, long long *out);
/* parameter_types.boolean: true/false or one of Nova's accepted strings.
 * Returns 0/1, or -1 after a 400. */
int nb_res_check_bool(struct nb_ctx *ctx, const char *field, const json_t *v);
/* oslo's bool_from_string(strict=True): 1/0, or -1 if s is not a boolean. */
int nb_res_parse_bool(const char *s);
/* oslo's is_none_string ("none", any case). */
bool nb_res_is_none_string(const char *s);

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
