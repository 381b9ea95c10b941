/* disk.c - DiskWeigher: more free disk (free_disk_mb) weighs more;
 * [filter_scheduler] disk_weight_multiplier. */
#include "compute/scheduler/host_state.h"

static double disk_raw(const struct nb_host_state *hs)
{
    return (double)nb_host_free_disk_gb(hs) * 1024.0;
}

const struct nb_sched_weigher nb_weigher_disk = {"DiskWeigher", "disk_weight_multiplier", 0.0,
                                                 disk_raw};
