/* filters.c - the filter registry and the loop that runs enabled filters.
 *
 * Each filter lives in its own file and exports one struct nb_sched_filter;
 * this file maps [filter_scheduler] enabled_filters names to them and runs
 * them in order, writing the explanation an operator reads in the fault
 * details: "<Filter>: <in> -> <out>; <host>: <why>; …". */
#include "compute/scheduler/host_state.h"
#include "common/metrics.h"
#include "common/sbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct nb_sched_filter *const all_filters[] = {
    &nb_filter_retry,
    &nb_filter_az_prefilter,
    &nb_filter_compute,
    &nb_filter_compute_capabilities,
    &nb_filter_image_properties,
    &nb_filter_availability_zone,
    &nb_filter_aggregate_image_properties_isolation,
    &nb_filter_server_group_anti_affinity,
    &nb_filter_server_group_affinity,
};

const struct nb_sched_filter *nb_sched_filter_find(const char *name)
{
    for (size_t i = 0; i < sizeof(all_filters) / sizeof(all_filters[0]); i++)
        if (!strcmp(all_filters[i]->name, name))
            return all_filters[i];
    return NULL;
}

/* The hosts a filter's line names with their reasons; the others are
 * counted ("; and N more hosts"): with thousands of hosts a line naming
 * each one would be the size of a megabyte, in every fault and log. */
#define REASONS_SHOWN 20

static size_t run_filters(struct nb_host_state **hosts, size_t n,
                          const struct nb_sched_filter *const *filters, size_t nfilters,
                          const struct nb_sched_spec *spec, json_t *lines, bool count)
{
    for (size_t f = 0; f < nfilters && n > 0; f++) {
        struct nb_sbuf reasons = {0};
        size_t kept = 0, rejected = 0;
        for (size_t i = 0; i < n; i++) {
            char why[512] = "";
            if (filters[f]->host_passes(hosts[i], spec, why, sizeof(why)))
                hosts[kept++] = hosts[i];
            else if (rejected++ < REASONS_SHOWN) {
                nb_sbuf_str(&reasons, "; ");
                nb_sbuf_str(&reasons, hosts[i]->host);
                nb_sbuf_str(&reasons, ": ");
                nb_sbuf_str(&reasons, why[0] ? why : "rejected");
            }
        }
        if (rejected > REASONS_SHOWN) {
            char more[64];
            snprintf(more, sizeof(more), "; and %zu more hosts", rejected - REASONS_SHOWN);
            nb_sbuf_str(&reasons, more);
        }
        char *line = NULL;
        if (asprintf(&line, "%s: %zu -> %zu%s", filters[f]->name, n, kept,
                     reasons.s ? reasons.s : "") < 0)
            abort();
        json_array_append_new(lines, json_string(line));
        free(line);
        free(reasons.s);
        if (count && kept < n)
            nb_metrics_add(NB_M_SCHEDULER_REJECTIONS, (double)(n - kept),
                           (const char *const[]){filters[f]->name});
        n = kept;
    }
    return n;
}

size_t nb_sched_run_filters(struct nb_host_state **hosts, size_t n,
                            const struct nb_sched_filter *const *filters, size_t nfilters,
                            const struct nb_sched_spec *spec, json_t *lines)
{
    return run_filters(hosts, n, filters, nfilters, spec, lines, true);
}

size_t nb_sched_judge_filters(struct nb_host_state **hosts, size_t n,
                              const struct nb_sched_filter *const *filters, size_t nfilters,
                              const struct nb_sched_spec *spec, json_t *lines)
{
    return run_filters(hosts, n, filters, nfilters, spec, lines, false);
}
