/* env.h - what a role is given at start: the database, paths, identity of
 * this deployment. Roles keep the pointer they are given; nothing here is
 * mutated after start-up. */
#ifndef NB_ENV_H
#define NB_ENV_H

struct nb_db;

struct nb_env {
    struct nb_db *db;       /* NULL in a process without database access */
    const char *state_path; /* [DEFAULT] state_path */
    const char *region;     /* [DEFAULT] region_name, e.g. "RegionOne" */
    const char *my_host;    /* [DEFAULT] host: this process's host name */
};

#endif
