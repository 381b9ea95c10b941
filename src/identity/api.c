/* api.c - the identity service's entry point: version
 * discovery and route registration.
 *
 * nb_identity_init keeps the environment it is given (state.c: the only
 * state, set once at start-up, read-only afterwards), registers every
 * /identity route and installs the token check that all services' requests
 * pass through. Version discovery answers as Keystone does: GET /identity is
 * 300 Multiple Choices listing v3, GET /identity/v3 is the v3 document. */
#include "identity/identity.h"
#include "identity/identity_int.h"

#include "common/cleanup.h"
#include "common/config.h"
#include "common/log.h"
#include "common/util.h"

/* Keystone's v3 version document (Zed: v3.14). New reference. */
static json_t *v3_version(void)
{
    _cleanup_free_ char *href = nb_strdup_printf("%s/identity/v3/", nb_http_base_url());
    return json_pack("{s:s, s:s, s:s, s:[{s:s, s:s}], s:[{s:s, s:s}]}", "id", "v3.14", "status",
                     "stable", "updated", "2020-04-07T00:00:00Z", "links", "rel", "self", "href",
                     href, "media-types", "base", "application/json", "type",
                     "application/vnd.openstack.identity-v3+json");
}

static int list_versions(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    _cleanup_free_ char *location = nb_strdup_printf("%s/identity/v3/", nb_http_base_url());
    nb_resp_header(resp, "Location", location);
    return nb_resp_json(resp, 300, json_pack("{s:{s:[o]}}", "versions", "values", v3_version()));
}

static int show_v3(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    return nb_resp_json(resp, 200, json_pack("{s:o}", "version", v3_version()));
}

int nb_identity_init(struct nb_env *env)
{
    if (!env || !env->db) {
        NB_ERROR("nubo.identity", NULL, NULL, "identity needs database access");
        return -1;
    }
    nb_idn_set_env(env);
    nb_http_service_register(&nb_identity_http_service, false);
    nb_http_route("GET", "/identity", list_versions, NB_ROUTE_NO_AUTH);
    nb_http_route("GET", "/identity/", list_versions, NB_ROUTE_NO_AUTH);
    nb_http_route("GET", "/identity/v3", show_v3, NB_ROUTE_NO_AUTH);
    nb_http_route("GET", "/identity/v3/", show_v3, NB_ROUTE_NO_AUTH);
    nb_idn_auth_routes();
    nb_idn_catalog_routes();
    nb_idn_domain_routes();
    nb_idn_project_routes();
    nb_idn_user_routes();
    nb_idn_role_routes();
    nb_idn_assignment_routes();
    nb_http_set_auth(nb_idn_authenticate, nb_idn_reject);
    return 0;
}
