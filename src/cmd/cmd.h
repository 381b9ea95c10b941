/* cmd.h - the nubo subcommands. Each takes argc/argv after the subcommand
 * name and returns the process exit status. */
#ifndef NB_CMD_H
#define NB_CMD_H

#include <stdbool.h>
#include <stddef.h>

int nb_cmd_aio(int argc, char **argv);
int nb_cmd_serve(int argc, char **argv);
int nb_cmd_compute(int argc, char **argv);
int nb_cmd_db(int argc, char **argv);
/* `nubo doctor server <id> [--fix]` (doctor.c): exit status 0 healthy, 1
 * problem not fixed, 2 problem fixed, 3 diagnosis impossible, 64 usage. */
int nb_cmd_doctor(int argc, char **argv);
/* `nubo host drain <host> [--live] [--concurrency N] [--dry-run]`
 * (host_drain.c): exit status 0 all moved, 1 some failed or left, 2 usage,
 * 3 could not start. */
int nb_cmd_host(int argc, char **argv);
/* `nubo policy list [--json]` (policy.c): the policy table. */
int nb_cmd_policy(int argc, char **argv);

/* What nb_db_open takes for the loaded configuration's [database]
 * connection, into buf: the SQLite file (sqlite:///path or /path, else
 * <state_path>/nubo.sqlite) or the MariaDB URL as written (db/url.h;
 * nb_db_url_is_mariadb tells them apart). Returns buf, or NULL after a
 * message on stderr (a bad URL). */
const char *nb_cmd_db_path(char *buf, size_t n);

/* How nb_run_roles starts a process. */
struct nb_run_opts {
    const char *command;     /* "aio", "serve", "compute": for the process record */
    const char *config_path; /* the configuration file used, logged; may be NULL */
    const char *config_note; /* how it was used (kept, options recorded), logged; may be NULL */
    /* New cloud: the identity records (keystone-manage bootstrap's, with
     * these passwords), flavors, the network and the demo image. */
    bool bootstrap;
    const char *admin_password, *demo_password;
    /* Without bootstrap: still (re)seed the demo image from [aio] demo_image
     * (given again on the command line) and/or run the identity bootstrap
     * with the passwords above (an explicit admin password reset). */
    bool seed_demo_image, reset_identity;
    /* Called after bootstrap and seeding, before anything listens: writes
     * what a client needs (aio's clouds.yaml). -1 stops the start. */
    int (*bootstrapped)(void *arg);
    void *arg;
};

/* Runs the roles named in [DEFAULT] roles (api, conductor, scheduler,
 * placement, compute, metadata) from the loaded configuration until
 * SIGTERM/SIGINT, keeping this process's record under <state_path>/run
 * (procrec.h). Returns the exit status. */
int nb_run_roles(const struct nb_run_opts *opts);

/* Loads --config FILE (default /etc/nubo/nubo.conf) and applies --set
 * SECTION.KEY=VALUE options from argv; the path used goes to *path. 0, or
 * -1 after a message. */
int nb_cmd_load_config(int argc, char **argv, const char **path);

/* `nubo status` (status.c): every role and agent of the cloud, one line
 * each; exit status 0 all up, 1 something down, 3 cannot tell, 2 usage. */
int nb_cmd_status(int argc, char **argv);

#endif
