/* ram.c - RAMWeigher: more free RAM (MEMORY_MB capacity minus usage, as in
 * placement) weighs more; [filter_scheduler] ram_weight_multiplier
 * (default 1.0 spreads, negative stacks). */
#include "compute/scheduler/host_state.h"

static double ram_raw(const struct nb_host_state *hs)
{
    return (double)nb_host_free_ram_mb(hs);
}

const struct nb_sched_weigher nb_weigher_ram = {"RAMWeigher", "ram_weight_multiplier", 0.0,
                                                ram_raw};
