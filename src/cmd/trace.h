/* trace.h - `nubo trace <request-id>`: one request's timeline across roles,
 * processes and hosts, from the log lines that carry its ID and the
 * instance-action events the database recorded for it. */
#ifndef NB_CMD_TRACE_H
#define NB_CMD_TRACE_H

#include <stdbool.h>
#include <stddef.h>

/* One record of the timeline. */
struct nb_trace_rec {
    double t;        /* seconds since the epoch */
    double duration; /* an event's start to finish, seconds; -1: none */
    char role[32];   /* api, scheduler, conductor, compute, placement, ... */
    char host[128];  /* where it ran ("" when not known) */
    char level[16];  /* INFO, WARNING, ERROR, ... ; "EVENT" for an event */
    char logger[96]; /* nubo.compute.manager; the event's name for an event */
    long pid;        /* the process that wrote it; 0 for an event */
    char *msg;       /* malloc'd */
    bool failed;     /* an ERROR/CRITICAL line, or an event whose result is Error */
    size_t seq;      /* order read, to keep equal times in that order */
};

/* Parses one log line (oslo.log's shape: "2026-12-03 11:37:33.033 29722
 * INFO nubo.api.wsgi [req-… user project] message", local time) into *r
 * (role and host left as they are). true when the line has that shape. */
bool nb_trace_parse_line(const char *line, struct nb_trace_rec *r);

/* The role a log line belongs to: the file's (nubo-<role>.log) when the
 * name has one, else the logger's second segment (nubo.<role>.…). */
void nb_trace_role(const char *file, const char *logger, char *out, size_t n);

/* Normalises a request ID given as req-<uuid> or <uuid> into out
 * ("req-<uuid>", 41 bytes with the NUL). false when it is neither. */
bool nb_trace_request_id(const char *in, char out[64]);

int nb_cmd_trace(int argc, char **argv);

#endif
