/* internal.h - what the agent's files share: one agent's state and the
 * functions each file provides to the others. */
#ifndef NB_AGENT_INTERNAL_H
#define NB_AGENT_INTERNAL_H

#include "common/ctx.h"
#include "common/env.h"
#include "common/util.h"
#include "compute/virt/driver.h"

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>

#define LOG_AGENT "nubo.compute.manager"
#define LOG_RT "nubo.compute.resource_tracker"
#define AGENT_LOCKS 32

struct agent {
    struct nb_env *env;
    struct nb_virt_driver *drv;
    char host[256];
    char topic[300];
    /* Per-instance serialisation (striped by UUID), as Nova's
     * @synchronized(instance.uuid). */
    pthread_mutex_t locks[AGENT_LOCKS];

    /* Resource tracker state; only the periodic thread touches these after
     * start, except `dirty`. */
    bool registered;
    char node[256];              /* hypervisor_hostname */
    char node_uuid[NB_UUID_LEN]; /* compute node = resource provider */
    char *inventory_sent;        /* JSON text last given to placement */
    double next_register, next_heartbeat, next_usage, next_sync, last_usage;
    bool dirty; /* instances changed: refresh usage soon (atomic) */
    /* A driver lifecycle event asked for a power sync (atomic): run it once
     * events have been quiet for a second. */
    double event_sync_due; /* guarded by agents_lock; 0 = none */

    struct agent *next;
};

/* resource_tracker.c */
/* Registers service and compute node and reports inventory and traits.
 * 0/-1 (logged; retried later). */
int nb_rt_register(struct agent *a, struct nb_ctx *ctx);
/* Recomputes usage from the host's instances and reports it. */
void nb_rt_update_usage(struct agent *a, struct nb_ctx *ctx);
/* Placement traits for a CPU feature list + the driver's capabilities.
 * New ref (array of names). */
json_t *nb_rt_traits(json_t *cpu_features);

/* power_sync.c */
/* Compares the guests on the host with the database's view and reports
 * differences to the conductor. */
void nb_power_sync(struct agent *a, struct nb_ctx *ctx);

/* manager.c */
/* The bus handler of "compute.<host>". */
json_t *nb_agent_handle(void *opaque, struct nb_ctx *ctx, const char *method, json_t *args);

#endif
