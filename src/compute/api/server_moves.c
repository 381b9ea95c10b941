/* server_moves.c - os-migrateLive, the server action that live-migrates a
 * server (Nova's migrate_server.py controller and compute API
 * live_migrate): the body as Nova's schema gates it per microversion,
 * policy os_compute_api:os-migrate-server:migrate_live (admin), the lock
 * and state checks (ACTIVE or PAUSED, no task), a named host that must be
 * a compute host, then in one transaction the migration record (status
 * "accepted", type live-migration, source compute and node, the named
 * destination), task state migrating and the instance action
 * "live-migration", and a cast to the conductor, which runs the prechecks
 * and the move (conductor/live_migrate.c).
 *
 * From 2.34 the request is asynchronous: the answer is 202 and a refused
 * precheck shows as the migration's status "error" with an event and a
 * fault. Before 2.34 Nova answered a refused precheck with 400; nubo asks
 * the conductor's dry run first (check_live_migration) and answers its
 * refusal with 400 before anything is recorded.
 *
 * GET /compute/v2.1/servers/{server_id}/os-migration-check?host=H&
 * block_migration=true|false|auto is nubo's own (admin only, policy
 * nubo:os-migration-check; no Nova client asks for it): every precheck of a
 * live migration against host H or every candidate host, with evidence and
 * verdicts, nothing moved or claimed; `nubo doctor migration` prints it. */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/pyrepr.h"
#include "common/util.h"
#include "compute/api/api.h"
#include "compute/api/instances.h"
#include "compute/api/server_actions.h"
#include "compute/api/server_moves.h"
#include "compute/api/validate.h"
#include "compute/compute.h"
#include "compute/objects/instance.h"
#include "compute/objects/migration.h"
#include "compute/rpc/conductor_api.h"
#include "db/db.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#define LOG_API "nubo.compute.api"

/* block_migration as Nova's boolean (and "auto" from 2.25): "true",
 * "false" or "auto" into *out. 0/-1. */
static int check_block_migration(struct nb_ctx *ctx, const json_t *v, const char **out)
{
    if (nb_ctx_mv_ge(ctx, 2, 25) && json_is_string(v) && !strcmp(json_string_value(v), "auto")) {
        *out = "auto";
        return 0;
    }
    if (nb_ctx_mv_ge(ctx, 2, 25) && json_is_string(v) &&
        nb_srv_bool_from_string(json_string_value(v), true) < 0) {
        /* the 2.25 enum: Nova's booleans and 'auto' */
        _cleanup_free_ char *r = nb_pyrepr(v);
        _cleanup_free_ char *why = nb_strdup_printf(
            "%s is not one of [True, 'True', 'TRUE', 'true', '1', 'ON', 'On', 'on', 'YES', "
            "'Yes', 'yes', False, 'False', 'FALSE', 'false', '0', 'OFF', 'Off', 'off', 'NO', "
            "'No', 'no', 'auto']",
            r);
        return nb_res_bad_field(ctx, "block_migration", v, why);
    }
    int b = nb_res_check_bool(ctx, "block_migration", v);
    if (b < 0)
        return -1;
    *out = b ? "true" : "false";
    return 0;
}

/* parameter_types.fqdn, nullable: the host. 0/-1. */
static int check_host(struct nb_ctx *ctx, const json_t *v)
{
    if (json_is_null(v))
        return 0;
    if (nb_srv_check_string(ctx, "host", v, 1, 255, true) < 0)
        return -1;
    for (const char *p = json_string_value(v); *p; p++)
        if (!(isalnum((unsigned char)*p) || *p == '-' || *p == '.' || *p == '_'))
            return nb_srv_bad(ctx, "host", v, "does not match '^[a-zA-Z0-9-._]*$'");
    return 0;
}

int nb_srv_check_live_migrate(struct nb_ctx *ctx, json_t *args)
{
    if (!json_is_object(args))
        return nb_srv_bad(ctx, "os-migrateLive", args, "is not of type 'object'");
    static const char *const v21[] = {"block_migration", "disk_over_commit", "host", NULL};
    static const char *const v225[] = {"block_migration", "host", NULL};
    static const char *const v230[] = {"block_migration", "host", "force", NULL};
    bool mv25 = nb_ctx_mv_ge(ctx, 2, 25);
    bool with_force = nb_ctx_mv_ge(ctx, 2, 30) && !nb_ctx_mv_ge(ctx, 2, 68);
    if (nb_res_only_keys(ctx, "os-migrateLive", args, !mv25 ? v21 : with_force ? v230 : v225) < 0)
        return -1;
    json_t *bm = nb_res_required(ctx, "os-migrateLive", args, "block_migration");
    if (!bm)
        return -1;
    if (!mv25 && !nb_res_required(ctx, "os-migrateLive", args, "disk_over_commit"))
        return -1;
    json_t *host = nb_res_required(ctx, "os-migrateLive", args, "host");
    if (!host)
        return -1;
    const char *bms;
    if (check_block_migration(ctx, bm, &bms) < 0)
        return -1;
    if (!mv25 &&
        nb_res_check_bool(ctx, "disk_over_commit", json_object_get(args, "disk_over_commit")) < 0)
        return -1;
    if (check_host(ctx, host) < 0)
        return -1;
    json_t *force = json_object_get(args, "force");
    if (with_force && force && nb_res_check_bool(ctx, "force", force) < 0)
        return -1;
    return 0;
}

/* Whether host has a compute node (Nova's ComputeNodeList.get_all_by_host):
 * 0, or 400 "Compute host <host> could not be found.". */
static int compute_host_exists(struct nb_ctx *ctx, const char *host)
{
    long long n =
        nb_db_int(nb_srv_db(), ctx, 0,
                  "SELECT COUNT(*) FROM compute_nodes WHERE host = ? AND deleted = 0", "s", host);
    if (nb_ctx_failed(ctx))
        return -1;
    if (n == 0)
        return nb_error(ctx, 400, NULL, "Compute host %s could not be found.", host);
    return 0;
}

/* Before 2.34: the conductor's dry run; 400 with the refusal when no host
 * passes. 0/-1. */
static int sync_prechecks(struct nb_ctx *ctx, const char *uuid, const char *host, const char *bm,
                          bool force)
{
    _cleanup_json_ json_t *r = nb_conductor_check_live_migration(
        ctx, uuid, host, bm, force, (int)nb_conf_int("DEFAULT", "rpc_response_timeout", 60) * 1000);
    if (!r)
        return nb_srv_error_as(ctx, 503, "The compute conductor is not available.");
    if (nb_json_str(r, "error"))
        return nb_error(ctx, 400, NULL, "%s", nb_json_str(r, "error"));
    size_t i;
    json_t *h;
    json_array_foreach (json_object_get(r, "hosts"), i, h)
        if (json_is_true(json_object_get(h, "ok")))
            return 0;
    json_t *first = json_array_get(json_object_get(r, "hosts"), 0);
    if (host && first)
        return nb_error(ctx, 400, NULL, "%s", nb_json_str(first, "message"));
    return nb_error(ctx, 400, NULL,
                    "No valid host was found. There are not enough hosts available.");
}

/* The migration record, the task state and the action in one transaction;
 * the new migration's uuid into mig. 0/-1. */
static int record(struct nb_ctx *ctx, const json_t *inst, const char *host, char mig[NB_UUID_LEN])
{
    struct nb_db *db = nb_srv_db();
    const struct nb_migration_new m = {
        .instance_uuid = nb_json_str(inst, "uuid"),
        .migration_type = NB_MIGRATION_LIVE,
        .status = NB_MIGRATION_ACCEPTED,
        .source_compute = nb_json_str(inst, "host"),
        .source_node = nb_json_str(inst, "node"),
        .dest_compute = host,
        .old_instance_type_id = nb_json_int(inst, "instance_type_id", 0),
        .new_instance_type_id = nb_json_int(inst, "instance_type_id", 0),
        .user_id = ctx->user_id,
        .project_id = ctx->project_id,
    };
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    if (nb_migration_create(db, ctx, &m, mig) < 0 ||
        nb_srv_begin_task(ctx, inst, "live-migration", "os-migrateLive", NB_TASK_MIGRATING,
                          nb_srv_none_only, false) < 0) {
        nb_db_rollback(db);
        return -1;
    }
    return nb_db_commit(db, ctx);
}

int nb_srv_live_migrate(struct nb_ctx *ctx, json_t *inst, json_t *args)
{
    const char *uuid = nb_json_str(inst, "uuid");
    static const char *const vm[] = {NB_VM_ACTIVE, NB_VM_PAUSED, NULL};
    const struct nb_srv_state_rule rule = {vm, nb_srv_none_only, false};
    if (nb_srv_policy(ctx, "os_compute_api:os-migrate-server:migrate_live", ctx->is_admin) < 0 ||
        nb_srv_check_lock(ctx, inst) < 0 ||
        nb_srv_check_state(ctx, inst, "os-migrateLive", &rule) < 0)
        return -1;
    json_t *h = json_object_get(args, "host");
    const char *host = json_is_string(h) ? json_string_value(h) : NULL;
    const char *bm = "auto";
    check_block_migration(ctx, json_object_get(args, "block_migration"), &bm);
    /* Nova: a host named before 2.30 is forced (no scheduler); 2.30-2.67
     * say so with force; else the scheduler's filters judge the host */
    bool force = host && !nb_ctx_mv_ge(ctx, 2, 30);
    if (nb_ctx_mv_ge(ctx, 2, 30) && !nb_ctx_mv_ge(ctx, 2, 68) && json_object_get(args, "force"))
        force = nb_res_check_bool(ctx, "force", json_object_get(args, "force")) == 1;
    if (force && !host)
        return nb_error(ctx, 400, NULL, "Can't force to a non-provided destination");
    if (host && compute_host_exists(ctx, host) < 0)
        return -1;
    if (nb_srv_check_host(ctx, inst) < 0)
        return -1;
    if (!nb_ctx_mv_ge(ctx, 2, 34) && sync_prechecks(ctx, uuid, host, bm, force) < 0)
        return -1;
    char mig[NB_UUID_LEN];
    if (record(ctx, inst, host, mig) < 0)
        return -1;
    NB_INFO(LOG_API, ctx, uuid, "Going to try to live migrate instance to %s (migration %s)",
            host ? host : "another host", mig);
    const struct nb_live_migrate_req req = {
        .uuid = uuid, .migration_uuid = mig, .host = host, .block_migration = bm, .force = force};
    if (nb_conductor_live_migrate_instance(
            ctx, &req, nb_srv_undo(NB_TASK_MIGRATING, NB_MIGRATION_ERROR, NULL)) < 0)
        return nb_srv_not_sent(ctx, uuid, "live_migrate_instance");
    return 0;
}

/* The dry run: the conductor's check_live_migration reply as the body. */
static int h_migration_check(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_srv_policy(ctx, "nubo:os-migration-check", ctx->is_admin) < 0)
        return -1;
    static const char *const allowed[] = {"host", "block_migration", NULL};
    if (nb_res_query_only(ctx, req, allowed) < 0)
        return -1;
    const char *host = nb_req_query(req, "host");
    const char *bm = nb_req_query(req, "block_migration");
    if (bm && strcmp(bm, "auto") && nb_srv_bool_from_string(bm, true) < 0)
        return nb_error(ctx, 400, NULL, "Invalid block_migration '%s': it is true, false or auto.",
                        bm);
    const char *bms = !bm || !strcmp(bm, "auto")          ? "auto"
                      : nb_srv_bool_from_string(bm, true) ? "true"
                                                          : "false";
    _cleanup_json_ json_t *inst = nb_srv_instance_get(ctx, nb_req_param(req, "server_id"), false);
    if (!inst)
        return -1;
    if (host && *host && compute_host_exists(ctx, host) < 0)
        return -1;
    json_t *r = nb_conductor_check_live_migration(
        ctx, nb_json_str(inst, "uuid"), host && *host ? host : NULL, bms, false,
        (int)nb_conf_int("DEFAULT", "rpc_response_timeout", 60) * 2000);
    if (!r)
        return nb_srv_error_as(ctx, 503, "The compute conductor is not available.");
    if (nb_json_str(r, "error")) {
        int rc = nb_error(ctx, 404, NULL, "%s", nb_json_str(r, "error"));
        json_decref(r);
        return rc;
    }
    return nb_resp_json(resp, 200, r);
}

int nb_compute_server_moves_init(struct nb_env *env)
{
    (void)env;
    nb_http_route("GET", "/compute/v2.1/servers/{server_id}/os-migration-check", h_migration_check,
                  0);
    return 0;
}
