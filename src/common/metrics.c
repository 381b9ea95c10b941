/* metrics.c - the series behind GET /metrics (contract in metrics.h). */
#include "common/metrics.h"
#include "common/util.h"

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_LABELS 4
#define NBUCKETS 11
#define NSLOTS 256

static const double bucket_le[NBUCKETS] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};

enum kind { COUNTER, GAUGE, HISTOGRAM };

struct family {
    const char *name, *help;
    enum kind kind;
    const char *labels[MAX_LABELS + 1];
};

static const struct family families[NB_M_COUNT] = {
    [NB_M_HTTP_REQUEST_SECONDS] = {"nubo_http_request_duration_seconds",
                                   "HTTP requests by service, method, route pattern and status.",
                                   HISTOGRAM,
                                   {"service", "method", "route", "status"}},
    [NB_M_BUS_CALL_SECONDS] = {"nubo_bus_call_duration_seconds",
                               "RPC calls over the bus by topic (first segment), method and "
                               "outcome (ok, error, timeout).",
                               HISTOGRAM,
                               {"topic", "method", "outcome"}},
    [NB_M_BUS_CASTS] = {"nubo_bus_casts_total",
                        "RPC casts sent over the bus by topic (first segment), method and "
                        "outcome.",
                        COUNTER,
                        {"topic", "method", "outcome"}},
    [NB_M_DB_TRANSACTION_SECONDS] = {"nubo_db_transaction_duration_seconds",
                                     "Outermost database transactions, begin to commit or "
                                     "rollback.",
                                     HISTOGRAM,
                                     {"outcome"}},
    [NB_M_SCHEDULER_DECISIONS] = {"nubo_scheduler_decisions_total",
                                  "select_destinations answers: selected or no_valid_host.",
                                  COUNTER,
                                  {"outcome"}},
    [NB_M_SCHEDULER_REJECTIONS] = {"nubo_scheduler_filter_rejections_total",
                                   "Hosts removed by each scheduler filter.",
                                   COUNTER,
                                   {"filter"}},
    [NB_M_LIVE_MIGRATIONS] = {"nubo_live_migrations_total",
                              "Live migrations ended, by outcome (completed, error, cancelled).",
                              COUNTER,
                              {"outcome"}},
    [NB_M_LIVE_MIGRATIONS_ACTIVE] = {"nubo_live_migrations_in_progress",
                                     "Live migrations this process runs right now.",
                                     GAUGE,
                                     {NULL}},
    [NB_M_RECONCILER_FINDINGS] = {"nubo_reconciler_findings",
                                  "Findings of the last consistency audit, by check and "
                                  "verdict.",
                                  GAUGE,
                                  {"check", "verdict"}},
};

struct series {
    enum nb_metric m;
    char *key; /* label values joined by \x1f, the lookup key */
    char *values[MAX_LABELS];
    double sum;
    unsigned long long count, buckets[NBUCKETS];
    struct series *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct series *slots[NSLOTS];
static double started = -1;

static size_t nlabels(enum nb_metric m)
{
    size_t n = 0;
    while (n < MAX_LABELS && families[m].labels[n])
        n++;
    return n;
}

static unsigned long hash(enum nb_metric m, const char *key)
{
    unsigned long h = 5381 + (unsigned long)m;
    for (const char *p = key; *p; p++)
        h = h * 33 + (unsigned char)*p;
    return h % NSLOTS;
}

/* The series of m with labels, created when new (lock held). NULL on OOM. */
static struct series *series_of(enum nb_metric m, const char *const labels[])
{
    char key[1024] = "";
    size_t n = nlabels(m);
    for (size_t i = 0; i < n; i++)
        snprintf(key + strlen(key), sizeof(key) - strlen(key), "%s%s", i ? "\x1f" : "",
                 labels && labels[i] ? labels[i] : "");
    unsigned long h = hash(m, key);
    for (struct series *s = slots[h]; s; s = s->next)
        if (s->m == m && !strcmp(s->key, key))
            return s;
    struct series *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->m = m;
    s->key = strdup(key);
    for (size_t i = 0; i < n; i++)
        s->values[i] = strdup(labels && labels[i] ? labels[i] : "");
    s->next = slots[h];
    slots[h] = s;
    return s;
}

static void mark_start(void)
{
    if (started < 0)
        started = nb_time_now();
}

void nb_metrics_observe(enum nb_metric m, double value, const char *const labels[])
{
    pthread_mutex_lock(&lock);
    mark_start();
    struct series *s = series_of(m, labels);
    if (s) {
        s->sum += value;
        s->count++;
        for (int b = 0; b < NBUCKETS; b++)
            if (value <= bucket_le[b])
                s->buckets[b]++;
    }
    pthread_mutex_unlock(&lock);
}

void nb_metrics_add(enum nb_metric m, double by, const char *const labels[])
{
    pthread_mutex_lock(&lock);
    mark_start();
    struct series *s = series_of(m, labels);
    if (s)
        s->sum += by;
    pthread_mutex_unlock(&lock);
}

void nb_metrics_set(enum nb_metric m, double value, const char *const labels[])
{
    pthread_mutex_lock(&lock);
    mark_start();
    struct series *s = series_of(m, labels);
    if (s)
        s->sum = value;
    pthread_mutex_unlock(&lock);
}

/* {a="x",b="y"[,le="0.5"]} with the values escaped as the format wants. */
static void label_set(FILE *b, const struct series *s, const char *le)
{
    size_t n = nlabels(s->m);
    if (!n && !le)
        return;
    fputc('{', b);
    for (size_t i = 0; i < n; i++) {
        fprintf(b, "%s%s=\"", i ? "," : "", families[s->m].labels[i]);
        for (const char *p = s->values[i]; *p; p++) {
            if (*p == '\\' || *p == '"')
                fputc('\\', b);
            if (*p == '\n')
                fputs("\\n", b);
            else
                fputc(*p, b);
        }
        fputc('"', b);
    }
    if (le)
        fprintf(b, "%sle=\"%s\"", n ? "," : "", le);
    fputc('}', b);
}

static void render_family(FILE *b, enum nb_metric m)
{
    const struct family *f = &families[m];
    static const char *const kind_name[] = {"counter", "gauge", "histogram"};
    fprintf(b, "# HELP %s %s\n# TYPE %s %s\n", f->name, f->help, f->name, kind_name[f->kind]);
    for (int h = 0; h < NSLOTS; h++)
        for (const struct series *s = slots[h]; s; s = s->next) {
            if (s->m != m)
                continue;
            if (f->kind != HISTOGRAM) {
                fputs(f->name, b);
                label_set(b, s, NULL);
                fprintf(b, " %.17g\n", s->sum);
                continue;
            }
            for (int k = 0; k <= NBUCKETS; k++) {
                char le[32];
                snprintf(le, sizeof(le), "%g", k < NBUCKETS ? bucket_le[k] : 0);
                fprintf(b, "%s_bucket", f->name);
                label_set(b, s, k < NBUCKETS ? le : "+Inf");
                fprintf(b, " %llu\n", k < NBUCKETS ? s->buckets[k] : s->count);
            }
            fprintf(b, "%s_sum", f->name);
            label_set(b, s, NULL);
            fprintf(b, " %.17g\n%s_count", s->sum, f->name);
            label_set(b, s, NULL);
            fprintf(b, " %llu\n", s->count);
        }
}

/* Prometheus's process_* gauges, from /proc/self. */
static void render_process(FILE *b)
{
    long pages = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
            rss = 0;
        fclose(f);
    }
    long fds = 0;
    DIR *d = opendir("/proc/self/fd");
    for (struct dirent *e; d && (e = readdir(d));)
        fds += e->d_name[0] != '.';
    if (d)
        closedir(d);
    fprintf(b,
            "# HELP process_resident_memory_bytes Resident memory size in bytes.\n"
            "# TYPE process_resident_memory_bytes gauge\n"
            "process_resident_memory_bytes %ld\n"
            "# HELP process_open_fds Number of open file descriptors.\n"
            "# TYPE process_open_fds gauge\n"
            "process_open_fds %ld\n"
            "# HELP process_start_time_seconds Start time of the process since the "
            "epoch, in seconds (first metric recorded).\n"
            "# TYPE process_start_time_seconds gauge\n"
            "process_start_time_seconds %.3f\n",
            rss * sysconf(_SC_PAGESIZE), fds - (d ? 1 : 0), started);
}

char *nb_metrics_render(size_t *len)
{
    char *buf = NULL;
    FILE *b = open_memstream(&buf, len);
    if (!b)
        return NULL;
    pthread_mutex_lock(&lock);
    mark_start();
    for (int m = 0; m < NB_M_COUNT; m++)
        render_family(b, (enum nb_metric)m);
    pthread_mutex_unlock(&lock);
    render_process(b);
    if (fclose(b) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

void nb_metrics_reset(void)
{
    pthread_mutex_lock(&lock);
    for (int h = 0; h < NSLOTS; h++) {
        struct series *s = slots[h];
        while (s) {
            struct series *next = s->next;
            for (int i = 0; i < MAX_LABELS; i++)
                free(s->values[i]);
            free(s->key);
            free(s);
            s = next;
        }
        slots[h] = NULL;
    }
    pthread_mutex_unlock(&lock);
}
