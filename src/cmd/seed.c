/* seed.c - devstack-like default flavors and the demo image.
 *
 * Without [aio] demo_image the `cirros` image is a record without data:
 * enough for the fake driver, which boots nothing, but a trap under
 * libvirt (it looks bootable and every boot fails), so with the libvirt
 * driver none is made and the log and stderr say how to get one. With
 * demo_image, the record is created with the file's real disk format, as
 * the format inspector reads it, and the file is imported as its data the
 * first time (nb_image_import_file: same checks and hashes as an upload
 * through the API); an image that already has data is left alone, so
 * restarting on the same state directory uploads nothing. */
#include "cmd/seed.h"
#include "common/config.h"
#include "common/log.h"
#include "common/util.h"
#include "compute/compute.h"
#include "db/db.h"
#include "image/format.h"
#include "image/image.h"

#include <string.h>
#include <unistd.h>

static const struct {
    const char *id, *name;
    int ram, vcpus, disk;
} flavors[] = {
    {"1", "m1.tiny", 512, 1, 1},       {"2", "m1.small", 2048, 1, 20},
    {"3", "m1.medium", 4096, 2, 40},   {"4", "m1.large", 8192, 4, 80},
    {"5", "m1.xlarge", 16384, 8, 160}, {"42", "m1.nano", 128, 1, 1},
    {"84", "m1.micro", 192, 1, 1},
};

/* True if image id has its data stored (nb_image_data_open succeeds). */
static bool image_has_data(const char *id)
{
    struct nb_ctx sub;
    nb_ctx_init_system(&sub, NULL);
    json_t *info = NULL;
    int fd = nb_image_data_open(&sub, id, &info);
    json_decref(info);
    if (fd < 0)
        return false;
    close(fd);
    return true;
}

/* The `cirros` image with the data of the file at path. 0/-1, logged. */
static int seed_demo_image(struct nb_ctx *ctx, const char *path)
{
    struct nb_format_info info;
    char err[256];
    if (nb_format_inspect_path(path, &info, err, sizeof(err)) < 0) {
        NB_ERROR("nubo.main", ctx, NULL, "cannot read the demo image %s: %s", path, err);
        return -1;
    }
    char id[NB_UUID_LEN];
    if (nb_image_create_record(ctx, "cirros", info.disk_format, "bare", 0, id) < 0) {
        NB_ERROR("nubo.main", ctx, NULL, "cannot create the demo image: %s", nb_ctx_message(ctx));
        return -1;
    }
    if (image_has_data(id)) {
        NB_INFO("nubo.main", ctx, NULL, "demo image cirros (%s) already has its data", id);
        return 0;
    }
    if (nb_image_import_file(ctx, id, path) < 0) {
        NB_ERROR("nubo.main", ctx, NULL, "cannot import %s into the demo image cirros (%s): %s",
                 path, id, nb_ctx_message(ctx));
        return -1;
    }
    NB_INFO("nubo.main", ctx, NULL, "demo image cirros (%s): imported %s (%s)", id, path,
            info.disk_format);
    return 0;
}

int nb_seed_demo_image(struct nb_env *env)
{
    (void)env;
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    const char *demo = nb_conf_str("aio", "demo_image", NULL);
    if (demo && *demo)
        return seed_demo_image(&ctx, demo);
    if (!strcmp(nb_conf_str("compute", "driver", "fake"), "libvirt")) {
        static const char why[] =
            "no demo image: with the libvirt driver a `cirros` image without data would look "
            "bootable and fail every boot, so none is created. Give one with --demo-image FILE "
            "(or NUBO_DEMO_IMAGE) at this or a later start: `bash tests/images/build.sh` builds "
            "the project's test guest as tests/images/out/guest.qcow2 (what scripts/setup.sh "
            "uses), or take a CirrOS qcow2; or upload any image with `openstack image create "
            "--file`.";
        NB_WARN("nubo.main", &ctx, NULL, "%s", why); /* the logger echoes warnings on stderr */
        return 0;
    }
    char image_id[NB_UUID_LEN];
    if (nb_image_create_record(&ctx, "cirros", "qcow2", "bare", 0, image_id) < 0) {
        NB_ERROR("nubo.main", &ctx, NULL, "cannot create the demo image: %s", nb_ctx_message(&ctx));
        return -1;
    }
    return 0;
}

int nb_seed_defaults(struct nb_env *env)
{
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    for (size_t i = 0; i < sizeof(flavors) / sizeof(flavors[0]); i++) {
        if (nb_flavor_seed(env->db, &ctx, flavors[i].id, flavors[i].name, flavors[i].ram,
                           flavors[i].vcpus, flavors[i].disk) < 0)
            return -1;
    }
    return nb_seed_demo_image(env);
}
