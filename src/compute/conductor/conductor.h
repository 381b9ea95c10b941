/* conductor.h - the conductor role (Nova's nova-conductor), topic
 * "conductor": the only writer of instance state after create, and the
 * agents' door to the database.
 *
 * Methods (all casts unless marked call):
 *  from the API:   build_instances {"instance_uuids"}, start_instance {"uuid"},
 *                  stop_instance {"uuid"}, reboot_instance {"uuid",
 *                  "reboot_type"}, pause_instance / unpause_instance /
 *                  suspend_instance / resume_instance {"uuid"},
 *                  delete_instance {"uuid"}, attach_volume / detach_volume
 *                  {"uuid", "bdm_uuid", "volume_id"}, snapshot_instance
 *                  {"uuid", "image_id"} (see compute.h, step 3)
 *  from agents:    build_result {"uuid","host","ok","message"},
 *                  op_result {"uuid","host","op","ok","message","power_state",
 *                  "unsupported"},
 *                  service_update (call) {"host","binary","topic"} -> {"id","uuid",
 *                  "disabled"}, compute_node_update (call) {compute node
 *                  columns…} -> {"uuid","id"}, service_heartbeat {"hosts":[…],
 *                  "binary"}, instances_on_host (call) {"host"} -> [{"uuid",
 *                  "vm_state","task_state","power_state","flavor"}…],
 *                  power_sync {"uuid","host","power_state","found"},
 *                  attach_result / detach_result / snapshot_result,
 *                  reconcile_disk_format (call) -> {"ok", "connection_info"}
 *  anyone:         ping (call) -> {"ok": true}
 *
 * Instance state in the request_spec column, beyond what the API writes:
 *   "retry": {"num_attempts": n, "hosts": [host…], "failures": ["host: why"…]} */
#ifndef NB_CONDUCTOR_H
#define NB_CONDUCTOR_H

#include "common/env.h"

/* Listens on "conductor" ([conductor] workers threads) and starts the
 * recovery of work interrupted by a restart in the background (builds left
 * in BUILD, deletes and power actions left half-done, leaked allocations).
 * 0/-1. */
int nb_conductor_start(struct nb_env *env);

#endif
