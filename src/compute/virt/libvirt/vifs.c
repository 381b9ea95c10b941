/* vifs.c - os-vif's plug of an instance's VIFs on this host (Nova's
 * libvirt driver plug_vifs): before a guest is received by a live
 * migration, each "bridge" VIF's bridge must exist with the network's MTU
 * so the incoming domain's tap lands on it (nb_vif_plug); the host's
 * network agent then loads its filter and reports it up. */
#include "common/json.h"
#include "common/log.h"
#include "compute/virt/libvirt/lv.h"
#include "network/agent/netagent.h"

int lv_plug_vifs(struct nb_ctx *ctx, const json_t *inst)
{
    size_t i;
    json_t *vif;
    json_array_foreach (json_object_get(inst, "network_info"), i, vif) {
        if (nb_vif_plug(ctx, vif) < 0) {
            NB_ERROR(LV_LOG, ctx, nb_json_str(inst, "uuid"), "could not plug VIF %s: %s",
                     nb_json_str(vif, "id") ? nb_json_str(vif, "id") : "?", nb_ctx_message(ctx));
            return -1;
        }
    }
    return 0;
}
