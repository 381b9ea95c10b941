/* ml2_int.h - the control side of the data plane, shared by the network
 * module's files (network_int.h has the API helpers): ML2's type drivers
 * and network segments (provider.c), the agents table (agents.c), the
 * agents' RPC (agent_rpc.c), the host state they are given (host_state.c),
 * DHCP/L3 scheduling (scheduling.c), port binding (binding.c) and the
 * notifications to agents (notify.c). */
#ifndef NB_NETWORK_ML2_INT_H
#define NB_NETWORK_ML2_INT_H

#include "common/ctx.h"

#include <jansson.h>
#include <stdbool.h>

/* --- type drivers (provider.c) ----------------------------------------- */

/* Neutron's overhead of a VXLAN segment over IPv4 (IP 20 + VXLAN 30). */
#define NB_VXLAN_OVERHEAD 50

/* A range list as [ml2_type_vxlan] vni_ranges / [ml2_type_vlan]
 * network_vlan_ranges' "<min>:<max>" entries. */
struct nb_id_range {
    long long min, max;
};

/* Parses "1:1000,2000:2100" into r (at most max), each min <= max and
 * within [lo, hi]. The count, or -1 on bad text. Pure. */
int nb_ml2_parse_ranges(const char *text, long long lo, long long hi, struct nb_id_range *r,
                        int max);
/* The lowest id of ranges (in range order) that is not in used (a sorted
 * ascending array of n ids). The id, or -1 when every one is taken. Pure. */
long long nb_ml2_first_free(const struct nb_id_range *r, int nr, const long long *used, int n);
/* The largest MTU a segment of type allows on an underlay of physnet_mtu
 * (vxlan: minus NB_VXLAN_OVERHEAD; flat/vlan/local: physnet_mtu). 0 for an
 * unknown type. Pure. */
int nb_ml2_type_mtu(const char *type, int physnet_mtu);
/* [DEFAULT] global_physnet_mtu (1500; [network] global_physnet_mtu read
 * too, its older place). */
int nb_ml2_physnet_mtu(void);
/* True when name is in the comma list ("*" matches any). Pure. */
bool nb_ml2_in_list(const char *list, const char *name);

/* The provider attributes of a network body (provider:network_type,
 * provider:physical_network, provider:segmentation_id), checked and
 * reserved as ML2 does (admin only; else the tenant type's next free
 * segment), inside the caller's transaction, for network_id. *max_mtu gets
 * the largest MTU the segment allows. 0, or -1 after nb_error (403
 * PolicyNotAuthorized, 400 InvalidInput, 409 TunnelIdInUse / VlanIdInUse /
 * FlatNetworkInUse, 503 NoNetworkAvailable). */
int nb_ml2_segment_reserve(struct nb_ctx *ctx, const char *network_id, const json_t *body,
                           int *max_mtu);
/* Removes the provider attributes from body (after the reserve), so the
 * generic attribute walk does not see them. */
void nb_ml2_strip(json_t *body);
/* The network's first segment row (network_type, physical_network,
 * segmentation_id), or NULL when it has none (made before 073). */
json_t *nb_ml2_segment(struct nb_ctx *ctx, const char *network_id);
/* Adds provider:* to a network view for admins (nothing for a network
 * without a segment, as before 073). */
void nb_ml2_view(struct nb_ctx *ctx, json_t *view, const char *network_id);
/* Announces the provider extension. */
void nb_ml2_extensions(void);

/* --- agents (agents.c) ------------------------------------------------- */

#define NB_AGENT_LINUXBRIDGE "Linux bridge agent"
#define NB_AGENT_DHCP "DHCP agent"
#define NB_AGENT_L3 "L3 agent"
#define NB_AGENT_METADATA "Metadata agent"

/* Neutron's agent timestamps: "YYYY-MM-DD HH:MM:SS" UTC of t (now when
 * t < 0) into buf[32]. */
char *nb_agent_time(double t, char *buf);
/* The oldest heartbeat that still counts as alive ([DEFAULT]
 * agent_down_time, 75 s) as an agent timestamp into buf[32]. */
char *nb_agent_alive_since(char *buf);
/* Upserts an agent from report_state's "agent" object; *revived is true
 * when the agent is new, was dead, or restarted (start_flag). The row (new
 * ref), or NULL after nb_error. */
json_t *nb_agent_report(struct nb_ctx *ctx, const json_t *state, bool *revived);
/* The alive agent of type on host (admin-up or not), or NULL. New ref. */
json_t *nb_agent_alive(struct nb_ctx *ctx, const char *type, const char *host);
/* Whether host has an agent of type at all (alive or dead). */
bool nb_agent_known(struct nb_ctx *ctx, const char *type, const char *host);
/* The distinct hosts with an alive agent, as a new array of strings. */
json_t *nb_agent_live_hosts(struct nb_ctx *ctx);

/* The views of the agents rows matching where_sql ("WHERE ... ?" with one
 * string argument arg, or "" and NULL). New ref or NULL. */
json_t *nb_agent_views(struct nb_ctx *ctx, const char *where_sql, const char *arg);
/* A network's view as GET /networks/{id} shows it to ctx (networks.c), or
 * NULL when it is gone. */
json_t *nb_net_network_view_of(struct nb_ctx *ctx, const char *id);

/* --- host state (host_state.c) ----------------------------------------- */

/* get_host_state's answer for host (netagent.h gives the shape). New ref,
 * or NULL after nb_error. */
json_t *nb_host_state(struct nb_ctx *ctx, const char *host);
/* GET /networking/v2.0/hosts/{host}/state (admin): the same JSON. */
struct nb_req;
struct nb_resp;
int nb_host_state_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp);

/* --- scheduling (scheduling.c) ----------------------------------------- */

/* Gives every network with a DHCP subnet an alive DHCP agent (and its
 * network:dhcp port on that host), and every router an alive L3 agent.
 * Idempotent; logs and goes on on errors. Returns the number of changes. */
int nb_sched_run(struct nb_ctx *ctx);
/* Pure choice: among candidates (rows {"id", "host", "load"} of alive,
 * admin-up agents), the current agent id if it is among them, else the
 * least loaded, ties by host name. Borrowed pointer into candidates, or
 * NULL when there is none. */
const json_t *nb_sched_pick(const json_t *candidates, const char *current);

/* --- port binding (binding.c) ------------------------------------------ */

/* The binding of a port on host as ML2's linuxbridge mechanism decides it:
 * "bridge" when host has an alive Linux bridge agent, "binding_failed"
 * when it has a dead one, else "ovs" (no data plane: the fake driver's
 * hosts, as before). "unbound" for host "". Static string. */
const char *nb_bind_vif_type(struct nb_ctx *ctx, const char *host);
/* The port status a new binding starts with: DOWN for "bridge" (until the
 * agent reports it up), ACTIVE for "ovs", DOWN otherwise. */
const char *nb_bind_status(const char *vif_type);

/* --- notifications (notify.c) ------------------------------------------ */

/* Casts "host_state_changed" {"reason"} to q-agent-notifier.<host> of
 * every host with a live agent. Call after the change is committed. */
void nb_net_notify(struct nb_ctx *ctx, const char *reason);
/* A host's agent (re)started: it is told again at once even if a cast to
 * it found no listener lately. */
void nb_net_notify_reset(const char *host);
/* The same as nb_net_notify (the name floatingips.h declares for the L3
 * files). */
void nb_net_notify_agents(struct nb_ctx *ctx, const char *reason);

#endif
