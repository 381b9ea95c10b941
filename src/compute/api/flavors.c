/* flavors.c - /flavors, os-flavor-access and os-extra_specs, as Nova's
 * flavors.py, flavor_manage.py, flavor_access.py and flavors_extraspecs.py.
 *
 * Flavors are addressed by flavorid. A flavor is visible to a project when it
 * is public or the project is in flavor_projects; admins see all of them.
 * Views follow Nova's view builder: "swap" is "" for 0 before 2.75,
 * "description" appears from 2.55 and "extra_specs" from 2.61 (for readers).
 * Deletion is a hard delete of the flavor with its specs and access rows, as
 * Nova does in its API database. */
#include "compute/api/api.h"
#include "compute/api/links.h"
#include "compute/api/resources.h"
#include "compute/api/validate.h"
#include "common/cleanup.h"
#include "common/json.h"
#include "common/pyrepr.h"
#include "common/util.h"
#include "db/db.h"
#include "identity/identity.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct nb_env *env;

static const char *const sort_keys[] = {"created_at", "description", "disabled",    "ephemeral_gb",
                                        "flavorid",   "id",          "is_public",   "memory_mb",
                                        "name",       "root_gb",     "rxtx_factor", "swap",
                                        "updated_at", "vcpu_weight", "vcpus",       NULL};

/* Extra specs of the flavor with internal id fid as an object (new ref), or
 * NULL on a database error. */
static json_t *load_specs(struct nb_ctx *ctx, long long fid)
{
    _cleanup_json_ json_t *rows = nb_db_rows(
        env->db, ctx,
        "SELECT \"key\", value FROM flavor_extra_specs WHERE flavor_id = ? ORDER BY \"key\"", "i",
        fid);
    if (!rows)
        return NULL;
    json_t *specs = json_object();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        const char *v = nb_json_str(r, "value");
        json_object_set_new(specs, nb_json_str(r, "key"), json_string(v ? v : ""));
    }
    return specs;
}

/* The flavors row by flavorid that ctx may see (NULL: not found, or db error
 * recorded in ctx). */
static json_t *find_flavor(struct nb_ctx *ctx, const char *flavorid)
{
    if (ctx->is_admin)
        return nb_db_row(env->db, ctx, "SELECT * FROM flavors WHERE flavorid = ?", "s", flavorid);
    return nb_db_row(env->db, ctx,
                     "SELECT * FROM flavors WHERE flavorid = ? AND (is_public = 1 OR id IN "
                     "(SELECT flavor_id FROM flavor_projects WHERE project_id = ?))",
                     "ss", flavorid, ctx->project_id);
}

json_t *nb_flavor_get(struct nb_ctx *ctx, const char *flavorid)
{
    json_t *row = find_flavor(ctx, flavorid);
    if (!row) {
        if (!nb_ctx_failed(ctx))
            nb_error(ctx, 404, NULL, "Flavor %s could not be found.", flavorid);
        return NULL;
    }
    json_t *specs = load_specs(ctx, nb_json_int(row, "id", 0));
    if (!specs) {
        json_decref(row);
        return NULL;
    }
    json_object_set_new(row, "extra_specs", specs);
    return row;
}

/* Readers may see extra specs (os-flavor-extra-specs:index). */
static bool may_see_specs(const struct nb_ctx *ctx)
{
    return ctx->is_admin || ctx->is_reader;
}

/* Nova's ViewBuilder.show (detail) or basic (brief). specs is borrowed and
 * only shown when non-NULL. New ref. */
static json_t *flavor_view(struct nb_ctx *ctx, const json_t *row, bool detail, json_t *specs)
{
    const char *fid = nb_json_str(row, "flavorid");
    json_t *f = json_pack("{s:s, s:s}", "id", fid, "name", nb_json_str(row, "name"));
    if (detail) {
        long long swap = nb_json_int(row, "swap", 0);
        json_object_set_new(f, "ram", json_integer(nb_json_int(row, "memory_mb", 0)));
        json_object_set_new(f, "disk", json_integer(nb_json_int(row, "root_gb", 0)));
        if (nb_ctx_mv_ge(ctx, 2, 75) || swap)
            json_object_set_new(f, "swap", json_integer(swap));
        else
            json_object_set_new(f, "swap", json_string(""));
        json_object_set_new(f, "OS-FLV-EXT-DATA:ephemeral",
                            json_integer(nb_json_int(row, "ephemeral_gb", 0)));
        json_object_set_new(f, "OS-FLV-DISABLED:disabled", nb_res_row_bool(row, "disabled"));
        json_object_set_new(f, "vcpus", json_integer(nb_json_int(row, "vcpus", 0)));
        json_object_set_new(f, "os-flavor-access:is_public", nb_res_row_bool(row, "is_public"));
        json_t *rx = json_object_get(row, "rxtx_factor");
        double rxv = json_is_number(rx) ? json_number_value(rx) : 0;
        json_object_set_new(f, "rxtx_factor", rxv ? json_real(rxv) : json_string(""));
    }
    json_object_set_new(f, "links", nb_res_links("flavors", fid));
    if (nb_ctx_mv_ge(ctx, 2, 55))
        json_object_set_new(f, "description", nb_res_row_copy(row, "description"));
    if (detail && specs)
        json_object_set(f, "extra_specs", specs);
    return f;
}

/* Full view of a row, with its extra specs when the microversion and policy
 * show them. New ref or NULL on a db error. */
static json_t *flavor_show_view(struct nb_ctx *ctx, const json_t *row)
{
    _cleanup_json_ json_t *specs = NULL;
    if (nb_ctx_mv_ge(ctx, 2, 61) && may_see_specs(ctx)) {
        specs = load_specs(ctx, nb_json_int(row, "id", 0));
        if (!specs)
            return NULL;
    }
    return flavor_view(ctx, row, true, specs);
}

/* --- list ---------------------------------------------------------------------- */

/* Parses minRam/minDisk: Nova's int() of the value. 0/-1. */
static int parse_min(struct nb_ctx *ctx, struct nb_req *req, const char *name, long long *out)
{
    const char *v = nb_req_query(req, name);
    *out = -1;
    if (!v)
        return 0;
    char *end;
    const char *p = v;
    while (*p == ' ')
        p++;
    long long n = strtoll(p, &end, 10);
    while (*end == ' ')
        end++;
    if (end == p || *end)
        return nb_error(ctx, 400, NULL, "Invalid %s filter [%s]", name, v);
    *out = n;
    return 0;
}

static int check_enum_query(struct nb_ctx *ctx, struct nb_req *req, const char *name,
                            const char *const *values, const char *shown)
{
    const char *v = nb_req_query(req, name);
    if (!v)
        return 0;
    for (const char *const *e = values; *e; e++)
        if (strcmp(*e, v) == 0)
            return 0;
    return nb_error(ctx, 400, NULL,
                    "Invalid input for query parameters %s. Value: %s. '%s' is not one of %s", name,
                    v, v, shown);
}

static int list_flavors(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp, bool detail)
{
    static const char *const allowed[] = {"limit",   "marker",   "is_public", "minRam",
                                          "minDisk", "sort_key", "sort_dir",  NULL};
    static const char *const dirs[] = {"asc", "desc", NULL};
    if (nb_ctx_mv_ge(ctx, 2, 75) && nb_res_query_only(ctx, req, allowed) < 0)
        return -1;
    long long limit;
    const char *marker;
    if (nb_res_limit_marker(ctx, req, &limit, &marker) < 0 ||
        check_enum_query(ctx, req, "sort_key", sort_keys,
                         "['created_at', 'description', 'disabled', 'ephemeral_gb', "
                         "'flavorid', 'id', 'is_public', 'memory_mb', 'name', 'root_gb', "
                         "'rxtx_factor', 'swap', 'updated_at', 'vcpu_weight', 'vcpus']") < 0 ||
        check_enum_query(ctx, req, "sort_dir", dirs, "['asc', 'desc']") < 0)
        return -1;
    const char *sort_key = nb_req_query(req, "sort_key");
    const char *sort_dir = nb_req_query(req, "sort_dir");
    if (!sort_key || !*sort_key)
        sort_key = "flavorid";
    if (!sort_dir || !*sort_dir)
        sort_dir = "asc";
    if (strcmp(sort_key, "vcpu_weight") == 0)
        sort_key = "id"; /* nubo has no vcpu_weight column: every value would be NULL */

    /* is_public: admins may ask for public (default), private or all ("none"). */
    int is_public = 1; /* 1 public (+ own access), 0 private only, -1 all */
    bool only_enabled = !ctx->is_admin;
    if (ctx->is_admin) {
        const char *ip = nb_req_query(req, "is_public");
        if (ip && nb_res_is_none_string(ip))
            is_public = -1;
        else if (ip && (is_public = nb_srv_bool_from_string(ip, true)) < 0)
            return nb_error(ctx, 400, NULL, "Invalid is_public filter [%s]", ip);
    }
    long long min_ram, min_disk;
    if (parse_min(ctx, req, "minRam", &min_ram) < 0 ||
        parse_min(ctx, req, "minDisk", &min_disk) < 0)
        return -1;

    long long mid = 0;
    if (marker) {
        _cleanup_json_ json_t *m = find_flavor(ctx, marker);
        if (!m)
            return nb_ctx_failed(ctx) ? -1
                                      : nb_error(ctx, 400, NULL, "marker [%s] not found", marker);
        mid = nb_json_int(m, "id", 0);
    }
    const char *cmp = strcmp(sort_dir, "desc") == 0 ? "<" : ">";
    /* sort_key is one of sort_keys (checked above), safe to put in the SQL. */
    _cleanup_free_ char *sql = nb_strdup_printf(
        "SELECT * FROM flavors WHERE (?1 = -1 OR (?1 = 1 AND (is_public = 1 OR id IN "
        "(SELECT flavor_id FROM flavor_projects WHERE project_id = ?2))) OR "
        "(?1 = 0 AND is_public = 0)) AND (?3 = 0 OR disabled = 0) "
        "AND (?4 < 0 OR memory_mb >= ?4) AND (?5 < 0 OR root_gb >= ?5) "
        "AND (?6 = 0 OR %s %s (SELECT %s FROM flavors WHERE id = ?6) OR "
        "((%s = (SELECT %s FROM flavors WHERE id = ?6) OR (%s IS NULL AND (SELECT %s FROM "
        "flavors WHERE id = ?6) IS NULL)) AND id %s ?6)) "
        "ORDER BY %s %s, id %s LIMIT ?7",
        sort_key, cmp, sort_key, sort_key, sort_key, sort_key, sort_key, cmp, sort_key, sort_dir,
        sort_dir);
    _cleanup_json_ json_t *rows =
        nb_db_rows(env->db, ctx, sql, "isiiiii", (long long)is_public, ctx->project_id,
                   (long long)only_enabled, min_ram, min_disk, mid, limit);
    if (!rows)
        return -1;
    json_t *list = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        json_t *v = detail ? flavor_show_view(ctx, r) : flavor_view(ctx, r, false, NULL);
        if (!v) {
            json_decref(list);
            return -1;
        }
        json_array_append_new(list, v);
    }
    json_t *body = json_pack("{s:o}", "flavors", list);
    size_t n = json_array_size(rows);
    nb_res_next_link(body, "flavors_links", req, detail ? "flavors/detail" : "flavors", n,
                     n ? nb_json_str(json_array_get(rows, n - 1), "flavorid") : NULL);
    return nb_resp_json(resp, 200, body);
}

static int flavors_index(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    return list_flavors(ctx, req, resp, false);
}

static int flavors_detail(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    return list_flavors(ctx, req, resp, true);
}

static int flavors_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *id = nb_req_param(req, "flavor_id");
    _cleanup_json_ json_t *row = find_flavor(ctx, id);
    if (!row)
        return nb_ctx_failed(ctx) ? -1
                                  : nb_error(ctx, 404, NULL, "Flavor %s could not be found.", id);
    json_t *v = flavor_show_view(ctx, row);
    return v ? nb_resp_json(resp, 200, json_pack("{s:o}", "flavor", v)) : -1;
}

/* --- create, update, delete ---------------------------------------------------- */

/* Nova's valid_description_regex: printable characters, spaces included. */
static bool description_ok(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return false;
    return true;
}

/* flavor_manage.flavor_description: string or null, up to 65535 chars. */
static int check_description(struct nb_ctx *ctx, const json_t *v)
{
    if (json_is_null(v))
        return 0;
    if (!json_is_string(v)) {
        _cleanup_free_ char *r = nb_pyrepr(v);
        _cleanup_free_ char *why = nb_strdup_printf("%s is not of type 'string', 'null'", r);
        return nb_res_bad_field(ctx, "description", v, why);
    }
    if (nb_srv_check_string(ctx, "description", v, 0, 65535, false) < 0)
        return -1;
    if (!description_ok(json_string_value(v))) {
        _cleanup_free_ char *r = nb_pyrepr(v);
        _cleanup_free_ char *why =
            nb_strdup_printf("%s does not match '^[printable characters]*$'", r);
        return nb_res_bad_field(ctx, "description", v, why);
    }
    return 0;
}

/* The flavor "id": string (1-255, [a-zA-Z0-9. _-], no edge spaces), number or
 * null. Writes the flavorid to use into out (malloc'd; NULL = generate). */
static int check_flavor_id(struct nb_ctx *ctx, const json_t *v, char **out)
{
    *out = NULL;
    if (!v || json_is_null(v))
        return 0;
    if (json_is_integer(v) || json_is_real(v)) {
        if (json_number_value(v) != 0)
            *out = nb_pyrepr(v);
        return 0;
    }
    if (!json_is_string(v)) {
        _cleanup_free_ char *r = nb_pyrepr(v);
        _cleanup_free_ char *why =
            nb_strdup_printf("%s is not of type 'string', 'number', 'null'", r);
        return nb_res_bad_field(ctx, "id", v, why);
    }
    if (nb_srv_check_string(ctx, "id", v, 1, 255, false) < 0)
        return -1;
    const char *s = json_string_value(v);
    bool ok = s[0] != ' ' && s[strlen(s) - 1] != ' ';
    for (const char *p = s; *p && ok; p++)
        ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
             *p == '.' || *p == ' ' || *p == '_' || *p == '-';
    if (!ok) {
        _cleanup_free_ char *r = nb_pyrepr(v);
        _cleanup_free_ char *why =
            nb_strdup_printf("%s does not match '^(?! )[a-zA-Z0-9. _-]+(?<! )$'", r);
        return nb_res_bad_field(ctx, "id", v, why);
    }
    *out = strdup(s);
    return 0;
}

/* rxtx_factor: a number or numeric string, > 0 and <= 3.40282e+38. */
static int check_rxtx(struct nb_ctx *ctx, const json_t *v, double *out)
{
    double d;
    _cleanup_free_ char *r = nb_pyrepr(v);
    if (json_is_number(v)) {
        d = json_number_value(v);
    } else if (json_is_string(v)) {
        const char *s = json_string_value(v), *p = s;
        bool ok = *p >= '0' && *p <= '9';
        while (*p >= '0' && *p <= '9')
            p++;
        if (ok && *p == '.') {
            p++;
            ok = *p >= '0' && *p <= '9';
            while (*p >= '0' && *p <= '9')
                p++;
        }
        if (!ok || *p) {
            _cleanup_free_ char *why =
                nb_strdup_printf("%s does not match '^[0-9]+(\\.[0-9]+)?$'", r);
            return nb_res_bad_field(ctx, "rxtx_factor", v, why);
        }
        d = strtod(s, NULL);
    } else {
        _cleanup_free_ char *why = nb_strdup_printf("%s is not of type 'number', 'string'", r);
        return nb_res_bad_field(ctx, "rxtx_factor", v, why);
    }
    if (d <= 0) {
        _cleanup_free_ char *why =
            nb_strdup_printf("%s is less than or equal to the minimum of 0", r);
        return nb_res_bad_field(ctx, "rxtx_factor", v, why);
    }
    if (d > 3.40282e+38) {
        _cleanup_free_ char *why =
            nb_strdup_printf("%s is greater than the maximum of 3.40282e+38", r);
        return nb_res_bad_field(ctx, "rxtx_factor", v, why);
    }
    *out = d;
    return 0;
}

struct flavor_in {
    const char *name;
    char *flavorid;
    long long ram, vcpus, disk, ephemeral, swap;
    double rxtx;
    int is_public;
    const char *description;
};

/* parse_create's checks, in Nova's schema order; in->flavorid may be set
 * when a later field fails. 0/-1. */
static int parse_create_fields(struct nb_ctx *ctx, struct nb_req *req, struct flavor_in *in)
{
    static const char *const keys[] = {"name",        "id",          "ram",
                                       "vcpus",       "disk",        "OS-FLV-EXT-DATA:ephemeral",
                                       "swap",        "rxtx_factor", "os-flavor-access:is_public",
                                       "description", NULL};
    bool v255 = nb_ctx_mv_ge(ctx, 2, 55);
    json_t *f = nb_res_body_object(ctx, req, "flavor", NULL);
    if (!f)
        return -1;
    json_t *v;
    if ((v = json_object_get(f, "name")) && nb_srv_check_name(ctx, "name", v) < 0)
        return -1;
    if (check_flavor_id(ctx, json_object_get(f, "id"), &in->flavorid) < 0)
        return -1;
    struct {
        const char *key;
        long long min, *out;
    } ints[] = {{"ram", 1, &in->ram},
                {"vcpus", 1, &in->vcpus},
                {"disk", 0, &in->disk},
                {"OS-FLV-EXT-DATA:ephemeral", 0, &in->ephemeral},
                {"swap", 0, &in->swap}};
    for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++)
        if ((v = json_object_get(f, ints[i].key)) &&
            nb_res_check_int(ctx, ints[i].key, v, ints[i].min, NB_RES_MAX_INT, ints[i].out) < 0)
            return -1;
    if ((v = json_object_get(f, "rxtx_factor")) && check_rxtx(ctx, v, &in->rxtx) < 0)
        return -1;
    if ((v = json_object_get(f, "os-flavor-access:is_public")) &&
        (in->is_public = nb_res_check_bool(ctx, "os-flavor-access:is_public", v)) < 0)
        return -1;
    if (v255 && (v = json_object_get(f, "description"))) {
        if (check_description(ctx, v) < 0)
            return -1;
        in->description = json_string_value(v);
    }
    static const char *const required[] = {"name", "ram", "vcpus", "disk"};
    for (size_t i = 0; i < 4; i++)
        if (!nb_res_required(ctx, "flavor", f, required[i]))
            return -1;
    const char *const *allowed = keys;
    static const char *const keys_pre255[] = {"name",  "id",          "ram",
                                              "vcpus", "disk",        "OS-FLV-EXT-DATA:ephemeral",
                                              "swap",  "rxtx_factor", "os-flavor-access:is_public",
                                              NULL};
    if (!v255)
        allowed = keys_pre255;
    if (nb_res_only_keys(ctx, "flavor", f, allowed) < 0)
        return -1;
    in->name = json_string_value(json_object_get(f, "name"));
    return 0;
}

/* Validates the create body as flavor_manage.create(_v2_55). 0, or -1 with
 * in->flavorid NULL; on success the caller frees in->flavorid. */
static int parse_create(struct nb_ctx *ctx, struct nb_req *req, struct flavor_in *in)
{
    *in = (struct flavor_in){.rxtx = 1.0, .is_public = 1};
    if (parse_create_fields(ctx, req, in) == 0)
        return 0;
    free(in->flavorid);
    in->flavorid = NULL;
    return -1;
}

/* The body is checked before the policy, as Nova's schema decorator runs
 * before the method (a reader's bad body is a 400). */
static int flavors_create(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    struct flavor_in in;
    if (parse_create(ctx, req, &in) < 0)
        return -1;
    _cleanup_free_ char *flavorid = in.flavorid;
    if (nb_res_admin(ctx, "os_compute_api:os-flavor-manage:create") < 0)
        return -1;
    char uuid[NB_UUID_LEN], now[32];
    if (!flavorid) {
        nb_uuid(uuid);
        flavorid = strdup(uuid);
    }
    if (nb_db_begin(env->db, ctx) < 0)
        return -1;
    int rc = -1;
    if (nb_db_int(env->db, ctx, 0, "SELECT COUNT(*) FROM flavors WHERE flavorid = ?", "s",
                  flavorid) > 0)
        nb_error(ctx, 409, NULL, "Flavor with ID %s already exists.", flavorid);
    else if (nb_db_int(env->db, ctx, 0, "SELECT COUNT(*) FROM flavors WHERE name = ?", "s",
                       in.name) > 0)
        nb_error(ctx, 409, NULL, "Flavor with name %s already exists.", in.name);
    else
        rc = nb_db_exec(env->db, ctx,
                        "INSERT INTO flavors (flavorid, name, memory_mb, vcpus, root_gb, "
                        "ephemeral_gb, swap, rxtx_factor, is_public, description, created_at) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        "ssiiiiidbss", flavorid, in.name, in.ram, in.vcpus, in.disk, in.ephemeral,
                        in.swap, in.rxtx, in.is_public, in.description, nb_now_iso_us(now));
    if (rc < 0 || nb_ctx_failed(ctx)) {
        nb_db_rollback(env->db);
        return -1;
    }
    if (nb_db_commit(env->db, ctx) < 0)
        return -1;
    _cleanup_json_ json_t *row =
        nb_db_row(env->db, ctx, "SELECT * FROM flavors WHERE flavorid = ?", "s", flavorid);
    if (!row)
        return nb_ctx_failed(ctx) ? -1 : nb_error(ctx, 500, NULL, "Flavor vanished after create.");
    _cleanup_json_ json_t *specs = json_object();
    json_t *v =
        flavor_view(ctx, row, true, nb_ctx_mv_ge(ctx, 2, 61) && may_see_specs(ctx) ? specs : NULL);
    return nb_resp_json(resp, 200, json_pack("{s:o}", "flavor", v));
}

static int flavors_update(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    static const char *const keys[] = {"description", NULL};
    if (!nb_ctx_mv_ge(ctx, 2, 55))
        return nb_error(ctx, 404, NULL, "The resource could not be found.");
    json_t *f = nb_res_body_object(ctx, req, "flavor", NULL);
    if (!f)
        return -1;
    json_t *d = json_object_get(f, "description");
    if ((d && check_description(ctx, d) < 0) || !nb_res_required(ctx, "flavor", f, "description") ||
        nb_res_only_keys(ctx, "flavor", f, keys) < 0)
        return -1;
    if (nb_res_admin(ctx, "os_compute_api:os-flavor-manage:update") < 0)
        return -1;
    const char *id = nb_req_param(req, "flavor_id");
    char now[32];
    int n = nb_db_exec(env->db, ctx,
                       "UPDATE flavors SET description = ?, updated_at = ? WHERE flavorid = ?",
                       "sss", json_string_value(d), nb_now_iso_us(now), id);
    if (n < 0)
        return -1;
    if (n == 0)
        return nb_error(ctx, 404, NULL, "Flavor %s could not be found.", id);
    _cleanup_json_ json_t *row =
        nb_db_row(env->db, ctx, "SELECT * FROM flavors WHERE flavorid = ?", "s", id);
    if (!row)
        return nb_ctx_failed(ctx) ? -1
                                  : nb_error(ctx, 404, NULL, "Flavor %s could not be found.", id);
    json_t *v = flavor_show_view(ctx, row);
    if (v && !json_object_get(v, "description"))
        json_object_set_new(v, "description", nb_res_row_copy(row, "description"));
    return v ? nb_resp_json(resp, 200, json_pack("{s:o}", "flavor", v)) : -1;
}

static int flavors_delete(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_res_admin(ctx, "os_compute_api:os-flavor-manage:delete") < 0)
        return -1;
    const char *id = nb_req_param(req, "flavor_id");
    if (nb_db_begin(env->db, ctx) < 0)
        return -1;
    long long fid =
        nb_db_int(env->db, ctx, 0, "SELECT id FROM flavors WHERE flavorid = ?", "s", id);
    if (fid <= 0) {
        nb_db_rollback(env->db);
        return nb_ctx_failed(ctx) ? -1
                                  : nb_error(ctx, 404, NULL, "Flavor %s could not be found.", id);
    }
    if (nb_db_exec(env->db, ctx, "DELETE FROM flavor_extra_specs WHERE flavor_id = ?", "i", fid) <
            0 ||
        nb_db_exec(env->db, ctx, "DELETE FROM flavor_projects WHERE flavor_id = ?", "i", fid) < 0 ||
        nb_db_exec(env->db, ctx, "DELETE FROM flavors WHERE id = ?", "i", fid) < 0) {
        nb_db_rollback(env->db);
        return -1;
    }
    if (nb_db_commit(env->db, ctx) < 0)
        return -1;
    return nb_resp_empty(resp, 202);
}

/* --- os-flavor-access ------------------------------------------------------------- */

static json_t *access_list(struct nb_ctx *ctx, const json_t *flavor)
{
    _cleanup_json_ json_t *rows = nb_db_rows(
        env->db, ctx, "SELECT project_id FROM flavor_projects WHERE flavor_id = ? ORDER BY rowid",
        "i", nb_json_int(flavor, "id", 0));
    if (!rows)
        return NULL;
    json_t *list = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        json_array_append_new(list,
                              json_pack("{s:s, s:s}", "flavor_id", nb_json_str(flavor, "flavorid"),
                                        "tenant_id", nb_json_str(r, "project_id")));
    }
    return json_pack("{s:o}", "flavor_access", list);
}

static int access_index(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_res_admin(ctx, "os_compute_api:os-flavor-access") < 0)
        return -1;
    const char *id = nb_req_param(req, "flavor_id");
    _cleanup_json_ json_t *f = find_flavor(ctx, id);
    if (!f)
        return nb_ctx_failed(ctx) ? -1
                                  : nb_error(ctx, 404, NULL, "Flavor %s could not be found.", id);
    if (nb_json_int(f, "is_public", 1))
        return nb_error(ctx, 404, NULL, "Access list not available for public flavors.");
    json_t *body = access_list(ctx, f);
    return body ? nb_resp_json(resp, 200, body) : -1;
}

/* Validates {"<action>": {"tenant": "<1-255 chars>"}}; returns the tenant. */
static const char *parse_tenant(struct nb_ctx *ctx, struct nb_req *req, const char *action)
{
    static const char *const keys[] = {"tenant", NULL};
    json_t *a = nb_res_body_object(ctx, req, action, NULL);
    if (!a)
        return NULL;
    json_t *t = json_object_get(a, "tenant");
    if ((t && nb_srv_check_string(ctx, "tenant", t, 1, 255, false) < 0) ||
        !nb_res_required(ctx, action, a, "tenant") || nb_res_only_keys(ctx, action, a, keys) < 0)
        return NULL;
    return json_string_value(t);
}

/* identity.verify_project_id: the project must exist in Keystone. */
static int verify_project(struct nb_ctx *ctx, const char *project)
{
    int n = nb_identity_project_exists(env->db, ctx, project);
    if (n < 0)
        return -1;
    if (n == 0)
        return nb_error(ctx, 400, NULL, "Project ID %s is not a valid project.", project);
    return 0;
}

static int add_tenant_access(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *tenant = parse_tenant(ctx, req, "addTenantAccess");
    if (!tenant || nb_res_admin(ctx, "os_compute_api:os-flavor-access:add_tenant_access") < 0 ||
        verify_project(ctx, tenant) < 0)
        return -1;
    const char *id = nb_req_param(req, "flavor_id");
    _cleanup_json_ json_t *f = find_flavor(ctx, id);
    if (!f)
        return nb_ctx_failed(ctx) ? -1
                                  : nb_error(ctx, 404, NULL, "Flavor %s could not be found.", id);
    if (nb_ctx_mv_ge(ctx, 2, 7) && nb_json_int(f, "is_public", 1))
        return nb_error(ctx, 409, NULL, "Can not add access to a public flavor.");
    long long fid = nb_json_int(f, "id", 0);
    if (nb_db_int(env->db, ctx, 0,
                  "SELECT COUNT(*) FROM flavor_projects WHERE flavor_id = ? AND project_id = ?",
                  "is", fid, tenant) > 0)
        return nb_error(ctx, 409, NULL,
                        "Flavor access already exists for flavor %s and project %s combination.",
                        id, tenant);
    if (nb_db_exec(env->db, ctx,
                   "INSERT INTO flavor_projects (flavor_id, project_id) VALUES (?, ?)", "is", fid,
                   tenant) < 0)
        return -1;
    json_t *body = access_list(ctx, f);
    return body ? nb_resp_json(resp, 200, body) : -1;
}

static int remove_tenant_access(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *tenant = parse_tenant(ctx, req, "removeTenantAccess");
    if (!tenant || nb_res_admin(ctx, "os_compute_api:os-flavor-access:remove_tenant_access") < 0)
        return -1;
    /* An unknown project is fine here: its access row can go either way. */
    const char *id = nb_req_param(req, "flavor_id");
    _cleanup_json_ json_t *f = find_flavor(ctx, id);
    if (!f)
        return nb_ctx_failed(ctx) ? -1
                                  : nb_error(ctx, 404, NULL, "Flavor %s could not be found.", id);
    int n = nb_db_exec(env->db, ctx,
                       "DELETE FROM flavor_projects WHERE flavor_id = ? AND project_id = ?", "is",
                       nb_json_int(f, "id", 0), tenant);
    if (n < 0)
        return -1;
    if (n == 0)
        return nb_error(ctx, 404, NULL, "Flavor access not found for %s / %s combination.", id,
                        tenant);
    json_t *body = access_list(ctx, f);
    return body ? nb_resp_json(resp, 200, body) : -1;
}

static int flavors_action(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    json_t *body = req->json;
    if (!json_is_object(body) || json_object_size(body) == 0)
        return nb_error(ctx, 400, NULL, "Malformed request body");
    if (json_object_get(body, "addTenantAccess"))
        return add_tenant_access(ctx, req, resp);
    if (json_object_get(body, "removeTenantAccess"))
        return remove_tenant_access(ctx, req, resp);
    void *it = json_object_iter(body);
    return nb_error(ctx, 400, NULL, "There is no such action: %s", json_object_iter_key(it));
}

/* --- os-extra_specs ---------------------------------------------------------------- */

/* Key pattern of parameter_types.metadata: ^[a-zA-Z0-9-_:. ]{1,255}$. */
static bool spec_key_ok(const char *k)
{
    size_t n = strlen(k);
    if (n < 1 || n > 255)
        return false;
    for (const char *p = k; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '-' || *p == '_' || *p == ':' || *p == '.' || *p == ' '))
            return false;
    return true;
}

/* Validates a metadata object whose values are strings (<= 255) or
 * numbers; field names it in messages (NULL at top level). On success fills
 * out (new ref) with the values as Nova stores them (str()). 0/-1. */
static int check_specs(struct nb_ctx *ctx, const char *field, const json_t *specs, json_t **out)
{
    if (!json_is_object(specs)) {
        _cleanup_free_ char *r = nb_pyrepr(specs);
        _cleanup_free_ char *why = nb_strdup_printf("%s is not of type 'object'", r);
        return nb_res_bad_field(ctx, field, specs, why);
    }
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)specs, k, v) {
        if (!spec_key_ok(k))
            continue; /* reported below as an additional property */
        if (json_is_string(v)) {
            if (nb_srv_check_string(ctx, k, v, 0, 255, false) < 0)
                return -1;
        } else if (!json_is_number(v)) {
            _cleanup_free_ char *r = nb_pyrepr(v);
            _cleanup_free_ char *why = nb_strdup_printf("%s is not of type 'string', 'number'", r);
            return nb_res_bad_field(ctx, k, v, why);
        }
    }
    json_t *stored = json_object();
    json_object_foreach ((json_t *)specs, k, v) {
        if (!spec_key_ok(k)) {
            json_decref(stored);
            _cleanup_free_ char *why =
                nb_strdup_printf("Additional properties are not allowed ('%s' was unexpected)", k);
            return nb_res_bad_field(ctx, field, specs, why);
        }
        char *s = nb_res_pystr(v);
        if (strlen(s) > 255) {
            free(s);
            json_decref(stored);
            return nb_error(ctx, 400, NULL,
                            "Invalid input received: extra_specs value has more than 255 "
                            "characters.");
        }
        json_object_set_new(stored, k, json_string(s));
        free(s);
    }
    *out = stored;
    return 0;
}

static int save_specs(struct nb_ctx *ctx, long long fid, json_t *stored)
{
    const char *k;
    json_t *v;
    if (nb_db_begin(env->db, ctx) < 0)
        return -1;
    char sql[256];
    nb_db_upsert(env->db, sql, sizeof(sql),
                 "INSERT INTO flavor_extra_specs (flavor_id, \"key\", value) VALUES (?, ?, ?)",
                 "flavor_id, \"key\"", "value", NULL);
    json_object_foreach (stored, k, v) {
        if (nb_db_exec(env->db, ctx, sql, "iss", fid, k, json_string_value(v)) < 0) {
            nb_db_rollback(env->db);
            return -1;
        }
    }
    char now[32];
    if (nb_db_exec(env->db, ctx, "UPDATE flavors SET updated_at = ? WHERE id = ?", "si",
                   nb_now_iso_us(now), fid) < 0) {
        nb_db_rollback(env->db);
        return -1;
    }
    return nb_db_commit(env->db, ctx);
}

static json_t *specs_flavor(struct nb_ctx *ctx, struct nb_req *req)
{
    const char *id = nb_req_param(req, "flavor_id");
    json_t *f = find_flavor(ctx, id);
    if (!f && !nb_ctx_failed(ctx))
        nb_error(ctx, 404, NULL, "Flavor %s could not be found.", id);
    return f;
}

static int specs_index(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (!may_see_specs(ctx))
        return nb_res_deny(ctx, "os_compute_api:os-flavor-extra-specs:index");
    _cleanup_json_ json_t *f = specs_flavor(ctx, req);
    if (!f)
        return -1;
    json_t *specs = load_specs(ctx, nb_json_int(f, "id", 0));
    return specs ? nb_resp_json(resp, 200, json_pack("{s:o}", "extra_specs", specs)) : -1;
}

static int specs_create(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    json_t *body = req->json;
    if (!json_is_object(body))
        return nb_error(ctx, 400, NULL, "The request body is invalid.");
    json_t *specs = json_object_get(body, "extra_specs");
    _cleanup_json_ json_t *stored = NULL;
    static const char *const top[] = {"extra_specs", NULL};
    if (specs && check_specs(ctx, "extra_specs", specs, &stored) < 0)
        return -1;
    if (!nb_res_required(ctx, NULL, body, "extra_specs") ||
        nb_res_only_keys(ctx, NULL, body, top) < 0)
        return -1;
    if (nb_res_admin(ctx, "os_compute_api:os-flavor-extra-specs:create") < 0)
        return -1;
    _cleanup_json_ json_t *f = specs_flavor(ctx, req);
    if (!f || save_specs(ctx, nb_json_int(f, "id", 0), stored) < 0)
        return -1;
    return nb_resp_json(resp, 200, json_incref(body));
}

static int specs_update(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    json_t *body = req->json;
    _cleanup_json_ json_t *stored = NULL;
    if (!body)
        return nb_error(ctx, 400, NULL, "The request body is invalid.");
    if (check_specs(ctx, NULL, body, &stored) < 0)
        return -1;
    if (json_object_size(body) < 1 || json_object_size(body) > 1) {
        _cleanup_free_ char *r = nb_pyrepr(body);
        return nb_error(ctx, 400, NULL, "%s %s", r,
                        json_object_size(body) < 1 ? "does not have enough properties"
                                                   : "has too many properties");
    }
    if (nb_res_admin(ctx, "os_compute_api:os-flavor-extra-specs:update") < 0)
        return -1;
    const char *key = nb_req_param(req, "key");
    if (!json_object_get(body, key))
        return nb_error(ctx, 400, NULL, "Request body and URI mismatch");
    _cleanup_json_ json_t *f = specs_flavor(ctx, req);
    if (!f || save_specs(ctx, nb_json_int(f, "id", 0), stored) < 0)
        return -1;
    return nb_resp_json(resp, 200, json_incref(body));
}

static int specs_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (!may_see_specs(ctx))
        return nb_res_deny(ctx, "os_compute_api:os-flavor-extra-specs:show");
    _cleanup_json_ json_t *f = specs_flavor(ctx, req);
    if (!f)
        return -1;
    const char *key = nb_req_param(req, "key");
    _cleanup_json_ json_t *row = nb_db_row(
        env->db, ctx, "SELECT value FROM flavor_extra_specs WHERE flavor_id = ? AND \"key\" = ?",
        "is", nb_json_int(f, "id", 0), key);
    if (!row)
        return nb_ctx_failed(ctx)
                   ? -1
                   : nb_error(ctx, 404, NULL, "Flavor %s has no extra specs with key %s.",
                              nb_req_param(req, "flavor_id"), key);
    const char *v = nb_json_str(row, "value");
    return nb_resp_json(resp, 200, json_pack("{s:s}", key, v ? v : ""));
}

static int specs_delete(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_res_admin(ctx, "os_compute_api:os-flavor-extra-specs:delete") < 0)
        return -1;
    _cleanup_json_ json_t *f = specs_flavor(ctx, req);
    if (!f)
        return -1;
    const char *key = nb_req_param(req, "key");
    int n = nb_db_exec(env->db, ctx,
                       "DELETE FROM flavor_extra_specs WHERE flavor_id = ? AND \"key\" = ?", "is",
                       nb_json_int(f, "id", 0), key);
    if (n < 0)
        return -1;
    if (n == 0)
        return nb_error(ctx, 404, NULL, "Flavor %s has no extra specs with key %s.",
                        nb_req_param(req, "flavor_id"), key);
    return nb_resp_empty(resp, 200);
}

int nb_compute_flavors_init(struct nb_env *e)
{
    env = e;
    nb_http_route("GET", "/compute/v2.1/flavors", flavors_index, 0);
    nb_http_route("GET", "/compute/v2.1/flavors/detail", flavors_detail, 0);
    nb_http_route("GET", "/compute/v2.1/flavors/{flavor_id}", flavors_show, 0);
    nb_http_route("POST", "/compute/v2.1/flavors", flavors_create, 0);
    nb_http_route("PUT", "/compute/v2.1/flavors/{flavor_id}", flavors_update, 0);
    nb_http_route("DELETE", "/compute/v2.1/flavors/{flavor_id}", flavors_delete, 0);
    nb_http_route("POST", "/compute/v2.1/flavors/{flavor_id}/action", flavors_action, 0);
    nb_http_route("GET", "/compute/v2.1/flavors/{flavor_id}/os-flavor-access", access_index, 0);
    nb_http_route("GET", "/compute/v2.1/flavors/{flavor_id}/os-extra_specs", specs_index, 0);
    nb_http_route("POST", "/compute/v2.1/flavors/{flavor_id}/os-extra_specs", specs_create, 0);
    nb_http_route("GET", "/compute/v2.1/flavors/{flavor_id}/os-extra_specs/{key}", specs_show, 0);
    nb_http_route("PUT", "/compute/v2.1/flavors/{flavor_id}/os-extra_specs/{key}", specs_update, 0);
    nb_http_route("DELETE", "/compute/v2.1/flavors/{flavor_id}/os-extra_specs/{key}", specs_delete,
                  0);
    return 0;
}
