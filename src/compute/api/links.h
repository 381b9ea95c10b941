/* links.h - the links Nova puts in its views and the paging of
 * collections: the API's base URLs ([api] compute_link_prefix), self and
 * bookmark links, limit and marker, "next" links. Defined in links.c;
 * private to compute/api. */
#ifndef NB_COMPUTE_API_LINKS_H
#define NB_COMPUTE_API_LINKS_H

#include "common/ctx.h"
#include "common/http.h"
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* --- links and paging ------------------------------------------------------ */

/* "<base>/compute/v2.1", or [api] compute_link_prefix applied as Nova does.
 * Returns a malloc'd string. */
char *nb_res_api_url(void);
/* "<base>/compute" (the bookmark base, without the version). malloc'd. */
char *nb_res_bookmark_url(void);
/* Nova's _get_links: [{"rel": "self", "href": <api>/<collection>/<id>},
 * {"rel": "bookmark", "href": <bookmark>/<collection>/<id>}]. New ref. */
json_t *nb_res_links(const char *collection, const char *id);
/* Only the bookmark link of a compute resource. New array. */
json_t *nb_res_bookmark_links(const char *collection, const char *id);
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
/* The [{"rel": "next", "href"}] array itself, for callers that decide when
 * a page has a next one. New ref. */
json_t *nb_res_next_links(struct nb_req *req, const char *collection, const char *last_id);

#endif
