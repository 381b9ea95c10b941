/* http_guard.c - connection limits, request-head checks and deadlines in
 * front of libmicrohttpd (see http_guard.h).
 *
 * One thread per guard runs an epoll loop: the listening socket (level
 * triggered) and the connections not yet handed over (edge triggered, so a
 * head left unread in the socket does not wake us again until more bytes
 * come). Every connection, front or handed over, has an entry in a table
 * indexed by its fd, under the guard's mutex: the sweeper walks it every
 * SWEEP_MS. libmicrohttpd's worker threads find their entry through the
 * connection's socket context, set at MHD_CONNECTION_NOTIFY_STARTED and
 * dropped at MHD_CONNECTION_NOTIFY_CLOSED, which libmicrohttpd calls before
 * closing the fd (so a shutdown() under the mutex never hits a reused fd). */
#include "common/http_guard.h"
#include "common/config.h"
#include "common/log.h"
#include "common/util.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define GUARD_LOG "nubo.api.guard"
#define SWEEP_MS 200
#define LINGER_S 2.0 /* how long a refused connection is drained before close */
#define IP_BUCKETS 1024
#define FD_RESERVE 512 /* descriptors left for files, the database, libvirt, … */

enum phase {
    PH_FRONT,     /* the guard waits for the first request head */
    PH_LINGER,    /* refused and answered: draining until the peer closes */
    PH_WAIT,      /* in libmicrohttpd, waiting for a request head */
    PH_BODY,      /* head in, body arriving */
    PH_ANSWERING, /* handler or response under way */
};

struct ip_count {
    struct ip_count *next;
    unsigned char addr[16];
    unsigned len;
    unsigned n;
};

struct entry {
    int fd;
    enum phase phase;
    bool killed; /* shut down by the sweeper */
    double since;
    uint64_t received;
    struct sockaddr_storage addr;
    socklen_t addrlen;
    int server; /* index of the libmicrohttpd server holding it, -1 in front */
    struct nb_http_guard *guard;
};

struct nb_http_guard {
    char name[32];
    struct nb_http_limits lim;
    nb_http_reject_fn reject;
    nb_http_body_limit_fn body_limit;
    void *opaque;
    pthread_mutex_t lock;
    struct entry **table; /* by fd */
    int table_size, max_fd;
    unsigned open;
    struct ip_count *ips[IP_BUCKETS];
    int listen_fd, ep, wake;
    struct MHD_Daemon **servers; /* one thread each */
    unsigned nservers;
    unsigned *server_conns, *server_busy; /* connections; those with a request under way */
    pthread_t thread;
    bool running;
    char *peek; /* max_header_size + 1 bytes, guard thread only */
    unsigned long sweeps;
};

/* --- limits ------------------------------------------------------------- */

static int conf_unsigned(const char *section, const char *key, long long def, long long lo,
                         long long hi, unsigned *out)
{
    long long v = nb_conf_int(section, key, def);
    if (v < lo || v > hi) {
        fprintf(stderr, "nubo: [%s] %s = %lld is out of range (%lld to %lld)\n", section, key, v,
                lo, hi);
        return -1;
    }
    *out = (unsigned)v;
    return 0;
}

/* The descriptors this process may open, after raising the soft limit to
 * the hard one. */
static rlim_t fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return 1024;
    if (rl.rlim_cur < rl.rlim_max) {
        rlim_t want = rl.rlim_max == RLIM_INFINITY ? 1048576 : rl.rlim_max;
        struct rlimit up = {want, rl.rlim_max};
        if (setrlimit(RLIMIT_NOFILE, &up) == 0)
            rl.rlim_cur = want;
    }
    return rl.rlim_cur == RLIM_INFINITY ? 1048576 : rl.rlim_cur;
}

int nb_http_limits_load(const char *section, unsigned default_max_connections,
                        struct nb_http_limits *l)
{
    unsigned hdr;
    if (conf_unsigned(section, "max_connections", default_max_connections, 1, 1000000,
                      &l->max_connections) < 0 ||
        conf_unsigned(section, "max_connections_per_ip", 256, 1, 1000000,
                      &l->max_connections_per_ip) < 0 ||
        conf_unsigned(section, "client_idle_timeout", 60, 1, 86400, &l->idle_timeout) < 0 ||
        conf_unsigned(section, "header_timeout", 20, 1, 3600, &l->header_timeout) < 0 ||
        conf_unsigned(section, "body_timeout", 30, 1, 86400, &l->body_timeout) < 0 ||
        conf_unsigned(section, "body_min_rate", 1024, 1, 1 << 30, &l->body_min_rate) < 0 ||
        conf_unsigned(section, "max_header_size", 32768, 1024, 1 << 20, &hdr) < 0)
        return -1;
    l->max_header_size = hdr;
    rlim_t fds = fd_limit();
    rlim_t room = fds > 2 * FD_RESERVE ? fds - FD_RESERVE : fds / 2;
    if (l->max_connections > room) {
        NB_WARN(GUARD_LOG, NULL, NULL,
                "[%s] max_connections lowered from %u to %u: the process may open %llu files",
                section, l->max_connections, (unsigned)room, (unsigned long long)fds);
        l->max_connections = (unsigned)room;
    }
    if (l->max_connections_per_ip > l->max_connections)
        l->max_connections_per_ip = l->max_connections;
    return 0;
}

/* --- bookkeeping (call with g->lock held) ------------------------------- */

static void addr_key(const struct sockaddr_storage *ss, unsigned char key[16], unsigned *len)
{
    if (ss->ss_family == AF_INET6) {
        memcpy(key, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
        *len = 16;
    } else {
        memcpy(key, &((const struct sockaddr_in *)ss)->sin_addr, 4);
        *len = 4;
    }
}

/* The bucket of ss's address. */
static struct ip_count **ip_bucket(struct nb_http_guard *g, const struct sockaddr_storage *ss,
                                   unsigned char key[16], unsigned *len)
{
    unsigned h = 2166136261u;
    addr_key(ss, key, len);
    for (unsigned i = 0; i < *len; i++)
        h = (h ^ key[i]) * 16777619u;
    return &g->ips[h % IP_BUCKETS];
}

/* The counter of ss's address, created (at zero) if missing; NULL on OOM. */
static struct ip_count *ip_find(struct nb_http_guard *g, const struct sockaddr_storage *ss)
{
    unsigned char key[16];
    unsigned len;
    struct ip_count **head = ip_bucket(g, ss, key, &len);
    for (struct ip_count *c = *head; c; c = c->next)
        if (c->len == len && memcmp(c->addr, key, len) == 0)
            return c;
    struct ip_count *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    memcpy(c->addr, key, len);
    c->len = len;
    c->next = *head;
    *head = c;
    return c;
}

/* One connection of ss's address less; a counter at zero is freed. */
static void ip_release(struct nb_http_guard *g, const struct sockaddr_storage *ss)
{
    unsigned char key[16];
    unsigned len;
    for (struct ip_count **pp = ip_bucket(g, ss, key, &len); *pp; pp = &(*pp)->next) {
        struct ip_count *c = *pp;
        if (c->len != len || memcmp(c->addr, key, len) != 0)
            continue;
        if (c->n)
            c->n--;
        if (!c->n) {
            *pp = c->next;
            free(c);
        }
        return;
    }
}

static bool busy(enum phase ph)
{
    return ph == PH_BODY || ph == PH_ANSWERING;
}

/* Forgets e (its fd is closed or about to be by its owner). */
static void entry_drop(struct nb_http_guard *g, struct entry *e)
{
    if (e->server >= 0) {
        g->server_conns[e->server]--;
        if (busy(e->phase))
            g->server_busy[e->server]--;
    }
    if (e->fd >= 0 && e->fd < g->table_size && g->table[e->fd] == e)
        g->table[e->fd] = NULL;
    ip_release(g, &e->addr);
    g->open--;
    free(e);
}

static void peer_text(const struct sockaddr_storage *ss, char *buf, size_t n)
{
    const void *a = ss->ss_family == AF_INET6
                        ? (const void *)&((const struct sockaddr_in6 *)ss)->sin6_addr
                        : (const void *)&((const struct sockaddr_in *)ss)->sin_addr;
    if (!inet_ntop(ss->ss_family, a, buf, (socklen_t)n))
        nb_strlcpy(buf, "-", n);
}

/* --- the request head ---------------------------------------------------- */

static bool is_tchar(int c)
{
    return isalnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* Why a complete head (buf, len, ending in a blank line) is refused: 0 if
 * it is fine, else the status, with msg filled and h's fields pointing into
 * work (a writable copy). */
struct head_check {
    char *method, *target, *version, *accept;
    int status;
    char msg[160];
};

static int refuse(struct head_check *hc, int status, const char *msg)
{
    hc->status = status;
    nb_strlcpy(hc->msg, msg, sizeof(hc->msg));
    return status;
}

/* Splits the request line in place. 0, or the status for a bad one. */
static int check_request_line(char *line, struct head_check *hc)
{
    char *sp1 = strchr(line, ' ');
    char *sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
    if (!sp1 || !sp2 || strchr(sp2 + 1, ' '))
        return refuse(hc, 400, "Malformed request line: expected \"METHOD /path HTTP/1.1\".");
    *sp1 = *sp2 = '\0';
    hc->method = line;
    hc->target = sp1 + 1;
    hc->version = sp2 + 1;
    for (const char *p = hc->method; *p; p++)
        if (!is_tchar((unsigned char)*p))
            return refuse(hc, 400, "Malformed request line: bad method.");
    if (!*hc->method || hc->target[0] != '/') {
        hc->target = NULL;
        return refuse(hc, 400, "Malformed request line: the target must be a path.");
    }
    for (const char *p = hc->target; *p; p++)
        if ((unsigned char)*p <= ' ' || *p == 0x7f)
            return refuse(hc, 400, "Malformed request line: bad character in the path.");
    const char *v = hc->version;
    if (strncmp(v, "HTTP/", 5) != 0 || !isdigit((unsigned char)v[5]) || v[6] != '.' ||
        !isdigit((unsigned char)v[7]) || v[8])
        return refuse(hc, 400, "Malformed request line: bad HTTP version.");
    if (v[5] != '1')
        return refuse(hc, 505, "HTTP version not supported: only HTTP/1.0 and HTTP/1.1.");
    return 0;
}

/* Checks one "Name: value" line; remembers Accept and Content-Length. */
static int check_header_line(char *line, struct head_check *hc, const char **cl, bool *dup_cl)
{
    if (line[0] == ' ' || line[0] == '\t')
        return 0; /* obsolete line folding: a continuation */
    char *colon = strchr(line, ':');
    if (!colon || colon == line)
        return refuse(hc, 400, "Malformed header line: expected \"Name: value\".");
    for (const char *p = line; p < colon; p++)
        if (!is_tchar((unsigned char)*p))
            return refuse(hc, 400, "Malformed header line: bad character in the name.");
    *colon = '\0';
    char *v = colon + 1;
    while (*v == ' ' || *v == '\t')
        v++;
    char *e = v + strlen(v);
    while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
        *--e = '\0';
    if (strcasecmp(line, "Accept") == 0)
        hc->accept = v;
    if (strcasecmp(line, "Content-Length") == 0) {
        if (*cl && strcmp(*cl, v) != 0)
            *dup_cl = true;
        *cl = v;
    }
    return 0;
}

/* Checks the head in work (NUL-terminated, ends with its blank line). */
static int check_head(struct nb_http_guard *g, char *work, struct head_check *hc)
{
    while (*work == '\r' || *work == '\n')
        work++; /* RFC 9112 2.2: ignore empty lines before the request */
    char *save = NULL, *line = strtok_r(work, "\n", &save);
    if (!line)
        return refuse(hc, 400, "Empty request.");
    line[strcspn(line, "\r")] = '\0';
    if (check_request_line(line, hc))
        return hc->status;
    const char *cl = NULL;
    bool dup_cl = false;
    while ((line = strtok_r(NULL, "\n", &save))) {
        line[strcspn(line, "\r")] = '\0';
        if (!*line)
            break;
        if (check_header_line(line, hc, &cl, &dup_cl))
            return hc->status;
    }
    if (dup_cl)
        return refuse(hc, 400, "Conflicting Content-Length headers.");
    if (cl) {
        char *end;
        errno = 0;
        unsigned long long n = strtoull(cl, &end, 10);
        if (!*cl || *end || !isdigit((unsigned char)*cl) || errno == ERANGE)
            return refuse(hc, 400, "Invalid Content-Length header.");
        if (n > g->body_limit(g->opaque, hc->method, hc->target))
            return refuse(hc, 413, "Request is too large.");
    }
    return 0;
}

/* Length of the head in buf (through its blank line), or 0 if incomplete. */
static size_t head_length(const char *buf, size_t n)
{
    size_t i = 0;
    while (i < n && (buf[i] == '\r' || buf[i] == '\n'))
        i++;
    for (; i < n; i++) {
        if (buf[i] != '\n')
            continue;
        if (i + 1 < n && buf[i + 1] == '\n')
            return i + 2;
        if (i + 2 < n && buf[i + 1] == '\r' && buf[i + 2] == '\n')
            return i + 3;
    }
    return 0;
}

/* --- the guard thread ----------------------------------------------------- */

/* Closes a front connection. */
static void front_close(struct nb_http_guard *g, struct entry *e)
{
    epoll_ctl(g->ep, EPOLL_CTL_DEL, e->fd, NULL);
    close(e->fd);
    pthread_mutex_lock(&g->lock);
    entry_drop(g, e);
    pthread_mutex_unlock(&g->lock);
}

/* Answers a refused head (consumed: consumed bytes) and lingers. */
static void front_refuse(struct nb_http_guard *g, struct entry *e, size_t consumed,
                         struct head_check *hc)
{
    char peer[64];
    peer_text(&e->addr, peer, sizeof(peer));
    struct nb_http_head h = {hc->method, hc->target, hc->version, hc->accept, peer};
    size_t len = 0;
    char *text = g->reject(g->opaque, &h, hc->status, hc->msg, &len);
    while (consumed > 0) { /* what we peeked at is read, so close() sends no reset */
        ssize_t n = recv(e->fd, g->peek, consumed, MSG_DONTWAIT);
        if (n <= 0)
            break;
        consumed -= (size_t)n;
    }
    if (text)
        (void)!send(e->fd, text, len, MSG_DONTWAIT | MSG_NOSIGNAL);
    free(text);
    shutdown(e->fd, SHUT_WR);
    pthread_mutex_lock(&g->lock);
    e->phase = PH_LINGER;
    e->since = nb_time_mono();
    pthread_mutex_unlock(&g->lock);
}

/* The server a new connection goes to: the one with the fewest requests
 * under way (a handler blocks its server's thread), then the fewest
 * connections. Call with g->lock held. */
static int pick_server(struct nb_http_guard *g)
{
    unsigned best = 0;
    for (unsigned i = 1; i < g->nservers; i++)
        if (g->server_busy[i] < g->server_busy[best] ||
            (g->server_busy[i] == g->server_busy[best] &&
             g->server_conns[i] < g->server_conns[best]))
            best = i;
    return (int)best;
}

/* Gives a connection with a good head to libmicrohttpd. */
static void front_hand_over(struct nb_http_guard *g, struct entry *e)
{
    epoll_ctl(g->ep, EPOLL_CTL_DEL, e->fd, NULL);
    pthread_mutex_lock(&g->lock);
    e->phase = PH_WAIT; /* the head is in; its deadline keeps running */
    e->server = pick_server(g);
    g->server_conns[e->server]++;
    struct MHD_Daemon *d = g->servers[e->server];
    pthread_mutex_unlock(&g->lock);
    if (MHD_add_connection(d, e->fd, (const struct sockaddr *)&e->addr, e->addrlen) != MHD_YES) {
        /* libmicrohttpd closed it (at its own limit) */
        pthread_mutex_lock(&g->lock);
        entry_drop(g, e);
        pthread_mutex_unlock(&g->lock);
    }
}

/* New bytes on a front connection: is the head complete, and good? */
static void front_examine(struct nb_http_guard *g, struct entry *e)
{
    if (e->phase == PH_LINGER) {
        ssize_t n;
        while ((n = recv(e->fd, g->peek, g->lim.max_header_size, MSG_DONTWAIT)) > 0)
            ;
        if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
            front_close(g, e);
        return;
    }
    ssize_t n = recv(e->fd, g->peek, g->lim.max_header_size + 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (n <= 0) {
        front_close(g, e);
        return;
    }
    size_t len = (size_t)n, hl = head_length(g->peek, len);
    struct head_check hc = {0};
    char *work = malloc(len + 1);
    if (!work) {
        front_close(g, e);
        return;
    }
    memcpy(work, g->peek, len);
    work[len] = '\0';
    if (hl) {
        work[hl] = '\0';
        if (check_head(g, work, &hc) == 0) {
            free(work);
            front_hand_over(g, e);
            return;
        }
    } else {
        /* incomplete: a finished request line can already be refused */
        char *start = work + strspn(work, "\r\n");
        char *nl = memchr(start, '\n', len - (size_t)(start - work));
        if (nl) {
            *nl = '\0';
            start[strcspn(start, "\r")] = '\0';
            check_request_line(start, &hc);
        } else if (len > 0 && !is_tchar((unsigned char)*start) && *start) {
            refuse(&hc, 400, "Malformed request line.");
        }
        if (!hc.status && len > g->lim.max_header_size)
            refuse(&hc, nl ? 431 : 414,
                   nl ? "Request header fields too large." : "Request-URI too long.");
        if (!hc.status) {
            free(work);
            return; /* wait for more (the sweeper keeps the deadline) */
        }
    }
    front_refuse(g, e, hl ? hl : len, &hc);
    free(work);
}

static void front_accept(struct nb_http_guard *g)
{
    for (;;) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        int fd = accept4(g->listen_fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                usleep(50000); /* out of descriptors: let the sweep free some */
            return;
        }
        pthread_mutex_lock(&g->lock);
        struct ip_count *ipc = NULL;
        struct entry *e = NULL;
        if (fd < g->table_size && g->open < g->lim.max_connections)
            ipc = ip_find(g, &ss);
        if (ipc && ipc->n < g->lim.max_connections_per_ip)
            e = calloc(1, sizeof(*e));
        if (ipc && !ipc->n && !e) { /* made just now, and not used */
            ipc->n = 1;
            ip_release(g, &ss);
        }
        if (e) {
            if (g->table[fd]) /* a stale entry libmicrohttpd never reported closed */
                entry_drop(g, g->table[fd]);
            e->fd = fd;
            e->server = -1;
            e->phase = PH_FRONT;
            e->since = nb_time_mono();
            e->addr = ss;
            e->addrlen = sl;
            e->guard = g;
            g->table[fd] = e;
            if (fd > g->max_fd)
                g->max_fd = fd;
            g->open++;
            ipc->n++;
        }
        pthread_mutex_unlock(&g->lock);
        struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.ptr = e};
        if (!e || epoll_ctl(g->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
            if (e) {
                pthread_mutex_lock(&g->lock);
                entry_drop(g, e);
                pthread_mutex_unlock(&g->lock);
            }
            close(fd); /* over a limit: refused */
        }
    }
}

/* Enforces the deadlines. Front connections are closed here (this
 * thread owns them); handed-over ones are shut down, libmicrohttpd then
 * sees the end of the stream and closes them. */
/* True if the peer closed its side and nothing it sent is left unread.
 * libmicrohttpd 0.9.75 (edge-triggered epoll) can miss such an end when
 * the FIN came with the last data: it then holds the connection (and an
 * upload in progress) until the idle timeout. A connection waiting for a
 * head or in the middle of a body cannot complete any more. */
static bool peer_gone(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    int unread = 0;
    return poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) &&
           ioctl(fd, FIONREAD, &unread) == 0 && unread == 0;
}

static void sweep(struct nb_http_guard *g, double now)
{
    struct entry *late[64];
    int nlate = 0;
    bool check_idle = ++g->sweeps % 5 == 0; /* idle connections: once a second */
    pthread_mutex_lock(&g->lock);
    for (int fd = 0; fd <= g->max_fd; fd++) {
        struct entry *e = g->table[fd];
        if (!e || e->killed)
            continue;
        double age = now - e->since;
        bool over = false;
        switch (e->phase) {
        case PH_FRONT:
        case PH_WAIT: over = age > g->lim.header_timeout; break;
        case PH_LINGER: over = age > LINGER_S; break;
        case PH_BODY:
            over = age > g->lim.body_timeout + (double)e->received / g->lim.body_min_rate;
            break;
        case PH_ANSWERING: break;
        }
        if (!over && (e->phase == PH_BODY || (e->phase == PH_WAIT && check_idle)))
            over = peer_gone(e->fd);
        if (!over)
            continue;
        if (e->phase == PH_FRONT || e->phase == PH_LINGER) {
            if (nlate < 64)
                late[nlate++] = e;
        } else {
            e->killed = true;
            shutdown(e->fd, SHUT_RDWR);
        }
    }
    pthread_mutex_unlock(&g->lock);
    for (int i = 0; i < nlate; i++)
        front_close(g, late[i]);
}

static void *guard_main(void *arg)
{
    struct nb_http_guard *g = arg;
    struct epoll_event evs[64];
    double last = nb_time_mono();
    while (g->running) {
        int n = epoll_wait(g->ep, evs, 64, SWEEP_MS);
        for (int i = 0; i < n && g->running; i++) {
            if (evs[i].data.ptr == g)
                front_accept(g);
            else if (evs[i].data.ptr)
                front_examine(g, evs[i].data.ptr);
        }
        double now = nb_time_mono();
        if (now - last >= SWEEP_MS / 1000.0) {
            sweep(g, now);
            last = now;
        }
    }
    return NULL;
}

/* --- public ------------------------------------------------------------- */

struct nb_http_guard *nb_http_guard_new(const char *name, const struct nb_http_limits *l,
                                        nb_http_reject_fn reject, nb_http_body_limit_fn limit,
                                        void *opaque)
{
    struct nb_http_guard *g = calloc(1, sizeof(*g));
    if (!g)
        return NULL;
    nb_strlcpy(g->name, name, sizeof(g->name));
    g->lim = *l;
    g->reject = reject;
    g->body_limit = limit;
    g->opaque = opaque;
    g->listen_fd = g->ep = g->wake = -1;
    g->table_size = (int)fd_limit();
    g->table = calloc((size_t)g->table_size, sizeof(*g->table));
    g->peek = malloc(l->max_header_size + 1);
    if (!g->table || !g->peek) {
        free(g->table);
        free(g->peek);
        free(g);
        return NULL;
    }
    pthread_mutex_init(&g->lock, NULL);
    return g;
}

int nb_http_listen(const char *host, int port, bool reuse_port)
{
    struct sockaddr_storage ss = {0};
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    socklen_t sl;
    if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)port);
        sl = sizeof(*a4);
    } else if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)port);
        sl = sizeof(*a6);
    } else {
        fprintf(stderr, "nubo: bad listen address %s\n", host);
        return -1;
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        (reuse_port && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0) ||
        bind(fd, (struct sockaddr *)&ss, sl) < 0 || listen(fd, SOMAXCONN) < 0) {
        fprintf(stderr, "nubo: cannot listen on %s:%d: %s\n", host, port, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

static void guard_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                         enum MHD_ConnectionNotificationCode code);

/* Starts g's libmicrohttpd servers: one thread each, no listening socket
 * (the guard hands connections over), its limits and callbacks. 0/-1. */
static int start_servers(struct nb_http_guard *g, unsigned n, const struct nb_http_callbacks *cb)
{
    g->servers = calloc(n, sizeof(*g->servers));
    g->server_conns = calloc(n, sizeof(*g->server_conns));
    g->server_busy = calloc(n, sizeof(*g->server_busy));
    if (!g->servers || !g->server_conns || !g->server_busy)
        return -1;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ITC |
                     MHD_USE_ERROR_LOG | MHD_USE_NO_LISTEN_SOCKET;
    /* the pool holds the head (the guard bounds it) and the read buffer */
    size_t pool = g->lim.max_header_size * 2 + 65536;
    for (unsigned i = 0; i < n; i++) {
        g->servers[i] = MHD_start_daemon(
            flags, 0, NULL, NULL, cb->answer, cb->answer_cls, MHD_OPTION_NOTIFY_COMPLETED,
            cb->completed, cb->answer_cls, MHD_OPTION_URI_LOG_CALLBACK, cb->uri_log, cb->answer_cls,
            MHD_OPTION_NOTIFY_CONNECTION, guard_notify, g, MHD_OPTION_CONNECTION_TIMEOUT,
            g->lim.idle_timeout, MHD_OPTION_CONNECTION_LIMIT, g->lim.max_connections,
            MHD_OPTION_CONNECTION_MEMORY_LIMIT, pool, MHD_OPTION_END);
        if (!g->servers[i])
            return -1;
        g->nservers++;
    }
    return 0;
}

static void stop_servers(struct nb_http_guard *g)
{
    for (unsigned i = 0; i < g->nservers; i++)
        MHD_stop_daemon(g->servers[i]); /* in-flight requests finish */
    g->nservers = 0;
}

int nb_http_guard_serve(struct nb_http_guard *g, int listen_fd, unsigned nthreads,
                        const struct nb_http_callbacks *cb)
{
    g->listen_fd = listen_fd;
    g->ep = epoll_create1(EPOLL_CLOEXEC);
    g->wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    struct epoll_event lev = {.events = EPOLLIN, .data.ptr = g};
    struct epoll_event wev = {.events = EPOLLIN, .data.ptr = NULL};
    if (g->ep < 0 || g->wake < 0 || epoll_ctl(g->ep, EPOLL_CTL_ADD, listen_fd, &lev) < 0 ||
        epoll_ctl(g->ep, EPOLL_CTL_ADD, g->wake, &wev) < 0) {
        fprintf(stderr, "nubo: %s: epoll: %s\n", g->name, strerror(errno));
        return -1;
    }
    if (start_servers(g, nthreads ? nthreads : 1, cb) < 0) {
        fprintf(stderr, "nubo: %s: cannot start the HTTP servers\n", g->name);
        stop_servers(g);
        return -1;
    }
    g->running = true;
    if (pthread_create(&g->thread, NULL, guard_main, g) != 0) {
        g->running = false;
        stop_servers(g);
        return -1;
    }
    NB_INFO(GUARD_LOG, NULL, NULL,
            "%s: %u threads, max_connections %u, per IP %u, header_timeout %us, body_timeout %us "
            "+ 1s/%u bytes, idle timeout %us, max_header_size %zu",
            g->name, g->nservers, g->lim.max_connections, g->lim.max_connections_per_ip,
            g->lim.header_timeout, g->lim.body_timeout, g->lim.body_min_rate, g->lim.idle_timeout,
            g->lim.max_header_size);
    return 0;
}

void nb_http_guard_stop(struct nb_http_guard *g)
{
    if (!g)
        return;
    if (!g->running) {
        stop_servers(g);
        return;
    }
    g->running = false;
    uint64_t one = 1;
    (void)!write(g->wake, &one, sizeof(one));
    pthread_join(g->thread, NULL);
    close(g->listen_fd);
    g->listen_fd = -1;
    pthread_mutex_lock(&g->lock);
    for (int fd = 0; fd <= g->max_fd; fd++) {
        struct entry *e = g->table[fd];
        if (e && (e->phase == PH_FRONT || e->phase == PH_LINGER)) {
            close(e->fd);
            entry_drop(g, e);
        }
    }
    pthread_mutex_unlock(&g->lock);
    stop_servers(g);
}

void nb_http_guard_free(struct nb_http_guard *g)
{
    if (!g)
        return;
    for (int fd = 0; fd <= g->max_fd; fd++)
        free(g->table[fd]); /* none left once libmicrohttpd stopped */
    for (int i = 0; i < IP_BUCKETS; i++)
        for (struct ip_count *c = g->ips[i], *next; c; c = next) {
            next = c->next;
            free(c);
        }
    if (g->ep >= 0)
        close(g->ep);
    if (g->wake >= 0)
        close(g->wake);
    pthread_mutex_destroy(&g->lock);
    free(g->servers);
    free(g->server_conns);
    free(g->server_busy);
    free(g->table);
    free(g->peek);
    free(g);
}

/* MHD_OPTION_NOTIFY_CONNECTION: ties a connection to its entry (cls is
 * the guard). */
static void guard_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                         enum MHD_ConnectionNotificationCode code)
{
    struct nb_http_guard *g = cls;
    pthread_mutex_lock(&g->lock);
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        int fd = ci ? ci->connect_fd : -1;
        *socket_context = fd >= 0 && fd < g->table_size ? g->table[fd] : NULL;
    } else if (*socket_context) {
        entry_drop(g, *socket_context);
        *socket_context = NULL;
    }
    pthread_mutex_unlock(&g->lock);
}

static struct entry *entry_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

static void set_phase(struct MHD_Connection *conn, enum phase ph)
{
    struct entry *e = entry_of(conn);
    if (!e)
        return;
    struct nb_http_guard *g = e->guard;
    pthread_mutex_lock(&g->lock);
    if (e->server >= 0 && busy(e->phase) != busy(ph)) {
        if (busy(ph))
            g->server_busy[e->server]++;
        else
            g->server_busy[e->server]--;
    }
    e->phase = ph;
    e->since = nb_time_mono();
    e->received = 0;
    pthread_mutex_unlock(&e->guard->lock);
}

void nb_http_guard_headers_in(struct MHD_Connection *conn)
{
    set_phase(conn, PH_BODY);
}

void nb_http_guard_body(struct MHD_Connection *conn, size_t n)
{
    struct entry *e = entry_of(conn);
    if (!e)
        return;
    pthread_mutex_lock(&e->guard->lock);
    e->received += n;
    pthread_mutex_unlock(&e->guard->lock);
}

void nb_http_guard_answering(struct MHD_Connection *conn)
{
    set_phase(conn, PH_ANSWERING);
}

void nb_http_guard_completed(struct MHD_Connection *conn)
{
    set_phase(conn, PH_WAIT);
}

void nb_http_guard_answer_now(struct MHD_Connection *conn, const char *text, size_t len)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci)
        return;
    int fd = ci->connect_fd;
    size_t off = 0;
    double deadline = nb_time_mono() + 1.0;
    while (off < len && nb_time_mono() < deadline) {
        ssize_t n = send(fd, text + off, len - off, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0) {
            off += (size_t)n;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            poll(&p, 1, 100);
        } else {
            break;
        }
    }
    shutdown(fd, SHUT_RDWR); /* libmicrohttpd sees the end and closes it */
}

const char *nb_http_guard_peer(struct MHD_Connection *conn, char *buf, size_t n)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    nb_strlcpy(buf, "-", n);
    if (ci && ci->client_addr) {
        socklen_t len = ci->client_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                               : sizeof(struct sockaddr_in);
        getnameinfo(ci->client_addr, len, buf, (socklen_t)n, NULL, 0, NI_NUMERICHOST);
    }
    return buf;
}
