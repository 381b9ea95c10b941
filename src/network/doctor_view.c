/* doctor_view.c - what `nubo doctor server` reads of an instance's ports
 * (network.h, nb_network_doctor_ports): the network module's tables are
 * read here, by their owner. */
#include "common/cleanup.h"
#include "common/json.h"
#include "db/db.h"
#include "network/network.h"

/* Adds the port's fixed IPs, its network's name and MTU, the network's
 * DHCP ports and the port's security groups with their rules to port.
 * 0/-1. */
static int describe(struct nb_db *db, struct nb_ctx *ctx, json_t *port)
{
    const char *id = nb_json_str(port, "id"), *net = nb_json_str(port, "network_id");
    _cleanup_json_ json_t *ips = nb_db_row(
        db, ctx, "SELECT group_concat(ip_address) AS ips FROM ipallocations WHERE port_id = ?", "s",
        id);
    _cleanup_json_ json_t *netrow =
        nb_db_row(db, ctx, "SELECT name, mtu FROM networks WHERE id = ?", "s", net);
    json_t *dhcp = nb_db_rows(db, ctx,
                              "SELECT id, binding_host_id, status FROM ports WHERE network_id = ? "
                              "AND device_owner = 'network:dhcp' ORDER BY created_at",
                              "s", net);
    if (!dhcp)
        return -1;
    json_object_set_new(port, "dhcp_ports", dhcp);
    json_t *groups = nb_sg_port_groups(db, ctx, id);
    if (!groups)
        return -1;
    json_object_set_new(port, "security_groups", groups);
    const char *list = nb_json_str(ips, "ips");
    json_object_set_new(port, "ips", json_string(list ? list : ""));
    const char *name = nb_json_str(netrow, "name");
    json_object_set_new(port, "network_name", json_string(name ? name : ""));
    json_object_set_new(port, "network_mtu", json_integer(nb_json_int(netrow, "mtu", 0)));
    return 0;
}

json_t *nb_network_doctor_ports(struct nb_db *db, struct nb_ctx *ctx, const char *instance_uuid)
{
    json_t *ports = nb_db_rows(db, ctx,
                               "SELECT * FROM ports WHERE device_id = ? AND device_owner LIKE "
                               "'compute:%' ORDER BY created_at, rowid",
                               "s", instance_uuid);
    size_t i;
    json_t *p;
    json_array_foreach (ports, i, p)
        if (describe(db, ctx, p) < 0) {
            json_decref(ports);
            return NULL;
        }
    return ports;
}

json_t *nb_network_bound_ports(struct nb_db *db, struct nb_ctx *ctx)
{
    return nb_db_rows(db, ctx,
                      "SELECT id, device_id, device_owner, binding_host_id, status FROM ports "
                      "WHERE binding_host_id != '' ORDER BY binding_host_id, id",
                      "");
}
