/* filters.c - the filter registry and the loop that runs enabled filters.
 *
 * Each filter lives in its own file and exports one struct nb_sched_filter;
 * this file maps [filter_scheduler] enabled_filters names to them and runs
 * them in order, writing the explanation an operator reads in the fault
 * details: "<Filter>: <in> -> <out>; <host>: <why>; …". */
#include "compute/scheduler/host_state.h"
#include "common/metrics.h"

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

/* Appends "; host: why" to *line (realloc'd). */
static void append_reason(char **line, const char *host, const char *why)
{
    char *n = NULL;
    if (asprintf(&n, "%s; %s: %s", *line, host, why) < 0)
        abort();
    free(*line);
    *line = n;
}

static size_t run_filters(struct nb_host_state **hosts, size_t n,
                          const struct nb_sched_filter *const *filters, size_t nfilters,
                          const struct nb_sched_spec *spec, json_t *lines, bool count)
{
    for (size_t f = 0; f < nfilters && n > 0; f++) {
        char *reasons = strdup("");
        size_t kept = 0;
        for (size_t i = 0; i < n; i++) {
            char why[512] = "";
            if (filters[f]->host_passes(hosts[i], spec, why, sizeof(why)))
                hosts[kept++] = hosts[i];
            else
                append_reason(&reasons, hosts[i]->host, why[0] ? why : "rejected");
        }
        char *line = NULL;
        if (asprintf(&line, "%s: %zu -> %zu%s", filters[f]->name, n, kept, reasons) < 0)
            abort();
        json_array_append_new(lines, json_string(line));
        free(line);
        free(reasons);
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
