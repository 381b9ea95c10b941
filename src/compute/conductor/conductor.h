/* conductor.h - the conductor role (Nova's nova-conductor), topic
 * "conductor": the only writer of instance state after create, and the
 * agents' door to the database.
 *
 * Methods: the messages of compute/rpc/conductor_api.h (one function per
 * message, casts unless marked call), served by the method table of
 * manager.c: from the API build_instances, the power actions, delete,
 * attach/detach_volume and snapshot_instance; from the agents their
 * outcomes, reconcile_disk_format, power_sync and their service and
 * compute node records; ping from anyone.
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
/* After the bus has stopped (no handler runs): stops the lease thread and
 * gives the leases up (leases.c; nothing on SQLite). */
void nb_conductor_stop(void);

#endif
