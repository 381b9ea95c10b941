/* instance_rebuild.c - what a rebuild changes on the instance beside its
 * state (instance.c): the key pair (2.54) and the user data (2.57) the
 * request gave, as Nova's rebuild sets instance.key_name / key_data and
 * instance.user_data before it saves the task state. */
#include "common/util.h"
#include "compute/objects/instance.h"
#include "db/db.h"

int nb_instance_set_boot_data(struct nb_db *db, struct nb_ctx *ctx, const char *uuid,
                              const struct nb_instance_boot_data *b)
{
    char now[32];
    nb_now_iso_us(now);
    return nb_db_exec(db, ctx,
                      "UPDATE instances SET key_name = CASE WHEN ? THEN ? ELSE key_name END, "
                      "key_data = CASE WHEN ? THEN ? ELSE key_data END, "
                      "user_data = CASE WHEN ? THEN ? ELSE user_data END, "
                      "updated_at = ? WHERE uuid = ? AND deleted = 0",
                      "bsbsbsss", (int)b->set_key, b->key_name, (int)b->set_key, b->key_data,
                      (int)b->set_user_data, b->user_data, now, uuid);
}
