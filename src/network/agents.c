/* agents.c - the agents that report to the network service (Neutron's
 * agents table and API): one row per agent type and host, upserted by each
 * report_state (agent_rpc.c); alive while its heartbeat is younger than
 * [DEFAULT] agent_down_time (75 s, Neutron's). The API (admin only, as
 * Neutron's policy): GET /v2.0/agents (`openstack network agent list`,
 * --host / --agent-type are query filters), GET/PUT (admin_state_up,
 * description)/DELETE /v2.0/agents/{id}, and the scheduler extensions'
 * reads: /networks/{id}/dhcp-agents, /agents/{id}/dhcp-networks,
 * /routers/{id}/l3-agents, /agents/{id}/l3-routers. A PUT or DELETE
 * reschedules (notify.c runs scheduling after every change). With the fake driver no
 * agent runs and the list is empty. */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/http.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "db/db.h"
#include "network/ml2_int.h"
#include "network/network_int.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#define LOG "nubo.network.agents"

char *nb_agent_time(double t, char *buf)
{
    time_t s = (time_t)(t < 0 ? nb_time_now() : t);
    struct tm tm;
    gmtime_r(&s, &tm);
    strftime(buf, 32, "%Y-%m-%d %H:%M:%S", &tm);
    return buf;
}

char *nb_agent_alive_since(char *buf)
{
    return nb_agent_time(nb_time_now() - (double)nb_conf_int("DEFAULT", "agent_down_time", 75),
                         buf);
}

json_t *nb_agent_report(struct nb_ctx *ctx, const json_t *state, bool *revived)
{
    static const char *const keys[] = {"agent_type", "binary", "host", "topic"};
    for (int i = 0; i < 4; i++)
        if (!nb_json_str(state, keys[i]) || !*nb_json_str(state, keys[i])) {
            nb_error(ctx, 400, "InvalidInput", "Invalid input for operation: %s required.",
                     keys[i]);
            return NULL;
        }
    const char *type = nb_json_str(state, "agent_type"), *host = nb_json_str(state, "host");
    json_t *conf = json_object_get(state, "configurations");
    _cleanup_json_ json_t *no_conf = json_object();
    char now[32], since[32], id[NB_UUID_LEN];
    nb_agent_time(-1, now);
    nb_agent_alive_since(since);
    const char *az = nb_json_str(state, "availability_zone");
    if (nb_db_begin(nb_net_env->db, ctx) < 0)
        return NULL;
    _cleanup_json_ json_t *old = nb_db_row(nb_net_env->db, ctx,
                                           "SELECT id, heartbeat_timestamp FROM agents WHERE "
                                           "agent_type = ? AND host = ?",
                                           "ss", type, host);
    bool start = json_is_true(json_object_get(state, "start_flag"));
    int rc;
    nb_uuid(id);
    if (!old)
        rc = nb_db_exec(nb_net_env->db, ctx,
                        "INSERT INTO agents (id, agent_type, \"binary\", topic, host, created_at, "
                        "started_at, heartbeat_timestamp, configurations, availability_zone, "
                        "resource_versions) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        "ssssssssjsj", id, type, nb_json_str(state, "binary"),
                        nb_json_str(state, "topic"), host, now, now, now,
                        json_is_object(conf) ? conf : no_conf, az,
                        json_object_get(state, "resource_versions"));
    else
        rc = nb_db_exec(nb_net_env->db, ctx,
                        "UPDATE agents SET \"binary\" = ?, topic = ?, heartbeat_timestamp = ?, "
                        "started_at = CASE WHEN ? THEN ? ELSE started_at END, configurations = ?, "
                        "availability_zone = ? WHERE id = ?",
                        "sssbsjss", nb_json_str(state, "binary"), nb_json_str(state, "topic"), now,
                        start, now, json_is_object(conf) ? conf : no_conf, az,
                        nb_json_str(old, "id"));
    if (rc < 0 || nb_db_commit(nb_net_env->db, ctx) < 0) {
        nb_db_rollback(nb_net_env->db);
        return NULL;
    }
    *revived = !old || start || strcmp(nb_json_str(old, "heartbeat_timestamp"), since) < 0;
    if (*revived)
        NB_INFO(LOG, ctx, NULL, "%s on host %s is %s", type, host,
                !old    ? "new"
                : start ? "(re)started"
                        : "alive again");
    return nb_db_row(nb_net_env->db, ctx, "SELECT * FROM agents WHERE agent_type = ? AND host = ?",
                     "ss", type, host);
}

json_t *nb_agent_alive(struct nb_ctx *ctx, const char *type, const char *host)
{
    char since[32];
    return nb_db_row(nb_net_env->db, ctx,
                     "SELECT * FROM agents WHERE agent_type = ? AND host = ? AND "
                     "heartbeat_timestamp >= ?",
                     "sss", type, host, nb_agent_alive_since(since));
}

bool nb_agent_known(struct nb_ctx *ctx, const char *type, const char *host)
{
    return nb_db_int(nb_net_env->db, ctx, 0,
                     "SELECT COUNT(*) FROM agents WHERE agent_type = ? AND host = ?", "ss", type,
                     host) > 0;
}

json_t *nb_agent_live_hosts(struct nb_ctx *ctx)
{
    char since[32];
    _cleanup_json_ json_t *rows =
        nb_db_rows(nb_net_env->db, ctx,
                   "SELECT DISTINCT host FROM agents WHERE heartbeat_timestamp >= ? ORDER BY host",
                   "s", nb_agent_alive_since(since));
    return rows ? nb_json_strings(rows, "host") : json_array();
}

/* --- the API ----------------------------------------------------------------- */

static json_t *parsed(const json_t *row, const char *key, json_t *def)
{
    json_t *v = nb_json_parse(nb_json_str(row, key));
    if (v) {
        json_decref(def);
        return v;
    }
    return def;
}

/* Neutron's _make_agent_dict. */
static json_t *agent_view(const json_t *row)
{
    char since[32];
    const char *hb = nb_json_str(row, "heartbeat_timestamp");
    const char *desc = nb_json_str(row, "description"), *az = nb_json_str(row, "availability_zone");
    json_t *synced = json_object_get(row, "resources_synced");
    return json_pack(
        "{s:s, s:s, s:s, s:s, s:s, s:b, s:s, s:s, s:s, s:o, s:b, s:o, s:o, s:o, s:o}", "id",
        nb_json_str(row, "id"), "agent_type", nb_json_str(row, "agent_type"), "binary",
        nb_json_str(row, "binary"), "topic", nb_json_str(row, "topic"), "host",
        nb_json_str(row, "host"), "admin_state_up", (int)nb_json_int(row, "admin_state_up", 1),
        "created_at", nb_json_str(row, "created_at"), "started_at", nb_json_str(row, "started_at"),
        "heartbeat_timestamp", hb, "description", desc ? json_string(desc) : json_null(), "alive",
        hb && strcmp(hb, nb_agent_alive_since(since)) >= 0, "configurations",
        parsed(row, "configurations", json_object()), "resource_versions",
        parsed(row, "resource_versions", json_object()), "availability_zone",
        az ? json_string(az) : json_null(), "resources_synced",
        json_is_integer(synced) ? json_boolean(json_integer_value(synced)) : json_null());
}

json_t *nb_agent_views(struct nb_ctx *ctx, const char *where_sql, const char *arg)
{
    _cleanup_free_ char *sql =
        nb_strdup_printf("SELECT * FROM agents %s ORDER BY host, agent_type", where_sql);
    _cleanup_json_ json_t *rows = arg ? nb_db_rows(nb_net_env->db, ctx, sql, "s", arg)
                                      : nb_db_rows(nb_net_env->db, ctx, sql, "");
    if (!rows)
        return NULL;
    json_t *views = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r)
        json_array_append_new(views, agent_view(r));
    return views;
}

static int agents_list(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    json_t *views = nb_agent_views(ctx, "", NULL);
    return views ? nb_net_list_respond(ctx, req, resp, "agents", views) : -1;
}

static json_t *agent_row(struct nb_ctx *ctx, const char *id)
{
    json_t *row = nb_db_row(nb_net_env->db, ctx, "SELECT * FROM agents WHERE id = ?", "s", id);
    if (!row && !nb_ctx_failed(ctx))
        nb_error(ctx, 404, "AgentNotFound", "Agent %s could not be found.", id);
    return row;
}

static int agent_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    _cleanup_json_ json_t *row = agent_row(ctx, nb_req_param(req, "agent_id"));
    return row ? nb_net_show_respond(req, resp, 200, "agent", agent_view(row)) : -1;
}

static const struct nb_net_attr agent_attrs[] = {
    {"admin_state_up", NB_A_BOOL, false, true, false, false, 0},
    {"description", NB_A_STR, false, true, false, true, 255},
    {"agent_type", NB_A_STR, false, false, false, false, 0},
    {"binary", NB_A_STR, false, false, false, false, 0},
    {"topic", NB_A_STR, false, false, false, false, 0},
    {"host", NB_A_STR, false, false, false, false, 0},
    {"created_at", NB_A_STR, false, false, false, false, 0},
    {"started_at", NB_A_STR, false, false, false, false, 0},
    {"heartbeat_timestamp", NB_A_STR, false, false, false, false, 0},
    {"alive", NB_A_BOOL, false, false, false, false, 0},
    {"configurations", NB_A_DICT, false, false, false, false, 0},
    {"availability_zone", NB_A_STR, false, false, false, false, 0},
    {NULL},
};

static int agent_update(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *id = nb_req_param(req, "agent_id");
    json_t *body = nb_net_body(ctx, req, "agent");
    if (!body || nb_net_check_attrs(ctx, body, agent_attrs, false) < 0)
        return -1;
    _cleanup_json_ json_t *row = agent_row(ctx, id);
    if (!row)
        return -1;
    json_t *up = json_object_get(body, "admin_state_up"),
           *desc = json_object_get(body, "description");
    if (up && nb_db_exec(nb_net_env->db, ctx, "UPDATE agents SET admin_state_up = ? WHERE id = ?",
                         "bs", json_is_true(up), id) < 0)
        return -1;
    if (desc && nb_db_exec(nb_net_env->db, ctx, "UPDATE agents SET description = ? WHERE id = ?",
                           "ss", json_string_value(desc), id) < 0)
        return -1;
    json_decref(row);
    row = agent_row(ctx, id);
    return row ? nb_net_show_respond(req, resp, 200, "agent", agent_view(row)) : -1;
}

static int agent_delete(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *id = nb_req_param(req, "agent_id");
    _cleanup_json_ json_t *row = agent_row(ctx, id);
    if (!row || nb_db_exec(nb_net_env->db, ctx, "DELETE FROM agents WHERE id = ?", "s", id) < 0)
        return -1;
    NB_INFO(LOG, ctx, NULL, "deleted %s %s of host %s", nb_json_str(row, "agent_type"), id,
            nb_json_str(row, "host"));
    return nb_resp_empty(resp, 204);
}

/* /networks/{id}/dhcp-agents and /routers/{id}/l3-agents. */
static int network_dhcp_agents(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *id = nb_req_param(req, "network_id");
    _cleanup_json_ json_t *net = nb_net_network_get(ctx, id);
    json_t *views = net ? nb_agent_views(ctx,
                                         "WHERE id IN (SELECT dhcp_agent_id FROM "
                                         "networkdhcpagentbindings WHERE network_id = ?)",
                                         id)
                        : NULL;
    return views ? nb_net_list_respond(ctx, req, resp, "agents", views) : -1;
}

static int router_l3_agents(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *id = nb_req_param(req, "router_id");
    if (nb_db_int(nb_net_env->db, ctx, 0, "SELECT COUNT(*) FROM routers WHERE id = ?", "s", id) ==
        0)
        return nb_error(ctx, 404, "RouterNotFound", "Router %s could not be found.", id);
    json_t *views = nb_agent_views(
        ctx, "WHERE id IN (SELECT l3_agent_id FROM routerl3agentbindings WHERE router_id = ?)", id);
    return views ? nb_net_list_respond(ctx, req, resp, "agents", views) : -1;
}

/* /agents/{id}/dhcp-networks: the networks' views; /agents/{id}/l3-routers:
 * the routers' views as GET /routers/{id} gives them. */
static int agent_dhcp_networks(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *id = nb_req_param(req, "agent_id");
    _cleanup_json_ json_t *row = agent_row(ctx, id);
    _cleanup_json_ json_t *nets =
        row ? nb_db_rows(nb_net_env->db, ctx,
                         "SELECT network_id FROM networkdhcpagentbindings WHERE dhcp_agent_id = ? "
                         "ORDER BY network_id",
                         "s", id)
            : NULL;
    if (!nets)
        return -1;
    json_t *views = json_array();
    size_t i;
    json_t *n;
    json_array_foreach (nets, i, n) {
        json_t *v = nb_net_network_view_of(ctx, nb_json_str(n, "network_id"));
        if (v)
            json_array_append_new(views, v);
    }
    return nb_net_list_respond(ctx, req, resp, "networks", views);
}

static int agent_l3_routers(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *id = nb_req_param(req, "agent_id");
    _cleanup_json_ json_t *row = agent_row(ctx, id);
    _cleanup_json_ json_t *rows =
        row ? nb_db_rows(nb_net_env->db, ctx,
                         "SELECT r.id, r.name, r.project_id, r.status, r.admin_state_up FROM "
                         "routers r JOIN routerl3agentbindings b ON b.router_id = r.id WHERE "
                         "b.l3_agent_id = ? ORDER BY r.id",
                         "s", id)
            : NULL;
    if (!rows)
        return -1;
    json_t *views = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r)
        json_array_append_new(views, json_pack("{s:s, s:s, s:s, s:s, s:s, s:b}", "id",
                                               nb_json_str(r, "id"), "name", nb_json_str(r, "name"),
                                               "project_id", nb_json_str(r, "project_id"),
                                               "tenant_id", nb_json_str(r, "project_id"), "status",
                                               nb_json_str(r, "status"), "admin_state_up",
                                               (int)nb_json_int(r, "admin_state_up", 1)));
    return nb_net_list_respond(ctx, req, resp, "routers", views);
}

void nb_net_agents_init(void)
{
    nb_net_extension("agent", "agent", "The agent management extension.");
    nb_net_extension("dhcp_agent_scheduler", "DHCP Agent Scheduler",
                     "Schedule networks among dhcp agents");
    nb_net_extension("l3_agent_scheduler", "L3 Agent Scheduler",
                     "Schedule routers among l3 agents");
    nb_ml2_extensions();
    nb_http_route("GET", "/networking/v2.0/agents", agents_list, 0);
    nb_http_route("GET", "/networking/v2.0/agents/{agent_id}", agent_show, 0);
    nb_http_route("PUT", "/networking/v2.0/agents/{agent_id}", agent_update, 0);
    nb_http_route("DELETE", "/networking/v2.0/agents/{agent_id}", agent_delete, 0);
    nb_http_route("GET", "/networking/v2.0/agents/{agent_id}/dhcp-networks", agent_dhcp_networks,
                  0);
    nb_http_route("GET", "/networking/v2.0/agents/{agent_id}/l3-routers", agent_l3_routers, 0);
    nb_http_route("GET", "/networking/v2.0/networks/{network_id}/dhcp-agents", network_dhcp_agents,
                  0);
    nb_http_route("GET", "/networking/v2.0/routers/{router_id}/l3-agents", router_l3_agents, 0);
    nb_http_route("GET", "/networking/v2.0/hosts/{host}/state", nb_host_state_show, 0);
}
