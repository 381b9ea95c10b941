/* sg_metadata.c - whether a port's security groups let its guest reach the
 * metadata service (network.h): a guest without a config drive reads its
 * metadata from http://169.254.169.254/ (the isolated-metadata proxy in the
 * DHCP namespace, or a router's), and that request leaves the guest through
 * the port's egress filter like any other packet. Neutron has no implicit
 * allowance for it (only for DHCP), so a group without an egress rule that
 * covers IPv4 TCP to 169.254.169.254:80 leaves the guest without its
 * metadata; Nova does not fail such a build.
 *
 * The matcher is pure; the group reader reads the network tables of the
 * database it is given (the doctor opens its own, the conductor's build
 * uses the module's). */
#include "common/cleanup.h"
#include "common/json.h"
#include "db/db.h"
#include "network/network.h"
#include "network/network_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MD_ADDR "169.254.169.254"
#define MD_PORT 80

/* Whether a stored or shown protocol covers TCP: none (any protocol), the
 * number 0 or a name of 0 ("ip", "hopopt": the agent renders them as any),
 * or TCP itself, by name or number. */
static bool proto_covers_tcp(const json_t *v)
{
    if (!v || json_is_null(v))
        return true;
    if (json_is_integer(v))
        return json_integer_value(v) == 0 || json_integer_value(v) == 6;
    if (!json_is_string(v))
        return false;
    const char *s = json_string_value(v);
    static const char *const names[] = {"", "any", "0", "ip", "hopopt", "tcp", "6"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (!strcasecmp(s, names[i]))
            return true;
    return false;
}

/* A port bound from the rule's min/max (integers or decimal strings, as a
 * row or a view gives them); *has false when the rule has none. */
static long long port_bound(const json_t *v, bool *has)
{
    *has = true;
    if (json_is_integer(v))
        return json_integer_value(v);
    if (json_is_string(v) && *json_string_value(v))
        return atoll(json_string_value(v));
    *has = false;
    return 0;
}

bool nb_sg_rule_allows_metadata(const json_t *rule)
{
    const char *dir = nb_json_str(rule, "direction"), *eth = nb_json_str(rule, "ethertype");
    if (!dir || strcmp(dir, "egress") || !eth || strcmp(eth, "IPv4"))
        return false;
    const char *rg = nb_json_str(rule, "remote_group_id");
    const char *rag = nb_json_str(rule, "remote_address_group_id");
    if ((rg && *rg) || (rag && *rag))
        return false; /* the metadata address is no group's member */
    if (!proto_covers_tcp(json_object_get(rule, "protocol")))
        return false;
    bool has_min, has_max;
    long long min = port_bound(json_object_get(rule, "port_range_min"), &has_min);
    long long max = port_bound(json_object_get(rule, "port_range_max"), &has_max);
    if (has_min && (min > MD_PORT || (has_max ? max : min) < MD_PORT))
        return false;
    if (!has_min && has_max && max < MD_PORT)
        return false;
    const char *prefix = nb_json_str(rule, "remote_ip_prefix");
    if (!prefix || !*prefix)
        return true;
    struct nb_ip net, md;
    int len = 32;
    if (strchr(prefix, '/') ? nb_cidr_parse(prefix, &net, &len, false) < 0
                            : nb_ip_parse(prefix, &net) < 0)
        return false;
    if (net.version != 4 || nb_ip_parse(MD_ADDR, &md) < 0)
        return false;
    return nb_ip_in_cidr(&md, &net, len);
}

const json_t *nb_sg_groups_allow_metadata(const json_t *groups, const json_t **group)
{
    size_t i, j;
    json_t *g, *rule;
    if (group)
        *group = NULL;
    json_array_foreach (groups, i, g)
        json_array_foreach (json_object_get(g, "rules"), j, rule)
            if (nb_sg_rule_allows_metadata(rule)) {
                if (group)
                    *group = g;
                return rule;
            }
    return NULL;
}

json_t *nb_sg_port_groups(struct nb_db *db, struct nb_ctx *ctx, const char *port_id)
{
    json_t *groups = nb_db_rows(db, ctx,
                                "SELECT b.security_group_id AS id, COALESCE(g.name, '') AS name, "
                                "COALESCE(g.stateful, 1) AS stateful, g.id IS NOT NULL AS known "
                                "FROM securitygroupportbindings b LEFT JOIN securitygroups g ON "
                                "g.id = b.security_group_id WHERE b.port_id = ? ORDER BY b.rowid",
                                "s", port_id);
    size_t i;
    json_t *g;
    json_array_foreach (groups, i, g) {
        json_t *rules = nb_db_rows(db, ctx,
                                   "SELECT id, direction, ethertype, protocol, port_range_min, "
                                   "port_range_max, remote_ip_prefix, remote_group_id FROM "
                                   "securitygrouprules WHERE security_group_id = ? ORDER BY "
                                   "created_at, rowid",
                                   "s", nb_json_str(g, "id"));
        if (!rules) {
            json_decref(groups);
            return NULL;
        }
        json_object_set_new(g, "rules", rules);
    }
    return groups;
}

/* Appends "name (id)" of each group to out. */
static void name_groups(const json_t *groups, char *out, size_t n)
{
    size_t i;
    json_t *g;
    json_array_foreach (groups, i, g) {
        size_t k = strlen(out);
        const char *name = nb_json_str(g, "name");
        snprintf(out + k, n - k, "%s%s (%s)", k ? ", " : "", name && *name ? name : "-",
                 nb_json_str(g, "id"));
    }
}

int nb_network_metadata_denied(struct nb_ctx *ctx, const char *instance_uuid, char *groups,
                               size_t n)
{
    groups[0] = '\0';
    _cleanup_json_ json_t *ports = nb_db_rows(nb_net_env->db, ctx,
                                              "SELECT id, port_security_enabled FROM ports WHERE "
                                              "device_id = ? AND device_owner LIKE 'compute:%'",
                                              "s", instance_uuid);
    if (!ports)
        return -1;
    size_t i;
    json_t *p;
    json_array_foreach (ports, i, p) {
        if (!nb_json_int(p, "port_security_enabled", 1))
            return 0;
        _cleanup_json_ json_t *sg = nb_sg_port_groups(nb_net_env->db, ctx, nb_json_str(p, "id"));
        if (!sg)
            return -1;
        if (nb_sg_groups_allow_metadata(sg, NULL))
            return 0;
        name_groups(sg, groups, n);
    }
    return json_array_size(ports) ? 1 : 0;
}
