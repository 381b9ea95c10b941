/* traits.c - /placement/traits[/{name}] and a provider's traits (1.6+).
 *
 * Standard traits (os-traits names) are synced at start-up and cannot be
 * deleted; custom ones must be named CUSTOM_*. Setting a provider's traits
 * replaces the whole set and bumps the provider's generation only when
 * the set actually changed, as placement does. nb_placement_set_traits()
 * creates missing custom traits first and then shares the same code. */
#include "common/cleanup.h"
#include "common/http.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "db/db.h"
#include "placement/internal.h"
#include "placement/placement.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

long long plc_trait_id(struct nb_ctx *ctx, const char *name)
{
    long long id = nb_db_int(plc_db(), ctx, 0, "SELECT id FROM traits WHERE name = ?", "s", name);
    return nb_ctx_failed(ctx) ? -1 : id;
}

char *plc_traits_missing(struct nb_ctx *ctx, json_t *names)
{
    char *out = nb_strdup_printf("%s", "");
    size_t i;
    json_t *t;
    json_array_foreach (names, i, t) {
        long long id = plc_trait_id(ctx, json_string_value(t));
        if (id < 0) {
            free(out);
            return NULL;
        }
        if (id)
            continue;
        char *more = nb_strdup_printf("%s%s%s", out, *out ? ", " : "", json_string_value(t));
        free(out);
        out = more;
    }
    return out;
}

json_t *plc_rp_traits(struct nb_ctx *ctx, long long rp_id)
{
    _cleanup_json_ json_t *rows = nb_db_rows(
        plc_db(), ctx,
        "SELECT t.name FROM resource_provider_traits rpt JOIN traits t ON t.id = rpt.trait_id "
        "WHERE rpt.resource_provider_id = ? ORDER BY t.id",
        "i", rp_id);
    if (!rows)
        return NULL;
    json_t *names = json_array();
    size_t i;
    json_t *row;
    json_array_foreach (rows, i, row) {
        json_array_append_new(names, json_string(nb_json_str(row, "name")));
    }
    return names;
}

static bool names_contain(json_t *names, const char *name)
{
    size_t i;
    json_t *t;
    json_array_foreach (names, i, t) {
        if (strcmp(json_string_value(t), name) == 0)
            return true;
    }
    return false;
}

int plc_rp_set_traits_locked(struct nb_ctx *ctx, json_t *rp, json_t *names)
{
    long long rp_id = nb_json_int(rp, "id", 0);
    _cleanup_json_ json_t *have = plc_rp_traits(ctx, rp_id);
    if (!have)
        return -1;
    bool changed = false;
    size_t i;
    json_t *t;
    json_array_foreach (have, i, t) {
        if (names_contain(names, json_string_value(t)))
            continue;
        changed = true;
        if (nb_db_exec(plc_db(), ctx,
                       "DELETE FROM resource_provider_traits WHERE resource_provider_id = ? AND "
                       "trait_id = (SELECT id FROM traits WHERE name = ?)",
                       "is", rp_id, json_string_value(t)) < 0)
            return -1;
    }
    json_array_foreach (names, i, t) {
        if (names_contain(have, json_string_value(t)))
            continue;
        changed = true;
        if (nb_db_exec(plc_db(), ctx,
                       "INSERT INTO resource_provider_traits (resource_provider_id, trait_id) "
                       "SELECT ?, id FROM traits WHERE name = ? AND NOT EXISTS (SELECT 1 FROM "
                       "resource_provider_traits WHERE resource_provider_id = ? AND trait_id = "
                       "traits.id)",
                       "isi", rp_id, json_string_value(t), rp_id) < 0)
            return -1;
    }
    if (!changed)
        return 0;
    return plc_rp_bump(ctx, rp_id, -1) < 0 ? -1 : plc_world_changed(ctx);
}

/* ---- /traits ---- */

static int trait_list(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (plc_mv(ctx) < 6)
        return plc_not_at_version(ctx);
    if (plc_require_admin(ctx, "placement:traits:list") < 0)
        return -1;
    static const char *const keys[] = {"name", "associated", NULL};
    _cleanup_json_ json_t *q = plc_query(req);
    if (plc_query_check(ctx, q, keys) < 0)
        return -1;
    const char *name = plc_query_last(q, "name");
    const char *assoc = plc_query_last(q, "associated");
    _cleanup_json_ json_t *in = NULL;
    const char *prefix = NULL;
    if (name) {
        const char *colon = strchr(name, ':');
        if (!colon)
            return nb_error(ctx, 400, PLC_ERR_DEFAULT,
                            "Badly formatted name parameter. Expected name query string "
                            "parameter in form: ?name=[in|startswith]:[name1,name2|prefix]. "
                            "Got: \"%s\"",
                            name);
        if (strncmp(name, "in:", 3) == 0) {
            in = json_array();
            _cleanup_free_ char *copy = nb_strdup_printf("%s", colon + 1);
            char *save = NULL;
            for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
                json_array_append_new(in, json_string(tok));
        } else if (strncmp(name, "startswith:", 11) == 0) {
            prefix = colon + 1;
        }
    }
    int assoc_filter = -1;
    if (assoc) {
        if (strcasecmp(assoc, "true") == 0)
            assoc_filter = 1;
        else if (strcasecmp(assoc, "false") == 0)
            assoc_filter = 0;
        else
            return nb_error(ctx, 400, PLC_ERR_DEFAULT,
                            "The query parameter \"associated\" only accepts \"true\" or "
                            "\"false\"");
    }
    _cleanup_json_ json_t *rows =
        nb_db_rows(plc_db(), ctx,
                   "SELECT t.name, EXISTS (SELECT 1 FROM resource_provider_traits rpt WHERE "
                   "rpt.trait_id = t.id) AS used FROM traits t ORDER BY t.id",
                   "");
    if (!rows)
        return -1;
    json_t *out = json_array();
    size_t i;
    json_t *row;
    json_array_foreach (rows, i, row) {
        const char *t = nb_json_str(row, "name");
        if (in && !names_contain(in, t))
            continue;
        if (prefix && !nb_startswith(t, prefix))
            continue;
        if (assoc_filter >= 0 && (nb_json_int(row, "used", 0) != 0) != (assoc_filter == 1))
            continue;
        json_array_append_new(out, json_string(t));
    }
    plc_cache_headers(ctx, resp);
    return nb_resp_json(resp, 200, json_pack("{s:o}", "traits", out));
}

static int trait_put(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (plc_mv(ctx) < 6)
        return plc_not_at_version(ctx);
    if (plc_require_admin(ctx, "placement:traits:update") < 0)
        return -1;
    const char *name = nb_req_param(req, "name");
    if (!plc_valid_custom_name(name) || strlen(name) > 255)
        return nb_error(ctx, 400, PLC_ERR_DEFAULT,
                        "The trait is invalid. A valid trait must be no longer than 255 "
                        "characters, start with the prefix \"CUSTOM_\" and use following "
                        "characters: \"A\"-\"Z\", \"0\"-\"9\" and \"_\"");
    if (nb_db_begin(plc_db(), ctx) < 0)
        return -1;
    long long id = plc_trait_id(ctx, name);
    int status = 204;
    if (id == 0) {
        status = 201;
        id = nb_db_exec(plc_db(), ctx, "INSERT INTO traits (name) VALUES (?)", "s", name);
    }
    if (id < 0) {
        nb_db_rollback(plc_db());
        return -1;
    }
    if (nb_db_commit(plc_db(), ctx) < 0)
        return -1;
    char path[320];
    snprintf(path, sizeof(path), "/placement/traits/%s", name);
    plc_location(resp, path);
    plc_cache_headers(ctx, resp);
    return nb_resp_empty(resp, status);
}

static int trait_get(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (plc_mv(ctx) < 6)
        return plc_not_at_version(ctx);
    if (plc_require_admin(ctx, "placement:traits:show") < 0)
        return -1;
    const char *name = nb_req_param(req, "name");
    long long id = plc_trait_id(ctx, name);
    if (id < 0)
        return -1;
    if (id == 0)
        return nb_error(ctx, 404, PLC_ERR_DEFAULT, "No such trait(s): %s.", name);
    plc_cache_headers(ctx, resp);
    return nb_resp_empty(resp, 204);
}

static int trait_delete_locked(struct nb_ctx *ctx, const char *name)
{
    long long id = plc_trait_id(ctx, name);
    if (id < 0)
        return -1;
    if (id == 0)
        return nb_error(ctx, 404, PLC_ERR_DEFAULT, "No such trait(s): %s.", name);
    if (!nb_startswith(name, "CUSTOM_"))
        return nb_error(ctx, 400, PLC_ERR_DEFAULT, "Cannot delete standard trait %s.", name);
    long long used =
        nb_db_int(plc_db(), ctx, 0,
                  "SELECT COUNT(*) FROM resource_provider_traits WHERE trait_id = ?", "i", id);
    if (nb_ctx_failed(ctx))
        return -1;
    if (used)
        return nb_error(ctx, 409, PLC_ERR_DEFAULT, "The trait %s is in use by a resource provider.",
                        name);
    return nb_db_exec(plc_db(), ctx, "DELETE FROM traits WHERE id = ?", "i", id) < 0 ? -1 : 0;
}

static int trait_delete(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (plc_mv(ctx) < 6)
        return plc_not_at_version(ctx);
    if (plc_require_admin(ctx, "placement:traits:delete") < 0)
        return -1;
    if (nb_db_begin(plc_db(), ctx) < 0)
        return -1;
    if (trait_delete_locked(ctx, nb_req_param(req, "name")) < 0) {
        nb_db_rollback(plc_db());
        return -1;
    }
    if (nb_db_commit(plc_db(), ctx) < 0)
        return -1;
    return nb_resp_empty(resp, 204);
}

/* ---- /resource_providers/{uuid}/traits ---- */

static int send_rp_traits(struct nb_ctx *ctx, struct nb_resp *resp, const char *uuid)
{
    _cleanup_json_ json_t *rp = plc_rp_get_404(ctx, uuid);
    if (!rp)
        return -1;
    json_t *names = plc_rp_traits(ctx, nb_json_int(rp, "id", 0));
    if (!names)
        return -1;
    plc_cache_headers(ctx, resp);
    return nb_resp_json(resp, 200,
                        json_pack("{s:o, s:I}", "traits", names, "resource_provider_generation",
                                  (json_int_t)nb_json_int(rp, "generation", 0)));
}

static int rp_traits_get(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (plc_mv(ctx) < 6)
        return plc_not_at_version(ctx);
    if (plc_require_admin(ctx, "placement:resource_providers:traits:list") < 0)
        return -1;
    const char *uuid = nb_req_param(req, "uuid");
    _cleanup_json_ json_t *rp = plc_rp_get(ctx, uuid);
    if (!rp)
        return nb_ctx_failed(ctx) ? -1
                                  : nb_error(ctx, 404, PLC_ERR_DEFAULT,
                                             "No resource provider with uuid %s found: No resource "
                                             "provider with uuid %s found",
                                             uuid, uuid);
    return send_rp_traits(ctx, resp, uuid);
}

static int check_traits_body(struct nb_ctx *ctx, json_t *body)
{
    static const char *const keys[] = {"traits", "resource_provider_generation", NULL};
    if (plc_check_object(ctx, body, keys, keys) < 0)
        return -1;
    json_t *traits = json_object_get(body, "traits");
    long long gen;
    if (!json_is_array(traits))
        return plc_schema_error(ctx, "traits is not of type 'array'");
    if (!plc_json_is_int(json_object_get(body, "resource_provider_generation"), &gen))
        return plc_schema_error(ctx, "resource_provider_generation is not of type 'integer'");
    size_t i;
    json_t *t;
    json_array_foreach (traits, i, t) {
        if (!json_is_string(t))
            return plc_schema_error(ctx, "trait is not of type 'string'");
        if (json_string_length(t) < 1)
            return plc_schema_error(ctx, "'' is too short");
        if (json_string_length(t) > 255)
            return plc_schema_error(ctx, "'%s' is too long", json_string_value(t));
    }
    return 0;
}

static int rp_traits_put_locked(struct nb_ctx *ctx, const char *uuid, json_t *body)
{
    _cleanup_json_ json_t *rp = plc_rp_get_404(ctx, uuid);
    if (!rp)
        return -1;
    long long gen = -1;
    plc_json_is_int(json_object_get(body, "resource_provider_generation"), &gen);
    if (gen != nb_json_int(rp, "generation", -1))
        return nb_error(ctx, 409, PLC_ERR_CONCURRENT,
                        "Resource provider's generation already changed. Please update the "
                        "generation and try again.");
    json_t *traits = json_object_get(body, "traits");
    _cleanup_free_ char *missing = plc_traits_missing(ctx, traits);
    if (!missing)
        return -1;
    if (*missing)
        return nb_error(ctx, 400, PLC_ERR_DEFAULT, "No such trait %s", missing);
    return plc_rp_set_traits_locked(ctx, rp, traits);
}

static int rp_traits_put(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (plc_mv(ctx) < 6)
        return plc_not_at_version(ctx);
    if (plc_require_admin(ctx, "placement:resource_providers:traits:update") < 0)
        return -1;
    json_t *body = plc_body(ctx, req);
    if (!body || check_traits_body(ctx, body) < 0)
        return -1;
    const char *uuid = nb_req_param(req, "uuid");
    if (nb_db_begin(plc_db(), ctx) < 0)
        return -1;
    if (rp_traits_put_locked(ctx, uuid, body) < 0) {
        nb_db_rollback(plc_db());
        return -1;
    }
    if (nb_db_commit(plc_db(), ctx) < 0)
        return -1;
    return send_rp_traits(ctx, resp, uuid);
}

static int rp_traits_delete(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (plc_mv(ctx) < 6)
        return plc_not_at_version(ctx);
    if (plc_require_admin(ctx, "placement:resource_providers:traits:delete") < 0)
        return -1;
    if (nb_db_begin(plc_db(), ctx) < 0)
        return -1;
    json_t *rp = plc_rp_get_404(ctx, nb_req_param(req, "uuid"));
    _cleanup_json_ json_t *none = json_array();
    int rc = rp ? plc_rp_set_traits_locked(ctx, rp, none) : -1;
    json_decref(rp);
    if (rc < 0) {
        nb_db_rollback(plc_db());
        return -1;
    }
    if (nb_db_commit(plc_db(), ctx) < 0)
        return -1;
    return nb_resp_empty(resp, 204);
}

/* ---- in-process ---- */

int nb_placement_set_traits(struct nb_ctx *ctx, const char *rp_uuid, json_t *traits)
{
    if (!json_is_array(traits))
        return nb_error(ctx, 400, PLC_ERR_DEFAULT, "traits must be an array of names");
    size_t i;
    json_t *t;
    json_array_foreach (traits, i, t) {
        const char *name = json_string_value(t);
        if (!name || !plc_valid_rc_name(name))
            return nb_error(ctx, 400, PLC_ERR_DEFAULT, "Invalid trait name %s",
                            name ? name : "(not a string)");
    }
    if (nb_db_begin(plc_db(), ctx) < 0)
        return -1;
    int rc = 0;
    json_array_foreach (traits, i, t) {
        const char *name = json_string_value(t);
        long long id = plc_trait_id(ctx, name);
        if (id < 0) {
            rc = -1;
            break;
        }
        if (id)
            continue;
        if (!plc_valid_custom_name(name)) {
            rc = nb_error(ctx, 400, PLC_ERR_DEFAULT, "No such trait %s", name);
            break;
        }
        if (nb_db_exec(plc_db(), ctx, "INSERT INTO traits (name) VALUES (?)", "s", name) < 0) {
            rc = -1;
            break;
        }
    }
    json_t *rp = rc == 0 ? plc_rp_get_404(ctx, rp_uuid) : NULL;
    if (rp)
        rc = plc_rp_set_traits_locked(ctx, rp, traits);
    else
        rc = -1;
    json_decref(rp);
    if (rc < 0) {
        nb_db_rollback(plc_db());
        return -1;
    }
    return nb_db_commit(plc_db(), ctx);
}

void plc_routes_traits(void)
{
    nb_http_route("GET", "/placement/traits", trait_list, 0);
    nb_http_route("GET", "/placement/traits/{name}", trait_get, 0);
    nb_http_route("PUT", "/placement/traits/{name}", trait_put, 0);
    nb_http_route("DELETE", "/placement/traits/{name}", trait_delete, 0);
    nb_http_route("GET", "/placement/resource_providers/{uuid}/traits", rp_traits_get, 0);
    nb_http_route("PUT", "/placement/resource_providers/{uuid}/traits", rp_traits_put, 0);
    nb_http_route("DELETE", "/placement/resource_providers/{uuid}/traits", rp_traits_delete, 0);
}
