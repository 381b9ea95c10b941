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

struct agent {
    struct nb_env *env;
    struct nb_virt_driver *drv;
    char host[256];
    char topic[300];
    /* Per-instance serialisation, as Nova's @synchronized(instance.uuid):
     * the locks in use (manager.c's nb_agent_lock). */
    pthread_mutex_t ilocks_lock;
    struct agent_ilock *ilocks;

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
    /* The evacuated instances of this host were cleaned up (rebuild.c),
     * once after the first registration; periodic thread only. */
    bool evacuations_checked;
    /* Builds holding one of the host's max_concurrent_builds slots
     * (builds.c, under its lock). */
    int builds_running;

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

/* disk_format.c */
/* What nb_disk_check found. */
enum nb_disk_verdict {
    NB_DISK_OK = 0,   /* the file's format is the declared one */
    NB_DISK_SKIP,     /* not a volume mapping, or no connection_info yet */
    NB_DISK_MISSING,  /* the volume's file does not exist */
    NB_DISK_MISMATCH, /* the file is raw/qcow2 but declared the other */
};
struct nb_disk_check {
    char path[4096];   /* the volume's file */
    char declared[32]; /* connection_info.data.format ("raw" when absent) */
    char actual[32];   /* the inspector's format name (MISMATCH, OK) */
};
/* The core of the check, on files only: a verdict (enum nb_disk_verdict)
 * for a block_device_mapping row, with *chk filled as far as it got; or -1
 * with err set when the file cannot be read or inspected, or is neither raw
 * nor qcow2, or is qcow2 declared raw while its header points outside the
 * share (a guest-written header). */
int nb_disk_check(const json_t *bdm, struct nb_disk_check *chk, char *err, size_t n);
/* Before a domain start: checks the volume files of inst's mappings (or
 * only the mapping `only`, whose copy in inst follows), reconciling a
 * mismatch through the conductor when [compute] reconcile_disk_format is
 * true (the mappings in inst / only are patched). 0, or -1 with the error
 * on ctx (missing file: "Volume <id> of instance <uuid>: file <path> is
 * missing on host <host>"); nothing is changed then. */
int nb_agent_verify_disks(struct agent *a, struct nb_ctx *ctx, json_t *inst, json_t *only);

/* live_migration.c: the handlers of the live-migration messages
 * (compute_api.h), with the bus handler's signature */
json_t *nb_lm_check_destination(void *a, struct nb_ctx *ctx, const char *method, json_t *args);
json_t *nb_lm_check_source(void *a, struct nb_ctx *ctx, const char *method, json_t *args);
json_t *nb_lm_pre(void *a, struct nb_ctx *ctx, const char *method, json_t *args);
json_t *nb_lm_start(void *a, struct nb_ctx *ctx, const char *method, json_t *args);
json_t *nb_lm_abort(void *a, struct nb_ctx *ctx, const char *method, json_t *args);
json_t *nb_lm_force_complete(void *a, struct nb_ctx *ctx, const char *method, json_t *args);
json_t *nb_lm_running(void *a, struct nb_ctx *ctx, const char *method, json_t *args);
json_t *nb_lm_post_dest(void *a, struct nb_ctx *ctx, const char *method, json_t *args);
json_t *nb_lm_post_source(void *a, struct nb_ctx *ctx, const char *method, json_t *args);
json_t *nb_lm_rollback_dest(void *a, struct nb_ctx *ctx, const char *method, json_t *args);
/* At stop: refuses new live migrations, aborts the running ones (their
 * guests stay on this host, the conductor rolls them back) and waits up to
 * 60 s for them to end. nb_agent_lm_open undoes it (a restart in the same
 * process). */
void nb_agent_lm_drain(void);
void nb_agent_lm_open(void);

/* resize.c: cold migration and resize steps (compute_api.h), bus handlers
 * of the calls prep_resize, resize_instance, finish_resize and
 * finish_revert_resize (nb_agent_finish_resize), confirm_resize and
 * revert_resize (nb_agent_drop_resize). */
json_t *nb_agent_prep_resize(void *opaque, struct nb_ctx *ctx, const char *method, json_t *args);
json_t *nb_agent_resize_instance(void *opaque, struct nb_ctx *ctx, const char *method,
                                 json_t *args);
json_t *nb_agent_finish_resize(void *opaque, struct nb_ctx *ctx, const char *method, json_t *args);
json_t *nb_agent_drop_resize(void *opaque, struct nb_ctx *ctx, const char *method, json_t *args);

/* manager.c */
/* Takes the lock that serialises the operations on instance uuid (waits
 * for the operation holding it); give it back with nb_agent_unlock. */
struct agent_ilock *nb_agent_lock(struct agent *a, const char *uuid);
void nb_agent_unlock(struct agent *a, struct agent_ilock *lk);
/* The bus handler of "compute.<host>". */
json_t *nb_agent_handle(void *opaque, struct nb_ctx *ctx, const char *method, json_t *args);
/* The guest's power state (NB_POWER_NOSTATE when absent or unknown). */
int nb_agent_guest_power_state(struct agent *a, struct nb_ctx *ctx, const char *uuid);

/* builds.c */
/* build_and_run_instance {"instance", "node", ...}: the build on a thread
 * of its own, in a slot of [DEFAULT] max_concurrent_builds; returns once
 * that thread holds the instance's lock. Answers build_result. */
void nb_agent_build_and_run(struct agent *a, struct nb_ctx *ctx, json_t *args);
/* At agent start: builds get threads again after a drain. */
void nb_agent_builds_open(void);
/* At stop: waits for every build thread; later builds run on the worker. */
void nb_agent_builds_drain(void);
/* At agent start, before it listens: the builds a previous run of the
 * agent took and never reported (killed mid-spawn) are found in its
 * journal and reported from a thread of their own: built when the guest
 * runs, else interrupted (scheduled again). */
void nb_agent_builds_recover(struct agent *a);

/* rebuild.c */
/* rebuild_instance {"instance", "migration_uuid", "on_shared_storage",
 * "preserve_ephemeral"}: see compute_api.h; answers rebuild_result. */
void nb_agent_rebuild_instance(struct agent *a, struct nb_ctx *ctx, json_t *args);
/* Destroys the guests of instances evacuated from this host while its
 * agent was away and reports each evacuation cleaned. 0, or -1 when the
 * conductor did not answer (try again later). */
int nb_agent_destroy_evacuated(struct agent *a, struct nb_ctx *ctx);

#endif
