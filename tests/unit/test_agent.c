/* test_agent.c - the compute agent's bus handler on the fake driver: pause,
 * unpause, suspend and resume end in op_result casts with the guest's
 * power state (and "unsupported" for a driver without the op), and
 * get_console_output cuts the log as Nova's _tail_log does; the disk-format
 * check before a domain start (disk_format.c) finds missing files and
 * format mismatches, reconciles them through the conductor or, with
 * [compute] reconcile_disk_format = false, leaves them as declared; a
 * live migration the agent runs as its source is known to
 * live_migration_running, with its phase, until its result is sent. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "bus/bus.h"
#include "common/config.h"
#include "common/json.h"
#include "common/util.h"
#include "compute/agent/internal.h"
#include "compute/bdm.h"
#include "compute/virt/driver.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define UUID "dddddddd-0000-0000-0000-000000000004"

static char dir[] = "/tmp/nubo-agent-test-XXXXXX";
static struct agent agent;

/* op_result casts the agent sends to "conductor" */
static pthread_mutex_t results_lock = PTHREAD_MUTEX_INITIALIZER;
static json_t *results;

/* reconcile_disk_format calls the agent made (args), and whether the fake
 * conductor accepts them */
static json_t *reconciles;
static bool reconcile_ok = true;

/* live-migration statuses and results the agent sent; while hold_preparing,
 * the fake conductor keeps the "preparing" status call waiting */
static pthread_cond_t lm_cond = PTHREAD_COND_INITIALIZER;
static json_t *lm_reports;
static bool hold_preparing, preparing_seen;

static json_t *conductor(void *opaque, struct nb_ctx *ctx, const char *method, json_t *args)
{
    (void)opaque;
    (void)ctx;
    if (!strcmp(method, "op_result")) {
        pthread_mutex_lock(&results_lock);
        json_array_append(results, args);
        pthread_mutex_unlock(&results_lock);
    }
    if (!strcmp(method, "live_migration_status") || !strcmp(method, "live_migration_result")) {
        pthread_mutex_lock(&results_lock);
        json_t *r = json_deep_copy(args);
        json_object_set_new(r, "method", json_string(method));
        json_array_append_new(lm_reports, r);
        if (nb_json_str(args, "status") && !strcmp(nb_json_str(args, "status"), "preparing")) {
            preparing_seen = true;
            pthread_cond_broadcast(&lm_cond);
            while (hold_preparing)
                pthread_cond_wait(&lm_cond, &results_lock);
        }
        pthread_mutex_unlock(&results_lock);
        return json_pack("{s:b}", "ok", 1);
    }
    if (!strcmp(method, "reconcile_disk_format")) {
        pthread_mutex_lock(&results_lock);
        json_array_append(reconciles, args);
        pthread_mutex_unlock(&results_lock);
        if (!reconcile_ok)
            return json_pack("{s:b, s:s}", "ok", 0, "message", "database is locked");
        /* what the real conductor answers: the corrected connection_info */
        return json_pack("{s:b, s:s}", "ok", 1, "connection_info",
                         "{\"driver_volume_type\": \"nfs\", \"data\": {\"format\": "
                         "\"raw\", \"marker\": \"from-conductor\"}}");
    }
    return NULL;
}

/* Waits for the n-th op_result (1-based); borrowed, or NULL after 5 s. */
static json_t *result(size_t n)
{
    for (int i = 0; i < 500; i++) {
        pthread_mutex_lock(&results_lock);
        json_t *r = json_array_get(results, n - 1);
        pthread_mutex_unlock(&results_lock);
        if (r)
            return r;
        usleep(10000);
    }
    return NULL;
}

static int setup(void **state)
{
    (void)state;
    nb_conf_reset();
    assert_non_null(mkdtemp(dir));
    nb_conf_set("DEFAULT", "state_path", dir);
    nb_conf_set("fake", "hosts", "h1");
    results = json_array();
    reconciles = json_array();
    lm_reports = json_array();
    assert_int_equal(nb_bus_init(), 0);
    assert_int_equal(nb_bus_listen("conductor", conductor, NULL, 1), 0);
    agent.drv = nb_virt_fake_open();
    nb_strlcpy(agent.host, "h1", sizeof(agent.host));
    pthread_mutex_init(&agent.ilocks_lock, NULL);
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    json_t *inst =
        json_pack("{s:s, s:s, s:{s:s, s:i, s:i, s:i}}", "uuid", UUID, "image_ref", "img-1",
                  "flavor", "name", "m1.tiny", "vcpus", 1, "memory_mb", 512, "root_gb", 1);
    int rc = agent.drv->ops->spawn(agent.drv, &ctx, "h1", inst);
    json_decref(inst);
    return rc;
}

static int teardown(void **state)
{
    (void)state;
    nb_bus_shutdown();
    agent.drv->ops->close(agent.drv);
    pthread_mutex_destroy(&agent.ilocks_lock);
    json_decref(results);
    json_decref(reconciles);
    json_decref(lm_reports);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void call_op(const char *method)
{
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    json_t *args = json_pack("{s:{s:s}}", "instance", "uuid", UUID);
    json_t *r = nb_agent_handle(&agent, &ctx, method, args);
    assert_null(r);
    json_decref(args);
}

static void assert_result(size_t n, const char *op, bool ok, int power)
{
    json_t *r = result(n);
    assert_non_null(r);
    assert_string_equal(nb_json_str(r, "op"), op);
    assert_string_equal(nb_json_str(r, "uuid"), UUID);
    assert_string_equal(nb_json_str(r, "host"), "h1");
    assert_int_equal(json_is_true(json_object_get(r, "ok")), ok);
    assert_int_equal(nb_json_int(r, "power_state", -1), power);
    assert_false(json_is_true(json_object_get(r, "unsupported")));
}

static void test_pause_suspend_cycle(void **state)
{
    (void)state;
    call_op("pause_instance");
    assert_result(1, "pause", true, NB_POWER_PAUSED);
    call_op("unpause_instance");
    assert_result(2, "unpause", true, NB_POWER_RUNNING);
    call_op("suspend_instance");
    assert_result(3, "suspend", true, NB_POWER_SHUTDOWN);
    /* a suspended guest cannot be paused: the driver's reason comes back */
    call_op("pause_instance");
    assert_result(4, "pause", false, NB_POWER_SHUTDOWN);
    assert_non_null(strstr(nb_json_str(result(4), "message"), "domain is not running"));
    call_op("resume_instance");
    assert_result(5, "resume", true, NB_POWER_RUNNING);
}

static void test_driver_without_the_op(void **state)
{
    (void)state;
    struct nb_virt_ops ops = *agent.drv->ops;
    ops.suspend = NULL;
    const struct nb_virt_ops *saved = agent.drv->ops;
    agent.drv->ops = &ops;
    size_t before = json_array_size(results);
    call_op("suspend_instance");
    json_t *r = result(before + 1);
    agent.drv->ops = saved;
    assert_non_null(r);
    assert_false(json_is_true(json_object_get(r, "ok")));
    assert_true(json_is_true(json_object_get(r, "unsupported")));
    assert_non_null(strstr(nb_json_str(r, "message"), "does not support suspend"));
    assert_int_equal(nb_json_int(r, "power_state", -1), NB_POWER_RUNNING);
}

/* get_console_output with a length (json null when len is NULL). New ref. */
static json_t *console(const char *uuid, json_t *len)
{
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    json_t *args = json_pack("{s:s, s:o}", "uuid", uuid, "length", len ? len : json_null());
    json_t *r = nb_agent_handle(&agent, &ctx, "get_console_output", args);
    json_decref(args);
    return r;
}

/* Number of pieces of s split at '\n', as Python's str.split('\n'). */
static size_t pieces(const char *s)
{
    size_t n = 1;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static void test_console_tail(void **state)
{
    (void)state;
    json_t *all = console(UUID, NULL);
    const char *text = nb_json_str(all, "output");
    assert_non_null(text);
    /* the boot lines and every state change since */
    assert_non_null(strstr(text, "flavor m1.tiny: 1 vCPU, 512 MB RAM, 1 GB root disk"));
    assert_non_null(strstr(text, "boot source: img-1"));
    assert_non_null(strstr(text, "paused: vCPUs stopped"));
    assert_non_null(strstr(text, "resumed from the saved memory state"));
    size_t total = pieces(text);
    assert_true(total > 8);
    assert_int_equal(text[strlen(text) - 1], '\n');

    json_t *neg = console(UUID, json_integer(-1));
    assert_string_equal(nb_json_str(neg, "output"), text);
    json_decref(neg);

    json_t *zero = console(UUID, json_integer(0));
    assert_string_equal(nb_json_str(zero, "output"), "");
    json_decref(zero);

    /* length 3: the last three pieces, the final newline's empty one
     * included, so two lines (what Tempest checks) */
    json_t *three = console(UUID, json_integer(3));
    const char *t3 = nb_json_str(three, "output");
    assert_int_equal(pieces(t3), 3);
    assert_string_equal(t3, text + strlen(text) - strlen(t3));
    assert_non_null(strstr(t3, "resumed from the saved memory state"));
    json_decref(three);

    json_t *one = console(UUID, json_integer(1));
    assert_string_equal(nb_json_str(one, "output"), "");
    json_decref(one);

    json_t *more = console(UUID, json_integer(100000));
    assert_string_equal(nb_json_str(more, "output"), text);
    json_decref(more);
    json_decref(all);

    json_t *missing = console("eeeeeeee-0000-0000-0000-000000000005", NULL);
    assert_null(json_object_get(missing, "output"));
    assert_int_equal(nb_json_int(missing, "code", 0), 404);
    json_decref(missing);

    struct nb_virt_ops ops = *agent.drv->ops;
    ops.console_log = NULL;
    const struct nb_virt_ops *saved = agent.drv->ops;
    agent.drv->ops = &ops;
    json_t *none = console(UUID, NULL);
    agent.drv->ops = saved;
    assert_int_equal(nb_json_int(none, "code", 0), 501);
    json_decref(none);
}

/* ---- disk-format truth (disk_format.c) ------------------------------------ */

static void sh(const char *fmt, const char *arg)
{
    char cmd[8192];
    snprintf(cmd, sizeof(cmd), fmt, arg, arg);
    assert_int_equal(system(cmd), 0);
}

/* A volume mapping whose file is volume-<name> on share "srv:/vols" under
 * <dir>/mnt, declared in format `declared`. Writes the file's path into
 * path. New ref. */
static json_t *volume_bdm(const char *name, const char *declared, char *path, size_t n)
{
    char base[512];
    snprintf(base, sizeof(base), "%s/mnt", dir);
    json_t *ci =
        json_pack("{s:s, s:{s:s, s:s, s:s}, s:s}", "driver_volume_type", "nfs", "data", "export",
                  "srv:/vols", "name", name, "format", declared, "mount_point_base", base);
    assert_int_equal(nb_bdm_volume_path(ci, path, n), 0);
    char *text = nb_json_dump(ci);
    json_decref(ci);
    json_t *b = json_pack("{s:s, s:s, s:s, s:s, s:i, s:i, s:s}", "uuid", "bdm-1", "volume_id",
                          "vol-1", "source_type", "volume", "destination_type", "volume",
                          "boot_index", 0, "deleted", 0, "connection_info", text);
    free(text);
    char mk[600];
    snprintf(mk, sizeof(mk), "%s", path);
    *strrchr(mk, '/') = '\0';
    assert_int_equal(nb_mkdir_p(mk), 0);
    return b;
}

static void test_disk_check_core(void **state)
{
    (void)state;
    char path[4096], err[1024];
    struct nb_disk_check chk;

    /* raw on disk, qcow2 in the database: the runbook's case */
    json_t *b = volume_bdm("volume-raw", "qcow2", path, sizeof(path));
    sh("qemu-img create -q -f raw '%s' 1M", path);
    assert_int_equal(nb_disk_check(b, &chk, err, sizeof(err)), NB_DISK_MISMATCH);
    assert_string_equal(chk.declared, "qcow2");
    assert_string_equal(chk.actual, "raw");
    assert_string_equal(chk.path, path);
    json_decref(b);

    /* qcow2 on disk, declared qcow2: fine; declared raw: mismatch */
    b = volume_bdm("volume-q", "qcow2", path, sizeof(path));
    sh("qemu-img create -q -f qcow2 '%s' 1M", path);
    assert_int_equal(nb_disk_check(b, &chk, err, sizeof(err)), NB_DISK_OK);
    json_decref(b);
    b = volume_bdm("volume-q", "raw", path, sizeof(path));
    assert_int_equal(nb_disk_check(b, &chk, err, sizeof(err)), NB_DISK_MISMATCH);
    assert_string_equal(chk.actual, "qcow2");
    json_decref(b);

    /* no data.format: raw, as os-brick assumes */
    b = volume_bdm("volume-raw", "qcow2", path, sizeof(path));
    json_t *ci = nb_bdm_connection_info(b);
    json_object_del(json_object_get(ci, "data"), "format");
    char *text = nb_json_dump(ci);
    json_object_set_new(b, "connection_info", json_string(text));
    free(text);
    json_decref(ci);
    assert_int_equal(nb_disk_check(b, &chk, err, sizeof(err)), NB_DISK_OK);
    assert_string_equal(chk.declared, "raw");
    /* connection_info that names no file */
    json_object_set_new(b, "connection_info", json_string("{\"data\": {}}"));
    assert_int_equal(nb_disk_check(b, &chk, err, sizeof(err)), -1);
    json_decref(b);

    /* the file vanished */
    b = volume_bdm("volume-gone", "qcow2", path, sizeof(path));
    assert_int_equal(nb_disk_check(b, &chk, err, sizeof(err)), NB_DISK_MISSING);
    assert_string_equal(chk.path, path);
    json_decref(b);

    /* a raw disk whose guest wrote a qcow2 header naming a host file */
    b = volume_bdm("volume-evil", "raw", path, sizeof(path));
    sh("qemu-img create -q -f qcow2 -F raw -b /etc/hostname -u '%s' 1M", path);
    assert_int_equal(nb_disk_check(b, &chk, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "/etc/hostname"));
    json_decref(b);
    /* ... or naming another volume's file on the same share */
    b = volume_bdm("volume-vol-1", "raw", path, sizeof(path));
    sh("qemu-img create -q -f qcow2 -F raw -b volume-vol-2 -u '%s' 1M", path);
    assert_int_equal(nb_disk_check(b, &chk, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "volume-vol-2"));
    /* a backing file of its own chain (an NFS snapshot overlay) is fine */
    sh("qemu-img create -q -f qcow2 -F raw -b volume-vol-1.snap-1 -u '%s' 1M", path);
    assert_int_equal(nb_disk_check(b, &chk, err, sizeof(err)), NB_DISK_MISMATCH);
    assert_string_equal(chk.actual, "qcow2");
    json_decref(b);

    /* not attached yet, or a local disk: nothing to check */
    b = json_pack("{s:s, s:s, s:i}", "destination_type", "volume", "volume_id", "v", "deleted", 0);
    assert_int_equal(nb_disk_check(b, &chk, err, sizeof(err)), NB_DISK_SKIP);
    json_decref(b);
    b = json_pack("{s:s, s:s, s:i}", "destination_type", "local", "source_type", "image", "deleted",
                  0);
    assert_int_equal(nb_disk_check(b, &chk, err, sizeof(err)), NB_DISK_SKIP);
    json_decref(b);
}

static void test_verify_disks(void **state)
{
    (void)state;
    char path[4096];
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    json_t *b = volume_bdm("volume-conv", "qcow2", path, sizeof(path));
    sh("qemu-img create -q -f raw '%s' 1M", path);
    json_t *inst =
        json_pack("{s:s, s:[o]}", "uuid", UUID, "block_device_mapping", json_deep_copy(b));

    /* reconcile off: a warning, the mapping stays as declared, no call */
    nb_conf_set("compute", "reconcile_disk_format", "false");
    assert_int_equal(nb_agent_verify_disks(&agent, &ctx, inst, NULL), 0);
    assert_int_equal(json_array_size(reconciles), 0);
    json_t *copy = json_array_get(json_object_get(inst, "block_device_mapping"), 0);
    json_t *ci = nb_bdm_connection_info(copy);
    assert_string_equal(nb_bdm_declared_format(ci), "qcow2");
    json_decref(ci);

    /* on (default): the conductor is asked, the copy takes its answer */
    nb_conf_set("compute", "reconcile_disk_format", "true");
    assert_int_equal(nb_agent_verify_disks(&agent, &ctx, inst, NULL), 0);
    assert_int_equal(json_array_size(reconciles), 1);
    json_t *call = json_array_get(reconciles, 0);
    assert_string_equal(nb_json_str(call, "uuid"), UUID);
    assert_string_equal(nb_json_str(call, "bdm_uuid"), "bdm-1");
    assert_string_equal(nb_json_str(call, "volume_id"), "vol-1");
    assert_string_equal(nb_json_str(call, "old_format"), "qcow2");
    assert_string_equal(nb_json_str(call, "new_format"), "raw");
    assert_string_equal(nb_json_str(call, "path"), path);
    assert_non_null(strstr(nb_json_str(copy, "connection_info"), "from-conductor"));

    /* the one mapping being attached: it and the instance's copy follow */
    json_t *only = json_deep_copy(b);
    json_object_set(json_array_get(json_object_get(inst, "block_device_mapping"), 0),
                    "connection_info", json_object_get(b, "connection_info"));
    assert_int_equal(nb_agent_verify_disks(&agent, &ctx, inst, only), 0);
    assert_int_equal(json_array_size(reconciles), 2);
    assert_non_null(strstr(nb_json_str(only, "connection_info"), "from-conductor"));
    assert_non_null(strstr(nb_json_str(copy, "connection_info"), "from-conductor"));
    json_decref(only);

    /* the conductor refuses: the start fails with its reason */
    json_object_set(copy, "connection_info", json_object_get(b, "connection_info"));
    reconcile_ok = false;
    assert_int_equal(nb_agent_verify_disks(&agent, &ctx, inst, NULL), -1);
    assert_non_null(strstr(ctx.err_msg, "database is locked"));
    reconcile_ok = true;
    nb_ctx_clear_error(&ctx);

    /* the file vanished: the fault names it and the host */
    unlink(path);
    assert_int_equal(nb_agent_verify_disks(&agent, &ctx, inst, NULL), -1);
    char want[5000];
    snprintf(want, sizeof(want), "Volume vol-1 of instance %s: file %s is missing on host h1", UUID,
             path);
    assert_string_equal(ctx.err_msg, want);
    json_decref(inst);
    json_decref(b);
}

/* A start whose volume file is missing fails before the driver is asked:
 * op_result not ok, with the message, and the guest untouched. */
static void test_start_with_missing_volume(void **state)
{
    (void)state;
    char path[4096];
    json_t *b = volume_bdm("volume-missing", "raw", path, sizeof(path));
    size_t before = json_array_size(results);
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    json_t *args =
        json_pack("{s:{s:s, s:[O]}}", "instance", "uuid", UUID, "block_device_mapping", b);
    assert_null(nb_agent_handle(&agent, &ctx, "start_instance", args));
    json_decref(args);
    json_t *r = result(before + 1);
    assert_non_null(r);
    assert_string_equal(nb_json_str(r, "op"), "start");
    assert_false(json_is_true(json_object_get(r, "ok")));
    assert_non_null(strstr(nb_json_str(r, "message"), "is missing on host h1"));
    assert_non_null(strstr(nb_json_str(r, "message"), path));
    json_decref(b);
}

/* live_migration_running of migration mig: the reply, new ref. */
static json_t *lm_running(const char *mig)
{
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    json_t *args = json_pack("{s:s}", "migration_uuid", mig);
    json_t *r = nb_agent_handle(&agent, &ctx, "live_migration_running", args);
    json_decref(args);
    assert_non_null(r);
    return r;
}

/* The live_migration_result the agent sent, borrowed, or NULL after 5 s. */
static json_t *lm_result(void)
{
    for (int i = 0; i < 500; i++) {
        pthread_mutex_lock(&results_lock);
        size_t k;
        json_t *r, *found = NULL;
        json_array_foreach (lm_reports, k, r)
            if (!strcmp(nb_json_str(r, "method"), "live_migration_result"))
                found = r;
        pthread_mutex_unlock(&results_lock);
        if (found)
            return found;
        usleep(10000);
    }
    return NULL;
}

/* A conductor that restarted asks the source whether it still runs a
 * migration: yes while the run is in the registry (here held in its
 * "preparing" report), with its phase; no for another migration, and no
 * once the result (here: the destination has no agent) has been sent. */
static void test_live_migration_running(void **state)
{
    (void)state;
    const char *mig = "eeeeeeee-0000-0000-0000-000000000005";
    pthread_mutex_lock(&results_lock);
    hold_preparing = true;
    preparing_seen = false;
    pthread_mutex_unlock(&results_lock);
    json_t *r = lm_running(mig);
    assert_false(json_is_true(json_object_get(r, "running")));
    json_decref(r);
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    json_t *args = json_pack("{s:{s:s}, s:s, s:s}", "instance", "uuid", UUID, "migration_uuid", mig,
                             "dest_host", "h-none");
    assert_null(nb_agent_handle(&agent, &ctx, "live_migration", args));
    json_decref(args);
    pthread_mutex_lock(&results_lock);
    while (!preparing_seen)
        pthread_cond_wait(&lm_cond, &results_lock);
    pthread_mutex_unlock(&results_lock);
    r = lm_running(mig);
    assert_true(json_is_true(json_object_get(r, "running")));
    assert_string_equal(nb_json_str(r, "phase"), "preparing");
    json_decref(r);
    r = lm_running("ffffffff-0000-0000-0000-000000000006");
    assert_false(json_is_true(json_object_get(r, "running")));
    json_decref(r);
    pthread_mutex_lock(&results_lock);
    hold_preparing = false;
    pthread_cond_broadcast(&lm_cond);
    pthread_mutex_unlock(&results_lock);
    json_t *res = lm_result();
    assert_non_null(res);
    assert_string_equal(nb_json_str(res, "migration_uuid"), mig);
    assert_false(json_is_true(json_object_get(res, "ok")));
    assert_string_equal(nb_json_str(res, "phase"), "pre_live_migration");
    assert_non_null(strstr(nb_json_str(res, "message"), "h-none"));
    bool gone = false;
    for (int i = 0; i < 500 && !gone; i++) { /* the run leaves once the result is sent */
        r = lm_running(mig);
        gone = !json_is_true(json_object_get(r, "running"));
        json_decref(r);
        if (!gone)
            usleep(10000);
    }
    assert_true(gone);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pause_suspend_cycle),
        cmocka_unit_test(test_driver_without_the_op),
        cmocka_unit_test(test_console_tail),
        cmocka_unit_test(test_disk_check_core),
        cmocka_unit_test(test_verify_disks),
        cmocka_unit_test(test_start_with_missing_volume),
        cmocka_unit_test(test_live_migration_running),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
