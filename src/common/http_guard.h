/* http_guard.h - what stands between the network and libmicrohttpd.
 *
 * One client must not be able to take a listener down. libmicrohttpd alone
 * cannot promise that: its idle timeout restarts with every byte (a trickle
 * keeps a connection forever), it has no deadline for a request's headers,
 * and it answers malformed requests with its own HTML pages. So the guard
 * owns the listening socket and every connection's first look:
 *
 *  - it accepts, and refuses at once (closes) a connection over
 *    max_connections or over max_connections_per_ip for its address;
 *  - it peeks (MSG_PEEK: nothing is consumed) at the request head until it
 *    is complete, then checks the request line, the header lines and
 *    Content-Length against the route's body limit; a bad head is answered
 *    by the guard itself through the owner's reject callback (the service's
 *    own error shape) and the connection closed; a good one is handed to
 *    libmicrohttpd (MHD_add_connection), which reads the same bytes again;
 *  - a sweeper enforces absolute deadlines that no trickle extends: the
 *    request head must be complete header_timeout seconds after the
 *    connection opened or the previous response went out, and a body must
 *    arrive within body_timeout seconds plus one second per body_min_rate
 *    bytes received. Late connections are shut down, and so are those
 *    whose client left while they wait for a head or a body (libmicrohttpd
 *    can miss that end and hold them, uploads included, until its idle
 *    timeout).
 *
 * The owner (http.c, the metadata server) gives its libmicrohttpd
 * callbacks to nb_http_guard_serve(), which runs the servers, and reports a
 * request's phases from them (headers in, body bytes, answered, completed). Requests after the
 * first on a kept-alive connection are parsed by libmicrohttpd alone: their deadlines are still the
 * guard's. */
#ifndef NB_HTTP_GUARD_H
#define NB_HTTP_GUARD_H

#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A listener's limits, from its config section (see nb_http_limits_load). */
struct nb_http_limits {
    unsigned max_connections;        /* open connections, all clients */
    unsigned max_connections_per_ip; /* open connections from one address */
    unsigned idle_timeout;           /* s without any traffic (libmicrohttpd's) */
    unsigned header_timeout;         /* s to complete a request head, absolute */
    unsigned body_timeout;           /* s for a body, plus 1 s per body_min_rate bytes */
    unsigned body_min_rate;          /* bytes/s */
    size_t max_header_size;          /* request line + headers, bytes */
};

/* Reads the limits from [section] (max_connections, max_connections_per_ip,
 * client_idle_timeout, header_timeout, body_timeout, body_min_rate,
 * max_header_size), raises the soft RLIMIT_NOFILE to the hard one when it
 * is lower, and lowers max_connections to what the file descriptors left
 * allow (logged). Returns 0, or -1 (message on stderr) for a value out of
 * range. */
int nb_http_limits_load(const char *section, unsigned default_max_connections,
                        struct nb_http_limits *l);

/* A request head as far as the guard parsed it, given to the reject
 * callback; every string is borrowed for the call, NULL when not parsed. */
struct nb_http_head {
    const char *method, *target, *version;
    const char *accept; /* the Accept header */
    const char *peer;   /* numeric client address */
};

/* Renders the complete HTTP response (status line, headers, body; with
 * "Connection: close") for a request the guard refuses with status and
 * msg, and logs it. Returns a malloc'd buffer and its length, or NULL. */
typedef char *(*nb_http_reject_fn)(void *opaque, const struct nb_http_head *head, int status,
                                   const char *msg, size_t *len);
/* The largest body method+target may send (target as on the request line). */
typedef uint64_t (*nb_http_body_limit_fn)(void *opaque, const char *method, const char *target);

struct nb_http_guard;

/* Makes a guard named name (for logs) with a copy of l. NULL on OOM. */
struct nb_http_guard *nb_http_guard_new(const char *name, const struct nb_http_limits *l,
                                        nb_http_reject_fn reject, nb_http_body_limit_fn limit,
                                        void *opaque);
/* A listening socket on host:port (IPv4 or IPv6 literal), non-blocking.
 * reuse_port sets SO_REUSEPORT, so that several processes (control planes
 * on one machine) bind the same address and the kernel spreads new
 * connections over those still open; every one of them must set it.
 * Returns the fd, or -1 (message on stderr). */
int nb_http_listen(const char *host, int port, bool reuse_port);
/* The owner's libmicrohttpd callbacks (all get answer_cls). */
struct nb_http_callbacks {
    MHD_AccessHandlerCallback answer;
    MHD_RequestCompletedCallback completed;
    void *(*uri_log)(void *cls, const char *uri, struct MHD_Connection *conn); /* may be NULL */
    void *answer_cls;
};

/* Starts nthreads libmicrohttpd servers (one thread each) with cb and the
 * guard's limits, and the guard's thread on listen_fd (taken, closed at
 * stop). A good connection goes to the server with the fewest requests
 * under way, so a slow handler does not hold up new clients. 0/-1 (then
 * call nb_http_guard_free, and close listen_fd). */
int nb_http_guard_serve(struct nb_http_guard *g, int listen_fd, unsigned nthreads,
                        const struct nb_http_callbacks *cb);
/* Stops accepting, closes the connections not yet handed over, then stops
 * the servers (in-flight requests finish). Free after it. */
void nb_http_guard_stop(struct nb_http_guard *g);
void nb_http_guard_free(struct nb_http_guard *g);

/* A request's phases, from the owner's libmicrohttpd callbacks: its head
 * is in (body deadline starts), body bytes arrived, it is being answered
 * (no deadline but the idle timeout), it completed (the next head's
 * deadline starts). */
void nb_http_guard_headers_in(struct MHD_Connection *conn);
void nb_http_guard_body(struct MHD_Connection *conn, size_t n);
void nb_http_guard_answering(struct MHD_Connection *conn);
void nb_http_guard_completed(struct MHD_Connection *conn);
/* Answers conn now with the complete response text (while its body is
 * still arriving, where libmicrohttpd cannot queue one) and shuts the
 * connection down. */
/* The numeric address of conn's peer into buf ("-" when unknown); returns
 * buf. */
const char *nb_http_guard_peer(struct MHD_Connection *conn, char *buf, size_t n);
void nb_http_guard_answer_now(struct MHD_Connection *conn, const char *text, size_t len);

#endif
