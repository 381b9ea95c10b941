/* compute_capabilities.c - ComputeCapabilitiesFilter: flavor extra specs
 * "capabilities:<attr>[:<sub>…]" (and unscoped keys naming a host
 * attribute) must match the host's value with Nova's operator language,
 * e.g. capabilities:cpu_info:arch="s== x86_64",
 * capabilities:hypervisor_version=">= 7000000",
 * capabilities:cpu_info:features="<in> avx2". Other scopes (hw:, trait:,
 * resources:, quota:, …) are not this filter's. */
#include "compute/scheduler/host_state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Appends Python's str()/repr() of j to *buf (open_memstream). */
static void py_repr(FILE *f, json_t *j, bool top)
{
    switch (json_typeof(j)) {
    case JSON_STRING: fprintf(f, top ? "%s" : "'%s'", json_string_value(j)); break;
    case JSON_INTEGER: fprintf(f, "%lld", (long long)json_integer_value(j)); break;
    case JSON_REAL: {
        double d = json_real_value(j);
        if (d == (long long)d)
            fprintf(f, "%.1f", d);
        else
            fprintf(f, "%.17g", d);
        break;
    }
    case JSON_TRUE: fputs("True", f); break;
    case JSON_FALSE: fputs("False", f); break;
    case JSON_NULL: fputs("None", f); break;
    case JSON_ARRAY: {
        size_t i;
        json_t *v;
        fputc('[', f);
        json_array_foreach (j, i, v) {
            if (i)
                fputs(", ", f);
            py_repr(f, v, false);
        }
        fputc(']', f);
        break;
    }
    case JSON_OBJECT: {
        const char *k;
        json_t *v;
        bool first = true;
        fputc('{', f);
        json_object_foreach (j, k, v) {
            fprintf(f, "%s'%s': ", first ? "" : ", ", k);
            py_repr(f, v, false);
            first = false;
        }
        fputc('}', f);
        break;
    }
    }
}

/* The host attribute named attr as JSON (new ref), or NULL if the host
 * state has no such attribute. Names follow Nova's HostState. */
static json_t *host_attr(const struct nb_host_state *hs, const char *attr)
{
    if (!strcmp(attr, "host"))
        return json_string(hs->host);
    if (!strcmp(attr, "nodename") || !strcmp(attr, "hypervisor_hostname"))
        return json_string(hs->nodename);
    if (!strcmp(attr, "uuid"))
        return json_string(hs->rp_uuid);
    if (!strcmp(attr, "hypervisor_type"))
        return json_string(hs->hypervisor_type);
    if (!strcmp(attr, "hypervisor_version"))
        return json_integer(hs->hypervisor_version);
    if (!strcmp(attr, "host_ip"))
        return json_string(hs->host_ip);
    if (!strcmp(attr, "cpu_info"))
        return hs->cpu_info ? json_incref(hs->cpu_info) : json_object();
    if (!strcmp(attr, "supported_instances"))
        return hs->supported_instances ? json_incref(hs->supported_instances) : json_array();
    if (!strcmp(attr, "vcpus_total"))
        return json_integer(hs->vcpus_total);
    if (!strcmp(attr, "vcpus_used"))
        return json_integer(hs->vcpu_used);
    if (!strcmp(attr, "free_ram_mb"))
        return json_integer(nb_host_free_ram_mb(hs));
    if (!strcmp(attr, "free_disk_mb"))
        return json_integer(nb_host_free_disk_gb(hs) * 1024);
    if (!strcmp(attr, "total_usable_ram_mb"))
        return json_integer(hs->memory_mb_total);
    if (!strcmp(attr, "total_usable_disk_gb"))
        return json_integer(hs->local_gb_total);
    if (!strcmp(attr, "num_instances"))
        return json_integer(hs->num_instances);
    if (!strcmp(attr, "cpu_allocation_ratio"))
        return json_real(hs->cpu_allocation_ratio);
    if (!strcmp(attr, "ram_allocation_ratio"))
        return json_real(hs->ram_allocation_ratio);
    if (!strcmp(attr, "disk_allocation_ratio"))
        return json_real(hs->disk_allocation_ratio);
    return NULL;
}

/* Walks scope[0..n) from the host state into nested JSON. New ref or NULL. */
static json_t *capability(const struct nb_host_state *hs, char **scope, size_t n)
{
    json_t *cap = host_attr(hs, scope[0]);
    for (size_t i = 1; cap && i < n; i++) {
        json_t *next = json_is_object(cap) ? json_object_get(cap, scope[i]) : NULL;
        json_incref(next);
        json_decref(cap);
        cap = next;
    }
    if (json_is_null(cap)) {
        json_decref(cap);
        cap = NULL;
    }
    return cap;
}

#define MAX_SCOPE 16

static bool caps_passes(const struct nb_host_state *hs, const struct nb_sched_spec *spec, char *why,
                        size_t n)
{
    json_t *specs = json_object_get(spec->flavor, "extra_specs");
    const char *key;
    json_t *val;
    json_object_foreach (specs, key, val) {
        if (!json_is_string(val))
            continue;
        char *copy = strdup(key), *save = NULL, *scope[MAX_SCOPE];
        size_t ns = 0;
        for (char *t = strtok_r(copy, ":", &save); t && ns < MAX_SCOPE;
             t = strtok_r(NULL, ":", &save))
            scope[ns++] = t;
        char **s = scope;
        bool check = true;
        if (ns == 1) {
            json_t *probe = host_attr(hs, scope[0]);
            check = probe != NULL; /* unscoped: only keys naming a host attribute */
            json_decref(probe);
        } else if (ns > 1 && !strcmp(scope[0], "capabilities")) {
            s++;
            ns--;
        } else {
            check = false;
        }
        bool ok = true;
        if (check && ns > 0) {
            json_t *cap = capability(hs, s, ns);
            if (!cap) {
                snprintf(why, n, "host has no value for extra spec %s='%s'", key,
                         json_string_value(val));
                ok = false;
            } else {
                char *text = NULL;
                size_t len = 0;
                FILE *f = open_memstream(&text, &len);
                py_repr(f, cap, true);
                fclose(f);
                if (!nb_sched_extra_spec_match(text, json_string_value(val))) {
                    snprintf(why, n, "extra spec %s='%s' does not match host value '%s'", key,
                             json_string_value(val), text);
                    ok = false;
                }
                free(text);
                json_decref(cap);
            }
        }
        free(copy);
        if (!ok)
            return false;
    }
    return true;
}

const struct nb_sched_filter nb_filter_compute_capabilities = {"ComputeCapabilitiesFilter",
                                                               caps_passes};
