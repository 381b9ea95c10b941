/* scheduler.h - the scheduler role (Nova's nova-scheduler): listens on the
 * bus topic "scheduler" for select_destinations calls from the conductor.
 *
 *   select_destinations {"instance_uuid", "spec": <the request spec,
 *       compute/objects/request_spec.h: flavor, image properties,
 *       availability_zone, force_hosts (filters skipped),
 *       requested_destination (filters run), group with its current
 *       members, retry.hosts, unreachable_hosts, is_bfv, project_id,
 *       user_id>}
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

/* The placement resources of an instance's flavor JSON (flat, or Nova's
 * {"cur": {"nova_object.data": ...}}), as the scheduler claims them (Nova's
 * resources_from_flavor; no root disk when is_bfv). New ref. The cloud
 * audit heals a missing allocation with it. */
#include <jansson.h>
#include <stdbool.h>
json_t *nb_scheduler_flavor_resources(json_t *flavor, bool is_bfv);

#endif
