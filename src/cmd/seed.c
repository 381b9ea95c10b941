/* seed.c - devstack-like default flavors and the demo image record. */
#include "cmd/seed.h"
#include "common/log.h"
#include "common/util.h"
#include "db/db.h"
#include "image/image.h"

static const struct {
    const char *id, *name;
    int ram, vcpus, disk;
} flavors[] = {
    {"1", "m1.tiny", 512, 1, 1},       {"2", "m1.small", 2048, 1, 20},
    {"3", "m1.medium", 4096, 2, 40},   {"4", "m1.large", 8192, 4, 80},
    {"5", "m1.xlarge", 16384, 8, 160}, {"42", "m1.nano", 128, 1, 1},
    {"84", "m1.micro", 192, 1, 1},
};

int nb_seed_defaults(struct nb_env *env)
{
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    char now[32];
    nb_now_iso_us(now);
    for (size_t i = 0; i < sizeof(flavors) / sizeof(flavors[0]); i++) {
        if (nb_db_exec(env->db, &ctx,
                       "INSERT OR IGNORE INTO flavors (flavorid, name, memory_mb, vcpus, root_gb, "
                       "created_at) VALUES (?, ?, ?, ?, ?, ?)",
                       "ssiiis", flavors[i].id, flavors[i].name, (long long)flavors[i].ram,
                       (long long)flavors[i].vcpus, (long long)flavors[i].disk, now) < 0)
            return -1;
    }
    char image_id[NB_UUID_LEN];
    if (nb_image_create_record(&ctx, "cirros", "qcow2", "bare", 0, image_id) < 0) {
        NB_ERROR("nubo.main", &ctx, NULL, "cannot create the demo image: %s", ctx.err_msg);
        return -1;
    }
    return 0;
}
