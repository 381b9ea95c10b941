/* validate.h - the Compute API's request checks, worded as Nova's
 * JSON-schema validator and policy engine word them: policy refusals,
 * request-body checks (strings, names, booleans, integers, UUIDs, IPs,
 * metadata, allowed keys), query strings, and re-wording an error already
 * recorded. Defined in validate.c; private to compute/api. */
#ifndef NB_COMPUTE_API_VALIDATE_H
#define NB_COMPUTE_API_VALIDATE_H

#include "common/ctx.h"
#include "common/http.h"
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* Where the two families meet: nb_srv_bad(field, v, why) is
 * nb_res_bad_field(field, v, "<repr(v)> <why>"), nb_srv_policy(rule, ok) is
 * nb_res_deny(rule) unless ok; each check exists once. */

/* ---- policy (Nova Zed defaults with enforce_new_defaults) -------------- */

/* Records Nova's 403 "Policy doesn't allow <rule> to be performed.", -1. */
int nb_res_deny(struct nb_ctx *ctx, const char *rule);
/* 0 if ctx is admin, else nb_res_deny(rule). */
int nb_res_admin(struct nb_ctx *ctx, const char *rule);
/* 0 when ok, else nb_res_deny(rule). */
int nb_srv_policy(struct nb_ctx *ctx, const char *rule, bool ok);
/* PROJECT_READER_OR_ADMIN / PROJECT_MEMBER_OR_ADMIN against a target project. */
bool nb_srv_is_reader_of(const struct nb_ctx *ctx, const char *project_id);
bool nb_srv_is_member_of(const struct nb_ctx *ctx, const char *project_id);

/* ---- errors in Nova's words ---------------------------------------------- */

/* Python's str(): strings unquoted, everything else as nb_pyrepr
 * (common/pyrepr.h, Python's repr() as jsonschema prints it). */
char *nb_res_pystr(const json_t *v);
/* 400 "Invalid input for field/attribute <field>. Value: <str(v)>. <why>",
 * or just <why> when field is NULL (an error at the top of the body). -1. */
int nb_res_bad_field(struct nb_ctx *ctx, const char *field, const json_t *value, const char *why);
/* 400 "Invalid input for field/attribute <field>. Value: <v>. <repr> <why>". */
int nb_srv_bad(struct nb_ctx *ctx, const char *field, const json_t *value, const char *why);
/* Changes the error already recorded in ctx into another status (e.g. a
 * lookup's 404 into the 400 that server create answers), keeping its
 * message unless msg is non-NULL. A server error (5xx) is never made a
 * client error. Returns -1. */
int nb_srv_error_as(struct nb_ctx *ctx, int status, const char *msg);

/* ---- request bodies (Nova's JSON-schema checks and messages) ------------ */

/* The body must be an object holding key `wrapper` that is an object; the
 * wrapper may only hold the keys in allowed (NULL-terminated). Returns the
 * wrapper (borrowed) or NULL after a 400 worded as Nova's validator. */
json_t *nb_res_body_object(struct nb_ctx *ctx, struct nb_req *req, const char *wrapper,
                           const char *const *allowed);
/* The request body's object under key; top_allowed (NULL-terminated, may be
 * NULL: any) lists the keys the body may have. Borrowed, or NULL after 400. */
json_t *nb_srv_body_object(struct nb_ctx *ctx, struct nb_req *req, const char *key,
                           const char *const *top_allowed);
/* additionalProperties: false. Checks that obj only holds keys in allowed
 * (NULL-terminated); field names obj in the message (NULL at top level).
 * 0/-1. */
int nb_res_only_keys(struct nb_ctx *ctx, const char *field, const json_t *obj,
                     const char *const *allowed);
/* Required key of obj (field names obj). Borrowed value or NULL after 400. */
json_t *nb_res_required(struct nb_ctx *ctx, const char *field, const json_t *obj, const char *key);
/* A string of min..max characters, code points (or null when nullable;
 * max SIZE_MAX: no limit). 0/-1. */
int nb_srv_check_string(struct nb_ctx *ctx, const char *field, const json_t *v, size_t min,
                        size_t max, bool nullable);
/* parameter_types.name: 1-255 printable, no leading/trailing whitespace
 * (InvalidName wording). 0/-1. */
int nb_srv_check_name(struct nb_ctx *ctx, const char *field, const json_t *v);
/* parameter_types.description: null or 0-255 printable characters. */
int nb_srv_check_description(struct nb_ctx *ctx, const char *field, const json_t *v);
/* parameter_types.boolean: true/false or one of Nova's accepted strings.
 * Returns 0/1, or -1 after a 400. */
int nb_res_check_bool(struct nb_ctx *ctx, const char *field, const json_t *v);
/* Value of a checked boolean. */
bool nb_srv_json_truthy(const json_t *v);
int nb_srv_check_uuid(struct nb_ctx *ctx, const char *field, const json_t *v);
/* positive_integer / non_negative_integer: an integer or a string matching
 * '^[0-9]*$', >= min; *out gets the value (out may be NULL). */
int nb_srv_check_int(struct nb_ctx *ctx, const char *field, const json_t *v, long long min,
                     long long *out);
/* Nova's flavor_param / volume_size types: an integer or a string matching
 * '^[0-9]+$', within [min, max]. 0/-1. */
int nb_res_check_int(struct nb_ctx *ctx, const char *field, const json_t *v, long long min,
                     long long max, long long *out);
/* Nova's db_const.MAX_INT, the upper bound of flavor integers. */
#define NB_RES_MAX_INT 0x7FFFFFFFLL
/* parameter_types.metadata. */
int nb_srv_check_metadata(struct nb_ctx *ctx, const char *field, const json_t *v);
/* An IPv4 (family AF_INET), IPv6 (AF_INET6) or either (0) address string. */
int nb_srv_check_ip(struct nb_ctx *ctx, const char *field, const json_t *v, int family);
/* A server body's accessIPv4 and accessIPv6 (made canonical in place). */
int nb_srv_check_access_ips(struct nb_ctx *ctx, const json_t *server);
/* A server body's OS-DCF:diskConfig: AUTO or MANUAL. 0/-1. */
int nb_srv_check_disk_config(struct nb_ctx *ctx, const json_t *server);
/* Hostname at 2.90: 2-63 of [a-zA-Z0-9-], not starting/ending with '-'. */
int nb_srv_check_hostname(struct nb_ctx *ctx, const json_t *v);

/* ---- query strings ------------------------------------------------------- */

/* All query arguments as {"key": ["v1", "v2"], …}. New ref. */
json_t *nb_srv_query_all(struct nb_req *req);
/* Last value of key in such an object, or NULL. Borrowed. */
const char *nb_srv_query_last(json_t *q, const char *key);
/* Parses a non-negative integer query parameter; 400 as Nova's query schema
 * when malformed. Returns 0 and sets *out, or -1. */
int nb_srv_query_nonneg_int(struct nb_ctx *ctx, const char *name, const char *value,
                            long long *out);
/* Refuses query parameters not named in allowed (NULL-terminated), as the
 * query schemas with additionalProperties False do (2.75+ for most). 0/-1. */
int nb_res_query_only(struct nb_ctx *ctx, struct nb_req *req, const char *const *allowed);

/* ---- values ---------------------------------------------------------------- */

/* oslo's bool_from_string: 1/0, or -1 when strict and not a boolean word
 * (not strict: 0). */
int nb_srv_bool_from_string(const char *s, bool strict);
/* oslo's is_none_string ("none", any case). */
bool nb_res_is_none_string(const char *s);
/* Nova's name rule for a plain C string: printable, not starting or ending
 * with whitespace; true when valid. */
bool nb_res_name_ok(const char *s);
/* name_with_leading_trailing_spaces: printable with at least one
 * non-space character (edge spaces allowed). */
bool nb_res_name_ws_ok(const char *s);
/* Decodes one UTF-8 code point at *p (advancing it, also past a bad byte);
 * -1 when invalid. */
long nb_srv_utf8_next(const unsigned char **p);
/* Strips leading and trailing whitespace (Nova's normalize_name). New
 * string. */
char *nb_srv_normalize_name(const char *s);
/* The user-set attributes a checked body (update's "server", rebuild's)
 * names: each column flagged only when its field is present (name,
 * description, hostname, accessIPv4/v6, OS-DCF:diskConfig). Strings are
 * borrowed from body, except the normalized name, returned (caller frees;
 * NULL when the body has none). */
struct nb_instance_attrs;
char *nb_srv_attrs_from_body(const json_t *body, struct nb_instance_attrs *a);
/* Is s one of the n strings of list? NB_SRV_IN_LIST for an array. */
bool nb_srv_in_list(const char *s, const char *const *list, size_t n);
#define NB_SRV_IN_LIST(s, l) nb_srv_in_list(s, l, sizeof(l) / sizeof(l[0]))

#endif
