/* conductor.h - starting the conductor role (topic "conductor"). */
#ifndef NB_CONDUCTOR_H
#define NB_CONDUCTOR_H

#include "common/env.h"

/* Recovers work interrupted by a restart, then listens on "conductor". 0/-1. */
int nb_conductor_start(struct nb_env *env);

#endif
