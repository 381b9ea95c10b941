/* test_live_migration.c - the live-migration prechecks as a pure function
 * (conductor/migrate_checks.c): from hand-built facts about a source and a
 * destination to each check's verdict and Nova's message, including what
 * block_migration "auto" becomes and the checks that cannot run after an
 * earlier refusal; and what recovery does with a live migration a restart
 * interrupted (conductor/live_migrate_run.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/json.h"
#include "compute/conductor/live_migrate.h"
#include "compute/conductor/migrate_checks.h"

#include <stdlib.h>
#include <string.h>

/* Facts of a migration of instance "i-1" from src-1 to dst-1 that passes
 * every check: shared storage, one local 1 GiB disk, same CPU and
 * hypervisor, transport up, MTU equal. */
static json_t *good_facts(void)
{
    return json_pack(
        "{s:{s:s, s:s, s:s, s:{s:{}}}, s:s, s:s, s:s, s:b, s:{s:i, s:n, s:i}, s:i, s:i,"
        " s:{s:s, s:i}, s:{s:s, s:i, s:i}, s:{s:b, s:s}, s:{s:b, s:{s:s, s:s, s:i, s:b, s:[s]},"
        " s:{s:s, s:i, s:{s:s, s:s}}, s:{s:b}, s:b, s:{s:b}, s:{s:b, s:i},"
        " s:[{s:s, s:I, s:b, s:b}]}, s:s}",
        "instance", "uuid", "i-1", "vm_state", "active", "config_drive", "", "flavor",
        "extra_specs", "source", "src-1", "dest", "dst-1", "block_migration", "auto", "dest_known",
        1, "service", "disabled", 0, "disabled_reason", "forced_down", 0, "service_age_s", 3,
        "service_down_time", 60, "source_node", "hypervisor_type", "QEMU", "hypervisor_version",
        8002000, "dest_node", "hypervisor_type", "QEMU", "hypervisor_version", 8002000,
        "free_disk_gb", 100, "claim", "ok", 1, "evidence", "claimed", "agent", "ok", 1, "dest",
        "uri", "qemu+tcp://dst-1/system", "addr", "10.0.0.2", "mtu", 1500, "tls", 0, "cpu_models",
        "Haswell", "source", "addr", "10.0.0.1", "mtu", 1500, "guest_cpu", "mode", "host-model",
        "model", "Haswell", "cpu", "ok", 1, "shared_storage", 1, "probe", "ok", 1, "transport",
        "ok", 1, "ms", 2, "disks", "target", "vda", "virtual_size", (json_int_t)1 << 30, "local", 1,
        "readonly", 0, "config_drive_format", "iso9660");
}

static json_t *agent(json_t *f)
{
    return json_object_get(f, "agent");
}

static const json_t *check(const json_t *v, const char *name)
{
    size_t i;
    json_t *c;
    json_array_foreach (json_object_get(v, "checks"), i, c)
        if (!strcmp(nb_json_str(c, "check"), name))
            return c;
    fail_msg("no check %s", name);
    return NULL;
}

/* Evaluates f (stolen) and asserts the verdict's first refusal is msg
 * (NULL: it passes). Returns the verdict. */
static json_t *judge(json_t *f, const char *msg)
{
    json_t *v = cond_lm_evaluate(f);
    json_decref(f);
    if (!msg) {
        assert_true(json_is_true(json_object_get(v, "ok")));
        assert_null(nb_json_str(v, "message"));
    } else {
        assert_false(json_is_true(json_object_get(v, "ok")));
        assert_string_equal(nb_json_str(v, "message"), msg);
    }
    return v;
}

static void test_all_pass(void **state)
{
    (void)state;
    json_t *v = judge(good_facts(), NULL);
    assert_int_equal(json_array_size(json_object_get(v, "checks")), NB_LM_CHECKS);
    assert_false(json_is_true(json_object_get(v, "block_migration"))); /* auto on shared */
    assert_true(json_is_true(json_object_get(v, "shared_storage")));
    char *text = cond_lm_verdict_text(v);
    assert_string_equal(text, "");
    free(text);
    json_decref(v);
}

static void test_service(void **state)
{
    (void)state;
    json_t *f = good_facts();
    json_object_set_new(json_object_get(f, "service"), "disabled", json_integer(1));
    json_object_set_new(json_object_get(f, "service"), "disabled_reason", json_string("repair"));
    json_decref(judge(f, "Compute service of dst-1 is unavailable at this time. (the service is "
                         "disabled: repair)"));
    f = good_facts();
    json_object_set_new(json_object_get(f, "service"), "forced_down", json_integer(1));
    json_decref(judge(f, "Compute service of dst-1 is unavailable at this time. (the service is "
                         "forced down)"));
    f = good_facts();
    json_object_set_new(f, "service_age_s", json_integer(61));
    json_decref(judge(f, "Compute service of dst-1 is unavailable at this time. (not reporting: "
                         "no heartbeat for more than service_down_time 60 s)"));
    f = good_facts();
    json_object_set_new(f, "service", json_null());
    json_decref(judge(f, "Compute service of dst-1 is unavailable at this time. (no "
                         "nova-compute service is registered for host dst-1)"));
}

static void test_destination(void **state)
{
    (void)state;
    json_t *f = good_facts();
    json_object_set_new(f, "dest", json_string("src-1"));
    json_decref(judge(f, "Unable to migrate instance (i-1) to current host (src-1)."));
    f = good_facts();
    json_object_set_new(f, "dest_known", json_false());
    json_decref(judge(f, "Compute host dst-1 could not be found."));
}

static void test_resources_cpu_hypervisor(void **state)
{
    (void)state;
    json_t *f = good_facts();
    json_object_set_new(f, "claim",
                        json_pack("{s:b, s:s, s:s}", "ok", 0, "message", "no room: MEMORY_MB",
                                  "evidence", "MEMORY_MB needed 512, free 10"));
    json_decref(judge(f, "no room: MEMORY_MB"));
    f = good_facts();
    json_object_set_new(agent(f), "cpu",
                        json_pack("{s:b, s:s}", "ok", 0, "message", "missing features: avx512f"));
    json_t *v = judge(f, "Unacceptable CPU info: CPU doesn't have compatibility: missing "
                         "features: avx512f");
    assert_non_null(strstr(nb_json_str(check(v, "cpu"), "evidence"), "model Haswell"));
    json_decref(v);
    f = good_facts();
    json_object_set_new(json_object_get(f, "dest_node"), "hypervisor_version",
                        json_integer(6002000));
    json_decref(judge(f, "The instance requires a newer hypervisor version than has been "
                         "provided. (DestinationHypervisorTooOld: source src-1 has QEMU 8002000, "
                         "destination dst-1 has QEMU 6002000)"));
    f = good_facts();
    json_object_set_new(json_object_get(f, "dest_node"), "hypervisor_type", json_string("fake"));
    json_decref(judge(f, "The supplied hypervisor type of is invalid. (source src-1: QEMU, "
                         "destination dst-1: fake)"));
}

static void test_transport(void **state)
{
    (void)state;
    json_t *f = good_facts();
    json_object_set_new(agent(f), "transport",
                        json_pack("{s:b, s:s}", "ok", 0, "message", "port 16509 refused"));
    json_decref(judge(f, "Migration pre-check error: port 16509 refused"));
    f = good_facts();
    json_object_set_new(json_object_get(agent(f), "dest"), "tls", json_true());
    json_object_set_new(json_object_get(agent(f), "source"), "tls_missing",
                        json_pack("[s]", "/etc/pki/qemu/server-cert.pem"));
    json_decref(judge(f, "Migration pre-check error: live_migration_with_native_tls needs "
                         "/etc/pki/qemu/server-cert.pem on host src-1"));
}

static void test_storage(void **state)
{
    (void)state;
    json_t *f = good_facts();
    json_object_set_new(f, "block_migration", json_string("true"));
    json_decref(judge(f, "src-1 is not on local storage: Block migration can not be used with "
                         "shared storage."));
    f = good_facts();
    json_object_set_new(f, "block_migration", json_string("false"));
    json_object_set_new(agent(f), "shared_storage", json_false());
    json_decref(judge(f, "src-1 is not on shared storage: Shared storage live-migration requires "
                         "either shared storage or boot-from-volume with no local disks."));
    /* auto, not shared: a block migration, with the free-disk check */
    f = good_facts();
    json_object_set_new(agent(f), "shared_storage", json_false());
    json_t *v = judge(f, NULL);
    assert_true(json_is_true(json_object_get(v, "block_migration")));
    json_decref(v);
    f = good_facts();
    json_object_set_new(agent(f), "shared_storage", json_false());
    json_object_set_new(json_object_get(f, "dest_node"), "free_disk_gb", json_integer(0));
    json_decref(judge(f, "Migration pre-check error: Unable to migrate i-1: Disk of instance is "
                         "too large(available on destination host:0 < need:1073741824)"));
    /* volume-backed without local disks counts as shared */
    f = good_facts();
    json_object_set_new(agent(f), "shared_storage", json_false());
    json_object_set_new(agent(f), "disks", json_pack("[{s:s, s:b}]", "target", "vda", "local", 0));
    v = judge(f, NULL);
    assert_false(json_is_true(json_object_get(v, "block_migration")));
    assert_true(json_is_true(json_object_get(v, "shared_storage")));
    json_decref(v);
}

static void test_network_warning_and_instance(void **state)
{
    (void)state;
    json_t *f = good_facts();
    json_object_set_new(json_object_get(agent(f), "dest"), "mtu", json_integer(9000));
    json_t *v = judge(f, NULL);
    assert_int_equal(nb_json_int(v, "warnings", 0), 1);
    assert_true(json_is_true(json_object_get(check(v, "network"), "warning")));
    char *text = cond_lm_verdict_text(v);
    assert_non_null(strstr(text, "network WARNING: The MTU of the migration network differs "
                                 "between the hosts (src-1: 1500, dst-1: 9000)"));
    free(text);
    json_decref(v);
    f = good_facts();
    json_object_set_new(json_object_get(f, "instance"), "vm_state", json_string("paused"));
    json_decref(judge(f, NULL));
    f = good_facts();
    json_object_set_new(json_object_get(f, "instance"), "vm_state", json_string("stopped"));
    json_decref(judge(f, "Instance i-1 in vm_state stopped cannot be live-migrated (it must be "
                         "active or paused)."));
    f = good_facts();
    json_object_set_new(json_object_get(json_object_get(f, "instance"), "flavor"), "extra_specs",
                        json_pack("{s:s}", "hw:tpm_version", "2.0"));
    json_decref(judge(f, "Operation 'live-migration' not supported for vTPM-enabled instance "
                         "(i-1)."));
}

static void test_destination_not_asked(void **state)
{
    (void)state;
    json_t *f = good_facts();
    json_object_set_new(f, "agent",
                        json_pack("{s:b, s:s}", "ok", 0, "message",
                                  "The libvirt virt driver does not support live migration."));
    json_t *v = judge(f, "The libvirt virt driver does not support live migration.");
    assert_true(json_is_true(json_object_get(check(v, "cpu"), "skipped")));
    assert_true(json_is_true(json_object_get(check(v, "storage"), "skipped")));
    json_decref(v);
}

/* With a port the network agents wire (vif_type bridge) on a vxlan network,
 * the destination needs a live Linux bridge agent and an underlay that
 * carries the network's MTU plus the VXLAN header; a port of no agent
 * ("ovs", the fake driver's) needs nothing of it. */
static void test_ports(void **state)
{
    (void)state;
    json_t *f = good_facts();
    json_object_set_new(f, "networking",
                        nb_json_pack_text("{\"ports\": [{\"id\": \"p-1\", \"network_id\": "
                                          "\"n-1\", \"network_type\": \"vxlan\", \"mtu\": "
                                          "1450, \"vif_type\": \"bridge\"}], \"agent\": "
                                          "{\"host\": \"dst-1\", \"admin_state_up\": true, "
                                          "\"age_s\": 4, \"down_time\": 75, \"alive\": true, "
                                          "\"local_ip\": \"10.0.0.2\"}}"));
    json_object_set_new(json_object_get(agent(f), "dest"), "tunnel",
                        json_pack("{s:s, s:i}", "addr", "10.0.0.2", "mtu", 1500));
    json_t *good = json_deep_copy(f);
    json_t *v = judge(f, NULL);
    const char *ev = nb_json_str(check(v, "ports"), "evidence");
    assert_non_null(strstr(ev, "port p-1: bridge on network n-1 (vxlan, MTU 1450)"));
    assert_non_null(strstr(ev, "Linux bridge agent on dst-1: alive"));
    assert_non_null(strstr(ev, "underlay 10.0.0.2 MTU 1500 (VXLAN needs 1500)"));
    json_decref(v);
    /* an underlay of 1499 cannot carry 1450 + 50 */
    f = json_deep_copy(good);
    json_object_set_new(json_object_get(json_object_get(agent(f), "dest"), "tunnel"), "mtu",
                        json_integer(1499));
    json_decref(judge(f, "Migration pre-check error: the VXLAN underlay of host dst-1 (10.0.0.2, "
                         "MTU 1499) cannot carry network n-1 (MTU 1450 needs 1500 with the VXLAN "
                         "header)."));
    /* the agent stopped reporting */
    f = json_deep_copy(good);
    json_t *ag = json_object_get(json_object_get(f, "networking"), "agent");
    json_object_set_new(ag, "alive", json_false());
    json_object_set_new(ag, "age_s", json_integer(300));
    v = judge(f, "Migration pre-check error: Binding failed for port p-1 on host dst-1: its Linux "
                 "bridge agent is not alive (no report within agent_down_time).");
    assert_non_null(strstr(nb_json_str(check(v, "ports"), "evidence"),
                           "dead, admin_state_up true, last report 300 s ago (down after 75 s)"));
    json_decref(v);
    /* no agent at all */
    f = json_deep_copy(good);
    json_object_set_new(json_object_get(f, "networking"), "agent", json_null());
    json_decref(judge(f, "Migration pre-check error: Binding failed for port p-1 on host dst-1: no "
                         "Linux bridge agent reports from the host, so nothing would wire the "
                         "guest's network there."));
    /* the same port of no agent: nothing needed */
    f = json_deep_copy(good);
    json_object_set_new(
        json_array_get(json_object_get(json_object_get(f, "networking"), "ports"), 0), "vif_type",
        json_string("ovs"));
    json_object_set_new(json_object_get(f, "networking"), "agent", json_null());
    json_decref(judge(f, NULL));
    /* the network service could not say: a warning */
    f = json_deep_copy(good);
    json_object_set_new(f, "networking", json_pack("{s:s}", "error", "no such table"));
    v = judge(f, NULL);
    assert_true(json_is_true(json_object_get(check(v, "ports"), "warning")));
    json_decref(v);
    json_decref(good);
}

/* The source still running a migration (only the conductor restarted)
 * leaves it to its own result, in every status before the result was
 * taken; otherwise prechecks are refused and later ones go by the
 * destination; a post-migrating one (the result taken, the finish
 * interrupted) always goes by the destination; an ended one is left. */
static void test_recovery_step(void **state)
{
    (void)state;
    static const char *const live[] = {"queued", "preparing", "running", "running (post-copy)"};
    for (size_t i = 0; i < sizeof(live) / sizeof(*live); i++) {
        assert_int_equal(cond_lm_recovery_step(live[i], 1), COND_LM_LEAVE);
        assert_int_equal(cond_lm_recovery_step(live[i], 0), COND_LM_BY_DEST);
        assert_int_equal(cond_lm_recovery_step(live[i], -1), COND_LM_BY_DEST);
    }
    /* accepted: the cast may have reached the source before its first report */
    assert_int_equal(cond_lm_recovery_step("accepted", 1), COND_LM_LEAVE);
    assert_int_equal(cond_lm_recovery_step("accepted", 0), COND_LM_REFUSE);
    assert_int_equal(cond_lm_recovery_step("accepted", -1), COND_LM_REFUSE);
    for (int runs = -1; runs <= 1; runs++) {
        assert_int_equal(cond_lm_recovery_step("post-migrating", runs), COND_LM_BY_DEST);
        assert_int_equal(cond_lm_recovery_step("completed", runs), COND_LM_NONE);
        assert_int_equal(cond_lm_recovery_step("error", runs), COND_LM_NONE);
        assert_int_equal(cond_lm_recovery_step("cancelled", runs), COND_LM_NONE);
        assert_int_equal(cond_lm_recovery_step(NULL, runs), COND_LM_NONE);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_pass),
        cmocka_unit_test(test_service),
        cmocka_unit_test(test_destination),
        cmocka_unit_test(test_resources_cpu_hypervisor),
        cmocka_unit_test(test_transport),
        cmocka_unit_test(test_storage),
        cmocka_unit_test(test_network_warning_and_instance),
        cmocka_unit_test(test_destination_not_asked),
        cmocka_unit_test(test_ports),
        cmocka_unit_test(test_recovery_step),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
