/* test_core.c - unit tests of the shared core: util, config, the request
 * context's error scope, db, bus, the HTTP router (through in-process
 * dispatch) and the status mapping. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "bus/bus.h"
#include "common/config.h"
#include "common/ctx.h"
#include "common/http.h"
#include "common/json.h"
#include "common/util.h"
#include "compute/compute.h"
#include "db/db.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void test_uuid(void **state)
{
    (void)state;
    char a[NB_UUID_LEN], b[NB_UUID_LEN];
    nb_uuid(a);
    nb_uuid(b);
    assert_true(nb_is_uuid(a));
    assert_string_not_equal(a, b);
    assert_true(nb_is_uuid("0123456789abcdef0123456789ABCDEF"));
    assert_false(nb_is_uuid("not-a-uuid"));
    assert_false(nb_is_uuid("0123456789abcdef0123456789abcdeg"));
    assert_false(nb_is_uuid(NULL));
}

static void test_time_parse(void **state)
{
    (void)state;
    assert_true(nb_time_parse("1970-01-01T00:00:10Z") == 10.0);
    assert_true(nb_time_parse("1970-01-01T01:00:10+01:00") == 10.0);
    assert_true(nb_time_parse("1970-01-01T00:00:10.5") == 10.5);
    assert_true(nb_time_parse("garbage") < 0);
    char buf[32];
    assert_string_equal(nb_time_iso(86400, buf), "1970-01-02T00:00:00Z");
}

static void test_config(void **state)
{
    (void)state;
    nb_conf_reset();
    char path[] = "/tmp/nubo-test-conf-XXXXXX";
    int fd = mkstemp(path);
    const char *text = "[DEFAULT]\nhost = h1\n[scheduler]\nmax_attempts = 5\n[x]\nflag = True\n";
    assert_int_equal(write(fd, text, strlen(text)), (int)strlen(text));
    close(fd);
    assert_int_equal(nb_conf_load(path), 0);
    assert_string_equal(nb_conf_str("DEFAULT", "host", "?"), "h1");
    assert_int_equal(nb_conf_int("scheduler", "max_attempts", 3), 5);
    assert_int_equal(nb_conf_int("scheduler", "missing", 3), 3);
    assert_true(nb_conf_bool("x", "flag", false));
    assert_int_equal(nb_conf_set_arg("scheduler.max_attempts=7"), 0);
    assert_int_equal(nb_conf_int("scheduler", "max_attempts", 3), 7);
    assert_int_equal(nb_conf_set_arg("noequals"), -1);
    assert_int_equal(nb_conf_set_arg(".k=v"), -1);
    /* write + reload round trip */
    assert_int_equal(nb_conf_write(path), 0);
    nb_conf_reset();
    assert_int_equal(nb_conf_load(path), 0);
    assert_int_equal(nb_conf_int("scheduler", "max_attempts", 3), 7);
    unlink(path);
    nb_conf_reset();
}

static struct nb_db *open_temp_db(char *path)
{
    strcpy(path, "/tmp/nubo-test-db-XXXXXX");
    int fd = mkstemp(path);
    close(fd);
    struct nb_db *db = nb_db_open(path);
    assert_non_null(db);
    return db;
}

/* Processes that open a new database together (split roles started at
 * once) each apply or find every migration: none fails on a table another
 * one just created. */
/* A child has the parent's identity, request ID and microversion and its
 * own error slot; clear empties a slot; forward copies a child's error. */
static void test_ctx_child_clear_forward(void **state)
{
    (void)state;
    struct nb_ctx parent;
    nb_ctx_init_system(&parent, "req-parent");
    nb_strlcpy(parent.user_id, "u1", sizeof(parent.user_id));
    nb_strlcpy(parent.project_id, "p1", sizeof(parent.project_id));
    parent.mv_major = 2;
    parent.mv_minor = 79;
    nb_error(&parent, 409, NULL, "main failure");

    struct nb_ctx child;
    nb_ctx_child(&child, &parent);
    assert_string_equal(child.request_id, "req-parent");
    assert_string_equal(child.user_id, "u1");
    assert_string_equal(child.project_id, "p1");
    assert_true(child.system && child.is_admin);
    assert_true(nb_ctx_mv_ge(&child, 2, 79));
    assert_false(nb_ctx_failed(&child)); /* the parent's error is not inherited */
    assert_int_equal(nb_ctx_status(&child), 0);
    assert_string_equal(nb_ctx_message(&child), "");
    assert_string_equal(nb_ctx_error_name(&child), "");

    /* the child's error stays the child's */
    assert_int_equal(nb_error(&child, 500, NULL, "cleanup failed"), -1);
    assert_int_equal(nb_ctx_status(&parent), 409);
    assert_string_equal(nb_ctx_message(&parent), "main failure");
    assert_string_equal(nb_ctx_error_name(&parent), "conflictingRequest");

    /* forward: the parent's own error wins, as with nb_error */
    assert_int_equal(nb_ctx_forward_error(&parent, &child), -1);
    assert_int_equal(nb_ctx_status(&parent), 409);
    /* cleared, the parent takes the child's error: status, name, message */
    nb_ctx_clear_error(&parent);
    assert_false(nb_ctx_failed(&parent));
    assert_string_equal(nb_ctx_message(&parent), "");
    assert_string_equal(nb_ctx_error_name(&parent), "");
    assert_string_equal(parent.request_id, "req-parent"); /* only the error goes */
    nb_error(&child, 404, NULL, "ignored: first error wins on the child too");
    assert_int_equal(nb_ctx_forward_error(&parent, &child), -1);
    assert_int_equal(nb_ctx_status(&parent), 500);
    assert_string_equal(nb_ctx_error_name(&parent), "computeFault");
    assert_string_equal(nb_ctx_message(&parent), "cleanup failed");

    /* forwarding a child that recorded nothing still leaves an error */
    struct nb_ctx quiet, top;
    nb_ctx_init(&top);
    nb_ctx_child(&quiet, &top);
    assert_int_equal(nb_ctx_forward_error(&top, &quiet), -1);
    assert_int_equal(nb_ctx_status(&top), 500);

    /* a child of itself just loses its error */
    nb_ctx_child(&top, &top);
    assert_false(nb_ctx_failed(&top));
}

/* Stand-ins for a workflow's steps: a best-effort record (an action event)
 * that fails, and the real work that follows and fails for its own reason. */
static void record_event_best_effort(struct nb_ctx *ctx)
{
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    nb_error(&sub, 500, NULL, "could not record the event");
}

static int real_step(struct nb_ctx *ctx)
{
    return nb_error(ctx, 404, NULL, "Volume v1 could not be found.");
}

/* What a forgotten clear used to do: a failed best-effort step run on the
 * request's context left its error there, and the next real failure was
 * reported as that stale one (the first error wins); the clear that did
 * happen after a best-effort step also wiped a main error recorded before
 * it. With the best-effort step on a child, neither can happen. */
static void test_ctx_best_effort_cannot_mask(void **state)
{
    (void)state;
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);

    /* best-effort failure, then the real step: the real error is reported */
    record_event_best_effort(&ctx);
    assert_false(nb_ctx_failed(&ctx));
    assert_int_equal(real_step(&ctx), -1);
    assert_int_equal(nb_ctx_status(&ctx), 404);
    assert_string_equal(nb_ctx_message(&ctx), "Volume v1 could not be found.");

    /* the main error first, then a failing clean-up: the main error stays */
    record_event_best_effort(&ctx);
    assert_int_equal(nb_ctx_status(&ctx), 404);
    assert_string_equal(nb_ctx_message(&ctx), "Volume v1 could not be found.");

    /* a handled failure is cleared explicitly: the next one is seen */
    nb_ctx_clear_error(&ctx);
    nb_error(&ctx, 409, NULL, "the next failure");
    assert_int_equal(nb_ctx_status(&ctx), 409);
    assert_string_equal(nb_ctx_message(&ctx), "the next failure");
}

static void test_db_sync_concurrent_processes(void **state)
{
    (void)state;
    char path[64];
    nb_db_close(open_temp_db(path));
    enum { NPROC = 8 };
    pid_t pids[NPROC];
    for (int i = 0; i < NPROC; i++) {
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0) {
            struct nb_db *db = nb_db_open(path);
            int n = db ? nb_db_sync(db) : -1;
            _exit(n < 0 ? 1 : 0);
        }
    }
    for (int i = 0; i < NPROC; i++) {
        int st = -1;
        assert_int_equal(waitpid(pids[i], &st, 0), pids[i]);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 0);
    }
    struct nb_db *db = nb_db_open(path);
    assert_non_null(db);
    assert_int_equal(nb_db_sync(db), 0);
    nb_db_close(db);
    unlink(path);
}

static long long flavor_count(struct nb_db *db, struct nb_ctx *ctx)
{
    return nb_db_int(db, ctx, -5, "SELECT COUNT(*) FROM flavors", "");
}

static void add_flavor(struct nb_db *db, struct nb_ctx *ctx, const char *id)
{
    assert_int_equal(nb_db_exec(db, ctx,
                                "INSERT INTO flavors (flavorid, name, memory_mb, vcpus) "
                                "VALUES (?, ?, 1, 1)",
                                "ss", id, id),
                     1);
}

/* A begin inside a transaction is a savepoint: the inner commit keeps its
 * work in the outer transaction, an inner rollback drops only its own
 * work, and the outer rollback drops everything, committed savepoints too. */
static void test_db_nested_transactions(void **state)
{
    (void)state;
    char path[64];
    struct nb_db *db = open_temp_db(path);
    assert_true(nb_db_sync(db) >= 1);
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    /* a rollback with no transaction open (callers roll back after a
     * failed begin or commit) changes nothing and leaves the lock free */
    nb_db_rollback(db);
    /* nested commit: both rows land with the outer commit */
    assert_int_equal(nb_db_begin(db, &ctx), 0);
    add_flavor(db, &ctx, "outer1");
    assert_int_equal(nb_db_begin(db, &ctx), 0);
    add_flavor(db, &ctx, "inner1");
    assert_int_equal(nb_db_begin(db, &ctx), 0); /* two deep */
    add_flavor(db, &ctx, "inner2");
    assert_int_equal(nb_db_commit(db, &ctx), 0);
    assert_int_equal(nb_db_commit(db, &ctx), 0);
    assert_int_equal(flavor_count(db, &ctx), 3);
    assert_int_equal(nb_db_commit(db, &ctx), 0);
    assert_int_equal(flavor_count(db, &ctx), 3);
    /* inner rollback keeps the outer work (before and after it) */
    assert_int_equal(nb_db_begin(db, &ctx), 0);
    add_flavor(db, &ctx, "outer2");
    assert_int_equal(nb_db_begin(db, &ctx), 0);
    add_flavor(db, &ctx, "dropped");
    nb_db_rollback(db);
    add_flavor(db, &ctx, "outer3");
    assert_int_equal(nb_db_commit(db, &ctx), 0);
    assert_int_equal(flavor_count(db, &ctx), 5);
    assert_int_equal(
        nb_db_int(db, &ctx, -5, "SELECT COUNT(*) FROM flavors WHERE flavorid = 'dropped'", ""), 0);
    /* outer rollback drops the committed inner work too */
    assert_int_equal(nb_db_begin(db, &ctx), 0);
    add_flavor(db, &ctx, "outer4");
    assert_int_equal(nb_db_begin(db, &ctx), 0);
    add_flavor(db, &ctx, "inner3");
    assert_int_equal(nb_db_commit(db, &ctx), 0);
    nb_db_rollback(db);
    assert_int_equal(flavor_count(db, &ctx), 5);
    /* a failed statement inside the savepoint leaves the outer one usable */
    assert_int_equal(nb_db_begin(db, &ctx), 0);
    add_flavor(db, &ctx, "outer5");
    assert_int_equal(nb_db_begin(db, &ctx), 0);
    assert_int_equal(nb_db_exec(db, &ctx,
                                "INSERT INTO flavors (flavorid, name, memory_mb, vcpus) "
                                "VALUES ('dup', 'outer5', 1, 1)",
                                ""),
                     -1);
    nb_db_rollback(db);
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(nb_db_commit(db, &ctx), 0);
    assert_int_equal(flavor_count(db, &ctx), 6);
    /* and the connection is back to no transaction: a plain one works */
    assert_int_equal(nb_db_begin(db, &ctx), 0);
    add_flavor(db, &ctx, "last");
    assert_int_equal(nb_db_commit(db, &ctx), 0);
    assert_int_equal(flavor_count(db, &ctx), 7);
    nb_db_close(db);
    unlink(path);
}

static void test_db_sync_and_queries(void **state)
{
    (void)state;
    char path[64];
    struct nb_db *db = open_temp_db(path);
    int n = nb_db_sync(db);
    assert_true(n >= 1);
    assert_int_equal(nb_db_sync(db), 0); /* idempotent */
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(nb_db_exec(db, &ctx,
                                "INSERT INTO flavors (flavorid, name, memory_mb, vcpus) "
                                "VALUES (?, ?, ?, ?)",
                                "ssii", "1", "m1.tiny", 512LL, 1LL),
                     1);
    json_t *rows = nb_db_rows(db, &ctx, "SELECT name, memory_mb FROM flavors", "");
    assert_int_equal(json_array_size(rows), 1);
    assert_string_equal(nb_json_str(json_array_get(rows, 0), "name"), "m1.tiny");
    assert_int_equal(nb_json_int(json_array_get(rows, 0), "memory_mb", 0), 512);
    json_decref(rows);
    /* unique constraint -> 409 recorded */
    assert_int_equal(nb_db_exec(db, &ctx,
                                "INSERT INTO flavors (flavorid, name, memory_mb, vcpus) "
                                "VALUES (?, ?, ?, ?)",
                                "ssii", "2", "m1.tiny", 1LL, 1LL),
                     -1);
    assert_int_equal(ctx.err_status, 409);
    /* rollback leaves nothing behind */
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(nb_db_begin(db, &ctx), 0);
    nb_db_exec(db, &ctx,
               "INSERT INTO flavors (flavorid, name, memory_mb, vcpus) VALUES ('9', 'x', 1, 1)",
               "");
    nb_db_rollback(db);
    assert_int_equal(nb_db_int(db, &ctx, -5, "SELECT COUNT(*) FROM flavors", ""), 1);
    /* JSON functions work as in the runbooks */
    nb_db_exec(db, &ctx,
               "INSERT INTO block_device_mapping (instance_uuid, connection_info) VALUES (?, ?)",
               "ss", "u1", "{\"data\": {\"format\": \"qcow2\"}}");
    json_t *row = nb_db_row(db, &ctx,
                            "SELECT JSON_EXTRACT(connection_info, '$.data.format') AS f FROM "
                            "block_device_mapping WHERE instance_uuid = 'u1' AND deleted = 0",
                            "");
    assert_string_equal(nb_json_str(row, "f"), "qcow2");
    json_decref(row);
    /* wrong number of arguments is an error, not a crash */
    assert_int_equal(nb_db_exec(db, &ctx, "SELECT ?", ""), -1);
    nb_db_close(db);
    unlink(path);
}

static json_t *echo_handler(void *opaque, struct nb_ctx *ctx, const char *method, json_t *args)
{
    int *casts = opaque;
    if (!strcmp(method, "cast")) {
        __atomic_add_fetch(casts, 1, __ATOMIC_SEQ_CST);
        return NULL;
    }
    return json_pack("{s:s, s:O}", "request_id", ctx->request_id, "args", args);
}

static void test_bus(void **state)
{
    (void)state;
    static int casts;
    assert_int_equal(nb_bus_init(), 0);
    assert_int_equal(nb_bus_listen("test", echo_handler, &casts, 2), 0);
    struct nb_ctx ctx;
    nb_ctx_init(&ctx);
    json_t *r = nb_bus_call(&ctx, "test", "echo", json_pack("{s:i}", "x", 42), 5000);
    assert_non_null(r);
    assert_string_equal(nb_json_str(r, "request_id"), ctx.request_id);
    assert_int_equal(nb_json_int(json_object_get(r, "args"), "x", 0), 42);
    json_decref(r);
    for (int i = 0; i < 100; i++)
        assert_int_equal(nb_bus_cast(&ctx, "test", "cast", NULL), 0);
    assert_int_equal(nb_bus_cast(&ctx, "nobody", "x", NULL), -1);
    assert_null(nb_bus_call(&ctx, "nobody", "x", NULL, 100));
    nb_bus_shutdown(); /* drains the queue */
    assert_int_equal(casts, 100);
}

static int h_hello(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    return nb_resp_json(resp, 200,
                        json_pack("{s:s?, s:i, s:i}", "id", nb_req_param(req, "id"), "major",
                                  ctx->mv_major, "minor", ctx->mv_minor));
}

static int h_fail(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    (void)req;
    (void)resp;
    return nb_error(ctx, 404, "itemNotFound", "Flavor %s could not be found.", "x");
}

static int h_body(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    json_t *b = nb_req_json_object(ctx, req);
    if (!b)
        return -1;
    return nb_resp_json(resp, 202, json_incref(b));
}

static void test_router(void **state)
{
    (void)state;
    nb_http_route("GET", "/compute/v2.1/things/{id}", h_hello, NB_ROUTE_NO_AUTH);
    nb_http_route("GET", "/compute/v2.1/things/detail", h_fail, NB_ROUTE_NO_AUTH);
    nb_http_route("POST", "/compute/v2.1/things", h_body, NB_ROUTE_NO_AUTH);
    nb_http_route("GET", "/compute/v2.1/secret", h_hello, 0);
    int st;
    char *b = nb_http_dispatch("GET", "/compute/v2.1/things/abc", NULL, NULL, NULL, &st);
    assert_int_equal(st, 200);
    json_t *j = nb_json_parse(b);
    assert_string_equal(nb_json_str(j, "id"), "abc");
    assert_int_equal(nb_json_int(j, "minor", 0), 1); /* no header -> 2.1 */
    json_decref(j);
    free(b);
    const char *hdr[] = {"OpenStack-API-Version", "compute 2.53", NULL};
    b = nb_http_dispatch("GET", "/compute/v2.1/things/abc/", NULL, hdr, NULL, &st);
    j = nb_json_parse(b);
    assert_int_equal(nb_json_int(j, "minor", 0), 53);
    json_decref(j);
    free(b);
    const char *bad[] = {"X-OpenStack-Nova-API-Version", "2.999", NULL};
    b = nb_http_dispatch("GET", "/compute/v2.1/things/abc", NULL, bad, NULL, &st);
    assert_int_equal(st, 406);
    free(b);
    /* exact segment wins over a parameter */
    b = nb_http_dispatch("GET", "/compute/v2.1/things/detail", NULL, NULL, NULL, &st);
    assert_int_equal(st, 404);
    j = nb_json_parse(b);
    assert_string_equal(nb_json_str(json_object_get(j, "itemNotFound"), "message"),
                        "Flavor x could not be found.");
    json_decref(j);
    free(b);
    b = nb_http_dispatch("POST", "/compute/v2.1/things", NULL, NULL, "{bad json", &st);
    assert_int_equal(st, 400);
    free(b);
    b = nb_http_dispatch("DELETE", "/compute/v2.1/things", NULL, NULL, NULL, &st);
    assert_int_equal(st, 405);
    free(b);
    b = nb_http_dispatch("GET", "/compute/v2.1/secret", NULL, NULL, NULL, &st);
    assert_int_equal(st, 401);
    free(b);
    b = nb_http_dispatch("GET", "/compute/v2.1/nothing", NULL, NULL, NULL, &st);
    assert_int_equal(st, 404);
    free(b);
    /* Nova's legacy URLs: a project ID segment, or the API at the root */
    b = nb_http_dispatch("GET", "/compute/v2.1/0123abcd-ef/things/abc", NULL, NULL, NULL, &st);
    assert_int_equal(st, 200);
    j = nb_json_parse(b);
    assert_string_equal(nb_json_str(j, "id"), "abc");
    json_decref(j);
    free(b);
    b = nb_http_dispatch("GET", "/v2.1/things/abc", NULL, NULL, NULL, &st);
    assert_int_equal(st, 200);
    free(b);
    /* not hex: not a project ID */
    b = nb_http_dispatch("GET", "/compute/v2.1/zzz/things/abc", NULL, NULL, NULL, &st);
    assert_int_equal(st, 404);
    free(b);
    /* the HTTP layer's own errors in the service's shape */
    b = nb_http_dispatch("GET", "/networking/v2.0/no/such/thing/here", NULL, NULL, NULL, &st);
    assert_int_equal(st, 404);
    j = nb_json_parse(b);
    assert_string_equal(nb_json_str(json_object_get(j, "NeutronError"), "type"), "HTTPNotFound");
    json_decref(j);
    free(b);
}

static void test_resp_headers(void **state)
{
    (void)state;
    struct nb_resp resp = {0};
    char name[32], value[32];
    for (int i = 0; i < 40; i++) {
        snprintf(name, sizeof(name), "X-H%d", i);
        snprintf(value, sizeof(value), "v%d", i);
        assert_int_equal(nb_resp_header(&resp, name, value), 0);
    }
    assert_int_equal(resp.nheaders, 40); /* none dropped (the 9th was) */
    assert_false(resp.oom);
    assert_string_equal(resp.header_names[8], "X-H8");
    assert_string_equal(resp.header_values[39], "v39");
    for (int i = 0; i < resp.nheaders; i++) {
        free(resp.header_names[i]);
        free(resp.header_values[i]);
    }
    free(resp.header_names);
    free(resp.header_values);
}

static void test_status(void **state)
{
    (void)state;
    assert_string_equal(nb_server_status("building", "scheduling"), "BUILD");
    assert_string_equal(nb_server_status("active", NULL), "ACTIVE");
    assert_string_equal(nb_server_status("active", "rebooting_hard"), "HARD_REBOOT");
    assert_string_equal(nb_server_status("active", "rebooting"), "REBOOT");
    assert_string_equal(nb_server_status("stopped", NULL), "SHUTOFF");
    assert_string_equal(nb_server_status("error", NULL), "ERROR");
    assert_string_equal(nb_server_status("bogus", NULL), "UNKNOWN");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uuid),
        cmocka_unit_test(test_time_parse),
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_ctx_child_clear_forward),
        cmocka_unit_test(test_ctx_best_effort_cannot_mask),
        cmocka_unit_test(test_db_sync_and_queries),
        cmocka_unit_test(test_db_nested_transactions),
        cmocka_unit_test(test_db_sync_concurrent_processes),
        cmocka_unit_test(test_bus),
        cmocka_unit_test(test_router),
        cmocka_unit_test(test_status),
        cmocka_unit_test(test_resp_headers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
