/* catalog.c - the service catalog, and the services, endpoints and regions
 * that describe it.
 *
 * nubo serves every API from one process under one base URL, so the catalog
 * is derived rather than stored: each service listed in
 * [identity] catalog_services (default "identity,compute,image,placement,
 * block-storage,volumev3,network": Keystone catalogs in devstack list Cinder under
 * both types, and OSC 6's `openstack volume` looks for volumev3)
 * gets a public, internal and admin endpoint at base URL + its path, in the
 * one region ([DEFAULT] region_name). Service and endpoint ids are stable
 * hashes of type, interface and region, so `openstack endpoint show <id>`
 * keeps working across restarts. List a service only when nubo answers it:
 * clients such as `openstack quota show` query every service in the catalog. */
#include "identity/identity_int.h"

#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/util.h"

#include <string.h>

struct svc {
    const char *type;
    const char *name;
    const char *path; /* may hold $(project_id)s, as Keystone's URLs do */
    const char *description;
};

static const struct svc known_services[] = {
    {"identity", "keystone", "/identity", "Identity Service"},
    {"compute", "nova", "/compute/v2.1", "Compute Service"},
    {"image", "glance", "/image", "Image Service"},
    {"placement", "placement", "/placement", "Placement Service"},
    {"block-storage", "cinder", "/volume/v3/$(project_id)s", "Block Storage Service"},
    {"volumev3", "cinderv3", "/volume/v3/$(project_id)s", "Cinder Volume Service V3"},
    {"network", "neutron", "/networking", "Neutron Service"},
};
#define NSERVICES (sizeof(known_services) / sizeof(known_services[0]))

static const char *const interfaces[] = {"public", "internal", "admin"};

/* 32 hex chars of SHA-256 of text: stable ids for derived entities. */
static void stable_id(const char *text, char out[33])
{
    char full[NB_IDN_HEX_LEN];
    nb_idn_token_hash(text, full);
    memcpy(out, full, 32);
    out[32] = '\0';
}

static void service_id(const struct svc *s, char out[33])
{
    _cleanup_free_ char *t = nb_strdup_printf("service:%s", s->type);
    stable_id(t, out);
}

static void endpoint_id(const struct svc *s, const char *iface, char out[33])
{
    _cleanup_free_ char *t = nb_strdup_printf("endpoint:%s:%s:%s", s->type, iface, nb_idn_region());
    stable_id(t, out);
}

/* True if s is named in [identity] catalog_services. */
static bool service_enabled(const struct svc *s)
{
    const char *list =
        nb_conf_str("identity", "catalog_services",
                    "identity,compute,image,placement,block-storage,volumev3,network");
    size_t n = strlen(s->type);
    for (const char *p = list; *p;) {
        while (*p == ',' || *p == ' ')
            p++;
        const char *e = p;
        while (*e && *e != ',' && *e != ' ')
            e++;
        if ((size_t)(e - p) == n && strncmp(p, s->type, n) == 0)
            return true;
        p = e;
    }
    return false;
}

/* The raw endpoint URL (with $(project_id)s left in). Caller frees. */
static char *raw_url(const struct svc *s)
{
    return nb_strdup_printf("%s%s", nb_http_base_url(), s->path);
}

/* The URL for project_id, or NULL if it needs a project and there is none.
 * Caller frees. */
static char *scoped_url(const struct svc *s, const char *project_id)
{
    static const char *const vars[] = {"$(project_id)s", "$(tenant_id)s"};
    char *url = raw_url(s);
    for (size_t v = 0; v < 2; v++) {
        char *at;
        while ((at = strstr(url, vars[v]))) {
            if (!project_id) {
                free(url);
                return NULL;
            }
            *at = '\0';
            char *next = nb_strdup_printf("%s%s%s", url, project_id, at + strlen(vars[v]));
            free(url);
            url = next;
        }
    }
    return url;
}

json_t *nb_idn_catalog(const char *project_id)
{
    json_t *catalog = json_array();
    const char *region = nb_idn_region();
    for (size_t i = 0; i < NSERVICES; i++) {
        const struct svc *s = &known_services[i];
        if (!service_enabled(s))
            continue;
        _cleanup_free_ char *url = scoped_url(s, project_id);
        if (!url)
            continue;
        char sid[33];
        service_id(s, sid);
        json_t *eps = json_array();
        for (size_t k = 0; k < 3; k++) {
            char eid[33];
            endpoint_id(s, interfaces[k], eid);
            json_array_append_new(eps, json_pack("{s:s, s:s, s:s, s:s, s:s}", "id", eid,
                                                 "interface", interfaces[k], "region_id", region,
                                                 "url", url, "region", region));
        }
        json_array_append_new(catalog, json_pack("{s:o, s:s, s:s, s:s}", "endpoints", eps, "id",
                                                 sid, "type", s->type, "name", s->name));
    }
    return catalog;
}

static json_t *render_service(const struct svc *s)
{
    char sid[33];
    service_id(s, sid);
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:b}", "id", sid, "type", s->type, "name", s->name,
                          "description", s->description, "enabled", 1);
    nb_idn_self_link(o, "services", sid);
    return o;
}

static json_t *render_endpoint(const struct svc *s, const char *iface)
{
    char sid[33], eid[33];
    service_id(s, sid);
    endpoint_id(s, iface, eid);
    _cleanup_free_ char *url = raw_url(s);
    const char *region = nb_idn_region();
    json_t *o =
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:b}", "id", eid, "interface", iface, "region_id",
                  region, "region", region, "service_id", sid, "url", url, "enabled", 1);
    nb_idn_self_link(o, "endpoints", eid);
    return o;
}

static json_t *render_region(void)
{
    json_t *o =
        json_pack("{s:s, s:s, s:n}", "id", nb_idn_region(), "description", "", "parent_region_id");
    nb_idn_self_link(o, "regions", nb_idn_region());
    return o;
}

/* Matches an optional query filter: absent filter matches everything. */
static bool filter_ok(const struct nb_req *req, const char *key, const char *value)
{
    const char *f = nb_req_query(req, key);
    return !f || strcmp(f, value) == 0;
}

static int list_services(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_idn_require_admin(ctx, "identity:list_services") < 0)
        return -1;
    json_t *items = json_array();
    for (size_t i = 0; i < NSERVICES; i++) {
        const struct svc *s = &known_services[i];
        if (service_enabled(s) && filter_ok(req, "type", s->type) &&
            filter_ok(req, "name", s->name))
            json_array_append_new(items, render_service(s));
    }
    return nb_idn_collection(resp, req, "services", items);
}

static int show_service(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_idn_require_admin(ctx, "identity:get_service") < 0)
        return -1;
    const char *id = nb_req_param(req, "service_id");
    for (size_t i = 0; i < NSERVICES; i++) {
        char sid[33];
        service_id(&known_services[i], sid);
        if (service_enabled(&known_services[i]) && strcmp(sid, id) == 0)
            return nb_resp_json(resp, 200,
                                json_pack("{s:o}", "service", render_service(&known_services[i])));
    }
    return nb_error(ctx, 404, NB_IDN_E404, "Could not find service: %s.", id);
}

static int list_endpoints(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_idn_require_admin(ctx, "identity:list_endpoints") < 0)
        return -1;
    json_t *items = json_array();
    for (size_t i = 0; i < NSERVICES; i++) {
        const struct svc *s = &known_services[i];
        char sid[33];
        service_id(s, sid);
        if (!service_enabled(s) || !filter_ok(req, "service_id", sid) ||
            !filter_ok(req, "region_id", nb_idn_region()))
            continue;
        for (size_t k = 0; k < 3; k++)
            if (filter_ok(req, "interface", interfaces[k]))
                json_array_append_new(items, render_endpoint(s, interfaces[k]));
    }
    return nb_idn_collection(resp, req, "endpoints", items);
}

static int show_endpoint(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_idn_require_admin(ctx, "identity:get_endpoint") < 0)
        return -1;
    const char *id = nb_req_param(req, "endpoint_id");
    for (size_t i = 0; i < NSERVICES; i++) {
        if (!service_enabled(&known_services[i]))
            continue;
        for (size_t k = 0; k < 3; k++) {
            char eid[33];
            endpoint_id(&known_services[i], interfaces[k], eid);
            if (strcmp(eid, id) == 0)
                return nb_resp_json(resp, 200,
                                    json_pack("{s:o}", "endpoint",
                                              render_endpoint(&known_services[i], interfaces[k])));
        }
    }
    return nb_error(ctx, 404, NB_IDN_E404, "Could not find endpoint: %s.", id);
}

static int list_regions(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    json_t *items = json_array();
    if (filter_ok(req, "parent_region_id", ""))
        json_array_append_new(items, render_region());
    return nb_idn_collection(resp, req, "regions", items);
}

static int show_region(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *id = nb_req_param(req, "region_id");
    if (strcmp(id, nb_idn_region()) != 0)
        return nb_error(ctx, 404, NB_IDN_E404, "Could not find region: %s.", id);
    return nb_resp_json(resp, 200, json_pack("{s:o}", "region", render_region()));
}

void nb_idn_catalog_routes(void)
{
    nb_http_route("GET", "/identity/v3/services", list_services, 0);
    nb_http_route("GET", "/identity/v3/services/{service_id}", show_service, 0);
    nb_http_route("GET", "/identity/v3/endpoints", list_endpoints, 0);
    nb_http_route("GET", "/identity/v3/endpoints/{endpoint_id}", show_endpoint, 0);
    nb_http_route("GET", "/identity/v3/regions", list_regions, 0);
    nb_http_route("GET", "/identity/v3/regions/{region_id}", show_region, 0);
}
