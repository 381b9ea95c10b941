/* lookup.c - fetching identity rows by id or name, for the identity
 * module and (nb_identity_project_exists, nb_identity_admin_project_id)
 * for the services that need to know of a project.
 *
 * Domains and projects share table project (is_domain tells them apart), so
 * every lookup states which kind it wants: a project id never finds a domain
 * and a domain id never finds a project. */
#include "identity/identity.h"
#include "identity/identity_int.h"

#include "common/cleanup.h"
#include "common/json.h"
#include "db/db.h"

#include <assert.h>
#include <string.h>

json_t *nb_idn_get_project(struct nb_ctx *ctx, const char *id)
{
    return nb_db_row(nb_idn_db(), ctx, "SELECT * FROM project WHERE id = ? AND is_domain = 0", "s",
                     id);
}

int nb_identity_project_exists(struct nb_db *db, struct nb_ctx *ctx, const char *project_id)
{
    long long n =
        nb_db_int(db, ctx, -1, "SELECT COUNT(*) FROM project WHERE id = ?", "s", project_id);
    return n < 0 ? -1 : n > 0;
}

char *nb_identity_admin_project_id(struct nb_db *db, struct nb_ctx *ctx)
{
    _cleanup_json_ json_t *row = nb_db_row(
        db, ctx, "SELECT id FROM project WHERE name = 'admin' AND domain_id = ? AND is_domain = 0",
        "s", NB_IDN_DEFAULT_DOMAIN);
    const char *id = nb_json_str(row, "id");
    return id ? strdup(id) : NULL;
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
