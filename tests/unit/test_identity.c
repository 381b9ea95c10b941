/* test_identity.c - unit tests of the identity module: password hashing,
 * role implication, token hashing, token validation (what the auth hook
 * accepts and refuses, and what it puts in the context), and the Keystone
 * API through in-process dispatch (policy, shapes, grants). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "common/config.h"
#include "common/http.h"
#include "common/json.h"
#include "common/util.h"
#include "db/db.h"
#include "identity/identity.h"
#include "identity/identity_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char db_path[64];
static struct nb_db *db;
static struct nb_env env;

static int setup(void **state)
{
    (void)state;
    strcpy(db_path, "/tmp/nubo-test-idn-XXXXXX");
    int fd = mkstemp(db_path);
    close(fd);
    db = nb_db_open(db_path);
    if (!db || nb_db_sync(db) < 0)
        return -1;
    env.db = db;
    env.region = "RegionTest";
    env.state_path = "/tmp";
    env.my_host = "test";
    nb_http_set_base_url("http://127.0.0.1:9");
    if (nb_identity_init(&env) < 0 || nb_identity_bootstrap(&env, "adminpw", "demopw") < 0)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    nb_db_close(db);
    unlink(db_path);
    return 0;
}

/* Id of the row of table named name (test helper; table is a literal). */
static char *id_of(const char *sql, const char *name)
{
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    json_t *row = nb_db_row(db, &ctx, sql, "s", name);
    assert_non_null(row);
    char *id = strdup(nb_json_str(row, "id"));
    json_decref(row);
    return id;
}
#define USER_ID(n) id_of("SELECT id FROM user WHERE name = ?", n)
#define PROJECT_ID(n) id_of("SELECT id FROM project WHERE name = ? AND is_domain = 0", n)
#define ROLE_ID(n) id_of("SELECT id FROM role WHERE name = ?", n)

/* Issues a token for user on project (NULL: unscoped) expiring at exp. */
static void issue(const char *user, const char *project, double exp, char tok[NB_IDN_HEX_LEN])
{
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    json_t *methods = json_pack("[s]", "password");
    struct nb_idn_scope sc = {.user_id = user, .project_id = project};
    assert_int_equal(nb_idn_token_issue(&ctx, &sc, exp, methods, NULL, tok), 0);
    json_decref(methods);
}

/* Runs the auth hook on tok; returns its result, ctx filled. */
static int auth(const char *tok, struct nb_ctx *ctx)
{
    nb_ctx_init(ctx);
    return nb_idn_authenticate(ctx, tok);
}

static void test_password(void **state)
{
    (void)state;
    char *h1 = nb_idn_password_hash("s3cret");
    char *h2 = nb_idn_password_hash("s3cret");
    assert_non_null(h1);
    assert_non_null(h2);
    assert_true(strncmp(h1, "$y$", 3) == 0); /* yescrypt */
    assert_null(strstr(h1, "s3cret"));       /* never the plaintext */
    assert_string_not_equal(h1, h2);         /* fresh salt each time */
    assert_true(nb_idn_password_verify("s3cret", h1));
    assert_true(nb_idn_password_verify("s3cret", h2));
    assert_false(nb_idn_password_verify("s3cret ", h1));
    assert_false(nb_idn_password_verify("S3cret", h1));
    assert_false(nb_idn_password_verify("", h1));
    assert_false(nb_idn_password_verify("s3cret", NULL));
    assert_false(nb_idn_password_verify("s3cret", ""));
    assert_false(nb_idn_password_verify("s3cret", "*0"));
    char *he = nb_idn_password_hash("");
    assert_non_null(he);
    assert_true(nb_idn_password_verify("", he));
    assert_false(nb_idn_password_verify("x", he));
    free(h1);
    free(h2);
    free(he);
}

static void test_role_closure(void **state)
{
    (void)state;
    assert_int_equal(nb_idn_role_closure(NB_IDN_ROLE_ADMIN),
                     NB_IDN_ROLE_ADMIN | NB_IDN_ROLE_MEMBER | NB_IDN_ROLE_READER);
    assert_int_equal(nb_idn_role_closure(NB_IDN_ROLE_MEMBER),
                     NB_IDN_ROLE_MEMBER | NB_IDN_ROLE_READER);
    assert_int_equal(nb_idn_role_closure(NB_IDN_ROLE_READER), NB_IDN_ROLE_READER);
    assert_int_equal(nb_idn_role_closure(0), 0);
    assert_int_equal(nb_idn_role_bit("heat_stack_owner"), 0);
    assert_string_equal(nb_idn_role_implies("admin"), "member");
    assert_string_equal(nb_idn_role_implies("member"), "reader");
    assert_null(nb_idn_role_implies("reader"));

    struct nb_ctx ctx;
    nb_ctx_init(&ctx);
    json_t *roles = json_pack("[{s:s}]", "name", "custom");
    nb_idn_roles_to_ctx(&ctx, roles);
    assert_false(ctx.is_reader); /* a custom role grants nothing */
    json_decref(roles);
    roles = json_pack("[{s:s}]", "name", "reader");
    nb_idn_roles_to_ctx(&ctx, roles);
    assert_true(ctx.is_reader);
    assert_false(ctx.is_member);
    assert_false(ctx.is_admin);
    json_decref(roles);
}

static void test_token_hash(void **state)
{
    (void)state;
    char h[NB_IDN_HEX_LEN];
    nb_idn_token_hash("abc", h);
    assert_string_equal(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    char buf[32];
    assert_string_equal(nb_idn_time_fmt(86400.9, buf), "1970-01-02T00:00:00.000000Z");
}

static void test_token_validation(void **state)
{
    (void)state;
    char *admin = USER_ID("admin"), *demo = USER_ID("demo");
    char *admin_p = PROJECT_ID("admin"), *demo_p = PROJECT_ID("demo");
    char tok[NB_IDN_HEX_LEN];
    struct nb_ctx ctx;

    /* admin on admin: admin implies member and reader */
    issue(admin, admin_p, 0, tok);
    assert_int_equal(strlen(tok), 64);
    assert_int_equal(auth(tok, &ctx), 0);
    assert_string_equal(ctx.user_id, admin);
    assert_string_equal(ctx.user_name, "admin");
    assert_string_equal(ctx.project_id, admin_p);
    assert_string_equal(ctx.project_name, "admin");
    assert_string_equal(ctx.domain_id, "default");
    assert_true(ctx.is_admin && ctx.is_member && ctx.is_reader);
    assert_true(ctx.token_expires[0] != '\0');
    /* only the hash is stored */
    struct nb_ctx sys;
    nb_ctx_init_system(&sys, NULL);
    assert_int_equal(
        nb_db_int(db, &sys, -1, "SELECT COUNT(*) FROM token WHERE id_hash = ?", "s", tok), 0);

    /* demo on demo: member and reader, not admin */
    issue(demo, demo_p, 0, tok);
    assert_int_equal(auth(tok, &ctx), 0);
    assert_false(ctx.is_admin);
    assert_true(ctx.is_member && ctx.is_reader);

    /* the token's body lists the implied roles too */
    issue(admin, admin_p, 0, tok);
    json_t *t = nb_idn_token_load(&sys, tok, nb_time_now());
    assert_non_null(t);
    json_t *body = nb_idn_token_body(t, true);
    json_t *tb = json_object_get(body, "token");
    assert_int_equal(json_array_size(json_object_get(tb, "roles")), 3);
    assert_string_equal(nb_json_str(json_object_get(tb, "project"), "id"), admin_p);
    assert_true(json_is_false(json_object_get(tb, "is_domain")));
    assert_int_equal(json_array_size(json_object_get(tb, "catalog")), 7);
    assert_string_equal(nb_json_str(json_object_get(json_object_get(tb, "user"), "domain"), "name"),
                        "Default");
    json_decref(body);
    json_decref(t);

    /* demo has no role on the admin project: such a token is refused */
    issue(demo, admin_p, 0, tok);
    assert_int_equal(auth(tok, &ctx), -1);
    assert_int_equal(ctx.err_status, 401);

    /* no token, garbage, expired */
    assert_int_equal(auth(NULL, &ctx), -1);
    assert_int_equal(ctx.err_status, 401);
    assert_int_equal(auth("", &ctx), -1);
    assert_int_equal(auth("garbage", &ctx), -1);
    assert_int_equal(ctx.err_status, 401);
    assert_string_equal(ctx.err_msg, "The request you have made requires authentication.");
    issue(admin, admin_p, nb_time_now() - 5, tok);
    assert_int_equal(auth(tok, &ctx), -1);
    /* issuing cleaned the expired row up */
    issue(admin, admin_p, 0, tok);
    assert_int_equal(nb_db_int(db, &sys, -1, "SELECT COUNT(*) FROM token WHERE expires_at <= ?",
                               "d", nb_time_now()),
                     0);

    /* revoked */
    assert_int_equal(auth(tok, &ctx), 0);
    assert_int_equal(nb_idn_token_revoke(&sys, tok), 1);
    assert_int_equal(auth(tok, &ctx), -1);
    assert_int_equal(nb_idn_token_revoke(&sys, tok), 0);

    /* unscoped: valid, no roles */
    issue(demo, NULL, 0, tok);
    assert_int_equal(auth(tok, &ctx), 0);
    assert_string_equal(ctx.project_id, "");
    assert_false(ctx.is_reader || ctx.is_member || ctx.is_admin);

    /* a disabled user's tokens stop working, and work again when enabled */
    issue(demo, demo_p, 0, tok);
    nb_db_exec(db, &sys, "UPDATE user SET enabled = 0 WHERE id = ?", "s", demo);
    assert_int_equal(auth(tok, &ctx), -1);
    nb_db_exec(db, &sys, "UPDATE user SET enabled = 1 WHERE id = ?", "s", demo);
    assert_int_equal(auth(tok, &ctx), 0);
    /* so do tokens of a disabled project */
    nb_db_exec(db, &sys, "UPDATE project SET enabled = 0 WHERE id = ?", "s", demo_p);
    assert_int_equal(auth(tok, &ctx), -1);
    nb_db_exec(db, &sys, "UPDATE project SET enabled = 1 WHERE id = ?", "s", demo_p);
    assert_int_equal(auth(tok, &ctx), 0);

    free(admin);
    free(demo);
    free(admin_p);
    free(demo_p);
}

/* Dispatches with X-Auth-Token tok; returns the parsed body (may be NULL). */
static json_t *call(const char *method, const char *path, const char *query, const char *tok,
                    const char *body, int *status)
{
    const char *hdr[] = {"X-Auth-Token", tok, NULL};
    char *b = nb_http_dispatch(method, path, query, tok ? hdr : NULL, body, status);
    json_t *j = nb_json_parse(b);
    free(b);
    return j;
}

static void test_api(void **state)
{
    (void)state;
    char *admin = USER_ID("admin"), *demo = USER_ID("demo");
    char *admin_p = PROJECT_ID("admin"), *demo_p = PROJECT_ID("demo");
    char *member = ROLE_ID("member");
    char atok[NB_IDN_HEX_LEN], dtok[NB_IDN_HEX_LEN];
    issue(admin, admin_p, 0, atok);
    issue(demo, demo_p, 0, dtok);
    int st;

    /* discovery needs no token */
    json_t *j = call("GET", "/identity", NULL, NULL, NULL, &st);
    assert_int_equal(st, 300);
    json_t *v = json_array_get(json_object_get(json_object_get(j, "versions"), "values"), 0);
    assert_string_equal(nb_json_str(v, "id"), "v3.14");
    json_decref(j);
    j = call("GET", "/identity/v3/", NULL, NULL, NULL, &st);
    assert_int_equal(st, 200);
    assert_string_equal(nb_json_str(json_object_get(j, "version"), "status"), "stable");
    json_decref(j);

    /* password authentication */
    const char *good = "{\"auth\": {\"identity\": {\"methods\": [\"password\"], \"password\": "
                       "{\"user\": {\"name\": \"demo\", \"domain\": {\"name\": \"Default\"}, "
                       "\"password\": \"demopw\"}}}, \"scope\": {\"project\": {\"name\": "
                       "\"demo\", \"domain\": {\"id\": \"default\"}}}}}";
    j = call("POST", "/identity/v3/auth/tokens", NULL, NULL, good, &st);
    assert_int_equal(st, 201);
    json_t *t = json_object_get(j, "token");
    assert_string_equal(nb_json_str(json_object_get(t, "user"), "id"), demo);
    assert_string_equal(nb_json_str(json_object_get(t, "project"), "id"), demo_p);
    assert_string_equal(json_string_value(json_array_get(json_object_get(t, "methods"), 0)),
                        "password");
    assert_int_equal(json_array_size(json_object_get(t, "roles")), 2); /* member, reader */
    assert_true(strcmp(nb_json_str(t, "expires_at"), nb_json_str(t, "issued_at")) > 0);
    json_decref(j);
    const char *bad = "{\"auth\": {\"identity\": {\"methods\": [\"password\"], \"password\": "
                      "{\"user\": {\"name\": \"demo\", \"domain\": {\"id\": \"default\"}, "
                      "\"password\": \"wrong\"}}}}}";
    j = call("POST", "/identity/v3/auth/tokens", NULL, NULL, bad, &st);
    assert_int_equal(st, 401);
    assert_string_equal(nb_json_str(json_object_get(j, "error"), "title"), "Unauthorized");
    json_decref(j);

    /* policy: a member may not create projects */
    const char *proj = "{\"project\": {\"name\": \"p1\", \"domain_id\": \"default\"}}";
    j = call("POST", "/identity/v3/projects", NULL, dtok, proj, &st);
    assert_int_equal(st, 403);
    assert_string_equal(nb_json_str(json_object_get(j, "error"), "message"),
                        "You are not authorized to perform the requested action: "
                        "identity:create_project.");
    json_decref(j);
    j = call("POST", "/identity/v3/projects", NULL, NULL, proj, &st);
    assert_int_equal(st, 401);
    json_decref(j);

    /* Tempest's dynamic credentials sequence */
    j = call("GET", "/identity/v3/domains", "name=Default", atok, NULL, &st);
    assert_int_equal(st, 200);
    assert_int_equal(json_array_size(json_object_get(j, "domains")), 1);
    json_decref(j);
    j = call("POST", "/identity/v3/projects", NULL, atok, proj, &st);
    assert_int_equal(st, 201);
    char *p1 = strdup(nb_json_str(json_object_get(j, "project"), "id"));
    assert_string_equal(nb_json_str(json_object_get(j, "project"), "parent_id"), "default");
    json_decref(j);
    j = call("POST", "/identity/v3/projects", NULL, atok, proj, &st);
    assert_int_equal(st, 409);
    json_decref(j);
    j = call("POST", "/identity/v3/users", NULL, atok,
             "{\"user\": {\"name\": \"u1\", \"password\": \"pw1\", \"domain_id\": \"default\"}}",
             &st);
    assert_int_equal(st, 201);
    json_t *u = json_object_get(j, "user");
    char *u1 = strdup(nb_json_str(u, "id"));
    assert_null(json_object_get(u, "password"));
    assert_true(json_is_null(json_object_get(u, "password_expires_at")));
    json_decref(j);
    j = call("GET", "/identity/v3/roles", "name=member", atok, NULL, &st);
    assert_int_equal(json_array_size(json_object_get(j, "roles")), 1);
    json_decref(j);
    char path[256];
    snprintf(path, sizeof(path), "/identity/v3/projects/%s/users/%s/roles/%s", p1, u1, member);
    json_decref(call("PUT", path, NULL, atok, NULL, &st));
    assert_int_equal(st, 204);
    json_decref(call("HEAD", path, NULL, atok, NULL, &st));
    assert_int_equal(st, 204);

    /* the new user can now get a token on the new project */
    char tb[512];
    snprintf(tb, sizeof(tb),
             "{\"auth\": {\"identity\": {\"methods\": [\"password\"], \"password\": {\"user\": "
             "{\"id\": \"%s\", \"password\": \"pw1\"}}}, \"scope\": {\"project\": {\"id\": "
             "\"%s\"}}}}",
             u1, p1);
    j = call("POST", "/identity/v3/auth/tokens", NULL, NULL, tb, &st);
    assert_int_equal(st, 201);
    json_decref(j);

    /* role assignments, with names */
    j = call("GET", "/identity/v3/role_assignments", "user.id=x&include_names=True", atok, NULL,
             &st);
    assert_int_equal(st, 200);
    json_decref(j);
    char q[128];
    snprintf(q, sizeof(q), "scope.project.id=%s&include_names", p1);
    j = call("GET", "/identity/v3/role_assignments", q, atok, NULL, &st);
    json_t *ra = json_object_get(j, "role_assignments");
    assert_int_equal(json_array_size(ra), 1);
    json_t *a0 = json_array_get(ra, 0);
    assert_string_equal(nb_json_str(json_object_get(a0, "role"), "name"), "member");
    assert_string_equal(nb_json_str(json_object_get(a0, "user"), "name"), "u1");
    json_decref(j);
    snprintf(q, sizeof(q), "scope.project.id=%s&effective", p1);
    j = call("GET", "/identity/v3/role_assignments", q, atok, NULL, &st);
    assert_int_equal(json_array_size(json_object_get(j, "role_assignments")), 2); /* + reader */
    json_decref(j);

    /* revoke, then delete user and project */
    json_decref(call("DELETE", path, NULL, atok, NULL, &st));
    assert_int_equal(st, 204);
    json_decref(call("HEAD", path, NULL, atok, NULL, &st));
    assert_int_equal(st, 404);
    snprintf(path, sizeof(path), "/identity/v3/users/%s", u1);
    json_decref(call("DELETE", path, NULL, atok, NULL, &st));
    assert_int_equal(st, 204);
    json_decref(call("GET", path, NULL, atok, NULL, &st));
    assert_int_equal(st, 404);
    snprintf(path, sizeof(path), "/identity/v3/projects/%s", p1);
    json_decref(call("DELETE", path, NULL, atok, NULL, &st));
    assert_int_equal(st, 204);

    /* lists with filters */
    j = call("GET", "/identity/v3/projects", "name=demo&domain_id=default&enabled=true", atok, NULL,
             &st);
    assert_int_equal(st, 200);
    assert_int_equal(json_array_size(json_object_get(j, "projects")), 1);
    json_decref(j);
    j = call("GET", "/identity/v3/users", "name=demo&domain_id=default", atok, NULL, &st);
    assert_int_equal(json_array_size(json_object_get(j, "users")), 1);
    json_decref(j);

    /* a domain, a project and user in it; deleting the domain needs it
     * disabled, then takes its contents along */
    j = call("POST", "/identity/v3/domains", NULL, atok, "{\"domain\": {\"name\": \"d2\"}}", &st);
    assert_int_equal(st, 201);
    char *d2 = strdup(nb_json_str(json_object_get(j, "domain"), "id"));
    json_decref(j);
    char body[256];
    snprintf(body, sizeof(body), "{\"project\": {\"name\": \"demo\", \"domain_id\": \"%s\"}}", d2);
    json_decref(call("POST", "/identity/v3/projects", NULL, atok, body, &st));
    assert_int_equal(st, 201); /* same name, other domain */
    snprintf(body, sizeof(body), "{\"user\": {\"name\": \"demo\", \"domain_id\": \"%s\"}}", d2);
    json_decref(call("POST", "/identity/v3/users", NULL, atok, body, &st));
    assert_int_equal(st, 201);
    snprintf(path, sizeof(path), "/identity/v3/domains/%s", d2);
    json_decref(call("DELETE", path, NULL, atok, NULL, &st));
    assert_int_equal(st, 403);
    json_decref(call("PATCH", path, NULL, atok, "{\"domain\": {\"enabled\": false}}", &st));
    assert_int_equal(st, 200);
    json_decref(call("DELETE", path, NULL, atok, NULL, &st));
    assert_int_equal(st, 204);
    struct nb_ctx sys0;
    nb_ctx_init_system(&sys0, NULL);
    assert_int_equal(
        nb_db_int(db, &sys0, -1, "SELECT COUNT(*) FROM project WHERE domain_id = ?", "s", d2), 0);
    assert_int_equal(
        nb_db_int(db, &sys0, -1, "SELECT COUNT(*) FROM user WHERE domain_id = ?", "s", d2), 0);
    json_decref(call("DELETE", "/identity/v3/domains/default", NULL, atok, NULL, &st));
    assert_int_equal(st, 403);
    free(d2);

    /* immutable roles stay */
    snprintf(path, sizeof(path), "/identity/v3/roles/%s", member);
    json_decref(call("DELETE", path, NULL, atok, NULL, &st));
    assert_int_equal(st, 403);

    /* catalog and endpoints */
    j = call("GET", "/identity/v3/auth/catalog", NULL, dtok, NULL, &st);
    assert_int_equal(st, 200);
    json_t *svc = json_array_get(json_object_get(j, "catalog"), 0);
    json_t *ep = json_array_get(json_object_get(svc, "endpoints"), 0);
    assert_string_equal(nb_json_str(ep, "region_id"), "RegionTest");
    assert_true(nb_startswith(nb_json_str(ep, "url"), "http://127.0.0.1:9/"));
    json_decref(j);
    j = call("GET", "/identity/v3/endpoints", "interface=public", atok, NULL, &st);
    assert_int_equal(json_array_size(json_object_get(j, "endpoints")), 7);
    json_decref(j);
    json_decref(call("GET", "/identity/v3/endpoints", NULL, dtok, NULL, &st));
    assert_int_equal(st, 403);

    /* bootstrap again: idempotent, password reset */
    assert_int_equal(nb_identity_bootstrap(&env, "adminpw2", "demopw"), 0);
    struct nb_ctx sys;
    nb_ctx_init_system(&sys, NULL);
    assert_int_equal(nb_db_int(db, &sys, -1, "SELECT COUNT(*) FROM user WHERE name = 'admin'", ""),
                     1);
    assert_int_equal(nb_db_int(db, &sys, -1, "SELECT COUNT(*) FROM assignment", ""), 2);
    json_t *row = nb_db_row(db, &sys, "SELECT password_hash FROM user WHERE name = 'admin'", "");
    assert_true(nb_idn_password_verify("adminpw2", nb_json_str(row, "password_hash")));
    json_decref(row);

    free(p1);
    free(u1);
    free(admin);
    free(demo);
    free(admin_p);
    free(demo_p);
    free(member);
}

/* What the other services ask of identity (they never read its tables):
 * whether a project exists, and the bootstrap's admin project. */
static void test_exports(void **state)
{
    (void)state;
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    char *admin = PROJECT_ID("admin");
    char *got = nb_identity_admin_project_id(db, &ctx);
    assert_non_null(got);
    assert_string_equal(got, admin);
    assert_int_equal(nb_identity_project_exists(db, &ctx, admin), 1);
    /* a domain is a project row too (Keystone's GET /v3/projects/{id}) */
    assert_int_equal(nb_identity_project_exists(db, &ctx, NB_IDN_DEFAULT_DOMAIN), 1);
    assert_int_equal(nb_identity_project_exists(db, &ctx, "0123456789abcdef0123456789abcdef"), 0);
    assert_int_equal(ctx.err_status, 0);
    /* an "admin" project of another domain is not the bootstrap's */
    assert_true(nb_db_exec(db, &ctx, "UPDATE project SET domain_id = 'other' WHERE id = ?", "s",
                           admin) == 1);
    free(got);
    got = nb_identity_admin_project_id(db, &ctx);
    assert_null(got);
    assert_int_equal(ctx.err_status, 0);
    assert_true(nb_db_exec(db, &ctx, "UPDATE project SET domain_id = ? WHERE id = ?", "ss",
                           NB_IDN_DEFAULT_DOMAIN, admin) == 1);
    free(admin);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_password),   cmocka_unit_test(test_role_closure),
        cmocka_unit_test(test_token_hash), cmocka_unit_test(test_token_validation),
        cmocka_unit_test(test_api),        cmocka_unit_test(test_exports),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
