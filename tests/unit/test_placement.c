/* test_placement.c - placement's capacity math, and the in-process API and
 * HTTP handlers on a scratch SQLite database: claims against capacity
 * (including two threads racing for the last units), shortage
 * explanations, candidates, generations and error codes, and the calls
 * the compute API makes inside its own transactions. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "common/ctx.h"
#include "common/env.h"
#include "common/http.h"
#include "common/json.h"
#include "common/util.h"
#include "db/db.h"
#include "placement/internal.h"
#include "placement/placement.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct nb_db *g_db;
static struct nb_env g_env;

static struct plc_inv inv_of(long long total, long long reserved, double ratio, long long min,
                             long long max, long long step, long long used)
{
    struct plc_inv inv = {.rc = "VCPU",
                          .total = total,
                          .reserved = reserved,
                          .ratio = ratio,
                          .min_unit = min,
                          .max_unit = max,
                          .step_size = step,
                          .used = used};
    return inv;
}

static void test_capacity(void **state)
{
    (void)state;
    assert_int_equal(plc_capacity(10, 2, 1.0), 8);
    assert_int_equal(plc_capacity(10, 2, 1.5), 12);
    /* int() truncation, as placement reports capacity */
    assert_int_equal(plc_capacity(3, 0, 1.5), 4);
    assert_int_equal(plc_capacity(4, 0, 16.0), 64);
    assert_int_equal(plc_capacity(1, 2, 1.0), -1);
    assert_int_equal(plc_capacity(8, 0, 0.0), 0);
}

static void test_fit(void **state)
{
    (void)state;
    struct plc_inv inv = inv_of(8, 0, 1.0, 1, 8, 1, 5);
    assert_int_equal(plc_fit(&inv, inv.used, 3), PLC_FIT_OK); /* exactly full */
    assert_int_equal(plc_fit(&inv, inv.used, 4), PLC_FIT_CAPACITY);
    assert_int_equal(plc_free(&inv), 3);
    inv = inv_of(8, 2, 2.0, 2, 4, 2, 0);                       /* capacity 12 */
    assert_int_equal(plc_fit(&inv, 0, 1), PLC_FIT_CONSTRAINT); /* < min_unit */
    assert_int_equal(plc_fit(&inv, 0, 3), PLC_FIT_CONSTRAINT); /* step_size */
    assert_int_equal(plc_fit(&inv, 0, 6), PLC_FIT_CONSTRAINT); /* > max_unit */
    assert_int_equal(plc_fit(&inv, 8, 4), PLC_FIT_OK);
    assert_int_equal(plc_fit(&inv, 10, 4), PLC_FIT_CAPACITY);
    /* fractional ratio: 3 * 1.5 = 4.5 holds 4, not 5 */
    inv = inv_of(3, 0, 1.5, 1, 10, 1, 0);
    assert_int_equal(plc_fit(&inv, 0, 4), PLC_FIT_OK);
    assert_int_equal(plc_fit(&inv, 0, 5), PLC_FIT_CAPACITY);
    /* over-committed provider (total lowered below usage) has no room */
    inv = inv_of(4, 0, 1.0, 1, 10, 1, 6);
    assert_int_equal(plc_fit(&inv, inv.used, 1), PLC_FIT_CAPACITY);
    assert_int_equal(plc_free(&inv), 0);
}

static void test_inventory_rule(void **state)
{
    (void)state;
    /* reserved == total is allowed from 1.26 only */
    assert_false(plc_inv_capacity_ok(4, 4, 1.0, 25));
    assert_true(plc_inv_capacity_ok(4, 4, 1.0, 26));
    assert_false(plc_inv_capacity_ok(4, 5, 1.0, 39));
    assert_true(plc_inv_capacity_ok(4, 3, 1.0, 1));
}

/* ---- in-process API on a database ---- */

static const char RP1[] = "11111111-1111-4111-8111-111111111111";
static const char RP2[] = "22222222-2222-4222-8222-222222222222";

static void reset_db(void)
{
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    const char *tables[] = {"allocations",
                            "consumers",
                            "inventories",
                            "resource_provider_traits",
                            "resource_provider_aggregates",
                            "resource_providers"};
    for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++) {
        char sql[128];
        snprintf(sql, sizeof(sql), "DELETE FROM %s", tables[i]);
        assert_true(nb_db_exec(g_db, &ctx, sql, "") >= 0);
    }
    /* Direct SQL must tell the search snapshot, as placement's writes do. */
    assert_true(nb_db_exec(g_db, &ctx, "UPDATE placement_state SET version = version + 1", "") >=
                0);
}

static void make_provider(const char *uuid, const char *name, int vcpus, int ram)
{
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(nb_placement_ensure_provider(&ctx, uuid, name), 0);
    json_t *inv = json_pack("{s:{s:i, s:i}, s:{s:i, s:i}}", "VCPU", "total", vcpus, "max_unit",
                            vcpus, "MEMORY_MB", "total", ram, "max_unit", ram);
    assert_int_equal(nb_placement_set_inventories(&ctx, uuid, inv), 0);
    json_decref(inv);
}

static int claim(const char *consumer, const char *rp, int vcpus, struct nb_ctx *ctx)
{
    json_t *res = json_pack("{s:i, s:i}", "VCPU", vcpus, "MEMORY_MB", 0);
    int rc = nb_placement_claim(ctx, consumer, "proj", "user", rp, res, -1);
    json_decref(res);
    return rc;
}

static void test_claim_capacity(void **state)
{
    (void)state;
    reset_db();
    make_provider(RP1, "node-1", 4, 2048);
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(claim("aaaaaaaa-0000-4000-8000-000000000001", RP1, 3, &ctx), 0);
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(claim("aaaaaaaa-0000-4000-8000-000000000002", RP1, 2, &ctx), -1);
    assert_int_equal(ctx.err_status, 409);
    assert_non_null(strstr(ctx.err_msg, RP1));
    assert_non_null(strstr(ctx.err_msg, "'VCPU'"));
    /* the same consumer again: 1.28 semantics want its generation */
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(claim("aaaaaaaa-0000-4000-8000-000000000001", RP1, 1, &ctx), -1);
    assert_int_equal(ctx.err_status, 409);
    assert_string_equal(ctx.err_name, "placement.concurrent_update");
    nb_ctx_init_system(&ctx, NULL);
    char *who = nb_placement_consumer_provider(&ctx, "aaaaaaaa-0000-4000-8000-000000000001");
    assert_non_null(who);
    assert_string_equal(who, RP1);
    free(who);
    /* the one consumer with allocations (the refused one has none) */
    json_t *consumers = nb_placement_list_consumers(&ctx);
    assert_non_null(consumers);
    assert_int_equal(json_array_size(consumers), 1);
    assert_string_equal(json_string_value(json_array_get(consumers, 0)),
                        "aaaaaaaa-0000-4000-8000-000000000001");
    json_decref(consumers);

    /* explanation names the largest free amount and where */
    json_t *want = json_pack("{s:i, s:i}", "VCPU", 2, "MEMORY_MB", 512);
    char *why = nb_placement_explain_shortage(&ctx, want);
    assert_non_null(why);
    assert_string_equal(why, "VCPU: requested 2, largest free 1 (node-1)");
    free(why);
    json_t *cands = nb_placement_candidates(&ctx, want, NULL, NULL, 0);
    assert_non_null(cands);
    assert_int_equal(json_array_size(json_object_get(cands, "allocation_requests")), 0);
    json_decref(cands);
    json_decref(want);

    /* freeing makes room again */
    assert_int_equal(nb_placement_delete_allocations(&ctx, "aaaaaaaa-0000-4000-8000-000000000001"),
                     0);
    consumers = nb_placement_list_consumers(&ctx);
    assert_int_equal(json_array_size(consumers), 0);
    json_decref(consumers);
    want = json_pack("{s:i}", "VCPU", 4);
    why = nb_placement_explain_shortage(&ctx, want);
    assert_string_equal(why, "");
    free(why);
    cands = nb_placement_candidates(&ctx, want, NULL, NULL, 0);
    json_t *areqs = json_object_get(cands, "allocation_requests");
    assert_int_equal(json_array_size(areqs), 1);
    json_t *res = json_object_get(
        json_object_get(json_object_get(json_array_get(areqs, 0), "allocations"), RP1),
        "resources");
    assert_int_equal(nb_json_int(res, "VCPU", 0), 4);
    json_t *sum = json_object_get(json_object_get(cands, "provider_summaries"), RP1);
    assert_int_equal(
        nb_json_int(json_object_get(json_object_get(sum, "resources"), "MEMORY_MB"), "capacity", 0),
        2048);
    json_decref(cands);
    json_decref(want);
}

static void test_candidates_traits(void **state)
{
    (void)state;
    reset_db();
    make_provider(RP1, "node-1", 8, 4096);
    make_provider(RP2, "node-2", 2, 4096);
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    json_t *traits = json_pack("[s, s]", "HW_CPU_X86_AVX2", "CUSTOM_GOLD");
    assert_int_equal(nb_placement_set_traits(&ctx, RP2, traits), 0);
    json_decref(traits);

    json_t *want = json_pack("{s:i}", "VCPU", 2);
    json_t *req = json_pack("[s]", "CUSTOM_GOLD");
    json_t *c = nb_placement_candidates(&ctx, want, req, NULL, 0);
    json_t *areqs = json_object_get(c, "allocation_requests");
    assert_int_equal(json_array_size(areqs), 1);
    assert_non_null(json_object_get(json_object_get(json_array_get(areqs, 0), "allocations"), RP2));
    json_decref(c);
    json_decref(req);

    req = json_pack("[s]", "!CUSTOM_GOLD");
    c = nb_placement_candidates(&ctx, want, req, NULL, 0);
    areqs = json_object_get(c, "allocation_requests");
    assert_int_equal(json_array_size(areqs), 1);
    assert_non_null(json_object_get(json_object_get(json_array_get(areqs, 0), "allocations"), RP1));
    json_decref(c);
    json_decref(req);

    /* both fit without traits, limited to one */
    c = nb_placement_candidates(&ctx, want, NULL, NULL, 1);
    assert_int_equal(json_array_size(json_object_get(c, "allocation_requests")), 1);
    assert_int_equal(json_object_size(json_object_get(c, "provider_summaries")), 1);
    json_decref(c);

    /* unknown trait is a 400 */
    req = json_pack("[s]", "CUSTOM_NOPE");
    nb_ctx_init_system(&ctx, NULL);
    assert_null(nb_placement_candidates(&ctx, want, req, NULL, 0));
    assert_int_equal(ctx.err_status, 400);
    json_decref(req);
    json_decref(want);
}

/* The answer written as text is what jansson prints of the tree, at the
 * microversions where its shape changes, with traits, usage and a limit. */
static void test_candidates_text_same_bytes(void **state)
{
    (void)state;
    reset_db();
    make_provider(RP1, "node-1", 8, 4096);
    make_provider(RP2, "node-2", 4, 2048);
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    json_t *traits = json_pack("[s, s]", "HW_CPU_X86_AVX2", "CUSTOM_GOLD");
    assert_int_equal(nb_placement_set_traits(&ctx, RP2, traits), 0);
    json_decref(traits);
    assert_int_equal(claim("aaaaaaaa-0000-4000-8000-000000000009", RP1, 3, &ctx), 0);
    static const int mvs[] = {10, 11, 12, 17, 28, 29, 33, 34, 39};
    for (size_t m = 0; m < sizeof(mvs) / sizeof(mvs[0]); m++)
        for (int limit = 0; limit <= 1; limit++) {
            struct plc_acreq rq = {.ngroups = 1, .limit = limit, .mv = mvs[m]};
            rq.groups = calloc(1, sizeof(*rq.groups));
            assert_non_null(rq.groups);
            rq.groups[0].resources = json_pack("{s:i, s:i}", "VCPU", 1, "MEMORY_MB", 512);
            nb_ctx_init_system(&ctx, NULL);
            json_t *tree = plc_candidates(&ctx, &rq);
            assert_non_null(tree);
            size_t len = 0;
            char *text = plc_candidates_text(&ctx, &rq, &len);
            assert_non_null(text);
            char *want = json_dumps(tree, JSON_COMPACT);
            assert_string_equal(text, want);
            assert_int_equal(len, strlen(want));
            free(want);
            free(text);
            json_decref(tree);
            plc_groups_free(&rq);
        }
}

static size_t ncands(json_t *want, json_t *required)
{
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    json_t *c = nb_placement_candidates(&ctx, want, required, NULL, 0);
    assert_non_null(c);
    size_t n = json_array_size(json_object_get(c, "allocation_requests"));
    json_decref(c);
    return n;
}

/* The cached search snapshot follows every kind of change. */
static void test_snapshot_refresh(void **state)
{
    (void)state;
    reset_db();
    make_provider(RP1, "node-1", 4, 1024);
    json_t *six = json_pack("{s:i}", "VCPU", 6);
    json_t *gold = json_pack("[s]", "CUSTOM_GOLD");
    assert_int_equal(ncands(six, NULL), 0);
    make_provider(RP1, "node-1", 8, 1024); /* inventory grows */
    assert_int_equal(ncands(six, NULL), 1);
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(nb_placement_set_traits(&ctx, RP1, gold), 0);
    assert_int_equal(ncands(six, gold), 1);
    json_t *none = json_array();
    assert_int_equal(nb_placement_set_traits(&ctx, RP1, none), 0);
    assert_int_equal(ncands(six, gold), 0);
    json_decref(none);
    /* usage is always current */
    assert_int_equal(claim("dddddddd-0000-4000-8000-000000000001", RP1, 3, &ctx), 0);
    assert_int_equal(ncands(six, NULL), 0);
    make_provider(RP2, "node-2", 6, 1024); /* a new provider */
    assert_int_equal(ncands(six, NULL), 1);
    json_decref(six);
    json_decref(gold);
}

struct racer {
    const char *consumer;
    int rc;
    int status;
};

static void *race(void *arg)
{
    struct racer *r = arg;
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    r->rc = claim(r->consumer, RP1, 3, &ctx);
    r->status = ctx.err_status;
    return NULL;
}

static void test_concurrent_claims(void **state)
{
    (void)state;
    for (int round = 0; round < 20; round++) {
        reset_db();
        make_provider(RP1, "node-1", 4, 2048);
        struct racer a = {"bbbbbbbb-0000-4000-8000-000000000001", 0, 0};
        struct racer b = {"bbbbbbbb-0000-4000-8000-000000000002", 0, 0};
        pthread_t ta, tb;
        assert_int_equal(pthread_create(&ta, NULL, race, &a), 0);
        assert_int_equal(pthread_create(&tb, NULL, race, &b), 0);
        pthread_join(ta, NULL);
        pthread_join(tb, NULL);
        /* exactly one of two 3-VCPU claims on 4 VCPUs wins */
        assert_int_equal((a.rc == 0) + (b.rc == 0), 1);
        assert_int_equal(a.rc == 0 ? b.status : a.status, 409);
        struct nb_ctx ctx;
        nb_ctx_init_system(&ctx, NULL);
        assert_int_equal(nb_db_int(g_db, &ctx, -1,
                                   "SELECT SUM(used) FROM allocations WHERE resource_class = ?",
                                   "s", "VCPU"),
                         3);
    }
}

/* ---- HTTP handlers through in-process dispatch ---- */

static int fake_auth(struct nb_ctx *ctx, const char *token)
{
    ctx->is_admin = strcmp(token, "admin") == 0;
    ctx->is_member = ctx->is_reader = true;
    nb_strlcpy(ctx->project_id, "proj", sizeof(ctx->project_id));
    return 0;
}

static json_t *call(const char *method, const char *path, const char *query, const char *mv,
                    const char *body, int *status)
{
    const char *hdr[] = {"X-Auth-Token",     "admin", "OpenStack-API-Version", mv, "Content-Type",
                         "application/json", NULL};
    char *text = nb_http_dispatch(method, path, query, hdr, body, status);
    json_t *j = nb_json_parse(text);
    free(text);
    return j;
}

static void test_http(void **state)
{
    (void)state;
    reset_db();
    int st;
    json_t *j = call("GET", "/placement", NULL, "placement 1.0", NULL, &st);
    assert_int_equal(st, 200);
    assert_string_equal(
        nb_json_str(json_array_get(json_object_get(j, "versions"), 0), "max_version"), "1.39");
    json_decref(j);

    char body[512];
    snprintf(body, sizeof(body), "{\"name\": \"n1\", \"uuid\": \"%s\"}", RP1);
    j = call("POST", "/placement/resource_providers", NULL, "placement 1.19", body, &st);
    assert_int_equal(st, 201);
    json_decref(j);
    /* error codes are in the body from 1.23 */
    j = call("POST", "/placement/resource_providers", NULL, "placement 1.20", "{\"name\": \"n1\"}",
             &st);
    assert_int_equal(st, 409);
    assert_null(json_object_get(json_array_get(json_object_get(j, "errors"), 0), "code"));
    json_decref(j);
    j = call("POST", "/placement/resource_providers", NULL, "placement 1.23", "{\"name\": \"n1\"}",
             &st);
    assert_int_equal(st, 409);
    assert_string_equal(nb_json_str(json_array_get(json_object_get(j, "errors"), 0), "code"),
                        "placement.duplicate_name");
    json_decref(j);

    char path[256];
    snprintf(path, sizeof(path), "/placement/resource_providers/%s/inventories", RP1);
    j = call("PUT", path, NULL, "placement 1.39",
             "{\"resource_provider_generation\": 0, \"inventories\": "
             "{\"VCPU\": {\"total\": 2, \"allocation_ratio\": 2.0}}}",
             &st);
    assert_int_equal(st, 200);
    assert_int_equal(nb_json_int(j, "resource_provider_generation", -1), 1);
    json_decref(j);
    /* stale generation */
    j = call("PUT", path, NULL, "placement 1.39",
             "{\"resource_provider_generation\": 0, \"inventories\": {}}", &st);
    assert_int_equal(st, 409);
    assert_string_equal(nb_json_str(json_array_get(json_object_get(j, "errors"), 0), "code"),
                        "placement.concurrent_update");
    json_decref(j);

    snprintf(body, sizeof(body),
             "{\"allocations\": {\"%s\": {\"resources\": {\"VCPU\": 3}}}, \"project_id\": "
             "\"p\", \"user_id\": \"u\", \"consumer_generation\": null}",
             RP1);
    j = call("PUT", "/placement/allocations/cccccccc-0000-4000-8000-000000000001", NULL,
             "placement 1.28", body, &st);
    assert_int_equal(st, 204);
    json_decref(j);
    j = call("GET", "/placement/allocations/cccccccc-0000-4000-8000-000000000001", NULL,
             "placement 1.28", NULL, &st);
    assert_int_equal(st, 200);
    assert_int_equal(nb_json_int(j, "consumer_generation", -1), 1);
    json_decref(j);

    /* removing an inventory in use is refused */
    j = call("PUT", path, NULL, "placement 1.39",
             "{\"resource_provider_generation\": 2, \"inventories\": {}}", &st);
    assert_int_equal(st, 409);
    assert_string_equal(nb_json_str(json_array_get(json_object_get(j, "errors"), 0), "code"),
                        "placement.inventory.inuse");
    json_decref(j);

    j = call("GET", "/placement/allocation_candidates", "resources=VCPU:1", "placement 1.39", NULL,
             &st);
    assert_int_equal(st, 200);
    json_t *sum = json_object_get(json_object_get(j, "provider_summaries"), RP1);
    json_t *vcpu = json_object_get(json_object_get(sum, "resources"), "VCPU");
    assert_int_equal(nb_json_int(vcpu, "capacity", 0), 4);
    assert_int_equal(nb_json_int(vcpu, "used", 0), 3);
    json_decref(j);
    j = call("GET", "/placement/allocation_candidates", "resources=VCPU:2", "placement 1.39", NULL,
             &st);
    assert_int_equal(json_array_size(json_object_get(j, "allocation_requests")), 0);
    json_decref(j);

    snprintf(path, sizeof(path), "/placement/resource_providers/%s", RP1);
    j = call("DELETE", path, NULL, "placement 1.39", NULL, &st);
    assert_int_equal(st, 409);
    json_decref(j);
    j = call("DELETE", "/placement/allocations/cccccccc-0000-4000-8000-000000000001", NULL,
             "placement 1.39", NULL, &st);
    assert_int_equal(st, 204);
    json_decref(j);
    j = call("DELETE", path, NULL, "placement 1.39", NULL, &st);
    assert_int_equal(st, 204);
    json_decref(j);
}

/* The write path's shortcuts: one duplicate query naming the uuid first,
 * the inventory PUT's single lookup (404 before a bad body), the
 * generation it answers, updates of existing rows and standard classes
 * known without a query. */
static void test_provider_writes(void **state)
{
    (void)state;
    reset_db();
    assert_true(plc_rc_is_standard("VCPU"));
    assert_true(plc_rc_is_standard("DISK_GB"));
    assert_false(plc_rc_is_standard("CUSTOM_X"));
    assert_false(plc_rc_is_standard("VCPUS"));
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    assert_true(plc_rc_exists(&ctx, "MEMORY_MB"));
    assert_false(plc_rc_exists(&ctx, "CUSTOM_NOPE"));
    assert_false(nb_ctx_failed(&ctx));

    int st;
    char body[512], path[256];
    snprintf(body, sizeof(body), "{\"name\": \"w1\", \"uuid\": \"%s\"}", RP1);
    json_t *j = call("POST", "/placement/resource_providers", NULL, "placement 1.39", body, &st);
    assert_int_equal(st, 200);
    assert_string_equal(nb_json_str(j, "uuid"), RP1);
    assert_int_equal(nb_json_int(j, "generation", -1), 0);
    /* the view's links: self, then each relation under it */
    json_t *links = json_object_get(j, "links");
    assert_int_equal(json_array_size(links), 6);
    static const char *const rels[] = {"self",       "inventories", "usages",
                                       "aggregates", "traits",      "allocations"};
    for (size_t i = 0; i < 6; i++) {
        json_t *l = json_array_get(links, i);
        char want[160];
        snprintf(want, sizeof(want), "/placement/resource_providers/%s%s%s", RP1, i ? "/" : "",
                 i ? rels[i] : "");
        assert_string_equal(nb_json_str(l, "rel"), rels[i]);
        assert_string_equal(nb_json_str(l, "href"), want);
    }
    assert_true(json_is_null(json_object_get(j, "parent_provider_uuid")));
    assert_string_equal(nb_json_str(j, "root_provider_uuid"), RP1);
    json_decref(j);
    snprintf(body, sizeof(body), "{\"name\": \"w2\", \"uuid\": \"%s\"}", RP2);
    j = call("POST", "/placement/resource_providers", NULL, "placement 1.39", body, &st);
    assert_int_equal(st, 200);
    json_decref(j);
    /* both the uuid (of w1) and the name (of w2) are taken: the uuid is named */
    snprintf(body, sizeof(body), "{\"name\": \"w2\", \"uuid\": \"%s\"}", RP1);
    j = call("POST", "/placement/resource_providers", NULL, "placement 1.39", body, &st);
    assert_int_equal(st, 409);
    assert_non_null(strstr(nb_json_str(json_array_get(json_object_get(j, "errors"), 0), "detail"),
                           "Conflicting resource provider uuid"));
    json_decref(j);
    j = call("POST", "/placement/resource_providers", NULL, "placement 1.39",
             "{\"name\": \"w2\", \"uuid\": \"33333333-3333-4333-8333-333333333333\"}", &st);
    assert_int_equal(st, 409);
    assert_non_null(strstr(nb_json_str(json_array_get(json_object_get(j, "errors"), 0), "detail"),
                           "Conflicting resource provider name: w2 already exists."));
    json_decref(j);

    /* a missing provider is a 404 even with a bad body */
    j = call("PUT",
             "/placement/resource_providers/44444444-4444-4444-8444-444444444444/inventories", NULL,
             "placement 1.39", "{\"inventories\": 1}", &st);
    assert_int_equal(st, 404);
    json_decref(j);
    snprintf(path, sizeof(path), "/placement/resource_providers/%s/inventories", RP1);
    j = call("PUT", path, NULL, "placement 1.39", "{\"inventories\": 1}", &st);
    assert_int_equal(st, 400);
    json_decref(j);
    j = call("PUT", path, NULL, "placement 1.39",
             "{\"resource_provider_generation\": 0, \"inventories\": "
             "{\"VCPU\": {\"total\": 8}, \"CUSTOM_NOPE\": {\"total\": 1}}}",
             &st);
    assert_int_equal(st, 400);
    json_decref(j);
    j = call("PUT", path, NULL, "placement 1.39",
             "{\"resource_provider_generation\": 0, \"inventories\": "
             "{\"VCPU\": {\"total\": 8}, \"DISK_GB\": {\"total\": 100}}}",
             &st);
    assert_int_equal(st, 200);
    assert_int_equal(nb_json_int(j, "resource_provider_generation", -1), 1);
    json_decref(j);
    /* an update of one row, a removal, an unchanged row */
    j = call("PUT", path, NULL, "placement 1.39",
             "{\"resource_provider_generation\": 1, \"inventories\": "
             "{\"VCPU\": {\"total\": 16, \"reserved\": 2}}}",
             &st);
    assert_int_equal(st, 200);
    assert_int_equal(nb_json_int(j, "resource_provider_generation", -1), 2);
    json_decref(j);
    j = call("PUT", path, NULL, "placement 1.39",
             "{\"resource_provider_generation\": 1, \"inventories\": {}}", &st);
    assert_int_equal(st, 409);
    json_decref(j);
    j = call("GET", path, NULL, "placement 1.39", NULL, &st);
    assert_int_equal(st, 200);
    assert_int_equal(nb_json_int(j, "resource_provider_generation", -1), 2);
    json_t *inv = json_object_get(j, "inventories");
    assert_int_equal(json_object_size(inv), 1);
    assert_int_equal(nb_json_int(json_object_get(inv, "VCPU"), "total", 0), 16);
    assert_int_equal(nb_json_int(json_object_get(inv, "VCPU"), "reserved", 0), 2);
    json_decref(j);
    snprintf(path, sizeof(path), "/placement/resource_providers/%s", RP1);
    j = call("GET", path, NULL, "placement 1.39", NULL, &st);
    assert_int_equal(nb_json_int(j, "generation", -1), 2);
    json_decref(j);
}

static int setup(void **state)
{
    (void)state;
    static char dir[] = "/tmp/nubo-test-placement-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[512];
    snprintf(path, sizeof(path), "%s/nubo.sqlite", dir);
    g_db = nb_db_open(path);
    assert_non_null(g_db);
    assert_true(nb_db_sync(g_db) >= 0);
    g_env.db = g_db;
    g_env.state_path = dir;
    assert_int_equal(nb_placement_init(&g_env), 0);
    nb_http_set_auth(fake_auth, NULL);
    return 0;
}

/* A repeated limit: every value is checked (placement's schema checks
 * only the last, then int() of the first fails: a 500), the first used. */
static void test_candidates_repeated_limit(void **state)
{
    (void)state;
    reset_db();
    make_provider(RP1, "node-1", 8, 4096);
    make_provider(RP2, "node-2", 8, 4096);
    int st;
    json_t *j = call("GET", "/placement/allocation_candidates", "resources=VCPU:1&limit=x&limit=5",
                     "placement 1.39", NULL, &st);
    assert_int_equal(st, 400);
    assert_non_null(strstr(nb_json_str(json_array_get(json_object_get(j, "errors"), 0), "detail"),
                           "'x' does not match"));
    json_decref(j);
    j = call("GET", "/placement/allocation_candidates", "resources=VCPU:1&limit=5&limit=0",
             "placement 1.39", NULL, &st);
    assert_int_equal(st, 400);
    json_decref(j);
    j = call("GET", "/placement/allocation_candidates", "resources=VCPU:1&limit=1&limit=5",
             "placement 1.39", NULL, &st);
    assert_int_equal(st, 200);
    assert_int_equal(json_array_size(json_object_get(j, "allocation_requests")), 1);
    json_decref(j);
}

/* A combination wider than any fixed buffer (320 classes from 5 groups on
 * one provider) comes back whole. */
static void test_candidates_wide_combination(void **state)
{
    (void)state;
    reset_db();
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(nb_placement_ensure_provider(&ctx, RP1, "node-1"), 0);
    json_t *inv = json_object();
    char *q = NULL;
    size_t qlen = 0;
    FILE *f = open_memstream(&q, &qlen);
    int st;
    for (int i = 0; i < 320; i++) {
        char rc[32], path[96];
        snprintf(rc, sizeof(rc), "CUSTOM_R%d", i);
        snprintf(path, sizeof(path), "/placement/resource_classes/%s", rc);
        json_decref(call("PUT", path, NULL, "placement 1.7", NULL, &st));
        assert_int_equal(st, 201);
        json_object_set_new(inv, rc, json_pack("{s:i}", "total", 1));
        if (i % 64 == 0)
            fprintf(f, "%sresources%s=", i ? "&" : "", i ? (char[]){(char)('0' + i / 64), 0} : "");
        else
            fputc(',', f);
        fprintf(f, "%s:1", rc);
    }
    fputs("&group_policy=none", f);
    fclose(f);
    assert_int_equal(nb_placement_set_inventories(&ctx, RP1, inv), 0);
    json_decref(inv);
    json_t *j = call("GET", "/placement/allocation_candidates", q, "placement 1.39", NULL, &st);
    free(q);
    assert_int_equal(st, 200);
    json_t *areqs = json_object_get(j, "allocation_requests");
    assert_int_equal(json_array_size(areqs), 1);
    json_t *res = json_object_get(
        json_object_get(json_object_get(json_array_get(areqs, 0), "allocations"), RP1),
        "resources");
    assert_int_equal(json_object_size(res), 320);
    json_decref(j);
}

/* Candidates for one VCPU that are members of aggregate agg. */
static size_t ncands_in(const char *agg)
{
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    json_t *want = json_pack("{s:i}", "VCPU", 1), *member_of = json_pack("[s]", agg);
    json_t *c = nb_placement_candidates(&ctx, want, NULL, member_of, 0);
    assert_non_null(c);
    size_t n = json_array_size(json_object_get(c, "allocation_requests"));
    json_decref(c);
    json_decref(want);
    json_decref(member_of);
    return n;
}

static long long rp_generation(const char *uuid)
{
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    json_t *row = plc_rp_get(&ctx, uuid);
    assert_non_null(row);
    long long g = nb_json_int(row, "generation", -1);
    json_decref(row);
    return g;
}

/* The calls the compute API makes inside its own transactions: aggregate
 * membership by provider uuid or name, with the generation bumped only on
 * a change, and a provider delete taking its tree, allocations and empty
 * consumers along; the search cache follows commits and rollbacks. */
static void test_compute_calls(void **state)
{
    (void)state;
    static const char AGG[] = "aaaaaaaa-0000-4000-8000-000000000001";
    static const char RP3[] = "33333333-3333-4333-8333-333333333333";
    static const char C1[] = "cccccccc-0000-4000-8000-000000000001";
    reset_db();
    make_provider(RP1, "node-1", 4, 1024);
    make_provider(RP2, "node-2", 4, 1024);
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    long long g = rp_generation(RP1);
    assert_int_equal(nb_db_begin(g_db, &ctx), 0);
    assert_int_equal(nb_placement_add_provider_aggregate(&ctx, NULL, "node-1", AGG), 1);
    assert_int_equal(nb_placement_add_provider_aggregate(&ctx, RP1, "node-1", AGG), 0);
    assert_int_equal(nb_placement_add_provider_aggregate(&ctx, RP2, NULL, AGG), 1);
    assert_int_equal(nb_db_commit(g_db, &ctx), 0);
    assert_int_equal(rp_generation(RP1), g + 1);
    assert_int_equal(ncands_in(AGG), 2);
    assert_int_equal(nb_db_begin(g_db, &ctx), 0);
    assert_int_equal(nb_placement_remove_provider_aggregate(&ctx, RP2, "nope", AGG), 1);
    assert_int_equal(nb_placement_remove_provider_aggregate(&ctx, RP2, NULL, AGG), 0);
    assert_int_equal(nb_db_commit(g_db, &ctx), 0);
    assert_int_equal(ncands_in(AGG), 1);

    /* RP1 gets a child and an allocation; a rolled-back delete leaves all. */
    char body[256];
    snprintf(body, sizeof(body),
             "{\"name\": \"n3\", \"uuid\": \"%s\", \"parent_provider_uuid\": \"%s\"}", RP3, RP1);
    int st;
    json_decref(call("POST", "/placement/resource_providers", NULL, "placement 1.14", body, &st));
    assert_int_equal(st, 201);
    assert_int_equal(claim(C1, RP1, 1, &ctx), 0);
    assert_int_equal(nb_db_begin(g_db, &ctx), 0);
    assert_int_equal(nb_placement_delete_provider(&ctx, RP1), 1);
    nb_db_rollback(g_db);
    assert_int_equal(ncands_in(AGG), 1);
    char *held = nb_placement_consumer_provider(&ctx, C1);
    assert_string_equal(held, RP1);
    free(held);

    assert_int_equal(nb_db_begin(g_db, &ctx), 0);
    assert_int_equal(nb_placement_delete_provider(&ctx, RP1), 1);
    assert_int_equal(nb_placement_delete_provider(&ctx, RP1), 0);
    assert_int_equal(nb_placement_delete_provider(&ctx, "not-a-uuid"), 0);
    assert_int_equal(nb_db_commit(g_db, &ctx), 0);
    assert_int_equal(ncands_in(AGG), 0);
    json_decref(call("GET", "/placement/resource_providers/33333333-3333-4333-8333-333333333333",
                     NULL, "placement 1.14", NULL, &st));
    assert_int_equal(st, 404);
    assert_null(nb_placement_consumer_provider(&ctx, C1));
    assert_int_equal(
        nb_db_int(g_db, &ctx, -1, "SELECT COUNT(*) FROM consumers WHERE uuid = ?", "s", C1), 0);
    json_t *one = json_pack("{s:i}", "VCPU", 1);
    assert_int_equal(ncands(one, NULL), 1); /* RP2 stays */
    json_decref(one);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_capacity),
        cmocka_unit_test(test_fit),
        cmocka_unit_test(test_inventory_rule),
        cmocka_unit_test(test_claim_capacity),
        cmocka_unit_test(test_candidates_traits),
        cmocka_unit_test(test_candidates_text_same_bytes),
        cmocka_unit_test(test_concurrent_claims),
        cmocka_unit_test(test_snapshot_refresh),
        cmocka_unit_test(test_http),
        cmocka_unit_test(test_provider_writes),
        cmocka_unit_test(test_candidates_repeated_limit),
        cmocka_unit_test(test_candidates_wide_combination),
        cmocka_unit_test(test_compute_calls),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
