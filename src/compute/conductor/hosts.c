/* hosts.c - the records the compute agents keep through the conductor
 * (agents never open the database): their nova-compute service row
 * (registration, heartbeats) and compute node row (capacity, CPU, usage),
 * and the list of instances on a host for the agents' periodic tasks
 * (with is_bfv, so that a volume-backed root disk is not counted as local
 * disk).
 * Timestamps are written as nb_now_iso_us() UTC strings, like Nova's
 * DATETIME columns. */
#include "common/cleanup.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "compute/conductor/internal.h"
#include "compute/conductor/live_migrate.h"
#include "db/db.h"

#include <stdio.h>
#include <string.h>

json_t *cond_service_update(struct conductor *c, struct nb_ctx *ctx, json_t *args)
{
    const char *host = nb_json_str(args, "host");
    const char *binary = nb_json_str(args, "binary");
    const char *topic = nb_json_str(args, "topic");
    if (!host || !binary)
        return json_pack("{s:s}", "error", "host and binary are required");
    char now[32];
    nb_now_iso_us(now);
    if (nb_db_begin(c->db, ctx) < 0)
        goto fail;
    json_t *row = nb_db_row(
        c->db, ctx, "SELECT id FROM services WHERE host = ? AND \"binary\" = ? AND deleted = 0",
        "ss", host, binary);
    bool exists = row != NULL;
    json_decref(row);
    if (nb_ctx_failed(ctx)) {
        nb_db_rollback(c->db);
        goto fail;
    }
    int rc;
    if (exists) {
        rc = nb_db_exec(c->db, ctx,
                        "UPDATE services SET topic = ?, last_seen_up = ?, updated_at = ? "
                        "WHERE host = ? AND \"binary\" = ? AND deleted = 0",
                        "sssss", topic, now, now, host, binary);
    } else {
        char uuid[NB_UUID_LEN];
        nb_uuid(uuid);
        rc = nb_db_exec(c->db, ctx,
                        "INSERT INTO services (uuid, host, \"binary\", topic, report_count, "
                        "last_seen_up, created_at, updated_at) VALUES (?, ?, ?, ?, 0, ?, ?, ?)",
                        "sssssss", uuid, host, binary, topic, now, now, now);
        NB_INFO(LOG_COND, ctx, NULL, "Registered service %s on host %s", binary, host);
    }
    if (rc < 0) {
        nb_db_rollback(c->db);
        goto fail;
    }
    if (nb_db_commit(c->db, ctx) < 0)
        goto fail;
    if (!strcmp(binary, "nova-compute"))
        cond_lm_source_restarted(c, host); /* its agent runs no migration yet */
    json_t *svc = nb_db_row(c->db, ctx,
                            "SELECT id, uuid, disabled, disabled_reason FROM services WHERE "
                            "host = ? AND \"binary\" = ? AND deleted = 0",
                            "ss", host, binary);
    if (svc)
        return svc;
fail:
    NB_ERROR(LOG_COND, ctx, NULL, "could not register service %s on %s: %s", binary, host,
             nb_ctx_message(ctx));
    json_t *err = json_pack("{s:s}", "error", nb_ctx_message(ctx));
    nb_ctx_clear_error(ctx); /* handled: the agent gets it in the reply */
    return err;
}

json_t *cond_compute_node_update(struct conductor *c, struct nb_ctx *ctx, json_t *a)
{
    const char *host = nb_json_str(a, "host");
    const char *node = nb_json_str(a, "hypervisor_hostname");
    if (!host || !node)
        return json_pack("{s:s}", "error", "host and hypervisor_hostname are required");
    char now[32];
    nb_now_iso_us(now);
    long long service_id = nb_db_int(c->db, ctx, 0,
                                     "SELECT id FROM services WHERE host = ? AND \"binary\" = "
                                     "'nova-compute' AND deleted = 0",
                                     "s", host);
    _cleanup_json_ json_t *cpu_info = json_incref(json_object_get(a, "cpu_info"));
    if (!cpu_info)
        cpu_info = json_object();
    json_t *supported = json_object_get(a, "supported_instances");
    json_t *ratio_c = json_object_get(a, "cpu_allocation_ratio");
    json_t *ratio_r = json_object_get(a, "ram_allocation_ratio");
    json_t *ratio_d = json_object_get(a, "disk_allocation_ratio");
    _cleanup_json_ json_t *row = NULL;
    if (nb_db_begin(c->db, ctx) < 0)
        goto fail;
    row = nb_db_row(
        c->db, ctx,
        "SELECT id, uuid FROM compute_nodes WHERE host = ? AND hypervisor_hostname = ? AND "
        "deleted = 0",
        "ss", host, node);
    if (nb_ctx_failed(ctx)) {
        nb_db_rollback(c->db);
        goto fail;
    }
    char uuid[NB_UUID_LEN];
    if (row) {
        nb_strlcpy(uuid, nb_json_str(row, "uuid"), sizeof(uuid));
    } else {
        nb_uuid(uuid);
        if (nb_db_exec(c->db, ctx,
                       "INSERT INTO compute_nodes (uuid, host, hypervisor_hostname, "
                       "hypervisor_type, hypervisor_version, vcpus, memory_mb, local_gb, "
                       "created_at) VALUES (?, ?, ?, '', 0, 0, 0, 0, ?)",
                       "ssss", uuid, host, node, now) < 0) {
            nb_db_rollback(c->db);
            goto fail;
        }
        NB_INFO(LOG_COND, ctx, NULL, "Compute node record created for host %s (node %s, uuid %s)",
                host, node, uuid);
    }
    long long memory = nb_json_int(a, "memory_mb", 0), disk = nb_json_int(a, "local_gb", 0);
    long long mem_used = nb_json_int(a, "memory_mb_used", 0);
    long long disk_used = nb_json_int(a, "local_gb_used", 0);
    if (nb_db_exec(
            c->db, ctx,
            "UPDATE compute_nodes SET service_id = ?, hypervisor_type = ?, hypervisor_version = ?, "
            "cpu_info = ?, vcpus = ?, memory_mb = ?, local_gb = ?, vcpus_used = ?, "
            "memory_mb_used = ?, local_gb_used = ?, free_ram_mb = ?, free_disk_gb = ?, "
            "running_vms = ?, current_workload = ?, disk_available_least = ?, host_ip = ?, "
            "cpu_allocation_ratio = ?, ram_allocation_ratio = ?, disk_allocation_ratio = ?, "
            "supported_instances = ?, updated_at = ? WHERE uuid = ?",
            "isijiiiiiiiiiiisdddjss", service_id ? service_id : (long long)0,
            nb_json_str(a, "hypervisor_type") ? nb_json_str(a, "hypervisor_type") : "",
            nb_json_int(a, "hypervisor_version", 0), cpu_info, nb_json_int(a, "vcpus", 0), memory,
            disk, nb_json_int(a, "vcpus_used", 0), mem_used, disk_used, memory - mem_used,
            disk - disk_used, nb_json_int(a, "running_vms", 0),
            nb_json_int(a, "current_workload", 0), disk - disk_used, nb_json_str(a, "host_ip"),
            json_is_number(ratio_c) ? json_number_value(ratio_c) : 0.0,
            json_is_number(ratio_r) ? json_number_value(ratio_r) : 0.0,
            json_is_number(ratio_d) ? json_number_value(ratio_d) : 0.0, supported, now, uuid) < 0) {
        nb_db_rollback(c->db);
        goto fail;
    }
    if (nb_db_commit(c->db, ctx) < 0)
        goto fail;
    return json_pack("{s:s}", "uuid", uuid);
fail:
    NB_ERROR(LOG_COND, ctx, NULL, "could not update the compute node of %s: %s", host,
             nb_ctx_message(ctx));
    json_t *err = json_pack("{s:s}", "error", nb_ctx_message(ctx));
    nb_ctx_clear_error(ctx); /* handled: the agent gets it in the reply */
    return err;
}

void cond_service_heartbeat(struct conductor *c, struct nb_ctx *ctx, json_t *args)
{
    const char *binary = nb_json_str(args, "binary");
    json_t *hosts = json_object_get(args, "hosts");
    char now[32];
    nb_now_iso_us(now);
    if (!binary || nb_db_begin(c->db, ctx) < 0) {
        nb_ctx_clear_error(ctx);
        return;
    }
    size_t i;
    json_t *h;
    json_array_foreach (hosts, i, h) {
        if (!json_is_string(h))
            continue;
        int n = nb_db_exec(c->db, ctx,
                           "UPDATE services SET last_seen_up = ?, updated_at = ?, report_count = "
                           "report_count + 1 WHERE host = ? AND \"binary\" = ? AND deleted = 0",
                           "ssss", now, now, json_string_value(h), binary);
        if (n == 0)
            NB_WARN(LOG_COND, ctx, NULL,
                    "Heartbeat from %s on host %s, which has no service record (deleted?)", binary,
                    json_string_value(h));
    }
    if (nb_db_commit(c->db, ctx) < 0)
        NB_ERROR(LOG_COND, ctx, NULL, "could not record heartbeats: %s", nb_ctx_message(ctx));
    nb_ctx_clear_error(ctx); /* the next heartbeat tries again */
}

json_t *cond_instances_on_host(struct conductor *c, struct nb_ctx *ctx, json_t *args)
{
    const char *host = nb_json_str(args, "host");
    /* is_bfv: the root disk is a volume (Nova's is_volume_backed_instance),
     * so the flavor's root_gb is no local disk of the host */
    json_t *rows = nb_db_rows(c->db, ctx,
                              "SELECT i.uuid, i.vm_state, i.task_state, i.power_state, i.flavor, "
                              "EXISTS (SELECT 1 FROM block_device_mapping b WHERE "
                              "b.instance_uuid = i.uuid AND b.deleted = 0 AND b.boot_index = 0 "
                              "AND b.destination_type = 'volume') AS is_bfv FROM instances i "
                              "WHERE i.host = ? AND i.deleted = 0",
                              "s", host);
    if (!rows) {
        nb_ctx_clear_error(ctx); /* handled: the agent sees no instances this time */
        return json_array();
    }
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        json_t *f = nb_json_parse(nb_json_str(r, "flavor"));
        json_object_set_new(r, "flavor", f ? f : json_object());
    }
    return rows;
}
