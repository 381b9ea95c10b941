/* power_methods.c - the power actions' bus methods (see power_methods.h). */
#include "compute/rpc/power_methods.h"
#include "compute/rpc/compute_api.h"

#include <string.h>

const char *nb_rpc_power_method(const char *op)
{
    static const struct {
        const char *op, *method;
    } methods[] = {
        {"start", NB_COMPUTE_START_INSTANCE},     {"stop", NB_COMPUTE_STOP_INSTANCE},
        {"reboot", NB_COMPUTE_REBOOT_INSTANCE},   {"pause", NB_COMPUTE_PAUSE_INSTANCE},
        {"unpause", NB_COMPUTE_UNPAUSE_INSTANCE}, {"suspend", NB_COMPUTE_SUSPEND_INSTANCE},
        {"resume", NB_COMPUTE_RESUME_INSTANCE},
    };
    for (size_t i = 0; op && i < sizeof(methods) / sizeof(methods[0]); i++)
        if (!strcmp(methods[i].op, op))
            return methods[i].method;
    return NULL;
}
