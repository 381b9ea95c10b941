/* bdm.h - reading block_device_mapping rows (Nova's columns) on the compute
 * side: which mapping is the boot disk, where a volume's file is on this
 * host, what device the guest sees it as.
 *
 * A row is the JSON of a block_device_mapping row as nb_instance_agent_view
 * puts it in instance["block_device_mapping"]; its connection_info column is
 * JSON text shaped as Nova's NFS connector keeps it:
 *   {"driver_volume_type": "nfs", "data": {"export": <share>, "name":
 *    "volume-<uuid>", "format": "raw"|"qcow2", "options": ..., ...},
 *    "mount_point_base": <dir>}
 * and the volume's file is <mount_point_base>/<md5 hex of export>/<name>. */
#ifndef NB_COMPUTE_BDM_H
#define NB_COMPUTE_BDM_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* The parsed connection_info of a row: new reference, or NULL when the row
 * has none or it is not a JSON object. */
json_t *nb_bdm_connection_info(const json_t *bdm);
/* The file connection_info points at, into out. 0, or -1 when it lacks
 * data.export, data.name or mount_point_base (or they do not fit). */
int nb_bdm_volume_path(const json_t *conn_info, char *out, size_t n);
/* data.format of connection_info ("raw" when absent, as os-brick assumes).
 * Borrowed. */
const char *nb_bdm_declared_format(const json_t *conn_info);
/* True when the row maps a volume (destination_type volume, not deleted). */
bool nb_bdm_is_volume(const json_t *bdm);
/* True when the row is the boot disk (boot_index 0). */
bool nb_bdm_is_boot(const json_t *bdm);
/* The instance's boot volume mapping (borrowed from instance
 * ["block_device_mapping"]), or NULL for an image-backed instance. */
const json_t *nb_bdm_boot_volume(const json_t *instance);
/* True when name (a qcow2 backing file name) is a file of volume_id's own
 * chain on its share: "volume-<id>" or "volume-<id>.<snapshot>", without a
 * directory (Cinder's NFS snapshot overlays). Anything else in a volume's
 * qcow2 header - another volume's file, a host path - must never be opened:
 * a guest can write a qcow2 header into its raw disk. */
bool nb_bdm_own_chain_file(const char *name, const char *volume_id);
/* The guest device of a row without "/dev/" ("vdb"), into out; "" when the
 * row has no device_name. */
void nb_bdm_target(const json_t *bdm, char *out, size_t n);

#endif
