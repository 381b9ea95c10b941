/* classes.c - resource classes: /placement/resource_classes[/{name}] (1.2+).
 *
 * Standard classes (VCPU, MEMORY_MB, …) are inserted at start-up with the
 * ids os-resource-classes gives them (their index), custom ones
 * (CUSTOM_*) get ids from 10000 as in placement, so listing by id shows
 * standard classes first. Inventories and allocations store the class
 * name, so renaming a custom class (PUT at 1.2-1.6) renames it there too. */
#include "common/cleanup.h"
#include "common/http.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "db/db.h"
#include "placement/internal.h"

#include <stdio.h>
#include <string.h>

#define CUSTOM_RC_FIRST_ID 10000

/* Inserts the names of `std` missing from table (ids given by index when
 * with_ids). */
static int sync_names(struct nb_ctx *ctx, const char *table, const char *const *std, bool with_ids)
{
    _cleanup_free_ char *sel = nb_strdup_printf("SELECT name FROM %s", table);
    _cleanup_json_ json_t *rows = nb_db_rows(plc_db(), ctx, sel, "");
    if (!rows)
        return -1;
    _cleanup_json_ json_t *have = json_object();
    size_t i;
    json_t *row;
    json_array_foreach (rows, i, row) {
        json_object_set_new(have, nb_json_str(row, "name"), json_true());
    }
    _cleanup_free_ char *ins_id =
        nb_strdup_printf("INSERT INTO %s (id, name) VALUES (?, ?)", table);
    _cleanup_free_ char *ins = nb_strdup_printf("INSERT INTO %s (name) VALUES (?)", table);
    for (long long k = 0; std[k]; k++) {
        if (json_object_get(have, std[k]))
            continue;
        int rc = with_ids ? nb_db_exec(plc_db(), ctx, ins_id, "is", k, std[k])
                          : nb_db_exec(plc_db(), ctx, ins, "s", std[k]);
        if (rc < 0)
            return -1;
    }
    return 0;
}

int plc_sync_standard(struct nb_ctx *ctx)
{
    if (nb_db_begin(plc_db(), ctx) < 0)
        return -1;
    if (sync_names(ctx, "resource_classes", plc_standard_rcs, true) < 0 ||
        sync_names(ctx, "traits", plc_standard_traits, false) < 0) {
        nb_db_rollback(plc_db());
        return -1;
    }
    return nb_db_commit(plc_db(), ctx);
}

bool plc_rc_is_standard(const char *name)
{
    for (size_t i = 0; plc_standard_rcs[i]; i++)
        if (name[0] == plc_standard_rcs[i][0] && strcmp(name, plc_standard_rcs[i]) == 0)
            return true;
    return false;
}

bool plc_rc_exists(struct nb_ctx *ctx, const char *name)
{
    /* Inserted before the API serves (plc_sync_standard), never renamed
     * nor deleted (rc_rename_locked, rc_delete_locked refuse): no query. */
    if (plc_rc_is_standard(name))
        return true;
    return nb_db_int(plc_db(), ctx, 0, "SELECT COUNT(*) FROM resource_classes WHERE name = ?", "s",
                     name) > 0;
}

static json_t *rc_view(const char *name)
{
    char href[320];
    snprintf(href, sizeof(href), "/placement/resource_classes/%s", name);
    return json_pack("{s:s, s:[{s:s, s:s}]}", "name", name, "links", "rel", "self", "href", href);
}

static int rc_list(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (plc_mv(ctx) < 2)
        return plc_not_at_version(ctx);
    if (plc_require_admin(ctx, "placement:resource_classes:list") < 0)
        return -1;
    _cleanup_json_ json_t *rows =
        nb_db_rows(plc_db(), ctx, "SELECT name FROM resource_classes ORDER BY id", "");
    if (!rows)
        return -1;
    json_t *list = json_array();
    size_t i;
    json_t *row;
    json_array_foreach (rows, i, row) {
        json_array_append_new(list, rc_view(nb_json_str(row, "name")));
    }
    plc_cache_headers(ctx, resp);
    return nb_resp_json(resp, 200, json_pack("{s:o}", "resource_classes", list));
}

/* Validates {"name": "CUSTOM_…"} as POST_RC_SCHEMA_V1_2. */
static int check_custom_name_body(struct nb_ctx *ctx, json_t *body)
{
    static const char *const keys[] = {"name", NULL};
    if (plc_check_object(ctx, body, keys, keys) < 0)
        return -1;
    json_t *name = json_object_get(body, "name");
    if (!json_is_string(name))
        return plc_schema_error(ctx, "name is not of type 'string'");
    if (json_string_length(name) > 255)
        return plc_schema_error(ctx, "'%s' is too long", json_string_value(name));
    if (!plc_valid_custom_name(json_string_value(name)))
        return plc_schema_error(ctx, "'%s' does not match '^CUSTOM_[A-Z0-9_]+$'",
                                json_string_value(name));
    return 0;
}

static int rc_insert_locked(struct nb_ctx *ctx, const char *name)
{
    long long next = nb_db_int(plc_db(), ctx, CUSTOM_RC_FIRST_ID,
                               "SELECT MAX(id) + 1 FROM resource_classes WHERE id >= ?", "i",
                               (long long)CUSTOM_RC_FIRST_ID);
    if (nb_ctx_failed(ctx))
        return -1;
    if (next < CUSTOM_RC_FIRST_ID)
        next = CUSTOM_RC_FIRST_ID;
    return nb_db_exec(plc_db(), ctx, "INSERT INTO resource_classes (id, name) VALUES (?, ?)", "is",
                      next, name) < 0
               ? -1
               : 0;
}

static void rc_location(struct nb_resp *resp, const char *name)
{
    char path[320];
    snprintf(path, sizeof(path), "/placement/resource_classes/%s", name);
    plc_location(resp, path);
}

static int rc_create(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (plc_mv(ctx) < 2)
        return plc_not_at_version(ctx);
    if (plc_require_admin(ctx, "placement:resource_classes:create") < 0)
        return -1;
    json_t *body = plc_body(ctx, req);
    if (!body || check_custom_name_body(ctx, body) < 0)
        return -1;
    const char *name = nb_json_str(body, "name");
    if (nb_db_begin(plc_db(), ctx) < 0)
        return -1;
    int rc;
    if (plc_rc_exists(ctx, name))
        rc = nb_error(ctx, 409, PLC_ERR_DEFAULT, "Conflicting resource class already exists: %s",
                      name);
    else
        rc = nb_ctx_failed(ctx) ? -1 : rc_insert_locked(ctx, name);
    if (rc < 0) {
        nb_db_rollback(plc_db());
        return -1;
    }
    if (nb_db_commit(plc_db(), ctx) < 0)
        return -1;
    rc_location(resp, name);
    return nb_resp_empty(resp, 201);
}

static int rc_404(struct nb_ctx *ctx, const char *name)
{
    if (plc_rc_exists(ctx, name))
        return 0;
    return nb_ctx_failed(ctx)
               ? -1
               : nb_error(ctx, 404, PLC_ERR_DEFAULT, "No such resource class %s.", name);
}

static int rc_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (plc_mv(ctx) < 2)
        return plc_not_at_version(ctx);
    if (plc_require_admin(ctx, "placement:resource_classes:show") < 0)
        return -1;
    const char *name = nb_req_param(req, "name");
    if (rc_404(ctx, name) < 0)
        return -1;
    plc_cache_headers(ctx, resp);
    return nb_resp_json(resp, 200, rc_view(name));
}

/* PUT at 1.2-1.6 renames a custom class. */
static int rc_rename_locked(struct nb_ctx *ctx, const char *old, const char *name)
{
    if (rc_404(ctx, old) < 0)
        return -1;
    if (!plc_valid_custom_name(old))
        return nb_error(ctx, 400, PLC_ERR_DEFAULT, "Cannot update standard resource class %s", old);
    if (strcmp(old, name) == 0)
        return 0;
    if (plc_rc_exists(ctx, name))
        return nb_error(ctx, 409, PLC_ERR_DEFAULT, "Resource class already exists: %s", name);
    if (nb_ctx_failed(ctx) ||
        nb_db_exec(plc_db(), ctx, "UPDATE resource_classes SET name = ? WHERE name = ?", "ss", name,
                   old) < 0 ||
        nb_db_exec(plc_db(), ctx,
                   "UPDATE inventories SET resource_class = ? WHERE resource_class = ?", "ss", name,
                   old) < 0 ||
        nb_db_exec(plc_db(), ctx,
                   "UPDATE allocations SET resource_class = ? WHERE resource_class = ?", "ss", name,
                   old) < 0)
        return -1;
    return plc_world_changed(ctx);
}

static int rc_update(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    int mv = plc_mv(ctx);
    if (mv < 2)
        return plc_not_at_version(ctx);
    if (plc_require_admin(ctx, "placement:resource_classes:update") < 0)
        return -1;
    const char *name = nb_req_param(req, "name");
    if (mv >= 7) {
        /* Bodiless create-or-validate. */
        if (strlen(name) > 255)
            return plc_schema_error(ctx, "'%s' is too long", name);
        if (!plc_valid_custom_name(name))
            return plc_schema_error(ctx, "'%s' does not match '^CUSTOM_[A-Z0-9_]+$'", name);
        if (nb_db_begin(plc_db(), ctx) < 0)
            return -1;
        int status = 204;
        if (!plc_rc_exists(ctx, name) && !nb_ctx_failed(ctx)) {
            status = 201;
            if (rc_insert_locked(ctx, name) < 0) {
                nb_db_rollback(plc_db());
                return -1;
            }
        }
        if (nb_ctx_failed(ctx)) {
            nb_db_rollback(plc_db());
            return -1;
        }
        if (nb_db_commit(plc_db(), ctx) < 0)
            return -1;
        rc_location(resp, name);
        return nb_resp_empty(resp, status);
    }
    json_t *body = plc_body(ctx, req);
    if (!body || check_custom_name_body(ctx, body) < 0)
        return -1;
    const char *newname = nb_json_str(body, "name");
    if (nb_db_begin(plc_db(), ctx) < 0)
        return -1;
    if (rc_rename_locked(ctx, name, newname) < 0) {
        nb_db_rollback(plc_db());
        return -1;
    }
    if (nb_db_commit(plc_db(), ctx) < 0)
        return -1;
    return nb_resp_json(resp, 200, rc_view(newname));
}

static int rc_delete_locked(struct nb_ctx *ctx, const char *name)
{
    if (rc_404(ctx, name) < 0)
        return -1;
    if (!plc_valid_custom_name(name))
        return nb_error(ctx, 400, PLC_ERR_DEFAULT,
                        "Error in delete resource class: Cannot delete standard resource class "
                        "%s.",
                        name);
    long long used = nb_db_int(
        plc_db(), ctx, 0, "SELECT COUNT(*) FROM inventories WHERE resource_class = ?", "s", name);
    if (nb_ctx_failed(ctx))
        return -1;
    if (used)
        return nb_error(ctx, 409, PLC_ERR_DEFAULT,
                        "Error in delete resource class: Cannot delete resource class %s. "
                        "Class is in use in inventory.",
                        name);
    return nb_db_exec(plc_db(), ctx, "DELETE FROM resource_classes WHERE name = ?", "s", name) < 0
               ? -1
               : 0;
}

static int rc_delete(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (plc_mv(ctx) < 2)
        return plc_not_at_version(ctx);
    if (plc_require_admin(ctx, "placement:resource_classes:delete") < 0)
        return -1;
    if (nb_db_begin(plc_db(), ctx) < 0)
        return -1;
    if (rc_delete_locked(ctx, nb_req_param(req, "name")) < 0) {
        nb_db_rollback(plc_db());
        return -1;
    }
    if (nb_db_commit(plc_db(), ctx) < 0)
        return -1;
    return nb_resp_empty(resp, 204);
}

void plc_routes_classes(void)
{
    nb_http_route("GET", "/placement/resource_classes", rc_list, 0);
    nb_http_route("POST", "/placement/resource_classes", rc_create, 0);
    nb_http_route("GET", "/placement/resource_classes/{name}", rc_show, 0);
    nb_http_route("PUT", "/placement/resource_classes/{name}", rc_update, 0);
    nb_http_route("DELETE", "/placement/resource_classes/{name}", rc_delete, 0);
}
