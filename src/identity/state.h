/* state.h - the identity module's state (state.c). Private to
 * src/identity (identity_int.h includes it). */
#ifndef NB_IDENTITY_STATE_H
#define NB_IDENTITY_STATE_H

struct nb_db;
struct nb_env;

/* The environment given to nb_identity_init/bootstrap (borrowed, lives for
 * the process). nb_idn_db() is NULL before either was called. */
void nb_idn_set_env(struct nb_env *env);
struct nb_db *nb_idn_db(void);
/* The region of every catalog endpoint: env->region, else [DEFAULT]
 * region_name, else "RegionOne". Borrowed. */
const char *nb_idn_region(void);

#endif
