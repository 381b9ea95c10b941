/* server_views.h - the server representations of the Compute API (Nova's
 * views/servers.py): view options, the detailed views of a page of
 * instance rows, the basic view, time formats and hostId. Defined in
 * server_views.c; private to compute/api. */
#ifndef NB_COMPUTE_API_SERVER_VIEWS_H
#define NB_COMPUTE_API_SERVER_VIEWS_H

#include "compute/api/jsonbuf.h"
#include "common/ctx.h"
#include "common/http.h"
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* ---- time formats --------------------------------------------------------- */

/* "2026-11-29T18:00:00Z" (Nova's utils.isotime) from a stored time stamp;
 * NULL stays NULL. Writes into buf[32] and returns it, or NULL. */
const char *nb_srv_isotime(const char *stored, char *buf);
/* "2026-11-29T18:00:00.123456" (a datetime as Nova's JSON serializer
 * prints it). NULL stays NULL. buf[32]. */
const char *nb_srv_dbtime(const char *stored, char *buf);
/* json string of nb_srv_isotime/nb_srv_dbtime, or json null. New ref. */
json_t *nb_srv_json_isotime(const char *stored);
json_t *nb_srv_json_dbtime(const char *stored);

/* sha224(project_id + host) in hex into out[57], "" if host is empty. */
void nb_srv_host_id(const char *project_id, const char *host, char out[57]);

/* ---- views (server_views.c) ---------------------------------------------- */

/* What a detailed view shows, as the show() arguments of Nova's view
 * builder. Tri-state fields: 1 show, 0 hide, -1 decide by policy. */
struct nb_srv_view_opts {
    bool show_az, show_config_drive, show_keypair, show_srv_usg, show_sec_grp;
    bool show_extended_status, show_extended_volumes, show_server_groups;
    bool show_user_data;
    int show_extended_attr, show_host_status;
};

/* Options of GET /servers/{id} and /servers/detail at ctx's microversion. */
void nb_srv_view_opts_show(const struct nb_ctx *ctx, struct nb_srv_view_opts *o);
/* Options of PUT /servers/{id} (all attributes only from 2.75). */
void nb_srv_view_opts_update(const struct nb_ctx *ctx, struct nb_srv_view_opts *o);

/* Writes the detailed views of instance rows, comma-separated, to b,
 * loading metadata, faults, volumes, tags, group membership, host states
 * and zones for all of them at once. 0/-1. */
int nb_srv_view_write(struct nb_ctx *ctx, json_t *rows, const struct nb_srv_view_opts *o,
                      struct nb_srv_buf *b);
/* {"id", "name", "links"} of one instance. New ref. */
json_t *nb_srv_view_basic(const json_t *inst);

#endif
