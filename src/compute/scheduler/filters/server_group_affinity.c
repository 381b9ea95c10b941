/* server_group_affinity.c - ServerGroupAffinityFilter: with an affinity
 * group whose other members already have a host, only those hosts pass. */
#include "compute/scheduler/host_state.h"

#include <stdio.h>
#include <string.h>

static bool affinity_passes(const struct nb_host_state *hs, const struct nb_sched_spec *spec,
                            char *why, size_t n)
{
    if (!spec->group_policy || strcmp(spec->group_policy, "affinity"))
        return true;
    if (json_object_size(spec->group_hosts) == 0 || json_object_get(spec->group_hosts, hs->host))
        return true;
    char hosts[256] = "";
    const char *h;
    json_t *v;
    json_object_foreach (spec->group_hosts, h, v) {
        if (strlen(hosts) + strlen(h) + 3 >= sizeof(hosts))
            break;
        snprintf(hosts + strlen(hosts), sizeof(hosts) - strlen(hosts), "%s%s", hosts[0] ? ", " : "",
                 h);
    }
    snprintf(why, n, "members of affinity group %s are on %s",
             spec->group_uuid ? spec->group_uuid : "?", hosts);
    return false;
}

const struct nb_sched_filter nb_filter_server_group_affinity = {"ServerGroupAffinityFilter",
                                                                affinity_passes};
