/* server_evacuate.c - the evacuate server action (Nova's evacuate.py over
 * compute/api.py evacuate): an admin moves a server off a host whose
 * compute service is down (not heard from within [DEFAULT]
 * service_down_time, or forced down with `openstack compute service set
 * --down`). The body as Nova's evacuate schemas: host, onSharedStorage
 * (required before 2.14), adminPass, force (2.29-2.67). The API checks the
 * destination exists and is not the source, the instance's state and that
 * its service is down, then in one transaction sets task_state rebuilding,
 * starts action "evacuate" and creates the evacuation migration (status
 * accepted: also the tombstone by which the source, back up, finds what
 * to clean), and casts rebuild_instance with the migration to the
 * conductor. Nova answers 200 (not 202): {"adminPass"} before 2.14 (unless
 * [api] enable_instance_password is false), no body from 2.14. */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "compute/api/instances.h"
#include "compute/api/resources.h"
#include "compute/api/server_actions.h"
#include "compute/api/server_create.h"
#include "compute/api/server_rebuild.h"
#include "compute/api/validate.h"
#include "compute/compute.h"
#include "compute/objects/instance.h"
#include "compute/objects/migration.h"
#include "compute/rpc/conductor_api.h"
#include "db/db.h"

#include <ctype.h>
#include <string.h>

int nb_srv_check_evacuate(struct nb_ctx *ctx, json_t *args)
{
    if (!json_is_object(args))
        return nb_srv_bad(ctx, "evacuate", args, "is not of type 'object'");
    bool v214 = nb_ctx_mv_ge(ctx, 2, 14);
    const char *keys[5] = {"host", "adminPass"};
    int n = 2;
    if (!v214)
        keys[n++] = "onSharedStorage";
    if (nb_ctx_mv_ge(ctx, 2, 29) && !nb_ctx_mv_ge(ctx, 2, 68))
        keys[n++] = "force";
    keys[n] = NULL;
    if (!v214 && !json_object_get(args, "onSharedStorage"))
        return nb_error(ctx, 400, NULL,
                        "Invalid input for field/attribute evacuate. Value: {...}. "
                        "'onSharedStorage' is a required property");
    if (nb_res_only_keys(ctx, "evacuate", args, keys) < 0)
        return -1;
    json_t *v;
    if ((v = json_object_get(args, "host"))) {
        if (nb_srv_check_string(ctx, "host", v, 1, 255, false) < 0)
            return -1;
        for (const char *p = json_string_value(v); *p; p++)
            if (!isalnum((unsigned char)*p) && !strchr("-._", *p))
                return nb_srv_bad(ctx, "host", v, "does not match '^[a-zA-Z0-9-._]*$'");
    }
    if ((v = json_object_get(args, "adminPass")) && !json_is_string(v))
        return nb_srv_bad(ctx, "adminPass", v, "is not of type 'string'");
    if ((v = json_object_get(args, "onSharedStorage")) &&
        nb_res_check_bool(ctx, "onSharedStorage", v) < 0)
        return -1;
    if ((v = json_object_get(args, "force")) && nb_res_check_bool(ctx, "force", v) < 0)
        return -1;
    return 0;
}

/* The nova-compute services row of host (new ref), or NULL (none, or a
 * database error on ctx). */
static json_t *compute_service(struct nb_ctx *ctx, const char *host)
{
    return nb_db_row(nb_srv_db(), ctx,
                     "SELECT host, forced_down, last_seen_up, created_at FROM services WHERE "
                     "host = ? AND \"binary\" = 'nova-compute' AND deleted = 0",
                     "s", host);
}

/* The request as checked. */
struct evac_req {
    const char *host; /* NULL: scheduled */
    bool force;
    bool shared_given, on_shared;
    char generated[13];
    const char *password; /* NULL: none (shared storage before 2.14) */
};

/* Nova's _get_on_shared_storage / _get_password(_v214) and the forced
 * host rule. 0/-1. */
static int read_request(struct nb_ctx *ctx, json_t *args, struct evac_req *e)
{
    e->host = json_string_value(json_object_get(args, "host"));
    json_t *f = json_object_get(args, "force");
    if (nb_ctx_mv_ge(ctx, 2, 29)) {
        e->force = f && nb_srv_json_truthy(f);
        if (e->force && !e->host)
            return nb_error(ctx, 400, NULL, "Can't force to a non-provided destination");
    } else {
        e->force = e->host != NULL; /* before 2.29 a named host skips the scheduler */
    }
    const char *pass = json_string_value(json_object_get(args, "adminPass"));
    if (!nb_ctx_mv_ge(ctx, 2, 14)) {
        e->shared_given = true;
        e->on_shared = nb_srv_json_truthy(json_object_get(args, "onSharedStorage"));
        if (pass && e->on_shared)
            return nb_error(ctx, 400, NULL, "admin password can't be changed on existing disk");
        if (!pass && !e->on_shared) {
            nb_srv_generate_password(e->generated);
            pass = e->generated;
        }
    } else if (!pass) {
        nb_srv_generate_password(e->generated);
        pass = e->generated;
    }
    e->password = pass;
    return 0;
}

/* The destination (when named) is a compute host and not the source.
 * 0/-1. */
static int check_dest(struct nb_ctx *ctx, const json_t *inst, const struct evac_req *e)
{
    const char *source = nb_json_str(inst, "host");
    if (e->host) {
        _cleanup_json_ json_t *dst = compute_service(ctx, e->host);
        if (!dst)
            return nb_ctx_failed(ctx)
                       ? -1
                       : nb_error(ctx, 404, NULL, "Compute host %s not found.", e->host);
        if (source && !strcmp(source, e->host))
            return nb_error(ctx, 400, NULL, "The target host can't be the same one.");
    }
    return 0;
}

/* The source's compute service is down (Nova's servicegroup check). 0/-1. */
static int check_source_down(struct nb_ctx *ctx, const json_t *inst)
{
    const char *source = nb_json_str(inst, "host");
    if (nb_srv_check_host(ctx, inst) < 0)
        return -1;
    _cleanup_json_ json_t *src = compute_service(ctx, source);
    if (!src && nb_ctx_failed(ctx))
        return -1;
    if (src && nb_res_service_is_up(src)) {
        NB_ERROR("nubo.compute.api", ctx, nb_json_str(inst, "uuid"),
                 "Instance compute service state on %s expected to be down, but it was up.",
                 source);
        return nb_error(ctx, 400, NULL, "Compute service of %s is still in use.", source);
    }
    return 0;
}

/* task_state rebuilding (from None), action "evacuate" and the migration,
 * one transaction; its uuid into mig. 0/-1. */
static int begin_evacuate(struct nb_ctx *ctx, const json_t *inst, const struct evac_req *e,
                          char mig[NB_UUID_LEN])
{
    struct nb_db *db = nb_srv_db();
    const char *uuid = nb_json_str(inst, "uuid");
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    int n = (int)nb_instance_transition(db, ctx, uuid,
                                        &(struct nb_instance_change){
                                            .expect_vm = {nb_json_str(inst, "vm_state")},
                                            .expect_task = {NB_NONE},
                                            .expect_host = nb_json_str(inst, "host"),
                                            .task_state = NB_TASK_REBUILDING,
                                        },
                                        NULL);
    const struct nb_migration_new m = {
        .instance_uuid = uuid,
        .migration_type = NB_MIGRATION_EVACUATION,
        .status = "accepted",
        .source_compute = nb_json_str(inst, "host"),
        .source_node = nb_json_str(inst, "node"),
        .dest_compute = e->host, /* no flavor ids: Nova's evacuation record has none */
        .user_id = ctx->user_id,
        .project_id = ctx->project_id,
    };
    if (n < 0 ||
        (n == 0 &&
         nb_srv_invalid_state(ctx, "evacuate", uuid, "task_state", "(changed meanwhile)") < 0) ||
        nb_action_start(db, ctx, uuid, "evacuate") < 0 ||
        nb_migration_create(db, ctx, &m, mig) < 0) {
        nb_db_rollback(db);
        return -1;
    }
    return nb_db_commit(db, ctx);
}

int nb_srv_evacuate(struct nb_ctx *ctx, json_t *inst, json_t *args, struct nb_resp *resp)
{
    static const char *const vm[] = {NB_VM_ACTIVE, NB_VM_STOPPED, NB_VM_ERROR, NULL};
    const struct nb_srv_state_rule rule = {vm, nb_srv_none_only, true};
    const char *uuid = nb_json_str(inst, "uuid");
    struct evac_req e = {0};
    char mig[NB_UUID_LEN];
    if (nb_srv_policy(ctx, "os_compute_api:os-evacuate", ctx->is_admin) < 0 ||
        read_request(ctx, args, &e) < 0 || check_dest(ctx, inst, &e) < 0 ||
        nb_srv_check_state(ctx, inst, "evacuate", &rule) < 0 || check_source_down(ctx, inst) < 0 ||
        begin_evacuate(ctx, inst, &e, mig) < 0)
        return -1;
    NB_INFO("nubo.compute.api", ctx, uuid, "Evacuating instance from %s%s%s (migration %s)",
            nb_json_str(inst, "host"), e.host ? " to " : "", e.host ? e.host : "", mig);
    const struct nb_rebuild_req req = {
        .uuid = uuid,
        .image_ref = nb_json_str(inst, "image_ref"),
        .admin_password = e.password,
        .migration_uuid = mig,
        .host = e.host,
        .force = e.force,
        .shared_storage_given = e.shared_given,
        .on_shared_storage = e.on_shared,
    };
    if (nb_conductor_rebuild_instance(
            ctx, &req, nb_srv_undo(NB_TASK_REBUILDING, NB_MIGRATION_ERROR, NULL)) < 0)
        return nb_srv_not_sent(ctx, uuid, "rebuild_instance");
    if (!nb_ctx_mv_ge(ctx, 2, 14) && e.password &&
        nb_conf_bool("api", "enable_instance_password", true))
        return nb_resp_json(resp, 200, json_pack("{s:s}", "adminPass", e.password));
    return nb_resp_empty(resp, 200);
}
