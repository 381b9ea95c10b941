/* audit.h - the cloud audit: the checks of `nubo doctor cloud` that the
 * database answers, shared by the doctor (src/cmd/doctor_cloud.c) and the
 * conductor's periodic audit ([conductor] audit_interval).
 *
 * Each check reads its tables through their owner (compute's own tables
 * here, placement's and networking's through placement.h and network.h) and
 * yields findings, JSON objects
 *   {"check": "orphan allocation", "verdict": "PROBLEM", "subject": uuid,
 *    "evidence": "...", "fix": {...}}
 * with verdict one of OK, WARN, PROBLEM, SKIP (an OK or SKIP line per check
 * that found nothing to report, so a report shows what was looked at). A
 * finding's "fix" says what nb_audit_fix would repair. */
#ifndef NB_COMPUTE_AUDIT_H
#define NB_COMPUTE_AUDIT_H

#include "common/ctx.h"
#include <jansson.h>
#include <stdbool.h>

struct nb_db;

struct nb_audit_opts {
    long migration_stuck_secs; /* a migration not final for longer is stuck */
    long task_stuck_secs;      /* an instance in a task_state for longer is stuck */
    long service_down_time;    /* [DEFAULT] service_down_time */
    double now;                /* 0: the current time */
};

/* Fills o from the configuration: [conductor] audit_migration_stuck
 * (default 3600 s), audit_task_stuck (3600 s), [DEFAULT] service_down_time
 * (60 s). */
void nb_audit_opts_from_conf(struct nb_audit_opts *o);

/* Runs the database checks: allocations without a live consumer, live
 * servers without allocations, migrations and instances stuck, compute
 * services down, clock skew, ports bound to hosts without a compute
 * service. Placement's in-process calls must have a database (the
 * conductor's process, or nb_placement_use_db). A new array of findings, or
 * NULL after a database error on ctx. */
json_t *nb_audit_cloud(struct nb_db *db, struct nb_ctx *ctx, const struct nb_audit_opts *o);

/* The live servers as {"uuid", "host", "vm_state"} (for the checks only a
 * host can make: its libvirt domains, its volume files). New array, or
 * NULL after a database error on ctx. */
json_t *nb_audit_servers(struct nb_db *db, struct nb_ctx *ctx);

/* Appends a finding to findings (evidence printf-style). */
void nb_audit_add(json_t *findings, const char *verdict, const char *check, const char *subject,
                  json_t *fix, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* Applies a finding's "fix" (what is safe: delete the allocations of a
 * consumer that is gone, heal a live server's allocation from its flavor on
 * its host's provider, set a stuck migration to error), through the
 * owner's call (audit_fix.c). 0 with *undo a new object for nb_audit_undo;
 * -1 with the reason on ctx, nothing changed. */
int nb_audit_fix(struct nb_db *db, struct nb_ctx *ctx, const json_t *fix, json_t **undo);

/* Puts back what nb_audit_fix changed, only while the state is what the
 * fix left. 0, or -1 with the reason on ctx. */
int nb_audit_undo(struct nb_db *db, struct nb_ctx *ctx, const json_t *undo);

/* Whether a migration in status still moves (Nova's in-flight statuses:
 * accepted, queued, preparing, running, post-migrating of a live migration;
 * pre-migrating, migrating, post-migrating, confirming, reverting of a cold
 * one or a resize; unknown statuses count as moving). Pure. */
bool nb_audit_migration_moving(const char *status);

/* Whether a consumer's allocations may be held by a migration in status
 * (anything not over: moving, or finished/done, which wait for a confirm or
 * the source host's clean-up). Pure. */
bool nb_audit_migration_holds(const char *status);

/* Seconds since the timestamp at (ISO, as stored), against now; -1 when at
 * is missing or unreadable. Pure. */
double nb_audit_age(const char *at, double now);

#endif
