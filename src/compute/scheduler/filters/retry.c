/* retry.c - RetryFilter: a rescheduled build does not go back to a host
 * where it already failed. Nova dropped the filter for "alternates" chosen
 * up front; nubo reselects instead, so it runs first, always. */
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
    if (attempt == 0)
        return true;
    snprintf(why, n, "build already failed there (attempt %d)", attempt);
    return false;
}

const struct nb_sched_filter nb_filter_retry = {"RetryFilter", retry_passes};
