/* sg_instance.c - what Nova's security-group proxy asks of Neutron about
 * groups by name and about an instance's ports
 * (nova/network/security_group_api.py): find a group by name or id as
 * neutronclient's find_resourceid_by_name_or_id does, list the groups of
 * an instance's ports, and add a group to or remove it from every port of
 * the instance (a port update of security_groups each, then one
 * notification for the agents). */
#include "common/cleanup.h"
#include "common/json.h"
#include "common/util.h"
#include "db/db.h"
#include "network/ml2_int.h"
#include "network/network.h"
#include "network/network_int.h"

#include <string.h>

int nb_network_sg_find(struct nb_ctx *ctx, const char *name_or_id, char *id)
{
    struct nb_db *db = nb_net_env->db;
    _cleanup_json_ json_t *row = nb_db_row(
        db, ctx, "SELECT id, project_id FROM securitygroups WHERE id = ?", "s", name_or_id);
    if (nb_ctx_failed(ctx))
        return -1;
    const char *p = row ? nb_json_str(row, "project_id") : NULL;
    if (row && (ctx->is_admin || ctx->system || !strcmp(p, ctx->project_id))) {
        nb_strlcpy(id, nb_json_str(row, "id"), NB_UUID_LEN);
        return 0;
    }
    _cleanup_json_ json_t *rows =
        nb_db_rows(db, ctx, "SELECT id FROM securitygroups WHERE name = ? AND project_id = ?", "ss",
                   name_or_id, ctx->project_id);
    if (!rows)
        return -1;
    if (json_array_size(rows) > 1)
        return nb_error(ctx, 409, "NeutronClientNoUniqueMatch",
                        "Multiple security_group matches found for name '%s', use an ID to be "
                        "more specific.",
                        name_or_id);
    if (!json_array_size(rows))
        return nb_error(ctx, 404, "NotFound", "Unable to find security_group with name or id '%s'",
                        name_or_id);
    nb_strlcpy(id, nb_json_str(json_array_get(rows, 0), "id"), NB_UUID_LEN);
    return 0;
}

/* The instance's ports: [{"id", "port_security_enabled", "ips" (count),
 * "groups": [ids in binding order]}]. New array or NULL after nb_error. */
static json_t *instance_ports(struct nb_ctx *ctx, const char *instance_uuid)
{
    struct nb_db *db = nb_net_env->db;
    json_t *ports = nb_db_rows(db, ctx,
                               "SELECT p.id, p.port_security_enabled, (SELECT COUNT(*) FROM "
                               "ipallocations a WHERE a.port_id = p.id) AS ips FROM ports p "
                               "WHERE p.device_id = ? ORDER BY p.rowid",
                               "s", instance_uuid);
    size_t i;
    json_t *port;
    json_array_foreach (ports, i, port) {
        json_t *rows = nb_db_rows(db, ctx,
                                  "SELECT security_group_id FROM securitygroupportbindings "
                                  "WHERE port_id = ? ORDER BY rowid",
                                  "s", nb_json_str(port, "id"));
        if (!rows) {
            json_decref(ports);
            return NULL;
        }
        json_t *ids = json_array();
        size_t j;
        json_t *r;
        json_array_foreach (rows, j, r)
            json_array_append(ids, json_object_get(r, "security_group_id"));
        json_decref(rows);
        json_object_set_new(port, "groups", ids);
    }
    return ports;
}

static bool has_id(const json_t *ids, const char *id)
{
    size_t i;
    json_t *v;
    json_array_foreach (ids, i, v)
        if (!strcmp(json_string_value(v), id))
            return true;
    return false;
}

json_t *nb_network_instance_security_groups(struct nb_ctx *ctx, const char *instance_uuid)
{
    _cleanup_json_ json_t *ports = instance_ports(ctx, instance_uuid);
    if (!ports)
        return NULL;
    _cleanup_json_ json_t *ids = json_array();
    size_t i, j;
    json_t *port, *g;
    json_array_foreach (ports, i, port)
        json_array_foreach (json_object_get(port, "groups"), j, g)
            if (!has_id(ids, json_string_value(g)))
                json_array_append(ids, g);
    /* the groups are read with the instance's owner's eyes: an admin acting
     * on another project's server sees its groups too */
    struct nb_ctx sys;
    nb_ctx_child(&sys, ctx);
    sys.is_admin = true;
    json_t *out = json_array();
    json_array_foreach (ids, i, g) {
        json_t *v = nb_network_sg_show(&sys, json_string_value(g));
        if (!v) {
            if (nb_ctx_status(&sys) == 404) {
                nb_ctx_clear_error(&sys);
                continue;
            }
            nb_ctx_forward_error(ctx, &sys);
            json_decref(out);
            return NULL;
        }
        json_array_append_new(out, v);
    }
    return out;
}

int nb_network_instance_sg_change(struct nb_ctx *ctx, const char *instance_uuid, const char *sg_id,
                                  bool add)
{
    _cleanup_json_ json_t *ports = instance_ports(ctx, instance_uuid);
    if (!ports)
        return -1;
    if (!json_array_size(ports))
        return nb_error(ctx, 404, "SecurityGroupNotFound",
                        "instance_id %s could not be found as device id on any ports",
                        instance_uuid);
    struct nb_ctx adm;
    nb_ctx_child(&adm, ctx);
    adm.is_admin = true;
    size_t i;
    json_t *port;
    bool found = false;
    json_array_foreach (ports, i, port) {
        json_t *groups = json_object_get(port, "groups");
        if (add && (!nb_json_int(port, "port_security_enabled", 1) || !nb_json_int(port, "ips", 0)))
            return nb_error(ctx, 400, "SecurityGroupCannotBeApplied",
                            "Network requires port_security_enabled and subnet associated in "
                            "order to apply security groups.");
        if (add) {
            /* Nova appends without looking; Neutron drops the duplicate */
            json_array_append_new(groups, json_string(sg_id));
        } else {
            size_t j;
            json_t *g;
            bool had = false;
            json_array_foreach (groups, j, g)
                if (!strcmp(json_string_value(g), sg_id)) {
                    json_array_remove(groups, j);
                    had = true;
                    break;
                }
            if (!had)
                continue;
        }
        found = true;
        if (nb_net_port_set_groups(&adm, nb_json_str(port, "id"), groups) < 0)
            return nb_ctx_forward_error(ctx, &adm);
    }
    if (found)
        nb_net_notify(ctx, add ? "security group added" : "security group removed");
    return found ? 0 : 1;
}

/* Servers per statement of nb_network_instances_sg_names (unused places
 * bind NULL, so the statement text stays the same). */
#define SG_NAMES_CHUNK 16

json_t *nb_network_instances_sg_names(struct nb_ctx *ctx, const json_t *uuids)
{
    json_t *out = json_object();
    if (!nb_net_env) /* a compute API without the network service (unit tests) */
        return out;
    size_t n = json_array_size(uuids);
    for (size_t start = 0; start < n; start += SG_NAMES_CHUNK) {
        const char *u[SG_NAMES_CHUNK] = {0};
        for (size_t k = 0; k < SG_NAMES_CHUNK && start + k < n; k++)
            u[k] = json_string_value(json_array_get(uuids, start + k));
        json_t *rows = nb_db_rows(
            nb_net_env->db, ctx,
            "SELECT p.device_id, g.id, g.name FROM ports p JOIN securitygroupportbindings b ON "
            "b.port_id = p.id JOIN securitygroups g ON g.id = b.security_group_id WHERE "
            "p.device_id IN (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ORDER BY p.rowid, "
            "b.rowid",
            "ssssssssssssssss", u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10],
            u[11], u[12], u[13], u[14], u[15]);
        if (!rows) {
            json_decref(out);
            return NULL;
        }
        size_t j;
        json_t *r;
        json_array_foreach (rows, j, r) {
            const char *dev = nb_json_str(r, "device_id"), *nm = nb_json_str(r, "name");
            json_t *names = json_object_get(out, dev);
            if (!names) {
                names = json_array();
                json_object_set_new(out, dev, names);
            }
            json_array_append_new(
                names, json_pack("{s:s}", "name", nm && *nm ? nm : nb_json_str(r, "id")));
        }
        json_decref(rows);
    }
    return out;
}
