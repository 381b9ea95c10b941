/* members.c - /v2/images/{image_id}/members, as Glance's image_members.py.
 *
 * Only "shared" images have members. The owner (or an admin) adds and
 * removes member projects; a member accepts or rejects the image by
 * changing its own status (pending, accepted, rejected), and only accepted
 * shared images appear in the member's default image list. Owners and
 * admins see every member; a member sees only its own entry. At most
 * [DEFAULT] image_member_quota (128) members per image. */
#include "image/image_priv.h"
#include "common/cleanup.h"
#include "common/config.h"
#include "common/http.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "db/db.h"

#include <stdio.h>
#include <string.h>

static json_t *member_view(const json_t *row)
{
    char c[32], u[32];
    const char *ca = nb_image_isotime(nb_json_str(row, "created_at"), c);
    const char *ua = nb_image_isotime(nb_json_str(row, "updated_at"), u);
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "member_id", nb_json_str(row, "member"),
                     "image_id", nb_json_str(row, "image_id"), "status", nb_json_str(row, "status"),
                     "created_at", ca ? ca : "", "updated_at", ua ? ua : "", "schema",
                     "/v2/schemas/member");
}

/* _lookup_image: the visible image or 404 "Image %s not found.". */
static json_t *lookup_image(struct nb_ctx *ctx, struct nb_req *req)
{
    const char *id = nb_req_param(req, "image_id");
    json_t *rec = nb_image_record_load(ctx, id);
    if (!rec && nb_ctx_failed(ctx))
        return NULL;
    if (!rec || !nb_image_record_visible(ctx, rec)) {
        json_decref(rec);
        nb_error(ctx, 404, NULL, "Image %s not found.", id);
        return NULL;
    }
    return rec;
}

static bool is_shared(const json_t *rec)
{
    return strcmp(nb_json_str(rec, "visibility"), "shared") == 0;
}

static bool is_owner(const struct nb_ctx *ctx, const json_t *rec)
{
    const char *owner = nb_json_str(rec, "owner");
    return owner && ctx->project_id[0] && strcmp(owner, ctx->project_id) == 0;
}

static json_t *find_member(struct nb_ctx *ctx, const char *image_id, const char *member)
{
    return nb_db_row(nb_image_env->db, ctx,
                     "SELECT * FROM image_members WHERE image_id = ? AND member = ? AND "
                     "deleted = 0",
                     "ss", image_id, member);
}

static int members_index(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    _cleanup_json_ json_t *rec = lookup_image(ctx, req);
    if (!rec)
        return -1;
    const char *id = nb_json_str(rec, "id");
    if (!is_shared(rec))
        return nb_error(ctx, 403, NULL,
                        "Not allowed to list members for image %s: Only shared images have "
                        "members.",
                        id);
    bool all = ctx->is_admin || is_owner(ctx, rec);
    _cleanup_json_ json_t *rows = nb_db_rows(
        nb_image_env->db, ctx,
        "SELECT * FROM image_members WHERE image_id = ? AND deleted = 0 AND (? OR member = ?) "
        "ORDER BY id",
        "sbs", id, all, ctx->project_id);
    if (!rows)
        return -1;
    json_t *list = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        json_array_append_new(list, member_view(r));
    }
    return nb_resp_json(resp, 200,
                        json_pack("{s:o, s:s}", "members", list, "schema", "/v2/schemas/members"));
}

static int members_create(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    json_t *body = req->json;
    if (req->body_len == 0)
        return nb_error(ctx, 400, NULL, "Body expected in request.");
    if (!body)
        return nb_error(ctx, 400, NULL, "Malformed JSON in request body.");
    if (!json_is_object(body))
        return nb_error(ctx, 400, NULL,
                        "Expected a member in the form: {\"member\": \"image_id\"}");
    json_t *m = json_object_get(body, "member");
    if (!m)
        return nb_error(ctx, 400, NULL, "Member to be added not specified");
    if (!json_is_true(m) &&
        (json_is_false(m) || json_is_null(m) || (json_is_string(m) && !*json_string_value(m))))
        return nb_error(ctx, 400, NULL, "Member can't be empty");
    if (!json_is_string(m))
        return nb_error(ctx, 400, NULL,
                        "Expected a member in the form: {\"member\": \"image_id\"}");
    const char *member = json_string_value(m);
    _cleanup_json_ json_t *rec = lookup_image(ctx, req);
    if (!rec)
        return -1;
    const char *id = nb_json_str(rec, "id");
    if (!is_shared(rec) || !(ctx->is_admin || (ctx->is_member && is_owner(ctx, rec))))
        return nb_error(ctx, 403, NULL, "Not allowed to create members for image %s.", id);
    _cleanup_json_ json_t *dup = find_member(ctx, id, member);
    if (dup)
        return nb_error(ctx, 409, NULL, "Member %s is duplicated for image %s", member, id);
    if (nb_ctx_failed(ctx))
        return -1;
    long quota = nb_conf_int("DEFAULT", "image_member_quota", 128);
    long long n =
        nb_db_int(nb_image_env->db, ctx, 0,
                  "SELECT COUNT(*) FROM image_members WHERE image_id = ? AND deleted = 0", "s", id);
    if (quota >= 0 && n + 1 > quota)
        return nb_error(ctx, 413, NULL,
                        "Image member limit exceeded for image %s: The limit has been exceeded on "
                        "the number of allowed image members for this image. Attempted: %lld, "
                        "Maximum: %ld:",
                        id, n + 1, quota);
    char now[32];
    if (nb_db_exec(nb_image_env->db, ctx,
                   "INSERT INTO image_members (image_id, member, status, created_at, updated_at) "
                   "VALUES (?, ?, 'pending', ?, ?)",
                   "ssss", id, member, nb_now_iso_us(now), now) < 0)
        return -1;
    _cleanup_json_ json_t *row = find_member(ctx, id, member);
    if (!row)
        return -1;
    NB_INFO("nubo.image.api", ctx, NULL, "shared image %s with project %s", id, member);
    return nb_resp_json(resp, 200, member_view(row));
}

/* _lookup_member: the member row, visible to admins, the owner and the
 * member itself; else 404. */
static json_t *lookup_member(struct nb_ctx *ctx, const json_t *rec, const char *member)
{
    const char *id = nb_json_str(rec, "id");
    bool may = ctx->is_admin || is_owner(ctx, rec) || strcmp(member, ctx->project_id) == 0;
    json_t *row = may ? find_member(ctx, id, member) : NULL;
    if (!row && !nb_ctx_failed(ctx))
        nb_error(ctx, 404, NULL, "%s not found in the member list of the image %s.", member, id);
    return row;
}

static int members_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    _cleanup_json_ json_t *rec = lookup_image(ctx, req);
    if (!rec)
        return -1;
    if (!is_shared(rec))
        return nb_error(ctx, 404, NULL, "Only shared images have members.");
    _cleanup_json_ json_t *row = lookup_member(ctx, rec, nb_req_param(req, "member_id"));
    return row ? nb_resp_json(resp, 200, member_view(row)) : -1;
}

static int members_update(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    static const char *const statuses[] = {"pending", "accepted", "rejected", NULL};
    json_t *body = req->json;
    if (req->body_len == 0)
        return nb_error(ctx, 400, NULL, "Body expected in request.");
    if (!body)
        return nb_error(ctx, 400, NULL, "Malformed JSON in request body.");
    if (!json_is_object(body))
        return nb_error(ctx, 400, NULL, "Expected a status in the form: {\"status\": \"status\"}");
    json_t *st = json_object_get(body, "status");
    if (!st)
        return nb_error(ctx, 400, NULL, "Status not specified");
    const char *member = nb_req_param(req, "member_id");
    _cleanup_json_ json_t *rec = lookup_image(ctx, req);
    if (!rec)
        return -1;
    const char *id = nb_json_str(rec, "id");
    if (!is_shared(rec) || (!ctx->is_admin && is_owner(ctx, rec)))
        return nb_error(ctx, 403, NULL, "Not allowed to update members for image %s.", id);
    _cleanup_json_ json_t *row = lookup_member(ctx, rec, member);
    if (!row)
        return -1;
    if (!ctx->is_admin && !(ctx->is_member && strcmp(member, ctx->project_id) == 0))
        return nb_error(ctx, 403, NULL, "Not allowed to update members for image %s.", id);
    bool ok = false;
    for (int i = 0; statuses[i] && json_is_string(st); i++)
        ok |= strcmp(statuses[i], json_string_value(st)) == 0;
    if (!ok) {
        _cleanup_free_ char *r =
            json_is_string(st) ? strdup(json_string_value(st)) : nb_image_pyrepr(st);
        return nb_error(ctx, 400, NULL, "Incorrect request: Invalid status: %s", r);
    }
    char now[32];
    if (nb_db_exec(nb_image_env->db, ctx,
                   "UPDATE image_members SET status = ?, updated_at = ? WHERE id = ?", "ssi",
                   json_string_value(st), nb_now_iso_us(now), nb_json_int(row, "id", 0)) < 0)
        return -1;
    json_object_set_new(row, "status", json_string(json_string_value(st)));
    json_object_set_new(row, "updated_at", json_string(now));
    return nb_resp_json(resp, 200, member_view(row));
}

static int members_delete(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    _cleanup_json_ json_t *rec = lookup_image(ctx, req);
    if (!rec)
        return -1;
    const char *id = nb_json_str(rec, "id");
    if (!is_shared(rec) || !(ctx->is_admin || (ctx->is_member && is_owner(ctx, rec))))
        return nb_error(ctx, 403, NULL, "Not allowed to delete members for image %s.", id);
    _cleanup_json_ json_t *row = lookup_member(ctx, rec, nb_req_param(req, "member_id"));
    if (!row)
        return -1;
    if (nb_db_exec(nb_image_env->db, ctx, "DELETE FROM image_members WHERE id = ?", "i",
                   nb_json_int(row, "id", 0)) < 0)
        return -1;
    return nb_resp_empty(resp, 204);
}

void nb_image_members_init(void)
{
    nb_http_route("GET", "/image/v2/images/{image_id}/members", members_index, 0);
    nb_http_route("POST", "/image/v2/images/{image_id}/members", members_create, 0);
    nb_http_route("GET", "/image/v2/images/{image_id}/members/{member_id}", members_show, 0);
    nb_http_route("PUT", "/image/v2/images/{image_id}/members/{member_id}", members_update, 0);
    nb_http_route("DELETE", "/image/v2/images/{image_id}/members/{member_id}", members_delete, 0);
}
