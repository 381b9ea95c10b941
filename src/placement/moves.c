/* moves.c - the in-process calls a move of an instance makes (Nova's
 * report client during migrations): read a consumer's allocations, and
 * move them to another consumer in one write (POST /allocations with both
 * consumers), so that during a move the migration holds the source host's
 * allocation while the instance claims the destination. */
#include "common/cleanup.h"
#include "common/json.h"
#include "common/log.h"
#include "db/db.h"
#include "placement/internal.h"
#include "placement/placement.h"

#include <string.h>

/* The consumer's allocation rows with its project and user. */
static json_t *consumer_rows(struct nb_ctx *ctx, const char *consumer)
{
    return nb_db_rows(plc_db(), ctx,
                      "SELECT rp.uuid AS rp_uuid, a.resource_class, a.used, c.project_id, "
                      "c.user_id FROM allocations a "
                      "JOIN resource_providers rp ON rp.id = a.resource_provider_id "
                      "JOIN consumers c ON c.uuid = a.consumer_id WHERE a.consumer_id = ? "
                      "ORDER BY a.id",
                      "s", consumer);
}

/* {rp_uuid: {rc: amount}} of rows (new ref). */
static json_t *by_provider(json_t *rows)
{
    json_t *out = json_object();
    size_t i;
    json_t *row;
    json_array_foreach (rows, i, row) {
        const char *rp = nb_json_str(row, "rp_uuid");
        json_t *res = json_object_get(out, rp);
        if (!res) {
            res = json_object();
            json_object_set_new(out, rp, res);
        }
        json_object_set_new(res, nb_json_str(row, "resource_class"),
                            json_integer(nb_json_int(row, "used", 0)));
    }
    return out;
}

json_t *nb_placement_allocations_of(struct nb_ctx *ctx, const char *consumer_uuid)
{
    _cleanup_json_ json_t *rows = consumer_rows(ctx, consumer_uuid);
    return rows ? by_provider(rows) : NULL;
}

int nb_placement_move_allocations(struct nb_ctx *ctx, const char *from, const char *to)
{
    char src[37], dst[37];
    if (!plc_uuid_normalize(from, src) || !plc_uuid_normalize(to, dst))
        return nb_error(ctx, 400, PLC_ERR_DEFAULT, "Malformed consumer_uuid: %s",
                        plc_uuid_normalize(from, src) ? to : from);
    if (nb_db_begin(plc_db(), ctx) < 0)
        return -1;
    _cleanup_json_ json_t *rows = consumer_rows(ctx, src);
    if (!rows || json_array_size(rows) == 0) {
        nb_db_rollback(plc_db());
        return rows ? 0 : -1;
    }
    json_t *first = json_array_get(rows, 0);
    _cleanup_json_ json_t *allocs = by_provider(rows);
    _cleanup_json_ json_t *none = json_object();
    struct plc_consumer_write w[2] = {
        {.uuid = src, .allocations = none},
        {.uuid = dst,
         .project_id = nb_json_str(first, "project_id"),
         .user_id = nb_json_str(first, "user_id"),
         .allocations = allocs},
    };
    if (plc_alloc_write_locked(ctx, w, 2, PLC_WRITE_POST) < 0) {
        nb_db_rollback(plc_db());
        return -1;
    }
    if (nb_db_commit(plc_db(), ctx) < 0)
        return -1;
    _cleanup_free_ char *what = json_dumps(allocs, JSON_COMPACT | JSON_SORT_KEYS);
    NB_INFO("nubo.placement", ctx, dst, "moved allocations %s of consumer %s to consumer %s",
            what ? what : "{}", src, dst);
    return 1;
}
