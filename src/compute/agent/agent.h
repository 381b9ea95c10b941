/* agent.h - the per-host compute agent (topic "compute.<host>"). */
#ifndef NB_AGENT_H
#define NB_AGENT_H

#include "common/env.h"
#include "compute/virt/driver.h"

/* Starts the agent of host on drv: registers the service and compute node,
 * reports inventory, starts heartbeats and power sync. env->db is not used
 * (agents talk to the conductor). 0/-1. */
int nb_compute_agent_start(struct nb_env *env, struct nb_virt_driver *drv, const char *host);
/* Stops every agent's periodic tasks (before the bus shuts down). */
void nb_compute_agents_stop(void);

#endif
