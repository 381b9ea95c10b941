/* doctor.h - `nubo doctor server`: what its files share.
 *
 * The doctor is an operator tool run as root on a controller or compute host
 * (like nova-manage): it reads the database directly, asks libvirt about the
 * domain when the server lives on this host, and inspects volume files with
 * the format inspector. It runs the checks of the "Image is not in qcow2
 * format" runbook and prints each as one line,
 *   [VERDICT] check: evidence
 * with VERDICT one of OK, PROBLEM, WARN, SKIP, so the output reads as a
 * report and greps as a log. doctor_checks.c makes the diagnosis,
 * doctor_fix.c applies the runbook's workaround (--fix), doctor.c parses the
 * command line and decides the exit status.
 *
 * Ownership: a report owns its server row and the strings of its fixes;
 * nb_dr_report_clear frees them. */
#ifndef NB_CMD_DOCTOR_H
#define NB_CMD_DOCTOR_H

#include "common/ctx.h"
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

struct nb_db;

/* Exit statuses of `nubo doctor`. */
#define NB_DR_EXIT_HEALTHY 0 /* no problem found */
#define NB_DR_EXIT_PROBLEM 1 /* problem found, not fixed (or fix rolled back) */
#define NB_DR_EXIT_FIXED 2   /* problem found and fixed */
#define NB_DR_EXIT_CANNOT 3  /* the diagnosis could not run */
#define NB_DR_EXIT_USAGE 64  /* EX_USAGE */

enum nb_dr_verdict { NB_DR_OK, NB_DR_WARN, NB_DR_PROBLEM, NB_DR_SKIP };

/* Most mappings one server's fix handles (Nova allows far fewer disks). */
#define NB_DR_MAX_FIXES 32

/* A mapping whose connection_info.data.format disagrees with its file. */
struct nb_dr_format_fix {
    char bdm_uuid[64];
    char volume_id[64];
    char path[4096];
    char old_format[16]; /* what connection_info said */
    char new_format[16]; /* what the file is */
    /* Filled by nb_dr_fix_apply (malloc'd, freed by nb_dr_report_clear): */
    char *old_connection_info;
    char *new_connection_info;
    char *old_admin_format; /* nb_volume_format before; NULL if none */
    long long fix_id;       /* doctor_fixes row */
};

struct nb_dr_report {
    json_t *server; /* the instances row (owned) */
    char uuid[64];
    int problems;  /* checks with verdict PROBLEM */
    int warnings;  /* checks with verdict WARN */
    int unfixable; /* volume PROBLEMs other than a format mismatch the fix corrects */
    struct nb_dr_format_fix fixes[NB_DR_MAX_FIXES];
    int nfixes;
    FILE *out; /* where check lines go */
};

/* What the diagnosis needs from the configuration. Borrowed strings. */
struct nb_dr_host {
    const char *my_host;     /* [DEFAULT] host, else the host name */
    const char *driver;      /* [compute] driver */
    const char *libvirt_uri; /* [libvirt] connection_uri */
};

/* Prints one check line "[VERDICT] check: evidence" and counts it. */
void nb_dr_check(struct nb_dr_report *r, enum nb_dr_verdict v, const char *check, const char *fmt,
                 ...) __attribute__((format(printf, 4, 5)));

/* Finds the server (by UUID, else by a unique name) and runs every check,
 * printing each. 0 when the diagnosis ran (r filled; r->problems says what it
 * found), -1 when it could not (unknown server, database error: the reason
 * is in nb_ctx_message(ctx)). r must be zeroed (or cleared) before the call. */
int nb_dr_diagnose(struct nb_db *db, struct nb_ctx *ctx, const struct nb_dr_host *host,
                   const char *server_ref, struct nb_dr_report *r);

/* Frees what a report owns and zeroes it (keeping out). */
void nb_dr_report_clear(struct nb_dr_report *r);

/* Compares a mapping's declared format with the format the inspector found.
 * Returns NB_DR_OK when they agree; NB_DR_PROBLEM with *fixable true when
 * they differ and the file is raw or qcow2 (the formats a volume may have),
 * with *fixable false otherwise (a file nubo cannot use as a volume, or a
 * declared format that is neither). Pure. */
enum nb_dr_verdict nb_dr_compare_format(const char *declared, const char *real, bool *fixable);

/* The exit status for a run: problems found, whether --fix was asked, and
 * whether every problem was gone after the fix. Pure. */
int nb_dr_exit_status(int problems, bool fix_asked, bool fixed);

/* --fix step 1 and 2 for every r->fixes[i], in one transaction: keeps the
 * old connection_info in doctor_fixes (and prints it), applies the runbook's
 * JSON_SET update, which must change exactly one row, and sets the volume's
 * admin-metadata "format". Any failure rolls everything back. 0, or -1 with
 * the reason on ctx (nothing changed). */
int nb_dr_fix_apply(struct nb_db *db, struct nb_ctx *ctx, struct nb_dr_report *r);

/* Puts back what nb_dr_fix_apply changed, in one transaction, only where the
 * mapping still holds the doctor's value; records outcome "rolled_back" (or
 * "rollback_failed" with the reason). 0 when everything was restored. */
int nb_dr_fix_restore(struct nb_db *db, struct nb_ctx *ctx, struct nb_dr_report *r,
                      const char *why);

/* Sets outcome (and message, may be NULL) of the report's doctor_fixes rows. */
int nb_dr_fix_outcome(struct nb_db *db, struct nb_ctx *ctx, const struct nb_dr_report *r,
                      const char *outcome, const char *message);

/* The whole of --fix after a diagnosis with fixable mismatches: apply,
 * reset an ERROR server to active and hard-reboot it through the API, wait
 * up to timeout seconds for ACTIVE with power state 1, and restore the old
 * values if the guest does not come up. 0 when the guest came up with the
 * corrected mappings, -1 when the fix failed (rolled back, reasons printed). */
int nb_dr_fix_run(struct nb_db *db, struct nb_ctx *ctx, struct nb_dr_report *r, int timeout);

/* The network path of the server's ports (doctor_network.c): their
 * records, and on the server's host their taps, bridges, MTUs and DHCP.
 * Prints its checks; a failed query is a SKIP line. */
void nb_dr_check_network(struct nb_db *db, struct nb_dr_report *r, const struct nb_dr_host *h);

/* What was seen of one port's tap on this host. */
struct nb_dr_wiring {
    char tap[16];    /* tap<port[:11]> */
    char bridge[16]; /* brq<net[:11]>, where it should be */
    char master[64]; /* the bridge it is on, "" when none */
    bool tap_exists;
    bool running;                     /* the guest runs (power_state 1) */
    int tap_mtu, bridge_mtu, net_mtu; /* -1: unknown */
};
/* The verdict on w, its evidence in why[n]: no tap (PROBLEM while the guest
 * runs), on another or no bridge (PROBLEM), MTUs that differ from the
 * network's (WARN). Pure. */
enum nb_dr_verdict nb_dr_net_wiring(const struct nb_dr_wiring *w, char *why, size_t n);

/* The metadata verdict of a port with port security: groups as
 * nb_sg_port_groups gives them, config_drive whether the server has one.
 * NB_DR_OK when a rule lets IPv4 TCP to 169.254.169.254:80 out (the rule
 * and its group in why); otherwise NB_DR_PROBLEM without a config drive
 * (the guest cannot read its metadata) and NB_DR_WARN with one, why naming
 * the groups and the rule that would let it out. Pure. */
enum nb_dr_verdict nb_dr_net_metadata(const json_t *groups, bool config_drive, char *why, size_t n);

/* The DHCP verdict of tap's filter, from `nft list table` of the agent's
 * bridge table (bridge_list) and inet table (inet_list; either may be NULL
 * when it could not be listed): NB_DR_OK when chain from_<tap> accepts the
 * client's UDP 68->67 before any IPv4 source check drops it, egress_<tap>
 * returns (or accepts) it, and ingress_<tap> accepts the server's UDP
 * 67->68, each before an unconditional drop; the lines in why. Otherwise
 * NB_DR_PROBLEM naming the chain and what it lacks. Pure. */
enum nb_dr_verdict nb_dr_nft_dhcp(const char *bridge_list, const char *inet_list, const char *tap,
                                  char *why, size_t n);

/* The volume-file and disk-format checks of every volume mapping in bdms
 * (nb_bdm_rows of r->uuid; NULL: none) into r. The number of mappings. */
int nb_dr_check_volume_formats(struct nb_db *db, struct nb_ctx *ctx, struct nb_dr_report *r,
                               const json_t *bdms);

/* `nubo doctor cloud [--json]` (doctor_cloud.c): every finding of the cloud
 * audit (compute/audit.h) plus this host's libvirt domains and every volume
 * mapping's format, printed; with fix the repairs, then the checks again;
 * the exit status as nb_dr_exit_status. */
int nb_dr_cloud(struct nb_db *db, const struct nb_dr_host *h, bool as_json, bool fix);

/* doctor_cloud_fix.c: repairs every PROBLEM of findings that has a "fix",
 * each recorded in doctor_cloud_fixes with its undo and printed as a [FIX]
 * line. 0 when every repair applied. */
int nb_dr_cloud_fix(struct nb_db *db, struct nb_ctx *ctx, const json_t *findings);
/* `nubo doctor rollback <fix-id>`: undoes one applied repair. Exit status. */
int nb_dr_cloud_rollback(struct nb_db *db, const char *ref);

/* `nubo doctor migration <server> [--to HOST] [--json]`
 * (doctor_migration.c): the live-migration prechecks through the API. Exit
 * status as above (0: some host can take the server, 1: none). */
int nb_cmd_doctor_migration(int argc, char **argv);

#endif
