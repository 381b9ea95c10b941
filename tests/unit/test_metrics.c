/* test_metrics.c - unit tests of the Prometheus exposition (common/metrics):
 * cumulative histogram buckets with _sum and _count, one series per label
 * set, label values escaped as the text format wants, counters and gauges,
 * the process gauges, and exact counts under concurrent updates. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "common/metrics.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *render(void)
{
    size_t len = 0;
    char *text = nb_metrics_render(&len);
    assert_non_null(text);
    assert_int_equal(strlen(text), len);
    return text;
}

/* The value of the sample line that starts with `series ` (exactly). */
static double sample(const char *text, const char *series)
{
    size_t n = strlen(series);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (!strncmp(p, series, n) && p[n] == ' ')
            return strtod(p + n + 1, NULL);
    fail_msg("no sample %s in:\n%s", series, text);
    return -1;
}

static void test_histogram_buckets_are_cumulative(void **state)
{
    (void)state;
    nb_metrics_reset();
    const char *l[] = {"commit"};
    double values[] = {0.003, 0.02, 3, 20};
    for (int i = 0; i < 4; i++)
        nb_metrics_observe(NB_M_DB_TRANSACTION_SECONDS, values[i], l);
    char *t = render();
    const char *f = "nubo_db_transaction_duration_seconds";
    assert_non_null(strstr(t, "# TYPE nubo_db_transaction_duration_seconds histogram\n"));
    char s[200];
    struct {
        const char *le;
        double want;
    } b[] = {{"0.005", 1}, {"0.01", 1}, {"0.025", 2}, {"2.5", 2}, {"5", 3}, {"10", 3}, {"+Inf", 4}};
    for (size_t i = 0; i < sizeof(b) / sizeof(b[0]); i++) {
        snprintf(s, sizeof(s), "%s_bucket{outcome=\"commit\",le=\"%s\"}", f, b[i].le);
        assert_true(sample(t, s) == b[i].want);
    }
    snprintf(s, sizeof(s), "%s_count{outcome=\"commit\"}", f);
    assert_true(sample(t, s) == 4);
    snprintf(s, sizeof(s), "%s_sum{outcome=\"commit\"}", f);
    double sum = sample(t, s);
    assert_true(sum > 23.0229 && sum < 23.0231);
    free(t);
}

static void test_series_per_label_set_and_escaping(void **state)
{
    (void)state;
    nb_metrics_reset();
    nb_metrics_add(NB_M_SCHEDULER_REJECTIONS, 1, (const char *const[]){"RamFilter"});
    nb_metrics_add(NB_M_SCHEDULER_REJECTIONS, 2, (const char *const[]){"RamFilter"});
    nb_metrics_add(NB_M_SCHEDULER_REJECTIONS, 1, (const char *const[]){"Compute\"Filter\\\n"});
    char *t = render();
    assert_non_null(strstr(t, "# TYPE nubo_scheduler_filter_rejections_total counter\n"));
    assert_true(sample(t, "nubo_scheduler_filter_rejections_total{filter=\"RamFilter\"}") == 3);
    assert_true(
        sample(t, "nubo_scheduler_filter_rejections_total{filter=\"Compute\\\"Filter\\\\\\n\"}") ==
        1);
    free(t);
}

static void test_gauges_and_process_metrics(void **state)
{
    (void)state;
    nb_metrics_reset();
    nb_metrics_add(NB_M_LIVE_MIGRATIONS_ACTIVE, 1, NULL);
    nb_metrics_add(NB_M_LIVE_MIGRATIONS_ACTIVE, 1, NULL);
    nb_metrics_add(NB_M_LIVE_MIGRATIONS_ACTIVE, -1, NULL);
    nb_metrics_set(NB_M_RECONCILER_FINDINGS, 7, (const char *const[]){"orphan", "PROBLEM"});
    nb_metrics_set(NB_M_RECONCILER_FINDINGS, 2, (const char *const[]){"orphan", "PROBLEM"});
    char *t = render();
    assert_non_null(strstr(t, "# TYPE nubo_live_migrations_in_progress gauge\n"));
    assert_true(sample(t, "nubo_live_migrations_in_progress") == 1);
    assert_true(sample(t, "nubo_reconciler_findings{check=\"orphan\",verdict=\"PROBLEM\"}") == 2);
    assert_true(sample(t, "process_resident_memory_bytes") > 1024 * 1024);
    assert_true(sample(t, "process_open_fds") >= 3);
    assert_true(sample(t, "process_start_time_seconds") > 1.7e9);
    free(t);
}

static void *hammer(void *arg)
{
    (void)arg;
    for (int i = 0; i < 20000; i++) {
        nb_metrics_add(NB_M_BUS_CASTS, 1, (const char *const[]){"compute", "build", "ok"});
        nb_metrics_observe(NB_M_BUS_CALL_SECONDS, 0.001,
                           (const char *const[]){"conductor", "x", "ok"});
    }
    return NULL;
}

static void test_concurrent_updates_are_exact(void **state)
{
    (void)state;
    nb_metrics_reset();
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&th[i], NULL, hammer, NULL), 0);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    char *t = render();
    assert_true(
        sample(t, "nubo_bus_casts_total{topic=\"compute\",method=\"build\",outcome=\"ok\"}") ==
        80000);
    assert_true(sample(t, "nubo_bus_call_duration_seconds_count{topic=\"conductor\",method=\"x\","
                          "outcome=\"ok\"}") == 80000);
    free(t);
    nb_metrics_reset();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_histogram_buckets_are_cumulative),
        cmocka_unit_test(test_series_per_label_set_and_escaping),
        cmocka_unit_test(test_gauges_and_process_metrics),
        cmocka_unit_test(test_concurrent_updates_are_exact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
