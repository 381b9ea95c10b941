/* amqp_link.c - opening, checking and closing one AMQP connection (see
 * amqp_link.h). Connect and handshake are bounded by timeouts, sockets get
 * TCP keepalive so a vanished broker is noticed even without AMQP
 * heartbeats, and errors are turned into the broker's own words
 * ("NOT_ALLOWED - vhost nova not found") or the socket's ("Connection
 * refused"). */
#include "bus/amqp_link.h"
#include "common/util.h"

#include <amqp_tcp_socket.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#define CONNECT_TIMEOUT_S 5
#define RPC_TIMEOUT_S 15

static void set_reason(struct nb_amqp_link *l, const char *what, const char *why)
{
    snprintf(l->reason, sizeof(l->reason), "%s: %s", what, why);
}

void nb_amqp_link_fail(struct nb_amqp_link *l, const char *what, amqp_rpc_reply_t r)
{
    char why[400];
    switch (r.reply_type) {
    case AMQP_RESPONSE_LIBRARY_EXCEPTION:
        snprintf(why, sizeof(why), "%s", amqp_error_string2(r.library_error));
        break;
    case AMQP_RESPONSE_SERVER_EXCEPTION:
        if (r.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
            amqp_connection_close_t *m = r.reply.decoded;
            snprintf(why, sizeof(why), "%.*s (%u)", (int)m->reply_text.len,
                     (char *)m->reply_text.bytes, m->reply_code);
        } else if (r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
            amqp_channel_close_t *m = r.reply.decoded;
            snprintf(why, sizeof(why), "%.*s (%u)", (int)m->reply_text.len,
                     (char *)m->reply_text.bytes, m->reply_code);
        } else
            snprintf(why, sizeof(why), "unexpected method 0x%08x", r.reply.id);
        break;
    default: snprintf(why, sizeof(why), "no reply"); break;
    }
    set_reason(l, what, why);
}

bool nb_amqp_link_ok(struct nb_amqp_link *l, const char *what)
{
    amqp_rpc_reply_t r = amqp_get_rpc_reply(l->st);
    if (r.reply_type == AMQP_RESPONSE_NORMAL)
        return true;
    nb_amqp_link_fail(l, what, r);
    nb_amqp_link_close(l);
    return false;
}

/* TCP_NODELAY (small frames go out at once, as librabbitmq's own sockets
 * do), keepalive (a vanished peer is noticed without AMQP heartbeats) and,
 * as oslo.messaging sets it, TCP_USER_TIMEOUT of the heartbeat threshold
 * (60 s when heartbeats are off): a frame the peer has not acknowledged by
 * then closes the connection, so a link cut for minutes is reopened rather
 * than left to TCP's retransmission back-off once it is back. */
static void tune_socket(int fd, int heartbeat)
{
    int on = 1, idle = 30, intvl = 10, cnt = 3;
    unsigned user_ms = (unsigned)(heartbeat > 0 ? heartbeat : 60) * 1000u;
    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_ms, sizeof(user_ms));
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

/* Connects to host:port within CONNECT_TIMEOUT_S; returns a
 * non-blocking socket, or -1 with the precise cause in why ("Connection refused"). Done
 * here rather than by librabbitmq, which reports every failure as "a socket
 * error occurred". */
static int tcp_connect(const char *host, int port, char *why, size_t n)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    char service[8];
    snprintf(service, sizeof(service), "%d", port);
    int rc = getaddrinfo(host, service, &hints, &ai);
    if (rc != 0) {
        snprintf(why, n, "%s", gai_strerror(rc));
        return -1;
    }
    int fd = -1;
    snprintf(why, n, "no address");
    for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            snprintf(why, n, "%s", strerror(errno));
            continue;
        }
        int err = connect(fd, a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
        if (err == EINPROGRESS) {
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            socklen_t len = sizeof(err);
            int ready = poll(&p, 1, CONNECT_TIMEOUT_S * 1000);
            if (ready == 0)
                err = ETIMEDOUT;
            else if (ready < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
                err = errno;
        }
        if (err) {
            snprintf(why, n, "%s", strerror(err));
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(ai);
    return fd; /* left non-blocking: librabbitmq polls with its own timeouts */
}

/* Opens the TCP connection to host h and logs in. 0/-1 (reason set). */
static int open_host(struct nb_amqp_link *l, const struct nb_bus_url *url, int h, int heartbeat)
{
    l->st = amqp_new_connection();
    amqp_socket_t *sock = l->st ? amqp_tcp_socket_new(l->st) : NULL;
    if (!sock) {
        set_reason(l, "connect", "out of memory");
        nb_amqp_link_close(l);
        return -1;
    }
    char why[256];
    int fd = tcp_connect(url->hosts[h].host, url->hosts[h].port, why, sizeof(why));
    if (fd < 0) {
        set_reason(l, "connect", why);
        nb_amqp_link_close(l);
        return -1;
    }
    amqp_tcp_socket_set_sockfd(sock, fd);
    struct timeval tv = {.tv_sec = CONNECT_TIMEOUT_S};
    tune_socket(fd, heartbeat);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    l->local_port = getsockname(fd, (struct sockaddr *)&ss, &sl) == 0
                        ? ntohs(((struct sockaddr_in *)&ss)->sin_port)
                        : 0;
    amqp_set_handshake_timeout(l->st, &tv);
    struct timeval rpc = {.tv_sec = RPC_TIMEOUT_S};
    amqp_set_rpc_timeout(l->st, &rpc);
    amqp_rpc_reply_t r = amqp_login(l->st, url->vhost, 0, 131072, heartbeat, AMQP_SASL_METHOD_PLAIN,
                                    url->hosts[h].user, url->hosts[h].pass);
    if (r.reply_type != AMQP_RESPONSE_NORMAL) {
        nb_amqp_link_fail(l, "login", r);
        nb_amqp_link_close(l);
        return -1;
    }
    amqp_channel_open(l->st, 1);
    if (!nb_amqp_link_ok(l, "channel.open"))
        return -1;
    l->host = h;
    l->next_tag = 1;
    return 0;
}

int nb_amqp_link_open(struct nb_amqp_link *l, const struct nb_bus_url *url, int heartbeat)
{
    nb_amqp_link_close(l);
    l->reason[0] = '\0';
    for (int h = 0; h < url->nhosts; h++) {
        l->host = h; /* names the host in the reason when the last one fails */
        if (open_host(l, url, h, heartbeat) == 0)
            return 0;
    }
    return -1;
}

void nb_amqp_link_close(struct nb_amqp_link *l)
{
    if (!l->st)
        return;
    /* A polite close needs a working socket; a broken one is just dropped. */
    if (amqp_get_socket(l->st) && amqp_get_sockfd(l->st) >= 0 && !l->reason[0]) {
        struct timeval tv = {.tv_sec = 2};
        amqp_set_rpc_timeout(l->st, &tv);
        amqp_channel_close(l->st, 1, AMQP_REPLY_SUCCESS);
        amqp_connection_close(l->st, AMQP_REPLY_SUCCESS);
    }
    amqp_destroy_connection(l->st);
    l->st = NULL;
}

int nb_amqp_link_confirm_select(struct nb_amqp_link *l)
{
    amqp_confirm_select_t req = {.nowait = 0};
    amqp_simple_rpc_decoded(l->st, 1, AMQP_CONFIRM_SELECT_METHOD, AMQP_CONFIRM_SELECT_OK_METHOD,
                            &req);
    return nb_amqp_link_ok(l, "confirm.select") ? 0 : -1;
}
