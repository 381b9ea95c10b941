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
#include "common/http_guard.h"
#include "common/json.h"
#include "common/util.h"
#include "compute/api/api.h"
#include "compute/compute.h"
#include "identity/identity.h"
#include "image/image.h"
#include "network/network.h"
#include "placement/placement.h"
#include "volume/volume.h"
#include "db/db.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
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

static void test_json_strings(void **state)
{
    (void)state;
    assert_null(nb_json_strings(NULL, "id"));
    json_t *rows = json_pack("[{s:s}, {s:i}, {}, {s:s}]", "id", "a", "id", 1, "id", "b");
    json_t *ids = nb_json_strings(rows, "id");
    assert_int_equal(json_array_size(ids), 2);
    assert_string_equal(json_string_value(json_array_get(ids, 0)), "a");
    assert_string_equal(json_string_value(json_array_get(ids, 1)), "b");
    json_decref(ids);
    json_decref(rows);
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
    assert_int_equal(nb_error(&child, 500, "CleanupFailed", "cleanup failed"), -1);
    assert_int_equal(nb_ctx_status(&parent), 409);
    assert_string_equal(nb_ctx_message(&parent), "main failure");
    assert_int_equal(nb_ctx_code(&parent), NB_ERR_CONFLICT);

    /* forward: the parent's own error wins, as with nb_error */
    assert_int_equal(nb_ctx_forward_error(&parent, &child), -1);
    assert_int_equal(nb_ctx_status(&parent), 409);
    /* cleared, the parent takes the child's error: status, name, message */
    nb_ctx_clear_error(&parent);
    assert_false(nb_ctx_failed(&parent));
    assert_string_equal(nb_ctx_message(&parent), "");
    assert_string_equal(nb_ctx_error_name(&parent), "");
    assert_int_equal(nb_ctx_code(&parent), NB_ERR_NONE);
    assert_string_equal(parent.request_id, "req-parent"); /* only the error goes */
    nb_error(&child, 404, NULL, "ignored: first error wins on the child too");
    assert_int_equal(nb_ctx_forward_error(&parent, &child), -1);
    assert_int_equal(nb_ctx_status(&parent), 500);
    assert_int_equal(nb_ctx_code(&parent), NB_ERR_INTERNAL);
    assert_string_equal(nb_ctx_error_name(&parent), "CleanupFailed");
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
    nb_http_service_register(&nb_compute_http_service, true);
    nb_http_service_register(&nb_network_http_service, false);
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
    /* HEAD answers as GET, except where the service refuses it (Neutron: 405) */
    b = nb_http_dispatch("HEAD", "/compute/v2.1/things/abc", NULL, NULL, NULL, &st);
    assert_int_equal(st, 200);
    free(b);
    nb_http_route("GET", "/networking/v2.0/things", h_hello, NB_ROUTE_NO_AUTH);
    b = nb_http_dispatch("HEAD", "/networking/v2.0/things", NULL, NULL, NULL, &st);
    assert_int_equal(st, 405);
    j = nb_json_parse(b);
    assert_string_equal(nb_json_str(json_object_get(j, "NeutronError"), "type"),
                        "HTTPMethodNotAllowed");
    json_decref(j);
    free(b);
    /* the HTTP layer's own errors in the service's shape */
    b = nb_http_dispatch("GET", "/networking/v2.0/no/such/thing/here", NULL, NULL, NULL, &st);
    assert_int_equal(st, 404);
    j = nb_json_parse(b);
    assert_string_equal(nb_json_str(json_object_get(j, "NeutronError"), "type"), "HTTPNotFound");
    json_decref(j);
    free(b);
}

/* The port a listening socket got. */
static int bound_port(int fd)
{
    struct sockaddr_in a;
    socklen_t sl = sizeof(a);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &sl), 0);
    return ntohs(a.sin_port);
}

/* [api] reuse_port: two listeners with SO_REUSEPORT share a port; one
 * without it is refused next to them, and a plain listener's port is not
 * shared even with a process that asks. */
static void test_http_listen_reuse_port(void **state)
{
    (void)state;
    int a = nb_http_listen("127.0.0.1", 0, true);
    assert_true(a >= 0);
    int port = bound_port(a);
    int b = nb_http_listen("127.0.0.1", port, true);
    assert_true(b >= 0);
    assert_int_equal(nb_http_listen("127.0.0.1", port, false), -1);
    int plain = nb_http_listen("127.0.0.1", 0, false);
    assert_true(plain >= 0);
    assert_int_equal(nb_http_listen("127.0.0.1", bound_port(plain), true), -1);
    close(a);
    close(b);
    close(plain);
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

/* --- a service registering itself ------------------------------------------ */

static int h_widget(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *tag = req->route_opaque;
    if (!strcmp(tag, "missing"))
        return nb_error(ctx, 404, NULL, "No widget %s.", nb_req_param(req, "id"));
    if (!strcmp(tag, "named"))
        return nb_error(ctx, 409, "WidgetBusy", "Widget %s is busy.", nb_req_param(req, "id"));
    if (!strcmp(tag, "silent"))
        return -1;
    return nb_resp_json(resp, 200,
                        json_pack("{s:s, s:s?, s:i, s:i}", "route", tag, "id",
                                  nb_req_param(req, "id"), "major", ctx->mv_major, "minor",
                                  ctx->mv_minor));
}

/* {"oops": {"class": <code>, "name": <name>, "status", "message"}}: shows what
 * the HTTP layer hands a renderer. */
static void render_widget(const struct nb_ctx *ctx, const struct nb_http_error *err,
                          const char *accept, struct nb_resp *resp)
{
    (void)ctx;
    resp->body =
        json_pack("{s:{s:i, s:s, s:i, s:s, s:s?}}", "oops", "class", (int)err->code, "name",
                  err->name, "status", err->status, "message", err->message, "accept", accept);
}

static int widget_unacceptable(struct nb_ctx *ctx, const char *requested,
                               const struct nb_http_microversions *mv)
{
    return nb_error(ctx, 406, "TooNew", "%s is past %d.%d", requested, mv->max_major,
                    mv->max_minor);
}

static int widget_policy(struct nb_ctx *ctx, const char *rule)
{
    return nb_error(ctx, 403, NULL, "no %s for you", rule);
}

static const struct nb_http_microversions widget_mv = {
    .name = "widget",
    .under = "/widgets/v1/",
    .vary = "openstack-api-version",
    .min_major = 1,
    .min_minor = 2,
    .max_major = 1,
    .max_minor = 7,
    .unacceptable = widget_unacceptable,
};

static const struct nb_http_service widget_service = {
    .prefix = "/widgets",
    .logger = "nubo.widgets.wsgi",
    .slash_significant = true,
    .root_alias = "/v1",
    .request_id_header = "x-widget-request-id",
    .microversions = &widget_mv,
    .unexpected_error = "the widget broke",
    .policy_refused = widget_policy,
    .render_error = render_widget,
};

static json_t *widget_call(const char *method, const char *path, const char *const *hdr, int *st)
{
    char *b = nb_http_dispatch(method, path, NULL, hdr, NULL, st);
    json_t *j = nb_json_parse(b);
    free(b);
    assert_non_null(j);
    return j;
}

static void test_service_registers(void **state)
{
    (void)state;
    nb_http_service_register(&widget_service, false);
    nb_http_service_register(&widget_service, false); /* again: a no-op */
    nb_http_route_opaque("GET", "/widgets/v1/w/{id}", h_widget, NB_ROUTE_NO_AUTH, "show");
    nb_http_route_opaque("GET", "/widgets/v1/w/{id}/gone", h_widget, NB_ROUTE_NO_AUTH, "missing");
    nb_http_route_opaque("GET", "/widgets/v1/w/{id}/busy", h_widget, NB_ROUTE_NO_AUTH, "named");
    nb_http_route_opaque("GET", "/widgets/v1/w/{id}/silent", h_widget, NB_ROUTE_NO_AUTH, "silent");
    nb_http_route_opaque("GET", "/widgets/v1/w/{id}/secret", h_widget, 0, "show");
    assert_ptr_equal(nb_http_service_of("/widgets/v1/w/1"), &widget_service);
    assert_null(nb_http_service_of("/gadgets"));

    /* the route's opaque pointer reaches the handler; no header: the minimum */
    int st;
    json_t *j = widget_call("GET", "/widgets/v1/w/a1", NULL, &st);
    assert_int_equal(st, 200);
    assert_string_equal(nb_json_str(j, "route"), "show");
    assert_string_equal(nb_json_str(j, "id"), "a1");
    assert_int_equal(nb_json_int(j, "minor", 0), 2);
    json_decref(j);
    /* the service's microversion header, its root alias */
    const char *v5[] = {"OpenStack-API-Version", "widget 1.5", NULL};
    j = widget_call("GET", "/v1/w/a2", v5, &st);
    assert_int_equal(st, 200);
    assert_int_equal(nb_json_int(j, "minor", 0), 5);
    json_decref(j);
    const char *latest[] = {"OpenStack-API-Version", "compute 2.9, widget latest", NULL};
    j = widget_call("GET", "/widgets/v1/w/a3", latest, &st);
    assert_int_equal(nb_json_int(j, "minor", 0), 7);
    json_decref(j);
    /* out of range: the service's 406 */
    const char *v9[] = {"OpenStack-API-Version", "widget 1.9", "Accept", "text/plain", NULL};
    j = widget_call("GET", "/widgets/v1/w/a4", v9, &st);
    assert_int_equal(st, 406);
    json_t *e = json_object_get(j, "oops");
    assert_string_equal(nb_json_str(e, "name"), "TooNew");
    assert_string_equal(nb_json_str(e, "message"), "1.9 is past 1.7");
    assert_string_equal(nb_json_str(e, "accept"), "text/plain");
    json_decref(j);
    /* errors reach the renderer neutral: class, no name, message */
    j = widget_call("GET", "/widgets/v1/w/a5/gone", NULL, &st);
    assert_int_equal(st, 404);
    e = json_object_get(j, "oops");
    assert_int_equal(nb_json_int(e, "class", -1), NB_ERR_NOT_FOUND);
    assert_string_equal(nb_json_str(e, "name"), "");
    assert_string_equal(nb_json_str(e, "message"), "No widget a5.");
    json_decref(j);
    /* a service-specific name rides along */
    j = widget_call("GET", "/widgets/v1/w/a6/busy", NULL, &st);
    assert_int_equal(st, 409);
    e = json_object_get(j, "oops");
    assert_int_equal(nb_json_int(e, "class", -1), NB_ERR_CONFLICT);
    assert_string_equal(nb_json_str(e, "name"), "WidgetBusy");
    json_decref(j);
    /* a handler failing without an error: the service's words */
    j = widget_call("GET", "/widgets/v1/w/a7/silent", NULL, &st);
    assert_int_equal(st, 500);
    e = json_object_get(j, "oops");
    assert_int_equal(nb_json_int(e, "class", -1), NB_ERR_INTERNAL);
    assert_string_equal(nb_json_str(e, "message"), "the widget broke");
    json_decref(j);
    /* the router's own 404 and 405, and a significant trailing slash */
    j = widget_call("GET", "/widgets/v1/nothing", NULL, &st);
    assert_int_equal(st, 404);
    assert_int_equal(nb_json_int(json_object_get(j, "oops"), "class", -1), NB_ERR_NOT_FOUND);
    json_decref(j);
    j = widget_call("GET", "/widgets/v1/w/a1/secret", NULL, &st);
    assert_int_equal(st, 401); /* no token */
    json_decref(j);
    j = widget_call("GET", "/widgets/v1/w/a1/secret/", NULL, &st);
    assert_int_equal(st, 404);
    json_decref(j);
    j = widget_call("DELETE", "/widgets/v1/w/a8", NULL, &st);
    assert_int_equal(st, 405);
    assert_int_equal(nb_json_int(json_object_get(j, "oops"), "class", -1), NB_ERR_BAD_METHOD);
    json_decref(j);
}

/* --- each service's dialect --------------------------------------------------- */

/* Renders an error recorded as (status, name, msg) with svc's renderer at
 * microversion mv_minor (major 1). Returns resp (caller frees its parts). */
static struct nb_resp render(const struct nb_http_service *svc, int status, const char *name,
                             const char *accept, int mv_minor)
{
    struct nb_ctx ctx;
    nb_ctx_init(&ctx);
    nb_strlcpy(ctx.request_id, "req-1", sizeof(ctx.request_id));
    ctx.mv_major = 1;
    ctx.mv_minor = mv_minor;
    nb_error(&ctx, status, name, "It went %s.", "wrong");
    struct nb_resp resp = {0};
    nb_http_render_error(&ctx, svc, accept, &resp);
    assert_int_equal(resp.status, status);
    return resp;
}

static char *render_text(const struct nb_http_service *svc, int status, const char *name,
                         const char *accept, int mv_minor)
{
    struct nb_resp r = render(svc, status, name, accept, mv_minor);
    char *s = r.raw ? r.raw : json_dumps(r.body, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(r.body);
    return s;
}

static void expect(const struct nb_http_service *svc, int status, const char *name,
                   const char *accept, int mv_minor, const char *want)
{
    char *got = render_text(svc, status, name, accept, mv_minor);
    assert_string_equal(got, want);
    free(got);
}

static void test_service_renderers(void **state)
{
    (void)state;
    /* Nova and Cinder: the class's fault name, or the handler's */
    expect(&nb_compute_http_service, 404, NULL, NULL, 0,
           "{\"itemNotFound\":{\"code\":404,\"message\":\"It went wrong.\"}}");
    expect(&nb_compute_http_service, 403, "overLimit", NULL, 0,
           "{\"overLimit\":{\"code\":403,\"message\":\"It went wrong.\"}}");
    expect(&nb_compute_http_service, 502, NULL, NULL, 0,
           "{\"computeFault\":{\"code\":502,\"message\":\"It went wrong.\"}}");
    expect(&nb_volume_http_service, 409, NULL, NULL, 0,
           "{\"conflictingRequest\":{\"code\":409,\"message\":\"It went wrong.\"}}");
    /* Keystone */
    expect(&nb_identity_http_service, 404, NULL, NULL, 0,
           "{\"error\":{\"code\":404,\"message\":\"It went wrong.\",\"title\":\"Not Found\"}}");
    /* placement: its code from 1.23 only */
    expect(&nb_placement_http_service, 409, "placement.concurrent_update", NULL, 22,
           "{\"errors\":[{\"detail\":\"It went wrong.\",\"request_id\":\"req-1\",\"status\":409,"
           "\"title\":\"Conflict\"}]}");
    expect(&nb_placement_http_service, 409, "placement.concurrent_update", NULL, 23,
           "{\"errors\":[{\"code\":\"placement.concurrent_update\",\"detail\":\"It went wrong.\","
           "\"request_id\":\"req-1\",\"status\":409,\"title\":\"Conflict\"}]}");
    expect(&nb_placement_http_service, 400, NULL, NULL, 39,
           "{\"errors\":[{\"code\":\"placement.undefined_code\",\"detail\":\"It went wrong.\","
           "\"request_id\":\"req-1\",\"status\":400,\"title\":\"Bad Request\"}]}");
    /* Neutron: the exception type, else webob's class name */
    expect(&nb_network_http_service, 404, "NetworkNotFound", NULL, 0,
           "{\"NeutronError\":{\"detail\":\"\",\"message\":\"It went wrong.\",\"type\":"
           "\"NetworkNotFound\"}}");
    expect(&nb_network_http_service, 409, NULL, NULL, 0,
           "{\"NeutronError\":{\"detail\":\"\",\"message\":\"It went wrong.\",\"type\":"
           "\"HTTPConflict\"}}");
    /* Glance: webob's pages by Accept */
    expect(&nb_image_http_service, 404, NULL, NULL, 0, "404 Not Found\n\nIt went wrong.\n\n   ");
    expect(&nb_image_http_service, 404, NULL, "application/json", 0,
           "{\"code\":\"404 Not Found\",\"message\":\"It went wrong.<br /><br />\\n\\n\\n\","
           "\"title\":\"Not Found\"}");
    expect(&nb_image_http_service, 403, NULL, "text/html", 0,
           "<html>\n <head>\n  <title>403 Forbidden</title>\n </head>\n <body>\n  <h1>403 "
           "Forbidden</h1>\n  It went wrong.<br /><br />\n\n\n\n </body>\n</html>");
    struct nb_resp r = render(&nb_image_http_service, 400, NULL, "text/plain", 0);
    assert_string_equal(r.content_type, "text/plain; charset=UTF-8");
    free(r.raw);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uuid),
        cmocka_unit_test(test_time_parse),
        cmocka_unit_test(test_json_strings),
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_ctx_child_clear_forward),
        cmocka_unit_test(test_ctx_best_effort_cannot_mask),
        cmocka_unit_test(test_db_sync_and_queries),
        cmocka_unit_test(test_db_nested_transactions),
        cmocka_unit_test(test_db_sync_concurrent_processes),
        cmocka_unit_test(test_bus),
        cmocka_unit_test(test_router),
        cmocka_unit_test(test_service_registers),
        cmocka_unit_test(test_service_renderers),
        cmocka_unit_test(test_status),
        cmocka_unit_test(test_resp_headers),
        cmocka_unit_test(test_http_listen_reuse_port),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
