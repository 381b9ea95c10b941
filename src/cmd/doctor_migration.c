/* doctor_migration.c - `nubo doctor migration <server> [--to HOST]
 * [--block-migration true|false|auto] [--json]`: why a server can or cannot
 * be live-migrated to each candidate host (or the one named), before
 * anything is tried.
 *
 * The checks need the running cloud (the conductor asks the compute agents
 * of both hosts: CPU, shared storage probe, migration transport), so the
 * doctor asks the API: GET /compute/v2.1/servers/{id}/os-migration-check,
 * nubo's admin-only dry run, authenticated, as `doctor server --fix` is,
 * with a short-lived admin token the doctor issues itself in the database
 * (root on a controller needs no password). Nothing is moved or claimed.
 * Output: per host a verdict line, then one line per check
 *   [OK|WARN|PROBLEM|SKIP] <check>: <evidence>[ -> <message>]
 * or the API's JSON with --json. Exit status: 0 some host can take the
 * server, 1 none can, 3 the check could not run, 64 usage. */
#include "cmd/api_client.h"
#include "cmd/cmd.h"
#include "cmd/doctor.h"

#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "compute/objects/instance.h"
#include "db/db.h"
#include "db/url.h"

#include <curl/curl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TOKEN_TTL 300
/* the dry run asks both hosts of every candidate: allow it minutes */
#define CHECK_TIMEOUT 300

static const char usage_text[] =
    "usage: nubo doctor migration <server-id|name> [--to HOST]\n"
    "                             [--block-migration true|false|auto] [--json]\n"
    "                             [--config FILE] [--set SECTION.KEY=VALUE ...]\n"
    "\n"
    "Runs every precheck of a live migration of the server against HOST, or\n"
    "against every other compute host, through the running API (nothing is\n"
    "moved or claimed), and prints for each host its verdict and each check:\n"
    "  [OK|WARN|PROBLEM|SKIP] <check>: <evidence>[ -> <message>]\n"
    "checks: service, destination, resources, cpu, hypervisor, transport,\n"
    "storage, network, instance, scheduler (the enabled filters, as a\n"
    "scheduled or requested destination faces them).\n"
    "\n"
    "  --to HOST            only this destination\n"
    "  --block-migration B  as os-migrateLive's block_migration (default auto)\n"
    "  --json               the API's answer as JSON\n"
    "  --config FILE        default /etc/nubo/nubo.conf\n"
    "\n"
    "Exit status: 0 some host can take the server, 1 none can, 3 the checks\n"
    "could not run, 64 usage error.\n";

struct options {
    const char *server, *to, *block, *config;
    bool json;
    char *sets[64];
    int nsets;
};

/* 0 parsed, 1 help, -1 usage error (printed). */
static int parse(int argc, char **argv, struct options *o)
{
    static const struct option opts[] = {
        {"to", required_argument, NULL, 't'},
        {"block-migration", required_argument, NULL, 'b'},
        {"json", no_argument, NULL, 'j'},
        {"config", required_argument, NULL, 'c'},
        {"set", required_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    o->config = "/etc/nubo/nubo.conf";
    o->block = "auto";
    char **av = calloc((size_t)argc + 2, sizeof(char *));
    av[0] = "nubo doctor migration";
    for (int i = 0; i < argc; i++)
        av[i + 1] = argv[i];
    optind = 0;
    opterr = 1;
    int c, rc = 0;
    while (rc == 0 && (c = getopt_long(argc + 1, av, "h", opts, NULL)) != -1) {
        switch (c) {
        case 't': o->to = optarg; break;
        case 'b': o->block = optarg; break;
        case 'j': o->json = true; break;
        case 'c': o->config = optarg; break;
        case 's':
            if (o->nsets < 64)
                o->sets[o->nsets++] = optarg;
            break;
        case 'h': rc = 1; break;
        default: rc = -1; break;
        }
    }
    if (rc == 0 && argc + 1 - optind != 1) {
        fprintf(stderr, "nubo doctor migration: give exactly one server id or name\n");
        rc = -1;
    } else if (rc == 0) {
        o->server = av[optind];
    }
    if (rc == 0 && strcmp(o->block, "auto") && strcmp(o->block, "true") &&
        strcmp(o->block, "false")) {
        fprintf(stderr, "nubo doctor migration: --block-migration is true, false or auto\n");
        rc = -1;
    }
    free(av);
    return rc;
}

/* The server's uuid by id or unique name, into out. 0, or -1 (printed). */
static int resolve(struct nb_db *db, struct nb_ctx *ctx, const char *server, char *out, size_t n)
{
    _cleanup_json_ json_t *row = nb_instance_get(db, ctx, server, false);
    if (row) {
        nb_strlcpy(out, nb_json_str(row, "uuid"), n);
        return 0;
    }
    nb_ctx_clear_error(ctx);
    _cleanup_json_ json_t *rows = nb_instance_list_by_name(db, ctx, server);
    if (json_array_size(rows) == 1) {
        nb_strlcpy(out, nb_json_str(json_array_get(rows, 0), "uuid"), n);
        return 0;
    }
    fprintf(stderr, "nubo doctor migration: %s server named %s\n",
            json_array_size(rows) ? "more than one" : "no", server);
    return -1;
}

/* GETs the dry run. The parsed body (new ref), or NULL after a message. */
static json_t *ask_api(const struct nb_api_client *api, const char *uuid, const struct options *o)
{
    char *esc = o->to ? curl_easy_escape(NULL, o->to, 0) : NULL;
    _cleanup_free_ char *path =
        nb_strdup_printf("/compute/v2.1/servers/%s/os-migration-check?block_migration=%s%s%s", uuid,
                         o->block, esc ? "&host=" : "", esc ? esc : "");
    curl_free(esc);
    json_t *j = NULL;
    char err[512] = "";
    long status = nb_api_call(api, "GET", path, NULL, NULL, &j, err, sizeof(err));
    if (status == 200 && j)
        return j;
    char msg[1024];
    nb_api_error_message(j, status, msg, sizeof(msg));
    fprintf(stderr, "nubo doctor migration: the API at %s answered %ld: %s\n", api->base, status,
            status ? msg : err);
    json_decref(j);
    return NULL;
}

static const char *s_or(const json_t *o, const char *k, const char *def)
{
    const char *s = nb_json_str(o, k);
    return s ? s : def;
}

/* The report; returns how many hosts passed. */
static int print_report(const json_t *r)
{
    json_t *hosts = json_object_get(r, "hosts");
    printf("live migration of server %s from %s (block_migration %s): %zu candidate host(s)\n",
           s_or(r, "instance", "?"), s_or(r, "source", "?"), s_or(r, "block_migration", "auto"),
           json_array_size(hosts));
    int passed = 0;
    size_t i, k;
    json_t *h, *c;
    json_array_foreach (hosts, i, h) {
        bool ok = json_is_true(json_object_get(h, "ok"));
        passed += ok;
        if (ok)
            printf("host %s: PASSES (block_migration %s, shared storage %s, %lld warning(s))\n",
                   s_or(h, "host", "?"),
                   json_is_true(json_object_get(h, "block_migration")) ? "true" : "false",
                   json_is_true(json_object_get(h, "shared_storage")) ? "yes" : "no",
                   nb_json_int(h, "warnings", 0));
        else
            printf("host %s: REFUSED: %s\n", s_or(h, "host", "?"), s_or(h, "message", "?"));
        json_array_foreach (json_object_get(h, "checks"), k, c) {
            const char *v = json_is_true(json_object_get(c, "skipped"))   ? "SKIP"
                            : json_is_true(json_object_get(c, "warning")) ? "WARN"
                            : json_is_true(json_object_get(c, "ok"))      ? "OK"
                                                                          : "PROBLEM";
            const char *m = nb_json_str(c, "message");
            printf("  [%s] %s: %s%s%s\n", v, s_or(c, "check", "?"), s_or(c, "evidence", ""),
                   m ? " -> " : "", m ? m : "");
        }
    }
    printf("summary: %d of %zu host(s) can take the server\n", passed, json_array_size(hosts));
    return passed;
}

/* Asks the API and prints its answer; the exit status. */
static int check(const struct nb_api_client *api, const char *uuid, const struct options *o)
{
    _cleanup_json_ json_t *r = ask_api(api, uuid, o);
    if (!r)
        return NB_DR_EXIT_CANNOT;
    if (!o->json)
        return print_report(r) > 0 ? NB_DR_EXIT_HEALTHY : NB_DR_EXIT_PROBLEM;
    _cleanup_free_ char *text = json_dumps(r, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    puts(text ? text : "{}");
    size_t i;
    json_t *h;
    json_array_foreach (json_object_get(r, "hosts"), i, h)
        if (json_is_true(json_object_get(h, "ok")))
            return NB_DR_EXIT_HEALTHY;
    return NB_DR_EXIT_PROBLEM;
}

int nb_cmd_doctor_migration(int argc, char **argv)
{
    char shown[1100];
    struct options o = {0};
    int p = parse(argc, argv, &o);
    if (p != 0) {
        fputs(usage_text, p > 0 ? stdout : stderr);
        return p > 0 ? 0 : NB_DR_EXIT_USAGE;
    }
    if (nb_conf_load(o.config) < 0)
        return NB_DR_EXIT_CANNOT;
    for (int i = 0; i < o.nsets; i++)
        if (nb_conf_set_arg(o.sets[i]) < 0) {
            fprintf(stderr, "nubo doctor: --set wants SECTION.KEY=VALUE, not '%s'\n", o.sets[i]);
            return NB_DR_EXIT_USAGE;
        }
    char path[1100];
    if (!nb_cmd_db_path(path, sizeof(path)))
        return NB_DR_EXIT_CANNOT;
    struct nb_db *db =
        nb_db_url_is_mariadb(path) || access(path, R_OK | W_OK) == 0 ? nb_db_open(path) : NULL;
    if (!db) {
        fprintf(stderr, "nubo doctor migration: cannot open database %s\n",
                nb_db_url_display(path, shown, sizeof(shown)));
        return NB_DR_EXIT_CANNOT;
    }
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    char uuid[64];
    struct nb_api_client api = {.timeout_s = CHECK_TIMEOUT};
    int rc = NB_DR_EXIT_CANNOT;
    if (resolve(db, &ctx, o.server, uuid, sizeof(uuid)) < 0)
        goto out;
    if (nb_api_client_open(&api, db, &ctx, TOKEN_TTL) < 0) {
        fprintf(stderr, "nubo doctor migration: cannot issue an admin token: %s\n",
                nb_ctx_message(&ctx));
        goto out;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    rc = check(&api, uuid, &o);
    curl_global_cleanup();
out:
    nb_db_close(db);
    return rc;
}
