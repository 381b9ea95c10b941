/* scheduler_api.h - the client of topic "scheduler" (Nova's
 * scheduler/rpcapi.py): one function per message, each packing its
 * arguments in one place. The scheduler's dispatcher
 * (scheduler/scheduler.c) serves the same method names. All messages
 * carry the caller's context. */
#ifndef NB_RPC_SCHEDULER_API_H
#define NB_RPC_SCHEDULER_API_H

#include "common/ctx.h"
#include <jansson.h>
#include <stdbool.h>

struct nb_request_spec;

#define NB_SCHEDULER_TOPIC "scheduler"

#define NB_SCHEDULER_SELECT_DESTINATIONS "select_destinations"
#define NB_SCHEDULER_PING "ping"

/* select_destinations (call, conductor -> scheduler) {"instance_uuid",
 * "spec"}: a host for the instance under spec (the request spec,
 * compute/objects/request_spec.h, sent in its JSON form), claimed in
 * placement. Returns the reply (new ref):
 * {"host", "node", "rp_uuid", "availability_zone", "details"}, or
 * {"error": "No valid host was found. …", "details": "…"}; NULL on timeout
 * or when no scheduler listens (error on ctx). */
json_t *nb_scheduler_select_destinations(struct nb_ctx *ctx, const char *instance_uuid,
                                         const struct nb_request_spec *spec, int timeout_ms);

/* select_destinations with "dry_run": true: nothing is claimed; the reply
 * judges every placement candidate on its own:
 * {"dry_run": true, "resources": "VCPU=1, …", "details": "…",
 *  "hosts": {"<host>": {"ok": bool, "reason": "<the filter line that
 *  stopped it>" or "passed every filter"}}}, or the {"error", "details"}
 * reply when placement has no candidate. A host absent from "hosts" is
 * not a placement candidate for the resources. */
json_t *nb_scheduler_dry_run(struct nb_ctx *ctx, const char *instance_uuid,
                             const struct nb_request_spec *spec, int timeout_ms);

/* ping (call) {} -> {"ok": true}: whether a scheduler answers within
 * timeout_ms (a failure is left on ctx). */
bool nb_scheduler_ping(struct nb_ctx *ctx, int timeout_ms);

#endif
