/* compute.c - ComputeFilter: only hosts whose nova-compute service is
 * enabled and up (heard from within [DEFAULT] service_down_time, not forced
 * down). The scheduler computes service_up when it builds the host state. */
#include "compute/scheduler/host_state.h"

#include <stdio.h>

static bool compute_passes(const struct nb_host_state *hs, const struct nb_sched_spec *spec,
                           char *why, size_t n)
{
    (void)spec;
    if (!hs->has_service) {
        snprintf(why, n, "no nova-compute service is registered for the host");
        return false;
    }
    if (hs->service_disabled) {
        snprintf(why, n, "nova-compute service is disabled (reason: %s)",
                 hs->disabled_reason[0] ? hs->disabled_reason : "none given");
        return false;
    }
    if (hs->forced_down) {
        snprintf(why, n, "nova-compute service is forced down");
        return false;
    }
    if (!hs->service_up) {
        snprintf(why, n, "nova-compute service is down (last seen up %s)",
                 hs->last_seen_up[0] ? hs->last_seen_up : "never");
        return false;
    }
    return true;
}

const struct nb_sched_filter nb_filter_compute = {"ComputeFilter", compute_passes};
