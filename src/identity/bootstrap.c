/* bootstrap.c - the first identities of a new cloud, as `keystone-manage
 * bootstrap` makes them.
 *
 * Creates (or keeps) the default domain, the immutable roles admin, member
 * and reader, the projects admin and demo, the users admin (admin on admin;
 * member and reader follow by implication) and demo (member on demo). Running
 * it again changes nothing but the two passwords, which are reset to the
 * given ones. Everything happens in one transaction.
 *
 * When the configuration names a service user ([service_user] username,
 * password, project_name: what `nubo aio` generates for compute agents in
 * processes of their own, as devstack makes nova's), that user is created
 * too, with the admin role on its project (`service` by default), and its
 * password is reset to the configured one. */
#include "identity/identity.h"
#include "identity/identity_int.h"

#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "db/db.h"

#include <string.h>

#define LOGGER "nubo.identity.bootstrap"

static int ensure_domain(struct nb_ctx *ctx, struct nb_db *db)
{
    long long n = nb_db_int(db, ctx, -1, "SELECT COUNT(*) FROM project WHERE id = ?", "s",
                            NB_IDN_DEFAULT_DOMAIN);
    if (n != 0)
        return n < 0 ? -1 : 0;
    char now[32];
    return nb_db_exec(db, ctx,
                      "INSERT INTO project (id, name, domain_id, description, enabled, is_domain, "
                      "created_at) VALUES (?, 'Default', ?, 'The default domain', 1, 1, ?)",
                      "sss", NB_IDN_DEFAULT_DOMAIN, NB_IDN_ROOT_DOMAIN, nb_now_iso_us(now)) < 0
               ? -1
               : 0;
}

/* Looks up the id of the row select_sql finds for name: 1 found (id set),
 * 0 not found (a fresh id set for the caller to insert), -1 on error. */
static int find_or_new_id(struct nb_ctx *ctx, struct nb_db *db, const char *select_sql,
                          const char *name, char id[33])
{
    _cleanup_json_ json_t *row = nb_db_row(db, ctx, select_sql, "s", name);
    if (row) {
        nb_strlcpy(id, nb_json_str(row, "id"), 33);
        return 1;
    }
    if (nb_ctx_failed(ctx))
        return -1;
    nb_idn_new_id(id);
    return 0;
}

static int ensure_role(struct nb_ctx *ctx, struct nb_db *db, const char *name, char id[33])
{
    int found = find_or_new_id(ctx, db, "SELECT id FROM role WHERE name = ?", name, id);
    if (found != 0)
        return found < 0 ? -1 : 0;
    NB_INFO(LOGGER, ctx, NULL, "Creating role %s", name);
    return nb_db_exec(db, ctx,
                      "INSERT INTO role (id, name, description, options) "
                      "VALUES (?, ?, '', '{\"immutable\": true}')",
                      "ss", id, name) < 0
               ? -1
               : 0;
}

static int ensure_project(struct nb_ctx *ctx, struct nb_db *db, const char *name,
                          const char *description, char id[33])
{
    int found = find_or_new_id(ctx, db,
                               "SELECT id FROM project WHERE name = ? AND domain_id = 'default' "
                               "AND is_domain = 0",
                               name, id);
    if (found != 0)
        return found < 0 ? -1 : 0;
    NB_INFO(LOGGER, ctx, NULL, "Creating project %s", name);
    char now[32];
    return nb_db_exec(db, ctx,
                      "INSERT INTO project (id, name, domain_id, description, created_at) "
                      "VALUES (?, ?, 'default', ?, ?)",
                      "ssss", id, name, description, nb_now_iso_us(now)) < 0
               ? -1
               : 0;
}

static int ensure_user(struct nb_ctx *ctx, struct nb_db *db, const char *name, const char *password,
                       char id[33])
{
    _cleanup_free_ char *hash = nb_idn_password_hash(password);
    if (!hash)
        return nb_error(ctx, 500, "Internal Server Error", "Password hashing failed.");
    int found = find_or_new_id(
        ctx, db, "SELECT id FROM user WHERE name = ? AND domain_id = 'default'", name, id);
    if (found < 0)
        return -1;
    if (found)
        return nb_db_exec(db, ctx, "UPDATE user SET password_hash = ? WHERE id = ?", "ss", hash,
                          id) < 0
                   ? -1
                   : 0;
    NB_INFO(LOGGER, ctx, NULL, "Creating user %s", name);
    char now[32];
    return nb_db_exec(db, ctx,
                      "INSERT INTO user (id, name, domain_id, password_hash, created_at) "
                      "VALUES (?, ?, 'default', ?, ?)",
                      "ssss", id, name, hash, nb_now_iso_us(now)) < 0
               ? -1
               : 0;
}

static int ensure_grant(struct nb_ctx *ctx, struct nb_db *db, const char *user_id,
                        const char *project_id, const char *role_id)
{
    long long n = nb_db_int(db, ctx, -1,
                            "SELECT COUNT(*) FROM assignment WHERE type = ? AND actor_id = ? AND "
                            "target_id = ? AND role_id = ?",
                            "ssss", NB_IDN_TYPE_PROJECT, user_id, project_id, role_id);
    if (n != 0)
        return n < 0 ? -1 : 0;
    return nb_db_exec(db, ctx,
                      "INSERT INTO assignment (type, actor_id, target_id, role_id) "
                      "VALUES (?, ?, ?, ?)",
                      "ssss", NB_IDN_TYPE_PROJECT, user_id, project_id, role_id) < 0
               ? -1
               : 0;
}

/* The [service_user] of the configuration, if it has a password: its
 * project and user, admin on that project. 0/-1. */
static int ensure_service_user(struct nb_ctx *ctx, struct nb_db *db, const char *admin_role)
{
    const char *password = nb_conf_str("service_user", "password", NULL);
    if (!password || !*password)
        return 0;
    const char *name = nb_conf_str("service_user", "username", "nova");
    const char *project = nb_conf_str("service_user", "project_name", "service");
    char project_id[33], user_id[33];
    if (ensure_project(ctx, db, project, "Project of the services' users.", project_id) < 0 ||
        ensure_user(ctx, db, name, password, user_id) < 0 ||
        ensure_grant(ctx, db, user_id, project_id, admin_role) < 0)
        return -1;
    NB_INFO(LOGGER, ctx, NULL, "Service user %s (admin on project %s) ready", name, project);
    return 0;
}

/* demo_password NULL gives the demo user the admin password. */
int nb_identity_bootstrap(struct nb_env *env, const char *admin_password, const char *demo_password)
{
    if (!env || !env->db || !admin_password) {
        NB_ERROR(LOGGER, NULL, NULL, "bootstrap needs a database and an admin password");
        return -1;
    }
    if (!nb_idn_db())
        nb_idn_set_env(env);
    if (!demo_password)
        demo_password = admin_password;
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    struct nb_db *db = env->db;
    char admin_role[33], member_role[33], reader_role[33];
    char admin_project[33], demo_project[33], admin_user[33], demo_user[33];
    if (nb_db_begin(db, &ctx) < 0)
        return -1;
    if (ensure_domain(&ctx, db) < 0 || ensure_role(&ctx, db, "admin", admin_role) < 0 ||
        ensure_role(&ctx, db, "member", member_role) < 0 ||
        ensure_role(&ctx, db, "reader", reader_role) < 0 ||
        ensure_project(&ctx, db, "admin", "Bootstrap project for initializing the cloud.",
                       admin_project) < 0 ||
        ensure_project(&ctx, db, "demo", "Demo project for its member user.", demo_project) < 0 ||
        ensure_user(&ctx, db, "admin", admin_password, admin_user) < 0 ||
        ensure_user(&ctx, db, "demo", demo_password, demo_user) < 0 ||
        ensure_grant(&ctx, db, admin_user, admin_project, admin_role) < 0 ||
        ensure_grant(&ctx, db, demo_user, demo_project, member_role) < 0 ||
        ensure_service_user(&ctx, db, admin_role) < 0) {
        nb_db_rollback(db);
        NB_ERROR(LOGGER, &ctx, NULL, "identity bootstrap failed: %s", nb_ctx_message(&ctx));
        return -1;
    }
    if (nb_db_commit(db, &ctx) < 0)
        return -1;
    NB_INFO(LOGGER, &ctx, NULL, "Identity bootstrapped: admin user %s, demo user %s", admin_user,
            demo_user);
    return 0;
}
