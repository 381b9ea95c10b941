/* migrate_checks.h - the prechecks of a live migration as one pure
 * function: from the facts gathered about a source and one candidate
 * destination (live_migrate_hosts.c) to a named verdict per check, with
 * its evidence, in Nova's words where Nova has them. Pure so that the
 * conductor's run, the dry run (nubo doctor migration) and the unit tests
 * judge alike.
 *
 * Facts (JSON object; absent members read as unknown):
 *   "instance": {"uuid", "vm_state", "config_drive", "flavor": {…,
 *                "extra_specs"}, "is_bfv"},
 *   "source", "dest": host names; "block_migration": "true"|"false"|"auto";
 *   "dest_known": a compute node exists for dest;
 *   "service": the destination's nova-compute row ({"disabled",
 *              "disabled_reason", "forced_down"}) or null,
 *   "service_age_s": seconds since its last heartbeat, "service_down_time";
 *   "source_node", "dest_node": compute node rows ({"hypervisor_type",
 *              "hypervisor_version", "free_disk_gb", "disk_available_least"});
 *   "claim": {"ok", "message", "evidence"} (the placement claim for the
 *            instance on dest, or what it would be in a dry run);
 *   "agent": the destination's check_can_live_migrate_destination reply
 *            (compute_api.h), or {"ok": false, "message"} when it was not
 *            asked or did not answer;
 *   "config_drive_format": [DEFAULT] config_drive_format;
 *   "networking": nb_network_move_facts of the instance and dest (the
 *              instance's ports, dest's Linux bridge agent), or {"error"};
 *              absent: no ports. The agent's "dest"."tunnel" {"addr",
 *              "mtu"} is the destination's VXLAN underlay. */
#ifndef NB_CONDUCTOR_MIGRATE_CHECKS_H
#define NB_CONDUCTOR_MIGRATE_CHECKS_H

#include <jansson.h>

/* The checks in order: 1 service, 2 destination, 3 resources, 4 cpu,
 * 5 hypervisor, 6 transport, 7 storage, 8 network, 9 ports, 10 instance. */
#define NB_LM_CHECKS 10

/* Judges facts. Returns (new ref) {"host", "ok", "message" (the first
 * refusal's, null when ok), "block_migration" (bool: what "auto" and the
 * storage make it), "shared_storage" (bool), "warnings" (count),
 * "checks": [{"check", "ok", "warning", "skipped", "evidence",
 * "message"}…]}. A check that could not run (its facts missing because an
 * earlier one failed) is skipped and not ok. Never fails. */
json_t *cond_lm_evaluate(const json_t *facts);

/* "check: message" lines of the refused checks of a verdict (and the
 * warnings), one per line, for event and fault details. Caller frees. */
char *cond_lm_verdict_text(const json_t *verdict);

#endif
