/* procrec.h - process records: what `nubo status` knows about the nubo
 * processes of this machine (pid, since when, roles, hosts, version).
 *
 * Each `nubo aio|serve|compute` process keeps one JSON file,
 * <state_path>/run/nubo-<kind>.<host>.pid (kind: its roles joined by
 * dashes, e.g. nubo-compute.hostA.pid), holding an exclusive flock(2) on
 * it for its whole life. The lock, not the pid, says
 * whether the process runs: it goes with the process however it dies, and a
 * recycled pid cannot fake it. A clean stop adds "stopped_at" and unlocks
 * the file; a killed process leaves it unlocked without one: either way it
 * stays as evidence of what ran, until the next start takes it over.
 * Internal to src/cmd/. */
#ifndef NB_CMD_PROCREC_H
#define NB_CMD_PROCREC_H

#include <jansson.h>

struct nb_procrec;

/* Creates <run_dir>/nubo-<kind>.<host>.pid (run_dir made if missing),
 * locks it and writes info (borrowed; "pid" and "started_at" are added)
 * with "ready_at": null. NULL after a message on stderr, notably when a
 * live process holds the file: it runs the same roles for the same host on
 * this state path. */
struct nb_procrec *nb_procrec_acquire(const char *run_dir, const char *kind, const char *host,
                                      const json_t *info);
/* Records that the process is ready ("ready_at"). */
void nb_procrec_ready(struct nb_procrec *rec);
/* Records "stopped_at", unlocks the file and frees rec (NULL is fine). */
void nb_procrec_release(struct nb_procrec *rec);

/* Every record in run_dir, each the file's JSON plus "alive" (true while
 * its process holds the lock) and "path". New array (empty when the
 * directory is missing); unreadable files are left out. */
json_t *nb_procrec_list(const char *run_dir);

#endif
