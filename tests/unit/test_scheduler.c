/* test_scheduler.c - the scheduler's filters and weighers over hand-built
 * host states: each filter's pass/fail and its reason, the explanation
 * format, Nova's extra-spec operators, and weighing (normalisation,
 * multipliers, aggregate overrides, stacking). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "compute/scheduler/host_state.h"

#include <string.h>

static void host_init(struct nb_host_state *hs, const char *name)
{
    memset(hs, 0, sizeof(*hs));
    nb_strlcpy(hs->host, name, sizeof(hs->host));
    nb_strlcpy(hs->nodename, name, sizeof(hs->nodename));
    nb_strlcpy(hs->availability_zone, "nova", sizeof(hs->availability_zone));
    nb_strlcpy(hs->hypervisor_type, "fake", sizeof(hs->hypervisor_type));
    hs->hypervisor_version = 7002022;
    hs->has_service = true;
    hs->service_up = true;
    hs->vcpus_total = 16;
    hs->vcpu_capacity = 64;
    hs->ram_capacity = 32256;
    hs->disk_capacity = 500;
    hs->memory_mb_total = 32768;
    hs->local_gb_total = 500;
    hs->cpu_allocation_ratio = 4.0;
}

struct fixture {
    struct nb_host_state h[3];
    struct nb_sched_spec spec;
    json_t *flavor, *props, *ghosts, *retry, *aggs, *cpu, *supported;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    host_init(&f->h[0], "fake-1");
    host_init(&f->h[1], "fake-2");
    host_init(&f->h[2], "fake-3");
    f->cpu = json_pack("{s:s, s:s, s:[s, s, s]}", "arch", "x86_64", "model", "Haswell-noTSX-IBRS",
                       "features", "avx", "avx2", "sse4.2");
    f->supported = json_pack("[[s, s, s]]", "x86_64", "fake", "hvm");
    for (int i = 0; i < 3; i++) {
        f->h[i].cpu_info = f->cpu;
        f->h[i].supported_instances = f->supported;
    }
    f->flavor = json_pack("{s:i, s:i, s:i, s:{}}", "vcpus", 1, "memory_mb", 512, "root_gb", 1,
                          "extra_specs");
    f->props = json_object();
    f->ghosts = json_object();
    f->retry = json_array();
    f->aggs = json_array();
    f->spec.instance_uuid = "11111111-2222-3333-4444-555555555555";
    f->spec.flavor = f->flavor;
    f->spec.image_props = f->props;
    f->spec.group_hosts = f->ghosts;
    f->spec.retry_hosts = f->retry;
    f->spec.default_zone = "nova";
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    json_decref(f->flavor);
    json_decref(f->props);
    json_decref(f->ghosts);
    json_decref(f->retry);
    json_decref(f->aggs);
    json_decref(f->cpu);
    json_decref(f->supported);
    free(f);
    return 0;
}

static bool passes(const struct nb_sched_filter *flt, struct fixture *f, int host, char *why)
{
    why[0] = '\0';
    return flt->host_passes(&f->h[host], &f->spec, why, 512);
}

static void test_compute_filter(void **state)
{
    struct fixture *f = *state;
    char why[512];
    assert_true(passes(&nb_filter_compute, f, 0, why));
    f->h[0].service_disabled = true;
    nb_strlcpy(f->h[0].disabled_reason, "maintenance", sizeof(f->h[0].disabled_reason));
    assert_false(passes(&nb_filter_compute, f, 0, why));
    assert_string_equal(why, "nova-compute service is disabled (reason: maintenance)");
    f->h[1].service_up = false;
    nb_strlcpy(f->h[1].last_seen_up, "2026-11-29T18:00:00.000000", sizeof(f->h[1].last_seen_up));
    assert_false(passes(&nb_filter_compute, f, 1, why));
    assert_string_equal(why,
                        "nova-compute service is down (last seen up 2026-11-29T18:00:00.000000)");
    f->h[2].has_service = false;
    assert_false(passes(&nb_filter_compute, f, 2, why));
}

static void test_availability_zone_filter_and_explanation(void **state)
{
    struct fixture *f = *state;
    nb_strlcpy(f->h[0].availability_zone, "az1", sizeof(f->h[0].availability_zone));
    nb_strlcpy(f->h[1].availability_zone, "az1,az3", sizeof(f->h[1].availability_zone));
    f->spec.availability_zone = "az2";
    struct nb_host_state *hosts[3] = {&f->h[0], &f->h[1], &f->h[2]};
    const struct nb_sched_filter *filters[] = {&nb_filter_compute, &nb_filter_availability_zone};
    json_t *lines = json_array();
    size_t n = nb_sched_run_filters(hosts, 3, filters, 2, &f->spec, lines);
    assert_int_equal(n, 0);
    assert_int_equal(json_array_size(lines), 2);
    assert_string_equal(json_string_value(json_array_get(lines, 0)), "ComputeFilter: 3 -> 3");
    assert_string_equal(
        json_string_value(json_array_get(lines, 1)),
        "AvailabilityZoneFilter: 3 -> 0; fake-1: in zone az1, requested az2; "
        "fake-2: in zone az1,az3, requested az2; fake-3: in zone nova, requested az2");
    json_decref(lines);

    /* a zone among several passes; no zone requested passes everything */
    char why[512];
    f->spec.availability_zone = "az3";
    assert_true(passes(&nb_filter_availability_zone, f, 1, why));
    assert_false(passes(&nb_filter_availability_zone, f, 0, why));
    f->spec.availability_zone = NULL;
    assert_true(passes(&nb_filter_availability_zone, f, 0, why));
    f->spec.availability_zone = "az1";
    assert_true(passes(&nb_filter_az_prefilter, f, 0, why));
    assert_false(passes(&nb_filter_az_prefilter, f, 2, why));
    assert_string_equal(why, "in zone nova, requested az1");
}

static void test_filters_stop_at_zero_and_keep_order(void **state)
{
    struct fixture *f = *state;
    f->h[1].service_disabled = true;
    struct nb_host_state *hosts[3] = {&f->h[0], &f->h[1], &f->h[2]};
    const struct nb_sched_filter *filters[] = {&nb_filter_compute, &nb_filter_retry,
                                               &nb_filter_image_properties};
    json_array_append_new(f->retry, json_string("fake-1"));
    json_array_append_new(f->retry, json_string("fake-3"));
    json_t *lines = json_array();
    size_t n = nb_sched_run_filters(hosts, 3, filters, 3, &f->spec, lines);
    assert_int_equal(n, 0);
    /* the image filter never ran: nothing was left */
    assert_int_equal(json_array_size(lines), 2);
    assert_string_equal(json_string_value(json_array_get(lines, 0)),
                        "ComputeFilter: 3 -> 2; fake-2: nova-compute service is disabled "
                        "(reason: none given)");
    assert_string_equal(json_string_value(json_array_get(lines, 1)),
                        "RetryFilter: 2 -> 0; fake-1: build already failed there (attempt 1); "
                        "fake-3: build already failed there (attempt 2)");
    json_decref(lines);

    json_array_clear(f->retry);
    json_array_append_new(f->retry, json_string("fake-1"));
    struct nb_host_state *again[3] = {&f->h[0], &f->h[1], &f->h[2]};
    f->h[1].service_disabled = false;
    lines = json_array();
    n = nb_sched_run_filters(again, 3, filters, 2, &f->spec, lines);
    assert_int_equal(n, 2);
    assert_ptr_equal(again[0], &f->h[1]);
    assert_ptr_equal(again[1], &f->h[2]);
    json_decref(lines);
}

/* A host whose agent did not take the build is skipped with its own
 * reason, not as a failed attempt. */
static void test_retry_filter_skips_unreachable_hosts(void **state)
{
    struct fixture *f = *state;
    json_t *unreachable = json_pack("[s]", "fake-2");
    f->spec.unreachable_hosts = unreachable;
    char why[512];
    assert_true(passes(&nb_filter_retry, f, 0, why));
    assert_false(passes(&nb_filter_retry, f, 1, why));
    assert_string_equal(why, "its compute service did not answer for this build");
    json_array_append_new(f->retry, json_string("fake-2"));
    assert_false(passes(&nb_filter_retry, f, 1, why));
    assert_string_equal(why, "build already failed there (attempt 1)");
    f->spec.unreachable_hosts = NULL;
    json_decref(unreachable);
}

static void test_image_properties_filter(void **state)
{
    struct fixture *f = *state;
    char why[512];
    assert_true(passes(&nb_filter_image_properties, f, 0, why));
    json_object_set_new(f->props, "hw_architecture", json_string("amd64")); /* = x86_64 */
    assert_true(passes(&nb_filter_image_properties, f, 0, why));
    json_object_set_new(f->props, "hw_architecture", json_string("aarch64"));
    assert_false(passes(&nb_filter_image_properties, f, 0, why));
    assert_string_equal(why, "image requires aarch64, host supports x86_64/fake/hvm");
    json_object_del(f->props, "hw_architecture");
    json_object_set_new(f->props, "img_hv_type", json_string("qemu"));
    assert_false(passes(&nb_filter_image_properties, f, 0, why));
    json_object_set_new(f->props, "img_hv_type", json_string("FAKE"));
    assert_true(passes(&nb_filter_image_properties, f, 0, why));
    /* legacy name and the version predicate: 7002022 is 7.2.22 */
    json_object_set_new(f->props, "hypervisor_version_requires", json_string(">= 7.2, < 8"));
    assert_true(passes(&nb_filter_image_properties, f, 0, why));
    json_object_set_new(f->props, "img_hv_requested_version", json_string(">=8.0"));
    assert_false(passes(&nb_filter_image_properties, f, 0, why));
    assert_string_equal(
        why, "hypervisor version 7.2.22 does not satisfy img_hv_requested_version >=8.0");
    /* no supported_instances advertised: any requirement fails */
    f->h[1].supported_instances = NULL;
    assert_false(passes(&nb_filter_image_properties, f, 1, why));
}

static void test_extra_spec_ops(void **state)
{
    (void)state;
    assert_true(nb_sched_extra_spec_match("x86_64", "x86_64"));
    assert_false(nb_sched_extra_spec_match("x86_64", "aarch64"));
    assert_true(nb_sched_extra_spec_match("x86_64", "s== x86_64"));
    assert_true(nb_sched_extra_spec_match("16", ">= 8"));
    assert_true(nb_sched_extra_spec_match("16", "= 8")); /* '=' means at least */
    assert_false(nb_sched_extra_spec_match("4", ">= 8"));
    assert_true(nb_sched_extra_spec_match("8", "== 8.0"));
    assert_true(nb_sched_extra_spec_match("['avx', 'avx2']", "<in> avx2"));
    assert_true(nb_sched_extra_spec_match("['avx', 'avx2']", "<all-in> avx avx2"));
    assert_false(nb_sched_extra_spec_match("['avx']", "<all-in> avx avx512f"));
    assert_true(nb_sched_extra_spec_match("kvm", "<or> qemu <or> kvm"));
    assert_false(nb_sched_extra_spec_match("xen", "<or> qemu <or> kvm"));
    assert_false(nb_sched_extra_spec_match("abc", ">= 1")); /* not a number */
    assert_true(nb_sched_extra_spec_match("b", "s> a"));
}

static void test_compute_capabilities_filter(void **state)
{
    struct fixture *f = *state;
    char why[512];
    json_t *es = json_object_get(f->flavor, "extra_specs");
    json_object_set_new(es, "hw:cpu_policy", json_string("dedicated")); /* not ours */
    json_object_set_new(es, "capabilities:cpu_info:arch", json_string("s== x86_64"));
    json_object_set_new(es, "capabilities:cpu_info:features", json_string("<in> avx2"));
    json_object_set_new(es, "hypervisor_version", json_string(">= 7000000")); /* unscoped attr */
    json_object_set_new(es, "no_such_attribute", json_string("x"));           /* ignored */
    assert_true(passes(&nb_filter_compute_capabilities, f, 0, why));
    json_object_set_new(es, "capabilities:cpu_info:features", json_string("<in> avx512f"));
    assert_false(passes(&nb_filter_compute_capabilities, f, 0, why));
    assert_string_equal(why, "extra spec capabilities:cpu_info:features='<in> avx512f' does not "
                             "match host value '['avx', 'avx2', 'sse4.2']'");
    json_object_del(es, "capabilities:cpu_info:features");
    json_object_set_new(es, "capabilities:cpu_info:topology:cores", json_string(">= 2"));
    assert_false(passes(&nb_filter_compute_capabilities, f, 0, why));
    assert_string_equal(why, "host has no value for extra spec "
                             "capabilities:cpu_info:topology:cores='>= 2'");
}

static void test_aggregate_image_properties_isolation(void **state)
{
    struct fixture *f = *state;
    char why[512];
    json_t *agg = json_pack("[{s:s, s:{s:s, s:s}}]", "name", "windows-hosts", "metadata", "os_type",
                            "windows, other", "availability_zone", "az1");
    f->h[0].aggregates = agg;
    assert_true(passes(&nb_filter_aggregate_image_properties_isolation, f, 0, why)); /* no prop */
    json_object_set_new(f->props, "os_type", json_string("linux"));
    assert_false(passes(&nb_filter_aggregate_image_properties_isolation, f, 0, why));
    assert_string_equal(why, "image property os_type=linux is not among the values 'windows, "
                             "other' of aggregate windows-hosts");
    assert_true(passes(&nb_filter_aggregate_image_properties_isolation, f, 1, why)); /* no agg */
    json_object_set_new(f->props, "os_type", json_string("other"));
    assert_true(passes(&nb_filter_aggregate_image_properties_isolation, f, 0, why));
    /* with a namespace, other keys are not checked */
    json_object_set_new(f->props, "os_type", json_string("linux"));
    f->spec.isolation_namespace = "isolation";
    assert_true(passes(&nb_filter_aggregate_image_properties_isolation, f, 0, why));
    json_decref(agg);
}

static void test_server_group_filters(void **state)
{
    struct fixture *f = *state;
    char why[512];
    f->spec.group_uuid = "gggggggg-0000-0000-0000-000000000000";
    f->spec.group_policy = "anti-affinity";
    json_object_set_new(f->ghosts, "fake-1", json_integer(1));
    assert_false(passes(&nb_filter_server_group_anti_affinity, f, 0, why));
    assert_string_equal(why, "already hosts 1 member(s) of anti-affinity group "
                             "gggggggg-0000-0000-0000-000000000000 (max_server_per_host 1)");
    assert_true(passes(&nb_filter_server_group_anti_affinity, f, 1, why));
    assert_true(passes(&nb_filter_server_group_affinity, f, 1, why)); /* not its policy */
    f->spec.max_server_per_host = 2;
    assert_true(passes(&nb_filter_server_group_anti_affinity, f, 0, why));

    f->spec.group_policy = "affinity";
    assert_true(passes(&nb_filter_server_group_anti_affinity, f, 0, why));
    assert_true(passes(&nb_filter_server_group_affinity, f, 0, why));
    assert_false(passes(&nb_filter_server_group_affinity, f, 1, why));
    assert_string_equal(why, "members of affinity group gggggggg-0000-0000-0000-000000000000 are "
                             "on fake-1");
    json_object_clear(f->ghosts); /* first member: anywhere */
    assert_true(passes(&nb_filter_server_group_affinity, f, 1, why));
}

static void test_filter_registry(void **state)
{
    (void)state;
    const char *names[] = {"ComputeFilter",
                           "ComputeCapabilitiesFilter",
                           "ImagePropertiesFilter",
                           "ServerGroupAntiAffinityFilter",
                           "ServerGroupAffinityFilter",
                           "AvailabilityZoneFilter",
                           "AggregateImagePropertiesIsolation",
                           "RetryFilter"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const struct nb_sched_filter *flt = nb_sched_filter_find(names[i]);
        assert_non_null(flt);
        assert_string_equal(flt->name, names[i]);
    }
    assert_null(nb_sched_filter_find("NoSuchFilter"));
    assert_ptr_equal(nb_sched_weigher_find("RAMWeigher"), &nb_weigher_ram);
    assert_null(nb_sched_weigher_find("IoOpsWeigher"));
}

static void test_weighers_spread_and_stack(void **state)
{
    struct fixture *f = *state;
    f->h[0].ram_used = 20000; /* least free RAM */
    f->h[1].ram_used = 0;     /* most free RAM */
    f->h[2].ram_used = 10000;
    struct nb_host_state *hosts[3] = {&f->h[0], &f->h[1], &f->h[2]};
    const struct nb_sched_weigher *w[] = {&nb_weigher_ram};
    double spread[] = {1.0};
    nb_sched_weigh(hosts, 3, w, spread, 1);
    assert_ptr_equal(hosts[0], &f->h[1]);
    assert_ptr_equal(hosts[1], &f->h[2]);
    assert_ptr_equal(hosts[2], &f->h[0]);
    /* normalised with minval 0: weight = free / max free */
    assert_true(hosts[0]->weight > 0.9999 && hosts[0]->weight < 1.0001);
    double expect = (32256.0 - 20000) / 32256.0;
    assert_true(hosts[2]->weight > expect - 1e-9 && hosts[2]->weight < expect + 1e-9);

    double stack[] = {-1.0};
    nb_sched_weigh(hosts, 3, w, stack, 1);
    assert_ptr_equal(hosts[0], &f->h[0]);
    assert_ptr_equal(hosts[2], &f->h[1]);
}

static void test_weighers_sum_and_aggregate_multiplier(void **state)
{
    struct fixture *f = *state;
    /* fake-1: most free RAM, fake-2: most free vCPU and disk */
    f->h[1].ram_used = 1000;
    f->h[2].ram_used = 1000;
    f->h[0].vcpu_used = 30;
    f->h[2].vcpu_used = 30;
    f->h[0].disk_used = 100;
    f->h[2].disk_used = 100;
    struct nb_host_state *hosts[3] = {&f->h[0], &f->h[1], &f->h[2]};
    const struct nb_sched_weigher *w[] = {&nb_weigher_ram, &nb_weigher_cpu, &nb_weigher_disk};
    double mult[] = {1.0, 1.0, 1.0};
    nb_sched_weigh(hosts, 3, w, mult, 3);
    assert_ptr_equal(hosts[0], &f->h[1]);
    /* RAM weighs 10x for fake-1 through its aggregate: it wins */
    json_t *agg = json_pack("[{s:s, s:{s:s}}]", "name", "ram-heavy", "metadata",
                            "ram_weight_multiplier", "10.0");
    f->h[0].aggregates = agg;
    assert_true(nb_sched_weight_multiplier(&f->h[0], &nb_weigher_ram, 1.0) == 10.0);
    assert_true(nb_sched_weight_multiplier(&f->h[0], &nb_weigher_cpu, 2.5) == 2.5);
    nb_sched_weigh(hosts, 3, w, mult, 3);
    assert_ptr_equal(hosts[0], &f->h[0]);
    json_decref(agg);
}

static void test_weigh_equal_and_single(void **state)
{
    struct fixture *f = *state;
    struct nb_host_state *hosts[3] = {&f->h[0], &f->h[1], &f->h[2]};
    const struct nb_sched_weigher *w[] = {&nb_weigher_ram, &nb_weigher_cpu, &nb_weigher_disk};
    double mult[] = {1.0, 1.0, 1.0};
    nb_sched_weigh(hosts, 3, w, mult, 3);
    /* equal hosts keep placement's order */
    assert_ptr_equal(hosts[0], &f->h[0]);
    assert_ptr_equal(hosts[1], &f->h[1]);
    assert_ptr_equal(hosts[2], &f->h[2]);
    nb_sched_weigh(hosts, 1, w, mult, 3);
    assert_true(hosts[0]->weight == 0.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_compute_filter, setup, teardown),
        cmocka_unit_test_setup_teardown(test_availability_zone_filter_and_explanation, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_filters_stop_at_zero_and_keep_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retry_filter_skips_unreachable_hosts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_image_properties_filter, setup, teardown),
        cmocka_unit_test(test_extra_spec_ops),
        cmocka_unit_test_setup_teardown(test_compute_capabilities_filter, setup, teardown),
        cmocka_unit_test_setup_teardown(test_aggregate_image_properties_isolation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_server_group_filters, setup, teardown),
        cmocka_unit_test(test_filter_registry),
        cmocka_unit_test_setup_teardown(test_weighers_spread_and_stack, setup, teardown),
        cmocka_unit_test_setup_teardown(test_weighers_sum_and_aggregate_multiplier, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_weigh_equal_and_single, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
