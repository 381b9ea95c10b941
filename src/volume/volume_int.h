/* volume_int.h - what the files of src/volume share: the environment, the
 * request prologue (project check and microversion), the views, the quota
 * engine and the NFS-style file backend. Not for other modules. */
#ifndef NB_VOLUME_INT_H
#define NB_VOLUME_INT_H

#include "common/ctx.h"
#include "common/env.h"
#include "common/http.h"
#include "volume/request.h"
#include "volume/volume.h"
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

/* The environment given to nb_volume_init (request.c). */
extern struct nb_env *nb_vol_env;

/* --- volumes.c / snapshots.c ------------------------------------------------ */

void nb_vol_volumes_routes(void);
void nb_vol_actions_routes(void);
void nb_vol_snapshots_routes(void);
void nb_vol_quotas_routes(void);
void nb_vol_extensions_routes(void);
void nb_vol_services_routes(void);
/* services.c: registers the cinder-scheduler and cinder-volume rows of this
 * process and starts their heartbeat thread. 0/-1. */
int nb_vol_services_start(void);
/* A live volume row visible to ctx, or NULL after 404. New reference. */
json_t *nb_vol_load(struct nb_ctx *ctx, const char *id);
/* A live snapshot row visible to ctx, or NULL after 404. New reference. */
json_t *nb_vol_snapshot_load(struct nb_ctx *ctx, const char *id);
/* The snapshots of a volume that have an overlay, oldest first (the chain,
 * base excluded; standalone copies are not in it): rows {id,
 * provider_location}. New reference or NULL. */
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

/* Sets one admin metadata item of a volume (Cinder's volume_admin_metadata:
 * "readonly"; "format" goes through nb_volume_set_format), replacing its
 * value; call in a transaction. 0/-1. */
int nb_vol_set_admin_metadata(struct nb_ctx *ctx, const char *id, const char *key,
                              const char *value);

/* Detects the format of the volume's active file on share and records it
 * as admin metadata "format" (nb_volume_set_format). 0/-1. */
int nb_vol_record_format(struct nb_ctx *ctx, const char *share, const char *volume_id);

/* --- metadata.c -------------------------------------------------------------- */

/* key -> value of a metadata table (volume_metadata, snapshot_metadata,
 * volume_glance_metadata, volume_admin_metadata) for one owner, whose id is
 * in column. New reference (an empty object when there is none). */
json_t *nb_vol_metadata_of(struct nb_ctx *ctx, const char *table, const char *column,
                           const char *id);
/* Cinder's check_metadata_properties: null/absent is fine; an object of
 * string values with keys of 1-255 and values of up to 255 characters.
 * 0/-1 after 400. */
int nb_vol_metadata_check(struct nb_ctx *ctx, const json_t *md);
/* Merges md into (or, with replace, replaces) an owner's metadata; call in
 * a transaction. 0/-1. */
int nb_vol_metadata_write(struct nb_ctx *ctx, const char *table, const char *column, const char *id,
                          const json_t *md, bool replace);
/* What the metadata routes of a resource differ in. */
struct nb_vol_meta_kind {
    const char *what;   /* "Volume": "<what> <id> has no metadata with key <k>." */
    const char *param;  /* path parameter of the owner: "volume_id" */
    const char *table;  /* "volume_metadata" */
    const char *column; /* owner column in it: "volume_id" */
    nb_vol_load_fn load;
    const char *update_policy, *delete_policy;
};
extern const struct nb_vol_meta_kind nb_vol_volume_meta, nb_vol_snapshot_meta;
/* The handlers of .../{id}/metadata[/{key}] (see metadata.c). */
int nb_vol_metadata_index(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp,
                          const struct nb_vol_meta_kind *kind);
int nb_vol_metadata_write_all(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp,
                              const struct nb_vol_meta_kind *kind, bool replace);
int nb_vol_metadata_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp,
                         const struct nb_vol_meta_kind *kind);
int nb_vol_metadata_update_key(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp,
                               const struct nb_vol_meta_kind *kind);
int nb_vol_metadata_delete(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp,
                           const struct nb_vol_meta_kind *kind);

/* --- messages.c -------------------------------------------------------------- */

/* Cinder's message actions and details (message_field.py) used here. */
#define NB_VOL_ACTION_SCHEDULE_ALLOCATE_VOLUME "001"
#define NB_VOL_DETAIL_UNKNOWN_ERROR "001"
#define NB_VOL_DETAIL_NO_BACKEND_AVAILABLE "003"
/* Cinder's user_message of a message: "<action>:<detail>" ("schedule
 * allocate volume:Could not find any available weighted backend."). Pure;
 * unknown ids read as Cinder's defaults. Into out. */
void nb_vol_message_text(const char *action_id, const char *detail_id, char *out, size_t n);
/* Records a user message (level ERROR) about a volume for ctx's project and
 * request, kept [volume] message_ttl seconds (default 2592000). 0/-1. */
int nb_vol_message_record(struct nb_ctx *ctx, const char *resource_uuid, const char *action_id,
                          const char *detail_id);
void nb_vol_messages_routes(void);

/* --- attachments.c ----------------------------------------------------------- */

void nb_vol_attachments_routes(void);

/* --- status.c --------------------------------------------------------------- */

/* "a or b or c" for Cinder's messages. Caller frees. */
char *nb_vol_or_str(const char *const *items);
/* The shortest sequence of ops of the attach machine leading from status
 * from to status to, into ops (at most max): its length (0 when from is
 * to), or -1 when there is none (or it is longer than max). Pure. */
int nb_vol_status_path(const char *from, const char *to, enum nb_volume_op *ops, int max);
/* Brings the volume to the status its live attachment records say (Cinder's
 * _get_statuses_from_attachments: the first of attached, attaching,
 * detaching, reserved among them; attached reads in-use, none available)
 * through the transitions of the machine, and sets its attach_status to
 * match. A volume outside the machine (error, maintenance...) is left as
 * it is (logged), unless override (a record was deleted: Cinder's
 * volume_detached sets the status whatever it was). Call inside a
 * transaction. 0/-1. */
int nb_vol_settle(struct nb_ctx *ctx, const char *volume_id, bool override);
/* The volume's connection info as Cinder's attachment records hold it
 * (manager._connection_create): nb_volume_connection_info with the keys of
 * "data" lifted beside driver_volume_type and mount_point_base, and
 * "attachment_id". New reference, or NULL after nb_error. */
json_t *nb_vol_attachment_info(struct nb_ctx *ctx, const char *volume_id,
                               const char *attachment_id);
/* Cinder's attachment_delete (finish_detach): the record is marked detached
 * (deleted) and the volume settles on the records left, whatever its
 * status. 0, or -1 after nb_error (404 when there is no such live record). */
int nb_vol_attachment_delete(struct nb_ctx *ctx, const char *volume_id, const char *attachment_id);

/* --- attach_records.c -------------------------------------------------------- */

/* Reserves a new attachment record attachment_id (attach_status "reserved",
 * connection_info {}) of the volume for instance_uuid (may be NULL), as
 * Cinder's _attachment_reserve: a volume in an error status is refused
 * (400 "... can not be created if the volume is in an error state ..."),
 * one not available (nor in-use when multiattach) too (400 "... status must
 * be available or downloading to reserve ..."), unless the same instance
 * already has a record of it. The volume then settles (available ->
 * reserved). attach_mode ("rw", "ro", "null") is stored as given. 0/-1. */
int nb_vol_attachment_reserve(struct nb_ctx *ctx, const char *volume_id, const char *instance_uuid,
                              const char *attach_mode, const char *attachment_id);
/* Connects a live record as Cinder's _connection_create and volume_attached
 * (mark_attached false): connector and info (borrowed) are stored, with the
 * connector's host ("" when absent) and mountpoint ("na"), attach_time now,
 * attach_mode (may be NULL), attach_status "attaching"; the volume settles
 * (reserved -> attaching). 0, or -1 after nb_error (404). */
int nb_vol_attachment_connect(struct nb_ctx *ctx, const char *attachment_id,
                              const json_t *connector, const json_t *info, const char *attach_mode);
/* Marks a live record of the volume attached (os-complete); the volume
 * settles (attaching -> in-use). 0, or -1 after nb_error (404). */
int nb_vol_attachment_complete(struct nb_ctx *ctx, const char *volume_id,
                               const char *attachment_id);

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
/* What the NFS driver measures of a share, in bytes. */
struct nb_vol_capacity {
    double total;     /* size of the share's file system */
    double available; /* free space in it */
    double allocated; /* apparent size of the files on the share */
};
/* Cinder's NFS driver's _is_share_eligible (the capacity filter's thin
 * provisioning semantics): with sparse volumes ([volume]
 * nfs_sparsed_volumes, default true) the share may be provisioned up to
 * total x ratio ([volume] max_over_subscription_ratio, default 20.0), so a
 * volume fits when total x ratio - allocated exceeds its size, the share is
 * not fuller than 100 - reserved_percentage percent, and allocated / total
 * is below ratio; with thick volumes, when the free space exceeds its size.
 * *available gets the space counted (bytes, >= 0). Pure. */
bool nb_vol_share_eligible(const struct nb_vol_capacity *c, long long size_gb, bool sparse,
                           double ratio, int reserved_percentage, double *available);
/* The share for a new volume of size_gb: among the eligible shares, the
 * least allocated (the NFS driver's _find_share). Borrowed; NULL after 400
 * "Could not find any available weighted backend: ..." naming the requested
 * and available GiB (or 500 when no share is usable at all). */
const char *nb_vol_pick_share(struct nb_ctx *ctx, long long size_gb);
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
/* Copies the data of a volume (its active file and what lies under it) into
 * the standalone file copy_file, in the format of new volumes, reading with
 * qemu-img's -U so an attached volume's open file is neither locked nor
 * changed (crash-consistent). */
int nb_vol_backend_copy(struct nb_ctx *ctx, const char *share, const char *active_file,
                        const char *copy_file);
/* Removes one file of a share (a standalone snapshot copy). */
int nb_vol_backend_remove(struct nb_ctx *ctx, const char *share, const char *file);
/* Removes volume-<id> and every volume-<id>.* (overlays, standalone
 * snapshot copies, the .info file, a leftover .part). */
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
