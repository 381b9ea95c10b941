/* quotas.c - Cinder's quotas for volumes, snapshots and gigabytes:
 * enforcement on create/extend, /os-quota-sets (show, defaults, update,
 * delete) and /limits.
 *
 * Limits are rows of volume_quotas (per project), else the defaults
 * [volume] quota_volumes (10), quota_snapshots (10), quota_gigabytes
 * (1000), quota_backups (10), quota_backup_gigabytes (1000), quota_groups
 * (10), per_volume_size_limit (-1), as Cinder's options. Usage is counted
 * from the live rows (volumes and their sizes; snapshots, whose sizes count
 * against gigabytes too, as Cinder does), inside the caller's transaction,
 * so check-then-insert cannot race. Messages are Cinder's exceptions'. */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "db/db.h"
#include "volume/volume_int.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct resource {
    const char *name;
    const char *option; /* [volume] option holding the default */
    long long def;
};

/* The per-type keys of the one (default) volume type come last. */
static const struct resource resources[] = {
    {"volumes", "quota_volumes", 10},
    {"snapshots", "quota_snapshots", 10},
    {"gigabytes", "quota_gigabytes", 1000},
    {"backups", "quota_backups", 10},
    {"backup_gigabytes", "quota_backup_gigabytes", 1000},
    {"groups", "quota_groups", 10},
    {"per_volume_gigabytes", "per_volume_size_limit", -1},
    {"volumes_" NB_VOL_DEFAULT_TYPE_NAME, NULL, -1},
    {"gigabytes_" NB_VOL_DEFAULT_TYPE_NAME, NULL, -1},
    {"snapshots_" NB_VOL_DEFAULT_TYPE_NAME, NULL, -1},
};
#define NRESOURCES (sizeof(resources) / sizeof(resources[0]))

/* Accepted in a quota_set body and ignored (cinderclient sends tenant_id). */
static bool non_quota_key(const char *k)
{
    return strcmp(k, "tenant_id") == 0 || strcmp(k, "id") == 0;
}

static const struct resource *find_resource(const char *name)
{
    for (size_t i = 0; i < NRESOURCES; i++)
        if (strcmp(resources[i].name, name) == 0)
            return &resources[i];
    return NULL;
}

static long long default_limit(const struct resource *r)
{
    return r->option ? nb_conf_int("volume", r->option, r->def) : r->def;
}

long long nb_vol_quota_limit(struct nb_ctx *ctx, const char *project_id, const char *resource)
{
    const struct resource *r = find_resource(resource);
    long long def = r ? default_limit(r) : -1;
    return nb_db_int(nb_vol_env->db, ctx, def,
                     "SELECT hard_limit FROM volume_quotas WHERE project_id = ? AND resource = ?",
                     "ss", project_id, resource);
}

/* In-use counts of a project: volumes, snapshots, gigabytes. */
struct usage {
    long long volumes, snapshots, gigabytes;
};

static int usage_of(struct nb_ctx *ctx, const char *project_id, struct usage *u)
{
    _cleanup_json_ json_t *v = nb_db_row(
        nb_vol_env->db, ctx,
        "SELECT (SELECT COUNT(*) FROM volumes WHERE project_id = ? AND deleted = 0 AND "
        "use_quota = 1) AS volumes, (SELECT COALESCE(SUM(size), 0) FROM volumes WHERE "
        "project_id = ? AND deleted = 0 AND use_quota = 1) AS vgb, (SELECT COUNT(*) FROM "
        "snapshots WHERE project_id = ? AND deleted = 0 AND use_quota = 1) AS snapshots, "
        "(SELECT COALESCE(SUM(volume_size), 0) FROM snapshots WHERE project_id = ? AND deleted "
        "= 0 AND use_quota = 1) AS sgb",
        "ssss", project_id, project_id, project_id, project_id);
    if (!v)
        return -1;
    u->volumes = nb_json_int(v, "volumes", 0);
    u->snapshots = nb_json_int(v, "snapshots", 0);
    u->gigabytes = nb_json_int(v, "vgb", 0) + nb_json_int(v, "sgb", 0);
    return 0;
}

int nb_vol_quota_check(struct nb_ctx *ctx, const char *project_id, int volumes, int snapshots,
                       long long gigabytes)
{
    struct usage u;
    if (usage_of(ctx, project_id, &u) < 0)
        return -1;
    long long lv = nb_vol_quota_limit(ctx, project_id, "volumes");
    long long ls = nb_vol_quota_limit(ctx, project_id, "snapshots");
    long long lg = nb_vol_quota_limit(ctx, project_id, "gigabytes");
    long long per = nb_vol_quota_limit(ctx, project_id, "per_volume_gigabytes");
    if (volumes && per >= 0 && gigabytes > per)
        return nb_error(ctx, 413, NULL,
                        "Requested volume size %lldG is larger than maximum allowed limit %lldG.",
                        gigabytes, per);
    if (volumes && lv >= 0 && u.volumes + volumes > lv) {
        NB_WARN(NB_VOL_LOG, ctx, NULL,
                "Quota exceeded for %s, tried to create volume (%lld volumes already consumed).",
                project_id, u.volumes);
        return nb_error(ctx, 413, NULL,
                        "Maximum number of volumes allowed (%lld) exceeded for quota 'volumes'.",
                        lv);
    }
    if (snapshots && ls >= 0 && u.snapshots + snapshots > ls) {
        NB_WARN(NB_VOL_LOG, ctx, NULL,
                "Quota exceeded for %s, tried to create snapshot (%lld snapshots already "
                "consumed).",
                project_id, u.snapshots);
        return nb_error(ctx, 413, NULL, "Maximum number of snapshots allowed (%lld) exceeded", ls);
    }
    if (lg >= 0 && u.gigabytes + gigabytes > lg) {
        NB_WARN(NB_VOL_LOG, ctx, NULL,
                "Quota exceeded for %s, tried to create %lldG %s (%lldG of %lldG already "
                "consumed).",
                project_id, gigabytes, snapshots ? "snapshot" : "volume", u.gigabytes, lg);
        return nb_error(ctx, 413, NULL,
                        "Requested volume or snapshot exceeds allowed gigabytes quota. Requested "
                        "%lldG, quota is %lldG and %lldG has been consumed.",
                        gigabytes, lg, u.gigabytes);
    }
    return 0;
}

/* --- /os-quota-sets ------------------------------------------------------------ */

static long long in_use(const struct usage *u, const char *name)
{
    if (!strcmp(name, "volumes") || !strcmp(name, "volumes_" NB_VOL_DEFAULT_TYPE_NAME))
        return u->volumes;
    if (!strcmp(name, "snapshots") || !strcmp(name, "snapshots_" NB_VOL_DEFAULT_TYPE_NAME))
        return u->snapshots;
    if (!strcmp(name, "gigabytes") || !strcmp(name, "gigabytes_" NB_VOL_DEFAULT_TYPE_NAME))
        return u->gigabytes;
    return 0;
}

/* The quota set of project (limits, or {limit, in_use, reserved} with
 * usage); defaults_only ignores the project's rows. New reference. */
static json_t *quota_set(struct nb_ctx *ctx, const char *project, bool usage, bool defaults_only)
{
    struct usage u = {0};
    if (usage && usage_of(ctx, project, &u) < 0)
        return NULL;
    json_t *qs = json_object();
    for (size_t i = 0; i < NRESOURCES; i++) {
        const char *n = resources[i].name;
        long long lim =
            defaults_only ? default_limit(&resources[i]) : nb_vol_quota_limit(ctx, project, n);
        if (usage)
            json_object_set_new(qs, n,
                                json_pack("{s:I, s:I, s:i}", "limit", (json_int_t)lim, "in_use",
                                          (json_int_t)in_use(&u, n), "reserved", 0));
        else
            json_object_set_new(qs, n, json_integer(lim));
    }
    return qs;
}

/* Cinder's policy: admins, or readers of the project itself. */
static int may_show(struct nb_ctx *ctx, const char *project)
{
    if (ctx->is_admin || strcmp(project, ctx->project_id) == 0)
        return 0;
    return nb_error(ctx, 403, NULL,
                    "Policy doesn't allow volume_extension:quotas:show to be performed.");
}

static int quotas_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_vol_begin(ctx, req, resp) < 0)
        return -1;
    const char *target = nb_req_param(req, "target_project_id");
    if (may_show(ctx, target) < 0)
        return -1;
    bool usage = nb_bool_from_string(nb_req_query(req, "usage")) == 1;
    json_t *qs = quota_set(ctx, target, usage, false);
    if (!qs)
        return -1;
    json_object_set_new(qs, "id", json_string(target));
    return nb_resp_json(resp, 200, json_pack("{s:o}", "quota_set", qs));
}

static int quotas_defaults(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_vol_begin(ctx, req, resp) < 0)
        return -1;
    const char *target = nb_req_param(req, "target_project_id");
    json_t *qs = quota_set(ctx, target, false, true);
    json_object_set_new(qs, "id", json_string(target));
    return nb_resp_json(resp, 200, json_pack("{s:o}", "quota_set", qs));
}

/* Validates a quota_set body: known keys, integers >= -1, not below usage. */
static int check_update(struct nb_ctx *ctx, const char *target, json_t *qs)
{
    struct usage u;
    if (usage_of(ctx, target, &u) < 0)
        return -1;
    const char *k;
    json_t *v;
    char bad[512] = "";
    json_object_foreach (qs, k, v) {
        if (!find_resource(k) && !non_quota_key(k)) {
            size_t l = strlen(bad);
            snprintf(bad + l, sizeof(bad) - l, "%s%s", l ? ", " : "", k);
        }
    }
    if (bad[0])
        return nb_error(ctx, 400, NULL, "Invalid input received: Bad key(s) in quota set: %s", bad);
    json_object_foreach (qs, k, v) {
        if (non_quota_key(k))
            continue;
        long long val;
        char *end = NULL;
        if (json_is_integer(v))
            val = json_integer_value(v);
        else if (json_is_string(v) && (val = strtoll(json_string_value(v), &end, 10), *end == 0) &&
                 end != json_string_value(v))
            ;
        else
            return nb_error(ctx, 400, NULL, "%s must be an integer.", k);
        if (val < -1)
            return nb_error(ctx, 400, NULL, "%s must be >= -1", k);
        if (val > 2147483647)
            return nb_error(ctx, 400, NULL, "%s must be <= 2147483647", k);
        long long used = in_use(&u, k);
        if (strcmp(k, "per_volume_gigabytes") != 0 && val != -1 && val < used)
            return nb_error(ctx, 400, NULL,
                            "Quota %s limit must be equal or greater than existing resources. "
                            "Current usage is %lld and the requested limit is %lld.",
                            k, used, val);
    }
    return 0;
}

static int quotas_update(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_vol_begin(ctx, req, resp) < 0)
        return -1;
    const char *target = nb_req_param(req, "target_project_id");
    if (!ctx->is_admin)
        return nb_error(ctx, 403, NULL,
                        "Policy doesn't allow volume_extension:quotas:update to be performed.");
    json_t *qs = nb_vol_body(ctx, req, "quota_set");
    if (!qs)
        return -1;
    struct nb_db *db = nb_vol_env->db;
    char now[32];
    nb_now_iso_us(now);
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    int rc = check_update(ctx, target, qs);
    const char *k;
    json_t *v;
    json_object_foreach (qs, k, v) {
        if (rc < 0)
            break;
        if (non_quota_key(k))
            continue;
        long long val = json_is_integer(v) ? json_integer_value(v) : atoll(json_string_value(v));
        rc = nb_db_exec(db, ctx,
                        "UPDATE volume_quotas SET hard_limit = ?, updated_at = ? WHERE "
                        "project_id = ? AND resource = ?",
                        "isss", val, now, target, k);
        if (rc == 0)
            rc = nb_db_exec(db, ctx,
                            "INSERT INTO volume_quotas (project_id, resource, hard_limit, "
                            "created_at) VALUES (?, ?, ?, ?)",
                            "ssis", target, k, val, now);
    }
    if (rc < 0) {
        nb_db_rollback(db);
        return -1;
    }
    if (nb_db_commit(db, ctx) < 0)
        return -1;
    NB_INFO(NB_VOL_LOG, ctx, NULL, "Volume quotas of project %s updated", target);
    json_t *out = quota_set(ctx, target, false, false);
    return out ? nb_resp_json(resp, 200, json_pack("{s:o}", "quota_set", out)) : -1;
}

static int quotas_delete(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_vol_begin(ctx, req, resp) < 0)
        return -1;
    const char *target = nb_req_param(req, "target_project_id");
    if (!ctx->is_admin)
        return nb_error(ctx, 403, NULL,
                        "Policy doesn't allow volume_extension:quotas:delete to be performed.");
    if (nb_db_exec(nb_vol_env->db, ctx, "DELETE FROM volume_quotas WHERE project_id = ?", "s",
                   target) < 0)
        return -1;
    return nb_resp_empty(resp, 200);
}

/* --- /limits --------------------------------------------------------------------- */

static int limits_index(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_vol_begin(ctx, req, resp) < 0)
        return -1;
    const char *project = ctx->project_id;
    const char *asked = nb_req_query(req, "project_id");
    if (asked && ctx->is_admin && nb_vol_mv(ctx, 39))
        project = asked;
    struct usage u;
    if (usage_of(ctx, project, &u) < 0)
        return -1;
    json_t *abs = json_pack(
        "{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:i, s:i}", "maxTotalVolumes",
        (json_int_t)nb_vol_quota_limit(ctx, project, "volumes"), "maxTotalSnapshots",
        (json_int_t)nb_vol_quota_limit(ctx, project, "snapshots"), "maxTotalVolumeGigabytes",
        (json_int_t)nb_vol_quota_limit(ctx, project, "gigabytes"), "maxTotalBackups",
        (json_int_t)nb_vol_quota_limit(ctx, project, "backups"), "maxTotalBackupGigabytes",
        (json_int_t)nb_vol_quota_limit(ctx, project, "backup_gigabytes"), "totalVolumesUsed",
        (json_int_t)u.volumes, "totalGigabytesUsed", (json_int_t)u.gigabytes, "totalSnapshotsUsed",
        (json_int_t)u.snapshots, "totalBackupsUsed", 0, "totalBackupGigabytesUsed", 0);
    return nb_resp_json(resp, 200, json_pack("{s:{s:[], s:o}}", "limits", "rate", "absolute", abs));
}

void nb_vol_quotas_routes(void)
{
    nb_http_route("GET", "/volume/v3/{project_id}/os-quota-sets/{target_project_id}", quotas_show,
                  0);
    nb_http_route("GET", "/volume/v3/{project_id}/os-quota-sets/{target_project_id}/defaults",
                  quotas_defaults, 0);
    nb_http_route("PUT", "/volume/v3/{project_id}/os-quota-sets/{target_project_id}", quotas_update,
                  0);
    nb_http_route("DELETE", "/volume/v3/{project_id}/os-quota-sets/{target_project_id}",
                  quotas_delete, 0);
    nb_http_route("GET", "/volume/v3/{project_id}/limits", limits_index, 0);
}
