/* retry.c - RetryFilter: a rescheduled build does not go back to a host
 * where it already failed, nor to one whose compute service did not take
 * the build (not up yet, e.g. after a restart; that is no failed attempt).
 * Nova dropped the filter for "alternates" chosen up front; nubo reselects
 * instead, so it runs first, always. */
#include "compute/scheduler/host_state.h"

#include <stdio.h>
#include <string.h>

static bool retry_passes(const struct nb_host_state *hs, const struct nb_sched_spec *spec,
                         char *why, size_t n)
{
    size_t i;
    json_t *h;
    int attempt = 0;
    json_array_foreach (spec->retry_hosts, i, h) {
        if (json_is_string(h) && !strcmp(json_string_value(h), hs->host))
            attempt = (int)i + 1;
    }
    if (attempt > 0) {
        snprintf(why, n, "build already failed there (attempt %d)", attempt);
        return false;
    }
    json_array_foreach (spec->unreachable_hosts, i, h) {
        if (json_is_string(h) && !strcmp(json_string_value(h), hs->host)) {
            snprintf(why, n, "its compute service did not answer for this build");
            return false;
        }
    }
    return true;
}

const struct nb_sched_filter nb_filter_retry = {"RetryFilter", retry_passes};
