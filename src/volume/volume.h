/* volume.h - the Block Storage service (a Cinder v3 subset under /volume)
 * and what the compute side needs of it.
 *
 * nb_volume_init registers the routes, prepares the shares of the
 * NFS-style file backend and starts the heartbeats of the cinder-scheduler
 * and cinder-volume service records (services.c). The rest is for the compute API and conductor:
 * find a volume, move it through the attach status machine, and describe
 * how a hypervisor reaches its data (Nova's NFS connector shape).
 *
 * Status machine (Cinder's words). The API side uses creating, available,
 * error, deleting, error_deleting, extending, error_extending; the attach
 * side, below, uses reserved, attaching, in-use, detaching:
 *   available --reserve--> reserved --begin_attach--> attaching
 *   attaching --attached--> in-use      attaching --attach_failed--> available
 *   reserved --unreserve--> available   available --begin_attach--> attaching
 *   in-use --begin_detach--> detaching  detaching --detached--> available
 *   detaching --roll_detaching--> in-use
 * Every transition is a conditional update in the database (the row changes
 * only if it is still in an allowed status), made before it is reported.
 * Cinder's attachments API (3.27+) drives the same transitions: each change
 * of an attachment record lets the volume settle on the status its records
 * say, through the shortest path of transitions (see volume_int.h). */
#ifndef NB_VOLUME_H
#define NB_VOLUME_H

#include "common/ctx.h"
#include "common/env.h"
#include <jansson.h>
#include <stdbool.h>

int nb_volume_init(struct nb_env *env);

/* The Block Storage API as the HTTP layer serves it (http_service.c); its init
 * registers it with its routes. */
struct nb_http_service;
extern const struct nb_http_service nb_volume_http_service;
/* Stops the heartbeats of the volume service records (before the database
 * closes). Idempotent. */
void nb_volume_shutdown(void);

/* --- for the compute conductor (boot from volume, delete_on_termination,
 * snapshots of attached volumes). Each runs synchronously with the checks,
 * quota, status flow and messages of the matching API call, on behalf of
 * ctx's project and user; an error is recorded in ctx once. */

/* Creates a volume as POST /volumes does, from req, an object with Cinder's
 * create-body keys: "size" (GiB; 0 or absent: the size of the snapshot,
 * source volume or image — the image's virtual size rounded up, at least
 * its min_disk), "imageRef", "snapshot_id", "source_volid", "name",
 * "description", "availability_zone", "metadata". Writes the new id into
 * id_out[37] as soon as the row exists. Returns 0 when the volume is
 * "available"; -1 after nb_error: refused before the row (400/404/413 as
 * the API, id_out untouched), or the row ended "error" with no file left
 * (e.g. 400 "... Could not find any available weighted backend: a volume
 * of N GiB was requested and the shares have M GiB available ...", which
 * also leaves Cinder's user message for GET /messages). */
int nb_volume_create_for(struct nb_ctx *ctx, const json_t *req, char id_out[37]);

/* Deletes a volume as DELETE /volumes/{id} does (no cascade): it must be
 * available or error (not attached) and have no snapshots; its files are
 * removed and the row marked deleted. 0, or -1 after nb_error (400 with
 * Cinder's "Invalid volume: Volume status must be ..." message, 404, or 500
 * when the files could not be removed: the volume is then error_deleting). */
int nb_volume_delete_for(struct nb_ctx *ctx, const char *volume_id);

/* Snapshots a volume as POST /snapshots does. The volume must be available,
 * or in-use with force. An available volume gets a qcow2 overlay (its
 * active file changes); an in-use volume's active file is left alone (a
 * guest has it open) and the snapshot is a standalone, crash-consistent
 * copy (see snapshots.c). Writes the id into snap_id_out[37] once the row
 * exists. 0 when the snapshot is "available"; -1 after nb_error (refused, or
 * the row ended "error"). name and description may be NULL. */
int nb_volume_snapshot_for(struct nb_ctx *ctx, const char *volume_id, const char *name,
                           const char *description, bool force, char snap_id_out[37]);

/* For Nova's proxy APIs (os-volumes, os-snapshots): Cinder's views (v3,
 * as GET /volumes/{id} and GET /snapshots/{id} show them at ctx's version,
 * without the extensions' attributes; a volume's "attachments" are its
 * attached records, {"server_id", "device", ...}). show: the live volume
 * or snapshot ctx may see (new reference), or NULL after 404 as
 * nb_volume_lookup. list: those of ctx's project, newest first (a new
 * array), or NULL after a database error. */
json_t *nb_volume_show_for(struct nb_ctx *ctx, const char *volume_id);
json_t *nb_volume_list_for(struct nb_ctx *ctx);
json_t *nb_volume_snapshot_show_for(struct nb_ctx *ctx, const char *snapshot_id);
json_t *nb_volume_snapshot_list_for(struct nb_ctx *ctx);
/* Deletes a snapshot as DELETE /snapshots/{id} does: its volume must be
 * available or error (unless it is a standalone copy) and the snapshot
 * available or error. 0, or -1 after nb_error (400, 404); a failure to
 * remove its files leaves it error_deleting (0). */
int nb_volume_snapshot_delete_for(struct nb_ctx *ctx, const char *snapshot_id);

/* The volume's format as Cinder keeps it: admin metadata "format" ("raw" |
 * "qcow2": the real format of its active file). The volume service sets it
 * at every create and whenever a snapshot changes the active file; the
 * conductor's disk-format reconcile and the doctor's --fix correct it (and
 * the doctor's rollback restores or clears it) together with a mapping. As
 * in Cinder it is not shown in the volume's views; GET /attachments/{id}
 * puts it in connection_info. The volume service owns the table: nothing
 * outside src/volume writes or reads it but through these two. */

/* Sets the volume's format (NULL: clears it, as a volume that never had
 * one), on db (the caller's own connection: the volume module need not be
 * initialized in its process) in a transaction of its own, or as a part of
 * the caller's open one (see nb_db_begin: nested, it commits with the
 * caller's). 0, or -1 after nb_error (400 for another format, 404 for a
 * volume that does not exist; the caller's transaction is left open, for it
 * to roll back). */
int nb_volume_set_format(struct nb_db *db, struct nb_ctx *ctx, const char *volume_id,
                         const char *format);
/* The volume's format (new string, caller frees), or NULL when it has none
 * or on error (then nb_ctx_status(ctx) is set). */
char *nb_volume_format(struct nb_db *db, struct nb_ctx *ctx, const char *volume_id);

/* The attach-side transitions. */
enum nb_volume_op {
    NB_VOLUME_RESERVE,
    NB_VOLUME_UNRESERVE,
    NB_VOLUME_BEGIN_ATTACH,
    NB_VOLUME_ATTACHED,
    NB_VOLUME_ATTACH_FAILED,
    NB_VOLUME_BEGIN_DETACH,
    NB_VOLUME_DETACHED,
    NB_VOLUME_ROLL_DETACHING,
};

/* The status op leads to from status, or NULL when op is not allowed from
 * it. Pure; the returned string is static. */
const char *nb_volume_next_status(const char *status, enum nb_volume_op op);
/* Cinder's name of op ("reserve", "attached", ...). Static. */
const char *nb_volume_op_name(enum nb_volume_op op);

/* Finds a live volume the context may see (its project, or any for admins
 * and system contexts). Returns a new reference to the volume's row
 * ({"id", "status", "attach_status", "size", "project_id", "bootable",
 * "provider_location", "availability_zone", ...}), or NULL after recording
 * 404 "Volume <id> could not be found." (or a 500 from the database). */
json_t *nb_volume_lookup(struct nb_ctx *ctx, const char *volume_id);

/* Finds a live snapshot the context may see, as GET /snapshots/{id} does
 * (its project, or any for admins and system contexts). Returns a new
 * reference to the snapshot's row ({"id", "volume_id", "volume_size",
 * "status", "project_id", ...}), or NULL after recording 404 "Snapshot <id>
 * could not be found." (or a 500 from the database). */
json_t *nb_volume_snapshot_lookup(struct nb_ctx *ctx, const char *snapshot_id);

/* For an operator's diagnosis of a server (`nubo doctor`), on db (the
 * caller's own connection: the volume module need not be initialised in
 * its process): the live volume's record, *volume = {"status",
 * "attach_status", "size", "bootable"} or NULL when there is no live volume
 * volume_id, and its newest live attachment record to instance_uuid,
 * *attachment = {"id", "attached_host", "mountpoint", "attach_status"} or
 * NULL when there is none (new references, caller frees). 0, or -1 after a
 * database error recorded on ctx (both NULL). */
int nb_volume_attachment_state(struct nb_db *db, struct nb_ctx *ctx, const char *volume_id,
                               const char *instance_uuid, json_t **volume, json_t **attachment);

/* Applies op to the volume: a conditional update from the statuses op is
 * allowed from. 0, or -1 after 404 (no such volume) or 400 "Invalid volume:
 * Volume <id> status must be <allowed>, but current status is: <status>."
 * attach_status follows: attaching on BEGIN_ATTACH, attached on ATTACHED,
 * detached on ATTACH_FAILED / DETACHED. */
int nb_volume_transition(struct nb_ctx *ctx, const char *volume_id, enum nb_volume_op op);

/* Completes an attach: the volume goes attaching -> in-use and an attachment
 * record (attached, instance_uuid, host, mountpoint, and the volume's
 * connection info in the shape the attachments API shows, Cinder's
 * flattened one: the data keys beside driver_volume_type, mount_point_base
 * and attachment_id) is written in the same
 * transaction. Writes the attachment id into attachment_id[37]. 0/-1. */
int nb_volume_attach(struct nb_ctx *ctx, const char *volume_id, const char *instance_uuid,
                     const char *host, const char *mountpoint, char *attachment_id);
/* Completes a detach: the volume must be detaching; the attachment is
 * marked detached and the volume goes to available, or to what its other
 * attachments say (in-use when another is attached; Cinder's
 * finish_detach). 0/-1 (400 when the volume is not detaching, 404). */
int nb_volume_detach(struct nb_ctx *ctx, const char *volume_id, const char *attachment_id);

/* A server moving between hosts (Nova's attachment_create with the new
 * host's connector, then attachment_complete): a second attachment record
 * of volume_id to instance_uuid, connected for host (connector {"host",
 * "mountpoint", ...}, the connection info of nb_volume_attach's records)
 * and attached, while the source's record stays; allowed when the volume
 * is already attached to or reserved for that instance (Cinder's
 * same-instance exception), or available. The volume's status follows its
 * records (in-use). Writes the new id into attachment_id[37]. 0/-1. */
int nb_volume_attachment_create_for(struct nb_ctx *ctx, const char *volume_id,
                                    const char *instance_uuid, const char *host,
                                    const char *mountpoint, char *attachment_id);
/* Nova's attachment_delete of one record (a moved server's other host):
 * the record ends and the volume settles on the records left. 0, or -1
 * (404 when the record is not live). */
int nb_volume_attachment_delete_for(struct nb_ctx *ctx, const char *volume_id,
                                    const char *attachment_id);
/* The live attachment records of volume_id to instance_uuid, oldest first:
 * new array of {"id", "attached_host", "attach_status"}, or NULL after a
 * database error on ctx. */
json_t *nb_volume_attachments_for(struct nb_ctx *ctx, const char *volume_id,
                                  const char *instance_uuid);

/* Connection info as Cinder's NFS driver builds it for Nova:
 * {"driver_volume_type": "nfs", "data": {"export": <share>, "name": <active
 * file>, "format": "raw"|"qcow2" (of that file), "options": null,
 * "access_mode": "rw", "encrypted": false, "qos_specs": null},
 * "mount_point_base": <state_path>/mnt}. New reference, or NULL after
 * nb_error. */
json_t *nb_volume_connection_info(struct nb_ctx *ctx, const char *volume_id);

/* Where a share's files are seen on a host: <base>/<md5 hex of share>, as
 * os-brick's NFS connector mounts it. Pure. */
void nb_volume_mount_point(const char *base, const char *share, char *out, size_t n);

#endif
