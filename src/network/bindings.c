/* bindings.c - a move of an instance to another host as Neutron sees it
 * (Nova's setup_networks_on_host, migrate_instance_finish and the rollback
 * of a live migration): while a live migration runs, the instance's ports
 * carry binding:profile "migrating_to": <destination>, so the host state
 * lists them on both hosts and the destination's agent wires the incoming
 * guest's tap (its filter loaded) before the switch-over; when the move
 * ends the ports get binding:host_id of the host the instance now runs on
 * and "migrating_to" goes, so the source's agent lets them go. */
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "db/db.h"
#include "network/network.h"
#include "network/ml2_int.h"
#include "network/network_int.h"

#include <stdio.h>

int nb_network_bind_instance_host(struct nb_ctx *ctx, const char *instance_uuid, const char *host)
{
    char now[32];
    const char *vif_type = nb_bind_vif_type(ctx, host);
    int n =
        nb_db_exec(nb_net_env->db, ctx,
                   "UPDATE ports SET binding_host_id = ?, binding_vif_type = ?, status = "
                   "CASE WHEN ? = 'ovs' THEN 'ACTIVE' WHEN binding_host_id != ? THEN 'DOWN' ELSE "
                   "status END, binding_profile = "
                   "json_remove(binding_profile, '$.migrating_to'), updated_at = ?, "
                   "revision_number = revision_number + 1 WHERE device_id = ? AND "
                   "device_owner LIKE 'compute:%' AND (binding_host_id != ? OR "
                   "json_type(binding_profile, '$.migrating_to') IS NOT NULL)",
                   "sssssss", host, vif_type, vif_type, host, nb_net_now(now), instance_uuid, host);
    if (n > 0) {
        NB_INFO("nubo.network.instance", ctx, instance_uuid, "%d port(s) bound to host %s", n,
                host);
        nb_net_notify(ctx, "ports bound to another host");
    }
    return n;
}

int nb_network_set_migrating_to(struct nb_ctx *ctx, const char *instance_uuid, const char *host)
{
    char now[32];
    int n;
    char sql[512];
    const char *jv = nb_db_json_value(nb_net_env->db);
    if (host) {
        snprintf(sql, sizeof(sql),
                 "UPDATE ports SET binding_profile = json_set(binding_profile, '$.migrating_to', "
                 "?), updated_at = ?, revision_number = revision_number + 1 WHERE device_id = ? "
                 "AND device_owner LIKE 'compute:%%' AND binding_host_id != ? AND "
                 "(%s(binding_profile, '$.migrating_to') IS NULL OR %s(binding_profile, "
                 "'$.migrating_to') != ?)",
                 jv, jv);
        n = nb_db_exec(nb_net_env->db, ctx, sql, "sssss", host, nb_net_now(now), instance_uuid,
                       host, host);
    } else {
        snprintf(sql, sizeof(sql),
                 "UPDATE ports SET binding_profile = json_remove(binding_profile, "
                 "'$.migrating_to'), updated_at = ?, revision_number = revision_number + 1 WHERE "
                 "device_id = ? AND device_owner LIKE 'compute:%%' AND %s(binding_profile, "
                 "'$.migrating_to') IS NOT NULL",
                 jv);
        n = nb_db_exec(nb_net_env->db, ctx, sql, "ss", nb_net_now(now), instance_uuid);
    }
    if (n > 0) {
        NB_INFO("nubo.network.instance", ctx, instance_uuid,
                host ? "%d port(s) migrating to host %s" : "%d port(s) no longer migrating%s", n,
                host ? host : "");
        nb_net_notify(ctx, host ? "ports migrating to another host" : "ports no longer migrating");
    }
    return n;
}

json_t *nb_network_move_facts(struct nb_ctx *ctx, const char *instance_uuid, const char *host)
{
    struct nb_db *db = nb_net_env->db;
    json_t *ports = nb_db_rows(
        db, ctx,
        "SELECT p.id, p.network_id, p.binding_vif_type AS vif_type, n.mtu, COALESCE((SELECT "
        "s.network_type FROM networksegments s WHERE s.network_id = p.network_id ORDER BY "
        "s.segment_index LIMIT 1), 'local') AS network_type FROM ports p JOIN networks n ON "
        "n.id = p.network_id WHERE p.device_id = ? AND p.device_owner LIKE 'compute:%' ORDER BY "
        "p.id",
        "s", instance_uuid);
    if (!ports)
        return NULL;
    json_t *agent = nb_db_row(db, ctx,
                              "SELECT host, admin_state_up, heartbeat_timestamp, configurations "
                              "FROM agents WHERE host = ? AND agent_type = 'Linux bridge agent'",
                              "s", host);
    if (!agent && nb_ctx_failed(ctx)) {
        json_decref(ports);
        return NULL;
    }
    json_t *out = json_pack("{s:o, s:n}", "ports", ports, "agent");
    if (agent) {
        const char *hb = nb_json_str(agent, "heartbeat_timestamp");
        double when = hb ? nb_time_parse(hb) : 0;
        long long age = when > 0 ? (long long)(nb_time_now() - when) : -1;
        long down = nb_conf_int("DEFAULT", "agent_down_time", 75);
        json_t *conf = nb_json_parse(nb_json_str(agent, "configurations"));
        json_object_set_new(
            out, "agent",
            json_pack("{s:s, s:b, s:I, s:I, s:b, s:s?, s:O?}", "host", host, "admin_state_up",
                      nb_json_int(agent, "admin_state_up", 1) != 0, "age_s", (json_int_t)age,
                      "down_time", (json_int_t)down, "alive", age >= 0 && age <= down, "local_ip",
                      nb_json_str(conf, "local_ip"), "tunnel_types",
                      json_object_get(conf, "tunnel_types")));
        json_decref(conf);
        json_decref(agent);
    }
    return out;
}
