/* test_rpc.c - the typed bus clients (src/compute/rpc) put on the wire
 * exactly the messages the roles' dispatchers read: for every client
 * function, the topic, the method and the JSON arguments, compared with
 * the shape each message had when callers packed it by hand (so the
 * in-process bus, AMQP and split processes keep talking to each other);
 * and the calls hand back the replies (typed where the client types them).
 * A recorder listens on "conductor", "scheduler" and "compute.h1" on the
 * in-process bus. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "bus/bus.h"
#include "common/config.h"
#include "common/json.h"
#include "compute/rpc/compute_api.h"
#include "compute/rpc/conductor_api.h"
#include "compute/objects/request_spec.h"
#include "compute/rpc/scheduler_api.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static json_t *seen; /* [{"topic", "method", "args"}…] */

/* Records the message; calls get {"method": …} back, guest_info a typed
 * answer, instances_on_host a list. */
static json_t *recorder(void *opaque, struct nb_ctx *ctx, const char *method, json_t *args)
{
    (void)ctx;
    pthread_mutex_lock(&lock);
    json_array_append_new(seen, json_pack("{s:s, s:s, s:O?}", "topic", (const char *)opaque,
                                          "method", method, "args", args));
    pthread_mutex_unlock(&lock);
    if (!strcmp(method, "guest_info"))
        return json_pack("{s:b, s:i}", "found", 1, "power_state", 4);
    if (!strcmp(method, "live_migration_running")) {
        const char *m = nb_json_str(args, "migration_uuid");
        if (m && !strcmp(m, "m-old")) /* an agent without the method */
            return json_pack("{s:s}", "error", "unknown method");
        return m && !strcmp(m, "m1") ? json_pack("{s:b, s:s}", "running", 1, "phase", "running")
                                     : json_pack("{s:b, s:n}", "running", 0, "phase");
    }
    if (!strcmp(method, "instances_on_host") || !strcmp(method, "evacuated_instances"))
        return json_pack("[{s:s}]", "uuid", "u1");
    return json_pack("{s:s}", "method", method);
}

/* Waits for the next recorded message and checks it: topic, method and
 * args (JSON text) equal. */
static void expect(const char *topic, const char *method, const char *args_json)
{
    json_t *m = NULL;
    for (int i = 0; i < 500 && !m; i++) {
        pthread_mutex_lock(&lock);
        if (json_array_size(seen)) {
            m = json_incref(json_array_get(seen, 0));
            json_array_remove(seen, 0);
        }
        pthread_mutex_unlock(&lock);
        if (!m)
            usleep(10000);
    }
    assert_non_null(m);
    assert_string_equal(nb_json_str(m, "topic"), topic);
    assert_string_equal(nb_json_str(m, "method"), method);
    json_t *want = json_loads(args_json, 0, NULL);
    assert_non_null(want);
    if (!json_equal(json_object_get(m, "args"), want)) {
        char *got = json_dumps(json_object_get(m, "args"), JSON_SORT_KEYS);
        fail_msg("%s %s: got %s, want %s", topic, method, got, args_json);
    }
    json_decref(want);
    json_decref(m);
}

#define NO_UNDO ((struct nb_bus_undo){0})

static int undone, undone_late;
static char undone_uuid[64];

static void undo_recorder(struct nb_ctx *ctx, json_t *args, json_t *data, bool late)
{
    (void)ctx;
    undone++;
    undone_late += late;
    snprintf(undone_uuid, sizeof(undone_uuid), "%s %s", nb_json_str(args, "uuid"),
             nb_json_str(data, "task"));
}

static int setup(void **state)
{
    (void)state;
    nb_conf_reset();
    seen = json_array();
    assert_int_equal(nb_bus_init(), 0);
    assert_int_equal(nb_bus_listen("conductor", recorder, "conductor", 1), 0);
    assert_int_equal(
        nb_bus_listen(NB_CONDUCTOR_HEARTBEAT_TOPIC, recorder, NB_CONDUCTOR_HEARTBEAT_TOPIC, 1), 0);
    assert_int_equal(nb_bus_listen("scheduler", recorder, "scheduler", 1), 0);
    assert_int_equal(nb_bus_listen("compute.h1", recorder, "compute.h1", 1), 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    nb_bus_shutdown();
    json_decref(seen);
    return 0;
}

static void test_api_to_conductor(void **state)
{
    (void)state;
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    json_t *uuids = json_pack("[s, s]", "u1", "u2");
    assert_int_equal(nb_conductor_build_instances(&ctx, uuids, "pw"), 0);
    json_decref(uuids);
    expect("conductor", "build_instances",
           "{\"instance_uuids\": [\"u1\", \"u2\"], "
           "\"admin_password\": \"pw\"}");
    static const char *const ops[] = {"start", "stop", "pause", "unpause", "suspend", "resume"};
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
        char method[64];
        snprintf(method, sizeof(method), "%s_instance", ops[i]);
        assert_int_equal(nb_conductor_power_action(&ctx, "u1", ops[i], NULL, NO_UNDO), 0);
        expect("conductor", method, "{\"uuid\": \"u1\"}");
    }
    assert_int_equal(nb_conductor_power_action(&ctx, "u1", "reboot", "HARD", NO_UNDO), 0);
    expect("conductor", "reboot_instance", "{\"uuid\": \"u1\", \"reboot_type\": \"HARD\"}");
    assert_int_equal(nb_conductor_power_action(&ctx, "u1", "shelve", NULL, NO_UNDO), -1);
    assert_int_equal(nb_conductor_delete_instance(&ctx, "u1"), 0);
    expect("conductor", "delete_instance", "{\"uuid\": \"u1\"}");
    assert_int_equal(nb_conductor_attach_volume(&ctx, "u1", "b1", "v1", NO_UNDO), 0);
    expect("conductor", "attach_volume",
           "{\"uuid\": \"u1\", \"bdm_uuid\": \"b1\", \"volume_id\": \"v1\"}");
    assert_int_equal(nb_conductor_detach_volume(&ctx, "u1", "b1", "v1", NO_UNDO), 0);
    expect("conductor", "detach_volume",
           "{\"uuid\": \"u1\", \"bdm_uuid\": \"b1\", \"volume_id\": \"v1\"}");
    assert_int_equal(nb_conductor_snapshot_instance(&ctx, "u1", "i1", NO_UNDO), 0);
    expect("conductor", "snapshot_instance", "{\"uuid\": \"u1\", \"image_id\": \"i1\"}");
}

/* An acknowledged request sent: its undo is dropped unrun. One that
 * cannot be queued (the in-process bus has no listener for the topic):
 * -1 with its undo run at once (not late), its data given back. */
static void test_acknowledged_undo(void **state)
{
    (void)state;
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    undone = undone_late = 0;
    const struct nb_migrate_server_req r = {.uuid = "u1", .migration_uuid = "m1"};
    assert_int_equal(
        nb_conductor_migrate_server(
            &ctx, &r, (struct nb_bus_undo){undo_recorder, json_pack("{s:s}", "task", "t")}),
        0);
    expect("conductor", "migrate_server",
           "{\"uuid\": \"u1\", \"migration_uuid\": \"m1\", \"host\": null, \"flavor\": null, "
           "\"allow_same_host\": false}");
    assert_int_equal(undone, 0);
    assert_int_equal(
        nb_bus_cast_later(&ctx, "nowhere", "m", json_pack("{s:s}", "uuid", "u2"), 5,
                          (struct nb_bus_undo){undo_recorder, json_pack("{s:s}", "task", "t2")}),
        -1);
    assert_int_equal(undone, 1);
    assert_int_equal(undone_late, 0);
    assert_string_equal(undone_uuid, "u2 t2");
}

static void test_agent_to_conductor(void **state)
{
    (void)state;
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    nb_conductor_build_result(&ctx, "u1", "h1", false, "boom");
    expect("conductor", "build_result",
           "{\"uuid\": \"u1\", \"host\": \"h1\", \"ok\": false, \"message\": \"boom\"}");
    nb_conductor_build_result(&ctx, "u1", "h1", true, NULL);
    expect("conductor", "build_result",
           "{\"uuid\": \"u1\", \"host\": \"h1\", \"ok\": true, \"message\": null}");
    const struct nb_op_result r = {"u1", "h1", "pause", false, "no", 1, true};
    nb_conductor_op_result(&ctx, &r);
    expect("conductor", "op_result",
           "{\"uuid\": \"u1\", \"host\": \"h1\", \"op\": \"pause\", \"ok\": false, \"message\": "
           "\"no\", \"power_state\": 1, \"unsupported\": true}");
    nb_conductor_attach_result(&ctx, "u1", "h1", "b1", "v1", true, NULL);
    expect("conductor", "attach_result",
           "{\"uuid\": \"u1\", \"host\": \"h1\", \"bdm_uuid\": \"b1\", \"volume_id\": \"v1\", "
           "\"ok\": true, \"message\": null}");
    nb_conductor_detach_result(&ctx, "u1", "h1", NULL, "v1", false, "busy");
    expect("conductor", "detach_result",
           "{\"uuid\": \"u1\", \"host\": \"h1\", \"bdm_uuid\": null, \"volume_id\": \"v1\", "
           "\"ok\": false, \"message\": \"busy\"}");
    nb_conductor_snapshot_result(&ctx, "u1", "h1", "i1", true, NULL);
    expect("conductor", "snapshot_result",
           "{\"uuid\": \"u1\", \"host\": \"h1\", \"image_id\": \"i1\", \"ok\": true, "
           "\"message\": null}");
    nb_conductor_power_sync(&ctx, "u1", "h1", 4, true);
    expect("conductor", "power_sync",
           "{\"uuid\": \"u1\", \"host\": \"h1\", \"power_state\": 4, \"found\": true}");
    json_t *hosts = json_pack("[s]", "h1");
    nb_conductor_service_heartbeat(&ctx, "nova-compute", hosts);
    json_decref(hosts);
    expect(NB_CONDUCTOR_HEARTBEAT_TOPIC, "service_heartbeat",
           "{\"binary\": \"nova-compute\", \"hosts\": [\"h1\"]}");
    nb_conductor_compute_node_report(&ctx, json_pack("{s:s}", "host", "h1"));
    expect("conductor", "compute_node_update", "{\"host\": \"h1\"}");
}

static void test_agent_calls_conductor(void **state)
{
    (void)state;
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    const struct nb_disk_reconcile req = {"u1", "b1", "v1", "/p", "raw", "qcow2", "h1"};
    json_t *reply = nb_conductor_reconcile_disk_format(&ctx, &req, 5000);
    assert_string_equal(nb_json_str(reply, "method"), "reconcile_disk_format");
    json_decref(reply);
    expect("conductor", "reconcile_disk_format",
           "{\"uuid\": \"u1\", \"bdm_uuid\": \"b1\", \"volume_id\": \"v1\", \"path\": \"/p\", "
           "\"old_format\": \"raw\", \"new_format\": \"qcow2\", \"host\": \"h1\"}");
    reply = nb_conductor_service_update(&ctx, "h1", "nova-compute", "compute", 5000);
    assert_non_null(reply);
    json_decref(reply);
    expect("conductor", "service_update",
           "{\"host\": \"h1\", \"binary\": \"nova-compute\", \"topic\": \"compute\"}");
    reply = nb_conductor_compute_node_update(&ctx, json_pack("{s:s}", "host", "h1"), 5000);
    assert_string_equal(nb_json_str(reply, "method"), "compute_node_update");
    json_decref(reply);
    expect("conductor", "compute_node_update", "{\"host\": \"h1\"}");
    json_t *rows = nb_conductor_instances_on_host(&ctx, "h1", 5000);
    assert_int_equal(json_array_size(rows), 1);
    json_decref(rows);
    expect("conductor", "instances_on_host", "{\"host\": \"h1\"}");
}

static void test_conductor_to_compute(void **state)
{
    (void)state;
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(
        nb_compute_build_and_run_instance(&ctx, "h1", json_pack("{s:s}", "uuid", "u1"), "n1"), 0);
    expect("compute.h1", "build_and_run_instance",
           "{\"instance\": {\"uuid\": \"u1\"}, \"node\": \"n1\"}");
    static const char *const ops[] = {"start",   "stop",    "reboot", "pause",
                                      "unpause", "suspend", "resume"};
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
        char method[64];
        snprintf(method, sizeof(method), "%s_instance", ops[i]);
        bool hard = !strcmp(ops[i], "reboot");
        assert_int_equal(
            nb_compute_power_action(&ctx, "h1", ops[i], json_pack("{s:s}", "uuid", "u1"), hard), 0);
        expect("compute.h1", method,
               hard ? "{\"instance\": {\"uuid\": \"u1\"}, \"reboot_type\": \"HARD\"}"
                    : "{\"instance\": {\"uuid\": \"u1\"}, \"reboot_type\": \"SOFT\"}");
    }
    assert_int_equal(nb_compute_terminate_instance(&ctx, "h1", json_pack("{s:s}", "uuid", "u1")),
                     0);
    expect("compute.h1", "terminate_instance", "{\"instance\": {\"uuid\": \"u1\"}}");
    json_t *bdm = json_pack("{s:s}", "uuid", "b1");
    assert_int_equal(nb_compute_attach_volume(&ctx, "h1", json_pack("{s:s}", "uuid", "u1"), bdm),
                     0);
    expect("compute.h1", "attach_volume",
           "{\"instance\": {\"uuid\": \"u1\"}, \"bdm\": {\"uuid\": \"b1\"}}");
    assert_int_equal(nb_compute_detach_volume(&ctx, "h1", json_pack("{s:s}", "uuid", "u1"), bdm),
                     0);
    expect("compute.h1", "detach_volume",
           "{\"instance\": {\"uuid\": \"u1\"}, \"bdm\": {\"uuid\": \"b1\"}}");
    json_decref(bdm);
    assert_int_equal(
        nb_compute_snapshot_instance(&ctx, "h1", json_pack("{s:s}", "uuid", "u1"), "i1"), 0);
    expect("compute.h1", "snapshot_instance",
           "{\"instance\": {\"uuid\": \"u1\"}, \"image_id\": \"i1\"}");
    assert_int_equal(nb_compute_destroy_guest(&ctx, "h1", "u1"), 0);
    expect("compute.h1", "destroy_guest", "{\"uuid\": \"u1\"}");
    /* no agent on h2 */
    assert_int_equal(nb_compute_destroy_guest(&ctx, "h2", "u1"), -1);
}

static void test_calls_to_compute_and_scheduler(void **state)
{
    (void)state;
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    json_t *r = nb_compute_get_console_output(&ctx, "h1", "u1", -1, 5000);
    json_decref(r);
    expect("compute.h1", "get_console_output", "{\"uuid\": \"u1\", \"length\": null}");
    r = nb_compute_get_console_output(&ctx, "h1", "u1", 10, 5000);
    json_decref(r);
    expect("compute.h1", "get_console_output", "{\"uuid\": \"u1\", \"length\": 10}");
    bool found = false;
    int power = -1;
    assert_int_equal(nb_compute_guest_info(&ctx, "h1", "u1", 5000, &found, &power), 0);
    assert_true(found);
    assert_int_equal(power, 4);
    expect("compute.h1", "guest_info", "{\"uuid\": \"u1\"}");
    r = nb_compute_get_host_uptime(&ctx, "h1", 5000);
    json_decref(r);
    expect("compute.h1", "get_host_uptime", "{}");
    assert_true(nb_compute_ping(&ctx, "h1", 5000));
    expect("compute.h1", "ping", "{}");
    /* the request spec goes in its JSON form (compute/objects/request_spec.h) */
    struct nb_request_spec spec;
    json_t *sj = json_pack("{s:s}", "project_id", "p");
    nb_request_spec_from_json(&spec, sj);
    json_decref(sj);
    r = nb_scheduler_select_destinations(&ctx, "u1", &spec, 5000);
    assert_string_equal(nb_json_str(r, "method"), "select_destinations");
    json_decref(r);
    json_t *want =
        json_pack("{s:s, s:o}", "instance_uuid", "u1", "spec", nb_request_spec_to_json(&spec));
    char *want_text = json_dumps(want, 0);
    expect("scheduler", "select_destinations", want_text);
    free(want_text);
    json_decref(want);
    nb_request_spec_free(&spec);
    assert_true(nb_scheduler_ping(&ctx, 5000));
    expect("scheduler", "ping", "{}");
    /* no agent on h2: no answer, the error on ctx */
    assert_int_equal(nb_compute_guest_info(&ctx, "h2", "u1", 500, &found, &power), -1);
    assert_int_not_equal(ctx.err_status, 0);
}

/* The resize steps: each a call to compute.<host> with the common members
 * and its own (flavor, dest_host + dest, power_on). */
static void test_resize_steps(void **state)
{
    (void)state;
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    json_t *flavor = json_pack("{s:s}", "name", "m1.small");
    json_t *dest = json_pack("{s:s}", "host", "h1");
    struct nb_resize_step s = {.host = "h1",
                               .migration_uuid = "m1",
                               .same_host = true,
                               .flavor = flavor,
                               .dest_host = "h1",
                               .dest = dest,
                               .power_on = true};
    s.instance = json_pack("{s:s}", "uuid", "u1");
    json_t *r = nb_compute_prep_resize(&ctx, &s, 5000);
    assert_string_equal(nb_json_str(r, "method"), "prep_resize");
    json_decref(r);
    expect("compute.h1", "prep_resize",
           "{\"instance\": {\"uuid\": \"u1\"}, \"migration_uuid\": \"m1\", \"same_host\": "
           "true, \"flavor\": {\"name\": \"m1.small\"}}");
    s.instance = json_pack("{s:s}", "uuid", "u1");
    json_decref(nb_compute_resize_instance(&ctx, &s, 5000));
    expect("compute.h1", "resize_instance",
           "{\"instance\": {\"uuid\": \"u1\"}, \"migration_uuid\": \"m1\", \"same_host\": "
           "true, \"flavor\": {\"name\": \"m1.small\"}, \"dest_host\": \"h1\", \"dest\": "
           "{\"host\": \"h1\"}}");
    json_t *(*with_power[])(struct nb_ctx *, const struct nb_resize_step *,
                            int) = {nb_compute_finish_resize, nb_compute_finish_revert_resize};
    const char *power_names[] = {"finish_resize", "finish_revert_resize"};
    for (int i = 0; i < 2; i++) {
        s.instance = json_pack("{s:s}", "uuid", "u1");
        json_decref(with_power[i](&ctx, &s, 5000));
        expect("compute.h1", power_names[i],
               "{\"instance\": {\"uuid\": \"u1\"}, \"migration_uuid\": \"m1\", "
               "\"same_host\": true, \"power_on\": true}");
    }
    json_t *(*plain[])(struct nb_ctx *, const struct nb_resize_step *,
                       int) = {nb_compute_confirm_resize, nb_compute_revert_resize};
    const char *plain_names[] = {"confirm_resize", "revert_resize"};
    for (int i = 0; i < 2; i++) {
        s.instance = json_pack("{s:s}", "uuid", "u1");
        json_decref(plain[i](&ctx, &s, 5000));
        expect("compute.h1", plain_names[i],
               "{\"instance\": {\"uuid\": \"u1\"}, \"migration_uuid\": \"m1\", "
               "\"same_host\": true}");
    }
    json_decref(flavor);
    json_decref(dest);
}

static void test_rebuild_messages(void **state)
{
    (void)state;
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    const struct nb_rebuild_req req = {.uuid = "u1",
                                       .migration_uuid = "m1",
                                       .host = "h2",
                                       .force = true,
                                       .shared_storage_given = true,
                                       .on_shared_storage = true};
    assert_int_equal(nb_conductor_rebuild_instance(&ctx, &req, NO_UNDO), 0);
    expect("conductor", "rebuild_instance",
           "{\"uuid\": \"u1\", \"image_ref\": null, \"admin_password\": null, "
           "\"preserve_ephemeral\": false, \"migration_uuid\": \"m1\", "
           "\"host\": \"h2\", \"force\": true, \"on_shared_storage\": true}");
    const struct nb_compute_rebuild rb = {"m1", -1, false};
    assert_int_equal(nb_compute_rebuild_instance(&ctx, "h1", json_pack("{s:s}", "uuid", "u1"), &rb),
                     0);
    expect("compute.h1", "rebuild_instance",
           "{\"instance\": {\"uuid\": \"u1\"}, \"migration_uuid\": \"m1\", "
           "\"preserve_ephemeral\": false, \"on_shared_storage\": null}");
    const struct nb_rebuild_result r = {"u1", "h1", NULL, true, NULL, 1, false};
    nb_conductor_rebuild_result(&ctx, &r);
    expect("conductor", "rebuild_result",
           "{\"uuid\": \"u1\", \"host\": \"h1\", \"migration_uuid\": null, \"ok\": true, "
           "\"message\": null, \"power_state\": 1, \"on_shared_storage\": false}");
    json_t *rows = nb_conductor_evacuated_instances(&ctx, "h1", 5000);
    assert_int_equal(json_array_size(rows), 1);
    json_decref(rows);
    expect("conductor", "evacuated_instances", "{\"host\": \"h1\"}");
    nb_conductor_evacuation_cleaned(&ctx, "u1", "m1", "h1");
    expect("conductor", "evacuation_cleaned",
           "{\"uuid\": \"u1\", \"migration_uuid\": \"m1\", \"host\": \"h1\"}");
}

/* The live-migration messages: the source's reports to the conductor (a
 * status change is a call, progress a cast), and the steps on
 * compute.<host>. */
static void test_live_migration_messages(void **state)
{
    (void)state;
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    struct nb_live_migration_status st = {
        .uuid = "u1", .migration_uuid = "m1", .host = "h1", .status = "running"};
    assert_int_equal(nb_conductor_live_migration_status(&ctx, &st), 0);
    expect("conductor", "live_migration_status",
           "{\"uuid\": \"u1\", \"migration_uuid\": \"m1\", \"host\": \"h1\", \"status\": "
           "\"running\", \"progress\": null}");
    st.status = NULL;
    st.has_progress = true;
    st.memory_total = 8;
    st.memory_processed = 5;
    st.memory_remaining = 3;
    assert_int_equal(nb_conductor_live_migration_status(&ctx, &st), 0);
    expect("conductor", "live_migration_status",
           "{\"uuid\": \"u1\", \"migration_uuid\": \"m1\", \"host\": \"h1\", \"status\": "
           "null, \"progress\": {\"memory_total\": 8, \"memory_processed\": 5, "
           "\"memory_remaining\": 3, \"disk_total\": 0, \"disk_processed\": 0, "
           "\"disk_remaining\": 0}}");
    /* a status the conductor missed, sent again with progress: a cast */
    st.status = "running";
    st.as_cast = true;
    assert_int_equal(nb_conductor_live_migration_status(&ctx, &st), 0);
    expect("conductor", "live_migration_status",
           "{\"uuid\": \"u1\", \"migration_uuid\": \"m1\", \"host\": \"h1\", \"status\": "
           "\"running\", \"progress\": {\"memory_total\": 8, \"memory_processed\": 5, "
           "\"memory_remaining\": 3, \"disk_total\": 0, \"disk_processed\": 0, "
           "\"disk_remaining\": 0}}");
    const struct nb_live_migration_outcome o = {.uuid = "u1",
                                                .migration_uuid = "m1",
                                                .host = "h1",
                                                .phase = "live_migration",
                                                .message = "boom",
                                                .shared_storage = true};
    assert_int_equal(nb_conductor_live_migration_result(&ctx, &o), 0);
    expect("conductor", "live_migration_result",
           "{\"uuid\": \"u1\", \"migration_uuid\": \"m1\", \"host\": \"h1\", \"ok\": "
           "false, \"cancelled\": false, \"phase\": \"live_migration\", \"message\": "
           "\"boom\", \"shared_storage\": true}");
    const struct nb_live_migrate_req lr = {
        .uuid = "u1", .migration_uuid = "m1", .host = "h2", .block_migration = "auto"};
    assert_int_equal(nb_conductor_live_migrate_instance(&ctx, &lr, NO_UNDO), 0);
    expect("conductor", "live_migrate_instance",
           "{\"uuid\": \"u1\", \"migration_uuid\": \"m1\", \"host\": \"h2\", "
           "\"block_migration\": \"auto\", \"force\": false}");
    json_decref(nb_compute_check_can_live_migrate_destination(
        &ctx, "h1", json_pack("{s:s}", "uuid", "u1"), "h2", 3000, 5000));
    expect("compute.h1", "check_can_live_migrate_destination",
           "{\"instance\": {\"uuid\": \"u1\"}, \"source\": \"h2\", \"timeout_ms\": 3000}");
    json_decref(nb_compute_check_can_live_migrate_source(
        &ctx, "h1", json_pack("{s:s}", "uuid", "u1"), "p1", "qemu+tcp://h2/system", 3000, 5000));
    expect("compute.h1", "check_can_live_migrate_source",
           "{\"instance\": {\"uuid\": \"u1\"}, \"probe\": \"p1\", \"dest_uri\": "
           "\"qemu+tcp://h2/system\", \"timeout_ms\": 3000}");
    json_decref(nb_compute_pre_live_migration(&ctx, "h1", json_pack("{s:s}", "uuid", "u1"), NULL,
                                              true, false, 5000));
    expect("compute.h1", "pre_live_migration",
           "{\"instance\": {\"uuid\": \"u1\"}, \"disks\": null, \"shared_storage\": true, "
           "\"block_migration\": false}");
    const struct nb_live_migration_req r = {.migration_uuid = "m1",
                                            .dest_host = "h2",
                                            .dest_uri = "qemu+tcp://h2/system",
                                            .dest_addr = "10.0.0.2",
                                            .shared_storage = true};
    assert_int_equal(nb_compute_live_migration(&ctx, "h1", json_pack("{s:s}", "uuid", "u1"), &r),
                     0);
    expect("compute.h1", "live_migration",
           "{\"instance\": {\"uuid\": \"u1\"}, \"migration_uuid\": \"m1\", \"dest_host\": "
           "\"h2\", \"dest_uri\": \"qemu+tcp://h2/system\", \"dest_addr\": \"10.0.0.2\", "
           "\"block_migration\": false, \"shared_storage\": true, \"disks\": null}");
    assert_int_equal(nb_compute_live_migration_abort(&ctx, "h1", "m1"), 0);
    expect("compute.h1", "live_migration_abort", "{\"migration_uuid\": \"m1\"}");
    /* does the source still run it: yes with its phase, no, or no answer */
    char phase[32] = "x";
    assert_int_equal(nb_compute_live_migration_running(&ctx, "h1", "m1", 5000, phase, 32), 1);
    assert_string_equal(phase, "running");
    expect("compute.h1", "live_migration_running", "{\"migration_uuid\": \"m1\"}");
    assert_int_equal(nb_compute_live_migration_running(&ctx, "h1", "m2", 5000, phase, 32), 0);
    assert_string_equal(phase, "");
    expect("compute.h1", "live_migration_running", "{\"migration_uuid\": \"m2\"}");
    assert_int_equal(nb_compute_live_migration_running(&ctx, "h1", "m-old", 5000, phase, 32), -1);
    expect("compute.h1", "live_migration_running", "{\"migration_uuid\": \"m-old\"}");
    nb_ctx_clear_error(&ctx);
    assert_int_equal(nb_compute_live_migration_running(&ctx, "h2", "m1", 500, phase, 32), -1);
    nb_ctx_clear_error(&ctx);
    assert_int_equal(nb_compute_live_migration_force_complete(&ctx, "h1", "m1"), 0);
    expect("compute.h1", "live_migration_force_complete", "{\"migration_uuid\": \"m1\"}");
    json_decref(nb_compute_post_live_migration_at_destination(
        &ctx, "h1", json_pack("{s:s}", "uuid", "u1"), 5000));
    expect("compute.h1", "post_live_migration_at_destination",
           "{\"instance\": {\"uuid\": \"u1\"}}");
    json_decref(nb_compute_post_live_migration_at_source(
        &ctx, "h1", json_pack("{s:s}", "uuid", "u1"), false, 5000));
    expect("compute.h1", "post_live_migration_at_source",
           "{\"instance\": {\"uuid\": \"u1\"}, \"shared_storage\": false}");
    json_decref(nb_compute_rollback_live_migration_at_destination(
        &ctx, "h1", json_pack("{s:s}", "uuid", "u1"), true, 5000));
    expect("compute.h1", "rollback_live_migration_at_destination",
           "{\"instance\": {\"uuid\": \"u1\"}, \"shared_storage\": true}");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_api_to_conductor),
        cmocka_unit_test(test_acknowledged_undo),
        cmocka_unit_test(test_agent_to_conductor),
        cmocka_unit_test(test_agent_calls_conductor),
        cmocka_unit_test(test_conductor_to_compute),
        cmocka_unit_test(test_calls_to_compute_and_scheduler),
        cmocka_unit_test(test_resize_steps),
        cmocka_unit_test(test_rebuild_messages),
        cmocka_unit_test(test_live_migration_messages),
    };
    return cmocka_run_group_tests_name("rpc", tests, setup, teardown);
}
