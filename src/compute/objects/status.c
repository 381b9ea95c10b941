/* status.c - the one map between vm_state/task_state and the API's server
 * status, Nova's _STATE_MAP (nova/api/openstack/common.py), read both ways:
 * status_from_state for the views and task_and_vm_state_from_status for
 * GET /servers?status=... (see states.h). */
#include "compute/objects/states.h"
#include "common/json.h"

#include <stddef.h>
#include <string.h>
#include <strings.h>

#define DEFAULT "default" /* the vm_state's entry for any other task */

/* (vm_state, task_state or DEFAULT) -> status, grouped by vm_state with
 * its default entry first, as Nova lists them. */
static const struct {
    const char *vm, *task, *status;
} state_map[] = {
    {NB_VM_ACTIVE, DEFAULT, "ACTIVE"},
    {NB_VM_ACTIVE, NB_TASK_REBOOTING, "REBOOT"},
    {NB_VM_ACTIVE, NB_TASK_REBOOT_PENDING, "REBOOT"},
    {NB_VM_ACTIVE, NB_TASK_REBOOT_STARTED, "REBOOT"},
    {NB_VM_ACTIVE, NB_TASK_REBOOTING_HARD, "HARD_REBOOT"},
    {NB_VM_ACTIVE, NB_TASK_REBOOT_PENDING_HARD, "HARD_REBOOT"},
    {NB_VM_ACTIVE, NB_TASK_REBOOT_STARTED_HARD, "HARD_REBOOT"},
    {NB_VM_ACTIVE, NB_TASK_UPDATING_PASSWORD, "PASSWORD"},
    {NB_VM_ACTIVE, NB_TASK_REBUILDING, "REBUILD"},
    {NB_VM_ACTIVE, NB_TASK_REBUILD_BDM, "REBUILD"},
    {NB_VM_ACTIVE, NB_TASK_REBUILD_SPAWNING, "REBUILD"},
    {NB_VM_ACTIVE, NB_TASK_MIGRATING, "MIGRATING"},
    {NB_VM_ACTIVE, NB_TASK_RESIZE_PREP, "RESIZE"},
    {NB_VM_ACTIVE, NB_TASK_RESIZE_MIGRATING, "RESIZE"},
    {NB_VM_ACTIVE, NB_TASK_RESIZE_MIGRATED, "RESIZE"},
    {NB_VM_ACTIVE, NB_TASK_RESIZE_FINISH, "RESIZE"},
    {NB_VM_BUILDING, DEFAULT, "BUILD"},
    {NB_VM_STOPPED, DEFAULT, "SHUTOFF"},
    {NB_VM_STOPPED, NB_TASK_RESIZE_PREP, "RESIZE"},
    {NB_VM_STOPPED, NB_TASK_RESIZE_MIGRATING, "RESIZE"},
    {NB_VM_STOPPED, NB_TASK_RESIZE_MIGRATED, "RESIZE"},
    {NB_VM_STOPPED, NB_TASK_RESIZE_FINISH, "RESIZE"},
    {NB_VM_STOPPED, NB_TASK_REBUILDING, "REBUILD"},
    {NB_VM_STOPPED, NB_TASK_REBUILD_BDM, "REBUILD"},
    {NB_VM_STOPPED, NB_TASK_REBUILD_SPAWNING, "REBUILD"},
    {NB_VM_RESIZED, DEFAULT, "VERIFY_RESIZE"},
    {NB_VM_RESIZED, NB_TASK_RESIZE_REVERTING, "REVERT_RESIZE"},
    {NB_VM_PAUSED, DEFAULT, "PAUSED"},
    {NB_VM_PAUSED, NB_TASK_MIGRATING, "MIGRATING"},
    {NB_VM_SUSPENDED, DEFAULT, "SUSPENDED"},
    {NB_VM_RESCUED, DEFAULT, "RESCUE"},
    {NB_VM_ERROR, DEFAULT, "ERROR"},
    {NB_VM_ERROR, NB_TASK_REBUILDING, "REBUILD"},
    {NB_VM_ERROR, NB_TASK_REBUILD_BDM, "REBUILD"},
    {NB_VM_ERROR, NB_TASK_REBUILD_SPAWNING, "REBUILD"},
    {NB_VM_DELETED, DEFAULT, "DELETED"},
    {NB_VM_SOFT_DELETED, DEFAULT, "SOFT_DELETED"},
    {NB_VM_SHELVED, DEFAULT, "SHELVED"},
    {NB_VM_SHELVED_OFFLOADED, DEFAULT, "SHELVED_OFFLOADED"},
};

#define N_STATES (sizeof(state_map) / sizeof(state_map[0]))

const char *nb_server_status(const char *vm_state, const char *task_state)
{
    const char *fallback = "UNKNOWN";
    for (size_t k = 0; k < N_STATES; k++) {
        if (!vm_state || strcmp(state_map[k].vm, vm_state))
            continue;
        if (!strcmp(state_map[k].task, DEFAULT))
            fallback = state_map[k].status;
        else if (task_state && !strcmp(state_map[k].task, task_state))
            return state_map[k].status;
    }
    return fallback;
}

void nb_server_states_for_statuses(const json_t *statuses, json_t *vm_states, json_t *task_states)
{
    for (size_t k = 0; k < N_STATES; k++) {
        size_t i;
        json_t *v;
        json_array_foreach (statuses, i, v) {
            const char *s = json_string_value(v);
            if (s && strcasecmp(s, state_map[k].status) == 0) {
                nb_json_set_add(vm_states, state_map[k].vm);
                nb_json_set_add(task_states, state_map[k].task);
            }
        }
    }
}
