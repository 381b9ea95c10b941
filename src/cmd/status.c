/* status.c - `nubo status --config FILE`: every role and agent of the
 * cloud with its state, one grep-able line each, what operators read from
 * `systemctl status pf9-*` and `openstack compute service list`.
 *
 * Three sources, each the best evidence for its part:
 *  - the HTTP roles (nova-api, placement-api, nova-metadata-api) are up
 *    when their endpoint answers (GET of the version document);
 *  - the bus roles (nova-conductor, nova-scheduler) and the agents
 *    (nova-compute, one per host) are up when their services row heard a
 *    heartbeat within [DEFAULT] service_down_time and is not forced down,
 *    Nova's own rule (nova.servicegroup.drivers.db);
 *  - the process records of this machine (procrec.h) add pid, since when,
 *    version and command, and overrule a fresh heartbeat: a process that
 *    stopped or died is down at once, not service_down_time later.
 * Run it where the database is (a controller), like nova-manage.
 *
 * Line: BINARY host=H state=up|down status=enabled|disabled since=T
 * last_heartbeat=T version=V pid=P command=C detail="...". Unknown values
 * are "-". Exit status 0 all up, 1 something down, 3 cannot tell (no
 * configuration, no database) and nothing known to be down, 2 usage. */
#include "cmd/cmd.h"
#include "cmd/procrec.h"
#include "common/config.h"
#include "common/json.h"
#include "common/util.h"
#include "compute/compute.h"
#include "db/db.h"
#include "db/url.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_ROLES "api,conductor,scheduler,placement,compute,metadata"

struct status {
    json_t *records; /* procrec list */
    int down;        /* lines that are down */
    bool unknown;    /* something could not be checked */
};

static bool in_list(const char *list, const char *item)
{
    char *copy = strdup(list ? list : ""), *save = NULL;
    bool on = false;
    for (char *r = strtok_r(copy, ", ", &save); r && !on; r = strtok_r(NULL, ", ", &save))
        on = !strcmp(r, item);
    free(copy);
    return on;
}

static bool record_serves(const json_t *rec, const char *role, const char *host)
{
    const char *roles = nb_json_str(rec, "roles");
    if (!in_list(roles && *roles ? roles : DEFAULT_ROLES, role))
        return false;
    if (!host)
        return true;
    if (!strcmp(role, "compute")) {
        size_t i;
        json_t *h;
        json_array_foreach (json_object_get(rec, "hosts"), i, h)
            if (json_is_string(h) && !strcmp(json_string_value(h), host))
                return true;
        return false;
    }
    return nb_json_str(rec, "host") && !strcmp(nb_json_str(rec, "host"), host);
}

/* The record of this machine's process serving role (for host, if not
 * NULL): a live one first, else the newest dead one. Borrowed or NULL. */
static const json_t *find_record(const struct status *s, const char *role, const char *host)
{
    const json_t *dead = NULL;
    size_t i;
    json_t *r;
    json_array_foreach (s->records, i, r) {
        if (!record_serves(r, role, host))
            continue;
        if (json_is_true(json_object_get(r, "alive")))
            return r;
        const char *t = nb_json_str(r, "started_at"), *d = nb_json_str(dead, "started_at");
        if (!dead || (t && d && strcmp(t, d) > 0))
            dead = r;
    }
    return dead;
}

static const char *or_dash(const char *s)
{
    return s && *s ? s : "-";
}

/* Why the process of a record that is not alive is gone, into buf. */
static const char *gone(const json_t *rec, char *buf, size_t n)
{
    const char *stopped = nb_json_str(rec, "stopped_at");
    if (stopped)
        snprintf(buf, n, "process %lld stopped at %s (%s)", nb_json_int(rec, "pid", 0), stopped,
                 nb_json_str(rec, "path"));
    else
        snprintf(buf, n, "process %lld is gone, killed or crashed (%s)", nb_json_int(rec, "pid", 0),
                 nb_json_str(rec, "path"));
    return buf;
}

/* One line. detail may be NULL. */
static void line(struct status *s, const char *binary, const char *host, bool up,
                 const char *status, const char *since, const char *heartbeat, const json_t *rec,
                 const char *service_version, const char *detail)
{
    char pid[32] = "-";
    if (rec)
        snprintf(pid, sizeof(pid), "%lld", nb_json_int(rec, "pid", 0));
    printf("%-17s host=%s state=%s status=%s since=%s last_heartbeat=%s version=%s", binary,
           or_dash(host), up ? "up" : "down", or_dash(status), or_dash(since), or_dash(heartbeat),
           or_dash(rec ? nb_json_str(rec, "version") : NULL));
    if (service_version)
        printf(" service_version=%s", service_version);
    printf(" pid=%s command=%s", pid, or_dash(rec ? nb_json_str(rec, "command") : NULL));
    if (detail && *detail)
        printf(" detail=\"%s\"", detail);
    putchar('\n');
    if (!up)
        s->down++;
}

static size_t discard(char *p, size_t size, size_t n, void *arg)
{
    (void)p;
    (void)arg;
    return size * n;
}

/* GET url: the HTTP status, or 0 with the error in err. */
static long probe(const char *url, char *err, size_t n)
{
    CURL *c = curl_easy_init();
    if (!c) {
        snprintf(err, n, "cannot start an HTTP client");
        return 0;
    }
    char ebuf[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, (long)nb_conf_int("status", "timeout", 5));
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, ebuf);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    long code = 0;
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    else
        snprintf(err, n, "%s", ebuf);
    curl_easy_cleanup(c);
    return code;
}

/* An HTTP role: up if GET base+path answers below 400. */
static void http_role(struct status *s, const char *role, const char *binary, const char *section,
                      long def_port, const char *path)
{
    const char *listen = nb_conf_str(section, "listen", "127.0.0.1");
    if (!strcmp(listen, "0.0.0.0") || !strcmp(listen, "::"))
        listen = "127.0.0.1";
    char url[400], err[CURL_ERROR_SIZE + 64] = "", detail[800];
    snprintf(url, sizeof(url), "http://%s:%ld%s", listen, nb_conf_int(section, "port", def_port),
             path);
    long code = probe(url, err, sizeof(err));
    bool up = code > 0 && code < 400;
    const json_t *rec = find_record(s, role, NULL);
    bool alive = rec && json_is_true(json_object_get(rec, "alive"));
    if (up)
        snprintf(detail, sizeof(detail), "GET %s: %ld", url, code);
    else if (code)
        snprintf(detail, sizeof(detail), "GET %s: %ld", url, code);
    else if (rec && !alive)
        snprintf(detail, sizeof(detail), "GET %s: %s; %s", url, err,
                 gone(rec, (char[400]){0}, 400));
    else
        snprintf(detail, sizeof(detail), "GET %s: %s", url, err);
    const char *since = alive        ? nb_json_str(rec, "started_at")
                        : rec && !up ? nb_json_str(rec, "stopped_at")
                                     : NULL;
    line(s, binary, rec ? nb_json_str(rec, "host") : listen, up, up ? "enabled" : NULL, since, NULL,
         rec, NULL, detail);
}

/* Seconds since the row's last heartbeat (last_seen_up, else
 * created_at), or -1 when it has none. */
static double heartbeat_age(const json_t *row, const char **at)
{
    *at = nb_json_str(row, "last_seen_up");
    if (!*at || !**at)
        *at = nb_json_str(row, "created_at");
    double t = *at ? nb_time_parse(*at) : -1;
    if (t < 0)
        return -1;
    double age = nb_time_now() - t;
    return age < 0 ? -age : age;
}

/* The role a services row belongs to: nova-compute -> compute, ... */
static const char *role_of(const char *binary)
{
    if (!strcmp(binary, "nova-compute"))
        return "compute";
    if (!strcmp(binary, "nova-conductor"))
        return "conductor";
    if (!strcmp(binary, "nova-scheduler"))
        return "scheduler";
    return binary;
}

/* One services row: up by heartbeat, unless forced down or its process on
 * this machine is gone. */
static void service_row(struct status *s, const json_t *row)
{
    const char *binary = nb_json_str(row, "binary"), *host = nb_json_str(row, "host");
    const char *hb;
    double age = heartbeat_age(row, &hb);
    long down_time = nb_conf_int("DEFAULT", "service_down_time", 60);
    bool forced = nb_json_int(row, "forced_down", 0) != 0;
    bool up = !forced && age >= 0 && age <= (double)down_time;
    const json_t *rec = find_record(s, role_of(binary), host);
    bool alive = rec && json_is_true(json_object_get(rec, "alive"));
    char detail[800] = "";
    if (rec && !alive) {
        snprintf(detail, sizeof(detail), "%s; last heartbeat %.0f s ago",
                 gone(rec, (char[400]){0}, 400), age);
        up = false;
    } else if (forced) {
        snprintf(detail, sizeof(detail), "forced down");
    } else if (!up) {
        snprintf(detail, sizeof(detail), "no heartbeat for %.0f s (service_down_time %ld s)%s", age,
                 down_time, alive ? "; its process runs but does not report" : "");
    } else {
        snprintf(detail, sizeof(detail), "heartbeat %.0f s ago, report_count %lld", age,
                 nb_json_int(row, "report_count", 0));
    }
    if (nb_json_int(row, "disabled", 0) && nb_json_str(row, "disabled_reason")) {
        size_t n = strlen(detail);
        snprintf(detail + n, sizeof(detail) - n, "; disabled: %s",
                 nb_json_str(row, "disabled_reason"));
    }
    char version[32], hb_iso[32] = "";
    snprintf(version, sizeof(version), "%lld", nb_json_int(row, "version", 0));
    if (age >= 0)
        nb_time_iso(nb_time_parse(hb), hb_iso);
    hb = hb_iso;
    const char *stopped = rec && !alive ? nb_json_str(rec, "stopped_at") : NULL;
    const char *since = up        ? (alive ? nb_json_str(rec, "started_at") : NULL)
                        : stopped ? stopped
                                  : hb;
    line(s, binary, host, up, nb_json_int(row, "disabled", 0) ? "disabled" : "enabled", since, hb,
         rec, version, detail);
}

/* The database's services rows (NULL with s->unknown set when it cannot
 * be read). */
static json_t *service_rows(struct status *s)
{
    char path[1100];
    if (!nb_cmd_db_path(path, sizeof(path))) {
        s->unknown = true;
        return NULL;
    }
    if (!nb_db_url_is_mariadb(path) && access(path, R_OK) < 0) {
        fprintf(stderr,
                "nubo status: cannot read the database %s: %m (run nubo status where the "
                "database is)\n",
                path);
        s->unknown = true;
        return NULL;
    }
    struct nb_db *db = nb_db_open(path);
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    json_t *rows = db ? nb_service_list(db, &ctx) : NULL;
    if (!rows) {
        char shown[1100];
        fprintf(stderr, "nubo status: cannot read the services of %s: %s\n",
                nb_db_url_display(path, shown, sizeof(shown)),
                nb_ctx_failed(&ctx) ? nb_ctx_message(&ctx) : "cannot open it");
        s->unknown = true;
    }
    nb_db_close(db);
    return rows;
}

/* Expected roles without a services row: down. */
static void missing_rows(struct status *s, const json_t *rows, const char *roles)
{
    static const char *const bus_roles[][2] = {{"conductor", "nova-conductor"},
                                               {"scheduler", "nova-scheduler"},
                                               {"compute", "nova-compute"}};
    for (size_t k = 0; k < 3; k++) {
        bool have = false;
        size_t i;
        json_t *r;
        json_array_foreach (rows, i, r)
            have = have || !strcmp(nb_json_str(r, "binary"), bus_roles[k][1]);
        /* agents may run in processes of their own: expected even when the
         * configuration's roles leave compute out */
        if (have || (k < 2 && !in_list(roles, bus_roles[k][0])))
            continue;
        line(s, bus_roles[k][1], NULL, false, NULL, NULL, NULL,
             find_record(s, bus_roles[k][0], NULL), NULL, "no service record in the database");
    }
}

static void usage(FILE *f)
{
    fputs("usage: nubo status [--config FILE] [--set SECTION.KEY=VALUE ...]\n"
          "Every role and agent of the cloud, one line each:\n"
          "  BINARY host=H state=up|down status=enabled|disabled since=T last_heartbeat=T\n"
          "  version=V [service_version=N] pid=P command=C detail=\"...\"\n"
          "Exit status: 0 all up, 1 something down, 3 cannot tell (configuration or\n"
          "database unreadable), 2 usage.\n",
          f);
}

int nb_cmd_status(int argc, char **argv)
{
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
        if (strcmp(argv[i], "--config") && strcmp(argv[i], "--set")) {
            usage(stderr);
            return 2;
        }
        i++;
    }
    if (nb_cmd_load_config(argc, argv, NULL) < 0)
        return 3;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    char run_dir[1100];
    snprintf(run_dir, sizeof(run_dir), "%s/run",
             nb_conf_str("DEFAULT", "state_path", "/var/lib/nubo"));
    struct status s = {.records = nb_procrec_list(run_dir)};
    const char *roles = nb_conf_str("DEFAULT", "roles", DEFAULT_ROLES);
    if (in_list(roles, "api"))
        http_role(&s, "api", "nova-api", "api", 8774, "/compute/");
    if (in_list(roles, "placement"))
        http_role(&s, "placement", "placement-api", "api", 8774, "/placement");
    if (in_list(roles, "metadata"))
        http_role(&s, "metadata", "nova-metadata-api", "metadata", 8775, "/");
    json_t *rows = service_rows(&s);
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r)
        service_row(&s, r);
    if (rows)
        missing_rows(&s, rows, roles);
    json_decref(rows);
    json_decref(s.records);
    curl_global_cleanup();
    fflush(stdout);
    return s.down ? 1 : s.unknown ? 3 : 0;
}
