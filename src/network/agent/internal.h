/* internal.h - what the network agent's files share (netagent.h says what
 * the agent is and the state it is given).
 *
 * One reconcile = the phases below, in this order, on one fetched state;
 * each phase makes the host match the state for its concern, is
 * idempotent, removes what it once created that the state no longer has
 * (the ownership record), and returns 0, or -1 after nb_error on ctx (the
 * reconcile goes on with the next phase; the failure is logged and the
 * affected ports are reported as failed with the message). A phase's pure
 * part (state -> text of a config, a rule set) is a separate function with
 * a unit test; the part that touches the host runs commands (run.c). */
#ifndef NB_NETAGENT_INTERNAL_H
#define NB_NETAGENT_INTERNAL_H

#include "common/ctx.h"
#include "network/agent/netagent.h"

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

struct na; /* one agent: host name, state dir, ownership record (agent.c) */

/* The agent's compute host name and state directory
 * (<state_path>/network-agent/<host>, created at start). Borrowed. */
const char *na_host(const struct na *a);
const char *na_state_dir(const struct na *a);
/* A short tag unique to this agent on this machine (8 hex digits of its
 * host's uuid), for names that live in a shared kernel namespace and are
 * not named after a Neutron object (nft tables). Borrowed. */
const char *na_tag(const struct na *a);

/* Ownership record (<state dir>/owned.json): kind is "bridge", "netns",
 * "link", "nft_table", "process", ...; name what it is. Persisted at once.
 * na_owned: a new array of the names of kind. */
int na_own(struct na *a, const char *kind, const char *name);
int na_disown(struct na *a, const char *kind, const char *name);
json_t *na_owned(struct na *a, const char *kind);

/* Runs argv (argv[0] looked up in PATH; /usr/sbin and /sbin are on it) in
 * namespace netns (NULL: the agent's own), with stdin_text fed to it (may
 * be NULL), waits at most timeout_ms. Returns the exit status (0 = ok);
 * -1 if it could not run. *out (if given) receives stdout+stderr
 * (malloc'd). Logged at DEBUG with the command line. */
int na_run(struct nb_ctx *ctx, const char *netns, const char *const argv[], const char *stdin_text,
           int timeout_ms, char **out);
/* na_run that records a failure on ctx as "<cmd>: <its output>" (500).
 * 0/-1. */
int na_must(struct nb_ctx *ctx, const char *netns, const char *const argv[],
            const char *stdin_text);

/* The daemons the agent starts (dnsmasq, radvd), found by their pid files
 * (run.c): the pid in pidfile when that process lives (not a zombie) and
 * has the argument want on its command line, else 0. */
pid_t na_daemon_pid(const char *pidfile, const char *want);
/* Whether process pid runs in the network namespace ns (not in one
 * deleted by hand, which lives on while a process holds it). */
bool na_runs_in(pid_t pid, const char *ns);
/* Stops the daemon of pidfile/want: SIGTERM, SIGKILL after 2 s. The pid
 * it stopped, or 0 when none ran. */
pid_t na_daemon_stop(const char *pidfile, const char *want);

/* Records that the port port_id could not be wired in this reconcile: it
 * is reported as failed with reason (copied) instead of up or down
 * (agent.c). */
void na_port_failed(struct na *a, const char *port_id, const char *reason);

/* The phases (one file each; weak, so agent.c calls the ones linked in
 * while they are being written). */
#define NA_PHASE __attribute__((weak))
NA_PHASE int na_l2_sync(struct na *a, struct nb_ctx *ctx, const json_t *state); /* l2.c, vxlan.c */
NA_PHASE int na_dhcp_sync(struct na *a, struct nb_ctx *ctx, const json_t *state);    /* dhcp.c */
NA_PHASE int na_mdproxy_sync(struct na *a, struct nb_ctx *ctx, const json_t *state); /* mdproxy.c */
NA_PHASE int na_l3_sync(struct na *a, struct nb_ctx *ctx, const json_t *state);      /* l3.c */
NA_PHASE int na_sg_sync(struct na *a, struct nb_ctx *ctx, const json_t *state);      /* sg.c */
/* VXLAN (vxlan.c): called by na_l2_sync once the bridges exist, so the
 * vxlan-<vni> devices and their peers join them. */
NA_PHASE int na_vxlan_sync(struct na *a, struct nb_ctx *ctx, const json_t *state); /* vxlan.c */

/* Which ports are wired now (after the phases): fills *up and *down with
 * new arrays of port ids among the state's ports, DHCP and router legs
 * (l2.c). */
int na_l2_devices(struct na *a, struct nb_ctx *ctx, const json_t *state, json_t **up,
                  json_t **down);
/* The network of the host's state with id, or NULL (l2.c). */
const json_t *na_state_network(const json_t *state, const char *id);

#endif
