/* security_groups.c - /networking/v2.0/security-groups and
 * /security-group-rules (Neutron's security-group extension,
 * neutron/db/securitygroups_db.py and neutron/extensions/securitygroup.py).
 *
 * Every project has one group named "default", made on first use (listing or
 * showing groups, creating a group, creating a port without groups) with
 * Neutron's four rules: egress to anywhere for IPv4 and IPv6, and ingress
 * from members of the same group for IPv4 and IPv6. The row in
 * default_security_group (primary key project_id) is what makes a second
 * concurrent first use find the group instead of making another. No other
 * group may be named "default" (409 SecurityGroupDefaultAlreadyExists).
 *
 * A rule is converted and validated as Neutron does, in Neutron's order:
 * the attribute converters (protocol name/number, ports 0-65535, ethertype
 * case, remote_ip_prefix as a CIDR), then the plugin's checks (legacy IPv6
 * ICMP names made canonical, the full port range 1-65535 made "any", port
 * range per protocol, ICMP type/code, prefix version against ethertype, one
 * remote at most, remote group and group existence) and the duplicate check
 * (409 SecurityGroupRuleExists naming the existing rule).
 *
 * Ports name their groups through nb_net_hooks.port_security_groups (filled
 * here, called by ports.c); a group bound to a port cannot be deleted (409
 * SecurityGroupInUse). */
#include "common/cleanup.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "db/db.h"
#include "network/network.h"
#include "network/network_int.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define SG_LOG "nubo.network.security_groups"

/* neutron_lib's IP_PROTOCOL_MAP, in its order (the error message lists it). */
static const struct {
    const char *name;
    int num;
} protocols[] = {
    {"ah", 51},         {"dccp", 33},       {"egp", 8},        {"esp", 50},      {"gre", 47},
    {"hopopt", 0},      {"icmp", 1},        {"igmp", 2},       {"ip", 0},        {"ipip", 4},
    {"ipv6-encap", 41}, {"ipv6-frag", 44},  {"ipv6-icmp", 58}, {"icmpv6", 58},   {"ipv6-nonxt", 59},
    {"ipv6-opts", 60},  {"ipv6-route", 43}, {"ospf", 89},      {"pgm", 113},     {"rsvp", 46},
    {"sctp", 132},      {"tcp", 6},         {"udp", 17},       {"udplite", 136}, {"vrrp", 112},
};
#define NPROTOCOLS (sizeof(protocols) / sizeof(protocols[0]))

/* IP_PROTOCOL_NUM_TO_NAME_MAP: the first name of each number, except that
 * Neutron's map is built from a dict, so the later of two names wins for 0
 * ("ip") and the first for 58 ("ipv6-icmp", icmpv6 being an alias). */
static const char *proto_name_of(int num)
{
    if (num == 0)
        return "ip";
    for (size_t i = 0; i < NPROTOCOLS; i++)
        if (protocols[i].num == num)
            return protocols[i].name;
    return NULL;
}

static int proto_num_of(const char *name)
{
    for (size_t i = 0; i < NPROTOCOLS; i++)
        if (!strcmp(protocols[i].name, name))
            return protocols[i].num;
    return -1;
}

/* The value of a rule's protocol as Neutron compares it: its number, or -1
 * for none. A stored protocol is a known name or a decimal number. */
static int proto_number(const char *p)
{
    if (!p)
        return -1;
    if (isdigit((unsigned char)p[0]))
        return atoi(p);
    return proto_num_of(p);
}

static bool may_see(const struct nb_ctx *ctx, const char *project_id)
{
    return ctx->is_admin || ctx->system || (project_id && !strcmp(project_id, ctx->project_id));
}

/* --- views ---------------------------------------------------------------- */

static json_t *col(const json_t *row, const char *key)
{
    json_t *v = json_object_get(row, key);
    return v ? json_incref(v) : json_null();
}

/* A rule row as Neutron shows it. New reference. */
static json_t *rule_view(const json_t *row)
{
    json_t *v = json_object();
    json_object_set_new(v, "id", col(row, "id"));
    json_object_set_new(v, "security_group_id", col(row, "security_group_id"));
    json_object_set_new(v, "ethertype", col(row, "ethertype"));
    json_object_set_new(v, "direction", col(row, "direction"));
    json_object_set_new(v, "protocol", col(row, "protocol"));
    json_object_set_new(v, "port_range_min", col(row, "port_range_min"));
    json_object_set_new(v, "port_range_max", col(row, "port_range_max"));
    json_object_set_new(v, "remote_ip_prefix", col(row, "remote_ip_prefix"));
    json_object_set_new(v, "remote_address_group_id", json_null());
    json_object_set_new(v, "remote_group_id", col(row, "remote_group_id"));
    const char *prefix = nb_json_str(row, "remote_ip_prefix");
    struct nb_ip net;
    int len;
    char a[64], cidr[80];
    if (prefix && nb_cidr_parse(prefix, &net, &len, false) == 0) {
        snprintf(cidr, sizeof(cidr), "%s/%d", nb_ip_format(&net, a), len);
        json_object_set_new(v, "normalized_cidr", json_string(cidr));
    } else {
        json_object_set_new(v, "normalized_cidr", json_null());
    }
    nb_net_std_attrs(v, row);
    return v;
}

static json_t *rules_of(struct nb_ctx *ctx, const char *sg_id)
{
    json_t *rows = nb_db_rows(
        nb_net_env->db, ctx,
        "SELECT * FROM securitygrouprules WHERE security_group_id = ? ORDER BY rowid", "s", sg_id);
    if (!rows)
        return NULL;
    json_t *out = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r)
        json_array_append_new(out, rule_view(r));
    json_decref(rows);
    return out;
}

/* A group row as Neutron shows it, with its rules. New reference or NULL
 * after nb_error. */
static json_t *sg_view(struct nb_ctx *ctx, const json_t *row)
{
    json_t *rules = rules_of(ctx, nb_json_str(row, "id"));
    if (!rules)
        return NULL;
    json_t *v = json_object();
    json_object_set_new(v, "id", col(row, "id"));
    json_object_set_new(v, "name", col(row, "name"));
    json_object_set_new(v, "stateful", json_boolean(nb_json_int(row, "stateful", 1)));
    json_object_set_new(v, "shared", json_false());
    json_object_set_new(v, "security_group_rules", rules);
    nb_net_std_attrs(v, row);
    return v;
}

/* --- default group --------------------------------------------------------- */

static int insert_rule(struct nb_ctx *ctx, const char *project_id, const char *sg_id,
                       const char *direction, const char *ethertype, const char *remote_group)
{
    char id[NB_UUID_LEN], now[32];
    nb_uuid(id);
    nb_net_now(now);
    return nb_db_exec(nb_net_env->db, ctx,
                      "INSERT INTO securitygrouprules (id, project_id, security_group_id, "
                      "remote_group_id, direction, ethertype, created_at, updated_at) "
                      "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                      "ssssssss", id, project_id, sg_id, remote_group, direction, ethertype, now,
                      now);
}

/* Inserts the default group of project_id with its four rules (inside the
 * caller's transaction). 0/-1. */
static int insert_default(struct nb_ctx *ctx, const char *project_id, const char *id)
{
    char now[32];
    nb_net_now(now);
    if (nb_db_exec(nb_net_env->db, ctx,
                   "INSERT INTO securitygroups (id, project_id, name, description, created_at, "
                   "updated_at) VALUES (?, ?, 'default', 'Default security group', ?, ?)",
                   "ssss", id, project_id, now, now) < 0 ||
        nb_db_exec(nb_net_env->db, ctx,
                   "INSERT INTO default_security_group (project_id, security_group_id) "
                   "VALUES (?, ?)",
                   "ss", project_id, id) < 0)
        return -1;
    static const char *const eth[] = {"IPv4", "IPv6"};
    for (int i = 0; i < 2; i++)
        if (insert_rule(ctx, project_id, id, "ingress", eth[i], id) < 0 ||
            insert_rule(ctx, project_id, id, "egress", eth[i], NULL) < 0)
            return -1;
    return 0;
}

/* Writes the id of project_id's default group into id, making it on first
 * use (inside ensure_default's transaction). 0/-1. */
static int ensure_default_in(struct nb_ctx *ctx, const char *project_id, char id[NB_UUID_LEN])
{
    _cleanup_json_ json_t *row =
        nb_db_row(nb_net_env->db, ctx,
                  "SELECT security_group_id FROM default_security_group WHERE project_id = ?", "s",
                  project_id);
    if (nb_ctx_failed(ctx))
        return -1;
    if (row) {
        nb_strlcpy(id, nb_json_str(row, "security_group_id"), NB_UUID_LEN);
        return 0;
    }
    nb_uuid(id);
    if (insert_default(ctx, project_id, id) < 0)
        return -1;
    NB_INFO(SG_LOG, ctx, NULL, "created the default security group %s of project %s", id,
            project_id);
    return 0;
}

/* The same in a transaction of its own (so call it outside one). A
 * concurrent first use waits on the transaction and then finds the group. */
static int ensure_default(struct nb_ctx *ctx, const char *project_id, char id[NB_UUID_LEN])
{
    struct nb_db *db = nb_net_env->db;
    if (!project_id || !project_id[0])
        return nb_error(ctx, 400, "HTTPBadRequest", "A project is required.");
    _cleanup_json_ json_t *row = nb_db_row(
        db, ctx, "SELECT security_group_id FROM default_security_group WHERE project_id = ?", "s",
        project_id);
    if (nb_ctx_failed(ctx))
        return -1;
    if (row) {
        nb_strlcpy(id, nb_json_str(row, "security_group_id"), NB_UUID_LEN);
        return 0;
    }
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    if (ensure_default_in(ctx, project_id, id) < 0) {
        nb_db_rollback(db);
        return -1;
    }
    return nb_db_commit(db, ctx);
}

/* --- loading ----------------------------------------------------------------- */

/* The group id visible to ctx, or NULL after 404 SecurityGroupNotFound. */
static json_t *sg_load(struct nb_ctx *ctx, const char *id)
{
    json_t *row =
        nb_db_row(nb_net_env->db, ctx, "SELECT * FROM securitygroups WHERE id = ?", "s", id);
    if (!row && nb_ctx_failed(ctx))
        return NULL;
    if (!row || !may_see(ctx, nb_json_str(row, "project_id"))) {
        json_decref(row);
        nb_error(ctx, 404, "SecurityGroupNotFound", "Security group %s does not exist", id);
        return NULL;
    }
    return row;
}

static json_t *rule_load(struct nb_ctx *ctx, const char *id)
{
    json_t *row = nb_db_row(nb_net_env->db, ctx,
                            "SELECT r.*, g.project_id AS sg_project_id FROM securitygrouprules r "
                            "JOIN securitygroups g ON g.id = r.security_group_id WHERE r.id = ?",
                            "s", id);
    if (!row && nb_ctx_failed(ctx))
        return NULL;
    if (!row || !(may_see(ctx, nb_json_str(row, "project_id")) ||
                  may_see(ctx, nb_json_str(row, "sg_project_id")))) {
        json_decref(row);
        nb_error(ctx, 404, "SecurityGroupRuleNotFound", "Security group rule %s does not exist",
                 id);
        return NULL;
    }
    json_object_del(row, "sg_project_id");
    return row;
}

/* --- hook for ports ----------------------------------------------------------- */

static json_t *port_security_groups(struct nb_ctx *ctx, const char *project_id,
                                    const json_t *requested)
{
    if (!requested) {
        /* ports.c asks for the default before its transaction; ports of no
         * project (a router's gateway) get no group */
        char id[NB_UUID_LEN];
        if (!project_id || !project_id[0])
            return json_array();
        if (ensure_default(ctx, project_id, id) < 0)
            return NULL;
        return json_pack("[s]", id);
    }
    if (!json_is_array(requested)) {
        nb_error(ctx, 400, "HTTPBadRequest",
                 "Invalid input for security_groups. Reason: '%s' is not a list.", "?");
        return NULL;
    }
    json_t *out = json_array();
    size_t i;
    json_t *v;
    json_array_foreach (requested, i, v) {
        const char *id = json_string_value(v);
        char buf[256];
        if (!id || nb_net_validate_uuid(id, buf)) {
            json_decref(out);
            nb_error(ctx, 400, "HTTPBadRequest",
                     "Invalid input for security_groups. Reason: '%s' is not a valid UUID.",
                     id ? id : "None");
            return NULL;
        }
        _cleanup_json_ json_t *row = nb_db_row(
            nb_net_env->db, ctx, "SELECT project_id FROM securitygroups WHERE id = ?", "s", id);
        const char *p = row ? nb_json_str(row, "project_id") : NULL;
        if (!row || !(ctx->is_admin || ctx->system || !strcmp(p, project_id))) {
            json_decref(out);
            if (!nb_ctx_failed(ctx))
                nb_error(ctx, 404, "SecurityGroupNotFound", "Security group %s does not exist", id);
            return NULL;
        }
        bool dup = false;
        size_t j;
        json_t *w;
        json_array_foreach (out, j, w)
            dup = dup || !strcmp(json_string_value(w), id);
        if (!dup)
            json_array_append_new(out, json_string(id));
    }
    return out;
}

/* --- security groups ------------------------------------------------------------ */

static const struct nb_net_attr sg_attrs[] = {
    {"name", NB_A_STR, true, true, false, false, 255},
    {"description", NB_A_STR, true, true, false, false, 255},
    {"stateful", NB_A_BOOL, true, true, false, false, 0},
    {NULL, 0, false, false, false, false, 0},
};

/* Neutron's name_not_default validator. 0/-1. */
static int check_name(struct nb_ctx *ctx, const json_t *body)
{
    const char *name = nb_json_str(body, "name");
    if (name && !strcasecmp(name, "default"))
        return nb_error(ctx, 409, "SecurityGroupDefaultAlreadyExists",
                        "Default security group already exists.");
    return 0;
}

/* The view of group id visible to ctx: new reference, or NULL after
 * nb_error (404 SecurityGroupNotFound). */
static json_t *sg_load_view(struct nb_ctx *ctx, const char *id)
{
    _cleanup_json_ json_t *row = sg_load(ctx, id);
    return row ? sg_view(ctx, row) : NULL;
}

json_t *nb_network_sg_create(struct nb_ctx *ctx, json_t *body)
{
    char project[NB_ID_LEN], def[NB_UUID_LEN];
    if (nb_net_check_attrs(ctx, body, sg_attrs, true) < 0 || check_name(ctx, body) < 0 ||
        nb_net_owner(ctx, body, project) < 0 || ensure_default(ctx, project, def) < 0 ||
        nb_net_quota_check(ctx, project, "security_group") < 0)
        return NULL;
    const char *name = nb_json_str(body, "name");
    const char *desc = nb_json_str(body, "description");
    json_t *stateful = json_object_get(body, "stateful");
    char id[NB_UUID_LEN], now[32];
    nb_uuid(id);
    nb_net_now(now);
    struct nb_db *db = nb_net_env->db;
    if (nb_db_begin(db, ctx) < 0)
        return NULL;
    static const char *const eth[] = {"IPv4", "IPv6"};
    int rc = nb_db_exec(db, ctx,
                        "INSERT INTO securitygroups (id, project_id, name, description, stateful, "
                        "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                        "ssssbss", id, project, name ? name : "", desc ? desc : "",
                        !stateful || json_is_true(stateful), now, now);
    for (int i = 0; rc >= 0 && i < 2; i++)
        rc = insert_rule(ctx, project, id, "egress", eth[i], NULL);
    if (rc < 0) {
        nb_db_rollback(db);
        return NULL;
    }
    if (nb_db_commit(db, ctx) < 0)
        return NULL;
    NB_INFO(SG_LOG, ctx, NULL, "created security group %s (%s)", id, name ? name : "");
    return sg_load_view(ctx, id);
}

static int sg_create(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    json_t *body = nb_net_body(ctx, req, "security_group");
    json_t *v = body ? nb_network_sg_create(ctx, body) : NULL;
    return v ? nb_net_show_respond(req, resp, 201, "security_group", v) : -1;
}

/* Keeps the groups of project (all for NULL) and builds their views. */
static json_t *sg_views(struct nb_ctx *ctx, const char *project)
{
    _cleanup_json_ json_t *rows =
        project
            ? nb_db_rows(nb_net_env->db, ctx,
                         "SELECT * FROM securitygroups WHERE project_id = ? ORDER BY rowid", "s",
                         project)
            : nb_db_rows(nb_net_env->db, ctx, "SELECT * FROM securitygroups ORDER BY rowid", "");
    if (!rows)
        return NULL;
    json_t *views = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        json_t *v = sg_view(ctx, r);
        if (!v) {
            json_decref(views);
            return NULL;
        }
        json_array_append_new(views, v);
    }
    return views;
}

static int sg_list(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    /* Neutron makes the default group of the project asked about (the
     * project_id/tenant_id filter, else the caller's) on every list */
    const char *want = nb_req_query(req, "project_id");
    if (!want)
        want = nb_req_query(req, "tenant_id");
    if (!want || !ctx->is_admin)
        want = ctx->project_id;
    char def[NB_UUID_LEN];
    if (want[0] && ensure_default(ctx, want, def) < 0)
        return -1;
    json_t *views = sg_views(ctx, ctx->is_admin || ctx->system ? NULL : ctx->project_id);
    if (!views)
        return -1;
    return nb_net_list_respond(ctx, req, resp, "security_groups", views);
}

json_t *nb_network_sg_list(struct nb_ctx *ctx, bool all_projects)
{
    char def[NB_UUID_LEN];
    if (ctx->project_id[0] && ensure_default(ctx, ctx->project_id, def) < 0)
        return NULL;
    return sg_views(ctx, all_projects && (ctx->is_admin || ctx->system) ? NULL : ctx->project_id);
}

json_t *nb_network_sg_show(struct nb_ctx *ctx, const char *id)
{
    char def[NB_UUID_LEN];
    if (ctx->project_id[0] && ensure_default(ctx, ctx->project_id, def) < 0)
        return NULL;
    return sg_load_view(ctx, id);
}

static int sg_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    json_t *v = nb_network_sg_show(ctx, nb_req_param(req, "security_group_id"));
    return v ? nb_net_show_respond(req, resp, 200, "security_group", v) : -1;
}

json_t *nb_network_sg_update(struct nb_ctx *ctx, const char *id, json_t *body)
{
    if (nb_net_check_attrs(ctx, body, sg_attrs, false) < 0 || check_name(ctx, body) < 0)
        return NULL;
    _cleanup_json_ json_t *row = sg_load(ctx, id);
    if (!row)
        return NULL;
    if (!strcmp(nb_json_str(row, "name"), "default") && json_object_get(body, "name")) {
        nb_error(ctx, 409, "SecurityGroupCannotUpdateDefault",
                 "Updating default security group not allowed.");
        return NULL;
    }
    json_t *stateful = json_object_get(body, "stateful");
    struct nb_db *db = nb_net_env->db;
    if (stateful && json_is_true(stateful) != (nb_json_int(row, "stateful", 1) != 0) &&
        nb_db_int(db, ctx, 0,
                  "SELECT COUNT(*) FROM securitygroupportbindings WHERE security_group_id = ?", "s",
                  id) > 0) {
        nb_error(ctx, 409, "SecurityGroupInUse", "Security Group %s in use.", id);
        return NULL;
    }
    const char *name = nb_json_str(body, "name");
    const char *desc = nb_json_str(body, "description");
    bool new_stateful = stateful ? json_is_true(stateful) : nb_json_int(row, "stateful", 1) != 0;
    char now[32];
    nb_net_now(now);
    if (nb_db_exec(db, ctx,
                   "UPDATE securitygroups SET name = COALESCE(?, name), "
                   "description = COALESCE(?, description), stateful = ?, updated_at = ?, "
                   "revision_number = revision_number + 1 WHERE id = ?",
                   "ssbss", name, desc, new_stateful, now, id) < 0)
        return NULL;
    return sg_load_view(ctx, id);
}

static int sg_update(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    json_t *body = nb_net_body(ctx, req, "security_group");
    json_t *v =
        body ? nb_network_sg_update(ctx, nb_req_param(req, "security_group_id"), body) : NULL;
    return v ? nb_net_show_respond(req, resp, 200, "security_group", v) : -1;
}

int nb_network_sg_delete(struct nb_ctx *ctx, const char *id)
{
    struct nb_db *db = nb_net_env->db;
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    _cleanup_json_ json_t *row = NULL;
    if (nb_db_int(db, ctx, 0,
                  "SELECT COUNT(*) FROM securitygroupportbindings WHERE security_group_id = ?", "s",
                  id) > 0)
        nb_error(ctx, 409, "SecurityGroupInUse", "Security Group %s in use.", id);
    else if ((row = sg_load(ctx, id)) && !strcmp(nb_json_str(row, "name"), "default") &&
             !ctx->is_admin)
        nb_error(ctx, 409, "SecurityGroupCannotRemoveDefault",
                 "Insufficient rights for removing default security group.");
    else if (row)
        nb_db_exec(db, ctx, "DELETE FROM securitygroups WHERE id = ?", "s", id);
    if (nb_ctx_failed(ctx)) {
        nb_db_rollback(db);
        return -1;
    }
    if (nb_db_commit(db, ctx) < 0)
        return -1;
    NB_INFO(SG_LOG, ctx, NULL, "deleted security group %s", id);
    return 0;
}

static int sg_delete(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_network_sg_delete(ctx, nb_req_param(req, "security_group_id")) < 0)
        return -1;
    return nb_resp_empty(resp, 204);
}

/* --- rules: conversion and validation ---------------------------------------------- */

/* A rule being created, after conversion. Strings point into the body or
 * into the fixed buffers. */
struct rule {
    const char *sg_id, *direction, *remote_group_id, *description;
    char ethertype[8];
    char protocol[16]; /* "" = none */
    long long pmin, pmax;
    bool has_min, has_max;
    char prefix[80]; /* "" = none */
};

static const char *const protocol_values =
    "[None, 'ah', 'dccp', 'egp', 'esp', 'gre', 'hopopt', 'icmp', 'igmp', 'ip', 'ipip', "
    "'ipv6-encap', 'ipv6-frag', 'ipv6-icmp', 'icmpv6', 'ipv6-nonxt', 'ipv6-opts', 'ipv6-route', "
    "'ospf', 'pgm', 'rsvp', 'sctp', 'tcp', 'udp', 'udplite', 'vrrp']";

/* Python's str() of a JSON scalar for a message, into buf[128]. */
static const char *py_scalar(const json_t *v, char *buf)
{
    if (json_is_string(v))
        snprintf(buf, 128, "%s", json_string_value(v));
    else if (json_is_integer(v))
        snprintf(buf, 128, "%lld", json_integer_value(v));
    else if (json_is_real(v))
        snprintf(buf, 128, "%g", json_real_value(v));
    else if (json_is_true(v))
        snprintf(buf, 128, "True");
    else if (json_is_false(v))
        snprintf(buf, 128, "False");
    else
        snprintf(buf, 128, "None");
    return buf;
}

/* Parses a decimal integer string as Python's int() (surrounding blanks
 * allowed). 0/-1. */
static int py_int(const char *s, long long *out)
{
    char *end;
    while (isspace((unsigned char)*s))
        s++;
    if (!*s)
        return -1;
    long long n = strtoll(s, &end, 10);
    while (isspace((unsigned char)*end))
        end++;
    if (*end)
        return -1;
    *out = n;
    return 0;
}

/* convert_protocol. 0/-1. */
static int conv_protocol(struct nb_ctx *ctx, const json_t *v, struct rule *r)
{
    char buf[128];
    r->protocol[0] = '\0';
    if (!v || json_is_null(v))
        return 0;
    long long n;
    if (json_is_integer(v) || (json_is_string(v) && py_int(json_string_value(v), &n) == 0)) {
        if (json_is_integer(v))
            n = json_integer_value(v);
        if (n >= 0 && n <= 255) {
            snprintf(r->protocol, sizeof(r->protocol), "%lld", n);
            return 0;
        }
    } else if (json_is_string(v) && json_string_length(v) < sizeof(r->protocol)) {
        char low[16];
        const char *s = json_string_value(v);
        size_t i = 0;
        for (; s[i]; i++)
            low[i] = (char)tolower((unsigned char)s[i]);
        low[i] = '\0';
        if (proto_num_of(low) >= 0) {
            memcpy(r->protocol, low, i + 1);
            return 0;
        }
    }
    return nb_error(ctx, 400, "SecurityGroupRuleInvalidProtocol",
                    "Security group rule protocol %s not supported. Only protocol values %s and "
                    "integer representations [0 to 255] are supported.",
                    py_scalar(v, buf), protocol_values);
}

/* convert_validate_port_value. 0/-1. */
static int conv_port(struct nb_ctx *ctx, const json_t *v, long long *out, bool *has)
{
    char buf[128];
    *has = false;
    if (!v || json_is_null(v))
        return 0;
    long long n;
    bool ok = false;
    if (json_is_integer(v)) {
        n = json_integer_value(v);
        ok = true;
    } else if (json_is_string(v)) {
        ok = py_int(json_string_value(v), &n) == 0;
    }
    if (!ok || n < 0 || n > 65535)
        return nb_error(ctx, 400, "SecurityGroupInvalidPortValue", "Invalid value for port %s",
                        py_scalar(v, buf));
    *out = n;
    *has = true;
    return 0;
}

/* convert_ethertype_to_case_insensitive (default IPv4). 0/-1. */
static int conv_ethertype(struct nb_ctx *ctx, const json_t *v, struct rule *r)
{
    char buf[128];
    if (!v) {
        strcpy(r->ethertype, "IPv4");
        return 0;
    }
    const char *s = json_string_value(v);
    if (s && !strcasecmp(s, "IPv4"))
        strcpy(r->ethertype, "IPv4");
    else if (s && !strcasecmp(s, "IPv6"))
        strcpy(r->ethertype, "IPv6");
    else
        return nb_error(ctx, 400, "SecurityGroupRuleInvalidEtherType",
                        "Security group rule for ethertype '%s' not supported. Allowed values "
                        "are ['IPv4', 'IPv6'].",
                        py_scalar(v, buf));
    return 0;
}

/* convert_ip_prefix_to_cidr: "addr" or "addr/len" as netaddr.IPNetwork
 * prints it (the address as given, canonical, with its length). 0/-1. */
static int conv_prefix(struct nb_ctx *ctx, const json_t *v, struct rule *r)
{
    char buf[128];
    r->prefix[0] = '\0';
    if (!v || json_is_null(v) || (json_is_string(v) && !json_string_length(v)))
        return 0;
    const char *s = json_string_value(v);
    char addr[64];
    struct nb_ip ip;
    long long len = -1;
    const char *slash = s ? strchr(s, '/') : NULL;
    bool ok = s && strlen(s) < sizeof(addr);
    if (ok) {
        size_t alen = slash ? (size_t)(slash - s) : strlen(s);
        memcpy(addr, s, alen);
        addr[alen] = '\0';
        ok = nb_ip_parse(addr, &ip) == 0;
    }
    if (ok && slash) {
        const char *p = slash + 1;
        ok = *p && strspn(p, "0123456789") == strlen(p) && strlen(p) <= 3 && py_int(p, &len) == 0 &&
             len <= (ip.version == 4 ? 32 : 128);
    } else if (ok) {
        len = ip.version == 4 ? 32 : 128;
    }
    if (!ok)
        return nb_error(ctx, 400, "InvalidCIDR", "Invalid CIDR %s given as IP prefix.",
                        py_scalar(v, buf));
    char a[64];
    snprintf(r->prefix, sizeof(r->prefix), "%s/%lld", nb_ip_format(&ip, a), len);
    return 0;
}

static const struct nb_net_attr rule_attrs[] = {
    {"security_group_id", NB_A_STR, true, false, true, false, 36},
    {"remote_group_id", NB_A_ANY, true, false, false, true, 0},
    {"direction", NB_A_ANY, true, false, true, false, 0},
    {"protocol", NB_A_ANY, true, false, false, true, 0},
    {"port_range_min", NB_A_ANY, true, false, false, true, 0},
    {"port_range_max", NB_A_ANY, true, false, false, true, 0},
    {"ethertype", NB_A_ANY, true, false, false, false, 0},
    {"remote_ip_prefix", NB_A_ANY, true, false, false, true, 0},
    {"description", NB_A_STR, true, false, false, false, 255},
    {"remote_address_group_id", NB_A_ANY, true, false, false, true, 0},
    {NULL, 0, false, false, false, false, 0},
};

/* The attribute converters and validators, in Neutron's attribute order. */
static int convert_rule(struct nb_ctx *ctx, const json_t *body, struct rule *r)
{
    char buf[128];
    memset(r, 0, sizeof(*r));
    r->sg_id = nb_json_str(body, "security_group_id");
    json_t *rg = json_object_get(body, "remote_group_id");
    if (rg && !json_is_null(rg)) {
        r->remote_group_id = json_string_value(rg);
        if (!r->remote_group_id)
            return nb_error(ctx, 404, "SecurityGroupNotFound", "Security group %s does not exist",
                            py_scalar(rg, buf));
    }
    json_t *dir = json_object_get(body, "direction");
    r->direction = json_string_value(dir);
    if (!r->direction || (strcmp(r->direction, "ingress") && strcmp(r->direction, "egress")))
        return nb_error(ctx, 400, "HTTPBadRequest",
                        "Invalid input for direction. Reason: %s is not in ['ingress', "
                        "'egress'].",
                        json_is_string(dir) ? json_string_value(dir) : py_scalar(dir, buf));
    if (conv_protocol(ctx, json_object_get(body, "protocol"), r) < 0 ||
        conv_port(ctx, json_object_get(body, "port_range_min"), &r->pmin, &r->has_min) < 0 ||
        conv_port(ctx, json_object_get(body, "port_range_max"), &r->pmax, &r->has_max) < 0 ||
        conv_ethertype(ctx, json_object_get(body, "ethertype"), r) < 0 ||
        conv_prefix(ctx, json_object_get(body, "remote_ip_prefix"), r) < 0)
        return -1;
    json_t *ag = json_object_get(body, "remote_address_group_id");
    if (ag && !json_is_null(ag))
        return nb_error(ctx, 404, "AddressGroupNotFound", "Address group %s could not be found.",
                        py_scalar(ag, buf));
    r->description = nb_json_str(body, "description");
    return 0;
}

/* _validate_port_range. 0/-1. */
static int check_ports(struct nb_ctx *ctx, const struct rule *r)
{
    if (!r->has_min && !r->has_max)
        return 0;
    if (!r->protocol[0])
        return nb_error(ctx, 400, "SecurityGroupProtocolRequiredWithPorts",
                        "Must also specify protocol if port range is given.");
    int p = proto_number(r->protocol);
    if (p == 6 || p == 17 || p == 33 || p == 132 || p == 136) {
        if ((r->has_min && r->pmin == 0) || (r->has_max && r->pmax == 0))
            return nb_error(ctx, 400, "SecurityGroupInvalidPortValue", "Invalid value for port 0");
        if (!(r->has_min && r->has_max && r->pmin <= r->pmax))
            return nb_error(ctx, 400, "SecurityGroupInvalidPortRange",
                            "For TCP/UDP protocols, port_range_min must be <= port_range_max");
    } else if (p == 1 || p == 58) {
        if (r->has_min && r->pmin > 255)
            return nb_error(ctx, 400, "SecurityGroupInvalidIcmpValue",
                            "Invalid value for ICMP type (port_range_min) %lld. It must be 0 to "
                            "255.",
                            r->pmin);
        if (r->has_max && r->pmax > 255)
            return nb_error(ctx, 400, "SecurityGroupInvalidIcmpValue",
                            "Invalid value for ICMP code (port_range_max) %lld. It must be 0 to "
                            "255.",
                            r->pmax);
        if (!r->has_min && r->has_max)
            return nb_error(ctx, 400, "SecurityGroupMissingIcmpType",
                            "ICMP code (port-range-max) %lld is provided but ICMP type "
                            "(port-range-min) is missing.",
                            r->pmax);
    } else {
        return nb_error(ctx, 400, "SecurityGroupInvalidProtocolForPort",
                        "Ports cannot be specified for protocol %d. Ports are only supported "
                        "for DCCP, SCTP, TCP, UDP, UDPLITE.",
                        p);
    }
    return 0;
}

/* _validate_ethertype_and_protocol: the IPv6-only protocols. 0/-1. */
static int check_ethertype_protocol(struct nb_ctx *ctx, const struct rule *r)
{
    static const char *const v6only[] = {
        "ipv6-encap", "ipv6-frag", "ipv6-icmp", "icmpv6", "ipv6-nonxt", "ipv6-opts", "ipv6-route",
        "41",         "44",        "58",        "59",     "60",         "43"};
    if (strcmp(r->ethertype, "IPv4"))
        return 0;
    for (size_t i = 0; i < sizeof(v6only) / sizeof(v6only[0]); i++)
        if (!strcmp(r->protocol, v6only[i]))
            return nb_error(ctx, 400, "SecurityGroupEthertypeConflictWithProtocol",
                            "Invalid ethertype %s for protocol %s.", r->ethertype, r->protocol);
    return 0;
}

/* The plugin's _validate_security_group_rule, in its order. 0/-1. */
static int validate_rule(struct nb_ctx *ctx, struct rule *r, const char *input_prefix)
{
    /* _make_canonical_ipv6_icmp_protocol */
    if (!strcmp(r->ethertype, "IPv6")) {
        if (!strcmp(r->protocol, "icmp") || !strcmp(r->protocol, "icmpv6"))
            strcpy(r->protocol, "ipv6-icmp");
        else if (!strcmp(r->protocol, "1"))
            strcpy(r->protocol, "58");
    }
    /* _make_canonical_port_range */
    if (r->has_min && r->has_max && r->pmin == 1 && r->pmax == 65535)
        r->has_min = r->has_max = false;
    if (check_ports(ctx, r) < 0)
        return -1;
    if (r->prefix[0]) {
        bool v6 = strchr(r->prefix, ':') != NULL;
        if (strcmp(r->ethertype, v6 ? "IPv6" : "IPv4"))
            return nb_error(ctx, 400, "SecurityGroupRuleParameterConflict",
                            "Conflicting value ethertype %s for CIDR %s", r->ethertype,
                            input_prefix);
    }
    if (check_ethertype_protocol(ctx, r) < 0)
        return -1;
    if (r->prefix[0] && r->remote_group_id)
        return nb_error(ctx, 400, "SecurityGroupMultipleRemoteEntites",
                        "Only one of remote_ip_prefix or remote_group_id or "
                        "remote_address_group_id may be provided.");
    if (r->remote_group_id) {
        _cleanup_json_ json_t *g = sg_load(ctx, r->remote_group_id);
        if (!g)
            return -1;
    }
    return 0;
}

/* _rule_to_key's value of one field. */
static void key_protocol(const char *p, const char *ethertype, char *out, size_t n)
{
    if (!p || !p[0]) {
        snprintf(out, n, "+");
        return;
    }
    char proto[16];
    nb_strlcpy(proto, p, sizeof(proto));
    if (!strcmp(ethertype, "IPv6")) {
        if (!strcmp(proto, "icmp") || !strcmp(proto, "icmpv6"))
            strcpy(proto, "ipv6-icmp");
        else if (!strcmp(proto, "1"))
            strcpy(proto, "58");
    }
    int num = proto_num_of(proto);
    if (num >= 0) {
        snprintf(out, n, "%s/%d", proto, num);
        return;
    }
    const char *name = isdigit((unsigned char)proto[0]) ? proto_name_of(atoi(proto)) : NULL;
    snprintf(out, n, "%s/%s", name ? name : proto, proto);
}

/* The comparison key of a rule (Neutron's _rule_to_key). */
static void rule_key(const char *direction, const char *ethertype, bool has_max, long long pmax,
                     bool has_min, long long pmin, const char *protocol, const char *remote_group,
                     const char *prefix, char *out, size_t n)
{
    char pmaxs[24] = "+", pmins[24] = "+", proto[48];
    if (has_max)
        snprintf(pmaxs, sizeof(pmaxs), "%lld", pmax);
    if (has_min)
        snprintf(pmins, sizeof(pmins), "%lld", pmin);
    key_protocol(protocol, ethertype, proto, sizeof(proto));
    bool any = !prefix || !prefix[0] || !strcmp(prefix, "0.0.0.0/0") || !strcmp(prefix, "::/0");
    snprintf(out, n, "%s_%s_%s_%s_%s_%s_%s", direction, ethertype, pmaxs, pmins, proto,
             remote_group ? remote_group : "+", any ? "+" : prefix);
}

/* 409 SecurityGroupRuleExists when the group has the same rule. 0/-1. */
static int check_duplicate(struct nb_ctx *ctx, const struct rule *r)
{
    _cleanup_json_ json_t *rows =
        nb_db_rows(nb_net_env->db, ctx,
                   "SELECT * FROM securitygrouprules WHERE security_group_id = ?", "s", r->sg_id);
    if (!rows)
        return -1;
    char want[512], have[512];
    rule_key(r->direction, r->ethertype, r->has_max, r->pmax, r->has_min, r->pmin, r->protocol,
             r->remote_group_id, r->prefix, want, sizeof(want));
    size_t i;
    json_t *row;
    json_array_foreach (rows, i, row) {
        json_t *mx = json_object_get(row, "port_range_max");
        json_t *mn = json_object_get(row, "port_range_min");
        rule_key(nb_json_str(row, "direction"), nb_json_str(row, "ethertype"), json_is_integer(mx),
                 json_integer_value(mx), json_is_integer(mn), json_integer_value(mn),
                 nb_json_str(row, "protocol"), nb_json_str(row, "remote_group_id"),
                 nb_json_str(row, "remote_ip_prefix"), have, sizeof(have));
        if (!strcmp(want, have))
            return nb_error(ctx, 409, "SecurityGroupRuleExists",
                            "Security group rule already exists. Rule id is %s.",
                            nb_json_str(row, "id"));
    }
    return 0;
}

static int insert_checked_rule(struct nb_ctx *ctx, const struct rule *r, const char *project,
                               const char *id)
{
    char now[32];
    nb_net_now(now);
    struct nb_db *db = nb_net_env->db;
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    /* text bound into INTEGER columns is stored as an integer (affinity) */
    char pmin[24], pmax[24];
    snprintf(pmin, sizeof(pmin), "%lld", r->pmin);
    snprintf(pmax, sizeof(pmax), "%lld", r->pmax);
    int rc = check_duplicate(ctx, r);
    if (rc == 0)
        rc = nb_db_exec(db, ctx,
                        "INSERT INTO securitygrouprules (id, project_id, security_group_id, "
                        "remote_group_id, direction, ethertype, protocol, port_range_min, "
                        "port_range_max, remote_ip_prefix, description, created_at, updated_at) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        "sssssssssssss", id, project, r->sg_id, r->remote_group_id, r->direction,
                        r->ethertype, r->protocol[0] ? r->protocol : NULL, r->has_min ? pmin : NULL,
                        r->has_max ? pmax : NULL, r->prefix[0] ? r->prefix : NULL,
                        r->description ? r->description : "", now, now);
    if (rc < 0) {
        nb_db_rollback(db);
        return -1;
    }
    return nb_db_commit(db, ctx);
}

json_t *nb_network_sg_rule_create(struct nb_ctx *ctx, json_t *body)
{
    struct rule r;
    char project[NB_ID_LEN];
    if (nb_net_check_attrs(ctx, body, rule_attrs, true) < 0 || convert_rule(ctx, body, &r) < 0 ||
        nb_net_owner(ctx, body, project) < 0 ||
        nb_net_quota_check(ctx, project, "security_group_rule") < 0)
        return NULL;
    if (validate_rule(ctx, &r, nb_json_str(body, "remote_ip_prefix")) < 0)
        return NULL;
    _cleanup_json_ json_t *sg = sg_load(ctx, r.sg_id);
    if (!sg)
        return NULL;
    if (!ctx->is_admin && strcmp(nb_json_str(sg, "project_id"), project)) {
        nb_error(ctx, 404, "SecurityGroupNotFound", "Security group %s does not exist", r.sg_id);
        return NULL;
    }
    char id[NB_UUID_LEN];
    nb_uuid(id);
    if (insert_checked_rule(ctx, &r, project, id) < 0)
        return NULL;
    NB_INFO(SG_LOG, ctx, NULL, "created security group rule %s in group %s", id, r.sg_id);
    return nb_network_sg_rule_show(ctx, id);
}

static int rule_create(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    json_t *body = nb_net_body(ctx, req, "security_group_rule");
    json_t *v = body ? nb_network_sg_rule_create(ctx, body) : NULL;
    return v ? nb_net_show_respond(req, resp, 201, "security_group_rule", v) : -1;
}

static int rule_list(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    bool all = ctx->is_admin || ctx->system;
    _cleanup_json_ json_t *rows =
        all ? nb_db_rows(nb_net_env->db, ctx, "SELECT * FROM securitygrouprules ORDER BY rowid", "")
            : nb_db_rows(nb_net_env->db, ctx,
                         "SELECT r.* FROM securitygrouprules r JOIN securitygroups g "
                         "ON g.id = r.security_group_id WHERE r.project_id = ? OR g.project_id = ? "
                         "ORDER BY r.rowid",
                         "ss", ctx->project_id, ctx->project_id);
    if (!rows)
        return -1;
    json_t *views = json_array();
    size_t i;
    json_t *row;
    json_array_foreach (rows, i, row)
        json_array_append_new(views, rule_view(row));
    return nb_net_list_respond(ctx, req, resp, "security_group_rules", views);
}

json_t *nb_network_sg_rule_show(struct nb_ctx *ctx, const char *id)
{
    _cleanup_json_ json_t *row = rule_load(ctx, id);
    return row ? rule_view(row) : NULL;
}

static int rule_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    json_t *v = nb_network_sg_rule_show(ctx, nb_req_param(req, "security_group_rule_id"));
    return v ? nb_net_show_respond(req, resp, 200, "security_group_rule", v) : -1;
}

int nb_network_sg_rule_delete(struct nb_ctx *ctx, const char *id)
{
    _cleanup_json_ json_t *row = rule_load(ctx, id);
    if (!row ||
        nb_db_exec(nb_net_env->db, ctx, "DELETE FROM securitygrouprules WHERE id = ?", "s", id) < 0)
        return -1;
    NB_INFO(SG_LOG, ctx, NULL, "deleted security group rule %s", id);
    return 0;
}

static int rule_delete(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_network_sg_rule_delete(ctx, nb_req_param(req, "security_group_rule_id")) < 0)
        return -1;
    return nb_resp_empty(resp, 204);
}

int nb_net_security_groups_init(struct nb_env *env)
{
    (void)env;
    nb_http_route("GET", "/networking/v2.0/security-groups", sg_list, 0);
    nb_http_route("POST", "/networking/v2.0/security-groups", sg_create, 0);
    nb_http_route("GET", "/networking/v2.0/security-groups/{security_group_id}", sg_show, 0);
    nb_http_route("PUT", "/networking/v2.0/security-groups/{security_group_id}", sg_update, 0);
    nb_http_route("DELETE", "/networking/v2.0/security-groups/{security_group_id}", sg_delete, 0);
    nb_http_route("GET", "/networking/v2.0/security-group-rules", rule_list, 0);
    nb_http_route("POST", "/networking/v2.0/security-group-rules", rule_create, 0);
    nb_http_route("GET", "/networking/v2.0/security-group-rules/{security_group_rule_id}",
                  rule_show, 0);
    nb_http_route("DELETE", "/networking/v2.0/security-group-rules/{security_group_rule_id}",
                  rule_delete, 0);
    nb_net_extension("security-group", "security-group", "The security groups extension.");
    nb_net_extension("security-groups-normalized-cidr", "Security Group Rule normalized CIDR",
                     "Add new field with normalized remote_ip_prefix cidr in SG rule");
    nb_net_extension("stateful-security-group", "Stateful security group",
                     "Indicates if the security group is stateful or not");
    nb_net_hooks.port_security_groups = port_security_groups;
    return 0;
}
