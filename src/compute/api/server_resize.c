/* server_resize.c - the cold migration and resize server actions: migrate
 * (admin; a requested host from 2.56), resize (flavorRef,
 * OS-DCF:diskConfig), confirmResize and revertResize, as Nova's
 * migrate_server.py and servers.py over compute/api.py's resize,
 * confirm_resize and revert_resize.
 *
 * migrate and resize check what Nova's API checks (lock, vm_state active or
 * stopped with no task, a host that is up; for resize a flavor that exists,
 * is enabled, differs, keeps a disk unless volume-backed, and fits the
 * quota), then in one transaction set task_state resize_prep, create the
 * migration ("migration" or "resize", status pre-migrating, old and new
 * instance_type_id) and start the instance action (migrate / resize), and
 * cast migrate_server to the conductor, which schedules and moves. The
 * instance then sits in vm_state resized (VERIFY_RESIZE) with its migration
 * "finished" until confirmResize (migration confirming, action
 * confirmResize) or revertResize (task_state resize_reverting, migration
 * reverting, action revertResize). [DEFAULT] allow_resize_to_same_host
 * (default false, as Nova) lets a resize pick the instance's own host; a
 * cold migration never does (Nova allows it only on drivers with the
 * COMPUTE_SAME_HOST_COLD_MIGRATE trait, which libvirt lacks). */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "compute/api/api.h"
#include "compute/api/instances.h"
#include "compute/api/quotas.h"
#include "compute/api/resources.h"
#include "compute/api/server_actions.h"
#include "compute/api/server_resize.h"
#include "compute/api/validate.h"
#include "compute/compute.h"
#include "compute/objects/instance.h"
#include "compute/objects/migration.h"
#include "compute/rpc/conductor_api.h"
#include "db/db.h"

#include <stdio.h>
#include <string.h>

#define LOG_API "nubo.compute.api"

/* parameter_types.fqdn with null: 1-255 of [a-zA-Z0-9-._]. */
static int check_host_field(struct nb_ctx *ctx, json_t *h)
{
    if (json_is_null(h))
        return 0;
    if (nb_srv_check_string(ctx, "host", h, 1, 255, true) < 0)
        return -1;
    for (const char *p = json_string_value(h); *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '-' || *p == '.' || *p == '_'))
            return nb_srv_bad(ctx, "host", h, "does not match '^[a-zA-Z0-9-._]*$'");
    return 0;
}

int nb_srv_check_migrate(struct nb_ctx *ctx, json_t *args)
{
    if (!nb_ctx_mv_ge(ctx, 2, 56) || json_is_null(args))
        return 0; /* before 2.56 Nova has no schema: the body is ignored */
    static const char *const keys[] = {"host", NULL};
    if (!json_is_object(args))
        return nb_srv_bad(ctx, "migrate", args, "is not of type 'object', 'null'");
    if (nb_res_only_keys(ctx, "migrate", args, keys) < 0)
        return -1;
    json_t *h = json_object_get(args, "host");
    return h ? check_host_field(ctx, h) : 0;
}

int nb_srv_check_resize(struct nb_ctx *ctx, json_t *args)
{
    static const char *const keys[] = {"flavorRef", "OS-DCF:diskConfig", NULL};
    if (!json_is_object(args))
        return nb_srv_bad(ctx, "resize", args, "is not of type 'object'");
    json_t *f = nb_res_required(ctx, "resize", args, "flavorRef");
    if (!f || nb_res_only_keys(ctx, "resize", args, keys) < 0)
        return -1;
    if (!json_is_string(f) && !json_is_integer(f))
        return nb_srv_bad(ctx, "flavorRef", f, "is not of type 'string', 'integer'");
    if (json_is_string(f) && !*json_string_value(f))
        return nb_srv_bad(ctx, "flavorRef", f, "is too short");
    json_t *dc = json_object_get(args, "OS-DCF:diskConfig");
    if (dc && (!json_is_string(dc) ||
               (strcmp(json_string_value(dc), "AUTO") && strcmp(json_string_value(dc), "MANUAL"))))
        return nb_srv_bad(ctx, "OS-DCF:diskConfig", dc, "is not one of ['AUTO', 'MANUAL']");
    return 0;
}

/* The compute service row of host, or NULL (none; a database error is
 * left on ctx). New ref. */
static json_t *compute_service(struct nb_ctx *ctx, const char *host)
{
    return nb_db_row(nb_srv_db(), ctx,
                     "SELECT * FROM services WHERE host = ? AND \"binary\" = 'nova-compute' AND "
                     "deleted = 0",
                     "s", host);
}

/* Nova's check_instance_host(check_is_up=True): a host, whose compute
 * service is up (409 "Service is unavailable at this time."). */
static int check_host_up(struct nb_ctx *ctx, const json_t *inst, const char *host)
{
    if (nb_srv_check_host(ctx, inst) < 0)
        return -1;
    _cleanup_json_ json_t *svc = compute_service(ctx, host);
    if (nb_ctx_failed(ctx))
        return -1;
    if (!svc || !nb_res_service_is_up(svc))
        return nb_error(ctx, 409, NULL, "Service is unavailable at this time.");
    return 0;
}

/* Nova's _validate_host_for_cold_migrate: not the instance's host (400
 * CannotMigrateToSameHost), a compute node (400 ComputeHostNotFound). */
static int check_target_host(struct nb_ctx *ctx, const json_t *inst, const char *host)
{
    if (!strcmp(host, nb_json_str(inst, "host") ? nb_json_str(inst, "host") : ""))
        return nb_error(ctx, 400, NULL, "Cannot migrate to the host where the server exists.");
    long long n =
        nb_db_int(nb_srv_db(), ctx, 0,
                  "SELECT COUNT(*) FROM compute_nodes WHERE host = ? AND deleted = 0", "s", host);
    if (nb_ctx_failed(ctx))
        return -1;
    if (n == 0)
        return nb_error(ctx, 400, NULL, "Compute host %s could not be found.", host);
    return 0;
}

/* The instance's flavor (its "flavor" column): new ref, {} when unreadable. */
static json_t *instance_flavor(const json_t *inst, const char *column)
{
    json_t *f = nb_json_parse(nb_json_str(inst, column));
    return json_is_object(f) ? f : (json_decref(f), json_object());
}

/* Nova's _check_quota_for_upsize: the cores and RAM a resize adds (or a
 * revert takes back) must fit the project's (and the user's own) limits;
 * 403 TooManyInstances wording otherwise. */
static int check_upsize_quota(struct nb_ctx *ctx, const json_t *inst, const json_t *cur,
                              const json_t *next)
{
    long long delta[2] = {nb_json_int(next, "vcpus", 0) - nb_json_int(cur, "vcpus", 0),
                          nb_json_int(next, "memory_mb", 0) - nb_json_int(cur, "memory_mb", 0)};
    static const enum nb_quota_res res[2] = {NB_Q_CORES, NB_Q_RAM};
    if (delta[0] <= 0 && delta[1] <= 0)
        return 0;
    const char *project = nb_json_str(inst, "project_id");
    const char *user = nb_json_str(inst, "user_id");
    for (int scope = 0; scope < 2; scope++) {
        const char *uid = scope ? user : NULL;
        if (scope && !nb_quota_user_has_limits(ctx, project, user))
            break;
        long long limits[NB_Q_COUNT], used[NB_Q_COUNT];
        if (nb_quota_limits(ctx, project, uid, limits) < 0 ||
            nb_quota_usages(ctx, project, uid, used) < 0)
            return -1;
        for (int i = 0; i < 2; i++) {
            long long lim = limits[res[i]], u = used[res[i]];
            if (delta[i] > 0 && lim >= 0 && u + delta[i] > lim) {
                const char *name = nb_quota_name(res[i]);
                NB_INFO(LOG_API, ctx, nb_json_str(inst, "uuid"),
                        "%s quota exceeded for %s, tried to resize instance.", name, project);
                return nb_error(ctx, 403, NULL,
                                "Quota exceeded for %s: Requested %lld, but already used %lld of "
                                "%lld %s",
                                name, delta[i], u, lim, name);
            }
        }
    }
    return 0;
}

/* What a move request leaves for the conductor. */
struct move_req {
    const char *action;         /* "migrate" or "resize" */
    const char *type;           /* NB_MIGRATION_COLD or _RESIZE */
    const char *host;           /* requested destination, or NULL */
    const json_t *cur, *flavor; /* the instance's flavor and the new one */
    const char *disk_config;    /* "AUTO", "MANUAL" or NULL */
};

/* The migration record, task_state resize_prep (progress 0) and the
 * instance action, in one transaction; the new migration's uuid into mig. */
static int begin_move(struct nb_ctx *ctx, const json_t *inst, const struct move_req *m,
                      char mig[NB_UUID_LEN])
{
    struct nb_db *db = nb_srv_db();
    const char *uuid = nb_json_str(inst, "uuid");
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    const struct nb_migration_new rec = {
        .instance_uuid = uuid,
        .migration_type = m->type,
        .status = NB_MIGRATION_PRE_MIGRATING,
        .source_compute = nb_json_str(inst, "host"),
        .source_node = nb_json_str(inst, "node"),
        .dest_compute = m->host,
        .old_instance_type_id = nb_json_int(m->cur, "id", 0),
        .new_instance_type_id = nb_json_int(m->flavor, "id", 0),
        .user_id = ctx->user_id,
        .project_id = nb_json_str(inst, "project_id"),
    };
    if (nb_srv_begin_task(ctx, inst, m->action, m->action, NB_TASK_RESIZE_PREP, nb_srv_none_only,
                          true) < 0 ||
        nb_migration_create(db, ctx, &rec, mig) < 0 ||
        (m->disk_config &&
         nb_instance_update_attrs(db, ctx, uuid,
                                  &(struct nb_instance_attrs){
                                      .set_auto_disk_config = true,
                                      .auto_disk_config = !strcmp(m->disk_config, "AUTO")}) < 0)) {
        nb_db_rollback(db);
        return -1;
    }
    return nb_db_commit(db, ctx);
}

/* Checks shared by migrate and resize (Nova's decorators on resize:
 * check_instance_lock, check_instance_state(active, stopped; no task),
 * check_instance_host(check_is_up)). */
static int check_movable(struct nb_ctx *ctx, const json_t *inst, const char *action)
{
    static const char *const vm[] = {NB_VM_ACTIVE, NB_VM_STOPPED, NULL};
    const struct nb_srv_state_rule rule = {vm, nb_srv_none_only, true};
    if (nb_srv_check_lock(ctx, inst) < 0 || nb_srv_check_state(ctx, inst, action, &rule) < 0)
        return -1;
    return check_host_up(ctx, inst, nb_json_str(inst, "host"));
}

/* Records the move and casts migrate_server (sent until it arrives);
 * 503 when it cannot be (the migration is then set to error and the task
 * cleared, as when the sender gives up). */
static int start_move(struct nb_ctx *ctx, const json_t *inst, const struct move_req *m)
{
    char mig[NB_UUID_LEN];
    if (begin_move(ctx, inst, m, mig) < 0)
        return -1;
    const char *uuid = nb_json_str(inst, "uuid");
    bool same = !strcmp(m->type, NB_MIGRATION_RESIZE) &&
                nb_conf_bool("DEFAULT", "allow_resize_to_same_host", false);
    const struct nb_migrate_server_req r = {
        .uuid = uuid,
        .migration_uuid = mig,
        .host = m->host,
        .flavor = strcmp(m->type, NB_MIGRATION_RESIZE) ? NULL : m->flavor,
        .allow_same_host = same,
    };
    NB_INFO(LOG_API, ctx, uuid, "%s of the instance requested (migration %s, flavor %s -> %s%s%s)",
            m->action, mig, nb_json_str(m->cur, "name") ? nb_json_str(m->cur, "name") : "?",
            nb_json_str(m->flavor, "name") ? nb_json_str(m->flavor, "name") : "?",
            m->host ? ", host " : "", m->host ? m->host : "");
    if (nb_conductor_migrate_server(
            ctx, &r, nb_srv_undo(NB_TASK_RESIZE_PREP, NB_MIGRATION_ERROR, NULL)) == 0)
        return 0;
    return nb_srv_not_sent(ctx, uuid, "migrate_server");
}

int nb_srv_migrate(struct nb_ctx *ctx, json_t *inst, json_t *args)
{
    if (nb_srv_policy(ctx, "os_compute_api:os-migrate-server:migrate", ctx->is_admin) < 0)
        return -1;
    const char *host = NULL;
    if (nb_ctx_mv_ge(ctx, 2, 56) && json_is_object(args))
        host = json_string_value(json_object_get(args, "host"));
    if (check_movable(ctx, inst, "migrate") < 0 || (host && check_target_host(ctx, inst, host) < 0))
        return -1;
    _cleanup_json_ json_t *cur = instance_flavor(inst, "flavor");
    const struct move_req m = {"migrate", NB_MIGRATION_COLD, host, cur, cur, NULL};
    return start_move(ctx, inst, &m);
}

/* The flavor a resize asks for: as Nova's flavors.get_flavor_by_flavor_id
 * with read_deleted "no" (missing, or disabled when it is another flavor:
 * 400 "Flavor <id> could not be found."). New ref or NULL. */
static json_t *resize_flavor(struct nb_ctx *ctx, const json_t *ref, const json_t *cur)
{
    char id[64];
    if (json_is_integer(ref))
        snprintf(id, sizeof(id), "%lld", (long long)json_integer_value(ref));
    else
        nb_strlcpy(id, json_string_value(ref), sizeof(id));
    json_t *f = nb_flavor_get(ctx, id);
    if (!f) {
        nb_srv_error_as(ctx, 400, NULL);
        return NULL;
    }
    bool same = nb_json_int(f, "id", -1) == nb_json_int(cur, "id", -2);
    if (!same && nb_json_int(f, "disabled", 0)) {
        json_decref(f);
        nb_error(ctx, 400, NULL, "Flavor %s could not be found.", id);
        return NULL;
    }
    return f;
}

/* Nova's _validate_flavor_image_nostatus for a resize: the new flavor
 * against the image the instance was built from (its request spec's copy,
 * as Nova reads it from the system metadata): min_ram, and for an
 * image-backed server the image's size and min_disk against root_gb. */
static int check_flavor_image(struct nb_ctx *ctx, const json_t *inst, const json_t *flavor,
                              bool volume_backed)
{
    _cleanup_json_ json_t *spec = nb_json_parse(nb_json_str(inst, "request_spec"));
    const json_t *img = json_object_get(spec, "image");
    if (!json_is_object(img))
        return 0;
    if (nb_json_int(flavor, "memory_mb", 0) < nb_json_int(img, "min_ram", 0))
        return nb_error(ctx, 400, NULL, "Flavor's memory is too small for requested image.");
    long long gib = 1024LL * 1024 * 1024, dest = nb_json_int(flavor, "root_gb", 0) * gib;
    if (volume_backed || !dest)
        return 0;
    long long size = nb_json_int(img, "size", 0), min_disk = nb_json_int(img, "min_disk", 0) * gib;
    if (size > dest)
        return nb_error(ctx, 400, NULL,
                        "Flavor's disk is too small for requested image. Flavor disk is %lld "
                        "bytes, image is %lld bytes.",
                        dest, size);
    if (min_disk > dest)
        return nb_error(ctx, 400, NULL,
                        "Flavor's disk is smaller than the minimum size specified in image "
                        "metadata. Flavor disk is %lld bytes, minimum size is %lld bytes.",
                        dest, min_disk);
    return 0;
}

int nb_srv_resize(struct nb_ctx *ctx, json_t *inst, json_t *args)
{
    const char *project = nb_json_str(inst, "project_id");
    if (nb_srv_policy(ctx, "os_compute_api:servers:resize", nb_srv_is_member_of(ctx, project)) <
            0 ||
        check_movable(ctx, inst, "resize") < 0)
        return -1;
    _cleanup_json_ json_t *cur = instance_flavor(inst, "flavor");
    _cleanup_json_ json_t *flavor = resize_flavor(ctx, json_object_get(args, "flavorRef"), cur);
    if (!flavor)
        return -1;
    const char *image = nb_json_str(inst, "image_ref");
    bool volume_backed = !image || !*image;
    if (nb_json_int(flavor, "root_gb", 0) == 0 && nb_json_int(cur, "root_gb", 0) != 0 &&
        !volume_backed)
        return nb_error(ctx, 400, NULL,
                        "Server disk was unable to be resized because: Resize to zero disk "
                        "flavor is not allowed.");
    if (nb_json_int(flavor, "id", -1) == nb_json_int(cur, "id", -2))
        return nb_error(ctx, 400, NULL, "When resizing, instances must change flavor!");
    if (check_upsize_quota(ctx, inst, cur, flavor) < 0 ||
        check_flavor_image(ctx, inst, flavor, volume_backed) < 0)
        return -1;
    const struct move_req m = {
        "resize", NB_MIGRATION_RESIZE,
        NULL,     cur,
        flavor,   json_string_value(json_object_get(args, "OS-DCF:diskConfig"))};
    return start_move(ctx, inst, &m);
}

/* The instance's migration in status "finished" (new ref), or NULL after
 * Nova's 400 "Instance has not been resized." (MigrationNotFound). */
static json_t *finished_migration(struct nb_ctx *ctx, const json_t *inst)
{
    _cleanup_json_ json_t *rows =
        nb_migration_list_by_instance(nb_srv_db(), ctx, nb_json_str(inst, "uuid"));
    if (!rows)
        return NULL;
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        const char *st = nb_json_str(r, "status");
        if (st && !strcmp(st, NB_MIGRATION_FINISHED))
            return json_incref(r);
    }
    nb_error(ctx, 400, NULL, "Instance has not been resized.");
    return NULL;
}

/* The checks of confirmResize and revertResize: policy, lock, vm_state
 * resized with no task; the finished migration (new ref) or NULL. */
static json_t *check_resized(struct nb_ctx *ctx, const json_t *inst, const char *action,
                             const char *rule_name)
{
    static const char *const vm[] = {NB_VM_RESIZED, NULL};
    const struct nb_srv_state_rule rule = {vm, nb_srv_none_only, false};
    if (nb_srv_policy(ctx, rule_name, nb_srv_is_member_of(ctx, nb_json_str(inst, "project_id"))) <
            0 ||
        nb_srv_check_lock(ctx, inst) < 0 || nb_srv_check_state(ctx, inst, action, &rule) < 0)
        return NULL;
    return finished_migration(ctx, inst);
}

int nb_srv_confirm_resize(struct nb_ctx *ctx, json_t *inst, json_t *args, struct nb_resp *resp)
{
    (void)args;
    _cleanup_json_ json_t *mig =
        check_resized(ctx, inst, "confirmResize", "os_compute_api:servers:confirm_resize");
    if (!mig)
        return -1;
    const char *src = nb_json_str(mig, "source_compute");
    _cleanup_json_ json_t *svc = compute_service(ctx, src ? src : "");
    if (nb_ctx_failed(ctx))
        return -1;
    if (!svc || !nb_res_service_is_up(svc))
        return nb_error(ctx, 409, NULL, "Service is unavailable at this time.");
    struct nb_db *db = nb_srv_db();
    const char *uuid = nb_json_str(inst, "uuid");
    const char *mid = nb_json_str(mig, "uuid");
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    int n = nb_migration_set_status(db, ctx, mid, "confirming", NB_MIGRATION_FINISHED);
    if (n < 0 || (n == 0 && nb_error(ctx, 400, NULL, "Instance has not been resized.") < 0) ||
        nb_action_start(db, ctx, uuid, "confirmResize") < 0) {
        nb_db_rollback(db);
        return -1;
    }
    if (nb_db_commit(db, ctx) < 0)
        return -1;
    if (nb_conductor_confirm_resize(ctx, uuid, mid,
                                    nb_srv_undo(NULL, NB_MIGRATION_FINISHED, "confirming")) < 0)
        return nb_srv_not_sent(ctx, uuid, "confirm_resize");
    return nb_resp_empty(resp, 204);
}

int nb_srv_revert_resize(struct nb_ctx *ctx, json_t *inst, json_t *args)
{
    (void)args;
    _cleanup_json_ json_t *mig =
        check_resized(ctx, inst, "revertResize", "os_compute_api:servers:revert_resize");
    if (!mig)
        return -1;
    _cleanup_json_ json_t *cur = instance_flavor(inst, "flavor");
    _cleanup_json_ json_t *old = instance_flavor(inst, "old_flavor");
    if (!json_object_size(old))
        return nb_error(ctx, 400, NULL, "Flavor used by the instance could not be found.");
    if (check_upsize_quota(ctx, inst, cur, old) < 0)
        return -1;
    struct nb_db *db = nb_srv_db();
    const char *uuid = nb_json_str(inst, "uuid");
    const char *mid = nb_json_str(mig, "uuid");
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    int n = -1;
    if (nb_srv_begin_task(ctx, inst, "revertResize", "revertResize", NB_TASK_RESIZE_REVERTING,
                          nb_srv_none_only, false) == 0)
        n = nb_migration_set_status(db, ctx, mid, "reverting", NB_MIGRATION_FINISHED);
    if (n < 0 || (n == 0 && nb_error(ctx, 400, NULL, "Instance has not been resized.") < 0)) {
        nb_db_rollback(db);
        return -1;
    }
    if (nb_db_commit(db, ctx) < 0)
        return -1;
    if (nb_conductor_revert_resize(
            ctx, uuid, mid,
            nb_srv_undo(NB_TASK_RESIZE_REVERTING, NB_MIGRATION_FINISHED, "reverting")) < 0)
        return nb_srv_not_sent(ctx, uuid, "revert_resize");
    return 0;
}
