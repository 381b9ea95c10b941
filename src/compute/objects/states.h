/* states.h - Nova's state vocabulary: vm_state, task_state and power_state
 * values as Nova spells them (nova/compute/vm_states.py, task_states.py,
 * power_state.py), and the one map between them and the API's server
 * status (nova.api.openstack.common._STATE_MAP), used both ways.
 *
 * Everything that names a state uses these constants, in C and as bound
 * SQL parameters; the agent and the drivers include this header for the
 * power-state codes without pulling in anything of the database. */
#ifndef NB_COMPUTE_OBJECTS_STATES_H
#define NB_COMPUTE_OBJECTS_STATES_H

#include <jansson.h>

/* vm_state */
#define NB_VM_BUILDING "building"
#define NB_VM_ACTIVE "active"
#define NB_VM_STOPPED "stopped"
#define NB_VM_PAUSED "paused"
#define NB_VM_SUSPENDED "suspended"
#define NB_VM_ERROR "error"
#define NB_VM_DELETED "deleted"
#define NB_VM_SOFT_DELETED "soft-delete"
#define NB_VM_SHELVED "shelved"
#define NB_VM_SHELVED_OFFLOADED "shelved_offloaded"
#define NB_VM_RESIZED "resized"
#define NB_VM_RESCUED "rescued"

/* task_state */
#define NB_TASK_SCHEDULING "scheduling"
#define NB_TASK_NETWORKING "networking"
#define NB_TASK_BDM "block_device_mapping"
#define NB_TASK_SPAWNING "spawning"
#define NB_TASK_POWERING_OFF "powering-off"
#define NB_TASK_POWERING_ON "powering-on"
#define NB_TASK_REBOOTING "rebooting"
#define NB_TASK_REBOOTING_HARD "rebooting_hard"
#define NB_TASK_REBOOT_PENDING "reboot_pending"
#define NB_TASK_REBOOT_STARTED "reboot_started"
#define NB_TASK_REBOOT_PENDING_HARD "reboot_pending_hard"
#define NB_TASK_REBOOT_STARTED_HARD "reboot_started_hard"
#define NB_TASK_PAUSING "pausing"
#define NB_TASK_UNPAUSING "unpausing"
#define NB_TASK_SUSPENDING "suspending"
#define NB_TASK_RESUMING "resuming"
#define NB_TASK_DELETING "deleting"
/* createImage (Nova's task_states): the API sets image_snapshot, the
 * conductor image_pending_upload while the agent copies and uploads. */
#define NB_TASK_IMAGE_SNAPSHOT "image_snapshot"
#define NB_TASK_IMAGE_SNAPSHOT_PENDING "image_snapshot_pending"
#define NB_TASK_IMAGE_PENDING_UPLOAD "image_pending_upload"
#define NB_TASK_IMAGE_UPLOADING "image_uploading"
/* Moves and rebuilds: nubo does not enter them yet; the status map and
 * the list filters know them, as Nova's. */
#define NB_TASK_UPDATING_PASSWORD "updating_password"
#define NB_TASK_REBUILDING "rebuilding"
#define NB_TASK_REBUILD_BDM "rebuild_block_device_mapping"
#define NB_TASK_REBUILD_SPAWNING "rebuild_spawning"
#define NB_TASK_MIGRATING "migrating"
#define NB_TASK_RESIZE_PREP "resize_prep"
#define NB_TASK_RESIZE_MIGRATING "resize_migrating"
#define NB_TASK_RESIZE_MIGRATED "resize_migrated"
#define NB_TASK_RESIZE_FINISH "resize_finish"
#define NB_TASK_RESIZE_REVERTING "resize_reverting"

/* power_state codes, as Nova */
enum nb_power_state {
    NB_POWER_NOSTATE = 0,
    NB_POWER_RUNNING = 1,
    NB_POWER_PAUSED = 3,
    NB_POWER_SHUTDOWN = 4,
    NB_POWER_CRASHED = 6,
    NB_POWER_SUSPENDED = 7,
};

/* The API status for a vm_state/task_state pair, as Nova's
 * nova.api.openstack.common.status_from_state: the pair's entry, else the
 * vm_state's default, else "UNKNOWN". NULL states count as none. Borrowed
 * static string. */
const char *nb_server_status(const char *vm_state, const char *task_state);

/* The other way, as Nova's task_and_vm_state_from_status: appends to the
 * arrays vm_states and task_states (each value once; task "default" stands
 * for the vm_state's default entry, i.e. any task state not listed) every
 * pair whose status is one of statuses (strings, compared without case). */
void nb_server_states_for_statuses(const json_t *statuses, json_t *vm_states, json_t *task_states);

#endif
