/* agent.h - the per-host compute agent (Nova's nova-compute), topic
 * "compute.<host>".
 *
 * An agent drives one hypervisor host through a virt driver. It never opens
 * the database: it registers its service and compute node, heartbeats and
 * reports usage through the conductor, and reports inventory and traits to
 * placement (directly in an all-in-one, else over HTTP as the service user:
 * svc_client.h, which also fetches and uploads image data). Methods it serves (casts unless marked
 * call): build_and_run_instance {"instance", "node"} -> conductor build_result start_instance /
 * stop_instance / reboot_instance {"instance", "reboot_type"} / terminate_instance / pause_instance
 * / unpause_instance / suspend_instance / resume_instance {"instance"}
 *     -> conductor op_result ("unsupported": the driver lacks the op)
 *   attach_volume / detach_volume {"instance", "bdm"} -> conductor
 *     attach_result / detach_result {"uuid", "host", "bdm_uuid", "volume_id",
 *     "ok", "message"} (501 message for a driver without the op)
 *   snapshot_instance {"instance", "image_id"} -> conductor snapshot_result
 *     {"uuid", "host", "image_id", "ok", "message"}
 *   destroy_guest {"uuid"}          (cleanup after a lost race, no reply)
 * Spawn, start, hard reboot, resume and attach first check the formats of
 * the volume files (disk_format.c; may call conductor
 * reconcile_disk_format).
 *   get_console_output (call) {"uuid", "length"} -> {"output"} | {"error", "code"}
 *     (the last `length` newline-separated pieces, as Nova's _tail_log;
 *     null or negative: all; code 501 for a driver without console logs)
 *   guest_info (call) {"uuid"} -> {"found", "power_state"}
 *   get_host_uptime (call) -> " 18:00:00 up 2 days, …  load average: …" (string)
 *   ping (call) -> {"ok", "host"}
 * Periodic work for all agents of the process runs in one thread: service
 * heartbeats every [DEFAULT] report_interval (10 s), usage every
 * [DEFAULT] update_resources_interval (60 s, and soon after each build or
 * delete), power-state sync every [compute] sync_power_state_interval
 * (600 s; <= 0 disables). */
#ifndef NB_AGENT_H
#define NB_AGENT_H

#include "common/env.h"
#include "compute/virt/driver.h"

/* Starts the agent of host on drv: listens on "compute.<host>" ([compute]
 * agent_workers threads, default 2), registers the service and compute
 * node and reports inventory (retried by the periodic thread if the
 * conductor is not there yet), and joins the periodic work. env->db is not
 * used. 0/-1 (logged). */
int nb_compute_agent_start(struct nb_env *env, struct nb_virt_driver *drv, const char *host);
/* Stops every agent's periodic work (call before the bus shuts down).
 * Idempotent. */
void nb_compute_agents_stop(void);

#endif
