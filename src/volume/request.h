/* request.h - the helpers every Block Storage handler shares (request.c):
 * the request prologue (project check and microversion), body checks,
 * links, paging and the paged lists. Not for other modules. */
#ifndef NB_VOLUME_REQUEST_H
#define NB_VOLUME_REQUEST_H

#include "common/ctx.h"
#include "common/http.h"
#include <jansson.h>
#include <stdbool.h>

/* Every /volume/v3/{project_id}/... handler starts with this: negotiates the
 * volume microversion (header "OpenStack-API-Version: volume 3.x"; none is
 * 3.0; 406 out of range, 400 malformed), answers its headers, and refuses a
 * {project_id} other than the token's (400 "Malformed request url"). 0/-1. */
int nb_vol_begin(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp);
/* True when the negotiated microversion is >= 3.minor. */
bool nb_vol_mv(const struct nb_ctx *ctx, int minor);
/* The required {"<key>": {...}} object of a body, or NULL after 400. */
json_t *nb_vol_body(struct nb_ctx *ctx, struct nb_req *req, const char *key);
/* Cinder's checks of name/display_name and description/display_description
 * in a create or update body: a string or null of at most 255 characters.
 * Volumes (strip first: the *_non_mandatory_remove_white_spaces format
 * checkers) answer "Invalid input received: name has 256 characters, more
 * than 255."; snapshots (plain maxLength) answer jsonschema's "… is too
 * long". 0, or -1 after a 400. */
int nb_vol_check_name_desc(struct nb_ctx *ctx, const json_t *body, bool volume);
/* The configured availability zone ([volume] storage_availability_zone). */
const char *nb_vol_az(void);
/* self/bookmark links of a resource ("volumes", id). New reference. */
json_t *nb_vol_links(const struct nb_ctx *ctx, const char *collection, const char *id);
/* Appends {"href": .../<collection>?...&marker=<last id>, "rel": "next"} as
 * <key>_links to body when a full page (limit rows) was returned. */
void nb_vol_next_link(struct nb_req *req, json_t *body, const char *key, const char *collection,
                      json_t *items, long limit);

/* Paging and sorting of a list (Cinder's api/common.py): limit (<= 1000),
 * marker (an id; 404 when unknown), sort=k[:dir],... or sort_key/sort_dir.
 * Fills an ORDER BY clause from the allowed keys (mapped to columns). */
struct nb_vol_page {
    long limit;
    const char *marker;
    char order[256];
};
struct nb_vol_sort_key {
    const char *api; /* "name" */
    const char *column;
};
int nb_vol_page_parse(struct nb_ctx *ctx, struct nb_req *req, const struct nb_vol_sort_key *keys,
                      struct nb_vol_page *page);

/* After nb_vol_begin: 404 "The resource could not be found." when the
 * negotiated microversion is below 3.minor (Cinder's api_version gate). */
int nb_vol_require_mv(struct nb_ctx *ctx, int minor);

/* Loads a live row by id, visible to ctx, or NULL after 404 (nb_vol_load,
 * nb_vol_snapshot_load). New reference. */
typedef json_t *(*nb_vol_load_fn)(struct nb_ctx *ctx, const char *id);

/* The prologue of a handler on one resource: nb_vol_begin, then the row of
 * the path parameter param by load, then, when policy ("volume:delete") is
 * not NULL, the member check (403 "Policy doesn't allow <policy> to be
 * performed."). The row (new reference), or NULL after nb_error. */
json_t *nb_vol_begin_load(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp,
                          const char *param, nb_vol_load_fn load, const char *policy);
/* The same for an update: between nb_vol_begin and the load, the required
 * {"<body_key>": {...}} of the body (nb_vol_body) into *body (borrowed). */
json_t *nb_vol_begin_update(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp,
                            const char *param, nb_vol_load_fn load, const char *policy,
                            const char *body_key, json_t **body);

/* A handler for what Cinder's router has no route for (PUT or DELETE of a
 * collection, which is also where "volumes/" with no id lands, as the HTTP
 * layer drops trailing slashes): nb_vol_begin, then 404 "The resource could
 * not be found.". */
int nb_vol_no_resource(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp);

/* What differs between the paged, filtered lists (index and detail). */
struct nb_vol_lister {
    const char *table; /* table, body key and collection: "volumes" */
    const struct nb_vol_sort_key *sort_keys;
    nb_vol_load_fn load; /* checks the marker (404 when unknown) */
    /* Optional: parses the filters of req once, after paging (0, or -1
     * after nb_error); *filter (may stay NULL) goes to match, then is
     * released. */
    int (*filters)(struct nb_ctx *ctx, struct nb_req *req, json_t **filter);
    /* True when row passes the filters of req. */
    bool (*match)(struct nb_ctx *ctx, struct nb_req *req, const json_t *row, const json_t *filter);
    /* The view of a row in the list (detail: the /detail route). New reference. */
    json_t *(*view)(struct nb_ctx *ctx, const json_t *row, bool detail);
    /* The lowest microversion (minor) of the API; below it, Cinder's 404
     * "The resource could not be found." (0: every version). */
    int min_mv;
    /* Admins see every project's rows without all_tenants (messages). */
    bool admin_sees_all;
    /* Optional: adds to the finished body (Cinder's "count"). */
    void (*finish)(struct nb_ctx *ctx, struct nb_req *req, json_t *body);
};
/* Answers a list as Cinder does: nb_vol_begin, the min_mv gate, nb_vol_page_parse, the
 * filters, the marker check, the rows of ctx's project (every project for an
 * admin with all_tenants) in the page's order, those after the marker that
 * match, up to the limit, each by view, the next link, then finish: 200
 * {"<table>": [...], "<table>_links": ...}. 0, or -1 after nb_error. */
int nb_vol_list(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp,
                const struct nb_vol_lister *lister, bool detail);

#endif
