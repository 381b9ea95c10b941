/* agent.h - the per-host compute agent (Nova's nova-compute), topic
 * "compute.<host>".
 *
 * An agent drives one hypervisor host through a virt driver. It never opens
 * the database: it registers its service and compute node, heartbeats and
 * reports usage through the conductor, and reports inventory and traits to
 * placement (directly in an all-in-one, else over HTTP as the service user:
 * svc_client.h, which also fetches and uploads image data). The methods it
 * serves are the messages of compute/rpc/compute_api.h (the method table of
 * manager.c); it reports every outcome to the conductor through
 * compute/rpc/conductor_api.h (build_result, op_result, attach_result,
 * detach_result, snapshot_result). Spawn, start, hard reboot, resume and
 * attach first check the formats of the volume files (disk_format.c; may
 * call conductor reconcile_disk_format).
 *
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
 * agent_workers threads, default 2, or with [compute] agent_shared_workers
 * = true at most that many at once of the bus's shared pool,
 * nb_bus_listen_shared; builds run on threads of their own,
 * [DEFAULT] max_concurrent_builds at a time, builds.c), registers the service and compute
 * node and reports inventory (retried by the periodic thread if the
 * conductor is not there yet), and joins the periodic work. env->db is not
 * used. 0/-1 (logged). */
int nb_compute_agent_start(struct nb_env *env, struct nb_virt_driver *drv, const char *host);
/* Waits for the builds in progress, then stops every agent's periodic
 * work (call before the bus shuts down). Idempotent. */
void nb_compute_agents_stop(void);

#endif
