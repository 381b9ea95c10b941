/* test_fake_driver.c - the fake virt driver: hosts from configuration,
 * guest lifecycle and power states (pause and suspend included), spawn
 * fault injection, and guests
 * surviving a re-open (and a change behind nubo's back) through the
 * per-host state file; volume attach/detach and root disk snapshots (a
 * real qcow2), with their fault injection. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/config.h"
#include "common/json.h"
#include "common/util.h"
#include "compute/virt/driver.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[] = "/tmp/nubo-fake-test-XXXXXX";

static int setup(void **state)
{
    (void)state;
    nb_conf_reset();
    assert_non_null(mkdtemp(dir));
    nb_conf_set("DEFAULT", "state_path", dir);
    nb_conf_set("fake", "hosts", "h1, h2,h3");
    nb_conf_set("fake", "memory_mb.h2", "1024");
    nb_conf_set("fake", "fail_spawn_hosts", "h3");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static json_t *instance(const char *uuid)
{
    return json_pack("{s:s}", "uuid", uuid);
}

static void test_hosts_and_capacity(void **state)
{
    (void)state;
    struct nb_virt_driver *drv = nb_virt_open("fake");
    assert_non_null(drv);
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    struct nb_host_info info;
    assert_int_equal(drv->ops->host_info(drv, &ctx, "h1", &info), 0);
    assert_string_equal(info.hypervisor_hostname, "h1");
    assert_string_equal(info.cpu_model, "Haswell-noTSX-IBRS");
    assert_int_equal(info.vcpus, 16);
    assert_int_equal(info.memory_mb, 32768);
    assert_int_equal(info.local_gb, 500);
    assert_true(json_array_size(info.cpu_features) > 10);
    json_decref(info.cpu_features);
    assert_int_equal(drv->ops->host_info(drv, &ctx, "h2", &info), 0);
    assert_int_equal(info.memory_mb, 1024); /* per-host override */
    json_decref(info.cpu_features);
    assert_int_equal(drv->ops->host_info(drv, &ctx, "nope", &info), -1);
    assert_int_equal(ctx.err_status, 404);
    drv->ops->close(drv);
    assert_null(nb_virt_open("hyperv"));
}

static void test_lifecycle_and_injection(void **state)
{
    (void)state;
    struct nb_virt_driver *drv = nb_virt_fake_open();
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    json_t *a = instance("aaaaaaaa-0000-0000-0000-000000000001");
    struct nb_guest_info gi;
    assert_int_equal(drv->ops->spawn(drv, &ctx, "h1", a), 0);
    assert_int_equal(
        drv->ops->get_info(drv, &ctx, "h1", "aaaaaaaa-0000-0000-0000-000000000001", &gi), 0);
    assert_int_equal(gi.power_state, NB_POWER_RUNNING);
    assert_int_equal(drv->ops->spawn(drv, &ctx, "h1", a), -1); /* exists */
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(drv->ops->power_off(drv, &ctx, "h1", a, 0), 0);
    drv->ops->get_info(drv, &ctx, "h1", "aaaaaaaa-0000-0000-0000-000000000001", &gi);
    assert_int_equal(gi.power_state, NB_POWER_SHUTDOWN);
    assert_int_equal(drv->ops->reboot(drv, &ctx, "h1", a, true), 0);
    drv->ops->get_info(drv, &ctx, "h1", "aaaaaaaa-0000-0000-0000-000000000001", &gi);
    assert_int_equal(gi.power_state, NB_POWER_RUNNING);
    char *log = drv->ops->console_log(drv, &ctx, "h1", "aaaaaaaa-0000-0000-0000-000000000001");
    assert_non_null(strstr(log, "hard reboot"));
    free(log);

    /* [fake] fail_spawn_hosts = h3: every spawn there fails */
    json_t *b = instance("bbbbbbbb-0000-0000-0000-000000000002");
    assert_int_equal(drv->ops->spawn(drv, &ctx, "h3", b), -1);
    assert_int_equal(ctx.err_status, 500);
    assert_non_null(strstr(ctx.err_msg, "spawn failure injected on host h3"));
    nb_virt_fake_fail_spawn("h3", 0);
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(drv->ops->spawn(drv, &ctx, "h3", b), 0);
    /* the next one spawn on h2 fails, the one after works */
    nb_virt_fake_fail_spawn("h2", 1);
    json_t *c = instance("cccccccc-0000-0000-0000-000000000003");
    assert_int_equal(drv->ops->spawn(drv, &ctx, "h2", c), -1);
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(drv->ops->spawn(drv, &ctx, "h2", c), 0);

    assert_int_equal(drv->ops->destroy(drv, &ctx, "h2", c), 0);
    assert_int_equal(drv->ops->destroy(drv, &ctx, "h2", c), 0); /* absent: fine */
    assert_int_equal(
        drv->ops->get_info(drv, &ctx, "h2", "cccccccc-0000-0000-0000-000000000003", &gi), -1);
    assert_int_equal(ctx.err_status, 404);
    drv->ops->close(drv);
    json_decref(a);
    json_decref(b);
    json_decref(c);
}

static void test_persistence_and_outside_change(void **state)
{
    (void)state;
    /* guests from the previous test survive a re-open */
    struct nb_virt_driver *drv = nb_virt_fake_open();
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    json_t *l = drv->ops->list(drv, &ctx, "h1");
    assert_int_equal(json_object_size(l), 1);
    assert_int_equal(json_integer_value(json_object_get(l, "aaaaaaaa-0000-0000-0000-000000000001")),
                     NB_POWER_RUNNING);
    json_decref(l);

    /* someone shuts the guest down behind nubo's back */
    char path[256];
    snprintf(path, sizeof(path), "%s/fake/h1.json", dir);
    sleep(1); /* a different mtime even on coarse clocks */
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"aaaaaaaa-0000-0000-0000-000000000001\": {\"power_state\": 4}}", f);
    fclose(f);
    l = drv->ops->list(drv, &ctx, "h1");
    assert_int_equal(json_integer_value(json_object_get(l, "aaaaaaaa-0000-0000-0000-000000000001")),
                     NB_POWER_SHUTDOWN);
    json_decref(l);
    drv->ops->close(drv);
}

static int power_of(struct nb_virt_driver *drv, const char *host, const char *uuid)
{
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    struct nb_guest_info gi = {0};
    assert_int_equal(drv->ops->get_info(drv, &ctx, host, uuid, &gi), 0);
    return gi.power_state;
}

/* pause/unpause/suspend/resume move the guest as libvirt would (pause and
 * unpause are idempotent, a suspended guest is shut down with its memory
 * saved), refuse states they do not apply to, and survive a re-open. */
static void test_pause_and_suspend(void **state)
{
    (void)state;
    const char *id = "dddddddd-0000-0000-0000-000000000004";
    struct nb_virt_driver *drv = nb_virt_fake_open();
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    json_t *d = instance(id);
    assert_int_equal(drv->ops->spawn(drv, &ctx, "h2", d), 0);
    assert_int_equal(drv->ops->pause(drv, &ctx, "h2", d), 0);
    assert_int_equal(power_of(drv, "h2", id), NB_POWER_PAUSED);
    assert_int_equal(drv->ops->pause(drv, &ctx, "h2", d), 0); /* already paused: fine */
    assert_int_equal(drv->ops->unpause(drv, &ctx, "h2", d), 0);
    assert_int_equal(power_of(drv, "h2", id), NB_POWER_RUNNING);
    assert_int_equal(drv->ops->resume(drv, &ctx, "h2", d), -1); /* running */
    assert_int_equal(ctx.err_status, 409);
    assert_non_null(strstr(ctx.err_msg, "domain is already running"));
    nb_ctx_init_system(&ctx, NULL);
    /* suspend works on a paused guest too (libvirt's managed save) */
    assert_int_equal(drv->ops->pause(drv, &ctx, "h2", d), 0);
    assert_int_equal(drv->ops->suspend(drv, &ctx, "h2", d), 0);
    assert_int_equal(power_of(drv, "h2", id), NB_POWER_SHUTDOWN);
    assert_int_equal(drv->ops->pause(drv, &ctx, "h2", d), -1);
    assert_int_equal(ctx.err_status, 409);
    assert_non_null(strstr(ctx.err_msg, "domain is not running"));
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(drv->ops->suspend(drv, &ctx, "h2", d), -1);
    nb_ctx_init_system(&ctx, NULL);
    drv->ops->close(drv);

    /* the saved state is still there after a re-open */
    drv = nb_virt_fake_open();
    assert_int_equal(power_of(drv, "h2", id), NB_POWER_SHUTDOWN);
    assert_int_equal(drv->ops->resume(drv, &ctx, "h2", d), 0);
    assert_int_equal(power_of(drv, "h2", id), NB_POWER_RUNNING);
    char *log = drv->ops->console_log(drv, &ctx, "h2", id);
    const char *want[] = {"defined on host h2", "paused: vCPUs stopped", "unpaused: vCPUs running",
                          "suspended: memory state saved to disk",
                          "resumed from the saved memory state"};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        assert_non_null(strstr(log, want[i]));
    free(log);
    /* without a saved state, resume is a fresh boot and says so */
    assert_int_equal(drv->ops->power_off(drv, &ctx, "h2", d, 0), 0);
    assert_int_equal(drv->ops->resume(drv, &ctx, "h2", d), 0);
    log = drv->ops->console_log(drv, &ctx, "h2", id);
    assert_non_null(strstr(log, "no saved memory state: fresh boot"));
    free(log);
    json_t *gone = instance("ffffffff-0000-0000-0000-000000000006");
    assert_int_equal(drv->ops->pause(drv, &ctx, "h2", gone), -1);
    assert_int_equal(ctx.err_status, 404);
    json_decref(gone);
    assert_int_equal(drv->ops->destroy(drv, &ctx, "h2", d), 0);
    drv->ops->close(drv);
    json_decref(d);
}

static json_t *bdm(const char *volume_id, const char *device, int boot_index)
{
    return json_pack("{s:s, s:s, s:s, s:i, s:s, s:i}", "volume_id", volume_id, "device_name",
                     device, "destination_type", "volume", "boot_index", boot_index,
                     "connection_info", "{}", "deleted", 0);
}

static json_t *guest_volumes(const char *host, const char *uuid)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/fake/%s.json", dir, host);
    json_t *all = json_load_file(path, 0, NULL);
    json_t *v = json_incref(json_object_get(json_object_get(all, uuid), "volumes"));
    json_decref(all);
    return v;
}

/* attach/detach keep the device -> volume map of the guest (persisted),
 * are idempotent, refuse a device held by another volume, answer 404 for
 * an unknown guest, and fail on demand. */
static void test_volumes(void **state)
{
    (void)state;
    const char *id = "eeeeeeee-0000-0000-0000-000000000005";
    struct nb_virt_driver *drv = nb_virt_fake_open();
    assert_non_null(drv->ops->attach_volume);
    assert_non_null(drv->ops->detach_volume);
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    json_t *inst = instance(id);
    json_t *v1 = bdm("11111111-1111-1111-1111-111111111111", "/dev/vdb", -1);
    json_t *v2 = bdm("22222222-2222-2222-2222-222222222222", "vdb", -1);
    json_t *v2c = bdm("22222222-2222-2222-2222-222222222222", "vdc", -1);
    assert_int_equal(drv->ops->attach_volume(drv, &ctx, "h1", inst, v1), -1); /* no guest */
    assert_int_equal(ctx.err_status, 404);
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(drv->ops->spawn(drv, &ctx, "h1", inst), 0);
    assert_int_equal(drv->ops->attach_volume(drv, &ctx, "h1", inst, v1), 0);
    assert_int_equal(drv->ops->attach_volume(drv, &ctx, "h1", inst, v1), 0); /* again: fine */
    assert_int_equal(drv->ops->attach_volume(drv, &ctx, "h1", inst, v2), -1);
    assert_int_equal(ctx.err_status, 409);
    assert_non_null(strstr(ctx.err_msg, "already holds volume 11111111"));
    nb_ctx_init_system(&ctx, NULL);
    /* a stopped guest takes the volume as well (its next start has it) */
    assert_int_equal(drv->ops->power_off(drv, &ctx, "h1", inst, 0), 0);
    assert_int_equal(drv->ops->attach_volume(drv, &ctx, "h1", inst, v2c), 0);
    json_t *vols = guest_volumes("h1", id);
    assert_int_equal(json_object_size(vols), 2);
    assert_string_equal(json_string_value(json_object_get(vols, "vdb")),
                        "11111111-1111-1111-1111-111111111111");
    assert_string_equal(json_string_value(json_object_get(vols, "vdc")),
                        "22222222-2222-2222-2222-222222222222");
    json_decref(vols);
    /* the mapping must name a device */
    json_t *nodev = bdm("33333333-3333-3333-3333-333333333333", "", -1);
    assert_int_equal(drv->ops->attach_volume(drv, &ctx, "h1", inst, nodev), -1);
    assert_int_equal(ctx.err_status, 400);
    nb_ctx_init_system(&ctx, NULL);
    json_decref(nodev);

    /* detach: the wrong volume for the device is refused; absent is fine */
    assert_int_equal(drv->ops->detach_volume(drv, &ctx, "h1", inst, v2), -1);
    assert_int_equal(ctx.err_status, 409);
    nb_ctx_init_system(&ctx, NULL);
    nb_virt_fake_fail("h1", "detach_volume", 1);
    assert_int_equal(drv->ops->detach_volume(drv, &ctx, "h1", inst, v1), -1);
    assert_int_equal(ctx.err_status, 500);
    assert_non_null(strstr(ctx.err_msg, "Device detach failed for vdb"));
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(drv->ops->detach_volume(drv, &ctx, "h1", inst, v1), 0);
    assert_int_equal(drv->ops->detach_volume(drv, &ctx, "h1", inst, v1), 0);
    vols = guest_volumes("h1", id);
    assert_int_equal(json_object_size(vols), 1);
    assert_null(json_object_get(vols, "vdb"));
    json_decref(vols);
    nb_virt_fake_fail("h1", "attach_volume", -1);
    assert_int_equal(drv->ops->attach_volume(drv, &ctx, "h1", inst, v1), -1);
    assert_non_null(strstr(ctx.err_msg, "attach failure injected on host h1"));
    nb_virt_fake_fail("h1", "attach_volume", 0);
    nb_ctx_init_system(&ctx, NULL);
    char *log = drv->ops->console_log(drv, &ctx, "h1", id);
    assert_non_null(
        strstr(log, "volume 11111111-1111-1111-1111-111111111111 attached at /dev/vdb"));
    assert_non_null(
        strstr(log, "volume 11111111-1111-1111-1111-111111111111 detached from /dev/vdb"));
    free(log);
    assert_int_equal(drv->ops->destroy(drv, &ctx, "h1", inst), 0);
    /* a spawn has the connected volumes of the mappings (not the boot one) */
    json_object_set_new(inst, "block_device_mapping",
                        json_pack("[o, O, {s:s, s:s, s:s}]", bdm("boot", "/dev/vda", 0), v1,
                                  "volume_id", "pending", "device_name", "vdd", "destination_type",
                                  "volume"));
    assert_int_equal(drv->ops->spawn(drv, &ctx, "h1", inst), 0);
    vols = guest_volumes("h1", id);
    assert_int_equal(json_object_size(vols), 1);
    assert_string_equal(json_string_value(json_object_get(vols, "vdb")),
                        "11111111-1111-1111-1111-111111111111");
    json_decref(vols);
    assert_int_equal(drv->ops->destroy(drv, &ctx, "h1", inst), 0);
    drv->ops->close(drv);
    json_decref(v1);
    json_decref(v2);
    json_decref(v2c);
    json_decref(inst);
}

/* The qcow2 header fields of a file: magic, version, virtual size. */
static void read_qcow2(const char *path, char magic[4], unsigned *version, unsigned long long *size)
{
    unsigned char h[32];
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fread(h, 1, sizeof(h), f), sizeof(h));
    fclose(f);
    memcpy(magic, h, 4);
    *version = (unsigned)h[4] << 24 | (unsigned)h[5] << 16 | (unsigned)h[6] << 8 | h[7];
    *size = 0;
    for (int i = 24; i < 32; i++)
        *size = *size << 8 | h[i];
}

/* snapshot writes a real, empty qcow2 of the root disk's size (qemu-img
 * check accepts it when qemu-img is installed), refuses volume-backed
 * instances and fails on demand without leaving a file. */
static void test_snapshot(void **state)
{
    (void)state;
    const char *id = "abababab-0000-0000-0000-000000000007";
    struct nb_virt_driver *drv = nb_virt_fake_open();
    assert_non_null(drv->ops->snapshot);
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    json_t *inst = json_pack("{s:s, s:{s:i}}", "uuid", id, "flavor", "root_gb", 3);
    char out[256];
    snprintf(out, sizeof(out), "%s/snap.qcow2", dir);
    assert_int_equal(drv->ops->snapshot(drv, &ctx, "h2", inst, out), -1);
    assert_int_equal(ctx.err_status, 404);
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(drv->ops->spawn(drv, &ctx, "h2", inst), 0);
    assert_int_equal(drv->ops->snapshot(drv, &ctx, "h2", inst, out), 0);
    char magic[4];
    unsigned version;
    unsigned long long size;
    read_qcow2(out, magic, &version, &size);
    assert_memory_equal(magic, "QFI\xfb", 4);
    assert_int_equal(version, 2);
    assert_true(size == 3ULL << 30);
    if (system("qemu-img --version >/dev/null 2>&1") == 0) {
        char cmd[1024];
        snprintf(cmd, sizeof(cmd),
                 "qemu-img check -f qcow2 %s >/dev/null && qemu-img info --output=json %s | "
                 "grep -q '\"virtual-size\": 3221225472'",
                 out, out);
        assert_int_equal(system(cmd), 0);
    }
    unlink(out);
    nb_virt_fake_fail("h2", "snapshot", 1);
    assert_int_equal(drv->ops->snapshot(drv, &ctx, "h2", inst, out), -1);
    assert_int_equal(ctx.err_status, 500);
    assert_int_equal(access(out, F_OK), -1);
    nb_ctx_init_system(&ctx, NULL);

    /* volume-backed: the API snapshots the volumes, not the driver */
    json_object_set_new(inst, "block_device_mapping", json_pack("[o]", bdm("v", "vda", 0)));
    assert_int_equal(drv->ops->snapshot(drv, &ctx, "h2", inst, out), -1);
    assert_int_equal(ctx.err_status, 400);
    assert_non_null(strstr(ctx.err_msg, "volume-backed"));
    assert_int_equal(access(out, F_OK), -1);
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(drv->ops->destroy(drv, &ctx, "h2", inst), 0);
    drv->ops->close(drv);
    json_decref(inst);
}

/* The live-migration ops: the shared-storage probe seen only from hosts on
 * the same storage, the CPU check against the models a host offers, and
 * live_migrate moving the guest (after progress reports) or failing as
 * injected, or stopping on abort. */
static void on_progress(void *opaque, const struct nb_migration_progress *p)
{
    (void)p;
    (*(int *)opaque)++;
}

static void test_live_migration(void **state)
{
    (void)state;
    nb_conf_set("fake", "shared_storage.h2", "false");
    nb_conf_set("fake", "cpu_model.h2", "Westmere");
    struct nb_virt_driver *drv = nb_virt_open("fake");
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    json_t *inst =
        json_pack("{s:s, s:{s:i, s:i}}", "uuid", "lm-1", "flavor", "memory_mb", 64, "root_gb", 1);
    assert_int_equal(drv->ops->spawn(drv, &ctx, "h1", inst), 0);
    char probe[64];
    bool seen = true;
    assert_int_equal(drv->ops->storage_probe_create(drv, &ctx, "h2", probe), 0);
    assert_int_equal(drv->ops->storage_probe_exists(drv, &ctx, "h1", probe, &seen), 0);
    assert_false(seen); /* h2 has its own storage */
    assert_int_equal(drv->ops->storage_probe_remove(drv, &ctx, "h2", probe), 0);
    assert_int_equal(drv->ops->storage_probe_create(drv, &ctx, "h3", probe), 0);
    assert_int_equal(drv->ops->storage_probe_exists(drv, &ctx, "h1", probe, &seen), 0);
    assert_true(seen); /* h1 and h3 share theirs */
    json_t *info = drv->ops->migration_info(drv, &ctx, "h1");
    json_t *gc = json_object_get(info, "guest_cpu");
    assert_string_equal(nb_json_str(gc, "model"), "Haswell-noTSX-IBRS");
    assert_int_equal(drv->ops->check_cpu(drv, &ctx, "h3", gc), 0);
    assert_int_equal(drv->ops->check_cpu(drv, &ctx, "h2", gc), -1);
    assert_non_null(strstr(nb_ctx_message(&ctx), "Haswell-noTSX-IBRS is missing on host h2"));
    nb_ctx_clear_error(&ctx);
    json_decref(info);
    /* an injected failure leaves the guest where it was */
    int reports = 0;
    struct nb_live_migration m = {.dest_host = "h3", .progress = on_progress, .opaque = &reports};
    nb_virt_fake_fail("h1", "live_migrate", 1);
    assert_int_equal(drv->ops->live_migrate(drv, &ctx, "h1", inst, &m), -1);
    nb_ctx_clear_error(&ctx);
    struct nb_guest_info gi;
    assert_int_equal(drv->ops->get_info(drv, &ctx, "h1", "lm-1", &gi), 0);
    /* abort before it ends */
    atomic_store(&m.abort_requested, 1);
    assert_int_equal(drv->ops->live_migrate(drv, &ctx, "h1", inst, &m), -1);
    assert_true(m.cancelled);
    nb_ctx_clear_error(&ctx);
    atomic_store(&m.abort_requested, 0);
    m.cancelled = false;
    assert_int_equal(drv->ops->live_migrate(drv, &ctx, "h1", inst, &m), 0);
    assert_true(reports > 0);
    assert_int_equal(drv->ops->get_info(drv, &ctx, "h1", "lm-1", &gi), -1);
    nb_ctx_clear_error(&ctx);
    assert_int_equal(drv->ops->get_info(drv, &ctx, "h3", "lm-1", &gi), 0);
    assert_int_equal(gi.power_state, NB_POWER_RUNNING);
    assert_int_equal(drv->ops->post_live_migration_dest(drv, &ctx, "h3", inst), 0);
    assert_int_equal(drv->ops->rollback_live_migration_dest(drv, &ctx, "h3", inst, true), 0);
    assert_int_equal(drv->ops->get_info(drv, &ctx, "h3", "lm-1", &gi), -1);
    nb_ctx_clear_error(&ctx);
    /* a destination another process serves gets the guest in its state file */
    char path[256];
    snprintf(path, sizeof(path), "%s/fake/h9.json", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{}", f);
    fclose(f);
    assert_int_equal(drv->ops->spawn(drv, &ctx, "h1", inst), 0);
    m.dest_host = "h9";
    assert_int_equal(drv->ops->live_migrate(drv, &ctx, "h1", inst, &m), 0);
    json_t *h9 = json_load_file(path, 0, NULL);
    assert_non_null(json_object_get(h9, "lm-1"));
    json_decref(h9);
    m.dest_host = "nowhere";
    assert_int_equal(drv->ops->live_migrate(drv, &ctx, "h9", inst, &m), -1);
    json_decref(inst);
    drv->ops->close(drv);
}

/* rebuild: the guest spawned again with the new image (console); an
 * image-backed instance is on disk everywhere only with [fake]
 * shared_storage; destroy_evacuated removes the guest. */
static void test_rebuild_and_evacuation_ops(void **state)
{
    (void)state;
    struct nb_virt_driver *drv = nb_virt_fake_open();
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    const char *uuid = "dddddddd-0000-0000-0000-000000000004";
    json_t *d = json_pack("{s:s, s:s}", "uuid", uuid, "image_ref", "img-1");
    assert_int_equal(drv->ops->spawn(drv, &ctx, "h1", d), 0);
    json_object_set_new(d, "image_ref", json_string("img-2"));
    assert_int_equal(drv->ops->rebuild(drv, &ctx, "h1", d, false), 0);
    char *log = drv->ops->console_log(drv, &ctx, "h1", uuid);
    assert_non_null(strstr(log, "boot source: img-2"));
    free(log);
    bool on_disk = true;
    assert_int_equal(drv->ops->instance_on_disk(drv, &ctx, "h2", d, &on_disk), 0);
    assert_false(on_disk);
    nb_conf_set("fake", "shared_storage", "true");
    assert_int_equal(drv->ops->instance_on_disk(drv, &ctx, "h2", d, &on_disk), 0);
    assert_true(on_disk);
    json_t *bfv = json_pack("{s:s, s:s}", "uuid", uuid, "image_ref", "");
    assert_int_equal(drv->ops->instance_on_disk(drv, &ctx, "h2", bfv, &on_disk), 0);
    assert_false(on_disk);
    nb_conf_set("fake", "shared_storage", "false");
    /* a failing spawn fails the rebuild (h3 fails every spawn) */
    assert_int_equal(drv->ops->rebuild(drv, &ctx, "h3", d, false), -1);
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(drv->ops->destroy_evacuated(drv, &ctx, "h1", d, true), 0);
    struct nb_guest_info gi;
    assert_int_equal(drv->ops->get_info(drv, &ctx, "h1", uuid, &gi), -1);
    drv->ops->close(drv);
    json_decref(d);
    json_decref(bfv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hosts_and_capacity),
        cmocka_unit_test(test_lifecycle_and_injection),
        cmocka_unit_test(test_persistence_and_outside_change),
        cmocka_unit_test(test_pause_and_suspend),
        cmocka_unit_test(test_volumes),
        cmocka_unit_test(test_snapshot),
        cmocka_unit_test(test_live_migration),
        cmocka_unit_test(test_rebuild_and_evacuation_ops),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
