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
/* `nubo policy list [--json]` (policy.c): the policy table. */
int nb_cmd_policy(int argc, char **argv);

/* The SQLite file of the loaded configuration's [database] connection
 * (sqlite:///path), else <state_path>/nubo.sqlite, into buf. Returns buf. */
const char *nb_cmd_db_path(char *buf, size_t n);

/* Runs the roles named in [DEFAULT] roles (api, conductor, scheduler,
 * placement, compute) from the loaded configuration until SIGTERM/SIGINT;
 * with bootstrap, first creates the default identity records, flavors and
 * demo image (aio). Returns the exit status. */
int nb_run_roles(bool bootstrap, const char *admin_password, const char *demo_password);

#endif
