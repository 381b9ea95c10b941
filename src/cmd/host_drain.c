/* host_drain.c - `nubo host drain <host>`: maintenance mode for a
 * hypervisor host, as Platform9's and `nova host-evacuate-live` are.
 *
 * 1. Disables the host's nova-compute service with the reason "drained by
 *    nubo host drain" (the scheduler sends nothing new there), and leaves
 *    it disabled: `openstack compute service set --enable` ends it.
 * 2. Moves every server off the host: ACTIVE and PAUSED ones live
 *    (os-migrateLive, scheduled, block_migration auto), SHUTOFF ones cold
 *    (migrate, then confirmResize once VERIFY_RESIZE) unless --live allows
 *    live moves only; any other status is left, with its reason. Up to
 *    --concurrency moves run at once.
 * 3. Prints a line per server as it finishes (moved, with source and
 *    destination and time; failed, with the cause read from the migration
 *    and the instance action's failed event; left, with why) and a summary.
 * --dry-run prints what would be done and changes nothing.
 *
 * Everything goes through the running Compute API, as an admin with a
 * token the command issues itself in the database (api_client.h), so the
 * moves are checked, recorded and carried out as any operator's. */
#include "cmd/api_client.h"
#include "cmd/cmd.h"

#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "db/db.h"
#include "db/url.h"

#include <curl/curl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DRAIN_REASON "drained by nubo host drain"
#define EXIT_USAGE 2
#define EXIT_CANNOT 3

static const char usage_text[] =
    "usage: nubo host drain <host> [--live] [--concurrency N] [--dry-run]\n"
    "                        [--timeout SECS] [--config FILE] [--set SECTION.KEY=VALUE]\n"
    "\n"
    "Disables the nova-compute service of <host> (reason \"" DRAIN_REASON "\")\n"
    "and moves every server off it: ACTIVE and PAUSED servers by live migration,\n"
    "SHUTOFF servers by cold migration (confirmed when it has finished). Servers in\n"
    "any other state are left where they are. The service stays disabled; enable it\n"
    "again with `openstack compute service set --enable <host> nova-compute`.\n"
    "\n"
    "  --live           live migrations only: SHUTOFF servers are left too\n"
    "  --concurrency N  moves at once (default 1, at most 64)\n"
    "  --dry-run        print the plan; change nothing (the service stays as it is)\n"
    "  --timeout SECS   how long one move may take before it counts as failed\n"
    "                   (default 600; the move itself is not stopped)\n"
    "  --config FILE    the cloud's configuration (default /etc/nubo/nubo.conf)\n"
    "\n"
    "Authentication: the command reads the database named in --config and issues\n"
    "itself a short-lived admin token there (as `nubo doctor --fix` does), then\n"
    "calls the Compute API at [api] public_url, else [api] listen:port. Run it\n"
    "where the database is, as a user who may write it; no password is needed.\n"
    "\n"
    "Output: one line per server (moved, failed: cause, left: reason), then\n"
    "  summary: host H: M moved, F failed, L left; service disabled\n"
    "Exit status: 0 every server moved (or nothing to move), 1 some failed or were\n"
    "left, 2 usage error, 3 the drain could not start (unknown host, no database,\n"
    "API unreachable).\n";

struct options {
    const char *host, *config;
    bool live_only, dry_run;
    int concurrency, timeout;
    char *sets[64];
    int nsets;
};

static int int_option(const char *name, const char *v, int lo, int hi, int *out)
{
    char *end;
    long n = strtol(v, &end, 10);
    if (*end || !*v || n < lo || n > hi) {
        fprintf(stderr, "nubo host drain: --%s wants %d to %d, not '%s'\n", name, lo, hi, v);
        return -1;
    }
    *out = (int)n;
    return 0;
}

/* argv after "host": 0 parsed, 1 help asked, -1 usage error (printed). */
static int parse(int argc, char **argv, struct options *o)
{
    static const struct option opts[] = {
        {"live", no_argument, NULL, 'l'},
        {"dry-run", no_argument, NULL, 'n'},
        {"concurrency", required_argument, NULL, 'j'},
        {"timeout", required_argument, NULL, 't'},
        {"config", required_argument, NULL, 'c'},
        {"set", required_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    *o = (struct options){.config = "/etc/nubo/nubo.conf", .concurrency = 1, .timeout = 600};
    char **av = calloc((size_t)argc + 2, sizeof(char *));
    av[0] = "nubo host";
    for (int i = 0; i < argc; i++)
        av[i + 1] = argv[i];
    optind = 0;
    opterr = 1;
    int c, rc = 0;
    while (rc == 0 && (c = getopt_long(argc + 1, av, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'l': o->live_only = true; break;
        case 'n': o->dry_run = true; break;
        case 'c': o->config = optarg; break;
        case 'h': rc = 1; break;
        case 'j': rc = int_option("concurrency", optarg, 1, 64, &o->concurrency); break;
        case 't': rc = int_option("timeout", optarg, 1, 86400, &o->timeout); break;
        case 's':
            if (o->nsets < 64)
                o->sets[o->nsets++] = optarg;
            break;
        default: rc = -1; break;
        }
    }
    int rest = argc + 1 - optind;
    if (rc == 0 && (rest < 1 || strcmp(av[optind], "drain"))) {
        fprintf(stderr, "nubo host: %s\n",
                rest < 1 ? "what to do? (drain)" : "the only host command is 'drain'");
        rc = -1;
    } else if (rc == 0 && (rest != 2 || !*av[optind + 1])) {
        fprintf(stderr, "nubo host drain: give exactly one host\n");
        rc = -1;
    } else if (rc == 0) {
        o->host = av[optind + 1];
    }
    free(av);
    return rc;
}

/* ---- the servers and their moves ----------------------------------------- */

enum kind { LIVE, COLD, LEAVE };
enum state { PENDING, MOVING, CONFIRMING, MOVED, FAILED, LEFT };

struct move {
    char uuid[64], name[256], status[32];
    enum kind kind;
    enum state state;
    char why[768]; /* leave reason or failure cause */
    char dest[256];
    double started;
};

#define TOKEN_TTL 3600

struct drain {
    const struct options *o;
    struct nb_db *db;
    struct nb_api_client api;
    double token_at; /* when the token was issued (monotonic) */
    struct move *m;
    size_t n;
    int done;
};

static const char *kind_word(enum kind k)
{
    return k == LIVE ? "live migration" : k == COLD ? "cold migration" : "none";
}

/* What the drain does with a server in status (the API's status). */
static enum kind plan(const struct options *o, const char *status, char *why, size_t n)
{
    if (!strcmp(status, "ACTIVE") || !strcmp(status, "PAUSED"))
        return LIVE;
    if (!strcmp(status, "SHUTOFF") && !o->live_only)
        return COLD;
    if (!strcmp(status, "SHUTOFF"))
        snprintf(why, n, "status SHUTOFF cannot move live (--live given)");
    else
        snprintf(why, n, "status %s: neither a live nor a cold migration is possible", status);
    return LEAVE;
}

/* The servers on the host, every project, following the next links. */
static int list_servers(struct drain *d, char *err, size_t errlen)
{
    char marker[64] = "";
    for (;;) {
        char *esc = curl_easy_escape(NULL, d->o->host, 0);
        char *path = nb_strdup_printf("/compute/v2.1/servers/detail?all_tenants=1&host=%s%s%s", esc,
                                      *marker ? "&marker=" : "", marker);
        curl_free(esc);
        json_t *body;
        long st = nb_api_call(&d->api, "GET", path, "2.1", NULL, &body, err, errlen);
        free(path);
        if (st != 200) {
            if (st)
                nb_api_error_message(body, st, err, errlen);
            json_decref(body);
            return -1;
        }
        json_t *servers = json_object_get(body, "servers"), *s;
        size_t i;
        d->m = realloc(d->m, (d->n + json_array_size(servers) + 1) * sizeof(*d->m));
        json_array_foreach (servers, i, s) {
            struct move *m = &d->m[d->n++];
            memset(m, 0, sizeof(*m));
            nb_strlcpy(m->uuid, nb_json_str(s, "id"), sizeof(m->uuid));
            nb_strlcpy(m->name, nb_json_str(s, "name") ? nb_json_str(s, "name") : "",
                       sizeof(m->name));
            nb_strlcpy(m->status, nb_json_str(s, "status"), sizeof(m->status));
            m->kind = plan(d->o, m->status, m->why, sizeof(m->why));
            m->state = m->kind == LEAVE ? LEFT : PENDING;
            nb_strlcpy(marker, m->uuid, sizeof(marker));
        }
        bool more = json_array_size(json_object_get(body, "servers_links")) > 0;
        json_decref(body);
        if (!more)
            return 0;
    }
}

/* The nova-compute service of the host: its id (uuid, 2.53) into id, its
 * status/state into the buffers. 0, 1 when there is none, -1 on error. */
static int find_service(struct drain *d, char id[64], char status[32], char state[32], char *err,
                        size_t errlen)
{
    char *esc = curl_easy_escape(NULL, d->o->host, 0);
    char *path = nb_strdup_printf("/compute/v2.1/os-services?binary=nova-compute&host=%s", esc);
    curl_free(esc);
    json_t *body;
    long st = nb_api_call(&d->api, "GET", path, "2.53", NULL, &body, err, errlen);
    free(path);
    int rc = -1;
    if (st != 200) {
        if (st)
            nb_api_error_message(body, st, err, errlen);
    } else {
        json_t *s = json_array_get(json_object_get(body, "services"), 0);
        rc = s ? 0 : 1;
        if (s) {
            nb_strlcpy(id, nb_json_str(s, "id"), 64);
            nb_strlcpy(status, nb_json_str(s, "status"), 32);
            nb_strlcpy(state, nb_json_str(s, "state"), 32);
        }
    }
    json_decref(body);
    return rc;
}

static int disable_service(struct drain *d, const char *id, char *err, size_t errlen)
{
    char *path = nb_strdup_printf("/compute/v2.1/os-services/%s", id);
    json_t *req = json_pack("{s:s,s:s}", "status", "disabled", "disabled_reason", DRAIN_REASON);
    json_t *body;
    long st = nb_api_call(&d->api, "PUT", path, "2.53", req, &body, err, errlen);
    if (st && st != 200)
        nb_api_error_message(body, st, err, errlen);
    free(path);
    json_decref(req);
    json_decref(body);
    return st == 200 ? 0 : -1;
}

/* POSTs a server action; 0 when accepted (202, or 204 as confirmResize
 * answers), else -1 with the API's reason in why. */
static int server_action(struct drain *d, struct move *m, const char *mv, json_t *action)
{
    char *path = nb_strdup_printf("/compute/v2.1/servers/%s/action", m->uuid);
    json_t *body;
    long st = nb_api_call(&d->api, "POST", path, mv, action, &body, m->why, sizeof(m->why));
    bool ok = st == 202 || st == 204;
    if (st && !ok)
        nb_api_error_message(body, st, m->why, sizeof(m->why));
    free(path);
    json_decref(action);
    json_decref(body);
    return ok ? 0 : -1;
}

/* Why the newest move of m failed: the migration's status and the failed
 * event of the newest instance action (details, else the traceback's last
 * line). Into m->why. */
static void failure_cause(struct drain *d, struct move *m, const char *fallback)
{
    char err[256], *path;
    json_t *body = NULL, *ev = NULL;
    path = nb_strdup_printf("/compute/v2.1/os-migrations?instance_uuid=%s&limit=1", m->uuid);
    nb_api_call(&d->api, "GET", path, "2.59", NULL, &body, err, sizeof(err));
    free(path);
    const char *mst = nb_json_str(json_array_get(json_object_get(body, "migrations"), 0), "status");
    char mstatus[64] = "";
    if (mst)
        snprintf(mstatus, sizeof(mstatus), "migration %s", mst);
    json_decref(body);
    path = nb_strdup_printf("/compute/v2.1/servers/%s/os-instance-actions", m->uuid);
    nb_api_call(&d->api, "GET", path, "2.84", NULL, &body, err, sizeof(err));
    free(path);
    const char *rid =
        nb_json_str(json_array_get(json_object_get(body, "instanceActions"), 0), "request_id");
    char detail[512] = "";
    if (rid) {
        path = nb_strdup_printf("/compute/v2.1/servers/%s/os-instance-actions/%s", m->uuid, rid);
        nb_api_call(&d->api, "GET", path, "2.84", NULL, &ev, err, sizeof(err));
        free(path);
        json_t *e;
        size_t i;
        json_array_foreach (json_object_get(json_object_get(ev, "instanceAction"), "events"), i,
                            e) {
            const char *res = nb_json_str(e, "result");
            if (!res || strcmp(res, "Error") || *detail)
                continue;
            const char *why = nb_json_str(e, "details");
            const char *tb = nb_json_str(e, "traceback");
            if (!why && tb) {
                const char *end = tb + strlen(tb);
                while (end > tb && end[-1] == '\n')
                    end--;
                const char *line = end;
                while (line > tb && line[-1] != '\n')
                    line--;
                snprintf(detail, sizeof(detail), "%s: %.*s", nb_json_str(e, "event"),
                         (int)(end - line), line);
            } else {
                snprintf(detail, sizeof(detail), "%s: %s", nb_json_str(e, "event"),
                         why ? why : "failed");
            }
        }
    }
    json_decref(body);
    json_decref(ev);
    snprintf(m->why, sizeof(m->why), "%s%s%s", *mstatus ? mstatus : fallback, *detail ? "; " : "",
             detail);
}

static void finish(struct drain *d, struct move *m, enum state st)
{
    m->state = st;
    d->done++;
    double secs = nb_time_mono() - m->started;
    if (st == MOVED)
        printf("[%d/%zu] %s %s: moved by %s, %s -> %s (%.1f s)\n", d->done, d->n, m->uuid, m->name,
               kind_word(m->kind), d->o->host, m->dest, secs);
    else
        printf("[%d/%zu] %s %s: failed (%s): %s\n", d->done, d->n, m->uuid, m->name,
               kind_word(m->kind), m->why);
    fflush(stdout);
}

/* Starts the move of m. Live migrations go at 2.25: block_migration
 * "auto" exists there, and before 2.34 a refused precheck is the answer
 * itself (400 with its reason), so the server's line can say why at once. */
static void start(struct drain *d, struct move *m)
{
    m->started = nb_time_mono();
    m->state = MOVING;
    json_t *action = m->kind == LIVE ? json_pack("{s:{s:n,s:s}}", "os-migrateLive", "host",
                                                 "block_migration", "auto")
                                     : json_pack("{s:n}", "migrate");
    if (server_action(d, m, m->kind == LIVE ? "2.25" : "2.1", action) < 0)
        finish(d, m, FAILED);
}

/* Looks at a moving server once and advances it. */
static void poll_move(struct drain *d, struct move *m)
{
    char err[256];
    char *path = nb_strdup_printf("/compute/v2.1/servers/%s", m->uuid);
    json_t *body;
    long st = nb_api_call(&d->api, "GET", path, "2.1", NULL, &body, err, sizeof(err));
    free(path);
    json_t *s = json_object_get(body, "server");
    if (st != 200 || !s) {
        if (st == 404) {
            snprintf(m->why, sizeof(m->why), "the server was deleted during the drain");
            finish(d, m, FAILED);
        }
        json_decref(body);
        return;
    }
    const char *status = nb_json_str(s, "status"), *task = nb_json_str(s, "OS-EXT-STS:task_state");
    const char *host = nb_json_str(s, "OS-EXT-SRV-ATTR:host");
    nb_strlcpy(m->dest, host ? host : "", sizeof(m->dest));
    bool idle = !task;
    bool moved = host && strcmp(host, d->o->host);
    if (status && !strcmp(status, "ERROR")) {
        const char *f = nb_json_str(json_object_get(s, "fault"), "message");
        failure_cause(d, m, f ? f : "the server went to ERROR");
        finish(d, m, FAILED);
    } else if (m->kind == COLD && status && !strcmp(status, "VERIFY_RESIZE") && idle &&
               m->state == MOVING) {
        m->state = CONFIRMING;
        if (server_action(d, m, "2.1", json_pack("{s:n}", "confirmResize")) < 0)
            finish(d, m, FAILED);
    } else if (idle && status && strcmp(status, "VERIFY_RESIZE")) {
        if (moved)
            finish(d, m, MOVED);
        else {
            failure_cause(d, m, "the server is still on the host");
            finish(d, m, FAILED);
        }
    } else if (nb_time_mono() - m->started > d->o->timeout) {
        snprintf(m->why, sizeof(m->why), "still %s (task %s) after %d s", status,
                 task ? task : "none", d->o->timeout);
        finish(d, m, FAILED);
    }
    json_decref(body);
}

/* Issues the admin token, again when half its lifetime has gone. 0/-1. */
static int refresh_token(struct drain *d, bool force)
{
    if (!force && nb_time_mono() - d->token_at < TOKEN_TTL / 2)
        return 0;
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    if (nb_api_client_open(&d->api, d->db, &ctx, TOKEN_TTL) < 0) {
        fprintf(stderr, "nubo host drain: cannot issue an admin token: %s\n", nb_ctx_message(&ctx));
        return -1;
    }
    d->token_at = nb_time_mono();
    return 0;
}

/* Runs the moves, at most concurrency at a time, until all have finished. */
static void run_moves(struct drain *d)
{
    for (size_t i = 0; i < d->n; i++)
        if (d->m[i].state == LEFT) {
            d->done++;
            printf("[%d/%zu] %s %s: left: %s\n", d->done, d->n, d->m[i].uuid, d->m[i].name,
                   d->m[i].why);
        }
    fflush(stdout);
    while ((size_t)d->done < d->n) {
        int busy = 0;
        for (size_t i = 0; i < d->n; i++)
            busy += d->m[i].state == MOVING || d->m[i].state == CONFIRMING;
        for (size_t i = 0; i < d->n && busy < d->o->concurrency; i++)
            if (d->m[i].state == PENDING) {
                start(d, &d->m[i]);
                busy += d->m[i].state == MOVING;
            }
        usleep(300 * 1000);
        refresh_token(d, false);
        for (size_t i = 0; i < d->n; i++)
            if (d->m[i].state == MOVING || d->m[i].state == CONFIRMING)
                poll_move(d, &d->m[i]);
    }
}

static void print_plan(const struct drain *d)
{
    for (size_t i = 0; i < d->n; i++) {
        const struct move *m = &d->m[i];
        if (m->kind == LEAVE)
            printf("%s %s: would be left: %s\n", m->uuid, m->name, m->why);
        else
            printf("%s %s: would move by %s (status %s)\n", m->uuid, m->name, kind_word(m->kind),
                   m->status);
    }
}

/* The drain itself once the API client is open. Returns the exit status. */
static int drain(struct drain *d)
{
    const struct options *o = d->o;
    char id[64], status[32], state[32], err[768];
    int found = find_service(d, id, status, state, err, sizeof(err));
    if (found != 0) {
        fprintf(stderr, "nubo host drain: %s\n",
                found > 0 ? "no nova-compute service on that host" : err);
        if (found > 0)
            fprintf(stderr, "nubo host drain: host '%s' (see openstack compute service list)\n",
                    o->host);
        return EXIT_CANNOT;
    }
    if (strcmp(state, "up"))
        printf("warning: the nova-compute service of %s is %s: moves need its agent (evacuate "
               "servers of a dead host instead)\n",
               o->host, state);
    if (o->dry_run)
        printf("dry run: would disable service nova-compute on %s (now %s), reason \"%s\"\n",
               o->host, status, DRAIN_REASON);
    else if (disable_service(d, id, err, sizeof(err)) < 0) {
        fprintf(stderr, "nubo host drain: cannot disable the service: %s\n", err);
        return EXIT_CANNOT;
    } else
        printf("service nova-compute on %s disabled: %s\n", o->host, DRAIN_REASON);
    if (list_servers(d, err, sizeof(err)) < 0) {
        fprintf(stderr, "nubo host drain: cannot list the servers of %s: %s\n", o->host, err);
        return EXIT_CANNOT;
    }
    printf("%zu server(s) on %s\n", d->n, o->host);
    if (o->dry_run) {
        print_plan(d);
        return 0;
    }
    run_moves(d);
    int moved = 0, failed = 0, left = 0;
    for (size_t i = 0; i < d->n; i++) {
        moved += d->m[i].state == MOVED;
        failed += d->m[i].state == FAILED;
        left += d->m[i].state == LEFT;
    }
    printf("summary: host %s: %d moved, %d failed, %d left; service nova-compute stays disabled\n",
           o->host, moved, failed, left);
    return failed || left ? 1 : 0;
}

int nb_cmd_host(int argc, char **argv)
{
    char shown[1100];
    struct options o;
    int p = parse(argc, argv, &o);
    if (p != 0) {
        fputs(usage_text, p > 0 ? stdout : stderr);
        return p > 0 ? 0 : EXIT_USAGE;
    }
    if (nb_conf_load(o.config) < 0)
        return EXIT_CANNOT;
    for (int i = 0; i < o.nsets; i++)
        if (nb_conf_set_arg(o.sets[i]) < 0) {
            fprintf(stderr, "nubo host drain: --set wants SECTION.KEY=VALUE, not '%s'\n",
                    o.sets[i]);
            return EXIT_USAGE;
        }
    /* logs go where the cloud's go, not into the report on stdout */
    char logdir[1100];
    snprintf(logdir, sizeof(logdir), "%s/log",
             nb_conf_str("DEFAULT", "state_path", "/var/lib/nubo"));
    if (nb_log_open(nb_conf_str("DEFAULT", "log_dir", logdir), false, false) < 0)
        fprintf(stderr, "nubo host drain: cannot write the log under %s; logging to stderr\n",
                logdir);
    char path[1100];
    struct nb_db *db = nb_cmd_db_path(path, sizeof(path)) &&
                               (nb_db_url_is_mariadb(path) || access(path, R_OK | W_OK) == 0)
                           ? nb_db_open(path)
                           : NULL;
    if (!db) {
        fprintf(stderr, "nubo host drain: cannot open database %s\n",
                nb_db_url_display(path, shown, sizeof(shown)));
        nb_log_close();
        return EXIT_CANNOT;
    }
    struct drain d = {.o = &o, .db = db};
    int rc = EXIT_CANNOT;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (refresh_token(&d, true) == 0)
        rc = drain(&d);
    free(d.m);
    curl_global_cleanup();
    nb_db_close(db);
    nb_log_close();
    return rc;
}
