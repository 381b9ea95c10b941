/* ctx.h - the request context passed to every call.
 *
 * A context carries who is asking (user, project, roles), which request this
 * is (request ID, printed on every log line, stored with every instance action
 * event and fault), the negotiated microversion, and the one error recorded
 * for the request. Errors are reported once, where detected, with
 * nb_error(); callers then just return -1 and the HTTP layer turns the
 * recorded error into a status and an OpenStack error body.
 *
 * The recorded error is neutral: an HTTP status, its class (enum
 * nb_err_code), the message, and optionally the service's own name for it
 * (an exception type such as "NetworkNotFound", or a dotted error code
 * such as "<service>.concurrent_update"), which rides along for the
 * service's error renderer; "" when the caller gave none, and the renderer
 * then names the class in its own dialect.
 *
 * The error slot has an explicit scope. The first error recorded wins, so a
 * context whose error was handled must say so (nb_ctx_clear_error) before the
 * work goes on, and best-effort work whose failure must neither mask nor
 * replace the main error (action events, faults, releases, cleanups) runs
 * on a child context (nb_ctx_child): same identity, request ID and
 * microversion, its own error slot. When the child's error is the answer,
 * nb_ctx_forward_error() copies it to the parent. Outside ctx.c the error
 * fields are read only through nb_ctx_failed/status/message/error_name. */
#ifndef NB_CTX_H
#define NB_CTX_H

#include <jansson.h>
#include <stdbool.h>

#define NB_ID_LEN 64

/* The class of a recorded error, from its status; each service's renderer
 * names it in its dialect (http.h). */
enum nb_err_code {
    NB_ERR_NONE,
    NB_ERR_BAD_REQUEST,       /* 400 */
    NB_ERR_UNAUTHORIZED,      /* 401 */
    NB_ERR_FORBIDDEN,         /* 403 */
    NB_ERR_NOT_FOUND,         /* 404 */
    NB_ERR_BAD_METHOD,        /* 405 */
    NB_ERR_NOT_ACCEPTABLE,    /* 406 */
    NB_ERR_TIMEOUT,           /* 408 */
    NB_ERR_CONFLICT,          /* 409 */
    NB_ERR_TOO_LARGE,         /* 413 */
    NB_ERR_URI_TOO_LONG,      /* 414 */
    NB_ERR_BAD_MEDIA_TYPE,    /* 415 */
    NB_ERR_HEADERS_TOO_LARGE, /* 431 */
    NB_ERR_CLIENT_GONE,       /* 499: the client closed the connection */
    NB_ERR_NOT_IMPLEMENTED,   /* 501 */
    NB_ERR_UNAVAILABLE,       /* 503 */
    NB_ERR_BAD_VERSION,       /* 505: HTTP version not supported */
    NB_ERR_INTERNAL,          /* 500, and any other status */
};

struct nb_ctx {
    char request_id[48];        /* "req-<uuid>" */
    char global_request_id[48]; /* from X-OpenStack-Request-ID, or "" */
    char user_id[NB_ID_LEN];    /* "" when unauthenticated (system work) */
    char user_name[NB_ID_LEN];
    char project_id[NB_ID_LEN];
    char project_name[NB_ID_LEN];
    char domain_id[NB_ID_LEN];
    bool is_admin;          /* has the admin role */
    bool is_member;         /* has member (or admin) role */
    bool is_reader;         /* has any role on the project */
    bool system;            /* internal work (conductor, periodic tasks) */
    char token_expires[40]; /* ISO time of token expiry, "" if none */
    int mv_major, mv_minor; /* negotiated microversion, 0.0 if none */

    /* The recorded error (see above): HTTP status (0: none), its class, the
     * service's own name for it ("" for none) and the message. */
    int err_status;
    enum nb_err_code err_code;
    char err_name[64];
    char err_msg[1024];
};

/* Initializes ctx with a fresh request ID and no identity. */
void nb_ctx_init(struct nb_ctx *ctx);

/* Initializes an internal (system, admin) context that keeps request_id if
 * it is non-NULL and non-empty, else makes a new one. */
void nb_ctx_init_system(struct nb_ctx *ctx, const char *request_id);

/* Records an error: status (400, 404, …; its class follows from it), the
 * service's own name for it (e.g. "NetworkNotFound"; NULL or "": none, the
 * renderer names the class) and a printf-style message naming the
 * offending value. The first error wins. Returns -1, so
 * `return nb_error(ctx, 404, NULL, "Flavor %s could not be found.", id);`. */
int nb_error(struct nb_ctx *ctx, int status, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The class of an error with HTTP status status. */
enum nb_err_code nb_err_code_of(int status);

/* Initializes child for best-effort work on behalf of parent: a copy of
 * parent's identity, request ID and microversion with an empty error slot.
 * Errors recorded on child never reach parent unless forwarded. */
void nb_ctx_child(struct nb_ctx *child, const struct nb_ctx *parent);

/* Forgets the error recorded on ctx: the failure was handled and the work
 * goes on, so the next error is recorded rather than hidden. */
void nb_ctx_clear_error(struct nb_ctx *ctx);

/* Makes child's error parent's (status, class, name and message; parent's own error
 * wins if it has one, as with nb_error). A child with no error forwards a
 * 500, so a caller that forwards on failure never returns -1 with an empty
 * slot. Returns -1, so `return nb_ctx_forward_error(ctx, &sub);`. */
int nb_ctx_forward_error(struct nb_ctx *parent, const struct nb_ctx *child);

/* Whether an error is recorded on ctx. */
bool nb_ctx_failed(const struct nb_ctx *ctx);
/* The recorded error's HTTP status, 0 when none. */
int nb_ctx_status(const struct nb_ctx *ctx);
/* The recorded error's class, NB_ERR_NONE when none. */
enum nb_err_code nb_ctx_code(const struct nb_ctx *ctx);
/* The recorded error's message, "" when none. Borrowed from ctx: valid until
 * ctx's error changes. */
const char *nb_ctx_message(const struct nb_ctx *ctx);
/* The service's own name for the recorded error ("NetworkNotFound", …), ""
 * when none was given or no error is recorded. Borrowed like
 * nb_ctx_message(). */
const char *nb_ctx_error_name(const struct nb_ctx *ctx);

/* True when ctx's microversion is >= major.minor. */
bool nb_ctx_mv_ge(const struct nb_ctx *ctx, int major, int minor);

/* Serializes the identity and request ID of ctx (for bus messages). New ref. */
json_t *nb_ctx_to_json(const struct nb_ctx *ctx);
/* Restores a context from nb_ctx_to_json() output (missing keys -> empty). */
void nb_ctx_from_json(struct nb_ctx *ctx, json_t *j);

#endif
