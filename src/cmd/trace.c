/* trace.c - `nubo trace <request-id>` (contract in trace.h): the request's
 * log lines from every log directory and file given (by default this
 * host's [DEFAULT] log_dir; other hosts' with --log HOST=PATH) merged by
 * time with the instance-action events the database holds for it (which
 * the conductor records for every host, so the agents' steps show even
 * without their logs), then the span of each role and where it failed. */
#include "cmd/trace.h"
#include "cmd/cmd.h"

#include "common/config.h"
#include "common/ctx.h"
#include "common/json.h"
#include "common/util.h"
#include "compute/compute.h"
#include "db/db.h"
#include "db/url.h"

#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char usage_text[] =
    "usage: nubo trace <request-id> [--log [HOST=]PATH ...] [--json]\n"
    "                  [--config FILE] [--set SECTION.KEY=VALUE ...]\n"
    "\n"
    "The request's timeline across roles, processes and hosts: every log line\n"
    "that carries its ID (req-<uuid>, as in the API's x-openstack-request-id,\n"
    "the server's events and the logs), merged by time with the instance-action\n"
    "events the database recorded for it on every host, then each role's span\n"
    "and the first failure (an ERROR line or an event whose result is Error).\n"
    "\n"
    "  --log [HOST=]PATH  also read this log file or directory (nubo-*.log),\n"
    "                     e.g. a compute host's logs copied or mounted here;\n"
    "                     HOST labels its lines (default: the path)\n"
    "  --no-local-logs    do not read this host's [DEFAULT] log_dir\n"
    "  --json             the timeline as JSON\n"
    "  --config FILE      default /etc/nubo/nubo.conf\n"
    "\n"
    "Exit status: 0 records found, 1 nothing mentions the request, 2 usage,\n"
    "3 the database could not be read.\n";

struct trace {
    char rid[64];
    struct nb_trace_rec *recs;
    size_t n, cap;
    int files;
};

bool nb_trace_request_id(const char *in, char out[64])
{
    const char *u = !strncmp(in, "req-", 4) ? in + 4 : in;
    if (!nb_is_uuid(u) || strlen(u) != 36)
        return false;
    snprintf(out, 64, "req-%s", u);
    return true;
}

bool nb_trace_parse_line(const char *line, struct nb_trace_rec *r)
{
    struct tm tm = {0};
    const char *p = strptime(line, "%Y-%m-%d %H:%M:%S", &tm);
    if (!p || *p != '.')
        return false;
    char *end;
    double frac = strtod(p, &end);
    long pid = strtol(end, &end, 10);
    char level[16], logger[96];
    int used = 0;
    if (pid <= 0 || sscanf(end, " %15s %95s %n", level, logger, &used) != 2 || !used)
        return false;
    tm.tm_isdst = -1;
    r->t = (double)mktime(&tm) + frac;
    r->pid = pid;
    r->duration = -1;
    nb_strlcpy(r->level, level, sizeof(r->level));
    nb_strlcpy(r->logger, logger, sizeof(r->logger));
    const char *msg = end + used;
    if (*msg == '[' && strchr(msg, ']'))
        msg = strchr(msg, ']') + 1 + (strchr(msg, ']')[1] == ' ');
    r->msg = strndup(msg, strcspn(msg, "\r\n"));
    r->failed = !strcmp(level, "ERROR") || !strcmp(level, "CRITICAL");
    return r->msg != NULL;
}

void nb_trace_role(const char *file, const char *logger, char *out, size_t n)
{
    if (!strncmp(logger, "nubo.", 5)) {
        const char *seg = logger + 5;
        /* the compute API logs as nova-api's nova.compute.api */
        if (!strncmp(seg, "compute.api", 11) && (!seg[11] || seg[11] == '.'))
            seg = "api";
        snprintf(out, n, "%.*s", (int)strcspn(seg, "."), seg);
        return;
    }
    const char *base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
    if (!strncmp(base, "nubo-", 5) && strstr(base, ".log"))
        snprintf(out, n, "%.*s", (int)(strstr(base, ".log") - base - 5), base + 5);
    else
        snprintf(out, n, "%s", logger);
}

static struct nb_trace_rec *add(struct trace *tr)
{
    if (tr->n == tr->cap) {
        size_t cap = tr->cap ? tr->cap * 2 : 64;
        struct nb_trace_rec *r = realloc(tr->recs, cap * sizeof(*r));
        if (!r)
            return NULL;
        tr->recs = r;
        tr->cap = cap;
    }
    struct nb_trace_rec *r = &tr->recs[tr->n];
    memset(r, 0, sizeof(*r));
    r->seq = tr->n;
    return r;
}

static void read_file(struct trace *tr, const char *path, const char *host)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    tr->files++;
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0) {
        if (!strstr(line, tr->rid))
            continue;
        struct nb_trace_rec *r = add(tr);
        if (!r || !nb_trace_parse_line(line, r))
            continue;
        nb_trace_role(path, r->logger, r->role, sizeof(r->role));
        nb_strlcpy(r->host, host, sizeof(r->host));
        tr->n++;
    }
    free(line);
    fclose(f);
}

/* A file, or a directory's nubo-*.log* files. */
static void read_path(struct trace *tr, const char *path, const char *host)
{
    DIR *d = opendir(path);
    if (!d) {
        read_file(tr, path, host);
        return;
    }
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, "nubo-", 5) || !strstr(e->d_name, ".log"))
            continue;
        char p[2048];
        snprintf(p, sizeof(p), "%s/%s", path, e->d_name);
        read_file(tr, p, host);
    }
    closedir(d);
}

/* One record per event of the request's actions. */
static void add_event(struct trace *tr, const json_t *e)
{
    double t0 = nb_time_parse(nb_json_str(e, "start_time"));
    double t1 = nb_time_parse(nb_json_str(e, "finish_time"));
    struct nb_trace_rec *r = t0 > 0 ? add(tr) : NULL;
    if (!r)
        return;
    const char *result = nb_json_str(e, "result");
    const char *why =
        nb_json_str(e, "details") ? nb_json_str(e, "details") : nb_json_str(e, "traceback");
    const char *name = nb_json_str(e, "event");
    r->t = t0;
    r->duration = t1 >= t0 ? t1 - t0 : -1;
    /* Nova's event names start with the role: conductor_…, compute_… */
    snprintf(r->role, sizeof(r->role), "%.*s", (int)strcspn(name, "_"), name);
    nb_strlcpy(r->host, nb_json_str(e, "host") ? nb_json_str(e, "host") : "", sizeof(r->host));
    nb_strlcpy(r->level, "EVENT", sizeof(r->level));
    nb_strlcpy(r->logger, name, sizeof(r->logger));
    r->failed = result && !strcmp(result, "Error");
    r->msg = nb_strdup_printf("%s of instance %s: %s%s%s", nb_json_str(e, "action"),
                              nb_json_str(e, "instance_uuid"), result ? result : "not finished",
                              r->failed && why ? ": " : "", r->failed && why ? why : "");
    if (!r->msg)
        return;
    for (char *c = r->msg; (c = strchr(c, '\n'));) /* one line per record */
        *c = c[1] ? ';' : ' ';
    tr->n++;
}

static int read_events(struct trace *tr)
{
    char shown[1100];
    char path[1100];
    if (!nb_cmd_db_path(path, sizeof(path)))
        return -1;
    if (!nb_db_url_is_mariadb(path) && access(path, R_OK) < 0) {
        fprintf(stderr, "nubo trace: cannot read the database %s: %m\n",
                nb_db_url_display(path, shown, sizeof(shown)));
        return -1;
    }
    struct nb_db *db = nb_db_open(path);
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    json_t *rows = db ? nb_request_events(db, &ctx, tr->rid) : NULL;
    nb_db_close(db);
    if (!rows) {
        fprintf(stderr, "nubo trace: cannot read the events of %s from %s\n", tr->rid,
                nb_db_url_display(path, shown, sizeof(shown)));
        return -1;
    }
    size_t i;
    json_t *e;
    json_array_foreach (rows, i, e)
        add_event(tr, e);
    json_decref(rows);
    return 0;
}

static int by_time(const void *a, const void *b)
{
    const struct nb_trace_rec *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq; /* qsort is not stable */
}

/* Each role (and host) in order of its first record: first and last offset
 * and its number of records. */
static json_t *spans(const struct trace *tr)
{
    json_t *out = json_array();
    for (size_t i = 0; i < tr->n; i++) {
        const struct nb_trace_rec *r = &tr->recs[i];
        double off = (r->t - tr->recs[0].t) * 1000;
        double end = off + (r->duration > 0 ? r->duration * 1000 : 0);
        json_t *s = NULL;
        size_t k;
        json_t *it;
        json_array_foreach (out, k, it)
            if (!strcmp(nb_json_str(it, "role"), r->role) &&
                !strcmp(nb_json_str(it, "host"), r->host))
                s = it;
        if (!s) {
            s = json_pack("{s:s, s:s, s:f, s:f, s:i}", "role", r->role, "host", r->host, "first_ms",
                          off, "last_ms", end, "records", 0);
            json_array_append_new(out, s);
        }
        if (end > json_real_value(json_object_get(s, "last_ms")))
            json_object_set_new(s, "last_ms", json_real(end));
        json_object_set_new(s, "records", json_integer(nb_json_int(s, "records", 0) + 1));
    }
    return out;
}

/* t as ISO 8601 UTC with milliseconds into buf[40]. */
static const char *iso_ms(double t, char *buf)
{
    long long ms = (long long)(t * 1000 + 0.5);
    time_t s = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&s, &tm);
    size_t n = strftime(buf, 40, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + n, 40 - n, ".%03lldZ", ms % 1000);
    return buf;
}

static json_t *rec_json(const struct trace *tr, const struct nb_trace_rec *r)
{
    char iso[40];
    json_t *o =
        json_pack("{s:s, s:f, s:s, s:s, s:s, s:s, s:s, s:b}", "time", iso_ms(r->t, iso),
                  "offset_ms", (r->t - tr->recs[0].t) * 1000, "role", r->role, "host", r->host,
                  "level", r->level, "logger", r->logger, "message", r->msg, "failed", r->failed);
    if (r->pid)
        json_object_set_new(o, "pid", json_integer(r->pid));
    if (r->duration >= 0)
        json_object_set_new(o, "duration_ms", json_real(r->duration * 1000));
    return o;
}

/* When r ended: an event's finish, a line's time. */
static double ended(const struct nb_trace_rec *r)
{
    return r->t + (r->duration > 0 ? r->duration : 0);
}

/* The failure that ended first (an event that failed is over when its
 * innermost failure is). */
static const struct nb_trace_rec *first_failure(const struct trace *tr)
{
    const struct nb_trace_rec *f = NULL;
    for (size_t i = 0; i < tr->n; i++)
        if (tr->recs[i].failed && (!f || ended(&tr->recs[i]) < ended(f)))
            f = &tr->recs[i];
    return f;
}

static void print_json(const struct trace *tr)
{
    json_t *recs = json_array();
    for (size_t i = 0; i < tr->n; i++)
        json_array_append_new(recs, rec_json(tr, &tr->recs[i]));
    const struct nb_trace_rec *f = first_failure(tr);
    double end = tr->recs[0].t;
    for (size_t i = 0; i < tr->n; i++)
        end = ended(&tr->recs[i]) > end ? ended(&tr->recs[i]) : end;
    double total = (end - tr->recs[0].t) * 1000;
    json_t *o =
        json_pack("{s:s, s:o, s:o, s:f, s:o}", "request_id", tr->rid, "records", recs, "roles",
                  spans(tr), "total_ms", total, "failed", f ? rec_json(tr, f) : json_null());
    json_dumpf(o, stdout, JSON_INDENT(2));
    fputc('\n', stdout);
    json_decref(o);
}

static void print_text(const struct trace *tr)
{
    char iso[40];
    printf("request %s: %zu record(s), from %s\n", tr->rid, tr->n, iso_ms(tr->recs[0].t, iso));
    for (size_t i = 0; i < tr->n; i++) {
        const struct nb_trace_rec *r = &tr->recs[i];
        char dur[32] = "";
        if (r->duration >= 0)
            snprintf(dur, sizeof(dur), " (%.1f ms)", r->duration * 1000);
        printf("  +%9.1f ms  %-10s %-12s %-7s %s%s: %s\n", (r->t - tr->recs[0].t) * 1000, r->role,
               r->host[0] ? r->host : "-", r->level, r->logger, dur, r->msg);
    }
    json_t *sp = spans(tr);
    size_t k;
    json_t *s;
    printf("roles:\n");
    json_array_foreach (sp, k, s)
        printf("  %-10s %-12s +%.1f .. +%.1f ms (%.1f ms), %lld record(s)\n",
               nb_json_str(s, "role"), *nb_json_str(s, "host") ? nb_json_str(s, "host") : "-",
               json_real_value(json_object_get(s, "first_ms")),
               json_real_value(json_object_get(s, "last_ms")),
               json_real_value(json_object_get(s, "last_ms")) -
                   json_real_value(json_object_get(s, "first_ms")),
               nb_json_int(s, "records", 0));
    json_decref(sp);
    const struct nb_trace_rec *f = first_failure(tr);
    if (f)
        printf("failed: at +%.1f ms in %s%s%s: %s\n", (ended(f) - tr->recs[0].t) * 1000, f->role,
               f->host[0] ? " on " : "", f->host, f->msg);
    else
        printf("failed: no (no ERROR line, no event with result Error)\n");
}

struct options {
    const char *rid;
    const char *logs[32];
    int nlogs;
    bool json, no_local;
};

/* 0 parsed, 1 help, -1 usage error (message printed). */
static int parse(int argc, char **argv, struct options *o)
{
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        bool has_value = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help"))
            return 1;
        if (!strcmp(a, "--json"))
            o->json = true;
        else if (!strcmp(a, "--no-local-logs"))
            o->no_local = true;
        else if (!strcmp(a, "--log") && has_value && o->nlogs < 32)
            o->logs[o->nlogs++] = argv[++i];
        else if ((!strcmp(a, "--config") || !strcmp(a, "--set")) && has_value)
            i++; /* nb_cmd_load_config's */
        else if (a[0] == '-' || o->rid) {
            fprintf(stderr, "nubo trace: unexpected argument '%s'\n", a);
            return -1;
        } else
            o->rid = a;
    }
    if (!o->rid) {
        fprintf(stderr, "nubo trace: which request? (give its ID, req-<uuid>)\n");
        return -1;
    }
    return 0;
}

/* This host's log directory, then each --log [HOST=]PATH. */
static void read_logs(struct trace *tr, const struct options *o)
{
    if (!o->no_local) {
        char hostname[128] = "localhost", dir[1100];
        gethostname(hostname, sizeof(hostname));
        snprintf(dir, sizeof(dir), "%s/log", nb_conf_str("DEFAULT", "state_path", "/var/lib/nubo"));
        read_path(tr, nb_conf_str("DEFAULT", "log_dir", dir),
                  nb_conf_str("DEFAULT", "host", hostname));
    }
    for (int i = 0; i < o->nlogs; i++) {
        const char *eq = strchr(o->logs[i], '=');
        char host[128];
        snprintf(host, sizeof(host), "%.*s", eq ? (int)(eq - o->logs[i]) : 0, o->logs[i]);
        read_path(tr, eq ? eq + 1 : o->logs[i], eq ? host : o->logs[i]);
    }
}

int nb_cmd_trace(int argc, char **argv)
{
    struct options o = {0};
    int p = parse(argc, argv, &o);
    struct trace tr = {0};
    if (p == 0 && !nb_trace_request_id(o.rid, tr.rid)) {
        fprintf(stderr, "nubo trace: '%s' is not a request ID (req-<uuid>)\n", o.rid);
        p = -1;
    }
    if (p != 0) {
        fputs(usage_text, p > 0 ? stdout : stderr);
        return p > 0 ? 0 : 2;
    }
    if (nb_cmd_load_config(argc, argv, NULL) < 0)
        return 2;
    int rc = read_events(&tr) < 0 ? 3 : 0;
    read_logs(&tr, &o);
    if (rc == 0 && tr.n == 0) {
        fprintf(stderr, "nubo trace: no log line (in %d file(s)) and no event mentions %s\n",
                tr.files, tr.rid);
        rc = 1;
    }
    if (tr.n) {
        qsort(tr.recs, tr.n, sizeof(*tr.recs), by_time);
        if (o.json)
            print_json(&tr);
        else
            print_text(&tr);
    }
    for (size_t i = 0; i < tr.n; i++)
        free(tr.recs[i].msg);
    free(tr.recs);
    return rc;
}
