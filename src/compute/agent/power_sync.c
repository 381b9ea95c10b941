/* power_sync.c - Nova's _sync_power_states: compare what the hypervisor
 * says about each guest with what the database says, and report the
 * differences to the conductor, which decides as Nova's
 * _sync_instance_power_state (a guest of an ACTIVE or PAUSED server found
 * shut down behind nubo's back makes the server SHUTOFF through a "stop"
 * action; a SUSPENDED server's guest is shut down by design).
 *
 * Instances with a task in progress are skipped, as in Nova; the conductor
 * re-checks each report against the database before acting. An ACTIVE
 * server whose guest is missing on its host is logged as a WARNING naming
 * both. */
#include "common/cleanup.h"
#include "common/json.h"
#include "common/log.h"
#include "compute/agent/internal.h"
#include "compute/rpc/conductor_api.h"

#include <string.h>

#define LOG_SYNC LOG_AGENT

static void report(struct agent *a, struct nb_ctx *ctx, const char *uuid, int power, bool found)
{
    nb_conductor_power_sync(ctx, uuid, a->host, power, found);
}

void nb_power_sync(struct agent *a, struct nb_ctx *ctx)
{
    _cleanup_json_ json_t *rows = nb_conductor_instances_on_host(ctx, a->host, 30000);
    if (!rows) {
        NB_WARN(LOG_SYNC, ctx, NULL, "power sync of %s skipped: %s", a->host, nb_ctx_message(ctx));
        nb_ctx_clear_error(ctx); /* handled: the next sync tries again */
        return;
    }
    _cleanup_json_ json_t *guests = a->drv->ops->list(a->drv, ctx, a->host);
    if (!guests) {
        NB_WARN(LOG_SYNC, ctx, NULL, "power sync of %s skipped: the driver cannot list guests: %s",
                a->host, nb_ctx_message(ctx));
        nb_ctx_clear_error(ctx); /* handled: the next sync tries again */
        return;
    }
    if (json_array_size(rows) != json_object_size(guests))
        NB_WARN(LOG_SYNC, ctx, NULL,
                "While synchronizing instance power states on %s, found %zu instances in the "
                "database and %zu instances on the hypervisor.",
                a->host, json_array_size(rows), json_object_size(guests));
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        const char *uuid = nb_json_str(r, "uuid");
        const char *vm = nb_json_str(r, "vm_state") ? nb_json_str(r, "vm_state") : "";
        if (!uuid)
            continue;
        if (nb_json_str(r, "task_state")) {
            NB_DEBUG(LOG_SYNC, ctx, uuid,
                     "During sync_power_state the instance has a pending "
                     "task (%s). Skip.",
                     nb_json_str(r, "task_state"));
            continue;
        }
        int db_power = (int)nb_json_int(r, "power_state", NB_POWER_NOSTATE);
        json_t *g = json_object_get(guests, uuid);
        if (!g) {
            if (!strcmp(vm, "active"))
                NB_WARN(LOG_SYNC, ctx, uuid,
                        "Instance %s is ACTIVE in the database but has no guest on host %s", uuid,
                        a->host);
            if (db_power != NB_POWER_NOSTATE && (!strcmp(vm, "active") || !strcmp(vm, "stopped") ||
                                                 !strcmp(vm, "paused") || !strcmp(vm, "suspended")))
                report(a, ctx, uuid, NB_POWER_NOSTATE, false);
            continue;
        }
        int power = (int)json_integer_value(g);
        if (power == db_power)
            continue;
        /* A suspended guest is shut down (its memory saved): nothing to
         * say. A paused one that is shut down or crashed stopped by itself. */
        bool down = power == NB_POWER_SHUTDOWN || power == NB_POWER_CRASHED;
        if (!strcmp(vm, "active") && down)
            NB_WARN(LOG_SYNC, ctx, uuid,
                    "Instance shutdown by itself. Calling the stop API. Current vm_state: active, "
                    "current task_state: None, original DB power_state: %d, current VM "
                    "power_state: %d",
                    db_power, power);
        else if (!strcmp(vm, "paused") && down)
            NB_WARN(LOG_SYNC, ctx, uuid,
                    "Paused instance shutdown by itself. Calling the stop API.");
        report(a, ctx, uuid, power, true);
    }
}
