/* seed.h - the records an all-in-one starts with: devstack's flavors and
 * the demo image. */
#ifndef NB_SEED_H
#define NB_SEED_H

#include "common/env.h"

/* Creates the default flavors (those missing) and the demo image
 * (nb_seed_demo_image). 0/-1 (logged). */
int nb_seed_defaults(struct nb_env *env);
/* The `cirros` image: with [aio] demo_image (a file path) created if
 * missing with that file's format and, if it has no data yet, given its
 * data; without, a record without data for the fake driver, and none for
 * the libvirt driver (a warning says how to get one). 0/-1 (logged). */
int nb_seed_demo_image(struct nb_env *env);

#endif
