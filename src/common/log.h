/* log.h - oslo.log-shaped logging, one file per role.
 *
 * Lines look like oslo.log's:
 *   2026-11-29 18:00:00.123 4242 INFO nubo.conductor.manager [req-… user project] [instance: …] msg
 * The logger name's second component picks the file: "nubo.conductor.*" goes to
 * nubo-conductor.log, "nubo.scheduler.*" to nubo-scheduler.log, etc. (log_dir set
 * with nb_log_open). Without a log_dir, lines go to stderr. Thread-safe. */
#ifndef NB_LOG_H
#define NB_LOG_H

#include "common/ctx.h"

enum nb_log_level { NB_LOG_DEBUG, NB_LOG_INFO, NB_LOG_WARNING, NB_LOG_ERROR };

/* Directs logs to files under dir (created if missing); debug enables DEBUG.
 * Also echoes WARNING and above to stderr when echo is true. Returns 0/-1. */
int nb_log_open(const char *dir, bool debug, bool echo);
void nb_log_close(void);

/* Logs one line. ctx may be NULL (prints "[-]"), instance may be NULL. */
void nb_log(enum nb_log_level lvl, const char *logger, const struct nb_ctx *ctx,
            const char *instance, const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Logs one API access line at INFO under ctx's request ID, as the OpenStack
 * service writes it:
 *   protocol set (eventlet's wsgi):
 *     127.0.0.1 "GET /things/v1/things?limit=1 HTTP/1.1" status: 200 len: 1234 time: 0.0123456
 *   protocol NULL (the requestlog shape; microversion from ctx, "-" if none):
 *     127.0.0.1 "PUT /things/v1/things/<uuid>" status: 204 len: 0 microversion: 1.36
 * client is the numeric peer address ("-" if unknown), uri the path and
 * query as the client sent them, len the body length (negative: "-"),
 * seconds the wall time spent (ignored for the requestlog shape). */
void nb_log_access_line(const char *logger, const struct nb_ctx *ctx, const char *client,
                        const char *method, const char *uri, const char *protocol, int status,
                        long long len, double seconds);

#define NB_DEBUG(lg, ctx, inst, ...) nb_log(NB_LOG_DEBUG, lg, ctx, inst, __VA_ARGS__)
#define NB_INFO(lg, ctx, inst, ...) nb_log(NB_LOG_INFO, lg, ctx, inst, __VA_ARGS__)
#define NB_WARN(lg, ctx, inst, ...) nb_log(NB_LOG_WARNING, lg, ctx, inst, __VA_ARGS__)
#define NB_ERROR(lg, ctx, inst, ...) nb_log(NB_LOG_ERROR, lg, ctx, inst, __VA_ARGS__)

#endif
