/* api.c - the Networking API v2.0 under /networking: module init (which
 * registers the service and every route), version discovery and
 * availability zones. The request and collection helpers every handler
 * shares are in collection.c, the extension registry in extensions.c.
 *
 * Routes are registered with the HTTP layer like every service's; errors
 * are rendered by http_service.c in Neutron's shape. */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/sbuf.h"
#include "common/util.h"
#include "db/db.h"
#include "network/network.h"
#include "network/network_int.h"

#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* --- version discovery, extensions, availability zones ----------------- */

static int versions(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    (void)ctx, (void)req;
    _cleanup_free_ char *href = nb_strdup_printf("%s/networking/v2.0/", nb_http_base_url());
    json_t *v = json_pack("{s:s, s:s, s:[{s:s, s:s}]}", "id", "v2.0", "status", "CURRENT", "links",
                          "href", href, "rel", "self");
    return nb_resp_json(resp, 200, json_pack("{s:[o]}", "versions", v));
}

static int v2_resources(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    (void)ctx, (void)req;
    static const char *const names[][2] = {{"subnet", "subnets"},
                                           {"network", "networks"},
                                           {"port", "ports"},
                                           {"availability_zone", "availability_zones"},
                                           {"extension", "extensions"}};
    json_t *list = json_array();
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        _cleanup_free_ char *href =
            nb_strdup_printf("%s/networking/v2.0/%s", nb_http_base_url(), names[i][1]);
        json_array_append_new(list, json_pack("{s:s, s:s, s:[{s:s, s:s}]}", "name", names[i][0],
                                              "collection", names[i][1], "links", "href", href,
                                              "rel", "self"));
    }
    return nb_resp_json(resp, 200, json_pack("{s:o}", "resources", list));
}

/* Neutron with ml2/ovs in one zone: the network and router resources of
 * [network] default_availability_zone (Neutron's default "nova"). */
static int availability_zones(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *az = nb_conf_str("network", "default_availability_zone", "nova");
    json_t *list = json_array();
    const char *kinds[] = {"network", "router"};
    for (int i = 0; i < 2; i++)
        json_array_append_new(list, json_pack("{s:s, s:s, s:s}", "name", az, "resource", kinds[i],
                                              "state", "available"));
    return nb_net_list_respond(ctx, req, resp, "availability_zones", list);
}

/* The extensions this file's resources implement (neutron_lib's aliases). */
static void core_extensions(void)
{
    nb_net_extension("external-net", "Neutron external network",
                     "Adds external network attribute to network resource.");
    nb_net_extension("availability_zone", "Availability Zone", "The availability zone extension.");
    nb_net_extension("network_availability_zone", "Network Availability Zone",
                     "Availability zone support for network.");
    nb_net_extension("binding", "Port Binding",
                     "Expose port bindings of a virtual port to "
                     "external application");
    nb_net_extension("port-security", "Port Security", "Provides port security");
    nb_net_extension("allowed-address-pairs", "Allowed Address Pairs",
                     "Provides allowed address pairs");
    nb_net_extension(
        "extra_dhcp_opt", "Neutron Extra DHCP options",
        "Extra options configuration for DHCP. For example PXE boot options to DHCP "
        "clients can be specified (e.g. tftp-server, server-ip-address, bootfile-name)");
    nb_net_extension("net-mtu", "Network MTU", "Provides MTU attribute for a network resource.");
    nb_net_extension("net-mtu-writable", "Network MTU (writable)",
                     "Provides a writable MTU attribute for a network resource.");
    nb_net_extension("project-id", "project_id field enabled",
                     "Extension that indicates that project_id field is enabled.");
    nb_net_extension("standard-attr-description", "standard-attr-description",
                     "Extension to add descriptions to standard attributes");
    nb_net_extension("standard-attr-timestamp", "Resource timestamps",
                     "Adds created_at and updated_at fields to all Neutron resources that have "
                     "Neutron standard attributes.");
    nb_net_extension("standard-attr-revisions", "Resource revision numbers",
                     "This extension will display the revision number of neutron resources.");
    nb_net_extension("sorting", "Sorting support",
                     "Extension that indicates that sorting is "
                     "enabled.");
    nb_net_extension("pagination", "Pagination support",
                     "Extension that indicates that pagination is enabled.");
}

int nb_network_init(struct nb_env *env)
{
    nb_net_env = env;
    nb_http_service_register(&nb_network_http_service, false);
    nb_http_route("GET", "/networking", versions, NB_ROUTE_NO_AUTH);
    nb_http_route("GET", "/networking/v2.0", v2_resources, 0);
    nb_net_extensions_routes();
    nb_http_route("GET", "/networking/v2.0/availability_zones", availability_zones, 0);
    core_extensions();
    if (nb_net_networks_init() < 0 || nb_net_subnets_init() < 0 || nb_net_ports_init() < 0)
        return -1;
    if (nb_net_security_groups_init && nb_net_security_groups_init(env) < 0)
        return -1;
    if (nb_net_routers_init && nb_net_routers_init(env) < 0)
        return -1;
    if (nb_net_subnetpools_init && nb_net_subnetpools_init(env) < 0)
        return -1;
    if (nb_net_quotas_init(env) < 0)
        return -1;
    nb_net_agents_init();
    return 0;
}
