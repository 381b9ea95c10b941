/* seed.h - the records an all-in-one starts with: devstack's flavors and
 * the demo image record. */
#ifndef NB_SEED_H
#define NB_SEED_H

#include "common/env.h"

/* Creates the default flavors and the `cirros` image record if missing. 0/-1. */
int nb_seed_defaults(struct nb_env *env);

#endif
