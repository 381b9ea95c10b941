/* az_prefilter.c - the availability zone request filter.
 *
 * Nova (since Xena, [scheduler] query_placement_for_availability_zone =
 * true) restricts candidates to the requested zone before any filter runs,
 * by asking placement for members of the zone's aggregates. nubo applies the
 * same restriction to the candidates using Nova's aggregates directly, so
 * the explanation can name each host's zone. Runs when a zone is requested
 * and the option is on. */
#include "compute/scheduler/host_state.h"

#include <stdio.h>
#include <string.h>

/* True if zone is one of the comma-separated zones in list. */
static bool zone_in(const char *list, const char *zone)
{
    size_t zl = strlen(zone);
    for (const char *p = list; *p;) {
        while (*p == ' ' || *p == ',')
            p++;
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        while (len > 0 && p[len - 1] == ' ')
            len--;
        if (len == zl && !strncmp(p, zone, zl))
            return true;
        if (!e)
            break;
        p = e + 1;
    }
    return false;
}

static bool az_prefilter_passes(const struct nb_host_state *hs, const struct nb_sched_spec *spec,
                                char *why, size_t n)
{
    const char *az = spec->availability_zone;
    if (!az || !*az || zone_in(hs->availability_zone, az))
        return true;
    snprintf(why, n, "in zone %s, requested %s", hs->availability_zone, az);
    return false;
}

const struct nb_sched_filter nb_filter_az_prefilter = {"AvailabilityZonePrefilter",
                                                       az_prefilter_passes};
