/* dispatch.c - a topic's handler as a method table (bus.h): one lookup of
 * the method by name, instead of a chain of comparisons in every role. The
 * tables are small (a few dozen methods), so the lookup is a scan. */
#include "bus/bus.h"
#include "common/log.h"

#include <string.h>

json_t *nb_bus_dispatch(const struct nb_bus_service *svc, void *opaque, struct nb_ctx *ctx,
                        const char *method, json_t *args)
{
    for (const struct nb_bus_method *m = svc->methods; m->name; m++) {
        if (strcmp(m->name, method))
            continue;
        json_t *reply = m->fn(opaque, ctx, method, args);
        if (m->kind == NB_BUS_CALL)
            return reply;
        json_decref(reply);
        return NULL;
    }
    NB_ERROR(svc->logger, ctx, NULL, "unknown %s method %s", svc->role, method);
    return json_pack("{s:s}", "error", "unknown method");
}
