/* test_mdproxy.c - the network agent's metadata proxy: who a source
 * address is (port table, lookup), the headers sent to the metadata API,
 * how its answers are relayed, where it is; and, as root, the real thing:
 * a proxy in a namespace of the test's own (ntguest-ut<pid>) in front of a
 * fake metadata API, asked from two addresses of that namespace, one with
 * forged identity headers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/config.h"
#include "common/json.h"
#include "common/sbuf.h"
#include "common/util.h"
#include "compute/metadata/metadata.h"
#include "network/agent/internal.h"
#include "network/agent/mdproxy.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NET_A "5a1e0001-0000-4000-8000-0000000000aa"
#define NET_B "5a1e0001-0000-4000-8000-0000000000bb"

static json_t *state(void)
{
    return json_pack("{s:[{s:s, s:s, s:s, s:s, s:[{s:s}]},"             /* p1 on A, this host */
                     "    {s:s, s:s, s:s, s:s, s:[{s:s}]},"             /* p2 on B, same address */
                     "    {s:s, s:s, s:s, s:s, s:[{s:s}]}],"            /* p5 on A, no instance */
                     " s:[{s:s, s:s, s:{s:s}, s:[{s:s, s:s, s:s, s:s}," /* p3: other host */
                     "                             {s:s, s:s},"         /* p4: no device */
                     "                             {s:s, s:s, s:s},"    /* p1 again */
                     "                             {s:s, s:s, s:s},"    /* p6 and p7: one address */
                     "                             {s:s, s:s, s:s}]},"
                     "    {s:s, s:n, s:[]}]}",
                     "ports", "id", "p1", "network_id", NET_A, "device_id", "inst-1", "project_id",
                     "proj-1", "fixed_ips", "ip_address", "10.0.0.5", "id", "p2", "network_id",
                     NET_B, "device_id", "inst-2", "project_id", "proj-2", "fixed_ips",
                     "ip_address", "10.0.0.5", "id", "p5", "network_id", NET_A, "device_id", "",
                     "project_id", "proj-1", "fixed_ips", "ip_address", "10.0.0.9", "networks",
                     "id", NET_A, "project_id", "proj-net", "dhcp", "namespace", "qdhcp-" NET_A,
                     "dhcp_hosts", "port_id", "p3", "ip_address", "10.0.0.6", "device_id", "inst-3",
                     "project_id", "proj-3", "port_id", "p4", "ip_address", "10.0.0.7", "port_id",
                     "p1", "ip_address", "10.0.0.5", "device_id", "inst-1", "port_id", "p6",
                     "ip_address", "10.0.0.8", "device_id", "inst-6", "port_id", "p7", "ip_address",
                     "10.0.0.8", "device_id", "inst-7", "id", NET_B, "dhcp", "dhcp_hosts");
}

static void test_port_table_and_lookup(void **unused)
{
    (void)unused;
    json_t *st = state();
    json_t *a = na_md_port_table(st, NET_A);
    const char *dev = NULL, *proj = NULL;
    assert_int_equal(na_md_lookup(a, "10.0.0.5", &dev, &proj), 1);
    assert_string_equal(dev, "inst-1");
    assert_string_equal(proj, "proj-1");
    /* a port of another host, from dhcp_hosts */
    assert_int_equal(na_md_lookup(a, "10.0.0.6", &dev, &proj), 1);
    assert_string_equal(dev, "inst-3");
    assert_string_equal(proj, "proj-3");
    /* no instance behind it: unknown */
    assert_int_equal(na_md_lookup(a, "10.0.0.7", &dev, &proj), 0);
    assert_int_equal(na_md_lookup(a, "10.0.0.9", &dev, &proj), 0);
    /* two ports with one address: Neutron answers 404 */
    assert_int_equal(na_md_lookup(a, "10.0.0.8", &dev, &proj), 0);
    assert_int_equal(na_md_lookup(a, "10.0.0.99", &dev, &proj), 0);
    assert_int_equal(na_md_lookup(a, NULL, &dev, &proj), 0);
    /* the same address on another network is another instance */
    json_t *b = na_md_port_table(st, NET_B);
    assert_int_equal(na_md_lookup(b, "10.0.0.5", &dev, &proj), 1);
    assert_string_equal(dev, "inst-2");
    assert_int_equal(na_md_lookup(b, "10.0.0.6", &dev, &proj), 0);
    /* a router's: the ports of the networks of its legs */
    json_t *r = json_pack("{s:s, s:[{s:s}, {s:s}]}", "id", "r1", "interfaces", "network_id", NET_B,
                          "network_id", "net-without-ports");
    json_t *rt = na_md_router_table(st, r);
    assert_int_equal(na_md_lookup(rt, "10.0.0.5", &dev, &proj), 1);
    assert_string_equal(dev, "inst-2");
    assert_int_equal(na_md_lookup(rt, "10.0.0.6", &dev, &proj), 0);
    json_decref(rt);
    json_array_append_new(json_object_get(r, "interfaces"),
                          json_pack("{s:s}", "network_id", NET_A));
    rt = na_md_router_table(st, r);
    assert_int_equal(na_md_lookup(rt, "10.0.0.6", &dev, &proj), 1);
    assert_string_equal(dev, "inst-3");
    json_decref(rt);
    json_decref(r);
    json_t *c = na_md_port_table(st, "no-such-net");
    assert_int_equal(json_array_size(c), 0);
    json_decref(a);
    json_decref(b);
    json_decref(c);
    json_decref(st);
}

static void test_headers(void **unused)
{
    (void)unused;
    json_t *h =
        na_md_proxy_headers("s3cret", "0b3d6a58-9d2c-4d2e-8a55-3c1f0e4b7a10", "proj-1", "10.0.0.5");
    assert_int_equal(json_object_size(h), 4);
    assert_string_equal(nb_json_str(h, "X-Forwarded-For"), "10.0.0.5");
    assert_string_equal(nb_json_str(h, "X-Instance-ID"), "0b3d6a58-9d2c-4d2e-8a55-3c1f0e4b7a10");
    assert_string_equal(nb_json_str(h, "X-Tenant-ID"), "proj-1");
    /* hmac.new(b"s3cret", UUID.encode(), hashlib.sha256).hexdigest() */
    assert_string_equal(nb_json_str(h, "X-Instance-ID-Signature"),
                        "812d5cd07ba1493bacb887573e0341c4384ae8a3c4a1a189f9067b4ace51d60c");
    assert_true(nb_md_signature_ok("s3cret", "0b3d6a58-9d2c-4d2e-8a55-3c1f0e4b7a10",
                                   nb_json_str(h, "X-Instance-ID-Signature")));
    json_decref(h);
}

static void test_relay_status(void **unused)
{
    (void)unused;
    const char *why;
    assert_int_equal(na_md_relay_status(200, &why), 200);
    assert_int_equal(na_md_relay_status(403, &why), 403);
    assert_int_equal(na_md_relay_status(404, &why), 404);
    assert_int_equal(na_md_relay_status(400, &why), 400);
    assert_int_equal(na_md_relay_status(409, &why), 409);
    assert_int_equal(na_md_relay_status(500, &why), 500);
    assert_string_equal(why, "Remote metadata server experienced an internal server error.");
    assert_int_equal(na_md_relay_status(502, &why), 500);
    assert_string_equal(why, "An unknown error has occurred. Please try your request again.");
}

static void test_upstream(void **unused)
{
    (void)unused;
    char u[128];
    nb_conf_reset();
    na_md_upstream(u, sizeof(u));
    assert_string_equal(u, "http://127.0.0.1:8775");
    nb_conf_set("metadata", "listen", "0.0.0.0");
    nb_conf_set("metadata", "port", "9775");
    na_md_upstream(u, sizeof(u));
    assert_string_equal(u, "http://127.0.0.1:9775");
    nb_conf_set("metadata", "nova_metadata_host", "192.0.2.10");
    nb_conf_set("metadata", "nova_metadata_port", "8000");
    na_md_upstream(u, sizeof(u));
    assert_string_equal(u, "http://192.0.2.10:8000");
    nb_conf_set("metadata", "nova_metadata_host", "fd00::1");
    na_md_upstream(u, sizeof(u));
    assert_string_equal(u, "http://[fd00::1]:8000");
    nb_conf_reset();
}

/* ----------------------------------------------- the real proxy (root) */

static char ns_name[64];

/* The fake metadata API: answers the headers it got as JSON; 403 for
 * path /forbidden. */
static enum MHD_Result fake_api(void *cls, struct MHD_Connection *conn, const char *url,
                                const char *method, const char *version, const char *data,
                                size_t *size, void **con_cls)
{
    (void)cls;
    (void)version;
    (void)data;
    (void)size;
    (void)con_cls;
    static const char *const names[] = {"X-Forwarded-For",      "X-Instance-ID",
                                        "X-Tenant-ID",          "X-Instance-ID-Signature",
                                        "X-Neutron-Network-ID", "X-Evil"};
    json_t *j = json_pack("{s:s, s:s}", "path", url, "method", method);
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const char *v = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, names[i]);
        if (v)
            json_object_set_new(j, names[i], json_string(v));
    }
    const char *q = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "a");
    if (q)
        json_object_set_new(j, "a", json_string(q));
    char *body = json_dumps(j, JSON_SORT_KEYS);
    json_decref(j);
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(r, "Content-Type", "application/json");
    enum MHD_Result ret = MHD_queue_response(conn, strcmp(url, "/forbidden") ? 200 : 403, r);
    MHD_destroy_response(r);
    return ret;
}

struct get {
    const char *src; /* source address in the namespace */
    const char *path;
    bool forge; /* send identity headers of another instance */
    long status;
    int curl_rc;
    struct nb_sbuf body;
    const char *ns; /* NULL: the network's namespace */
};

static size_t on_data(char *d, size_t s, size_t n, void *cls)
{
    nb_sbuf_add(cls, d, s * n);
    return s * n;
}

/* A guest's request, from a thread inside the namespace. */
static void *guest_get(void *arg)
{
    struct get *g = arg;
    char path[128];
    snprintf(path, sizeof(path), "/run/netns/%s", g->ns ? g->ns : ns_name);
    int fd = open(path, O_RDONLY);
    if (fd < 0 || setns(fd, CLONE_NEWNET) < 0) {
        g->curl_rc = -1;
        return NULL;
    }
    close(fd);
    CURL *c = curl_easy_init();
    char url[256], iface[64];
    snprintf(url, sizeof(url), "http://169.254.169.254%s", g->path);
    snprintf(iface, sizeof(iface), "host!%s", g->src);
    struct curl_slist *h = NULL;
    if (g->forge) {
        h = curl_slist_append(h, "X-Instance-ID: inst-other");
        h = curl_slist_append(h, "X-Tenant-ID: proj-other");
        h = curl_slist_append(h, "X-Instance-ID-Signature: 00");
        h = curl_slist_append(h, "X-Forwarded-For: 203.0.113.99");
        h = curl_slist_append(h, "X-Neutron-Network-ID: forged");
        h = curl_slist_append(h, "X-Evil: 1");
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_INTERFACE, iface);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_PROXY, "");
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 20L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &g->body);
    g->curl_rc = (int)curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &g->status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return NULL;
}

static void run_get(struct get *g)
{
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, guest_get, g), 0);
    pthread_join(t, NULL);
}

static int sh(const char *fmt, ...)
{
    char cmd[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    return system(cmd);
}

static void test_proxy_in_namespace(void **unused)
{
    (void)unused;
    if (geteuid() != 0 || sh("command -v ip >/dev/null") != 0) {
        print_message("not root or no ip(8): skipped\n");
        skip();
    }
    snprintf(ns_name, sizeof(ns_name), "ntguest-ut%d", (int)getpid());
    assert_int_equal(sh("ip netns add %s", ns_name), 0);
    int ok =
        sh("ip -n %s link set lo up && ip -n %s link add ns-ut type veth peer name ns-ut-peer && "
           "ip -n %s link set ns-ut-peer up && "
           "ip -n %s addr add 203.0.113.40/28 dev ns-ut && "
           "ip -n %s addr add 203.0.113.41/28 dev ns-ut && "
           "ip -n %s addr add 169.254.169.254/32 dev ns-ut && ip -n %s link set ns-ut up",
           ns_name, ns_name, ns_name, ns_name, ns_name, ns_name, ns_name);
    char rns[64];
    snprintf(rns, sizeof(rns), "ntguest-ur%d", (int)getpid());
    if (ok == 0)
        ok = sh("ip netns add %s && ip -n %s link add ns-ur type veth peer name ns-ur-peer && "
                "ip -n %s link set ns-ur-peer up && ip -n %s addr add 203.0.113.42/28 dev ns-ur && "
                "ip -n %s link set ns-ur up",
                rns, rns, rns, rns, rns);
    struct MHD_Daemon *api = NULL;
    if (ok == 0)
        api = MHD_start_daemon(
            MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL, NULL, fake_api, NULL, MHD_OPTION_SOCK_ADDR,
            (struct sockaddr *)&(struct sockaddr_in){.sin_family = AF_INET,
                                                     .sin_addr.s_addr = htonl(INADDR_LOOPBACK)},
            MHD_OPTION_END);
    const union MHD_DaemonInfo *info =
        api ? MHD_get_daemon_info(api, MHD_DAEMON_INFO_BIND_PORT) : NULL;
    char port[16];
    snprintf(port, sizeof(port), "%u", info ? info->port : 0);
    nb_conf_reset();
    nb_conf_set("metadata", "nova_metadata_host", "127.0.0.1");
    nb_conf_set("metadata", "nova_metadata_port", port);
    nb_conf_set("neutron", "metadata_proxy_shared_secret", "s3cret");

    json_t *st = json_pack("{s:[{s:s, s:s, s:s, s:s, s:[{s:s}]}, {s:s, s:s, s:s, s:s, s:[{s:s}]}],"
                           " s:[{s:s, s:{s:s}, s:[]}], s:[{s:s, s:s, s:[{s:s}]}]}",
                           "ports", "id", "p1", "network_id", "net-ut", "device_id", "inst-1",
                           "project_id", "proj-1", "fixed_ips", "ip_address", "203.0.113.40", "id",
                           "p2", "network_id", "net-ut", "device_id", "inst-2", "project_id",
                           "proj-2", "fixed_ips", "ip_address", "203.0.113.42", "networks", "id",
                           "net-ut", "dhcp", "namespace", ns_name, "dhcp_hosts", "routers", "id",
                           "r-ut", "namespace", rns, "interfaces", "network_id", "net-ut");
    struct na *agent = (struct na *)&ok; /* any pointer: the proxies' owner */
    struct nb_ctx ctx;
    nb_ctx_init(&ctx);
    int rc = ok == 0 && api ? na_mdproxy_sync(agent, &ctx, st) : -1;
    if (rc < 0)
        print_message("sync: %s\n", nb_ctx_message(&ctx));
    /* twice: idempotent, the same socket */
    int rc2 = rc == 0 ? na_mdproxy_sync(agent, &ctx, st) : -1;

    struct get own = {
        "203.0.113.40", "/openstack/latest/meta_data.json?a=b%20c", true, 0, 0, {0}, NULL};
    struct get stranger = {
        "203.0.113.41", "/openstack/latest/meta_data.json", false, 0, 0, {0}, NULL};
    struct get denied = {"203.0.113.40", "/forbidden", false, 0, 0, {0}, NULL};
    struct get via_router = {"203.0.113.42", "/openstack", true, 0, 0, {0}, NULL};
    via_router.ns = rns;
    if (rc2 == 0) {
        run_get(&via_router);
        run_get(&own);
        run_get(&stranger);
        run_get(&denied);
    }
    /* the network leaves the state: the socket is closed */
    json_t *empty = json_pack("{s:[], s:[]}", "ports", "networks");
    struct get after = {"203.0.113.40", "/", false, 0, 0, {0}, NULL};
    if (rc2 == 0) {
        assert_int_equal(na_mdproxy_sync(agent, &ctx, empty), 0);
        run_get(&after);
    }
    na_mdproxy_stop_all();
    if (api)
        MHD_stop_daemon(api);
    sh("ip netns del %s", ns_name);
    sh("ip netns del %s", rns);

    assert_int_equal(ok, 0);
    assert_int_equal(rc, 0);
    assert_int_equal(rc2, 0);
    assert_int_equal(own.curl_rc, 0);
    assert_int_equal(own.status, 200);
    json_t *seen = nb_json_parse(own.body.s);
    assert_non_null(seen);
    /* its own identity, never the forged one; nothing else forwarded */
    assert_string_equal(nb_json_str(seen, "X-Instance-ID"), "inst-1");
    assert_string_equal(nb_json_str(seen, "X-Tenant-ID"), "proj-1");
    assert_string_equal(nb_json_str(seen, "X-Forwarded-For"), "203.0.113.40");
    assert_true(
        nb_md_signature_ok("s3cret", "inst-1", nb_json_str(seen, "X-Instance-ID-Signature")));
    assert_null(json_object_get(seen, "X-Neutron-Network-ID"));
    assert_null(json_object_get(seen, "X-Evil"));
    assert_string_equal(nb_json_str(seen, "path"), "/openstack/latest/meta_data.json");
    assert_string_equal(nb_json_str(seen, "a"), "b c");
    json_decref(seen);
    /* a router's namespace answers the guests of its networks */
    assert_int_equal(via_router.status, 200);
    seen = nb_json_parse(via_router.body.s);
    assert_string_equal(nb_json_str(seen, "X-Instance-ID"), "inst-2");
    assert_string_equal(nb_json_str(seen, "X-Forwarded-For"), "203.0.113.42");
    json_decref(seen);
    free(via_router.body.s);
    assert_int_equal(stranger.status, 404);
    assert_non_null(strstr(stranger.body.s, "404 Not Found"));
    assert_int_equal(denied.status, 403);
    assert_int_not_equal(after.curl_rc, 0); /* refused: nothing listens */
    free(own.body.s);
    free(stranger.body.s);
    free(denied.body.s);
    free(after.body.s);
    json_decref(st);
    json_decref(empty);
    nb_conf_reset();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_port_table_and_lookup), cmocka_unit_test(test_headers),
        cmocka_unit_test(test_relay_status),          cmocka_unit_test(test_upstream),
        cmocka_unit_test(test_proxy_in_namespace),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
