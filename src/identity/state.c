/* state.c - the identity module's state: the environment it was given
 * (set once at start-up by nb_identity_init or the bootstrap, read-only
 * afterwards) and what every file reads from it (declared in state.h). */
#include "identity/state.h"

#include "common/config.h"
#include "common/env.h"

#include <stddef.h>

static struct nb_env *idn_env;

void nb_idn_set_env(struct nb_env *env)
{
    idn_env = env;
}

struct nb_db *nb_idn_db(void)
{
    return idn_env ? idn_env->db : NULL;
}

const char *nb_idn_region(void)
{
    if (idn_env && idn_env->region && *idn_env->region)
        return idn_env->region;
    return nb_conf_str("DEFAULT", "region_name", "RegionOne");
}
