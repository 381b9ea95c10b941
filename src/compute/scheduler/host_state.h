/* host_state.h - what the scheduler knows of one compute host, what one
 * request asks for, and the filter and weigher vtables that work on them.
 *
 * Filters and weighers are pure functions of (host state, request spec):
 * no database, no configuration reads inside them (what they need from
 * configuration is put into the spec or passed in), so that they are unit
 * tested over hand-built host states (tests/unit/test_scheduler.c).
 *
 * JSON members are borrowed: the scheduler's host cache or the request
 * owns them, and they live as long as the host state is in use. */
#ifndef NB_SCHEDULER_HOST_STATE_H
#define NB_SCHEDULER_HOST_STATE_H

#include "common/util.h"
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct nb_host_state {
    char host[256];
    char nodename[256];
    char rp_uuid[NB_UUID_LEN];   /* = compute node uuid */
    char availability_zone[256]; /* aggregate metadata, else the default zone */
    char hypervisor_type[32];
    long hypervisor_version; /* e.g. 7002022 */
    char host_ip[64];
    json_t *cpu_info;            /* {"arch","model","vendor","features":[…],…} */
    json_t *supported_instances; /* [["x86_64","qemu","hvm"], …] */
    json_t *aggregates;          /* [{"name","uuid","metadata":{k: v}}] */
    /* The nova-compute service of the host. */
    bool has_service;
    bool service_disabled;
    bool service_up;  /* heard from within service_down_time, not forced down */
    bool forced_down; /* an operator said so (os-services force-down) */
    char disabled_reason[256];
    char last_seen_up[40]; /* "" if never */
    /* Capacity as placement sees it: capacity = (total - reserved) * ratio. */
    long long vcpus_total; /* physical, from the compute node */
    long long memory_mb_total;
    long long local_gb_total;
    double cpu_allocation_ratio;
    double ram_allocation_ratio;
    double disk_allocation_ratio;
    long long vcpu_capacity, vcpu_used;
    long long ram_capacity, ram_used;   /* MEMORY_MB */
    long long disk_capacity, disk_used; /* DISK_GB */
    long num_instances;
    /* Set by the weighers. */
    double weight;
};

/* One scheduling request. */
struct nb_sched_spec {
    const char *instance_uuid;
    json_t *flavor;                   /* {"vcpus","memory_mb","root_gb",…,"extra_specs":{}} */
    json_t *image_props;              /* image properties (object, maybe empty) */
    const char *default_architecture; /* [filter_scheduler] image_properties_default_architecture */
    const char *availability_zone;    /* NULL/"" = any zone */
    const char *default_zone;         /* [DEFAULT] default_availability_zone */
    const char *group_uuid;           /* NULL = no server group */
    const char *group_policy;         /* "affinity", "anti-affinity", "soft-…" */
    long max_server_per_host;         /* anti-affinity rule, default 1 */
    json_t *group_hosts;              /* {host: number of other members there} */
    json_t *retry_hosts;              /* [host, …] already tried for this build */
    json_t *unreachable_hosts;        /* [host, …] whose agent did not take this build
                                       * (not an attempt; skipped like retry_hosts) */
    /* AggregateImagePropertiesIsolation options */
    const char *isolation_namespace; /* NULL/"" = all keys */
    const char *isolation_separator; /* default "." */
};

/* A filter: true if the host passes; otherwise writes why (one short
 * phrase, without the host name) into why[n]. */
struct nb_sched_filter {
    const char *name;
    bool (*host_passes)(const struct nb_host_state *hs, const struct nb_sched_spec *spec, char *why,
                        size_t n);
};

extern const struct nb_sched_filter nb_filter_retry;
extern const struct nb_sched_filter nb_filter_az_prefilter;
extern const struct nb_sched_filter nb_filter_compute;
extern const struct nb_sched_filter nb_filter_compute_capabilities;
extern const struct nb_sched_filter nb_filter_image_properties;
extern const struct nb_sched_filter nb_filter_availability_zone;
extern const struct nb_sched_filter nb_filter_aggregate_image_properties_isolation;
extern const struct nb_sched_filter nb_filter_server_group_anti_affinity;
extern const struct nb_sched_filter nb_filter_server_group_affinity;

/* The filter named as in [filter_scheduler] enabled_filters, or NULL. */
const struct nb_sched_filter *nb_sched_filter_find(const char *name);

/* Runs the filters in order over hosts[0..n), compacting hosts to the
 * survivors (order kept) and returning their number. Appends to lines (a
 * JSON array) one string per filter run: "<Filter>: <in> -> <out>" followed
 * by "; <host>: <why>" for each host it removed. Stops after a filter that
 * leaves no host, as Nova does. */
size_t nb_sched_run_filters(struct nb_host_state **hosts, size_t n,
                            const struct nb_sched_filter *const *filters, size_t nfilters,
                            const struct nb_sched_spec *spec, json_t *lines);
/* The same, for a dry run: not counted in the rejection metrics. */
size_t nb_sched_judge_filters(struct nb_host_state **hosts, size_t n,
                              const struct nb_sched_filter *const *filters, size_t nfilters,
                              const struct nb_sched_spec *spec, json_t *lines);

/* A weigher: a raw value per host (higher wins before the multiplier);
 * values below minval are clamped to it, then all are normalised to [0, 1]
 * over the hosts (min..max; minval replaces the minimum), as Nova does. */
struct nb_sched_weigher {
    const char *name;           /* "RAMWeigher" */
    const char *multiplier_key; /* option / aggregate metadata key */
    double minval;
    double (*raw)(const struct nb_host_state *hs);
};

extern const struct nb_sched_weigher nb_weigher_ram;
extern const struct nb_sched_weigher nb_weigher_cpu;
extern const struct nb_sched_weigher nb_weigher_disk;

const struct nb_sched_weigher *nb_sched_weigher_find(const char *name);

/* The multiplier of weigher w for host hs: the smallest numeric value of
 * w->multiplier_key in the host's aggregates' metadata, else def. */
double nb_sched_weight_multiplier(const struct nb_host_state *hs, const struct nb_sched_weigher *w,
                                  double def);

/* Sets hosts[i]->weight = sum over weighers of multiplier * normalised raw
 * value (multipliers[k] is the configured multiplier of weighers[k]) and
 * sorts hosts by weight, highest first (ties keep their order). With one
 * host or none, weights are 0. */
void nb_sched_weigh(struct nb_host_state **hosts, size_t n,
                    const struct nb_sched_weigher *const *weighers, const double *multipliers,
                    size_t nweighers);

/* Nova's extra_specs_ops.match: does the capability value satisfy the
 * requirement ("s== x", ">= 4", "<in> avx", "<or> a <or> b", plain value)? */
bool nb_sched_extra_spec_match(const char *value, const char *req);

/* Free resources as the weighers see them. */
static inline long long nb_host_free_ram_mb(const struct nb_host_state *hs)
{
    return hs->ram_capacity - hs->ram_used;
}
static inline long long nb_host_free_disk_gb(const struct nb_host_state *hs)
{
    return hs->disk_capacity - hs->disk_used;
}
static inline long long nb_host_free_vcpus(const struct nb_host_state *hs)
{
    return hs->vcpu_capacity - hs->vcpu_used;
}

#endif
