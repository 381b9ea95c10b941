/* instance.h - Nova's Instance object: the only SQL that writes the
 * instances table. Its creation (as a boot leaves it for the conductor),
 * the one conditional transition of its state (vm_state, task_state,
 * power_state, host, node and what moves with them), its soft delete, and
 * the attributes users set (name, lock, ...); and the reads other modules
 * need (by uuid, by name, by state).
 *
 * A change of state is Nova's instance.save(expected_task_state=...): one
 * conditional UPDATE that moves the row only while it is still in the
 * expected state, so that of two workflows racing for an instance (a build
 * step and a delete, an action and another) exactly one moves it and the
 * other learns it lost. The conductor's rule (conductor/internal.h): each
 * transition is committed before the next step is announced on the bus.
 *
 * Expected states are lists of up to NB_EXPECT_MAX values ending at the
 * first NULL; an empty list accepts any state; NB_NONE in a task_state
 * list stands for None (NULL in the database). New values left NULL (or
 * false) leave the column as it is; NB_NONE clears it. */
#ifndef NB_COMPUTE_OBJECTS_INSTANCE_H
#define NB_COMPUTE_OBJECTS_INSTANCE_H

#include "common/ctx.h"
#include "compute/objects/states.h"
#include <jansson.h>
#include <stdbool.h>

struct nb_db;

/* "None": a task_state (or host, node) that is NULL; compared by address. */
extern const char nb_none[];
#define NB_NONE nb_none

#define NB_EXPECT_MAX 8

struct nb_instance_change {
    /* what must hold for the change to happen */
    const char *expect_vm[NB_EXPECT_MAX];   /* vm_state in these (empty: any) */
    const char *expect_task[NB_EXPECT_MAX]; /* task_state in these (empty: any) */
    const char *expect_host;                /* host = this (NULL: any) */
    bool expect_has_host;                   /* host IS NOT NULL */
    /* the new values */
    const char *vm_state;
    const char *task_state; /* NB_NONE: None */
    const char *host;       /* NB_NONE: None */
    const char *node;       /* NB_NONE: None */
    bool set_power_state;
    int power_state;
    const char *availability_zone; /* NULL: unchanged */
    const json_t *request_spec;    /* stored as its JSON text; NULL: unchanged */
    bool launched;                 /* launched_at = now */
    bool reset_progress;           /* progress = 0 */
    bool set_progress;             /* progress = progress (0-100; reset_progress wins) */
    int progress;
    /* moves (resize, rebuild): NULL / false leave each as it is */
    const json_t *flavor;     /* the flavor row: flavor, instance_type_id ("id"), vcpus,
                                 memory_mb, root_gb, ephemeral_gb from it */
    const json_t *old_flavor; /* a resize's flavors until confirm or revert */
    const json_t *new_flavor;
    bool clear_move_flavors; /* old_flavor = new_flavor = NULL (wins over the two) */
    const char *image_ref;   /* rebuild with another image */
};

/* What a transition found when it lost the race (or the row's state). */
struct nb_instance_found {
    bool exists;  /* a row with that uuid, deleted or not */
    bool deleted; /* soft-deleted */
    char vm_state[32];
    char task_state[40]; /* "" for None */
    char host[256];      /* "" for None */
};

enum nb_transition {
    NB_TRANSITION_ERROR = -1, /* database error, recorded on ctx */
    NB_TRANSITION_LOST = 0,   /* not as expected (or gone): nothing written */
    NB_TRANSITION_MOVED = 1,  /* the row moved */
};

/* The control plane this process works for (its conductor's liveness
 * lease, conductor/leases.c): from now on every create and every
 * transition that moves a row records it in instances.nubo_conductor, so
 * that recovery can tell whose work an instance in a task state is. NULL
 * (the default; the all-in-one on SQLite) records nothing. Set before
 * the roles' threads start. */
void nb_instance_set_worker(const char *id);
/* Records that worker on live instance uuid without changing its state
 * (a conductor taking on a message about it: if it dies with the message,
 * the message is not delivered again, and recovery must know whose the
 * work was). Nothing without a worker. 0/-1. */
int nb_instance_record_worker(struct nb_db *db, struct nb_ctx *ctx, const char *uuid);

/* Moves instance uuid (not soft-deleted) as ch says if, and only if, it is
 * in the state ch expects; updated_at is set with it. Joins the caller's
 * transaction if one is open (see db.h). On NB_TRANSITION_LOST, found (if
 * not NULL) says what the row was in instead. */
enum nb_transition nb_instance_transition(struct nb_db *db, struct nb_ctx *ctx, const char *uuid,
                                          const struct nb_instance_change *ch,
                                          struct nb_instance_found *found);

/* Reads the state of instance uuid into found (exists false when there is
 * no row). 0/-1. */
int nb_instance_state(struct nb_db *db, struct nb_ctx *ctx, const char *uuid,
                      struct nb_instance_found *found);

/* A new instance as the API's create stores it (NULL: none). */
struct nb_instance_new {
    const char *uuid, *project_id, *user_id;
    const char *display_name, *display_description, *hostname;
    const char *availability_zone;
    long long instance_type_id;
    const json_t *flavor;  /* the flavor with its extra_specs */
    const char *image_ref; /* "" when booting from volume */
    const char *key_name, *key_data, *user_data;
    const char *config_drive; /* "True" or "" as Nova stores it */
    const char *reservation_id;
    long long launch_index;
    const char *access_ip_v4, *access_ip_v6;
    const char *root_device_name;
    const json_t *request_spec;
    const char *created_at; /* NULL: now */
    long long vcpus, memory_mb, root_gb, ephemeral_gb;
    const char *kernel_id, *ramdisk_id;
    bool auto_disk_config;
    const json_t *trusted_certs; /* array or NULL */
};

/* Inserts the instance as a boot leaves it for the conductor: vm_state
 * building, task_state scheduling, power state NOSTATE, progress 0,
 * unlocked, updated_at = created_at (config_drive, kernel_id,
 * ramdisk_id NULL: "", request_spec NULL: {}). Joins the caller's
 * transaction. 0/-1 (a duplicate uuid: 409). */
int nb_instance_create(struct nb_db *db, struct nb_ctx *ctx, const struct nb_instance_new *in);

/* The instance row (all columns) by uuid: new ref, or NULL (none, or an
 * error on ctx). with_deleted: soft-deleted rows too. */
json_t *nb_instance_get(struct nb_db *db, struct nb_ctx *ctx, const char *uuid, bool with_deleted);
/* The live instance rows named display_name: new array (maybe empty), or
 * NULL on error. */
json_t *nb_instance_list_by_name(struct nb_db *db, struct nb_ctx *ctx, const char *display_name);

/* Sets root_device_name to name unless the instance has one (Nova's
 * default_root_device_name at the block_device_mapping step). Joins the
 * caller's transaction. Rows changed (0/1), or -1. */
int nb_instance_default_root_device(struct nb_db *db, struct nb_ctx *ctx, const char *uuid,
                                    const char *name);

/* Locks the instance (locked_by "admin" or "owner"; reason NULL keeps the
 * one it has) or unlocks it (locked_by and reason cleared), as Nova's
 * instance.locked. Joins the caller's transaction. Rows changed (0/1), or
 * -1. */
int nb_instance_set_lock(struct nb_db *db, struct nb_ctx *ctx, const char *uuid, bool locked,
                         const char *locked_by, const char *reason);

/* What PUT /servers/{id} changes: each column only when its set_ flag is
 * true (a NULL value then clears it). */
struct nb_instance_attrs {
    bool set_display_name, set_display_description, set_hostname;
    bool set_access_ip_v4, set_access_ip_v6, set_auto_disk_config;
    const char *display_name, *display_description, *hostname;
    const char *access_ip_v4, *access_ip_v6;
    bool auto_disk_config;
};

/* Updates the user-set attributes of live instance uuid (and updated_at).
 * Rows changed (0/1), or -1. */
int nb_instance_update_attrs(struct nb_db *db, struct nb_ctx *ctx, const char *uuid,
                             const struct nb_instance_attrs *a);

/* What a rebuild sets besides the state (instance_rebuild.c): each group
 * only when its set_ flag is true (NULL values then clear it). */
struct nb_instance_boot_data {
    bool set_key; /* key_name and key_data */
    const char *key_name, *key_data;
    bool set_user_data;
    const char *user_data;
    bool set_trusted_certs;
    const json_t *trusted_certs; /* array, or NULL to clear (2.63) */
};

/* Sets the key pair, user data and trusted certificate IDs of live
 * instance uuid (and updated_at).
 * Joins the caller's transaction. Rows changed (0/1), or -1. */
int nb_instance_set_boot_data(struct nb_db *db, struct nb_ctx *ctx, const char *uuid,
                              const struct nb_instance_boot_data *b);

#define NB_FILTER_TASK_MAX 16

/* Which live instances nb_instance_list_in_state returns: vm_state in vm
 * and task_state in task (lists as the expected states above: empty is
 * any, NB_NONE in task is None) and id <= max_id (rows that existed
 * when max_id was read). */
struct nb_instance_filter {
    const char *vm[NB_EXPECT_MAX];
    const char *task[NB_FILTER_TASK_MAX];
    long long max_id;
};

/* The live instances f selects, by id: new array of {"uuid", "host",
 * "vm_state", "task_state", "nubo_conductor"} (maybe empty), or NULL on
 * error. */
json_t *nb_instance_list_in_state(struct nb_db *db, struct nb_ctx *ctx,
                                  const struct nb_instance_filter *f);

/* Soft-deletes instance uuid as Nova's instance.destroy() after the
 * compute manager's (or the API's local) delete: deleted = id, deleted_at,
 * terminated_at, vm_state deleted, task_state None, progress 0, and the
 * power state NOSTATE when guest_gone (the guest was destroyed; the API's
 * local delete leaves it: the host may still run it). What hangs off the
 * instance goes with it: metadata, system metadata, block device mappings,
 * faults and the network info cache soft-deleted, tags and server group
 * membership deleted; that is done again for an instance deleted earlier
 * (idempotent, so a delete interrupted between the two is finished).
 * only_unscheduled: only while the instance has no host (the conductor may
 * be placing it); then nothing at all is written if it has one. One
 * transaction (joining the caller's). Returns 1 when this call deleted the
 * row, 0 when it was not there to delete (already deleted, or scheduled
 * meanwhile with only_unscheduled), -1 on error. */
int nb_instance_destroy(struct nb_db *db, struct nb_ctx *ctx, const char *uuid,
                        bool only_unscheduled, bool guest_gone);

#endif
