/* mdproxy.c - phase na_mdproxy_sync: the metadata proxy on
 * 169.254.169.254:80 in every qdhcp namespace of the agent, as Neutron's
 * isolated metadata (haproxy in the namespace + neutron-metadata-agent),
 * without extra processes.
 *
 * For every network of the state whose DHCP this host serves ("dhcp" not
 * null), a short-lived thread enters the namespace (setns(CLONE_NEWNET) on
 * /run/netns/qdhcp-<net>), makes a listening socket bound to
 * 169.254.169.254:80 (IP_FREEBIND: the address may come a moment later;
 * dhcp.c puts it on the ns- device) and exits: the socket stays in that
 * namespace. One HTTP server (the API's guard and libmicrohttpd) serves
 * each socket in the agent's process. A request's source address names
 * the port (network, fixed IP) in the state, hence the instance and
 * project; the request goes to the metadata API ([metadata]
 * nova_metadata_host/port) with exactly the headers Neutron's agent sends
 * (X-Forwarded-For, X-Instance-ID, X-Tenant-ID, X-Instance-ID-Signature =
 * hex HMAC-SHA256 of the instance ID under [neutron]
 * metadata_proxy_shared_secret), so whatever identity headers a guest
 * sends are never forwarded; the answer is relayed as Neutron's agent
 * relays it. An address no port has: 404. The socket is closed when the
 * network leaves the state, and made again when its namespace was made
 * again (another inode).
 *
 * The same is done in every qrouter-<id> namespace of the state's routers
 * with a leg on a network, for the guests whose DHCP routes
 * 169.254.169.254 via their gateway (a subnet with a router, as Neutron's
 * L3 agent serves metadata): there the address goes on lo, and the port
 * is looked up among the router's networks. */
#include "network/agent/mdproxy.h"
#include "network/agent/internal.h"

#include "common/cleanup.h"
#include "common/config.h"
#include "common/http_guard.h"
#include "common/json.h"
#include "common/log.h"
#include "common/sbuf.h"
#include "common/util.h"
#include "compute/metadata/metadata.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define MDP_LOG "nubo.network.agent.metadata"

/* ------------------------------------------------------------ pure parts */

/* Appends {ip, port_id, device_id, project_id} unless device_id is empty. */
static void table_add(json_t *t, const char *ip, const char *port, const char *device,
                      const char *project)
{
    if (!ip || !device || !*device)
        return;
    json_array_append_new(t, json_pack("{s:s, s:s?, s:s, s:s?}", "ip", ip, "port_id", port,
                                       "device_id", device, "project_id", project));
}

/* Whether t has port's address ip already. */
static bool has_entry(const json_t *t, const char *ip, const char *port)
{
    size_t i;
    json_t *e;
    json_array_foreach ((json_t *)t, i, e)
        if (!strcmp(nb_json_str(e, "ip"), ip) && nb_json_str(e, "port_id") &&
            !strcmp(nb_json_str(e, "port_id"), port))
            return true;
    return false;
}

json_t *na_md_port_table(const json_t *state, const char *net_id)
{
    json_t *t = json_array();
    size_t i, k;
    json_t *p, *ip, *n;
    json_array_foreach (json_object_get(state, "ports"), i, p) {
        if (!nb_json_str(p, "network_id") || strcmp(nb_json_str(p, "network_id"), net_id))
            continue;
        json_array_foreach (json_object_get(p, "fixed_ips"), k, ip)
            table_add(t, nb_json_str(ip, "ip_address"), nb_json_str(p, "id"),
                      nb_json_str(p, "device_id"), nb_json_str(p, "project_id"));
    }
    json_array_foreach (json_object_get(state, "networks"), i, n) {
        if (!nb_json_str(n, "id") || strcmp(nb_json_str(n, "id"), net_id))
            continue;
        json_array_foreach (json_object_get(n, "dhcp_hosts"), k, p) {
            const char *port = nb_json_str(p, "port_id");
            const char *addr = nb_json_str(p, "ip_address");
            /* a port of this host is already in from "ports" */
            if (port && addr && !has_entry(t, addr, port))
                table_add(t, addr, port, nb_json_str(p, "device_id"),
                          nb_json_str(p, "project_id") ? nb_json_str(p, "project_id")
                                                       : nb_json_str(n, "project_id"));
        }
    }
    return t;
}

json_t *na_md_router_table(const json_t *state, const json_t *router)
{
    json_t *t = json_array();
    size_t i;
    json_t *leg;
    json_array_foreach (json_object_get(router, "interfaces"), i, leg) {
        const char *net = nb_json_str(leg, "network_id");
        if (!net)
            continue;
        json_t *one = na_md_port_table(state, net);
        json_array_extend(t, one);
        json_decref(one);
    }
    return t;
}

int na_md_lookup(const json_t *table, const char *ip, const char **device_id,
                 const char **project_id)
{
    const json_t *found = NULL;
    size_t i;
    json_t *e;
    if (!ip)
        return 0;
    json_array_foreach ((json_t *)table, i, e) {
        if (!nb_json_str(e, "ip") || strcmp(nb_json_str(e, "ip"), ip))
            continue;
        const char *port = nb_json_str(e, "port_id");
        if (found && (!port || !nb_json_str(found, "port_id") ||
                      strcmp(port, nb_json_str(found, "port_id"))))
            return 0; /* two ports with that address: Neutron answers 404 */
        found = e;
    }
    if (!found)
        return 0;
    *device_id = nb_json_str(found, "device_id");
    *project_id = nb_json_str(found, "project_id");
    return 1;
}

json_t *na_md_proxy_headers(const char *secret, const char *instance_id, const char *tenant_id,
                            const char *forwarded_for)
{
    char sig[65];
    nb_md_sign(secret ? secret : "", instance_id, sig);
    return json_pack("{s:s, s:s, s:s, s:s}", "X-Forwarded-For", forwarded_for, "X-Instance-ID",
                     instance_id, "X-Tenant-ID", tenant_id ? tenant_id : "",
                     "X-Instance-ID-Signature", sig);
}

int na_md_relay_status(long upstream, const char **explanation)
{
    switch (upstream) {
    case 200: *explanation = ""; return 200;
    case 400:
        *explanation = "The server could not comply with the request since it is either "
                       "malformed or otherwise incorrect.";
        return 400;
    case 403: *explanation = "Access was denied to this resource."; return 403;
    case 404: *explanation = "The resource could not be found."; return 404;
    case 409:
        *explanation = "There was a conflict when trying to complete your request.";
        return 409;
    case 500:
        *explanation = "Remote metadata server experienced an internal server error.";
        return 500;
    default:
        *explanation = "An unknown error has occurred. Please try your request again.";
        return 500;
    }
}

void na_md_upstream(char *buf, size_t n)
{
    const char *host = nb_conf_str("metadata", "nova_metadata_host", NULL);
    long port = nb_conf_int("metadata", "nova_metadata_port", 0);
    if (!host || !*host) {
        host = nb_conf_str("metadata", "listen", "127.0.0.1");
        if (!strcmp(host, "0.0.0.0") || !*host)
            host = "127.0.0.1";
        else if (!strcmp(host, "::"))
            host = "::1";
    }
    if (port <= 0)
        port = nb_conf_int("metadata", "port", 8775);
    if (strchr(host, ':'))
        snprintf(buf, n, "http://[%s]:%ld", host, port);
    else
        snprintf(buf, n, "http://%s:%ld", host, port);
}

/* ---------------------------------------------------------- the proxies */

struct proxy {
    struct proxy *next;
    const struct na *owner;
    char net[64];
    char ns[160];
    ino_t ns_ino;
    struct nb_http_guard *guard;
    pthread_mutex_t lock; /* guards table */
    json_t *table;
    bool seen;
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct proxy *reg;

static const char *status_title(int status)
{
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 409: return "Conflict";
    default: return "Internal Server Error";
    }
}

/* Percent-encodes what is not safe in a URL path (MHD hands it decoded). */
static void add_escaped(struct nb_sbuf *b, const char *s)
{
    static const char safe[] = "-._~/!$&'()*+,;=:@";
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            strchr(safe, c)) {
            nb_sbuf_add(b, s, 1);
        } else {
            char hex[4];
            snprintf(hex, sizeof(hex), "%%%02X", c);
            nb_sbuf_add(b, hex, 3);
        }
    }
}

struct query {
    struct nb_sbuf *b;
    bool first;
};

static enum MHD_Result add_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                               const char *value)
{
    (void)kind;
    struct query *q = cls;
    nb_sbuf_add(q->b, q->first ? "?" : "&", 1);
    q->first = false;
    add_escaped(q->b, key);
    if (value) {
        nb_sbuf_add(q->b, "=", 1);
        add_escaped(q->b, value);
    }
    return MHD_YES;
}

static size_t on_body(char *data, size_t size, size_t n, void *cls)
{
    nb_sbuf_add(cls, data, size * n);
    return size * n;
}

struct upstream {
    long status;
    struct nb_sbuf body;
    char content_type[128];
    char error[CURL_ERROR_SIZE];
};

/* GET (or the request's method) of url with headers; 0, or -1 with
 * up->error when the metadata API could not be reached. */
static int forward(const char *method, const char *url, const json_t *headers,
                   const struct nb_sbuf *body, struct upstream *up)
{
    CURL *c = curl_easy_init();
    if (!c) {
        nb_strlcpy(up->error, "curl_easy_init failed", sizeof(up->error));
        return -1;
    }
    struct curl_slist *hl = NULL;
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)headers, k, v) {
        char line[512];
        snprintf(line, sizeof(line), "%s: %s", k, json_string_value(v));
        hl = curl_slist_append(hl, line);
    }
    hl = curl_slist_append(hl, "Expect:");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &up->body);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, up->error);
    curl_easy_setopt(c, CURLOPT_PROXY, ""); /* never an http_proxy of the environment */
    if (!strcmp(method, "HEAD"))
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    else if (!strcmp(method, "POST")) { /* the guest's password, as it sent it */
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)body->len);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body->s ? body->s : "");
    } else if (strcmp(method, "GET"))
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    CURLcode rc = curl_easy_perform(c);
    if (rc == CURLE_OK) {
        char *ct = NULL;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &up->status);
        curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct);
        nb_strlcpy(up->content_type, ct ? ct : "text/plain", sizeof(up->content_type));
    } else if (!up->error[0]) {
        nb_strlcpy(up->error, curl_easy_strerror(rc), sizeof(up->error));
    }
    curl_slist_free_all(hl);
    curl_easy_cleanup(c);
    return rc == CURLE_OK ? 0 : -1;
}

static enum MHD_Result queue(struct MHD_Connection *conn, int status, const char *type, char *body,
                             size_t len)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", type);
    enum MHD_Result ret = MHD_queue_response(conn, (unsigned)status, r);
    MHD_destroy_response(r);
    return ret;
}

/* An error page as webob's plain text one. */
static enum MHD_Result queue_error(struct MHD_Connection *conn, int status, const char *why)
{
    char *body = nb_strdup_printf("%d %s\n\n%s\n", status, status_title(status), why);
    return queue(conn, status, "text/plain; charset=UTF-8", body, strlen(body));
}

/* One request from a guest: who it is, then the metadata API's answer. */
static enum MHD_Result proxy_request(struct proxy *p, struct MHD_Connection *conn, const char *url,
                                     const char *method, const struct nb_sbuf *in)
{
    char peer[64];
    nb_http_guard_peer(conn, peer, sizeof(peer));
    double t0 = nb_time_mono();
    pthread_mutex_lock(&p->lock);
    json_t *table = json_incref(p->table);
    pthread_mutex_unlock(&p->lock);
    const char *dev = NULL, *proj = NULL;
    if (!na_md_lookup(table, peer, &dev, &proj)) {
        NB_INFO(MDP_LOG, NULL, NULL, "%s \"%s %s\" on network %s: no port with that address: 404",
                peer, method, url, p->net);
        json_decref(table);
        return queue_error(conn, 404, "The resource could not be found.");
    }
    char instance[64], base[300];
    nb_strlcpy(instance, dev, sizeof(instance));
    _cleanup_json_ json_t *hdrs = na_md_proxy_headers(
        nb_conf_str("neutron", "metadata_proxy_shared_secret", ""), dev, proj, peer);
    json_decref(table);
    na_md_upstream(base, sizeof(base));
    struct nb_sbuf u = {0};
    nb_sbuf_str(&u, base);
    add_escaped(&u, url);
    struct query q = {&u, true};
    MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, add_arg, &q);
    struct upstream up = {0};
    int rc = forward(method, u.s, hdrs, in, &up);
    const char *why = "";
    int status = rc < 0 ? 500 : na_md_relay_status(up.status, &why);
    if (rc < 0)
        why = "An unknown error has occurred. Please try your request again.";
    enum nb_log_level lvl = status == 200 || status == 404 ? NB_LOG_INFO : NB_LOG_WARNING;
    nb_log(lvl, MDP_LOG, NULL, instance,
           "%s \"%s %s\" network %s -> %s: %ld %s len: %zu time: %.4f%s%s", peer, method, url,
           p->net, base, up.status, status == 200 ? "" : why, up.body.len, nb_time_mono() - t0,
           rc < 0 ? ": " : "", rc < 0 ? up.error : "");
    if (up.status == 403)
        NB_WARN(MDP_LOG, NULL, instance,
                "The remote metadata server responded with Forbidden. This response usually "
                "occurs when shared secrets do not match.");
    free(u.s);
    if (status != 200) {
        free(up.body.s);
        return queue_error(conn, status, why);
    }
    char *body = up.body.s ? up.body.s : strdup("");
    return queue(conn, 200, up.content_type, body, up.body.len);
}

static enum MHD_Result answer(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_size, void **con_cls)
{
    (void)version;
    if (!*con_cls) { /* the headers have arrived: the body's buffer */
        if (!(*con_cls = calloc(1, sizeof(struct nb_sbuf))))
            return MHD_NO;
        nb_http_guard_headers_in(conn);
        return MHD_YES;
    }
    struct nb_sbuf *body = *con_cls;
    if (*upload_size) { /* forwarded (a POSTed password), up to 4 KiB of it */
        nb_http_guard_body(conn, *upload_size);
        if (body->len < 4096)
            nb_sbuf_add(body, upload_data, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    nb_http_guard_answering(conn);
    return proxy_request(cls, conn, url, method, body);
}

static void completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)toe;
    struct nb_sbuf *body = *con_cls;
    if (body)
        free(body->s);
    free(body);
    *con_cls = NULL;
    nb_http_guard_completed(conn);
}

static char *reject(void *opaque, const struct nb_http_head *head, int status, const char *msg,
                    size_t *len)
{
    (void)opaque;
    _cleanup_free_ char *body =
        nb_strdup_printf("%d %s\n\n%s\n", status, status_title(status), msg);
    char *text = nb_strdup_printf("HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\n"
                                  "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                                  status, status_title(status), strlen(body), body);
    *len = text ? strlen(text) : 0;
    NB_WARN(MDP_LOG, NULL, NULL, "%s \"%s %s\" status: %d: %s", head->peer,
            head->method ? head->method : "-", head->target ? head->target : "-", status, msg);
    return text;
}

static uint64_t body_limit(void *opaque, const char *method, const char *target)
{
    (void)opaque;
    (void)method;
    (void)target;
    return 65536;
}

/* ---------------------------------------------- sockets in a namespace */

struct ns_job {
    const char *path;
    int fd;
    int err;
    const char *what;
};

/* Runs in a thread of its own, which dies in the namespace it entered. */
static void *ns_socket(void *arg)
{
    struct ns_job *j = arg;
    int nsfd = open(j->path, O_RDONLY | O_CLOEXEC);
    if (nsfd < 0) {
        j->err = errno;
        j->what = "open";
        return NULL;
    }
    if (setns(nsfd, CLONE_NEWNET) < 0) {
        j->err = errno;
        j->what = "setns";
        close(nsfd);
        return NULL;
    }
    close(nsfd);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(NA_MD_PORT)};
    inet_pton(AF_INET, NA_MD_ADDRESS, &a.sin_addr);
    int one = 1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        setsockopt(fd, IPPROTO_IP, IP_FREEBIND, &one, sizeof(one)) < 0 ||
        bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, SOMAXCONN) < 0) {
        j->err = errno;
        j->what = fd < 0 ? "socket" : "bind";
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    j->fd = fd;
    return NULL;
}

/* A listening socket on 169.254.169.254:80 in namespace path. fd, or -1
 * after nb_error. */
static int socket_in(struct nb_ctx *ctx, const char *path)
{
    struct ns_job j = {.path = path, .fd = -1};
    pthread_t t;
    int e = pthread_create(&t, NULL, ns_socket, &j);
    if (e)
        return nb_error(ctx, 500, NULL, "metadata proxy: cannot start a thread: %s", strerror(e));
    pthread_join(t, NULL);
    if (j.fd < 0)
        return nb_error(ctx, 500, NULL, "metadata proxy: %s %s:%d in %s: %s", j.what, NA_MD_ADDRESS,
                        NA_MD_PORT, path, strerror(j.err));
    return j.fd;
}

static void ns_path(const char *ns, char *buf, size_t n)
{
    if (ns[0] == '/')
        nb_strlcpy(buf, ns, n);
    else
        snprintf(buf, n, "/run/netns/%s", ns);
}

static ino_t ns_inode(const char *ns)
{
    char path[256];
    struct stat st;
    ns_path(ns, path, sizeof(path));
    return stat(path, &st) == 0 ? st.st_ino : 0;
}

static void proxy_free(struct proxy *p)
{
    if (p->guard) {
        nb_http_guard_stop(p->guard);
        nb_http_guard_free(p->guard);
    }
    json_decref(p->table);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

/* A new proxy serving network net (or "router:<id>") in namespace ns.
 * In a router's namespace, 169.254.169.254/32 goes on lo so that what the
 * guests send to it via their gateway is delivered there (Neutron
 * redirects it to haproxy's port instead). NULL after nb_error. */
static struct proxy *proxy_new(struct nb_ctx *ctx, const struct na *owner, const char *net,
                               const char *ns)
{
    char path[256];
    ns_path(ns, path, sizeof(path));
    ino_t ino = ns_inode(ns);
    if (!ino) {
        nb_error(ctx, 500, NULL, "metadata proxy: no namespace %s for %s", path, net);
        return NULL;
    }
    if (nb_startswith(net, "router:")) {
        const char *const lo_up[] = {"ip", "link", "set", "lo", "up", NULL};
        const char *const addr[] = {"ip",  "addr", "replace", NA_MD_ADDRESS "/32",
                                    "dev", "lo",   NULL};
        if (na_must(ctx, ns, lo_up, NULL) < 0 || na_must(ctx, ns, addr, NULL) < 0)
            return NULL;
    }
    int fd = socket_in(ctx, path);
    if (fd < 0)
        return NULL;
    struct nb_http_limits lim;
    if (nb_http_limits_load("metadata_proxy", 128, &lim) < 0) {
        close(fd);
        nb_error(ctx, 500, NULL, "metadata proxy: bad [metadata_proxy] limits");
        return NULL;
    }
    struct proxy *p = calloc(1, sizeof(*p));
    if (!p)
        abort();
    p->owner = owner;
    nb_strlcpy(p->net, net, sizeof(p->net));
    nb_strlcpy(p->ns, ns, sizeof(p->ns));
    p->ns_ino = ino;
    p->table = json_array();
    pthread_mutex_init(&p->lock, NULL);
    p->guard = nb_http_guard_new("metadata_proxy", &lim, reject, body_limit, NULL);
    const struct nb_http_callbacks cb = {answer, completed, NULL, p};
    if (!p->guard || nb_http_guard_serve(p->guard, fd, 1, &cb) < 0) {
        close(fd);
        proxy_free(p);
        nb_error(ctx, 500, NULL, "metadata proxy: cannot serve %s:%d in %s", NA_MD_ADDRESS,
                 NA_MD_PORT, path);
        return NULL;
    }
    NB_INFO(MDP_LOG, NULL, NULL, "metadata proxy for network %s listening on %s:%d in %s", net,
            NA_MD_ADDRESS, NA_MD_PORT, ns);
    return p;
}

static struct proxy *find(const struct na *owner, const char *net)
{
    for (struct proxy *p = reg; p; p = p->next)
        if (p->owner == owner && !strcmp(p->net, net))
            return p;
    return NULL;
}

/* Unlinks owner's proxies not seen (all of them when all) onto *gone. */
static void unlink_unseen(const struct na *owner, bool all, struct proxy **gone)
{
    for (struct proxy **pp = &reg; *pp;) {
        struct proxy *p = *pp;
        if ((all || p->owner == owner) && (all || !p->seen)) {
            *pp = p->next;
            p->next = *gone;
            *gone = p;
        } else {
            pp = &p->next;
        }
    }
}

static void free_list(struct proxy *gone, const char *why)
{
    while (gone) {
        struct proxy *n = gone->next;
        NB_INFO(MDP_LOG, NULL, NULL, "metadata proxy for network %s in %s stopped (%s)", gone->net,
                gone->ns, why);
        proxy_free(gone);
        gone = n;
    }
}

/* Makes sure key (a network id, or "router:<id>") has its proxy in ns
 * (replaced when its namespace is a new one) answering from table (taken).
 * 0/-1 after nb_error. */
static int sync_one(struct na *a, struct nb_ctx *ctx, const char *key, const char *ns,
                    json_t *table, struct proxy **gone)
{
    struct proxy *p = find(a, key);
    if (p && (strcmp(p->ns, ns) || ns_inode(ns) != p->ns_ino)) {
        p->seen = false; /* stale: its socket is in a namespace gone */
        for (struct proxy **pp = &reg; *pp; pp = &(*pp)->next)
            if (*pp == p) {
                *pp = p->next;
                break;
            }
        p->next = *gone;
        *gone = p;
        p = NULL;
    }
    if (!p) {
        p = proxy_new(ctx, a, key, ns);
        if (!p) {
            json_decref(table);
            return -1;
        }
        p->next = reg;
        reg = p;
    }
    pthread_mutex_lock(&p->lock);
    json_t *old = p->table;
    p->table = table;
    pthread_mutex_unlock(&p->lock);
    json_decref(old);
    p->seen = true;
    return 0;
}

/* The namespace name of obj (its "namespace", else prefix + id). */
static const char *ns_of(const json_t *obj, const char *prefix, const char *id, char *buf, size_t n)
{
    const char *ns = nb_json_str(obj, "namespace");
    if (ns)
        return ns;
    snprintf(buf, n, "%s%s", prefix, id);
    return buf;
}

static void note_failure(struct nb_ctx *ctx, struct nb_ctx *one, int *rc)
{
    NB_ERROR(MDP_LOG, NULL, NULL, "%s", nb_ctx_message(one));
    if (*rc == 0)
        nb_error(ctx, nb_ctx_status(one), NULL, "%s", nb_ctx_message(one));
    *rc = -1;
}

int na_mdproxy_sync(struct na *a, struct nb_ctx *ctx, const json_t *state)
{
    int rc = 0;
    struct proxy *gone = NULL;
    pthread_mutex_lock(&reg_lock);
    for (struct proxy *p = reg; p; p = p->next)
        if (p->owner == a)
            p->seen = false;
    size_t i;
    json_t *n;
    char buf[128], key[80];
    json_array_foreach (json_object_get(state, "networks"), i, n) {
        const char *id = nb_json_str(n, "id");
        const json_t *dhcp = json_object_get(n, "dhcp");
        if (!json_is_object(dhcp) || !id)
            continue;
        struct nb_ctx one;
        nb_ctx_init(&one);
        if (sync_one(a, &one, id, ns_of(dhcp, "qdhcp-", id, buf, sizeof(buf)),
                     na_md_port_table(state, id), &gone) < 0)
            note_failure(ctx, &one, &rc);
    }
    /* the routers' namespaces, where the guests of networks with a router
     * send 169.254.169.254 (their DHCP routes it via the gateway) */
    json_array_foreach (json_object_get(state, "routers"), i, n) {
        const char *id = nb_json_str(n, "id");
        if (!id || !json_array_size(json_object_get(n, "interfaces")))
            continue;
        snprintf(key, sizeof(key), "router:%s", id);
        const char *ns = ns_of(n, "qrouter-", id, buf, sizeof(buf));
        /* the L3 phase runs after this one: a new router's namespace is
         * there at the next reconcile (resync_interval at the latest) */
        if (!ns_inode(ns)) {
            NB_DEBUG(MDP_LOG, NULL, NULL, "no namespace %s yet for router %s", ns, id);
            continue;
        }
        struct nb_ctx one;
        nb_ctx_init(&one);
        if (sync_one(a, &one, key, ns, na_md_router_table(state, n), &gone) < 0)
            note_failure(ctx, &one, &rc);
    }
    unlink_unseen(a, false, &gone);
    pthread_mutex_unlock(&reg_lock);
    free_list(gone, "network gone from the state or namespace made again");
    return rc;
}

void na_mdproxy_stop_all(void)
{
    struct proxy *gone = NULL;
    pthread_mutex_lock(&reg_lock);
    unlink_unseen(NULL, true, &gone);
    pthread_mutex_unlock(&reg_lock);
    free_list(gone, "agent stopping");
}
