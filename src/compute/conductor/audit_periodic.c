/* audit_periodic.c - the cloud audit (compute/audit.h) run by the conductor
 * every [conductor] audit_interval seconds (default 600; 0 disables), each
 * finding that is not OK or SKIP logged as a WARNING with its evidence, the
 * way `nubo doctor cloud` prints it, and counted in the gauges
 * nubo_reconciler_findings{check, verdict} (WARN and PROBLEM of every check
 * the audit ran, 0 when it found nothing). Read-only: repairs are the operator's
 * (`nubo doctor`). With several control planes on one MariaDB only the
 * holder of the conductor.periodic lease audits (leases.c): the findings
 * are logged and counted once for the cloud. */
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/util.h"
#include "compute/audit.h"
#include "compute/conductor/internal.h"

#include <pthread.h>
#include <string.h>
#include <unistd.h>

#define LOG_AUDIT "nubo.conductor.audit"

/* Sets the findings gauges of this audit: per check that ran, its WARN and
 * PROBLEM counts. */
static void publish(const json_t *findings)
{
    json_t *counts = json_object(); /* "check\x1fverdict": n */
    size_t i;
    json_t *f;
    json_array_foreach (findings, i, f) {
        const char *check = nb_json_str(f, "check"), *v = nb_json_str(f, "verdict");
        char key[300];
        for (int k = 0; k < 2; k++) {
            snprintf(key, sizeof(key), "%s\x1f%s", check, k ? "PROBLEM" : "WARN");
            if (!json_object_get(counts, key))
                json_object_set_new(counts, key, json_integer(0));
        }
        if (strcmp(v, "WARN") && strcmp(v, "PROBLEM"))
            continue;
        snprintf(key, sizeof(key), "%s\x1f%s", check, v);
        json_object_set_new(counts, key, json_integer(nb_json_int(counts, key, 0) + 1));
    }
    const char *key;
    json_t *n;
    json_object_foreach (counts, key, n) {
        char check[300];
        snprintf(check, sizeof(check), "%.*s", (int)strcspn(key, "\x1f"), key);
        nb_metrics_set(NB_M_RECONCILER_FINDINGS, (double)json_integer_value(n),
                       (const char *const[]){check, strchr(key, '\x1f') + 1});
    }
    json_decref(counts);
}

/* One audit: the number of findings logged, or -1 when it could not run. */
int cond_audit_once(struct conductor *c)
{
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    struct nb_audit_opts o;
    nb_audit_opts_from_conf(&o);
    json_t *out = nb_audit_cloud(c->db, &ctx, &o);
    if (!out) {
        NB_WARN(LOG_AUDIT, &ctx, NULL, "Cloud audit could not run: %s", nb_ctx_message(&ctx));
        return -1;
    }
    int n = 0;
    size_t i;
    json_t *f;
    json_array_foreach (out, i, f) {
        const char *v = nb_json_str(f, "verdict");
        if (!strcmp(v, "OK") || !strcmp(v, "SKIP"))
            continue;
        n++;
        const char *subject = nb_json_str(f, "subject");
        NB_WARN(LOG_AUDIT, &ctx, NULL, "Cloud audit: [%s] %s%s%s: %s", v, nb_json_str(f, "check"),
                subject && *subject ? " " : "", subject ? subject : "", nb_json_str(f, "evidence"));
    }
    publish(out);
    NB_INFO(LOG_AUDIT, &ctx, NULL, "Cloud audit done: %d finding(s)", n);
    json_decref(out);
    return n;
}

static void *audit_main(void *arg)
{
    struct conductor *c = arg;
    for (;;) {
        long interval = nb_conf_int("conductor", "audit_interval", 600);
        if (interval <= 0)
            return NULL;
        sleep((unsigned)interval);
        if (cond_runs_periodic(c))
            cond_audit_once(c);
    }
}

void cond_audit_start(struct conductor *c)
{
    if (nb_conf_int("conductor", "audit_interval", 600) <= 0)
        return;
    pthread_t t;
    if (pthread_create(&t, NULL, audit_main, c) == 0)
        pthread_detach(t);
    else
        NB_ERROR(LOG_AUDIT, NULL, NULL, "cannot start the cloud audit thread");
}
