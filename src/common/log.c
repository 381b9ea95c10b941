/* log.c - oslo.log-shaped log lines, one file per role (see log.h).
 *
 * The file is chosen from the logger name's second component
 * ("nubo.<role>.…" -> nubo-<role>.log). Files are opened lazily and kept
 * open; a mutex keeps lines whole. */
#include "common/log.h"
#include "common/util.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define MAX_FILES 16

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char log_dir[1024];
static bool log_debug;
static bool log_echo = true;
static struct {
    char role[32];
    FILE *f;
} files[MAX_FILES];
static int nfiles;

int nb_log_open(const char *dir, bool debug, bool echo)
{
    pthread_mutex_lock(&log_lock);
    log_debug = debug;
    log_echo = echo;
    nb_strlcpy(log_dir, dir ? dir : "", sizeof(log_dir));
    int rc = dir && *dir ? nb_mkdir_p(dir) : 0;
    pthread_mutex_unlock(&log_lock);
    return rc;
}

void nb_log_close(void)
{
    pthread_mutex_lock(&log_lock);
    for (int i = 0; i < nfiles; i++)
        fclose(files[i].f);
    nfiles = 0;
    pthread_mutex_unlock(&log_lock);
}

/* Returns the stream for logger's role; call with log_lock held. */
static FILE *stream_for(const char *logger)
{
    if (!log_dir[0])
        return stderr;
    char role[32] = "main";
    const char *p = strchr(logger, '.');
    if (p) {
        p++;
        size_t n = strcspn(p, ".");
        if (n > 0 && n < sizeof(role)) {
            memcpy(role, p, n);
            role[n] = '\0';
        }
    }
    for (int i = 0; i < nfiles; i++)
        if (strcmp(files[i].role, role) == 0)
            return files[i].f;
    if (nfiles == MAX_FILES)
        return stderr;
    char path[1200];
    snprintf(path, sizeof(path), "%s/nubo-%s.log", log_dir, role);
    FILE *f = fopen(path, "a");
    if (!f)
        return stderr;
    setvbuf(f, NULL, _IOLBF, 0);
    nb_strlcpy(files[nfiles].role, role, sizeof(files[nfiles].role));
    files[nfiles++].f = f;
    return f;
}

void nb_log(enum nb_log_level lvl, const char *logger, const struct nb_ctx *ctx,
            const char *instance, const char *fmt, ...)
{
    static const char *names[] = {"DEBUG", "INFO", "WARNING", "ERROR"};
    if (lvl == NB_LOG_DEBUG && !log_debug)
        return;
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    localtime_r(&tv.tv_sec, &tm);
    char ts[32];
    strftime(ts, sizeof(ts), "%Y-%m-%d %H:%M:%S", &tm);

    char reqs[320];
    const char *user = ctx && ctx->user_id[0] ? ctx->user_id : "-",
               *project = ctx && ctx->project_id[0] ? ctx->project_id : "-";
    /* oslo.log's [global_request_id request_id user project] when the
     * caller sent its own ID (X-OpenStack-Request-ID: an agent's calls
     * to another service's API), else [request_id ...] */
    if (ctx && ctx->request_id[0] && ctx->global_request_id[0] &&
        strcmp(ctx->global_request_id, ctx->request_id) != 0)
        snprintf(reqs, sizeof(reqs), "[%s %s %s %s]", ctx->global_request_id, ctx->request_id, user,
                 project);
    else if (ctx && ctx->request_id[0])
        snprintf(reqs, sizeof(reqs), "[%s %s %s]", ctx->request_id, user, project);
    else
        snprintf(reqs, sizeof(reqs), "[-]");
    char inst[64] = "";
    if (instance && *instance)
        snprintf(inst, sizeof(inst), "[instance: %s] ", instance);

    char msg[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);

    pthread_mutex_lock(&log_lock);
    FILE *f = stream_for(logger);
    fprintf(f, "%s.%03d %d %s %s %s %s%s\n", ts, (int)(tv.tv_usec / 1000), (int)getpid(),
            names[lvl], logger, reqs, inst, msg);
    if (f != stderr && log_echo && lvl >= NB_LOG_WARNING)
        fprintf(stderr, "%s.%03d %d %s %s %s %s%s\n", ts, (int)(tv.tv_usec / 1000), (int)getpid(),
                names[lvl], logger, reqs, inst, msg);
    pthread_mutex_unlock(&log_lock);
}

void nb_log_access_line(const char *logger, const struct nb_ctx *ctx, const char *client,
                        const char *method, const char *uri, const char *protocol, int status,
                        long long len, double seconds)
{
    char lens[24] = "-";
    if (len >= 0)
        snprintf(lens, sizeof(lens), "%lld", len);
    const char *who = client && *client ? client : "-";
    if (protocol) {
        nb_log(NB_LOG_INFO, logger, ctx, NULL, "%s \"%s %s %s\" status: %d len: %s time: %.7f", who,
               method, uri, protocol, status, lens, seconds);
        return;
    }
    char mv[24] = "-";
    if (ctx && ctx->mv_major)
        snprintf(mv, sizeof(mv), "%d.%d", ctx->mv_major, ctx->mv_minor);
    nb_log(NB_LOG_INFO, logger, ctx, NULL, "%s \"%s %s\" status: %d len: %s microversion: %s", who,
           method, uri, status, lens, mv);
}
