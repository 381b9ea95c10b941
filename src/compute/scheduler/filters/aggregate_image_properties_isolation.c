/* aggregate_image_properties_isolation.c - AggregateImagePropertiesIsolation:
 * for every metadata key of the host's aggregates (restricted to
 * "<namespace><separator>…" keys when [filter_scheduler]
 * aggregate_image_properties_isolation_namespace is set), an image that has
 * that property must have one of the aggregate's comma-separated values.
 * Images without the property pass, as in Nova. */
#include "compute/scheduler/host_state.h"
#include "common/json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* True if value is one of the comma-separated (blank-trimmed) options. */
static bool in_options(const char *options, const char *value)
{
    char *copy = strdup(options), *save = NULL;
    bool found = false;
    for (char *t = strtok_r(copy, ",", &save); t && !found; t = strtok_r(NULL, ",", &save)) {
        while (*t == ' ')
            t++;
        size_t len = strlen(t);
        while (len && t[len - 1] == ' ')
            t[--len] = '\0';
        found = !strcmp(t, value);
    }
    free(copy);
    return found;
}

/* The image property as Python's str() shows it; NULL if absent or falsy. */
static char *prop_text(json_t *v)
{
    if (json_is_string(v))
        return *json_string_value(v) ? strdup(json_string_value(v)) : NULL;
    if (json_is_integer(v))
        return json_integer_value(v) ? nb_strdup_printf("%lld", (long long)json_integer_value(v))
                                     : NULL;
    if (json_is_true(v))
        return strdup("True");
    return NULL;
}

static bool isolation_passes(const struct nb_host_state *hs, const struct nb_sched_spec *spec,
                             char *why, size_t n)
{
    const char *ns = spec->isolation_namespace;
    const char *sep = spec->isolation_separator ? spec->isolation_separator : ".";
    char prefix[256] = "";
    if (ns && *ns)
        snprintf(prefix, sizeof(prefix), "%s%s", ns, sep);
    size_t i;
    json_t *agg;
    json_array_foreach (hs->aggregates, i, agg) {
        const char *key;
        json_t *val;
        json_object_foreach (json_object_get(agg, "metadata"), key, val) {
            if (prefix[0] && !nb_startswith(key, prefix))
                continue;
            if (!json_is_string(val))
                continue;
            char *p = prop_text(json_object_get(spec->image_props, key));
            /* Nova merges the values of all the host's aggregates; a value
             * allowed by any of them passes. */
            bool ok = true;
            if (p) {
                ok = false;
                size_t k;
                json_t *other;
                json_array_foreach (hs->aggregates, k, other) {
                    const char *o = nb_json_str(json_object_get(other, "metadata"), key);
                    if (o && in_options(o, p))
                        ok = true;
                }
            }
            if (!ok)
                snprintf(why, n,
                         "image property %s=%s is not among the values '%s' of aggregate %s", key,
                         p, json_string_value(val),
                         nb_json_str(agg, "name") ? nb_json_str(agg, "name") : "?");
            free(p);
            if (!ok)
                return false;
        }
    }
    return true;
}

const struct nb_sched_filter nb_filter_aggregate_image_properties_isolation = {
    "AggregateImagePropertiesIsolation", isolation_passes};
