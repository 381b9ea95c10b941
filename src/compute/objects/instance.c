/* instance.c - the conditional transition of an instance's state and its
 * soft delete (see instance.h): the only SQL that writes vm_state,
 * task_state, power_state, host and node, or deletes an instance.
 *
 * The transition is one fixed statement (prepared once): every new value
 * comes with a flag saying whether it changes, every expected set is a
 * fixed number of bound slots (unused ones NULL, which IN never matches),
 * so no state is ever spelled in SQL text. */
#include "compute/objects/instance.h"

#include "common/cleanup.h"
#include "common/json.h"
#include "common/util.h"
#include "db/db.h"

#include <string.h>

const char nb_none[] = "";

/* s as bound for a new value: NULL for NB_NONE. */
static const char *value(const char *s)
{
    return s == NB_NONE ? NULL : s;
}

/* The expected set (n entries, ending at the first NULL) as bound slots:
 * NB_NONE entries become *none = true, the others fill slots[0..n); *any
 * when the set is empty. */
static void expect_slots(const char *const *set, const char **slots, int n, int *any, int *none)
{
    int k = 0;
    *any = 1;
    *none = 0;
    for (int i = 0; i < n; i++)
        slots[i] = NULL;
    for (int i = 0; i < n && set[i]; i++) {
        *any = 0;
        if (set[i] == NB_NONE)
            *none = 1;
        else
            slots[k++] = set[i];
    }
}

static char worker[256];

void nb_instance_set_worker(const char *id)
{
    nb_strlcpy(worker, id ? id : "", sizeof(worker));
}

/* Records this process's control plane on instance uuid (nb_instance_set_worker),
 * in the caller's transaction. 0/-1. */
static int record_worker(struct nb_db *db, struct nb_ctx *ctx, const char *uuid)
{
    if (!worker[0])
        return 0;
    return nb_db_exec(db, ctx,
                      "UPDATE instances SET nubo_conductor = ? WHERE uuid = ? AND deleted = 0",
                      "ss", worker, uuid) < 0
               ? -1
               : 0;
}

int nb_instance_record_worker(struct nb_db *db, struct nb_ctx *ctx, const char *uuid)
{
    return record_worker(db, ctx, uuid);
}

int nb_instance_create(struct nb_db *db, struct nb_ctx *ctx, const struct nb_instance_new *in)
{
    char now[32];
    nb_now_iso_us(now);
    const char *created = in->created_at ? in->created_at : now;
    return nb_db_exec(
               db, ctx,
               "INSERT INTO instances (uuid, project_id, user_id, display_name, "
               "display_description, hostname, vm_state, task_state, power_state, "
               "availability_zone, instance_type_id, flavor, image_ref, key_name, key_data, "
               "user_data, config_drive, reservation_id, launch_index, access_ip_v4, "
               "access_ip_v6, progress, root_device_name, locked, request_spec, created_at, "
               "updated_at, vcpus, memory_mb, root_gb, ephemeral_gb, kernel_id, ramdisk_id, "
               "auto_disk_config, trusted_certs) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
               "?, ?, ?, COALESCE(?, ''), ?, ?, ?, ?, 0, ?, 0, COALESCE(?, '{}'), ?, ?, ?, ?, ?, "
               "?, COALESCE(?, ''), COALESCE(?, ''), ?, ?)",
               "ssssssssisijssssssisssjssiiiissbj", in->uuid, in->project_id, in->user_id,
               in->display_name, in->display_description, in->hostname, NB_VM_BUILDING,
               NB_TASK_SCHEDULING, (long long)NB_POWER_NOSTATE, in->availability_zone,
               in->instance_type_id, (json_t *)in->flavor, in->image_ref, in->key_name,
               in->key_data, in->user_data, in->config_drive, in->reservation_id, in->launch_index,
               in->access_ip_v4, in->access_ip_v6, in->root_device_name, (json_t *)in->request_spec,
               created, created, in->vcpus, in->memory_mb, in->root_gb, in->ephemeral_gb,
               in->kernel_id, in->ramdisk_id, (int)in->auto_disk_config,
               (json_t *)in->trusted_certs) < 0
               ? -1
               : record_worker(db, ctx, in->uuid);
}

int nb_instance_state(struct nb_db *db, struct nb_ctx *ctx, const char *uuid,
                      struct nb_instance_found *found)
{
    memset(found, 0, sizeof(*found));
    _cleanup_json_ json_t *row = nb_db_row(
        db, ctx, "SELECT vm_state, task_state, host, deleted FROM instances WHERE uuid = ?", "s",
        uuid);
    if (!row)
        return nb_ctx_failed(ctx) ? -1 : 0;
    found->exists = true;
    found->deleted = nb_json_int(row, "deleted", 0) != 0;
    const char *vm = nb_json_str(row, "vm_state"), *task = nb_json_str(row, "task_state");
    const char *host = nb_json_str(row, "host");
    nb_strlcpy(found->vm_state, vm ? vm : "", sizeof(found->vm_state));
    nb_strlcpy(found->task_state, task ? task : "", sizeof(found->task_state));
    nb_strlcpy(found->host, host ? host : "", sizeof(found->host));
    return 0;
}

json_t *nb_instance_get(struct nb_db *db, struct nb_ctx *ctx, const char *uuid, bool with_deleted)
{
    return nb_db_row(db, ctx,
                     with_deleted ? "SELECT * FROM instances WHERE uuid = ?"
                                  : "SELECT * FROM instances WHERE uuid = ? AND deleted = 0",
                     "s", uuid);
}

json_t *nb_instance_list_by_name(struct nb_db *db, struct nb_ctx *ctx, const char *display_name)
{
    return nb_db_rows(db, ctx, "SELECT * FROM instances WHERE display_name = ? AND deleted = 0",
                      "s", display_name);
}

#define SLOTS8 "(?, ?, ?, ?, ?, ?, ?, ?)"

enum nb_transition nb_instance_transition(struct nb_db *db, struct nb_ctx *ctx, const char *uuid,
                                          const struct nb_instance_change *ch,
                                          struct nb_instance_found *found)
{
    const char *vm[NB_EXPECT_MAX], *task[NB_EXPECT_MAX];
    int any_vm, none_vm, any_task, none_task;
    expect_slots(ch->expect_vm, vm, NB_EXPECT_MAX, &any_vm, &none_vm);
    expect_slots(ch->expect_task, task, NB_EXPECT_MAX, &any_task, &none_task);
    char now[32];
    nb_now_iso_us(now);
    json_t *fl = (json_t *)ch->flavor;
    int set_fl = fl != NULL;
    if (nb_db_begin(db, ctx) < 0)
        return NB_TRANSITION_ERROR;
    int n = nb_db_exec(
        db, ctx,
        "UPDATE instances SET vm_state = COALESCE(?, vm_state), "
        "task_state = CASE WHEN ? THEN ? ELSE task_state END, "
        "host = CASE WHEN ? THEN ? ELSE host END, node = CASE WHEN ? THEN ? ELSE node END, "
        "power_state = CASE WHEN ? THEN ? ELSE power_state END, "
        "availability_zone = COALESCE(?, availability_zone), "
        "request_spec = COALESCE(?, request_spec), "
        "launched_at = CASE WHEN ? THEN ? ELSE launched_at END, "
        "progress = CASE WHEN ? THEN 0 WHEN ? THEN ? ELSE progress END, "
        "flavor = COALESCE(?, flavor), "
        "instance_type_id = CASE WHEN ? THEN json_extract(?, '$.id') ELSE instance_type_id END, "
        "vcpus = CASE WHEN ? THEN json_extract(?, '$.vcpus') ELSE vcpus END, "
        "memory_mb = CASE WHEN ? THEN json_extract(?, '$.memory_mb') ELSE memory_mb END, "
        "root_gb = CASE WHEN ? THEN json_extract(?, '$.root_gb') ELSE root_gb END, "
        "ephemeral_gb = CASE WHEN ? THEN json_extract(?, '$.ephemeral_gb') ELSE ephemeral_gb END, "
        "old_flavor = CASE WHEN ? THEN NULL ELSE COALESCE(?, old_flavor) END, "
        "new_flavor = CASE WHEN ? THEN NULL ELSE COALESCE(?, new_flavor) END, "
        "image_ref = COALESCE(?, image_ref), updated_at = ? "
        "WHERE uuid = ? AND deleted = 0 AND (? OR vm_state IN " SLOTS8 ") "
        "AND (? OR task_state IN " SLOTS8 " OR (? AND task_state IS NULL)) "
        "AND (? IS NULL OR host = ?) AND (NOT ? OR host IS NOT NULL)",
        "sbsbsbsbisjbs"
        "bbij"
        "bjbjbjbjbj"
        "bjbj"
        "sss"
        "bssssssss"
        "bssssssssb"
        "ssb",
        value(ch->vm_state), ch->task_state != NULL, value(ch->task_state), ch->host != NULL,
        value(ch->host), ch->node != NULL, value(ch->node), (int)ch->set_power_state,
        (long long)ch->power_state, ch->availability_zone, (json_t *)ch->request_spec,
        (int)ch->launched, now, (int)ch->reset_progress, (int)ch->set_progress,
        (long long)ch->progress, fl, set_fl, fl, set_fl, fl, set_fl, fl, set_fl, fl, set_fl, fl,
        (int)ch->clear_move_flavors, (json_t *)ch->old_flavor, (int)ch->clear_move_flavors,
        (json_t *)ch->new_flavor, ch->image_ref, now, uuid, any_vm, vm[0], vm[1], vm[2], vm[3],
        vm[4], vm[5], vm[6], vm[7], any_task, task[0], task[1], task[2], task[3], task[4], task[5],
        task[6], task[7], none_task, ch->expect_host, ch->expect_host, (int)ch->expect_has_host);
    (void)none_vm; /* vm_state is never None */
    if (n < 0) {
        nb_db_rollback(db);
        return NB_TRANSITION_ERROR;
    }
    if (n > 0 && record_worker(db, ctx, uuid) < 0) {
        nb_db_rollback(db);
        return NB_TRANSITION_ERROR;
    }
    if (n == 0 && found && nb_instance_state(db, ctx, uuid, found) < 0) {
        nb_db_rollback(db);
        return NB_TRANSITION_ERROR;
    }
    if (nb_db_commit(db, ctx) < 0)
        return NB_TRANSITION_ERROR;
    return n > 0 ? NB_TRANSITION_MOVED : NB_TRANSITION_LOST;
}

int nb_instance_default_root_device(struct nb_db *db, struct nb_ctx *ctx, const char *uuid,
                                    const char *name)
{
    char now[32];
    nb_now_iso_us(now);
    return nb_db_exec(db, ctx,
                      "UPDATE instances SET root_device_name = ?, updated_at = ? WHERE uuid = ? "
                      "AND deleted = 0 AND root_device_name IS NULL",
                      "sss", name, now, uuid);
}

int nb_instance_set_lock(struct nb_db *db, struct nb_ctx *ctx, const char *uuid, bool locked,
                         const char *locked_by, const char *reason)
{
    char now[32];
    nb_now_iso_us(now);
    if (locked)
        return nb_db_exec(db, ctx,
                          "UPDATE instances SET locked = 1, locked_by = ?, locked_reason = "
                          "COALESCE(?, locked_reason), updated_at = ? WHERE uuid = ? AND "
                          "deleted = 0",
                          "ssss", locked_by, reason, now, uuid);
    return nb_db_exec(db, ctx,
                      "UPDATE instances SET locked = 0, locked_by = NULL, locked_reason = NULL, "
                      "updated_at = ? WHERE uuid = ? AND deleted = 0",
                      "ss", now, uuid);
}

int nb_instance_update_attrs(struct nb_db *db, struct nb_ctx *ctx, const char *uuid,
                             const struct nb_instance_attrs *a)
{
    char now[32];
    nb_now_iso_us(now);
    return nb_db_exec(db, ctx,
                      "UPDATE instances SET display_name = CASE WHEN ? THEN ? ELSE display_name "
                      "END, display_description = CASE WHEN ? THEN ? ELSE display_description END, "
                      "hostname = CASE WHEN ? THEN ? ELSE hostname END, "
                      "access_ip_v4 = CASE WHEN ? THEN ? ELSE access_ip_v4 END, "
                      "access_ip_v6 = CASE WHEN ? THEN ? ELSE access_ip_v6 END, "
                      "auto_disk_config = CASE WHEN ? THEN ? ELSE auto_disk_config END, "
                      "updated_at = ? WHERE uuid = ? AND deleted = 0",
                      "bsbsbsbsbsbiss", (int)a->set_display_name, a->display_name,
                      (int)a->set_display_description, a->display_description, (int)a->set_hostname,
                      a->hostname, (int)a->set_access_ip_v4, a->access_ip_v4,
                      (int)a->set_access_ip_v6, a->access_ip_v6, (int)a->set_auto_disk_config,
                      (long long)a->auto_disk_config, now, uuid);
}

#define SLOTS16 "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"

json_t *nb_instance_list_in_state(struct nb_db *db, struct nb_ctx *ctx,
                                  const struct nb_instance_filter *f)
{
    const char *vm[NB_EXPECT_MAX], *t[NB_FILTER_TASK_MAX];
    int any_vm, none_vm, any_task, none_task;
    expect_slots(f->vm, vm, NB_EXPECT_MAX, &any_vm, &none_vm);
    expect_slots(f->task, t, NB_FILTER_TASK_MAX, &any_task, &none_task);
    (void)none_vm;
    return nb_db_rows(
        db, ctx,
        "SELECT uuid, host, vm_state, task_state, nubo_conductor FROM instances WHERE "
        "deleted = 0 "
        "AND (? OR vm_state IN " SLOTS8 ") AND (? OR task_state IN " SLOTS16
        " OR (? AND task_state IS NULL)) AND id <= ? ORDER BY id",
        "bssssssss"
        "bssssssssssssssssb"
        "i",
        any_vm, vm[0], vm[1], vm[2], vm[3], vm[4], vm[5], vm[6], vm[7], any_task, t[0], t[1], t[2],
        t[3], t[4], t[5], t[6], t[7], t[8], t[9], t[10], t[11], t[12], t[13], t[14], t[15],
        none_task, f->max_id);
}

/* The rows hanging off a deleted instance, in the caller's transaction. */
static int destroy_children(struct nb_db *db, struct nb_ctx *ctx, const char *uuid, const char *now)
{
    if (nb_db_exec(db, ctx,
                   "UPDATE instance_metadata SET deleted = id WHERE instance_uuid = ? AND "
                   "deleted = 0",
                   "s", uuid) < 0 ||
        nb_db_exec(db, ctx,
                   "UPDATE instance_system_metadata SET deleted = id WHERE instance_uuid = ? AND "
                   "deleted = 0",
                   "s", uuid) < 0 ||
        nb_db_exec(db, ctx,
                   "UPDATE block_device_mapping SET deleted = id, deleted_at = ? WHERE "
                   "instance_uuid = ? AND deleted = 0",
                   "ss", now, uuid) < 0 ||
        nb_db_exec(db, ctx,
                   "UPDATE instance_faults SET deleted = id WHERE instance_uuid = ? AND "
                   "deleted = 0",
                   "s", uuid) < 0 ||
        nb_db_exec(db, ctx,
                   "UPDATE instance_info_caches SET deleted = id, deleted_at = ? WHERE "
                   "instance_uuid = ? AND deleted = 0",
                   "ss", now, uuid) < 0 ||
        nb_db_exec(db, ctx, "DELETE FROM tags WHERE resource_id = ?", "s", uuid) < 0 ||
        nb_db_exec(db, ctx, "DELETE FROM instance_group_member WHERE instance_uuid = ?", "s",
                   uuid) < 0)
        return -1;
    return 0;
}

int nb_instance_destroy(struct nb_db *db, struct nb_ctx *ctx, const char *uuid,
                        bool only_unscheduled, bool guest_gone)
{
    char now[32];
    nb_now_iso_us(now);
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    int n = nb_db_exec(db, ctx,
                       "UPDATE instances SET deleted = id, vm_state = ?, task_state = NULL, "
                       "progress = 0, power_state = CASE WHEN ? THEN ? ELSE power_state END, "
                       "terminated_at = ?, deleted_at = ?, updated_at = ? WHERE uuid = ? AND "
                       "deleted = 0 AND (NOT ? OR host IS NULL OR host = '')",
                       "sbissssb", NB_VM_DELETED, (int)guest_gone, (long long)NB_POWER_NOSTATE, now,
                       now, now, uuid, (int)only_unscheduled);
    if (n < 0 || ((n > 0 || !only_unscheduled) && destroy_children(db, ctx, uuid, now) < 0)) {
        nb_db_rollback(db);
        return -1;
    }
    if (nb_db_commit(db, ctx) < 0)
        return -1;
    return n > 0 ? 1 : 0;
}
