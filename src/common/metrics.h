/* metrics.h - the process's metrics, served as Prometheus text on
 * GET /metrics of every HTTP listener (docs/architecture.md "Metrics").
 *
 * Families are fixed (metrics.c names them, their type and help); a series
 * is a family plus its label values. Counters only grow, gauges are set or
 * moved either way; histograms keep
 * Prometheus's default buckets (5 ms .. 10 s), their _sum and _count.
 * Updates take one short mutex; label values are bounded by the caller (a
 * route's pattern, never its path; a bus topic's first segment, never a
 * host name), so the number of series stays small at any cloud size. */
#ifndef NB_METRICS_H
#define NB_METRICS_H

#include <stddef.h>

enum nb_metric {
    NB_M_HTTP_REQUEST_SECONDS,   /* histogram: service, method, route, status */
    NB_M_BUS_CALL_SECONDS,       /* histogram: topic, method, outcome */
    NB_M_BUS_CASTS,              /* counter: topic, method, outcome */
    NB_M_DB_TRANSACTION_SECONDS, /* histogram: outcome */
    NB_M_SCHEDULER_DECISIONS,    /* counter: outcome */
    NB_M_SCHEDULER_REJECTIONS,   /* counter: filter */
    NB_M_LIVE_MIGRATIONS,        /* counter: outcome */
    NB_M_LIVE_MIGRATIONS_ACTIVE, /* gauge: (none) */
    NB_M_RECONCILER_FINDINGS,    /* gauge: check, verdict */
    NB_M_COUNT
};

/* Adds value to the histogram m's series of the label values (as many as
 * the family has labels, in its order; NULL is ""). */
void nb_metrics_observe(enum nb_metric m, double value, const char *const labels[]);
/* Adds by to the counter (by >= 0) or gauge (either sign) m's series. */
void nb_metrics_add(enum nb_metric m, double by, const char *const labels[]);
/* Sets the gauge m's series to value. */
void nb_metrics_set(enum nb_metric m, double value, const char *const labels[]);

/* The exposition text (text/plain; version=0.0.4) of every series, plus
 * the process's resident memory, open file descriptors and start time.
 * malloc'd; *len its length. NULL on OOM. */
char *nb_metrics_render(size_t *len);

/* Forgets every series (unit tests). */
void nb_metrics_reset(void);

#endif
