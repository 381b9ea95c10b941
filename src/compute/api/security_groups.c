/* security_groups.c - Nova's security-group proxy in front of the
 * Networking service (nova/api/openstack/compute/security_groups.py over
 * nova/network/security_group_api.py): /os-security-groups (list, show,
 * create, update, delete) and /os-security-group-rules (create, delete),
 * which Nova removed at 2.36 (a bare 404 from then on), and, at every
 * microversion, GET /servers/{id}/os-security-groups and the
 * addSecurityGroup / removeSecurityGroup server actions.
 *
 * Groups live in the network module (nb_network_sg_*); this file turns
 * Nova's requests into Neutron's and Neutron's views into Nova's: a group
 * is {"id", "name", "description", "tenant_id", "rules"} with its ingress
 * rules only, a rule {"id", "parent_group_id", "ip_protocol", "from_port",
 * "to_port", "group": {"name", "tenant_id"} or {}, "ip_range": {"cidr"} or
 * {}}. Neutron's errors become Nova's statuses as security_group_api does
 * (a 409 on create is Nova's 403 SecurityGroupLimitExceeded, a 409 on
 * delete its 400 Invalid). Policy: os_compute_api:os-security-groups:*,
 * PROJECT_READER_OR_ADMIN for reads, PROJECT_MEMBER_OR_ADMIN otherwise. */
#include "common/cleanup.h"
#include "common/json.h"
#include "common/util.h"
#include "compute/api/api.h"
#include "compute/api/instances.h"
#include "compute/api/proxy.h"
#include "compute/api/links.h"
#include "compute/api/server_actions.h"
#include "compute/api/validate.h"
#include "network/network.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define SG_RULE "os_compute_api:os-security-groups:"

static int policy(struct nb_ctx *ctx, const char *what, bool read, const char *project)
{
    return nb_proxy_policy(ctx, SG_RULE, what, read, project);
}

/* security_group_api.validate_id. 0/-1 (400). */
static int validate_id(struct nb_ctx *ctx, const char *id)
{
    if (!id || !nb_is_uuid(id))
        return nb_error(ctx, 400, NULL, "Security group id should be uuid");
    return 0;
}

/* --- views ------------------------------------------------------------------ */

/* _convert_to_nova_security_group_rule_format's ports: a rule with a
 * protocol and no ports is 1-65535 for TCP/UDP, -1/-1 for the others. */
static void rule_ports(const json_t *nr, json_t **from, json_t **to)
{
    const char *proto = nb_json_str(nr, "protocol");
    json_t *min = json_object_get(nr, "port_range_min"),
           *max = json_object_get(nr, "port_range_max");
    bool none = (!min || json_is_null(min)) && (!max || json_is_null(max));
    if (proto && none) {
        bool l4 = !strcasecmp(proto, "tcp") || !strcasecmp(proto, "udp");
        *from = json_integer(l4 ? 1 : -1);
        *to = json_integer(l4 ? 65535 : -1);
        return;
    }
    *from = min ? json_incref(min) : json_null();
    *to = max ? json_incref(max) : json_null();
}

/* _format_security_group_rule for a Neutron rule of group parent. NULL
 * when the rule's remote group is not found (Nova leaves it out). */
static json_t *rule_view(struct nb_ctx *ctx, const json_t *nr, const json_t *parent)
{
    json_t *from, *to;
    rule_ports(nr, &from, &to);
    const char *proto = nb_json_str(nr, "protocol");
    json_t *v = json_pack("{s:s?, s:s?, s:s?, s:o, s:o}", "id", nb_json_str(nr, "id"),
                          "parent_group_id", nb_json_str(nr, "security_group_id"), "ip_protocol",
                          proto, "from_port", from, "to_port", to);
    const char *remote = nb_json_str(nr, "remote_group_id");
    if (remote) {
        _cleanup_json_ json_t *src = NULL;
        if (parent && !strcmp(remote, nb_json_str(parent, "id"))) {
            src = json_incref((json_t *)parent);
        } else {
            struct nb_ctx sub;
            nb_ctx_child(&sub, ctx);
            if (!(src = nb_network_sg_show(&sub, remote))) {
                json_decref(v);
                return NULL;
            }
        }
        json_object_set_new(v, "group",
                            json_pack("{s:s?, s:s?}", "name", nb_json_str(src, "name"), "tenant_id",
                                      nb_json_str(src, "project_id")));
        json_object_set_new(v, "ip_range", json_object());
    } else {
        const char *prefix = nb_json_str(nr, "remote_ip_prefix");
        json_object_set_new(v, "group", json_object());
        json_object_set_new(v, "ip_range",
                            json_pack("{s:s}", "cidr", prefix ? prefix : "0.0.0.0/0"));
    }
    return v;
}

/* _format_security_group of a Neutron group: its ingress rules only. */
static json_t *group_view(struct nb_ctx *ctx, const json_t *ng)
{
    json_t *rules = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (json_object_get(ng, "security_group_rules"), i, r) {
        const char *dir = nb_json_str(r, "direction");
        json_t *rv;
        if (dir && !strcmp(dir, "ingress") && (rv = rule_view(ctx, r, ng)))
            json_array_append_new(rules, rv);
    }
    return json_pack("{s:s?, s:s?, s:s?, s:s?, s:o}", "id", nb_json_str(ng, "id"), "description",
                     nb_json_str(ng, "description"), "name", nb_json_str(ng, "name"), "tenant_id",
                     nb_json_str(ng, "project_id"), "rules", rules);
}

static int by_tenant_name(const void *a, const void *b)
{
    const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    int c = strcmp(nb_json_str(x, "tenant_id") ? nb_json_str(x, "tenant_id") : "",
                   nb_json_str(y, "tenant_id") ? nb_json_str(y, "tenant_id") : "");
    return c ? c
             : strcmp(nb_json_str(x, "name") ? nb_json_str(x, "name") : "",
                      nb_json_str(y, "name") ? nb_json_str(y, "name") : "");
}

/* {"security_groups": [views sorted by (tenant_id, name)]}. */
static json_t *groups_body(struct nb_ctx *ctx, const json_t *groups)
{
    size_t n = json_array_size(groups);
    json_t **views = calloc(n ? n : 1, sizeof(*views));
    for (size_t i = 0; i < n; i++)
        views[i] = group_view(ctx, json_array_get(groups, i));
    qsort(views, n, sizeof(*views), by_tenant_name);
    json_t *list = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(list, views[i]);
    free(views);
    return json_pack("{s:o}", "security_groups", list);
}

/* --- groups ------------------------------------------------------------------ */

/* _from_body. Borrowed, or NULL after 400. */
static json_t *from_body(struct nb_ctx *ctx, struct nb_req *req, const char *key)
{
    json_t *body = req->json;
    if (!body || (json_is_object(body) && !json_object_size(body))) {
        nb_error(ctx, 400, NULL, "The request body can't be empty");
        return NULL;
    }
    json_t *v = json_is_object(body) ? json_object_get(body, key) : NULL;
    if (!v || json_is_null(v)) {
        nb_error(ctx, 400, NULL, "Missing parameter %s", key);
        return NULL;
    }
    return v;
}

/* validate_property: a string of at most 255 characters (oslo's
 * check_string_length wording). 0/-1. */
static int validate_property(struct nb_ctx *ctx, const json_t *v, const char *name)
{
    if (!json_is_string(v))
        return nb_error(ctx, 400, NULL, "Invalid input received: %s is not a string or unicode",
                        name);
    size_t len = 0;
    for (const unsigned char *p = (const unsigned char *)json_string_value(v); *p; p++)
        len += (*p & 0xc0) != 0x80;
    if (len > 255)
        return nb_error(ctx, 400, NULL,
                        "Invalid input received: %s has %zu characters, more than 255.", name, len);
    return 0;
}

/* common._get_int_param: a query parameter that is an integer >= 0, or
 * -1 when absent. 0/-1 (400). */
static int int_param(struct nb_ctx *ctx, struct nb_req *req, const char *name, long long *out)
{
    const char *s = nb_req_query(req, name);
    *out = -1;
    if (!s)
        return 0;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    while (isspace((unsigned char)*end))
        end++;
    if (end == s || *end || errno)
        return nb_error(ctx, 400, NULL, "Invalid input received: %s must be an integer", name);
    if (v < 0)
        return nb_error(ctx, 400, NULL, "Invalid input received: %s must be >= 0", name);
    *out = v;
    return 0;
}

static int do_list(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    long long offset, limit;
    if (nb_proxy_check_version(ctx, NB_PROXY_MAX_MINOR) < 0 ||
        policy(ctx, "get", true, ctx->project_id) < 0 || int_param(ctx, req, "limit", &limit) < 0 ||
        int_param(ctx, req, "offset", &offset) < 0)
        return -1;
    _cleanup_json_ json_t *groups =
        nb_network_sg_list(ctx, ctx->is_admin && nb_req_query(req, "all_tenants"));
    if (!groups)
        return -1;
    /* common.limited: [offset, offset + limit) of Neutron's order, a limit
     * of 0 or none being [api] max_limit; sorted afterwards */
    long long max = nb_res_max_limit();
    if (limit <= 0 || limit > max)
        limit = max;
    _cleanup_json_ json_t *page = json_array();
    for (size_t i = offset < 0 ? 0 : (size_t)offset;
         i < json_array_size(groups) && (long long)json_array_size(page) < limit; i++)
        json_array_append(page, json_array_get(groups, i));
    return nb_resp_json(resp, 200, groups_body(ctx, page));
}

/* The group of the request's path, looked up as Nova's show does. */
static json_t *path_group(struct nb_ctx *ctx, struct nb_req *req)
{
    const char *id = nb_req_param(req, "security_group_id");
    if (validate_id(ctx, id) < 0)
        return NULL;
    return nb_network_sg_show(ctx, id);
}

static int do_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_proxy_check_version(ctx, NB_PROXY_MAX_MINOR) < 0 ||
        policy(ctx, "show", true, ctx->project_id) < 0)
        return -1;
    _cleanup_json_ json_t *g = path_group(ctx, req);
    if (!g)
        return -1;
    return nb_resp_json(resp, 200, json_pack("{s:o}", "security_group", group_view(ctx, g)));
}

static int do_create(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_proxy_check_version(ctx, NB_PROXY_MAX_MINOR) < 0 ||
        policy(ctx, "create", false, ctx->project_id) < 0)
        return -1;
    json_t *sg = from_body(ctx, req, "security_group");
    if (!sg)
        return -1;
    json_t *name = json_object_get(sg, "name"), *desc = json_object_get(sg, "description");
    if (validate_property(ctx, name, "name") < 0 || validate_property(ctx, desc, "description") < 0)
        return -1;
    _cleanup_json_ json_t *nbody = json_pack("{s:O, s:O}", "name", name, "description", desc);
    _cleanup_json_ json_t *g = nb_network_sg_create(ctx, nbody);
    if (!g)
        return nb_ctx_status(ctx) == 409 ? nb_srv_error_as(ctx, 403, NULL) : -1;
    return nb_resp_json(resp, 200, json_pack("{s:o}", "security_group", group_view(ctx, g)));
}

static int do_update(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_proxy_check_version(ctx, NB_PROXY_MAX_MINOR) < 0 ||
        policy(ctx, "update", false, ctx->project_id) < 0)
        return -1;
    _cleanup_json_ json_t *g = path_group(ctx, req);
    if (!g)
        return -1;
    json_t *sg = from_body(ctx, req, "security_group");
    if (!sg)
        return -1;
    json_t *name = json_object_get(sg, "name"), *desc = json_object_get(sg, "description");
    if (validate_property(ctx, name, "name") < 0 || validate_property(ctx, desc, "description") < 0)
        return -1;
    _cleanup_json_ json_t *nbody = json_pack("{s:O, s:O}", "name", name, "description", desc);
    _cleanup_json_ json_t *u = nb_network_sg_update(ctx, nb_json_str(g, "id"), nbody);
    if (!u)
        return -1;
    return nb_resp_json(resp, 200, json_pack("{s:o}", "security_group", group_view(ctx, u)));
}

static int do_delete(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_proxy_check_version(ctx, NB_PROXY_MAX_MINOR) < 0 ||
        policy(ctx, "delete", false, ctx->project_id) < 0)
        return -1;
    _cleanup_json_ json_t *g = path_group(ctx, req);
    if (!g)
        return -1;
    if (nb_network_sg_delete(ctx, nb_json_str(g, "id")) < 0)
        return nb_ctx_status(ctx) == 409 ? nb_srv_error_as(ctx, 400, NULL) : -1;
    return nb_resp_empty(resp, 202);
}

/* --- rules ------------------------------------------------------------------- */

/* Python's int() of a port: an integer, a real (truncated) or a string of
 * one. 0, or -1 when it is none of them. */
static int py_int(const json_t *v, long long *out)
{
    if (json_is_integer(v)) {
        *out = json_integer_value(v);
        return 0;
    }
    if (json_is_real(v)) {
        *out = (long long)json_real_value(v);
        return 0;
    }
    if (!json_is_string(v))
        return -1;
    const char *s = json_string_value(v);
    char *end;
    errno = 0;
    long long n = strtoll(s, &end, 10);
    while (isspace((unsigned char)*end))
        end++;
    if (end == s || *end || errno)
        return -1;
    *out = n;
    return 0;
}

/* The request's cidr (parse_cidr): "0.0.0.0/0" when none, else a valid
 * address/prefix (URL-unquoted), into out[80]. 0/-1 (400 InvalidCidr). */
static int parse_cidr(struct nb_ctx *ctx, const json_t *v, char *out, int *version)
{
    const char *s = json_string_value(v);
    *version = 4;
    if (!v || json_is_null(v) || (s && !*s)) {
        strcpy(out, "0.0.0.0/0");
        return 0;
    }
    if (!s)
        return nb_error(ctx, 400, NULL, "Invalid input received: %s is not a valid IP network.",
                        "?");
    size_t n = 0;
    for (const char *p = s; *p && n < 79; p++) {
        int h1, h2;
        if (*p == '%' && p[1] && p[2] && sscanf(p + 1, "%1x%1x", &h1, &h2) == 2) {
            out[n++] = (char)(h1 * 16 + h2);
            p += 2;
        } else {
            out[n++] = *p;
        }
    }
    out[n] = '\0';
    char addr[80];
    nb_strlcpy(addr, out, sizeof(addr));
    char *slash = strchr(addr, '/');
    unsigned char buf[16];
    bool ok = false;
    if (slash && !strchr(slash + 1, '/')) {
        *slash = '\0';
        char *end;
        long len = strtol(slash + 1, &end, 10);
        if (slash[1] && !*end) {
            if (inet_pton(AF_INET, addr, buf) == 1)
                ok = len >= 0 && len <= 32;
            else if (inet_pton(AF_INET6, addr, buf) == 1)
                ok = len >= 0 && len <= 128, *version = 6;
        }
    }
    if (!ok)
        return nb_error(ctx, 400, NULL, "%s is not a valid IP network.", s);
    return 0;
}

/* A rule being made (_new_ingress_rule's values). */
struct new_rule {
    const char *group_id; /* or NULL */
    char cidr[80];        /* "" for a group rule */
    int version;
    const char *protocol; /* or NULL */
    bool has_ports;
    long long from, to;
};

/* _new_ingress_rule. 0; 1 when the rule has too few parameters ("Not
 * enough parameters"); -1 after a 400. */
static int new_ingress_rule(struct nb_ctx *ctx, const json_t *body, struct new_rule *r)
{
    json_t *proto = json_object_get(body, "ip_protocol");
    json_t *from = json_object_get(body, "from_port"), *to = json_object_get(body, "to_port");
    if (from && json_is_null(from))
        from = NULL;
    if (to && json_is_null(to))
        to = NULL;
    const char *p =
        json_is_string(proto) && *json_string_value(proto) ? json_string_value(proto) : NULL;
    r->protocol = p;
    r->has_ports = false;
    bool defaulted = false;
    if (r->group_id && p && !from && !to) {
        if (!strcasecmp(p, "icmp")) {
            r->from = r->to = -1;
            defaulted = true;
        } else if (!strcasecmp(p, "tcp") || !strcasecmp(p, "udp")) {
            r->from = 1;
            r->to = 65535;
            defaulted = true;
        }
    }
    if (!p || (!defaulted && (!from || !to)))
        return r->group_id ? 0 : 1;
    if (!defaulted && (py_int(from, &r->from) < 0 || py_int(to, &r->to) < 0))
        return nb_error(ctx, 400, NULL, "Invalid input received: %s",
                        !strcasecmp(p, "icmp") ? "Type and Code must be integers for ICMP "
                                                 "protocol type"
                                               : "To and From ports must be integers");
    bool l4 = !strcasecmp(p, "tcp") || !strcasecmp(p, "udp");
    if (!l4 && strcasecmp(p, "icmp"))
        return nb_error(ctx, 400, NULL, "Invalid IP protocol %s.", p);
    char up[8];
    snprintf(up, sizeof(up), "%s", p);
    for (char *c = up; *c; c++)
        *c = (char)toupper((unsigned char)*c);
    if (l4 && r->from > r->to)
        return nb_error(ctx, 400, NULL,
                        "Invalid port range %lld:%lld. Former value cannot be greater than the "
                        "later",
                        r->from, r->to);
    if (l4 && (r->from < 1 || r->to > 65535))
        return nb_error(ctx, 400, NULL,
                        "Invalid port range %lld:%lld. Valid %s ports should be between 1-65535",
                        r->from, r->to, up);
    if (!l4 && (r->from < -1 || r->from > 255 || r->to < -1 || r->to > 255))
        return nb_error(ctx, 400, NULL,
                        "Invalid port range %lld:%lld. For ICMP, the type:code must be valid",
                        r->from, r->to);
    r->has_ports = true;
    return 0;
}

/* _rule_exists against the group's rules as Nova converts them. */
static bool rule_exists(const json_t *group, const struct new_rule *r)
{
    size_t i;
    json_t *nr;
    json_array_foreach (json_object_get(group, "security_group_rules"), i, nr) {
        if (strcmp(nb_json_str(nr, "direction") ? nb_json_str(nr, "direction") : "", "ingress"))
            continue;
        const char *g = nb_json_str(nr, "remote_group_id");
        const char *prefix = nb_json_str(nr, "remote_ip_prefix");
        const char *p = nb_json_str(nr, "protocol");
        /* a new group rule has no cidr, an existing one always has one */
        if (r->group_id || (g != NULL))
            continue;
        if (strcmp(prefix ? prefix : "0.0.0.0/0", r->cidr))
            continue;
        if (!p != !r->protocol || (p && strcmp(p, r->protocol)))
            continue;
        _cleanup_json_ json_t *from = NULL, *to = NULL;
        rule_ports(nr, &from, &to);
        if (!r->has_ports)
            continue;
        if (json_is_integer(from) && json_is_integer(to) && json_integer_value(from) == r->from &&
            json_integer_value(to) == r->to)
            return true;
    }
    return false;
}

/* _make_neutron_security_group_rules_list for one rule. New reference. */
static json_t *neutron_rule(const char *parent, const struct new_rule *r)
{
    json_t *b = json_pack("{s:s, s:s, s:s}", "direction", "ingress", "ethertype",
                          r->version == 6 ? "IPv6" : "IPv4", "security_group_id", parent);
    if (r->protocol)
        json_object_set_new(b, "protocol", json_string(r->protocol));
    if (r->cidr[0])
        json_object_set_new(b, "remote_ip_prefix", json_string(r->cidr));
    if (r->group_id)
        json_object_set_new(b, "remote_group_id", json_string(r->group_id));
    if (r->has_ports && r->from != -1)
        json_object_set_new(b, "port_range_min", json_integer(r->from));
    if (r->has_ports && r->to != -1)
        json_object_set_new(b, "port_range_max", json_integer(r->to));
    return b;
}

/* The checks of SecurityGroupRulesController.create before Neutron is
 * asked: the parent (and source) group, the rule's values, the prefix. */
static json_t *prepare_rule(struct nb_ctx *ctx, const json_t *body, struct new_rule *r,
                            json_t **source)
{
    const char *parent_id = nb_json_str(body, "parent_group_id");
    json_t *gid = json_object_get(body, "group_id");
    memset(r, 0, sizeof(*r));
    r->version = 4;
    if (validate_id(ctx, parent_id) < 0)
        return NULL;
    json_t *parent = nb_network_sg_show(ctx, parent_id);
    if (!parent)
        return NULL;
    if (gid && !json_is_null(gid)) {
        r->group_id = json_string_value(gid);
        if (validate_id(ctx, r->group_id) < 0 || !(*source = nb_network_sg_show(ctx, r->group_id)))
            goto fail;
    } else if (parse_cidr(ctx, json_object_get(body, "cidr"), r->cidr, &r->version) < 0) {
        goto fail;
    }
    int rc = new_ingress_rule(ctx, body, r);
    if (rc < 0)
        goto fail;
    if (rc > 0) {
        nb_error(ctx, 400, NULL, "Not enough parameters to build a valid rule.");
        goto fail;
    }
    if (r->cidr[0]) {
        const char *slash = strchr(r->cidr, '/');
        size_t alen = (size_t)(slash - r->cidr);
        bool any = (alen == 7 && !strncmp(r->cidr, "0.0.0.0", 7)) ||
                   (alen == 2 && !strncmp(r->cidr, "::", 2));
        if (!any && !strcmp(slash + 1, "0")) {
            nb_error(ctx, 400, NULL, "Bad prefix for network in cidr %s", r->cidr);
            goto fail;
        }
    }
    if (rule_exists(parent, r)) {
        nb_error(ctx, 400, NULL, "This rule already exists in group %s", parent_id);
        goto fail;
    }
    return parent;
fail:
    json_decref(parent);
    return NULL;
}

static int do_rule_create(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_proxy_check_version(ctx, NB_PROXY_MAX_MINOR) < 0 ||
        policy(ctx, "rule:create", false, ctx->project_id) < 0)
        return -1;
    json_t *body = from_body(ctx, req, "security_group_rule");
    if (!body)
        return -1;
    struct new_rule r;
    _cleanup_json_ json_t *source = NULL;
    _cleanup_json_ json_t *parent =
        json_is_object(body) ? prepare_rule(ctx, body, &r, &source) : NULL;
    if (!parent)
        return nb_ctx_failed(ctx) ? -1 : nb_error(ctx, 400, NULL, "Missing parameter dict");
    _cleanup_json_ json_t *nbody = neutron_rule(nb_json_str(parent, "id"), &r);
    _cleanup_json_ json_t *nr = nb_network_sg_rule_create(ctx, nbody);
    if (!nr)
        return nb_ctx_status(ctx) == 409 ? nb_srv_error_as(ctx, 403, NULL) : -1;
    json_t *v = rule_view(ctx, nr, source ? source : parent);
    if (!v)
        v = json_null();
    return nb_resp_json(resp, 200, json_pack("{s:o}", "security_group_rule", v));
}

static int do_rule_delete(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_proxy_check_version(ctx, NB_PROXY_MAX_MINOR) < 0 ||
        policy(ctx, "rule:delete", false, ctx->project_id) < 0)
        return -1;
    const char *id = nb_req_param(req, "security_group_rule_id");
    if (validate_id(ctx, id) < 0)
        return -1;
    _cleanup_json_ json_t *nr = nb_network_sg_rule_show(ctx, id);
    if (!nr)
        return -1;
    _cleanup_json_ json_t *g = nb_network_sg_show(ctx, nb_json_str(nr, "security_group_id"));
    if (!g || nb_network_sg_rule_delete(ctx, id) < 0)
        return -1;
    return nb_resp_empty(resp, 202);
}

/* --- a server's groups --------------------------------------------------------- */

static int do_server_groups(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    _cleanup_json_ json_t *inst = nb_srv_instance_get(ctx, nb_req_param(req, "server_id"), false);
    if (!inst || policy(ctx, "list", true, nb_json_str(inst, "project_id")) < 0)
        return -1;
    _cleanup_json_ json_t *groups =
        nb_network_instance_security_groups(ctx, nb_json_str(inst, "uuid"));
    if (!groups)
        return -1;
    return nb_resp_json(resp, 200, groups_body(ctx, groups));
}

/* SecurityGroupActionController._parse: the group's name (borrowed) or
 * NULL after 400. */
static const char *action_group(struct nb_ctx *ctx, const json_t *args)
{
    if (!json_is_object(args)) {
        nb_error(ctx, 400, NULL, "Missing parameter dict");
        return NULL;
    }
    json_t *name = json_object_get(args, "name");
    if (!name) {
        nb_error(ctx, 400, NULL, "Security group not specified");
        return NULL;
    }
    const char *s = json_string_value(name);
    bool blank = true;
    for (const char *p = s; p && *p; p++)
        blank = blank && isspace((unsigned char)*p);
    if (!s || blank) {
        nb_error(ctx, 400, NULL, "Security group name cannot be empty");
        return NULL;
    }
    return s;
}

/* add_to_instance / remove_from_instance. 0/-1. */
static int change_group(struct nb_ctx *ctx, json_t *inst, json_t *args, bool add)
{
    if (policy(ctx, add ? "add" : "remove", false, nb_json_str(inst, "project_id")) < 0)
        return -1;
    const char *name = action_group(ctx, args);
    if (!name)
        return -1;
    char id[NB_UUID_LEN];
    if (nb_network_sg_find(ctx, name, id) < 0) {
        if (nb_ctx_status(ctx) != 404)
            return -1;
        nb_ctx_clear_error(ctx);
        return nb_error(ctx, 404, NULL, "Security group %s is not found for project %s", name,
                        ctx->project_id);
    }
    int rc = nb_network_instance_sg_change(ctx, nb_json_str(inst, "uuid"), id, add);
    if (rc > 0)
        return nb_error(ctx, 404, NULL, "Security group %s not associated with the instance %s",
                        name, nb_json_str(inst, "uuid"));
    return rc;
}

int nb_srv_add_security_group(struct nb_ctx *ctx, json_t *inst, json_t *args)
{
    return nb_proxy_nova_err(ctx, change_group(ctx, inst, args, true));
}

int nb_srv_remove_security_group(struct nb_ctx *ctx, json_t *inst, json_t *args)
{
    return nb_proxy_nova_err(ctx, change_group(ctx, inst, args, false));
}

NB_PROXY_ROUTE(list)
NB_PROXY_ROUTE(show)
NB_PROXY_ROUTE(create)
NB_PROXY_ROUTE(update)
NB_PROXY_ROUTE(delete)
NB_PROXY_ROUTE(rule_create)
NB_PROXY_ROUTE(rule_delete)
NB_PROXY_ROUTE(server_groups)

int nb_compute_security_groups_init(struct nb_env *env)
{
    (void)env;
    nb_http_route("GET", "/compute/v2.1/os-security-groups", h_list, 0);
    nb_http_route("POST", "/compute/v2.1/os-security-groups", h_create, 0);
    nb_http_route("GET", "/compute/v2.1/os-security-groups/{security_group_id}", h_show, 0);
    nb_http_route("PUT", "/compute/v2.1/os-security-groups/{security_group_id}", h_update, 0);
    nb_http_route("DELETE", "/compute/v2.1/os-security-groups/{security_group_id}", h_delete, 0);
    nb_http_route("POST", "/compute/v2.1/os-security-group-rules", h_rule_create, 0);
    nb_http_route("DELETE", "/compute/v2.1/os-security-group-rules/{security_group_rule_id}",
                  h_rule_delete, 0);
    nb_http_route("GET", "/compute/v2.1/servers/{server_id}/os-security-groups", h_server_groups,
                  0);
    return 0;
}
