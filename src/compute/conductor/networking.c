/* networking.c - what the conductor asks of the Networking service, as
 * Nova's compute manager does of Neutron (nova/network/neutron.py): ports
 * for the build's networking step, their network_info model in
 * instance_info_caches, and their release on delete, on a failed build and
 * before a reschedule.
 *
 * Ports are made on behalf of the instance's project. A build attempt
 * starts from a clean slate: whatever an earlier attempt (or one killed by
 * a restart) left bound to the instance is released first, so a reschedule
 * gets ports bound to its new host and a requested fixed IP is free again.
 * The release is idempotent (a port the user passed is unbound and kept,
 * the others deleted), so every path that may hold ports calls it, and the
 * start-up recovery calls it for instances that are deleted, or failed
 * without a host, but still own ports. */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "compute/compute.h"
#include "compute/conductor/internal.h"
#include "compute/objects/request_spec.h"
#include "db/db.h"
#include "network/network.h"

#include <stdio.h>
#include <string.h>

/* Neutron's IpAddressGenerationFailure, which Nova turns into NoMoreFixedIps. */
#define NO_MORE_IPS "No more IP addresses available on network "

/* A context acting for the instance's project under the request's ID. An
 * explicit list of networks or ports was checked against the requester's
 * rights when the API accepted it (an admin may name any network), so it is
 * allocated with admin rights; "auto" and the pre-2.37 default pick among
 * the project's own and shared networks only. */
static void ctx_for_instance(struct nb_ctx *nctx, const struct nb_ctx *ctx, const json_t *row,
                             bool admin)
{
    nb_ctx_init_system(nctx, ctx->request_id);
    nb_strlcpy(nctx->global_request_id, ctx->global_request_id, sizeof(nctx->global_request_id));
    const char *project = nb_json_str(row, "project_id"), *user = nb_json_str(row, "user_id");
    nb_strlcpy(nctx->project_id, project ? project : "", sizeof(nctx->project_id));
    nb_strlcpy(nctx->user_id, user ? user : "", sizeof(nctx->user_id));
    nctx->is_admin = admin;
}

/* Nova's BuildAbortException reason for a failed allocation: NoMoreFixedIps
 * keeps its text, anything else is the generic one (the service's own
 * message goes in the fault's details). */
static void abort_reason(const char *err, char *why, size_t n)
{
    if (!strncmp(err, NO_MORE_IPS, strlen(NO_MORE_IPS))) {
        const char *net = err + strlen(NO_MORE_IPS);
        int len = (int)strcspn(net, ". ");
        snprintf(why, n,
                 "Failed to allocate the network(s) with error No fixed IP addresses available "
                 "for network: %.*s, not rescheduling.",
                 len, net);
        return;
    }
    snprintf(why, n, "Failed to allocate the network(s), not rescheduling.");
}

/* Nova builds a server whose guest can neither read a config drive nor
 * reach the metadata service (its ports' security groups let no request
 * to 169.254.169.254:80 out); the guest then boots without its hostname,
 * keys and user data. The build goes on, as Nova's; the log says why, under
 * the request's ID, and what would fix it. */
static void warn_metadata_denied(struct nb_ctx *ctx, const json_t *row)
{
    const char *uuid = nb_json_str(row, "uuid");
    if (nb_bool_from_string(nb_json_str(row, "config_drive")) == 1 ||
        nb_conf_bool("compute", "force_config_drive", false) ||
        nb_conf_bool("DEFAULT", "force_config_drive", false))
        return;
    struct nb_ctx nctx;
    nb_ctx_init_system(&nctx, ctx->request_id);
    char groups[1024];
    int denied = nb_network_metadata_denied(&nctx, uuid, groups, sizeof(groups));
    if (denied < 0)
        NB_WARN(LOG_COND, ctx, uuid, "could not check the metadata path of the ports: %s",
                nb_ctx_message(&nctx));
    else if (denied == 1)
        NB_WARN(LOG_COND, ctx, uuid,
                "the server has no config drive and no security group of its ports allows "
                "egress IPv4 TCP to 169.254.169.254:80 (groups: %s): its guest cannot read its "
                "metadata; e.g. `openstack security group rule create --egress --protocol tcp "
                "--dst-port 80 --remote-ip 169.254.169.254/32 <group>` lets it",
                groups[0] ? groups : "none");
}

int cond_allocate_networks(struct conductor *c, struct nb_ctx *ctx, const json_t *row,
                           const char *host, const char *az, const struct nb_request_spec *rspec,
                           json_t **network_info, char *why, char *details, size_t n)
{
    const char *uuid = nb_json_str(row, "uuid");
    /* "auto", "none", a list, or NULL (not given), as the API stored it */
    const json_t *nets = rspec->requested_networks;
    *network_info = NULL;
    cond_deallocate_networks(c, ctx, uuid);
    struct nb_ctx nctx;
    ctx_for_instance(&nctx, ctx, row, json_is_array(nets));
    if (nb_network_allocate_for_instance_sg(&nctx, uuid, host, az, nets, rspec->security_groups,
                                            network_info) < 0) {
        const char *err =
            nb_ctx_failed(&nctx) ? nb_ctx_message(&nctx) : "The network service failed.";
        abort_reason(err, why, n);
        snprintf(details, n, "%s", err);
        NB_WARN(LOG_COND, ctx, uuid, "Failed to allocate network(s) on host %s: %s", host, err);
        return -1;
    }
    _cleanup_free_ char *text = nb_json_dump(*network_info);
    NB_INFO(LOG_COND, ctx, uuid, "Networking on host %s: %zu port(s) %s", host,
            json_array_size(*network_info), text);
    warn_metadata_denied(ctx, row);
    return 0;
}

int cond_info_cache_write(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                          const json_t *network_info)
{
    char now[32];
    nb_now_iso_us(now);
    char sql[512];
    return nb_db_exec(c->db, ctx,
                      nb_db_upsert(c->db, sql, sizeof(sql),
                                   "INSERT INTO instance_info_caches (created_at, updated_at, "
                                   "deleted, network_info, instance_uuid) VALUES (?, ?, 0, ?, ?)",
                                   "instance_uuid", "network_info, updated_at",
                                   "deleted = 0, deleted_at = NULL"),
                      "ssjs", now, now, (json_t *)network_info, uuid) < 0
               ? -1
               : 0;
}

void cond_deallocate_networks(struct conductor *c, struct nb_ctx *ctx, const char *uuid)
{
    struct nb_ctx nctx;
    nb_ctx_init_system(&nctx, ctx->request_id);
    if (nb_network_deallocate_for_instance(&nctx, uuid) < 0) {
        NB_ERROR(LOG_COND, ctx, uuid,
                 "could not release the ports of the instance: %s (the start-up recovery "
                 "releases them)",
                 nb_ctx_message(&nctx));
        return;
    }
    char now[32];
    nb_now_iso_us(now);
    if (nb_db_exec(c->db, &nctx,
                   "UPDATE instance_info_caches SET network_info = '[]', updated_at = ? WHERE "
                   "instance_uuid = ? AND network_info IS NOT NULL AND network_info != '[]'",
                   "ss", now, uuid) < 0)
        NB_WARN(LOG_COND, ctx, uuid, "could not clear the network info cache: %s",
                nb_ctx_message(&nctx));
}

void cond_release_leaked_ports(struct conductor *c, const struct cond_scope *s, struct nb_ctx *ctx)
{
    /* the network service names the instances with ports, and of those
     * (one query for them all) the gone ones are released */
    _cleanup_json_ json_t *devices = nb_network_port_devices(ctx);
    char sql[384];
    snprintf(sql, sizeof(sql),
             "SELECT DISTINCT uuid, nubo_conductor FROM instances WHERE uuid IN (SELECT value FROM "
             "%s) AND (deleted != 0 OR (vm_state = ? AND host IS NULL)) AND id <= ?",
             nb_db_json_each(c->db));
    _cleanup_json_ json_t *rows =
        !devices ? NULL : nb_db_rows(c->db, ctx, sql, "jsi", devices, NB_VM_ERROR, s->max_id);
    if (!rows) {
        NB_ERROR(LOG_COND, ctx, NULL, "could not look for leaked ports: %s", nb_ctx_message(ctx));
        nb_ctx_clear_error(ctx);
        return;
    }
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        const char *uuid = nb_json_str(r, "uuid");
        if (!cond_scope_row(s, r))
            continue;
        NB_WARN(LOG_COND, ctx, uuid,
                "Releasing the ports of an instance that is deleted or failed without a host "
                "(left by an interrupted run)");
        cond_deallocate_networks(c, ctx, uuid);
    }
}
