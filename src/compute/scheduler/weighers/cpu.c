/* cpu.c - CPUWeigher: more free vCPUs (vcpus_total * cpu_allocation_ratio -
 * vcpus_used, i.e. placement's VCPU capacity minus usage) weighs more;
 * [filter_scheduler] cpu_weight_multiplier. */
#include "compute/scheduler/host_state.h"

static double cpu_raw(const struct nb_host_state *hs)
{
    return (double)nb_host_free_vcpus(hs);
}

const struct nb_sched_weigher nb_weigher_cpu = {"CPUWeigher", "cpu_weight_multiplier", 0.0,
                                                cpu_raw};
