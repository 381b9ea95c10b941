/* test_objects.c - unit tests of compute/objects: the conditional instance
 * transition (moved, lost with the state it found, error), the soft delete,
 * the status map both ways, the request spec's JSON round trip and the
 * migrations object, on a scratch database. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "common/json.h"
#include "common/util.h"
#include "compute/objects/instance.h"
#include "compute/objects/migration.h"
#include "compute/objects/request_spec.h"
#include "compute/objects/states.h"
#include "db/db.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct nb_db *db;
static char db_path[64];

#define U1 "00000000-0000-0000-0000-0000000000a1"
#define U2 "00000000-0000-0000-0000-0000000000a2"

static int setup_db(void **state)
{
    (void)state;
    snprintf(db_path, sizeof(db_path), "/tmp/nubo-test-objects-%d.sqlite", (int)getpid());
    unlink(db_path);
    db = nb_db_open(db_path);
    assert_non_null(db);
    assert_true(nb_db_sync(db) >= 0);
    return 0;
}

static int teardown_db(void **state)
{
    (void)state;
    nb_db_close(db);
    const char *suffix[] = {"", "-wal", "-shm"};
    for (size_t i = 0; i < 3; i++) {
        char p[80];
        snprintf(p, sizeof(p), "%s%s", db_path, suffix[i]);
        unlink(p);
    }
    return 0;
}

/* An instance as a create stores it (building / scheduling). */
static void add_instance(const char *uuid)
{
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    json_t *flavor = json_pack("{s:i, s:i}", "vcpus", 1, "memory_mb", 512);
    struct nb_instance_new in = {.uuid = uuid,
                                 .project_id = "p1",
                                 .user_id = "u1",
                                 .display_name = "vm",
                                 .flavor = flavor,
                                 .image_ref = "",
                                 .vcpus = 1,
                                 .memory_mb = 512};
    assert_int_equal(nb_instance_create(db, &ctx, &in), 0);
    json_decref(flavor);
}

static json_t *row_of(const char *uuid)
{
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    json_t *r = nb_db_row(db, &ctx, "SELECT * FROM instances WHERE uuid = ?", "s", uuid);
    assert_non_null(r);
    return r;
}

/* ---- transition -------------------------------------------------------------- */

static void test_transition_moves_and_loses(void **state)
{
    (void)state;
    add_instance(U1);
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    struct nb_instance_found found;
    json_t *r = row_of(U1); /* as created */
    assert_string_equal(nb_json_str(r, "vm_state"), NB_VM_BUILDING);
    assert_string_equal(nb_json_str(r, "task_state"), NB_TASK_SCHEDULING);
    assert_int_equal(nb_json_int(r, "power_state", -1), NB_POWER_NOSTATE);
    assert_int_equal(nb_json_int(r, "memory_mb", 0), 512);
    assert_non_null(nb_json_str(r, "created_at"));
    json_decref(r);
    /* the same uuid twice: 409 */
    struct nb_instance_new dup = {.uuid = U1, .project_id = "p1", .user_id = "u1", .image_ref = ""};
    assert_int_equal(nb_instance_create(db, &ctx, &dup), -1);
    assert_int_equal(ctx.err_status, 409);
    nb_ctx_init_system(&ctx, NULL);
    /* scheduling -> networking on h1: moved, host and node set */
    struct nb_instance_change to_net = {.expect_task = {NB_TASK_SCHEDULING},
                                        .task_state = NB_TASK_NETWORKING,
                                        .host = "h1",
                                        .node = "n1"};
    assert_int_equal(nb_instance_transition(db, &ctx, U1, &to_net, &found), NB_TRANSITION_MOVED);
    r = row_of(U1);
    assert_string_equal(nb_json_str(r, "task_state"), NB_TASK_NETWORKING);
    assert_string_equal(nb_json_str(r, "host"), "h1");
    assert_string_equal(nb_json_str(r, "node"), "n1");
    assert_string_equal(nb_json_str(r, "vm_state"), NB_VM_BUILDING); /* unchanged */
    assert_non_null(nb_json_str(r, "updated_at"));
    json_decref(r);
    /* the same transition again lost the race: it says what it found */
    assert_int_equal(nb_instance_transition(db, &ctx, U1, &to_net, &found), NB_TRANSITION_LOST);
    assert_true(found.exists);
    assert_false(found.deleted);
    assert_string_equal(found.task_state, NB_TASK_NETWORKING);
    assert_string_equal(found.host, "h1");
    /* expected host elsewhere: lost */
    struct nb_instance_change wrong_host = {
        .expect_task = {NB_TASK_NETWORKING}, .expect_host = "h2", .task_state = NB_TASK_SPAWNING};
    assert_int_equal(nb_instance_transition(db, &ctx, U1, &wrong_host, NULL), NB_TRANSITION_LOST);
    /* end of the build: active, task None, power RUNNING, launched */
    struct nb_instance_change active = {.expect_task = {NB_TASK_SPAWNING, NB_TASK_NETWORKING},
                                        .expect_host = "h1",
                                        .vm_state = NB_VM_ACTIVE,
                                        .task_state = NB_NONE,
                                        .set_power_state = true,
                                        .power_state = NB_POWER_RUNNING,
                                        .launched = true};
    assert_int_equal(nb_instance_transition(db, &ctx, U1, &active, NULL), NB_TRANSITION_MOVED);
    r = row_of(U1);
    assert_string_equal(nb_json_str(r, "vm_state"), NB_VM_ACTIVE);
    assert_null(nb_json_str(r, "task_state"));
    assert_int_equal(nb_json_int(r, "power_state", -1), NB_POWER_RUNNING);
    assert_non_null(nb_json_str(r, "launched_at"));
    json_decref(r);
    /* NB_NONE expects task None; the vm_state set must match too */
    struct nb_instance_change pause = {
        .expect_vm = {NB_VM_PAUSED}, .expect_task = {NB_NONE}, .task_state = NB_TASK_UNPAUSING};
    assert_int_equal(nb_instance_transition(db, &ctx, U1, &pause, &found), NB_TRANSITION_LOST);
    assert_string_equal(found.vm_state, NB_VM_ACTIVE);
    assert_string_equal(found.task_state, "");
    pause.expect_vm[0] = NB_VM_ACTIVE;
    assert_int_equal(nb_instance_transition(db, &ctx, U1, &pause, NULL), NB_TRANSITION_MOVED);
    /* host cleared with NB_NONE, request spec stored */
    json_t *spec = json_pack("{s:{s:i}}", "retry", "num_attempts", 2);
    struct nb_instance_change clear = {
        .host = NB_NONE, .node = NB_NONE, .task_state = NB_NONE, .request_spec = spec};
    assert_int_equal(nb_instance_transition(db, &ctx, U1, &clear, NULL), NB_TRANSITION_MOVED);
    json_decref(spec);
    clear.request_spec = NULL;
    r = row_of(U1);
    assert_null(nb_json_str(r, "host"));
    assert_null(nb_json_str(r, "node"));
    assert_string_equal(nb_json_str(r, "request_spec"), "{\"retry\":{\"num_attempts\":2}}");
    json_decref(r);
    /* an instance that does not exist: lost, found says so */
    assert_int_equal(nb_instance_transition(db, &ctx, U2, &clear, &found), NB_TRANSITION_LOST);
    assert_false(found.exists);
}

static void test_transition_error(void **state)
{
    (void)state;
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    add_instance(U2);
    /* the table gone under it: an error on ctx, not a lost race */
    assert_int_equal(nb_db_begin(db, &ctx), 0);
    assert_true(nb_db_exec(db, &ctx, "ALTER TABLE instances RENAME TO instances_away", "") >= 0);
    struct nb_instance_change ch = {.task_state = NB_TASK_DELETING};
    assert_int_equal(nb_instance_transition(db, &ctx, U2, &ch, NULL), NB_TRANSITION_ERROR);
    assert_int_equal(ctx.err_status, 500);
    nb_db_rollback(db);
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(nb_instance_transition(db, &ctx, U2, &ch, NULL), NB_TRANSITION_MOVED);
}

/* Whether rows (of nb_instance_list_in_state) hold uuid. */
static bool has_uuid(const json_t *rows, const char *uuid)
{
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r)
        if (!strcmp(nb_json_str(r, "uuid"), uuid))
            return true;
    return false;
}

static void test_list_in_state(void **state)
{
    (void)state;
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    long long before = nb_db_int(db, &ctx, 0, "SELECT COALESCE(MAX(id), 0) FROM instances", "");
    const char *l1 = "00000000-0000-0000-0000-0000000000b1";
    const char *l2 = "00000000-0000-0000-0000-0000000000b2";
    const char *l3 = "00000000-0000-0000-0000-0000000000b3";
    add_instance(l1);
    add_instance(l2);
    add_instance(l3);
    assert_int_equal(
        nb_db_exec(db, &ctx, "UPDATE instances SET task_state = NULL WHERE uuid = ?", "s", l2), 1);
    assert_int_equal(nb_db_exec(db, &ctx, "UPDATE instances SET task_state = ? WHERE uuid = ?",
                                "ss", NB_TASK_SPAWNING, l3),
                     1);
    struct nb_instance_filter f = {
        .vm = {NB_VM_BUILDING}, .task = {NB_NONE, NB_TASK_SCHEDULING}, .max_id = 1000000};
    json_t *rows = nb_instance_list_in_state(db, &ctx, &f);
    assert_true(has_uuid(rows, l1));
    assert_true(has_uuid(rows, l2));
    assert_false(has_uuid(rows, l3));
    json_decref(rows);
    /* only rows that existed at max_id */
    f.max_id = before;
    rows = nb_instance_list_in_state(db, &ctx, &f);
    assert_false(has_uuid(rows, l1));
    json_decref(rows);
    /* any state: all three */
    rows = nb_instance_list_in_state(db, &ctx, &(struct nb_instance_filter){.max_id = 1000000});
    assert_true(has_uuid(rows, l1) && has_uuid(rows, l2) && has_uuid(rows, l3));
    json_decref(rows);
}

/* ---- destroy ------------------------------------------------------------------ */

static void test_destroy(void **state)
{
    (void)state;
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    const char *u = "00000000-0000-0000-0000-0000000000d1";
    add_instance(u);
    assert_int_equal(nb_db_exec(db, &ctx,
                                "INSERT INTO instance_metadata (instance_uuid, key, value) VALUES "
                                "(?, 'k', 'v')",
                                "s", u),
                     1);
    assert_int_equal(nb_db_exec(db, &ctx,
                                "UPDATE instances SET host = 'h1', power_state = 1 WHERE uuid = ?",
                                "s", u),
                     1);
    /* only while unscheduled: it has a host, so nothing is written */
    assert_int_equal(nb_instance_destroy(db, &ctx, u, true, false), 0);
    assert_int_equal(nb_db_int(db, &ctx, -1,
                               "SELECT COUNT(*) FROM instance_metadata WHERE instance_uuid = ? "
                               "AND deleted = 0",
                               "s", u),
                     1);
    /* the API's local delete (host down): the power state stays */
    assert_int_equal(nb_db_begin(db, &ctx), 0);
    assert_int_equal(nb_instance_destroy(db, &ctx, u, false, false), 1);
    assert_int_equal(nb_db_commit(db, &ctx), 0);
    json_t *r = row_of(u);
    assert_int_equal(nb_json_int(r, "deleted", 0), nb_json_int(r, "id", -1));
    assert_string_equal(nb_json_str(r, "vm_state"), NB_VM_DELETED);
    assert_null(nb_json_str(r, "task_state"));
    assert_int_equal(nb_json_int(r, "power_state", -1), NB_POWER_RUNNING);
    assert_non_null(nb_json_str(r, "deleted_at"));
    assert_non_null(nb_json_str(r, "terminated_at"));
    json_decref(r);
    assert_int_equal(nb_db_int(db, &ctx, -1,
                               "SELECT COUNT(*) FROM instance_metadata WHERE instance_uuid = ? "
                               "AND deleted = 0",
                               "s", u),
                     0);
    /* again: nothing left to delete */
    assert_int_equal(nb_instance_destroy(db, &ctx, u, false, true), 0);
    /* the conductor's delete after the guest went: power state NOSTATE */
    const char *v = "00000000-0000-0000-0000-0000000000d2";
    add_instance(v);
    assert_int_equal(
        nb_db_exec(db, &ctx, "UPDATE instances SET power_state = 1 WHERE uuid = ?", "s", v), 1);
    assert_int_equal(nb_instance_destroy(db, &ctx, v, false, true), 1);
    r = row_of(v);
    assert_int_equal(nb_json_int(r, "power_state", -1), NB_POWER_NOSTATE);
    json_decref(r);
    /* a transition on a deleted instance loses, and says it is deleted */
    struct nb_instance_found found;
    struct nb_instance_change ch = {.task_state = NB_TASK_DELETING};
    assert_int_equal(nb_instance_transition(db, &ctx, v, &ch, &found), NB_TRANSITION_LOST);
    assert_true(found.exists);
    assert_true(found.deleted);
}

/* ---- status map ------------------------------------------------------------------ */

static void test_status_map(void **state)
{
    (void)state;
    assert_string_equal(nb_server_status(NB_VM_ACTIVE, NULL), "ACTIVE");
    assert_string_equal(nb_server_status(NB_VM_ACTIVE, NB_TASK_REBOOT_STARTED_HARD), "HARD_REBOOT");
    assert_string_equal(nb_server_status(NB_VM_ACTIVE, NB_TASK_POWERING_OFF), "ACTIVE");
    assert_string_equal(nb_server_status(NB_VM_BUILDING, NB_TASK_SPAWNING), "BUILD");
    assert_string_equal(nb_server_status(NB_VM_STOPPED, NB_TASK_REBUILD_BDM), "REBUILD");
    assert_string_equal(nb_server_status(NB_VM_PAUSED, NB_TASK_MIGRATING), "MIGRATING");
    assert_string_equal(nb_server_status(NB_VM_RESIZED, NB_TASK_RESIZE_REVERTING), "REVERT_RESIZE");
    assert_string_equal(nb_server_status(NB_VM_ERROR, NULL), "ERROR");
    assert_string_equal(nb_server_status("bogus", NULL), "UNKNOWN");
    assert_string_equal(nb_server_status(NULL, NULL), "UNKNOWN");

    /* the other way: status -> (vm_states, task_states) */
    json_t *vms = json_array(), *tasks = json_array();
    json_t *st = json_pack("[s]", "reboot");
    nb_server_states_for_statuses(st, vms, tasks);
    assert_int_equal(json_array_size(vms), 1);
    assert_string_equal(json_string_value(json_array_get(vms, 0)), NB_VM_ACTIVE);
    assert_int_equal(json_array_size(tasks), 3);
    json_decref(st);
    json_array_clear(vms);
    json_array_clear(tasks);
    st = json_pack("[s, s]", "SHUTOFF", "ERROR");
    nb_server_states_for_statuses(st, vms, tasks);
    assert_int_equal(json_array_size(vms), 2);
    assert_int_equal(json_array_size(tasks), 1);
    assert_string_equal(json_string_value(json_array_get(tasks, 0)), "default");
    json_decref(st);
    json_array_clear(vms);
    json_array_clear(tasks);
    st = json_pack("[s]", "NOPE");
    nb_server_states_for_statuses(st, vms, tasks);
    assert_int_equal(json_array_size(vms), 0);
    json_decref(st);
    /* both ways agree: every pair a status maps from maps back to it */
    const char *const statuses[] = {"ACTIVE", "BUILD",       "SHUTOFF", "PAUSED",  "SUSPENDED",
                                    "REBOOT", "HARD_REBOOT", "ERROR",   "DELETED", "RESIZE"};
    for (size_t k = 0; k < sizeof(statuses) / sizeof(statuses[0]); k++) {
        json_array_clear(vms);
        json_array_clear(tasks);
        st = json_pack("[s]", statuses[k]);
        nb_server_states_for_statuses(st, vms, tasks);
        json_decref(st);
        assert_true(json_array_size(vms) > 0);
        const char *task = json_string_value(json_array_get(tasks, 0));
        const char *vm = json_string_value(json_array_get(vms, 0));
        assert_string_equal(nb_server_status(vm, strcmp(task, "default") ? task : NULL),
                            statuses[k]);
    }
    json_decref(vms);
    json_decref(tasks);
}

/* ---- request spec ------------------------------------------------------------------ */

static void test_request_spec_round_trip(void **state)
{
    (void)state;
    /* as the API stores it */
    json_t *api = json_loads(
        "{\"instance_uuid\": \"" U1 "\", \"project_id\": \"p1\", \"user_id\": \"u1\", "
        "\"flavor\": {\"vcpus\": 1, \"memory_mb\": 512, \"extra_specs\": {}}, "
        "\"image\": {\"id\": \"i1\", \"disk_format\": \"qcow2\", \"properties\": "
        "{\"hw_machine_type\": \"q35\"}}, \"availability_zone\": \"az1\", \"force_hosts\": "
        "[\"h2\"], \"force_nodes\": [], \"requested_destination\": null, \"scheduler_hints\": "
        "{\"group\": \"g1\"}, \"group\": {\"uuid\": \"g1\", \"policy\": \"anti-affinity\", "
        "\"rules\": {}, \"members\": [\"" U1 "\"]}, \"num_instances\": 2, \"launch_index\": 1, "
        "\"is_bfv\": false, \"security_groups\": [\"default\"], \"requested_networks\": "
        "\"auto\", \"injected_files\": [], \"ignore_hosts\": [], \"retry\": {\"num_attempts\": "
        "0, \"hosts\": []}}",
        0, NULL);
    assert_non_null(api);
    struct nb_request_spec rs;
    nb_request_spec_from_json(&rs, api);
    assert_string_equal(rs.instance_uuid, U1);
    assert_string_equal(rs.availability_zone, "az1");
    assert_string_equal(rs.force_host, "h2");
    assert_null(rs.force_node);
    assert_null(rs.requested_host);
    assert_string_equal(nb_request_spec_group_uuid(&rs), "g1");
    assert_int_equal(rs.num_instances, 2);
    assert_false(rs.is_bfv);
    assert_int_equal(rs.num_attempts, 0);
    assert_int_equal(json_array_size(rs.retry_failures), 0);
    /* what a failed attempt adds */
    rs.num_attempts = 1;
    json_array_append_new(rs.retry_hosts, json_string("h2"));
    json_array_append_new(rs.retry_failures, json_string("h2: boom"));
    json_array_append_new(rs.unreachable_hosts, json_string("h3"));
    json_t *out = nb_request_spec_to_json(&rs);
    nb_request_spec_free(&rs);
    nb_request_spec_free(&rs); /* idempotent */
    /* every member the API wrote is kept as it was */
    const char *k;
    json_t *v;
    json_object_foreach (api, k, v) {
        if (strcmp(k, "retry"))
            assert_true(json_equal(v, json_object_get(out, k)));
    }
    /* and read back, the same spec */
    struct nb_request_spec back;
    nb_request_spec_from_json(&back, out);
    assert_int_equal(back.num_attempts, 1);
    assert_string_equal(json_string_value(json_array_get(back.retry_failures, 0)), "h2: boom");
    assert_string_equal(json_string_value(json_array_get(back.unreachable_hosts, 0)), "h3");
    json_t *again = nb_request_spec_to_json(&back);
    assert_true(json_equal(out, again));
    nb_request_spec_free(&back);
    json_decref(again);
    json_decref(out);
    json_decref(api);

    /* nothing at all (a row without a spec): defaults, and boot from volume */
    nb_request_spec_from_json(&rs, NULL);
    assert_null(rs.image);
    assert_null(rs.group);
    assert_null(rs.requested_networks);
    assert_int_equal(json_object_size(rs.flavor), 0);
    out = nb_request_spec_to_json(&rs);
    assert_true(json_is_object(json_object_get(out, "image")));
    assert_true(json_is_null(json_object_get(out, "group")));
    nb_request_spec_free(&rs);
    json_decref(out);
}

/* ---- migrations ---------------------------------------------------------------------- */

static void test_migrations(void **state)
{
    (void)state;
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    const char *inst = "00000000-0000-0000-0000-0000000000e1";
    add_instance(inst);
    char m1[NB_UUID_LEN], m2[NB_UUID_LEN];
    struct nb_migration_new m = {.instance_uuid = inst,
                                 .migration_type = NB_MIGRATION_LIVE,
                                 .status = NB_MIGRATION_ACCEPTED,
                                 .source_compute = "h1",
                                 .source_node = "h1",
                                 .dest_compute = "h2",
                                 .user_id = "u1",
                                 .project_id = "p1"};
    assert_int_equal(nb_migration_create(db, &ctx, &m, m1), 0);
    m.migration_type = NB_MIGRATION_COLD;
    m.status = NB_MIGRATION_PRE_MIGRATING;
    m.old_instance_type_id = 3;
    assert_int_equal(nb_migration_create(db, &ctx, &m, m2), 0);
    json_t *r = nb_migration_get(db, &ctx, m1);
    assert_non_null(r);
    assert_string_equal(nb_json_str(r, "instance_uuid"), inst);
    assert_string_equal(nb_json_str(r, "migration_type"), "live-migration");
    assert_string_equal(nb_json_str(r, "status"), "accepted");
    assert_string_equal(nb_json_str(r, "dest_compute"), "h2");
    assert_null(nb_json_str(r, "dest_node"));
    assert_true(json_is_null(json_object_get(r, "old_instance_type_id")));
    assert_int_equal(nb_json_int(r, "deleted", -1), 0);
    json_decref(r);
    /* newest first */
    json_t *list = nb_migration_list_by_instance(db, &ctx, inst);
    assert_int_equal(json_array_size(list), 2);
    assert_string_equal(nb_json_str(json_array_get(list, 0), "uuid"), m2);
    assert_int_equal(nb_json_int(json_array_get(list, 0), "old_instance_type_id", 0), 3);
    json_decref(list);
    list = nb_migration_list_by_instance(db, &ctx, "nope");
    assert_int_equal(json_array_size(list), 0);
    json_decref(list);
    /* status moves only from the expected one */
    assert_int_equal(
        nb_migration_set_status(db, &ctx, m1, NB_MIGRATION_RUNNING, NB_MIGRATION_QUEUED), 0);
    assert_int_equal(
        nb_migration_set_status(db, &ctx, m1, NB_MIGRATION_QUEUED, NB_MIGRATION_ACCEPTED), 1);
    assert_int_equal(nb_migration_set_status(db, &ctx, m1, NB_MIGRATION_COMPLETED, NULL), 1);
    r = nb_migration_get(db, &ctx, m1);
    assert_string_equal(nb_json_str(r, "status"), "completed");
    json_decref(r);
    /* unknown: 404; bad input: 400 */
    assert_null(nb_migration_get(db, &ctx, "00000000-0000-0000-0000-00000000dead"));
    assert_int_equal(ctx.err_status, 404);
    assert_non_null(strstr(ctx.err_msg, "could not be found"));
    nb_ctx_init_system(&ctx, NULL);
    m.migration_type = "teleport";
    assert_int_equal(nb_migration_create(db, &ctx, &m, m2), -1);
    assert_int_equal(ctx.err_status, 400);
    nb_ctx_init_system(&ctx, NULL);
    m.migration_type = NB_MIGRATION_RESIZE;
    m.instance_uuid = NULL;
    assert_int_equal(nb_migration_create(db, &ctx, &m, m2), -1);
    assert_int_equal(ctx.err_status, 400);
}

/* The ids (column id) of a list, in order, into out as "1,2,3". */
static void ids_of(json_t *list, char *out, size_t n)
{
    out[0] = '\0';
    size_t i;
    json_t *r;
    json_array_foreach (list, i, r)
        snprintf(out + strlen(out), n - strlen(out), "%s%lld", i ? "," : "",
                 nb_json_int(r, "id", 0));
    json_decref(list);
}

static void test_migration_list_filters_and_pages(void **state)
{
    (void)state;
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    const char *inst = "00000000-0000-0000-0000-0000000000f1";
    add_instance(inst);
    static const struct {
        const char *type, *status, *src, *dst, *created;
        int hidden;
    } rows[] = {
        {NB_MIGRATION_COLD, NB_MIGRATION_FINISHED, "h1", "h2", "2026-01-01T10:00:00.000000", 0},
        {NB_MIGRATION_LIVE, NB_MIGRATION_RUNNING, "h3", "h2", "2026-01-01T11:00:00.000000", 0},
        {NB_MIGRATION_LIVE, NB_MIGRATION_COMPLETED, "h1", "h3", "2026-01-01T12:00:00.000000", 0},
        {NB_MIGRATION_RESIZE, NB_MIGRATION_CONFIRMED, "h1", "h1", "2026-01-01T13:00:00.000000", 1},
    };
    char uuids[4][NB_UUID_LEN];
    long long id0 = 0;
    for (int i = 0; i < 4; i++) {
        struct nb_migration_new m = {.instance_uuid = inst,
                                     .migration_type = rows[i].type,
                                     .status = rows[i].status,
                                     .source_compute = rows[i].src,
                                     .dest_compute = rows[i].dst,
                                     .user_id = i == 2 ? "u2" : "u1",
                                     .project_id = "p1"};
        assert_int_equal(nb_migration_create(db, &ctx, &m, uuids[i]), 0);
        assert_true(nb_db_exec(db, &ctx,
                               "UPDATE migrations SET created_at = ?, updated_at = ?, hidden = ? "
                               "WHERE uuid = ?",
                               "ssis", rows[i].created, rows[i].created, (long long)rows[i].hidden,
                               uuids[i]) >= 0);
        json_t *r = nb_migration_get(db, &ctx, uuids[i]);
        if (!i)
            id0 = nb_json_int(r, "id", 0);
        json_decref(r);
    }
    char got[64], want[64];
    /* not paged: oldest first, hidden left out */
    struct nb_migration_filter f = {.instance_uuid = inst, .hidden = -1, .limit = -1};
    ids_of(nb_migration_list(db, &ctx, &f), got, sizeof(got));
    snprintf(want, sizeof(want), "%lld,%lld,%lld", id0, id0 + 1, id0 + 2);
    assert_string_equal(got, want);
    /* host is the source or the destination; source_compute only without host */
    f.host = "h3";
    f.source_compute = "h1";
    ids_of(nb_migration_list(db, &ctx, &f), got, sizeof(got));
    snprintf(want, sizeof(want), "%lld,%lld", id0 + 1, id0 + 2);
    assert_string_equal(got, want);
    f.host = NULL;
    ids_of(nb_migration_list(db, &ctx, &f), got, sizeof(got));
    snprintf(want, sizeof(want), "%lld,%lld", id0, id0 + 2);
    assert_string_equal(got, want);
    f.source_compute = NULL;
    f.migration_type = NB_MIGRATION_LIVE;
    f.user_id = "u2";
    ids_of(nb_migration_list(db, &ctx, &f), got, sizeof(got));
    snprintf(want, sizeof(want), "%lld", id0 + 2);
    assert_string_equal(got, want);
    f.migration_type = f.user_id = NULL;
    f.hidden = 1; /* hidden rows stay out even when asked for */
    ids_of(nb_migration_list(db, &ctx, &f), got, sizeof(got));
    assert_string_equal(got, "");
    f.hidden = -1;
    /* paged: newest first, after the marker, at most limit, within the times */
    f.paged = true;
    f.limit = 1;
    f.marker = uuids[2];
    ids_of(nb_migration_list(db, &ctx, &f), got, sizeof(got));
    snprintf(want, sizeof(want), "%lld", id0 + 1);
    assert_string_equal(got, want);
    f.marker = NULL;
    f.limit = -1;
    f.changes_since = "2026-01-01T11:00:00.000000";
    f.changes_before = "2026-01-01T11:59:59.999999";
    ids_of(nb_migration_list(db, &ctx, &f), got, sizeof(got));
    snprintf(want, sizeof(want), "%lld", id0 + 1);
    assert_string_equal(got, want);
    /* an unknown marker is the 400 the API answers */
    f.marker = "00000000-0000-0000-0000-00000000beef";
    assert_null(nb_migration_list(db, &ctx, &f));
    assert_int_equal(ctx.err_status, 400);
    assert_string_equal(ctx.err_msg,
                        "Marker 00000000-0000-0000-0000-00000000beef could not be found.");
    nb_ctx_init_system(&ctx, NULL);
    /* in progress: queued, preparing, running, post-migrating */
    json_t *live = nb_migration_list_in_progress(db, &ctx, inst, NB_MIGRATION_LIVE);
    assert_int_equal(json_array_size(live), 1);
    assert_string_equal(nb_json_str(json_array_get(live, 0), "uuid"), uuids[1]);
    json_decref(live);
    assert_true(nb_migration_in_progress(NB_MIGRATION_POST_MIGRATING));
    assert_false(nb_migration_in_progress(NB_MIGRATION_COMPLETED));
    assert_false(nb_migration_in_progress(NULL));
    /* by id and instance: Nova's MigrationNotFoundForInstance */
    json_t *r = nb_migration_get_by_id_and_instance(db, &ctx, id0, inst);
    assert_non_null(r);
    json_decref(r);
    assert_null(nb_migration_get_by_id_and_instance(db, &ctx, id0, U1));
    assert_int_equal(ctx.err_status, 404);
    char msg[160];
    snprintf(msg, sizeof(msg), "Migration %lld not found for instance %s", id0, U1);
    assert_string_equal(ctx.err_msg, msg);
}

int main(void)
{
    const struct CMUnitTest pure[] = {
        cmocka_unit_test(test_status_map),
        cmocka_unit_test(test_request_spec_round_trip),
    };
    const struct CMUnitTest with_db[] = {
        cmocka_unit_test(test_transition_moves_and_loses),
        cmocka_unit_test(test_transition_error),
        cmocka_unit_test(test_list_in_state),
        cmocka_unit_test(test_destroy),
        cmocka_unit_test(test_migrations),
        cmocka_unit_test(test_migration_list_filters_and_pages),
    };
    int failed = cmocka_run_group_tests_name("objects", pure, NULL, NULL);
    failed += cmocka_run_group_tests_name("objects-db", with_db, setup_db, teardown_db);
    return failed;
}
