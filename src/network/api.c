/* api.c - the Networking API v2.0 under /networking: module init (which
 * registers every route), routing with Neutron's error shape, version
 * discovery and availability zones. The request and collection helpers
 * every handler shares are in collection.c, the extension registry in
 * extensions.c.
 *
 * Routing: nb_net_route() keeps its own table and registers one dispatcher
 * with the HTTP layer; the dispatcher finds the route again (same rule: the
 * pattern with most exact segments wins), calls the handler, and turns a
 * recorded error into {"NeutronError": {"type", "message", "detail"}} with
 * the status, as neutron/api/api_common.py does. */
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

/* --- routing ------------------------------------------------------------ */

#define MAX_ROUTES 96
#define MAX_SEGS 8

struct net_route {
    const char *method;
    char *segs[MAX_SEGS];
    int nsegs, nexact;
    nb_handler_fn fn;
};
static struct net_route routes[MAX_ROUTES];
static int nroutes;

void nb_net_route(const char *method, const char *pattern, nb_handler_fn fn);

static int split(char *path, char **segs)
{
    int n = 0;
    char *save = NULL;
    for (char *t = strtok_r(path, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
        if (n == MAX_SEGS)
            return -1;
        segs[n++] = t;
    }
    return n;
}

static const struct net_route *find_route(const char *method, const char *path)
{
    _cleanup_free_ char *copy = strdup(path);
    char *segs[MAX_SEGS];
    int n = split(copy, segs);
    const struct net_route *best = NULL;
    for (int i = 0; i < nroutes; i++) {
        const struct net_route *r = &routes[i];
        if (r->nsegs != n || strcmp(r->method, method) != 0)
            continue;
        bool ok = true;
        for (int k = 0; k < n && ok; k++)
            ok = r->segs[k][0] == '{' || !strcmp(r->segs[k], segs[k]);
        if (ok && (!best || r->nexact > best->nexact))
            best = r;
    }
    return best;
}

/* Neutron's generic exception names for errors recorded without one. */
static const char *neutron_type(const struct nb_ctx *ctx)
{
    static const char *const generic[] = {"badRequest",   "unauthorized",       "forbidden",
                                          "itemNotFound", "conflictingRequest", "computeFault",
                                          "badMethod",    "overLimit",          NULL};
    for (int i = 0; generic[i]; i++)
        if (!strcmp(ctx->err_name, generic[i]))
            goto mapped;
    if (ctx->err_name[0])
        return ctx->err_name;
mapped:
    switch (ctx->err_status) {
    case 400: return "HTTPBadRequest";
    case 401: return "HTTPUnauthorized";
    case 403: return "HTTPForbidden";
    case 404: return "HTTPNotFound";
    case 405: return "HTTPMethodNotAllowed";
    case 409: return "HTTPConflict";
    case 413: return "HTTPRequestEntityTooLarge";
    default: return "HTTPInternalServerError";
    }
}

static int dispatch(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const struct net_route *r = find_route(req->method, req->path);
    int rc = r ? r->fn(ctx, req, resp)
               : nb_error(ctx, 404, "HTTPNotFound", "The resource could not be found.");
    if (rc == 0 && !ctx->err_status)
        return 0;
    if (!ctx->err_status)
        nb_error(ctx, 500, NULL,
                 "Request Failed: internal server error while processing your "
                 "request.");
    if (ctx->err_status >= 500)
        NB_ERROR("nubo.network.api", ctx, NULL, "%s %s failed: %s", req->method, req->path,
                 ctx->err_msg);
    json_decref(resp->body);
    json_t *e = json_pack("{s:s, s:s, s:s}", "type", neutron_type(ctx), "message", ctx->err_msg,
                          "detail", "");
    return nb_resp_json(resp, ctx->err_status, json_pack("{s:o}", "NeutronError", e));
}

void nb_net_route(const char *method, const char *pattern, nb_handler_fn fn)
{
    assert(nroutes < MAX_ROUTES);
    struct net_route *r = &routes[nroutes++];
    r->method = method;
    r->fn = fn;
    char *copy = strdup(pattern); /* kept for the process's life */
    r->nsegs = split(copy, r->segs);
    assert(r->nsegs > 0);
    for (int k = 0; k < r->nsegs; k++)
        r->nexact += r->segs[k][0] != '{';
    nb_http_route(method, pattern, dispatch, 0);
}

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
    nb_http_route("GET", "/networking", versions, NB_ROUTE_NO_AUTH);
    nb_net_route("GET", "/networking/v2.0", v2_resources);
    nb_net_extensions_routes();
    nb_net_route("GET", "/networking/v2.0/availability_zones", availability_zones);
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
