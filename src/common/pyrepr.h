/* pyrepr.h - Python-style rendering of JSON values for OpenStack-shaped
 * error messages. */
#ifndef NB_PYREPR_H
#define NB_PYREPR_H

#include <jansson.h>

/* repr() of v as Python prints it (NULL -> "None"). Caller frees. */
char *nb_pyrepr(const json_t *v);

#endif
