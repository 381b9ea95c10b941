/* cleanup.h - scope-bound cleanup helpers.
 *
 * `_cleanup_free_ char *s = ...;` frees s when it goes out of scope, so early
 * returns cannot leak. `_cleanup_json_` drops a jansson reference. Use
 * NB_STEAL(p) to hand ownership out of a scope. */
#ifndef NB_CLEANUP_H
#define NB_CLEANUP_H

#include <jansson.h>
#include <stdlib.h>

static inline void nb_freep(void *p)
{
    free(*(void **)p);
}
static inline void nb_json_decrefp(json_t **p)
{
    json_decref(*p);
}

#define _cleanup_free_ __attribute__((cleanup(nb_freep)))
#define _cleanup_json_ __attribute__((cleanup(nb_json_decrefp)))

/* Returns *pp and sets *pp to NULL: ownership leaves the cleanup scope. */
#define NB_STEAL(pp)                                                                               \
    ({                                                                                             \
        __typeof__(*(pp)) nb_tmp_ = *(pp);                                                         \
        *(pp) = NULL;                                                                              \
        nb_tmp_;                                                                                   \
    })

#endif
