/* notify.c - tells the hosts' agents that their desired state may have
 * changed (Neutron's agent notifier API): after every committed change,
 * "host_state_changed" {"reason"} is cast to "q-agent-notifier.<host>" of
 * each host with a live agent, which then fetches its whole state again
 * (netagent.h). Before the cast, scheduling runs (scheduling.c), so a new
 * network's DHCP port or a new router's host is in the state the agents
 * fetch. Hosts without a live agent get nothing: no cast to a topic nobody
 * listens on, so no "no listener" line in the log.
 *
 * Every change the Networking API makes goes through a route registered
 * with nb_net_route (network_int.h maps the network files' nb_http_route
 * to it): a successful POST/PUT/DELETE notifies once its handler returns,
 * that is after its commit. Changes made outside a request (the compute
 * side's port allocation, bindings after a move) call nb_net_notify
 * themselves. */
#include "bus/bus.h"
#include "common/cleanup.h"
#include "common/http.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "network/ml2_int.h"
#include "network/network_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOG "nubo.network.notify"

/* Set while this thread runs scheduling: its own port changes do not
 * schedule again. */
static __thread bool in_notify;

void nb_net_notify(struct nb_ctx *ctx, const char *reason)
{
    if (in_notify || !nb_net_env || !nb_net_env->db)
        return;
    in_notify = true;
    struct nb_ctx sys;
    nb_ctx_init_system(&sys, ctx ? ctx->request_id : NULL);
    nb_sched_run(&sys);
    _cleanup_json_ json_t *hosts = nb_agent_live_hosts(&sys);
    size_t i;
    json_t *h;
    json_array_foreach (hosts, i, h) {
        char topic[320];
        snprintf(topic, sizeof(topic), "q-agent-notifier.%s", json_string_value(h));
        if (nb_bus_cast(&sys, topic, "host_state_changed",
                        json_pack("{s:s}", "reason", reason ? reason : "")) < 0)
            NB_DEBUG(LOG, &sys, NULL, "no agent listening on %s", topic);
    }
    in_notify = false;
}

/* --- the routes' wrapper ------------------------------------------------------ */

struct route {
    nb_handler_fn fn;
    char reason[160];
};

static int notifying_handler(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const struct route *r = req->route_opaque;
    int rc = r->fn(ctx, req, resp);
    if (rc == 0 && !nb_ctx_failed(ctx) && (resp->status == 0 || resp->status < 400))
        nb_net_notify(ctx, r->reason);
    return rc;
}

#undef nb_http_route
void nb_net_route(const char *method, const char *pattern, nb_handler_fn fn, int flags)
{
    if (!strcmp(method, "GET") || !strcmp(method, "HEAD")) {
        nb_http_route(method, pattern, fn, flags);
        return;
    }
    struct route *r = calloc(1, sizeof(*r)); /* lives as long as the route table */
    r->fn = fn;
    snprintf(r->reason, sizeof(r->reason), "%s %s", method,
             nb_startswith(pattern, "/networking/v2.0/") ? pattern + 17 : pattern);
    nb_http_route_opaque(method, pattern, notifying_handler, flags, r);
}
