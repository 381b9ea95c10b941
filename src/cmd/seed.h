/* seed.h - the records an all-in-one starts with: devstack's flavors and
 * the demo image. */
#ifndef NB_SEED_H
#define NB_SEED_H

#include "common/env.h"

/* Creates the default flavors and the `cirros` image if missing; with
 * [aio] demo_image (a file path) the image gets that file's format and, if
 * it has no data yet, its data. 0/-1 (logged). */
int nb_seed_defaults(struct nb_env *env);

#endif
