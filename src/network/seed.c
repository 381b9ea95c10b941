/* seed.c - the network an all-in-one starts with, as devstack makes it:
 * "private" (10.0.0.0/26, gateway 10.0.0.1, subnet "private-subnet"), here
 * shared so that every project's servers booted with networks "auto" get a
 * port on it, owned by the admin project. With [network] seed_public_cidr
 * set, also devstack's external "public" network ("public-subnet", not
 * shared). It is off by default: an external network owned by the admin
 * project is, for Nova's rules, a second network the admin project may boot
 * on, so booting there without naming a network would be ambiguous (409).
 * The private network gets a tenant segment ([ml2] tenant_network_types,
 * vxlan by default), the public one is flat on physical network "public"
 * and its subnet has no DHCP, as devstack makes them.
 * Idempotent: a network whose name exists is kept. */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "db/db.h"
#include "identity/identity.h"
#include "network/network.h"
#include "network/network_int.h"

#include <string.h>

#define LOG "nubo.network.seed"

/* Creates network name with one subnet unless a network of that name
 * exists. 0/-1 (logged). */
static int seed_one(struct nb_ctx *ctx, const char *name, const char *subnet_name, const char *cidr,
                    bool shared, bool external)
{
    if (nb_db_int(nb_net_env->db, ctx, -1, "SELECT COUNT(*) FROM networks WHERE name = ?", "s",
                  name) != 0)
        return 0;
    json_t *nbody =
        json_pack("{s:s, s:b, s:b}", "name", name, "shared", shared, "router:external", external);
    if (external) { /* devstack's public network: flat on physical network "public" */
        json_object_set_new(nbody, "provider:network_type", json_string("flat"));
        json_object_set_new(nbody, "provider:physical_network", json_string("public"));
    }
    json_t *net = nb_net_network_create(ctx, nbody);
    json_decref(nbody);
    if (!net) {
        NB_ERROR(LOG, ctx, NULL, "cannot create network %s: %s", name, nb_ctx_message(ctx));
        return -1;
    }
    json_t *sbody = json_pack("{s:s, s:s, s:s, s:i}", "network_id", nb_json_str(net, "id"), "name",
                              subnet_name, "cidr", cidr, "ip_version", 4);
    if (external) /* devstack's public subnet: --no-dhcp */
        json_object_set_new(sbody, "enable_dhcp", json_false());
    json_t *sub = nb_net_subnet_create(ctx, sbody);
    json_decref(sbody);
    if (!sub) {
        NB_ERROR(LOG, ctx, NULL, "cannot create subnet %s: %s", subnet_name, nb_ctx_message(ctx));
        json_decref(net);
        return -1;
    }
    NB_INFO(LOG, ctx, NULL, "seeded network %s (%s) with subnet %s %s", name,
            nb_json_str(net, "id"), subnet_name, cidr);
    json_decref(net);
    json_decref(sub);
    return 0;
}

int nb_network_seed_defaults(struct nb_env *env)
{
    nb_net_env = env;
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    _cleanup_free_ char *admin = nb_identity_admin_project_id(env->db, &ctx);
    if (!admin) {
        NB_ERROR(LOG, &ctx, NULL, "no admin project: networks not seeded");
        return -1;
    }
    nb_strlcpy(ctx.project_id, admin, sizeof(ctx.project_id));
    if (seed_one(&ctx, nb_conf_str("network", "seed_private_name", "private"), "private-subnet",
                 nb_conf_str("network", "seed_private_cidr", "10.0.0.0/26"), true, false) < 0)
        return -1;
    const char *pub = nb_conf_str("network", "seed_public_cidr", "");
    if (!*pub)
        return 0;
    return seed_one(&ctx, nb_conf_str("network", "seed_public_name", "public"), "public-subnet",
                    pub, false, true);
}
