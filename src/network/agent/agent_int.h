/* agent_int.h - struct na and the agent's driving functions, shared by
 * agent.c, own.c and the unit tests (which run the phases on hand-written
 * states without a bus). The phases see only internal.h. */
#ifndef NB_NETAGENT_AGENT_INT_H
#define NB_NETAGENT_AGENT_INT_H

#include "network/agent/internal.h"

#include <pthread.h>
#include <stdbool.h>

struct na {
    struct nb_env *env; /* NULL in unit tests */
    char host[256];
    char state_dir[1024];
    char tag[9];
    char topic[300]; /* q-agent-notifier.<host> */

    pthread_mutex_t own_lock;
    json_t *owned; /* the ownership record (own.c) */

    /* The thread (agent.c). */
    pthread_t thread;
    bool running;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool stop, dirty;   /* under lock */
    bool fetch_failing; /* the last get_host_state failed (thread only) */
    char reason[256];   /* of the last host_state_changed, under lock */
    json_t *state;      /* the last state fetched (thread only) */
    json_t *reported;   /* port id -> true (up) / false (down), as the control side knows it */
    json_t *failed;     /* port id -> reason, of the last reconcile */
    json_t *probed;     /* port id -> {"ifindex", "reason"}: duplicate-address probes (dad.c) */
    struct na *next;
};

/* A new agent for host with its state directory (created); its ownership
 * record loaded. No thread, no bus. NULL (logged) on failure. */
struct na *na_new(const char *host, const char *state_dir);
void na_free(struct na *a);

/* One reconcile: every linked phase on state, in internal.h's order.
 * Returns how many phases failed (their messages logged, the last one on
 * ctx). */
int na_reconcile(struct na *a, struct nb_ctx *ctx, const json_t *state);

/* own.c: loads <state dir>/owned.json (missing: empty). 0/-1. */
int na_own_load(struct na *a);

#endif
