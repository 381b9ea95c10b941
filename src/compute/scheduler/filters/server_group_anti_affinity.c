/* server_group_anti_affinity.c - ServerGroupAntiAffinityFilter: with an
 * anti-affinity group, a host passes while it holds fewer than
 * max_server_per_host (rules, default 1) other members of the group. */
#include "compute/scheduler/host_state.h"
#include "common/json.h"

#include <stdio.h>
#include <string.h>

static bool anti_affinity_passes(const struct nb_host_state *hs, const struct nb_sched_spec *spec,
                                 char *why, size_t n)
{
    if (!spec->group_policy || strcmp(spec->group_policy, "anti-affinity"))
        return true;
    long on_host = (long)nb_json_int(spec->group_hosts, hs->host, 0);
    long max = spec->max_server_per_host > 0 ? spec->max_server_per_host : 1;
    if (on_host < max)
        return true;
    snprintf(why, n,
             "already hosts %ld member(s) of anti-affinity group %s (max_server_per_host %ld)",
             on_host, spec->group_uuid ? spec->group_uuid : "?", max);
    return false;
}

const struct nb_sched_filter nb_filter_server_group_anti_affinity = {
    "ServerGroupAntiAffinityFilter", anti_affinity_passes};
