/* weighers.c - the weigher registry and Nova's weighing: per weigher, raw
 * values (clamped at minval), normalised to [0, 1] over the candidate
 * hosts, times the weigher's multiplier (configuration, overridden by the
 * smallest value in the host's aggregates' metadata), summed; hosts are
 * then sorted by weight, highest first. */
#include "compute/scheduler/host_state.h"
#include "common/json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const struct nb_sched_weigher *const all_weighers[] = {
    &nb_weigher_ram,
    &nb_weigher_cpu,
    &nb_weigher_disk,
};

const struct nb_sched_weigher *nb_sched_weigher_find(const char *name)
{
    for (size_t i = 0; i < sizeof(all_weighers) / sizeof(all_weighers[0]); i++)
        if (!strcmp(all_weighers[i]->name, name))
            return all_weighers[i];
    return NULL;
}

double nb_sched_weight_multiplier(const struct nb_host_state *hs, const struct nb_sched_weigher *w,
                                  double def)
{
    bool found = false;
    double best = def;
    size_t i;
    json_t *agg;
    json_array_foreach (hs->aggregates, i, agg) {
        const char *v = nb_json_str(json_object_get(agg, "metadata"), w->multiplier_key);
        char *end;
        if (!v)
            continue;
        double d = strtod(v, &end);
        if (end == v || *end)
            continue; /* Nova warns and keeps the configured value */
        if (!found || d < best)
            best = d;
        found = true;
    }
    return best;
}

/* Sorts by weight, descending; stable (insertion sort: host lists are short
 * after filtering, and order among equals must stay). */
static void sort_desc(struct nb_host_state **hosts, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        struct nb_host_state *h = hosts[i];
        size_t j = i;
        while (j > 0 && hosts[j - 1]->weight < h->weight) {
            hosts[j] = hosts[j - 1];
            j--;
        }
        hosts[j] = h;
    }
}

void nb_sched_weigh(struct nb_host_state **hosts, size_t n,
                    const struct nb_sched_weigher *const *weighers, const double *multipliers,
                    size_t nweighers)
{
    for (size_t i = 0; i < n; i++)
        hosts[i]->weight = 0.0;
    if (n <= 1)
        return;
    double *raw = calloc(n, sizeof(double));
    for (size_t k = 0; k < nweighers; k++) {
        const struct nb_sched_weigher *w = weighers[k];
        double lo = INFINITY, hi = -INFINITY;
        for (size_t i = 0; i < n; i++) {
            raw[i] = fmax(w->raw(hosts[i]), w->minval);
            hi = fmax(hi, raw[i]);
            lo = fmin(lo, raw[i]);
        }
        lo = w->minval; /* Nova's compute weighers set minval = 0 */
        for (size_t i = 0; i < n; i++) {
            double norm = hi == lo ? 0.0 : (raw[i] - lo) / (hi - lo);
            hosts[i]->weight += nb_sched_weight_multiplier(hosts[i], w, multipliers[k]) * norm;
        }
    }
    free(raw);
    sort_desc(hosts, n);
}
