/* agents.c - GET /v2.0/agents and /v2.0/agents/{id} (`openstack network
 * agent list`). Neutron lists the agents that report to it (DHCP, L3,
 * metadata, Open vSwitch…). nubo runs none: addresses are assigned by its
 * IPAM and handed to guests by config drive or the metadata service, and no
 * process plugs ports on the hosts. So the list is empty and every agent is
 * unknown (Neutron's AgentNotFound); nothing is invented. The "agent"
 * extension is not announced, so clients and Tempest do not expect agent
 * management. */
#include "common/http.h"
#include "common/json.h"
#include "network/network_int.h"

static int agents_list(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    (void)ctx;
    (void)req;
    return nb_resp_json(resp, 200, json_pack("{s:[]}", "agents"));
}

static int agent_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    (void)resp;
    return nb_error(ctx, 404, "AgentNotFound", "Agent %s could not be found.",
                    nb_req_param(req, "agent_id"));
}

void nb_net_agents_init(void)
{
    nb_http_route("GET", "/networking/v2.0/agents", agents_list, 0);
    nb_http_route("GET", "/networking/v2.0/agents/{agent_id}", agent_show, 0);
}
