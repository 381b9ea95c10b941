/* scheduler.h - starting the scheduler role (topic "scheduler"). */
#ifndef NB_SCHEDULER_H
#define NB_SCHEDULER_H

#include "common/env.h"

int nb_scheduler_start(struct nb_env *env);

#endif
