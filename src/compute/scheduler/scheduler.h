/* scheduler.h - the scheduler role (Nova's nova-scheduler): listens on the
 * bus topic "scheduler" for select_destinations calls from the conductor.
 *
 *   select_destinations {"instance_uuid", "spec": {
 *       "flavor": {"vcpus", "memory_mb", "root_gb", "ephemeral_gb", "swap",
 *                  "extra_specs": {…}},
 *       "image": {"id", "properties": {…}} | null,
 *       "availability_zone": "az" | null, "force_host": "host" | null (filters
 *       skipped), "requested_host": "host" | null (filters run),
 *       "group": {"uuid", "policy", "rules": {…}, "members": [uuid…]} | null,
 *       "retry_hosts": ["host", …], "unreachable_hosts": ["host", …],
 *       "is_bfv": bool,
 *       "project_id", "user_id"}}
 *   -> {"host", "node", "rp_uuid", "availability_zone", "details"}  (claimed)
 *   -> {"error": "No valid host was found. …", "details": "…"}
 *
 * "details" is the per-step explanation (placement, then each filter with
 * "<in> -> <out>" and why each removed host went, then the claims), also
 * logged at INFO under the request ID. */
#ifndef NB_SCHEDULER_H
#define NB_SCHEDULER_H

#include "common/env.h"

/* Registers the "scheduler" topic ([scheduler] workers threads). Fails
 * (-1, logged) when [filter_scheduler] names an unknown filter or weigher. */
int nb_scheduler_start(struct nb_env *env);

#endif
