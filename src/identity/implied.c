/* implied.c - effective roles: direct assignments plus implied roles.
 *
 * Keystone's bootstrap makes admin imply member and member imply reader, so a
 * user with admin on a project also holds member and reader there: tokens
 * list all three and every policy check sees them. nubo keeps those two
 * implications fixed (there is no API to change them); a custom role implies
 * nothing. The closure is computed when a token is issued or validated, so a
 * removed assignment takes effect on the next request. */
#include "identity/identity_int.h"

#include "common/cleanup.h"
#include "common/json.h"
#include "db/db.h"

#include <string.h>

unsigned nb_idn_role_bit(const char *name)
{
    if (!name)
        return 0;
    if (strcmp(name, "admin") == 0)
        return NB_IDN_ROLE_ADMIN;
    if (strcmp(name, "member") == 0)
        return NB_IDN_ROLE_MEMBER;
    if (strcmp(name, "reader") == 0)
        return NB_IDN_ROLE_READER;
    return 0;
}

unsigned nb_idn_role_closure(unsigned bits)
{
    if (bits & NB_IDN_ROLE_ADMIN)
        bits |= NB_IDN_ROLE_MEMBER;
    if (bits & NB_IDN_ROLE_MEMBER)
        bits |= NB_IDN_ROLE_READER;
    return bits;
}

const char *nb_idn_role_implies(const char *name)
{
    switch (nb_idn_role_bit(name)) {
    case NB_IDN_ROLE_ADMIN: return "member";
    case NB_IDN_ROLE_MEMBER: return "reader";
    default: return NULL;
    }
}

static bool has_name(const json_t *roles, const char *name)
{
    size_t i;
    json_t *r;
    json_array_foreach (roles, i, r) {
        const char *n = nb_json_str(r, "name");
        if (n && strcmp(n, name) == 0)
            return true;
    }
    return false;
}

json_t *nb_idn_effective_roles(struct nb_ctx *ctx, const char *type, const char *user_id,
                               const char *target_id)
{
    struct nb_db *db = nb_idn_db();
    json_t *roles = nb_db_rows(db, ctx,
                               "SELECT r.id AS id, r.name AS name FROM assignment a "
                               "JOIN role r ON r.id = a.role_id "
                               "WHERE a.type = ? AND a.actor_id = ? AND a.target_id = ? "
                               "ORDER BY r.name",
                               "sss", type, user_id, target_id);
    if (!roles)
        return NULL;
    /* Follow the implication chain from each role already in the list; the
     * array grows while we walk it, so implied-of-implied is covered. */
    for (size_t i = 0; i < json_array_size(roles); i++) {
        const char *implied = nb_idn_role_implies(nb_json_str(json_array_get(roles, i), "name"));
        if (!implied || has_name(roles, implied))
            continue;
        json_t *row = nb_db_row(db, ctx, "SELECT id, name FROM role WHERE name = ?", "s", implied);
        if (!row) {
            if (ctx && nb_ctx_failed(ctx)) {
                json_decref(roles);
                return NULL;
            }
            continue; /* the implied role was deleted: nothing to add */
        }
        json_array_append_new(roles, row);
    }
    return roles;
}

void nb_idn_roles_to_ctx(struct nb_ctx *ctx, const json_t *roles)
{
    unsigned bits = 0;
    size_t i;
    json_t *r;
    json_array_foreach (roles, i, r)
        bits |= nb_idn_role_bit(nb_json_str(r, "name"));
    bits = nb_idn_role_closure(bits);
    ctx->is_admin = bits & NB_IDN_ROLE_ADMIN;
    ctx->is_member = bits & NB_IDN_ROLE_MEMBER;
    ctx->is_reader = bits & NB_IDN_ROLE_READER;
}
