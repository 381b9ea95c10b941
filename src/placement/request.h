/* request.h - the placement module's state and the HTTP helpers every
 * handler shares (request.c). Private to src/placement (internal.h
 * includes it). */
#ifndef NB_PLACEMENT_REQUEST_H
#define NB_PLACEMENT_REQUEST_H

#include "common/ctx.h"
#include "common/http.h"
#include <jansson.h>
#include <stdbool.h>

struct nb_db;

/* The database given to nb_placement_init (borrowed, never NULL after a
 * successful init). */
struct nb_db *plc_db(void);
/* Sets the database (nb_placement_init, once, before any route runs). */
void plc_set_db(struct nb_db *db);
/* The negotiated placement minor version of a request (0 when none). */
int plc_mv(const struct nb_ctx *ctx);
/* Records 404 as placement does for a route that does not exist at this
 * microversion. Returns -1. */
int plc_not_at_version(struct nb_ctx *ctx);
/* Policy: admin (or internal system context) only. -1 with 403 recorded. */
int plc_require_admin(struct nb_ctx *ctx, const char *rule);
/* The JSON body of a PUT/POST: checks Content-Type (415) and that it parses
 * (400 "Malformed JSON"). Borrowed from req, or NULL after nb_error. */
json_t *plc_body(struct nb_ctx *ctx, struct nb_req *req);
/* Adds Cache-Control/Last-Modified from 1.15 as placement does. */
void plc_cache_headers(const struct nb_ctx *ctx, struct nb_resp *resp);
/* Sets a Location header to base URL + path. */
void plc_location(struct nb_resp *resp, const char *path);
/* All query arguments as {key: [values…]} (new ref). */
json_t *plc_query(const struct nb_req *req);
/* Last value of a query key, or NULL (borrowed from q). */
const char *plc_query_last(json_t *q, const char *key);
/* 400 unless every key of q is in allowed (NULL-terminated) or matches
 * one of the prefix patterns "resources*" written as "resources*". */
int plc_query_check(struct nb_ctx *ctx, json_t *q, const char *const *allowed);

/* Tiny JSON-schema helpers; failures record 400 "JSON does not validate: …". */
int plc_schema_error(struct nb_ctx *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* obj must be an object, have only allowed keys and all required keys. */
int plc_check_object(struct nb_ctx *ctx, json_t *obj, const char *const *allowed,
                     const char *const *required);
/* Integer member in [min, max]; absent -> *out untouched, returns 0. */
int plc_get_int(struct nb_ctx *ctx, json_t *obj, const char *key, long long min, long long max,
                long long *out);
/* Integer value (accepts integral reals, refuses booleans). */
bool plc_json_is_int(const json_t *v, long long *out);

/* Name patterns. */
bool plc_valid_rc_name(const char *s);     /* ^[A-Z0-9_]+$ */
bool plc_valid_custom_name(const char *s); /* ^CUSTOM_[A-Z0-9_]+$ */
/* Normalizes a UUID (with or without dashes, any case) to the dashed
 * lower-case form in out[37]. false if s is not a UUID. */
bool plc_uuid_normalize(const char *s, char out[37]);

#endif
