/* volume.h - the Block Storage service (a Cinder v3 subset under /volume)
 * and what the compute side needs of it.
 *
 * nb_volume_init registers the routes and prepares the shares of the
 * NFS-style file backend. The rest is for the compute API and conductor:
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
 * only if it is still in an allowed status), made before it is reported. */
#ifndef NB_VOLUME_H
#define NB_VOLUME_H

#include "common/ctx.h"
#include "common/env.h"
#include <jansson.h>

int nb_volume_init(struct nb_env *env);

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

/* Applies op to the volume: a conditional update from the statuses op is
 * allowed from. 0, or -1 after 404 (no such volume) or 400 "Invalid volume:
 * Volume <id> status must be <allowed>, but current status is: <status>."
 * attach_status follows: attaching on BEGIN_ATTACH, attached on ATTACHED,
 * detached on ATTACH_FAILED / DETACHED. */
int nb_volume_transition(struct nb_ctx *ctx, const char *volume_id, enum nb_volume_op op);

/* Completes an attach: the volume goes attaching -> in-use and an attachment
 * record (attached, instance_uuid, host, mountpoint) is written in the same
 * transaction. Writes the attachment id into attachment_id[37]. 0/-1. */
int nb_volume_attach(struct nb_ctx *ctx, const char *volume_id, const char *instance_uuid,
                     const char *host, const char *mountpoint, char *attachment_id);
/* Completes a detach: detaching -> available (or back to in-use when other
 * attachments remain) and the attachment is marked detached. 0/-1. */
int nb_volume_detach(struct nb_ctx *ctx, const char *volume_id, const char *attachment_id);

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
