/* network_changed.c - Nova's "network-changed" external event, called by
 * the network service in the same process: the instance's network info
 * cache is rebuilt from its ports (a floating IP associated or
 * disassociated shows in the server's "addresses" at once). */
#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "db/db.h"
#include "network/floatingips.h"
#include "network/network.h"

int nb_compute_network_changed(struct nb_db *db, struct nb_ctx *ctx, const char *instance_uuid)
{
    _cleanup_json_ json_t *nw = nb_network_info_for_instance(ctx, instance_uuid);
    if (!nw)
        return -1;
    char now[32];
    nb_now_iso_us(now);
    /* only a live instance's cache: a deleted one keeps what it had */
    if (nb_db_exec(db, ctx,
                   "UPDATE instance_info_caches SET network_info = ?, updated_at = ? WHERE "
                   "instance_uuid = ? AND deleted = 0",
                   "jss", nw, now, instance_uuid) < 0)
        return -1;
    NB_INFO("nubo.compute.network_changed", ctx, instance_uuid,
            "network info refreshed (network-changed): %zu port(s)", json_array_size(nw));
    return 0;
}
