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

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOG "nubo.network.notify"

/* Set while this thread runs scheduling: its own port changes do not
 * schedule again. */
static __thread bool in_notify;

/* Hosts whose last cast found no listener (an agent that stopped less than
 * agent_down_time ago): skipped for a while, so the bus logs "no listener"
 * once per host and period, not once per change. */
#define QUIET_S 30.0
static struct {
    char host[256];
    double until;
} quiet[32];
static pthread_mutex_t quiet_lock = PTHREAD_MUTEX_INITIALIZER;

static bool is_quiet(const char *host, double now)
{
    bool q = false;
    pthread_mutex_lock(&quiet_lock);
    for (size_t i = 0; i < sizeof(quiet) / sizeof(quiet[0]); i++)
        q |= quiet[i].until > now && !strcmp(quiet[i].host, host);
    pthread_mutex_unlock(&quiet_lock);
    return q;
}

static void set_quiet(const char *host, double now)
{
    pthread_mutex_lock(&quiet_lock);
    size_t slot = 0;
    for (size_t i = 0; i < sizeof(quiet) / sizeof(quiet[0]); i++)
        if (!strcmp(quiet[i].host, host) || quiet[i].until < quiet[slot].until)
            slot = i;
    nb_strlcpy(quiet[slot].host, host, sizeof(quiet[slot].host));
    quiet[slot].until = now + QUIET_S;
    pthread_mutex_unlock(&quiet_lock);
}

void nb_net_notify_reset(const char *host)
{
    pthread_mutex_lock(&quiet_lock);
    for (size_t i = 0; i < sizeof(quiet) / sizeof(quiet[0]); i++)
        if (!strcmp(quiet[i].host, host))
            quiet[i].until = 0;
    pthread_mutex_unlock(&quiet_lock);
}

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
    double now = nb_time_mono();
    json_array_foreach (hosts, i, h) {
        const char *host = json_string_value(h);
        if (is_quiet(host, now))
            continue;
        char topic[320];
        snprintf(topic, sizeof(topic), "q-agent-notifier.%s", host);
        if (nb_bus_cast(&sys, topic, "host_state_changed",
                        json_pack("{s:s}", "reason", reason ? reason : "")) < 0) {
            NB_WARN(LOG, &sys, NULL, "the agent of host %s does not listen: not told for %.0f s",
                    host, QUIET_S);
            set_quiet(host, now);
        }
    }
    in_notify = false;
}

/* The name the routers' and floating IPs' files call it by. */
void nb_net_notify_agents(struct nb_ctx *ctx, const char *reason)
{
    nb_net_notify(ctx, reason);
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
