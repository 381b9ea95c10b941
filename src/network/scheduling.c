/* scheduling.c - which agent serves what, as Neutron's DHCP and L3 agent
 * schedulers decide it: every network with a DHCP-enabled subnet is served
 * by one alive, admin-up DHCP agent (networkdhcpagentbindings) and has one
 * network:dhcp port bound to that agent's host, with the first free address
 * of each DHCP subnet and Neutron's device_id "dhcp<uuid5(DNS, host)>-
 * <network id>"; every router is hosted by one alive, admin-up L3 agent
 * (routerl3agentbindings), its interface and gateway ports bound to that
 * host. The current agent is kept while it is alive and admin-up, else the
 * least loaded one takes over (ties by host name). Runs after every change
 * (notify.c) and whenever an agent reports that it (re)started; a dead
 * agent is replaced the next time it runs. */
#include "common/cleanup.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "db/db.h"
#include "network/ml2_int.h"
#include "network/network_int.h"

#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define LOG "nubo.network.scheduler"
#define DB nb_net_env->db

static pthread_mutex_t sched_lock = PTHREAD_MUTEX_INITIALIZER;

const json_t *nb_sched_pick(const json_t *candidates, const char *current)
{
    const json_t *best = NULL;
    size_t i;
    json_t *c;
    json_array_foreach (candidates, i, c) {
        if (current && !strcmp(nb_json_str(c, "id"), current))
            return c;
        if (!best)
            best = c;
        else {
            long long lc = nb_json_int(c, "load", 0), lb = nb_json_int(best, "load", 0);
            if (lc < lb ||
                (lc == lb && strcmp(nb_json_str(c, "host"), nb_json_str(best, "host")) < 0))
                best = c;
        }
    }
    return best;
}

/* Python's uuid.uuid5(uuid.NAMESPACE_DNS, name) into out[37]. */
static void uuid5_dns(const char *name, char *out)
{
    static const unsigned char ns[16] = {0x6b, 0xa7, 0xb8, 0x10, 0x9d, 0xad, 0x11, 0xd1,
                                         0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8};
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    EVP_DigestInit_ex(c, EVP_sha1(), NULL);
    EVP_DigestUpdate(c, ns, sizeof(ns));
    EVP_DigestUpdate(c, name, strlen(name));
    EVP_DigestFinal_ex(c, md, &len);
    EVP_MD_CTX_free(c);
    md[6] = (md[6] & 0x0f) | 0x50;
    md[8] = (md[8] & 0x3f) | 0x80;
    char *p = out;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            *p++ = '-';
        p += sprintf(p, "%02x", md[i]);
    }
}

/* Alive, admin-up agents of type with their load (what they serve). */
static json_t *candidates(struct nb_ctx *ctx, const char *type)
{
    char since[32];
    const char *load_sql =
        !strcmp(type, NB_AGENT_DHCP)
            ? "SELECT a.id, a.host, (SELECT COUNT(*) FROM networkdhcpagentbindings b WHERE "
              "b.dhcp_agent_id = a.id) AS \"load\" FROM agents a WHERE a.agent_type = ? AND "
              "a.admin_state_up = 1 AND a.heartbeat_timestamp >= ? ORDER BY a.host"
            : "SELECT a.id, a.host, (SELECT COUNT(*) FROM routerl3agentbindings b WHERE "
              "b.l3_agent_id = a.id) AS \"load\" FROM agents a WHERE a.agent_type = ? AND "
              "a.admin_state_up = 1 AND a.heartbeat_timestamp >= ? ORDER BY a.host";
    return nb_db_rows(DB, ctx, load_sql, "ss", type, nb_agent_alive_since(since));
}

/* Bumps the chosen candidate's load (so one run spreads its choices). */
static void add_load(const json_t *c, long long n)
{
    json_object_set_new((json_t *)c, "load", json_integer(nb_json_int(c, "load", 0) + n));
}

/* --- DHCP ---------------------------------------------------------------- */

/* The network's DHCP port has an address on each DHCP subnet? */
static bool dhcp_port_complete(struct nb_ctx *ctx, const char *port_id, const char *net)
{
    return nb_db_int(DB, ctx, 1,
                     "SELECT COUNT(*) FROM subnets s WHERE s.network_id = ? AND s.enable_dhcp = "
                     "1 AND NOT EXISTS (SELECT 1 FROM ipallocations a WHERE a.subnet_id = s.id "
                     "AND a.port_id = ?)",
                     "ss", net, port_id) == 0;
}

static int make_dhcp_port(struct nb_ctx *ctx, const json_t *net, const char *host)
{
    const char *id = nb_json_str(net, "id");
    _cleanup_json_ json_t *subs =
        nb_db_rows(DB, ctx,
                   "SELECT id FROM subnets WHERE network_id = ? AND enable_dhcp = 1 ORDER BY "
                   "created_at, rowid",
                   "s", id);
    json_t *ips = json_array();
    size_t i;
    json_t *s;
    json_array_foreach (subs, i, s)
        json_array_append_new(ips, json_pack("{s:s}", "subnet_id", nb_json_str(s, "id")));
    char u[40];
    uuid5_dns(host, u);
    _cleanup_free_ char *device = nb_strdup_printf("dhcp%s-%s", u, id);
    json_t *body =
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:o, s:s}", "network_id", id, "device_owner",
                  "network:dhcp", "device_id", device, "binding:host_id", host, "tenant_id",
                  nb_json_str(net, "project_id"), "fixed_ips", ips, "name", "");
    json_t *view = nb_net_port_create(ctx, body);
    json_decref(body);
    if (!view) {
        NB_WARN(LOG, ctx, NULL, "cannot create the DHCP port of network %s: %s", id,
                nb_ctx_message(ctx));
        nb_ctx_clear_error(ctx);
        return -1;
    }
    NB_INFO(LOG, ctx, NULL, "DHCP port %s of network %s on host %s", nb_json_str(view, "id"), id,
            host);
    json_decref(view);
    return 0;
}

/* Makes the DHCP port of net match host (NULL: no DHCP). Changes made. */
static int sync_dhcp_port(struct nb_ctx *ctx, const json_t *net, const char *host)
{
    const char *id = nb_json_str(net, "id");
    _cleanup_json_ json_t *ports =
        nb_db_rows(DB, ctx,
                   "SELECT id, binding_host_id FROM ports WHERE network_id = ? AND device_owner = "
                   "'network:dhcp' ORDER BY created_at, rowid",
                   "s", id);
    int changes = 0;
    bool kept = false;
    size_t i;
    json_t *p;
    json_array_foreach (ports, i, p) {
        const char *pid = nb_json_str(p, "id");
        if (host && !kept && !strcmp(nb_json_str(p, "binding_host_id"), host) &&
            dhcp_port_complete(ctx, pid, id)) {
            kept = true;
            continue;
        }
        /* on another host, a second one, or missing a subnet: made again */
        nb_net_port_delete(ctx, pid);
        nb_ctx_clear_error(ctx);
        changes++;
    }
    if (host && !kept && make_dhcp_port(ctx, net, host) == 0)
        changes++;
    return changes;
}

static int schedule_dhcp(struct nb_ctx *ctx)
{
    _cleanup_json_ json_t *agents = candidates(ctx, NB_AGENT_DHCP);
    _cleanup_json_ json_t *nets = nb_db_rows(
        DB, ctx,
        "SELECT n.id, n.project_id, (SELECT COUNT(*) FROM subnets s WHERE s.network_id = n.id "
        "AND s.enable_dhcp = 1) AS dhcp, (SELECT dhcp_agent_id FROM networkdhcpagentbindings b "
        "WHERE b.network_id = n.id) AS current FROM networks n ORDER BY n.created_at, n.rowid",
        "");
    if (!agents || !nets || !json_array_size(agents)) /* none alive: keep what there is */
        return 0;
    int changes = 0;
    size_t i;
    json_t *n;
    json_array_foreach (nets, i, n) {
        const char *id = nb_json_str(n, "id"), *cur = nb_json_str(n, "current");
        bool wants = nb_json_int(n, "dhcp", 0) > 0;
        const json_t *pick = wants ? nb_sched_pick(agents, cur) : NULL;
        const char *chosen = pick ? nb_json_str(pick, "id") : NULL;
        if (chosen ? !cur || strcmp(cur, chosen) : cur != NULL) {
            nb_db_exec(DB, ctx, "DELETE FROM networkdhcpagentbindings WHERE network_id = ?", "s",
                       id);
            if (chosen) {
                nb_db_exec(DB, ctx,
                           "INSERT INTO networkdhcpagentbindings (network_id, dhcp_agent_id) "
                           "VALUES (?, ?)",
                           "ss", id, chosen);
                add_load(pick, 1);
                NB_INFO(LOG, ctx, NULL, "network %s served by the DHCP agent of host %s", id,
                        nb_json_str(pick, "host"));
            }
            changes++;
        }
        changes += sync_dhcp_port(ctx, n, pick ? nb_json_str(pick, "host") : NULL);
        nb_ctx_clear_error(ctx);
    }
    return changes;
}

/* --- L3 ------------------------------------------------------------------ */

static int schedule_l3(struct nb_ctx *ctx)
{
    _cleanup_json_ json_t *agents = candidates(ctx, NB_AGENT_L3);
    _cleanup_json_ json_t *routers = nb_db_rows(
        DB, ctx,
        "SELECT r.id, (SELECT l3_agent_id FROM routerl3agentbindings b WHERE b.router_id = r.id) "
        "AS current FROM routers r ORDER BY r.created_at, r.rowid",
        "");
    if (!agents || !routers || !json_array_size(agents))
        return 0;
    int changes = 0;
    size_t i;
    json_t *r;
    json_array_foreach (routers, i, r) {
        const char *id = nb_json_str(r, "id"), *cur = nb_json_str(r, "current");
        const json_t *pick = nb_sched_pick(agents, cur);
        const char *host = nb_json_str(pick, "host");
        if (!cur || strcmp(cur, nb_json_str(pick, "id"))) {
            nb_db_exec(DB, ctx, "DELETE FROM routerl3agentbindings WHERE router_id = ?", "s", id);
            nb_db_exec(DB, ctx,
                       "INSERT INTO routerl3agentbindings (router_id, l3_agent_id) VALUES (?, ?)",
                       "ss", id, nb_json_str(pick, "id"));
            add_load(pick, 1);
            NB_INFO(LOG, ctx, NULL, "router %s hosted by the L3 agent of host %s", id, host);
            changes++;
        }
        const char *vif_type = nb_bind_vif_type(ctx, host);
        char now[32];
        int n = nb_db_exec(DB, ctx,
                           "UPDATE ports SET binding_host_id = ?, binding_vif_type = ?, status = "
                           "CASE WHEN binding_host_id = ? THEN status ELSE ? END, updated_at = ? "
                           "WHERE device_id = ? AND device_owner IN ('network:router_interface', "
                           "'network:router_gateway') AND (binding_host_id != ? OR "
                           "binding_vif_type != ?)",
                           "ssssssss", host, vif_type, host, nb_bind_status(vif_type),
                           nb_net_now(now), id, host, vif_type);
        changes += n > 0 ? n : 0;
        nb_ctx_clear_error(ctx);
    }
    return changes;
}

int nb_sched_run(struct nb_ctx *ctx)
{
    pthread_mutex_lock(&sched_lock);
    int changes = schedule_dhcp(ctx) + schedule_l3(ctx);
    pthread_mutex_unlock(&sched_lock);
    return changes;
}
