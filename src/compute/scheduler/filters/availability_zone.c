/* availability_zone.c - AvailabilityZoneFilter (deprecated in Nova since
 * Xena in favour of the placement prefilter, still available): a host
 * passes if the requested zone is among the zones of its aggregates, or is
 * the default zone when the host is in no zoned aggregate. The host state's
 * availability_zone already holds that (comma-joined when several). */
#include "compute/scheduler/host_state.h"

#include <stdio.h>
#include <string.h>

static bool az_passes(const struct nb_host_state *hs, const struct nb_sched_spec *spec, char *why,
                      size_t n)
{
    const char *az = spec->availability_zone;
    if (!az || !*az)
        return true;
    char zones[sizeof(hs->availability_zone)];
    nb_strlcpy(zones, hs->availability_zone, sizeof(zones));
    char *save = NULL;
    for (char *z = strtok_r(zones, ",", &save); z; z = strtok_r(NULL, ",", &save)) {
        while (*z == ' ')
            z++;
        if (!strcmp(z, az))
            return true;
    }
    snprintf(why, n, "in zone %s, requested %s", hs->availability_zone, az);
    return false;
}

const struct nb_sched_filter nb_filter_availability_zone = {"AvailabilityZoneFilter", az_passes};
