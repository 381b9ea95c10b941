/* volume_int.h - what the files of src/volume share: the environment, the
 * request prologue (project check and microversion), the views, the quota
 * engine and the NFS-style file backend. Not for other modules. */
#ifndef NB_VOLUME_INT_H
#define NB_VOLUME_INT_H

#include "common/ctx.h"
#include "common/env.h"
#include "common/http.h"
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* Cinder Zed (21.x), as Debian ships it. */
#define NB_VOL_MV_MIN 0 /* 3.0 */
#define NB_VOL_MV_MAX 70
#define NB_VOL_MV_UPDATED "2022-08-31T00:00:00Z"
#define NB_VOL_DEFAULT_TYPE_ID "5f4e0d2a-6a1d-4b8e-9a57-3c1d7b0e8f21"
#define NB_VOL_DEFAULT_TYPE_NAME "__DEFAULT__"
#define NB_VOL_LOG "nubo.volume.api"

extern struct nb_env *nb_vol_env;

/* --- api.c ---------------------------------------------------------------- */

/* Every /volume/v3/{project_id}/... handler starts with this: negotiates the
 * volume microversion (header "OpenStack-API-Version: volume 3.x"; none is
 * 3.0; 406 out of range, 400 malformed), answers its headers, and refuses a
 * {project_id} other than the token's (400 "Malformed request url"). 0/-1. */
int nb_vol_begin(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp);
/* True when the negotiated microversion is >= 3.minor. */
bool nb_vol_mv(const struct nb_ctx *ctx, int minor);
/* The required {"<key>": {...}} object of a body, or NULL after 400. */
json_t *nb_vol_body(struct nb_ctx *ctx, struct nb_req *req, const char *key);
/* Parses a query/body boolean as oslo's strutils (true/yes/1/on...). -1 when
 * it is neither true nor false. */
int nb_vol_bool(const char *s);
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
    /* Optional: adds to the finished body (Cinder's "count"). */
    void (*finish)(struct nb_ctx *ctx, struct nb_req *req, json_t *body);
};
/* Answers a list as Cinder does: nb_vol_begin, nb_vol_page_parse, the
 * filters, the marker check, the rows of ctx's project (every project for an
 * admin with all_tenants) in the page's order, those after the marker that
 * match, up to the limit, each by view, the next link, then finish: 200
 * {"<table>": [...], "<table>_links": ...}. 0, or -1 after nb_error. */
int nb_vol_list(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp,
                const struct nb_vol_lister *lister, bool detail);

/* --- volumes.c / snapshots.c ------------------------------------------------ */

void nb_vol_volumes_routes(void);
void nb_vol_actions_routes(void);
void nb_vol_snapshots_routes(void);
void nb_vol_quotas_routes(void);
/* A live volume row visible to ctx, or NULL after 404. New reference. */
json_t *nb_vol_load(struct nb_ctx *ctx, const char *id);
/* A live snapshot row visible to ctx, or NULL after 404. New reference. */
json_t *nb_vol_snapshot_load(struct nb_ctx *ctx, const char *id);
/* The snapshots of a volume that have an overlay, oldest first (the chain,
 * base excluded): rows {id, provider_location}. New reference or NULL. */
json_t *nb_vol_chain(struct nb_ctx *ctx, const char *volume_id);
/* The file name of a volume's active image (the newest overlay, else
 * volume-<id>) into out. 0/-1. */
int nb_vol_active_file(struct nb_ctx *ctx, const char *volume_id, char *out, size_t n);
/* Rewrites <share>/volume-<id>.info (Cinder's NFS snapshot info file:
 * {"active": file, "<snapshot id>": file, ...}) from the chain. Best effort
 * (it is for operators; the database is the truth). */
void nb_vol_write_info(struct nb_ctx *ctx, const char *share, const char *volume_id);
/* Serializes changes to (and copies out of) snapshot chains. */
void nb_vol_chain_lock(void);
void nb_vol_chain_unlock(void);
/* Sets a volume's status (and updated_at) if it is one of the statuses in
 * from (NULL-terminated; NULL = any). Returns rows changed (0/1), -1. */
int nb_vol_set_status(struct nb_ctx *ctx, const char *id, const char *status,
                      const char *const *from);

/* --- status.c --------------------------------------------------------------- */

/* "a or b or c" for Cinder's messages. Caller frees. */
char *nb_vol_or_str(const char *const *items);

/* --- quotas.c ------------------------------------------------------------- */

/* The limit of resource ("volumes", "gigabytes", "snapshots",
 * "per_volume_gigabytes", ...) for project; -1 is unlimited. */
long long nb_vol_quota_limit(struct nb_ctx *ctx, const char *project_id, const char *resource);
/* Checks that project may add volumes (count) and gigabytes, or snapshots
 * (count) and gigabytes; call inside the transaction that inserts the row.
 * 0, or -1 after Cinder's 413 (VolumeLimitExceeded,
 * VolumeSizeExceedsAvailableQuota, SnapshotLimitExceeded,
 * VolumeSizeExceedsLimit). */
int nb_vol_quota_check(struct nb_ctx *ctx, const char *project_id, int volumes, int snapshots,
                       long long gigabytes);

/* --- backend_nfs.c ---------------------------------------------------------- */

/* Writes <base>/<md5 hex of share> (the NFS driver's mount point) into out. */
void nb_vol_mount_point(const char *base, const char *share, char *out, size_t n);
/* Base of the mount points: [volume] nfs_mount_point_base, default
 * <state_path>/mnt. Static buffer set by nb_vol_backend_init. */
const char *nb_vol_mount_base(void);
/* Prepares every share of [volume] shares (see backend_nfs.c). 0/-1 (logged). */
int nb_vol_backend_init(const char *state_path);
/* The share for a new volume (most free space). Borrowed, NULL if none. */
const char *nb_vol_pick_share(struct nb_ctx *ctx);
/* <mount point of share>/<file> into out. */
void nb_vol_file_path(const char *share, const char *file, char *out, size_t n);
/* Format of new volumes: [volume] volume_format, "raw" (default) or "qcow2". */
const char *nb_vol_format(void);
/* The format qemu would use for the file at path ("raw", "qcow2"), by its
 * header, into out[16]. 0/-1 after nb_error. */
int nb_vol_detect_format(struct nb_ctx *ctx, const char *path, char *out);

/* The operations below take the backend lock, run qemu-img, and return 0,
 * or -1 after nb_error(500) carrying qemu-img's message. */
int nb_vol_backend_create(struct nb_ctx *ctx, const char *share, const char *volume_id,
                          long long size_gb);
/* Converts src (format src_fmt; for a qcow2 its backing chain is read too)
 * into a new volume file, then grows it to size_gb if smaller. */
int nb_vol_backend_create_from(struct nb_ctx *ctx, const char *share, const char *volume_id,
                               const char *src, const char *src_fmt, long long size_gb);
int nb_vol_backend_delete(struct nb_ctx *ctx, const char *share, const char *volume_id);
int nb_vol_backend_extend(struct nb_ctx *ctx, const char *share, const char *active_file,
                          long long size_gb);
/* New overlay volume-<vol>.<snap> on top of active_file. */
int nb_vol_backend_snapshot(struct nb_ctx *ctx, const char *share, const char *volume_id,
                            const char *active_file, const char *snapshot_id);
/* Merges overlay snap_file into its backing file and re-points higher_file
 * (the overlay above it, or NULL when snap_file is the active file) at that
 * backing file; then removes snap_file. */
int nb_vol_backend_snapshot_delete(struct nb_ctx *ctx, const char *share, const char *snap_file,
                                   const char *backing_file, const char *higher_file);

#endif
