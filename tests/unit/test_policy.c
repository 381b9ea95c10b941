/* test_policy.c - unit tests of the policy table (policy/policy.h): with
 * every service's routes registered, each route has exactly one entry and
 * each entry a route (so a new endpoint cannot be added without deciding who
 * may call it); every write route needs at least member; the guard lets the
 * right roles through and refuses the others with 403 in each service's
 * words. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "common/ctx.h"
#include "common/env.h"
#include "common/http.h"
#include "common/util.h"
#include "compute/api/api.h"
#include "db/db.h"
#include "identity/identity.h"
#include "image/image.h"
#include "network/network.h"
#include "placement/placement.h"
#include "policy/policy.h"
#include "volume/volume.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char dir[] = "/tmp/nubo-test-policy-XXXXXX";
static struct nb_env env;

static void test_every_route_has_an_entry(void **state)
{
    (void)state;
    assert_int_equal(nb_policy_check_routes(true), 0);
    /* one entry per method + pattern */
    size_t n;
    const struct nb_policy_entry *t = nb_policy_table(&n);
    assert_true(n > 250);
    for (size_t i = 0; i < n; i++)
        assert_ptr_equal(nb_policy_find(t[i].method, t[i].pattern), &t[i]);
}

/* A route registered without an entry makes the check fail. */
static int no_op(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    (void)ctx, (void)req;
    return nb_resp_empty(resp, 204);
}

static void test_unlisted_route_is_caught(void **state)
{
    (void)state;
    nb_http_route("POST", "/networking/v2.0/not-in-the-table", no_op, 0);
    assert_int_equal(nb_policy_check_routes(true), 1);
}

/* No write is open to a reader, except key pairs (the user's own) and the
 * identity self-service calls. */
static void test_writes_need_member(void **state)
{
    (void)state;
    size_t n;
    const struct nb_policy_entry *t = nb_policy_table(&n);
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(t[i].method, "GET") || !strcmp(t[i].method, "HEAD"))
            continue;
        if (t[i].rule >= NB_POLICY_MEMBER)
            continue;
        bool self_service = strstr(t[i].pattern, "/os-keypairs") ||
                            !strcmp(t[i].pattern, "/identity/v3/auth/tokens") ||
                            !strcmp(t[i].pattern, "/identity/v3/users/{user_id}/password");
        if (!self_service)
            fail_msg("%s %s is open to readers", t[i].method, t[i].pattern);
    }
}

static void persona(struct nb_ctx *ctx, bool reader, bool member, bool admin)
{
    nb_ctx_init(ctx);
    nb_strlcpy(ctx->project_id, "p1", sizeof(ctx->project_id));
    ctx->is_reader = reader;
    ctx->is_member = member;
    ctx->is_admin = admin;
}

static int guard(struct nb_ctx *ctx, const char *method, const char *path, const char *pattern)
{
    struct nb_req req = {.method = method, .path = path};
    req.service = nb_http_service_of(path);
    return nb_policy_guard(ctx, &req, pattern);
}

static void test_guard(void **state)
{
    (void)state;
    struct nb_ctx ctx;
    const char *net = "/networking/v2.0/networks/{network_id}";

    persona(&ctx, true, false, false); /* reader */
    assert_int_equal(guard(&ctx, "GET", "/networking/v2.0/networks/x", net), 0);
    assert_int_equal(guard(&ctx, "DELETE", "/networking/v2.0/networks/x", net), -1);
    assert_int_equal(ctx.err_status, 403);
    assert_string_equal(ctx.err_name, "PolicyNotAuthorized");
    assert_string_equal(ctx.err_msg, "rule:delete_network is disallowed by policy");

    persona(&ctx, true, false, false);
    assert_int_equal(guard(&ctx, "POST", "/compute/v2.1/servers", "/compute/v2.1/servers"), -1);
    assert_string_equal(ctx.err_msg,
                        "Policy doesn't allow os_compute_api:servers:create to be performed.");
    persona(&ctx, true, false, false);
    assert_int_equal(guard(&ctx, "POST", "/compute/v2.1/os-keypairs", "/compute/v2.1/os-keypairs"),
                     0);
    /* HEAD falls back to the GET entry, as the router does */
    persona(&ctx, true, false, false);
    assert_int_equal(guard(&ctx, "HEAD", "/networking/v2.0/networks/x", net), 0);

    persona(&ctx, true, true, false); /* member */
    assert_int_equal(guard(&ctx, "DELETE", "/networking/v2.0/networks/x", net), 0);
    assert_int_equal(
        guard(&ctx, "PUT", "/networking/v2.0/quotas/p1", "/networking/v2.0/quotas/{project_id}"),
        -1);
    assert_string_equal(ctx.err_msg, "rule:update_quota is disallowed by policy");
    persona(&ctx, true, true, false);
    assert_int_equal(
        guard(&ctx, "POST", "/placement/resource_providers", "/placement/resource_providers"), -1);
    assert_string_equal(ctx.err_name, "placement.undefined_code");
    assert_string_equal(
        ctx.err_msg, "Policy does not allow placement:resource_providers:create to be performed.");
    persona(&ctx, true, true, false);
    assert_int_equal(guard(&ctx, "POST", "/identity/v3/users", "/identity/v3/users"), -1);
    assert_string_equal(ctx.err_msg, "You are not authorized to perform the requested action: "
                                     "identity:create_user.");

    persona(&ctx, true, true, true); /* admin */
    assert_int_equal(
        guard(&ctx, "PUT", "/networking/v2.0/quotas/p1", "/networking/v2.0/quotas/{project_id}"),
        0);
    nb_ctx_init_system(&ctx, NULL); /* internal work */
    assert_int_equal(guard(&ctx, "POST", "/placement/reshaper", "/placement/reshaper"), 0);

    /* no entry: refused, never let through */
    persona(&ctx, true, true, true);
    assert_int_equal(guard(&ctx, "GET", "/compute/v2.1/nowhere", "/compute/v2.1/nowhere"), -1);
    assert_int_equal(ctx.err_status, 500);
}

static int setup(void **state)
{
    (void)state;
    if (!mkdtemp(dir))
        return -1;
    char path[512];
    snprintf(path, sizeof(path), "%s/nubo.sqlite", dir);
    env.db = nb_db_open(path);
    if (!env.db || nb_db_sync(env.db) < 0)
        return -1;
    env.state_path = dir;
    env.region = "RegionTest";
    env.my_host = "test";
    nb_http_init_routes();
    return nb_identity_init(&env) < 0 || nb_image_init(&env) < 0 || nb_volume_init(&env) < 0 ||
                   nb_network_init(&env) < 0 || nb_placement_init(&env) < 0 ||
                   nb_compute_api_init(&env) < 0
               ? -1
               : 0;
}

static int teardown(void **state)
{
    (void)state;
    nb_db_close(env.db);
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_route_has_an_entry),
        cmocka_unit_test(test_writes_need_member),
        cmocka_unit_test(test_guard),
        cmocka_unit_test(test_unlisted_route_is_caught),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
