/* audit_periodic.c - the cloud audit (compute/audit.h) run by the conductor
 * every [conductor] audit_interval seconds (default 600; 0 disables), each
 * finding that is not OK or SKIP logged as a WARNING with its evidence, the
 * way `nubo doctor cloud` prints it. Read-only: repairs are the operator's
 * (`nubo doctor`). With several control planes every conductor audits; the
 * audit only reads, so that is safe. */
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "compute/audit.h"
#include "compute/conductor/internal.h"

#include <pthread.h>
#include <string.h>
#include <unistd.h>

#define LOG_AUDIT "nubo.conductor.audit"

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
