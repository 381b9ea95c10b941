/* http.h - the HTTP server and router shared by every API service.
 *
 * One libmicrohttpd server (thread pool) serves every service on one port,
 * each under its path prefix. The HTTP layer knows no service: each one
 * describes itself in a struct nb_http_service (prefix, logger, access-line
 * shape, microversion header and range, trailing-slash rule, error
 * renderer, …) and registers it with nb_http_service_register(), then its
 * routes with nb_http_route(). A route is {method, path pattern, handler,
 * flags, opaque}; patterns use "{name}" segments, e.g.
 * "/things/v1/things/{thing_id}/action". Exact segments win over "{}"
 * segments; HEAD falls back to GET unless the service says otherwise. A request belongs to the
 * service whose prefix its path starts with (req->service; NULL for none: the fallback service's
 * logger and renderer answer it). Where the service says a trailing slash is significant,
 * "/servers/" is not "/servers" (404), except on the version documents (NB_ROUTE_NO_AUTH routes).
 *
 * Connections first meet the listener's guard (http_guard.h: [api]
 * max_connections, max_connections_per_ip, header_timeout, body_timeout,
 * body_min_rate, client_idle_timeout, max_header_size), which answers a
 * malformed head (400), an oversized one (414/431) or a declared body over
 * the route's limit (413) itself, in the service's error shape.
 * GET/HEAD /healthcheck answers as oslo.middleware's healthcheck does.
 * Every request is logged as the service's access line (nb_log_access_line).
 *
 * For each request the server: reads the body (up to [api] max_request_body_size,
 * else 413, answered as soon as the declared or received size is over), makes a context with a new
 * request ID, checks X-Auth-Token through the auth hook unless the route is NB_ROUTE_NO_AUTH
 * (the hook's reject answers a failure), negotiates the service's microversion, if it has one
 * (406 when out of range), calls the handler, and renders either resp->body or the error recorded
 * in ctx with the service's renderer. Every response carries x-openstack-request-id (and the
 * service's own request ID header, if it names one).
 *
 * Streamed bodies (NB_ROUTE_STREAM_BODY): the handler is called once the
 * headers are in, after routing, the token check and microversion
 * negotiation, before any body byte is read; req->body is "" and req->json
 * NULL. It validates the request and either fills resp / records an error as
 * usual (the body is then read and discarded), or sets req->body_chunk,
 * req->body_end and req->body_abort (and req->body_opaque) and returns 0.
 * Then body_chunk gets every piece of the body as it arrives; the only size
 * limit is the service's stream_cap (413 above it). Exactly one of body_end
 * (when the whole body arrived and every chunk returned 0; it fills resp or
 * records an error) or body_abort (a chunk failed, the cap was exceeded or
 * the client went away) is called. After a failure the rest of the body is
 * discarded and the recorded error is answered.
 *
 * Streamed responses: nb_resp_file() makes the response the content of an
 * open file, sent from disk by the server (never read whole into memory). */
#ifndef NB_HTTP_H
#define NB_HTTP_H

#include "common/ctx.h"
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct nb_resp;
struct nb_http_service;

struct nb_req {
    const char *method;                    /* "GET", … */
    const char *path;                      /* full path, e.g. "/things/v1/things" */
    bool trailing_slash;                   /* the URL ended in '/' (not part of path) */
    const struct nb_http_service *service; /* whose prefix path has, or NULL */
    void *route_opaque;                    /* the matched route's opaque pointer */
    const char *route;                     /* the matched route's pattern, or NULL */
    void *conn;                            /* opaque MHD connection, for header/query lookups */
    const char *body;                      /* raw body (NUL-terminated), may be "" */
    size_t body_len;
    json_t *json; /* parsed body, NULL if empty; owned by the server */
    int nparams;  /* path parameters from "{name}" segments */
    const char *param_names[8];
    char *param_values[8]; /* URL-decoded */
    /* In-process dispatch only (conn == NULL): */
    const char *const *dispatch_headers; /* NULL-terminated name, value, … */
    int nquery;
    char *query_keys[32], *query_values[32];
    /* NB_ROUTE_STREAM_BODY routes: set by the handler (see above). */
    int (*body_chunk)(struct nb_ctx *ctx, struct nb_req *req, const char *data, size_t len);
    int (*body_end)(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp);
    void (*body_abort)(struct nb_ctx *ctx, struct nb_req *req);
    void *body_opaque;
};

struct nb_resp {
    int status;   /* defaults to 200 */
    json_t *body; /* JSON body (stolen by the server), or NULL */
    char *raw;    /* or a raw body (malloc'd, freed by the server) */
    size_t raw_len;
    const char *content_type; /* for raw; default application/json */
    int nheaders, headers_cap;
    char **header_names; /* nheaders of each, malloc'd, freed by the server */
    char **header_values;
    bool oom; /* a header could not be added: the server answers 500 */
    /* or a file body (nb_resp_file): fd owned and closed by the server */
    bool has_file;
    int file_fd;
    uint64_t file_size;
};

/* Returns 0 on success (resp filled), -1 after nb_error() on ctx. */
typedef int (*nb_handler_fn)(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp);

enum {
    NB_ROUTE_NO_AUTH = 1 << 0,     /* no token needed (version discovery, token create) */
    NB_ROUTE_STREAM_BODY = 1 << 1, /* body handed to the handler in chunks (see above) */
};

/* The error a service's renderer answers: the recorded one, or a 500 when
 * none was recorded. Strings are borrowed from the context. */
struct nb_http_error {
    int status;
    enum nb_err_code code;
    const char *name; /* the service's own name for it, "" for none */
    const char *message;
};

/* Renders err into resp in the service's dialect: sets resp->body, or
 * resp->raw, raw_len and content_type (resp's previous body is already
 * gone; status is set). accept is the request's Accept header or NULL. */
typedef void (*nb_http_render_fn)(const struct nb_ctx *ctx, const struct nb_http_error *err,
                                  const char *accept, struct nb_resp *resp);

/* A service's microversions, negotiated by the HTTP layer from
 * "OpenStack-API-Version: <name> X.Y" ("latest" is the maximum; none is
 * the minimum). The response then carries "OpenStack-API-Version: <name>
 * X.Y", legacy_header (when set) with "X.Y", and Vary: vary. */
struct nb_http_microversions {
    const char *name;          /* the service's name in the header: "things" */
    const char *under;         /* negotiated for paths that start with this */
    const char *legacy_header; /* read when OpenStack-API-Version names none, or NULL */
    const char *vary;
    int min_major, min_minor, max_major, max_minor;
    /* Records the 406 for requested, a well-formed version out of range. */
    int (*unacceptable)(struct nb_ctx *ctx, const char *requested,
                        const struct nb_http_microversions *mv);
};

/* What the HTTP layer needs to know about a service: everything that
 * differs between them. Static storage, owned by the service. Only prefix,
 * logger and render_error are required. */
struct nb_http_service {
    const char *prefix; /* the paths it serves start with this: "/things" */
    const char *logger; /* access lines and aborted uploads: "nubo.things.wsgi" */
    /* Access lines in the requestlog shape (no protocol, the microversion)
     * instead of eventlet's wsgi line. */
    bool requestlog_access;
    /* "/servers/" is not "/servers" (404), except on NB_ROUTE_NO_AUTH routes. */
    bool slash_significant;
    /* HEAD does not fall back to GET: a path with only a GET route answers
     * HEAD with 405. */
    bool head_not_get;
    /* A URL that starts with this segment ("/v2.1") is served as prefix +
     * URL (the service's own port layout); the access line keeps the URL. */
    const char *root_alias;
    /* A header that repeats x-openstack-request-id on every answer, or NULL. */
    const char *request_id_header;
    const struct nb_http_microversions *microversions; /* or NULL: none */
    /* A path whose segment after project_url_prefix is a project ID (hex
     * and dashes) followed by more is routed without it; when the token's
     * project differs, project_mismatch records the error. NULL: never. */
    const char *project_url_prefix;
    int (*project_mismatch)(struct nb_ctx *ctx, const char *url_project);
    /* The body limit of its NB_ROUTE_STREAM_BODY routes and the 413 over it
     * (records it, returns -1). NULL: no limit / a plain 413. */
    uint64_t (*stream_cap)(void);
    int (*stream_too_big)(struct nb_ctx *ctx);
    /* The message of a handler failure that recorded no error (NULL: "An
     * unexpected error occurred."), and the logger that gets an ERROR line
     * for every 5xx a handler answers (NULL: none). */
    const char *unexpected_error;
    const char *error_logger;
    /* The policy guard's refusal of rule in the service's words (records a
     * 403, returns -1); NULL: the guard's default words. */
    int (*policy_refused)(struct nb_ctx *ctx, const char *rule);
    nb_http_render_fn render_error;
};

/* Registers a service (kept by pointer; registering it again is a no-op).
 * Call before nb_http_start(). Not thread-safe. The first one registered
 * with fallback also answers requests under no prefix (logger, renderer). */
void nb_http_service_register(const struct nb_http_service *svc, bool fallback);

/* The registered service whose prefix path starts with, or NULL. */
const struct nb_http_service *nb_http_service_of(const char *path);

/* Renders the error recorded in ctx (500 if none) into resp with svc's
 * renderer (NULL: the fallback service's, else a neutral
 * {"error": {"code", "message"}}). Replaces resp's body and status. */
void nb_http_render_error(const struct nb_ctx *ctx, const struct nb_http_service *svc,
                          const char *accept, struct nb_resp *resp);

/* The reason phrase of an HTTP status ("Not Found"; "Error" if unknown). */
const char *nb_http_status_title(int status);

/* Registers the HTTP layer's own routes (GET/HEAD /healthcheck, as
 * oslo.middleware's). Call once, before the services register theirs. */
void nb_http_init_routes(void);

/* Registers a route. Call before nb_http_start(). Not thread-safe. */
void nb_http_route(const char *method, const char *pattern, nb_handler_fn fn, int flags);
/* The same with an opaque pointer the handler finds in req->route_opaque
 * (one handler serving several routes). */
void nb_http_route_opaque(const char *method, const char *pattern, nb_handler_fn fn, int flags,
                          void *opaque);

/* The auth hook: validates token, fills ctx identity. 0 ok, -1 after
 * nb_error(ctx, 401, …). Set by the token-checking service, with reject, which
 * answers a request whose token is missing or failed the check (ctx holds
 * the check's error, if any) into resp. */
typedef int (*nb_auth_fn)(struct nb_ctx *ctx, const char *token);
typedef void (*nb_auth_reject_fn)(struct nb_ctx *ctx, struct nb_resp *resp);
void nb_http_set_auth(nb_auth_fn fn, nb_auth_reject_fn reject);

/* The policy guard: called for every routed request after the token check
 * and microversion negotiation, before the handler, with the pattern the
 * request matched. 0 lets the handler run; -1 after nb_error() (a 403)
 * answers the recorded error in the service's shape. Set by the policy
 * module (policy/policy.h). */
typedef int (*nb_guard_fn)(struct nb_ctx *ctx, struct nb_req *req, const char *pattern);
void nb_http_set_guard(nb_guard_fn fn);

/* Calls fn for every registered route, in registration order (the policy
 * module's start-up check that every route has a rule). */
void nb_http_routes_each(void (*fn)(void *opaque, const char *method, const char *pattern,
                                    int flags),
                         void *opaque);

/* Starts serving on host:port with nthreads threads. 0/-1. */
int nb_http_start(const char *host, int port, int nthreads);
/* Stops accepting, lets in-flight requests finish, then returns. */
void nb_http_stop(void);
/* Returns the "http://host:port" base URL this server advertises (borrowed). */
const char *nb_http_base_url(void);
/* Sets the advertised base URL (defaults to http://<host>:<port>). */
void nb_http_set_base_url(const char *url);

/* Request accessors. Returned strings are borrowed for the request's life. */
const char *nb_req_param(const struct nb_req *req, const char *name);
const char *nb_req_header(const struct nb_req *req, const char *name);
const char *nb_req_query(const struct nb_req *req, const char *name);
/* Calls fn for every query argument (repeated keys included). */
void nb_req_query_each(const struct nb_req *req,
                       void (*fn)(void *opaque, const char *key, const char *value), void *opaque);

/* Response helpers: set status and body (steals body). Return 0. */
int nb_resp_json(struct nb_resp *resp, int status, json_t *body);
int nb_resp_empty(struct nb_resp *resp, int status);
/* Adds a response header (any number). 0, or -1 when out of memory (then
 * the response becomes a 500: a header is never dropped silently). */
int nb_resp_header(struct nb_resp *resp, const char *name, const char *value);
/* Answers status with the size bytes of the file open on fd (read from its
 * start; the server takes fd and closes it) as content_type. Returns 0. */
int nb_resp_file(struct nb_resp *resp, int status, int fd, uint64_t size, const char *content_type);

/* Requires a JSON object body; on failure records 400 (naming the problem)
 * and returns NULL. Borrowed. */
json_t *nb_req_json_object(struct nb_ctx *ctx, struct nb_req *req);

/* Dispatches one request in-process without a socket (benchmarks, unit
 * tests). headers is a NULL-terminated name, value, … array; query is the
 * raw query string or NULL. Fills *status and returns the body (malloc'd). */
char *nb_http_dispatch(const char *method, const char *path, const char *query,
                       const char *const *headers, const char *body, int *status);

#endif
