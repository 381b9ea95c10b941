/* lookup.c - fetching identity rows by id or name.
 *
 * Domains and projects share table project (is_domain tells them apart), so
 * every lookup states which kind it wants: a project id never finds a domain
 * and a domain id never finds a project. */
#include "identity/identity_int.h"

#include "common/json.h"
#include "db/db.h"

#include <assert.h>
#include <string.h>

json_t *nb_idn_get_project(struct nb_ctx *ctx, const char *id)
{
    return nb_db_row(nb_idn_db(), ctx, "SELECT * FROM project WHERE id = ? AND is_domain = 0", "s",
                     id);
}

json_t *nb_idn_get_domain(struct nb_ctx *ctx, const char *id)
{
    return nb_db_row(nb_idn_db(), ctx, "SELECT * FROM project WHERE id = ? AND is_domain = 1", "s",
                     id);
}

json_t *nb_idn_get_user(struct nb_ctx *ctx, const char *id)
{
    return nb_db_row(nb_idn_db(), ctx, "SELECT * FROM user WHERE id = ?", "s", id);
}

json_t *nb_idn_get_role(struct nb_ctx *ctx, const char *id)
{
    return nb_db_row(nb_idn_db(), ctx, "SELECT * FROM role WHERE id = ?", "s", id);
}

json_t *nb_idn_find_domain(struct nb_ctx *ctx, const json_t *ref)
{
    const char *id = nb_json_str(ref, "id");
    if (id)
        return nb_idn_get_domain(ctx, id);
    const char *name = nb_json_str(ref, "name");
    if (!name)
        return NULL;
    return nb_db_row(nb_idn_db(), ctx, "SELECT * FROM project WHERE name = ? AND is_domain = 1",
                     "s", name);
}

int nb_idn_name_taken(struct nb_ctx *ctx, const char *kind, const char *name, const char *domain_id)
{
    /* kind is one of two table names, never user input */
    assert(!strcmp(kind, "project") || !strcmp(kind, "user"));
    long long n = !strcmp(kind, "project")
                      ? nb_db_int(nb_idn_db(), ctx, -1,
                                  "SELECT COUNT(*) FROM project WHERE name = ? AND domain_id = ?",
                                  "ss", name, domain_id)
                      : nb_db_int(nb_idn_db(), ctx, -1,
                                  "SELECT COUNT(*) FROM user WHERE name = ? AND domain_id = ?",
                                  "ss", name, domain_id);
    if (n < 0)
        return -1;
    if (n > 0)
        return nb_error(ctx, 409, NB_IDN_E409,
                        "Conflict occurred attempting to store %s - Duplicate entry found "
                        "with name %s at domain ID %s.",
                        kind, name, domain_id);
    return 0;
}
