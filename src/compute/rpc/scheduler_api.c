/* scheduler_api.c - the client of topic "scheduler" (see scheduler_api.h). */
#include "compute/rpc/scheduler_api.h"
#include "bus/bus.h"
#include "compute/objects/request_spec.h"

json_t *nb_scheduler_select_destinations(struct nb_ctx *ctx, const char *instance_uuid,
                                         const struct nb_request_spec *spec, int timeout_ms)
{
    return nb_bus_call(ctx, NB_SCHEDULER_TOPIC, NB_SCHEDULER_SELECT_DESTINATIONS,
                       json_pack("{s:s, s:o}", "instance_uuid", instance_uuid, "spec",
                                 nb_request_spec_to_json(spec)),
                       timeout_ms);
}

json_t *nb_scheduler_dry_run(struct nb_ctx *ctx, const char *instance_uuid,
                             const struct nb_request_spec *spec, int timeout_ms)
{
    return nb_bus_call(ctx, NB_SCHEDULER_TOPIC, NB_SCHEDULER_SELECT_DESTINATIONS,
                       json_pack("{s:s, s:o, s:b}", "instance_uuid", instance_uuid, "spec",
                                 nb_request_spec_to_json(spec), "dry_run", 1),
                       timeout_ms);
}

bool nb_scheduler_ping(struct nb_ctx *ctx, int timeout_ms)
{
    json_t *r = nb_bus_call(ctx, NB_SCHEDULER_TOPIC, NB_SCHEDULER_PING, json_object(), timeout_ms);
    json_decref(r);
    return r != NULL;
}
