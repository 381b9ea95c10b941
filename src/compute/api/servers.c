/* servers.c - /compute/v2.1/servers: list, detail, show, update and delete.
 * Create is server_create.c; the shared helpers are validate.c (checks,
 * policy, query strings), links.c, sql.c and instances.c.
 *
 * Listing follows Nova's ServersController._get_servers: the options a
 * caller may use depend on the microversion and on being an admin; the SQL
 * statement is built from the recognised filters with bound string
 * arguments; regular-expression filters (name, hostname, …) and markers are
 * applied in memory on the sorted rows; the page's related rows are loaded
 * by server_views.c. */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "compute/api/api.h"
#include "compute/api/block_devices.h"
#include "compute/api/instances.h"
#include "compute/api/jsonbuf.h"
#include "compute/api/links.h"
#include "compute/api/server_addresses.h"
#include "compute/api/server_create.h"
#include "compute/api/server_views.h"
#include "compute/api/sql.h"
#include "compute/api/validate.h"
#include "compute/compute.h"
#include "compute/objects/instance.h"
#include "compute/rpc/compute_api.h"
#include "compute/rpc/conductor_api.h"
#include "db/db.h"
#include "image/image.h"
#include "network/network.h"
#include "placement/placement.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* ---- listing --------------------------------------------------------------------- */

enum filt_kind { F_EXACT, F_REGEX, F_SPECIAL, F_IGNORE };

/* A query parameter of GET /servers: the column it filters, how, and from
 * which microversion a non-admin may use it (-1: admins only). */
static const struct filt {
    const char *param;
    const char *column;
    enum filt_kind kind;
    int schema_minor;  /* in the query schema from 2.<n> */
    int user_minor;    /* usable by non-admins from 2.<n>, -1 never */
    bool regex_format; /* value must be a regular expression */
} filters[] = {
    {"user_id", "user_id", F_EXACT, 1, 83, false},
    {"project_id", "project_id", F_EXACT, 1, -1, false},
    {"tenant_id", "project_id", F_EXACT, 1, -1, false},
    {"launch_index", "launch_index", F_REGEX, 1, -1, false},
    {"image_ref", "image_ref", F_EXACT, 1, -1, false},
    {"image", "image_ref", F_EXACT, 1, 1, false},
    {"kernel_id", "kernel_id", F_REGEX, 1, -1, true},
    {"ramdisk_id", "ramdisk_id", F_REGEX, 1, -1, true},
    {"hostname", "hostname", F_REGEX, 1, 90, true},
    {"key_name", "key_name", F_REGEX, 1, 83, true},
    {"power_state", "power_state", F_REGEX, 1, 83, true},
    {"vm_state", "vm_state", F_EXACT, 1, 83, false},
    {"task_state", "task_state", F_EXACT, 1, 83, false},
    {"host", "host", F_EXACT, 1, -1, false},
    {"node", "node", F_REGEX, 1, -1, true},
    {"flavor", "instance_type_id", F_SPECIAL, 1, 1, true},
    {"reservation_id", "reservation_id", F_REGEX, 1, 1, true},
    {"launched_at", "launched_at", F_REGEX, 1, 83, true},
    {"terminated_at", "terminated_at", F_REGEX, 1, 83, true},
    {"availability_zone", "availability_zone", F_REGEX, 1, 83, true},
    {"name", "display_name", F_REGEX, 1, 1, true},
    {"display_name", "display_name", F_REGEX, 1, -1, true},
    {"description", NULL, F_IGNORE, 1, -1, true},
    {"display_description", "display_description", F_REGEX, 1, -1, true},
    {"locked_by", "locked_by", F_REGEX, 1, -1, true},
    {"uuid", "uuid", F_EXACT, 1, -1, false},
    {"root_device_name", "root_device_name", F_REGEX, 1, -1, true},
    {"config_drive", "config_drive", F_REGEX, 1, 83, true},
    {"access_ip_v4", "access_ip_v4", F_REGEX, 1, -1, true},
    {"access_ip_v6", "access_ip_v6", F_REGEX, 1, -1, true},
    {"auto_disk_config", "auto_disk_config", F_REGEX, 1, -1, true},
    {"progress", "progress", F_REGEX, 1, 83, true},
    {"sort_key", NULL, F_IGNORE, 1, 1, false},
    {"sort_dir", NULL, F_IGNORE, 1, 1, false},
    {"limit", NULL, F_IGNORE, 1, 1, false},
    {"marker", NULL, F_IGNORE, 1, 1, false},
    {"all_tenants", NULL, F_SPECIAL, 1, 1, false},
    {"soft_deleted", NULL, F_SPECIAL, 1, -1, false},
    {"deleted", NULL, F_SPECIAL, 1, -1, false},
    {"status", NULL, F_SPECIAL, 1, 1, false},
    {"changes-since", NULL, F_SPECIAL, 1, 1, false},
    {"ip", NULL, F_SPECIAL, 1, 1, true},
    {"ip6", NULL, F_SPECIAL, 1, 5, true},
    {"created_at", "created_at", F_REGEX, 1, 83, true},
    {"block_device_mapping", NULL, F_SPECIAL, 1, -1, false},
    {"services", NULL, F_SPECIAL, 1, -1, false},
    {"metadata", NULL, F_SPECIAL, 1, -1, false},
    {"system_metadata", NULL, F_SPECIAL, 1, -1, false},
    {"info_cache", NULL, F_SPECIAL, 1, -1, false},
    {"security_groups", NULL, F_SPECIAL, 1, -1, false},
    {"pci_devices", NULL, F_SPECIAL, 1, -1, false},
    {"tags", NULL, F_SPECIAL, 26, 26, true},
    {"tags-any", NULL, F_SPECIAL, 26, 26, true},
    {"not-tags", NULL, F_SPECIAL, 26, 26, true},
    {"not-tags-any", NULL, F_SPECIAL, 26, 26, true},
    {"changes-before", NULL, F_SPECIAL, 66, 66, false},
    {"locked", "locked", F_SPECIAL, 73, 73, false},
};

static const struct filt *find_filter(const char *param)
{
    for (size_t i = 0; i < sizeof(filters) / sizeof(filters[0]); i++)
        if (!strcmp(filters[i].param, param))
            return &filters[i];
    return NULL;
}

static bool is_joined_table_param(const char *p)
{
    static const char *const list[] = {"block_device_mapping", "services",   "metadata",
                                       "system_metadata",      "info_cache", "security_groups",
                                       "pci_devices"};
    for (size_t i = 0; i < sizeof(list) / sizeof(list[0]); i++)
        if (!strcmp(p, list[i]))
            return true;
    return false;
}

/* Sort keys Nova accepts, and those it silently ignores before 2.75. */
static const char *const sort_keys_valid[] = {"access_ip_v4",
                                              "access_ip_v6",
                                              "auto_disk_config",
                                              "availability_zone",
                                              "config_drive",
                                              "created_at",
                                              "display_description",
                                              "display_name",
                                              "host",
                                              "hostname",
                                              "image_ref",
                                              "instance_type_id",
                                              "kernel_id",
                                              "key_name",
                                              "launch_index",
                                              "launched_at",
                                              "locked_by",
                                              "node",
                                              "power_state",
                                              "progress",
                                              "project_id",
                                              "ramdisk_id",
                                              "root_device_name",
                                              "task_state",
                                              "terminated_at",
                                              "updated_at",
                                              "user_id",
                                              "uuid",
                                              "vm_state"};
static const char *const sort_keys_ignored[] = {"architecture",
                                                "cell_name",
                                                "cleaned",
                                                "default_ephemeral_device",
                                                "default_swap_device",
                                                "deleted",
                                                "deleted_at",
                                                "disable_terminate",
                                                "ephemeral_gb",
                                                "ephemeral_key_uuid",
                                                "id",
                                                "key_data",
                                                "launched_on",
                                                "locked",
                                                "memory_mb",
                                                "os_type",
                                                "reservation_id",
                                                "root_gb",
                                                "shutdown_terminate",
                                                "user_data",
                                                "vcpus",
                                                "vm_mode"};

/* The parsed request of GET /servers[/detail]. */
struct list_req {
    json_t *opts;      /* search options after policy stripping: key -> [values] */
    json_t *sort_keys; /* [key] */
    json_t *sort_dirs; /* ["asc"|"desc"], same length */
    long long limit;
    char *marker;
    bool all_tenants;
    bool empty; /* the filters cannot match anything */
    regex_t regs[32];
    const char *reg_cols[32];
    int nregs;
};

static void list_req_free(struct list_req *l)
{
    json_decref(l->opts);
    json_decref(l->sort_keys);
    json_decref(l->sort_dirs);
    free(l->marker);
    for (int i = 0; i < l->nregs; i++)
        regfree(&l->regs[i]);
}

/* The query-parameter checks of Nova's JSON schemas for GET /servers. */
static int validate_list_query(struct nb_ctx *ctx, json_t *q)
{
    const char *key;
    json_t *vals;
    int minor = ctx->mv_major == 2 ? ctx->mv_minor : 1;
    json_object_foreach (q, key, vals) {
        const struct filt *f = find_filter(key);
        bool known = f && f->schema_minor <= minor;
        if (!known && key[0] != '_' && nb_ctx_mv_ge(ctx, 2, 75))
            return nb_error(ctx, 400, NULL,
                            "Additional properties are not allowed ('%s' was "
                            "unexpected)",
                            key);
        if (!known)
            continue;
        size_t i;
        json_t *v;
        json_array_foreach (vals, i, v) {
            const char *s = json_string_value(v);
            if (f->regex_format) {
                regex_t re;
                if (!*s || regcomp(&re, s, REG_EXTENDED | REG_NOSUB) != 0)
                    return nb_error(ctx, 400, NULL,
                                    "Invalid input for query parameters %s. Value: %s. '%s' is "
                                    "not a 'regex'",
                                    key, s, s);
                regfree(&re);
            }
            if ((!strcmp(key, "changes-since") || !strcmp(key, "changes-before")) &&
                nb_time_parse(s) < 0)
                return nb_error(ctx, 400, NULL,
                                "Invalid input for query parameters %s. Value: %s. '%s' is not a "
                                "'date-time'",
                                key, s, s);
            if (!strcmp(key, "sort_key")) {
                bool ok = NB_SRV_IN_LIST(s, sort_keys_valid) ||
                          (!strcmp(s, "locked") && nb_ctx_mv_ge(ctx, 2, 73)) ||
                          (!nb_ctx_mv_ge(ctx, 2, 75) && NB_SRV_IN_LIST(s, sort_keys_ignored));
                if (!ok)
                    return nb_error(ctx, 400, NULL,
                                    "Invalid input for query parameters sort_key. Value: %s. '%s' "
                                    "is not one of the valid sort keys",
                                    s, s);
            }
        }
        if ((!strcmp(key, "limit") || !strcmp(key, "marker")) && json_array_size(vals) > 1 &&
            nb_ctx_mv_ge(ctx, 2, 75))
            return nb_error(ctx, 400, NULL,
                            "Invalid input for query parameters %s. Value: "
                            "multiple. It is too long",
                            key);
    }
    return 0;
}

/* Sort keys and directions: Nova's get_sort_params, remove_invalid_sort_keys
 * and process_sort_params (created_at and id are always last). */
static int parse_sort(struct nb_ctx *ctx, json_t *q, struct list_req *l)
{
    json_t *keys = json_object_get(q, "sort_key");
    json_t *dirs = json_object_get(q, "sort_dir");
    json_t *k = json_array(), *d = json_array();
    size_t i;
    json_t *v;
    if (json_array_size(keys) == 0)
        json_array_append_new(k, json_string("created_at"));
    json_array_foreach (keys, i, v)
        json_array_append(k, v);
    if (json_array_size(dirs) == 0)
        json_array_append_new(d, json_string("desc"));
    json_array_foreach (dirs, i, v)
        json_array_append(d, v);
    /* drop ignored keys (with their direction when there is one) */
    for (i = 0; i < json_array_size(k);) {
        const char *key = json_string_value(json_array_get(k, i));
        bool ignored = NB_SRV_IN_LIST(key, sort_keys_ignored) &&
                       !(nb_ctx_mv_ge(ctx, 2, 73) && !strcmp(key, "locked"));
        if (ignored) {
            if (json_array_size(d) > i)
                json_array_remove(d, i);
            json_array_remove(k, i);
            continue;
        }
        if ((!strcmp(key, "host") || !strcmp(key, "node")) && !ctx->is_admin) {
            json_decref(k);
            json_decref(d);
            return nb_error(ctx, 403, NULL, "Only administrators can sort servers by %s", key);
        }
        i++;
    }
    const char *def = json_array_size(d) ? json_string_value(json_array_get(d, 0)) : "desc";
    json_array_foreach (d, i, v) {
        const char *s = json_string_value(v);
        if (strcmp(s, "asc") && strcmp(s, "desc")) {
            json_decref(k);
            json_decref(d);
            return nb_error(ctx, 400, NULL,
                            "Invalid input received: Unknown sort direction, must be 'desc' or "
                            "'asc'");
        }
    }
    if (json_array_size(d) > json_array_size(k)) {
        json_decref(k);
        json_decref(d);
        return nb_error(ctx, 400, NULL,
                        "Invalid input received: Sort direction size exceeds sort key size");
    }
    while (json_array_size(d) < json_array_size(k))
        json_array_append_new(d, json_string(def));
    static const char *const defaults[] = {"created_at", "id"};
    for (size_t n = 0; n < 2; n++) {
        bool have = false;
        json_array_foreach (k, i, v)
            have = have || !strcmp(json_string_value(v), defaults[n]);
        if (!have) {
            json_array_append_new(k, json_string(defaults[n]));
            json_array_append_new(d, json_string(def));
        }
    }
    l->sort_keys = k;
    l->sort_dirs = d;
    return 0;
}

/* Nova's remove_invalid_options and the filters no one may use: the
 * options a caller keeps (paging and sorting aside) go to l->opts. 0/-1. */
static int keep_list_options(struct nb_ctx *ctx, json_t *q, struct list_req *l)
{
    int minor = ctx->mv_major == 2 ? ctx->mv_minor : 1;
    l->opts = json_object();
    const char *key;
    json_t *vals;
    json_object_foreach (q, key, vals) {
        const struct filt *f = find_filter(key);
        if (!strcmp(key, "sort_key") || !strcmp(key, "sort_dir") || !strcmp(key, "limit") ||
            !strcmp(key, "marker"))
            continue;
        /* remove_invalid_options: non-admins keep only their options */
        if (!ctx->is_admin && (!f || f->user_minor < 0 || f->user_minor > minor))
            continue;
        if (is_joined_table_param(key) || key[0] == '_')
            return nb_error(ctx, 400, NULL, "Invalid filter field: %s.", key);
        json_object_set(l->opts, key, vals);
    }
    return 0;
}

/* status=… becomes vm_state/task_state filters (none that match: an empty
 * list, or 400 from 2.38). 0/-1. */
static int status_filter(struct nb_ctx *ctx, json_t *q, struct list_req *l)
{
    json_t *statuses = json_object_get(q, "status");
    json_object_del(l->opts, "status");
    if (!statuses)
        return 0;
    json_t *vms = json_array(), *tasks = json_array();
    nb_server_states_for_statuses(statuses, vms, tasks);
    if (!json_array_size(vms) && !json_array_size(tasks)) {
        json_decref(vms);
        json_decref(tasks);
        if (nb_ctx_mv_ge(ctx, 2, 38))
            return nb_error(ctx, 400, NULL, "Invalid status value");
        l->empty = true;
        return 0;
    }
    json_object_set_new(l->opts, "vm_state", vms);
    bool has_default = false;
    size_t i;
    json_t *v;
    json_array_foreach (tasks, i, v)
        has_default = has_default || !strcmp(json_string_value(v), "default");
    if (!has_default)
        json_object_set_new(l->opts, "task_state", tasks);
    else
        json_decref(tasks);
    return 0;
}

/* changes-since/-before and the deleted filter as Nova derives it. 0/-1. */
static int deleted_filter(struct nb_ctx *ctx, struct list_req *l)
{
    const char *since = nb_srv_query_last(l->opts, "changes-since");
    const char *before = nb_srv_query_last(l->opts, "changes-before");
    if (since && before && nb_time_parse(before) < nb_time_parse(since))
        return nb_error(ctx, 400, NULL,
                        "The value of changes-since must be less than or equal to "
                        "changes-before.");
    if (!json_object_get(l->opts, "deleted")) {
        if (!since && !before)
            json_object_set_new(l->opts, "deleted", json_pack("[s]", "false"));
    } else {
        const char *dv = nb_srv_query_last(l->opts, "deleted");
        json_object_set_new(
            l->opts, "deleted",
            json_pack("[s]", nb_srv_bool_from_string(dv, false) ? "true" : "false"));
    }
    json_t *vmf = json_object_get(l->opts, "vm_state");
    if (json_array_size(vmf) == 1 &&
        !strcmp(json_string_value(json_array_get(vmf, 0)), "deleted")) {
        if (!ctx->is_admin)
            return nb_error(ctx, 403, NULL, "Only administrators may list deleted instances");
        json_object_set_new(l->opts, "deleted", json_pack("[s]", "true"));
    }
    return 0;
}

/* 400 for a strict boolean query value that is not one of oslo's words. */
static int bad_bool_option(struct nb_ctx *ctx, const char *value)
{
    return nb_error(ctx, 400, NULL,
                    "Invalid input received: Unrecognized value '%s', acceptable values are: "
                    "'0', '1', 'f', 'false', 'n', 'no', 'off', 'on', 't', 'true', 'y', 'yes'",
                    value);
}

/* all_tenants (with its policy), locked, and the project filter. 0/-1. */
static int tenant_filter(struct nb_ctx *ctx, bool detail, struct list_req *l)
{
    if (json_object_get(l->opts, "all_tenants")) {
        const char *at = nb_srv_query_last(l->opts, "all_tenants");
        int b = *at ? nb_srv_bool_from_string(at, true) : 1;
        if (b < 0)
            return bad_bool_option(ctx, at);
        l->all_tenants = b == 1;
        json_object_del(l->opts, "all_tenants");
    }
    if (json_object_get(l->opts, "locked")) {
        int b = nb_srv_bool_from_string(nb_srv_query_last(l->opts, "locked"), true);
        if (b < 0)
            return bad_bool_option(ctx, nb_srv_query_last(l->opts, "locked"));
        json_object_set_new(l->opts, "locked", json_pack("[s]", b ? "1" : "0"));
    }
    if (l->all_tenants) {
        const char *rule = detail ? "os_compute_api:servers:detail:get_all_tenants"
                                  : "os_compute_api:servers:index:get_all_tenants";
        return nb_srv_policy(ctx, rule, ctx->is_admin);
    }
    json_object_del(l->opts, "tenant_id");
    json_object_set_new(l->opts, "project_id", json_pack("[s]", ctx->project_id));
    return 0;
}

/* limit (at most [api] max_limit) and marker. 0/-1. */
static int paging(struct nb_ctx *ctx, json_t *q, struct list_req *l)
{
    long long max_limit = nb_conf_int("api", "max_limit", 1000);
    l->limit = max_limit;
    const char *lim = nb_srv_query_last(q, "limit");
    if (lim) {
        long long v;
        if (nb_srv_query_nonneg_int(ctx, "limit", lim, &v) < 0)
            return -1;
        if (v < l->limit)
            l->limit = v;
    }
    const char *marker = nb_srv_query_last(q, "marker");
    l->marker = marker ? strdup(marker) : NULL;
    return 0;
}

/* Parses and checks the request; fills l. Returns 0/-1. */
static int parse_list_request(struct nb_ctx *ctx, struct nb_req *req, bool detail,
                              struct list_req *l)
{
    memset(l, 0, sizeof(*l));
    json_t *q = nb_srv_query_all(req);
    int rc = -1;
    if (validate_list_query(ctx, q) < 0 || keep_list_options(ctx, q, l) < 0 ||
        status_filter(ctx, q, l) < 0 || deleted_filter(ctx, l) < 0 ||
        tenant_filter(ctx, detail, l) < 0 || paging(ctx, q, l) < 0 || parse_sort(ctx, q, l) < 0)
        goto out;
    rc = 0;
out:
    json_decref(q);
    return rc;
}

/* Adds "AND column IN (?, …)" for a list of values (JSON null: IS NULL). */
static void sql_in(struct nb_srv_sql *q, const char *column, json_t *vals)
{
    size_t i;
    json_t *v;
    bool has_null = false;
    int n = 0;
    nb_srv_sql_add(q, " AND (%s IN (", column);
    json_array_foreach (vals, i, v) {
        const char *s = json_string_value(v);
        if (!s) {
            has_null = true;
            continue;
        }
        nb_srv_sql_add(q, "%s", n++ ? ", " : "");
        nb_srv_sql_arg(q, s);
    }
    if (!n)
        nb_srv_sql_add(q, "NULL");
    nb_srv_sql_add(q, ")");
    if (has_null)
        nb_srv_sql_add(q, " OR %s IS NULL", column);
    nb_srv_sql_add(q, ")");
}

/* Splits "a,b,c" into a new array. */
static json_t *split_commas(const char *s)
{
    json_t *a = json_array();
    char *copy = strdup(s), *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save))
        json_array_append_new(a, json_string(t));
    free(copy);
    return a;
}

static void sql_tag_set(struct nb_srv_sql *q, json_t *tags, bool all)
{
    size_t i;
    json_t *v;
    if (all) {
        nb_srv_sql_add(q, "(1 = 1");
        json_array_foreach (tags, i, v) {
            nb_srv_sql_add(q, " AND uuid IN (SELECT resource_id FROM tags WHERE tag = ");
            nb_srv_sql_arg(q, json_string_value(v));
            nb_srv_sql_add(q, ")");
        }
        nb_srv_sql_add(q, ")");
    } else {
        nb_srv_sql_add(q, "uuid IN (SELECT resource_id FROM tags WHERE tag IN (");
        json_array_foreach (tags, i, v) {
            nb_srv_sql_add(q, "%s", i ? ", " : "");
            nb_srv_sql_arg(q, json_string_value(v));
        }
        nb_srv_sql_add(q, "))");
    }
}

/* The instance columns a list needs (views, filters, sort keys): all but
 * the large request_spec and key_data. */
#define LIST_COLUMNS                                                                               \
    "id, uuid, project_id, user_id, display_name, display_description, hostname, vm_state, "       \
    "task_state, power_state, host, node, availability_zone, instance_type_id, flavor, "           \
    "image_ref, key_name, user_data, config_drive, reservation_id, launch_index, access_ip_v4, "   \
    "access_ip_v6, progress, root_device_name, locked, locked_by, locked_reason, launched_at, "    \
    "terminated_at, created_at, updated_at, deleted_at, deleted, kernel_id, ramdisk_id, "          \
    "auto_disk_config, trusted_certs"

/* An exact filter: "column IN (…)"; only vm_state and task_state take
 * several values, the others their last one. */
static void sql_exact(struct nb_srv_sql *q, const struct filt *f, const char *key, json_t *vals,
                      const char *last)
{
    if (json_array_size(vals) > 1 && strcmp(key, "vm_state") && strcmp(key, "task_state")) {
        json_t *one = json_pack("[s]", last);
        sql_in(q, f->column, one);
        json_decref(one);
    } else {
        sql_in(q, f->column, vals);
    }
}

/* flavor=<flavorid>: its internal id, or an empty list for none. 0/-1. */
static int sql_flavor(struct nb_ctx *ctx, struct list_req *l, struct nb_srv_sql *q,
                      const char *last)
{
    json_t *fl =
        nb_db_row(nb_srv_db(), ctx, "SELECT id FROM flavors WHERE flavorid = ?", "s", last);
    if (!fl && nb_ctx_failed(ctx))
        return -1;
    if (!fl) {
        l->empty = true;
    } else {
        nb_srv_sql_add(q, " AND instance_type_id = %lld", nb_json_int(fl, "id", 0));
        json_decref(fl);
    }
    return 0;
}

static void sql_changes(struct nb_srv_sql *q, const char *key, const char *last)
{
    char buf[32];
    nb_time_iso(nb_time_parse(last), buf);
    buf[19] = '\0'; /* compare without the zone: stored stamps are UTC */
    nb_srv_sql_add(q, " AND updated_at %s ", key[8] == 's' ? ">=" : "<=");
    if (key[8] == 's') {
        nb_srv_sql_arg(q, buf);
    } else {
        /* "…T10:00:00" <= "…T10:00:00.5" as text: compare on seconds */
        char upto[40];
        snprintf(upto, sizeof(upto), "%s.999999", buf);
        nb_srv_sql_arg(q, upto);
    }
}

static void sql_deleted(struct list_req *l, struct nb_srv_sql *q, const char *last)
{
    if (!strcmp(last, "true")) {
        bool soft = true;
        const char *sd = nb_srv_query_last(l->opts, "soft_deleted");
        if (sd)
            soft = nb_srv_bool_from_string(sd, false);
        nb_srv_sql_add(q, soft ? " AND (deleted != 0 OR vm_state = 'soft-delete')"
                               : " AND deleted != 0");
    } else {
        const char *sd = nb_srv_query_last(l->opts, "soft_deleted");
        nb_srv_sql_add(q, " AND deleted = 0");
        if (!sd || !nb_srv_bool_from_string(sd, false))
            nb_srv_sql_add(q, " AND (vm_state IS NULL OR vm_state != 'soft-delete')");
    }
}

/* ip and ip6 in one pass, as Nova's _ip_filter (ip6 is done with ip). 0/-1. */
static int sql_ip(struct nb_ctx *ctx, struct list_req *l, struct nb_srv_sql *q, const char *key)
{
    const char *ip = nb_srv_query_last(l->opts, "ip");
    if (!strcmp(key, "ip6") && ip)
        return 0;
    json_t *ids = nb_srv_uuids_by_ip(ctx, ip, nb_srv_query_last(l->opts, "ip6"));
    if (!ids)
        return -1;
    if (json_array_size(ids)) {
        nb_srv_sql_add(q, " AND uuid IN ");
        nb_srv_sql_id_list(q, ids);
    } else {
        l->empty = true;
    }
    json_decref(ids);
    return 0;
}

static void sql_tags(struct nb_srv_sql *q, const char *key, const char *last)
{
    json_t *tags = split_commas(last);
    if (json_array_size(tags)) {
        bool neg = key[0] == 'n';
        bool any = strstr(key, "-any") != NULL;
        nb_srv_sql_add(q, neg ? " AND NOT " : " AND ");
        sql_tag_set(q, tags, !any);
    }
    json_decref(tags);
}

/* One recognised filter of l.opts into q (regex filters go to l.regs).
 * 0/-1. */
static int sql_filter(struct nb_ctx *ctx, struct list_req *l, struct nb_srv_sql *q,
                      const struct filt *f, const char *key, json_t *vals, const char *last)
{
    if (f->kind == F_EXACT) {
        sql_exact(q, f, key, vals, last);
    } else if (f->kind == F_REGEX) {
        if (l->nregs == 32)
            return nb_error(ctx, 400, NULL, "Too many filters.");
        if (regcomp(&l->regs[l->nregs], last, REG_EXTENDED | REG_NOSUB) != 0)
            return nb_error(ctx, 400, NULL, "Invalid filter field: %s.", key);
        l->reg_cols[l->nregs++] = f->column;
    } else if (!strcmp(key, "flavor")) {
        return sql_flavor(ctx, l, q, last);
    } else if (!strcmp(key, "locked")) {
        nb_srv_sql_add(q, " AND locked = %d", !strcmp(last, "1"));
    } else if (!strcmp(key, "changes-since") || !strcmp(key, "changes-before")) {
        sql_changes(q, key, last);
    } else if (!strcmp(key, "deleted")) {
        sql_deleted(l, q, last);
    } else if (!strcmp(key, "ip") || !strcmp(key, "ip6")) {
        return sql_ip(ctx, l, q, key);
    } else if (!strncmp(key, "tags", 4) || !strncmp(key, "not-tags", 8)) {
        sql_tags(q, key, last);
    }
    return 0;
}

/* Appends v, a column value of the marker row, as a literal (integers) or
 * a bound argument (text). */
static void sql_value(struct nb_srv_sql *q, const json_t *v)
{
    if (json_is_integer(v)) {
        nb_srv_sql_add(q, "%lld", (long long)json_integer_value(v));
    } else if (json_is_real(v)) {
        nb_srv_sql_add(q, "%.17g", json_real_value(v));
    } else {
        nb_srv_sql_arg(q, json_string_value(v));
    }
}

/* " AND (rows after marker in the sort order)": Nova's paginate_query as
 * cmp_sort orders (NULLs first ascending), i.e. for keys k1..kn
 *   (k1 after m1) OR (k1 = m1 AND k2 after m2) OR …
 * where "after" is > ascending, < descending (and IS NOT NULL ascending
 * after a NULL, OR IS NULL descending after a value). The list always ends
 * with id, so the order is total and the page is exactly the one the
 * in-memory check of select_page keeps, but with LIMIT in SQL. */
static void sql_after_marker(struct nb_srv_sql *q, const struct list_req *l, const json_t *marker)
{
    nb_srv_sql_add(q, " AND (");
    size_t n = json_array_size(l->sort_keys);
    for (size_t i = 0; i < n; i++) {
        nb_srv_sql_add(q, "%s(", i ? " OR " : "");
        for (size_t j = 0; j <= i; j++) {
            const char *k = json_string_value(json_array_get(l->sort_keys, j));
            const json_t *m = json_object_get(marker, k);
            bool null = !m || json_is_null(m);
            if (j)
                nb_srv_sql_add(q, " AND ");
            if (j < i) {
                if (null) {
                    nb_srv_sql_add(q, "%s IS NULL", k);
                } else {
                    nb_srv_sql_add(q, "%s = ", k);
                    sql_value(q, m);
                }
                continue;
            }
            bool asc = !strcmp(json_string_value(json_array_get(l->sort_dirs, j)), "asc");
            if (null) {
                nb_srv_sql_add(q, asc ? "%s IS NOT NULL" : "0 = 1", k);
            } else {
                nb_srv_sql_add(q, asc ? "%s > " : "(%s < ", k);
                sql_value(q, m);
                if (!asc)
                    nb_srv_sql_add(q, " OR %s IS NULL)", k);
            }
        }
        nb_srv_sql_add(q, ")");
    }
    nb_srv_sql_add(q, ")");
}

/* Builds the SELECT for the filters in l.opts; regex filters go to l.regs.
 * Without regex filters the marker and the limit are applied in SQL. */
static int build_list_sql(struct nb_ctx *ctx, struct list_req *l, const json_t *marker,
                          struct nb_srv_sql *q)
{
    nb_srv_sql_add(q, "SELECT " LIST_COLUMNS " FROM instances WHERE 1 = 1");
    const char *key;
    json_t *vals;
    json_object_foreach (l->opts, key, vals) {
        const struct filt *f = find_filter(key);
        const char *last = json_string_value(json_array_get(vals, json_array_size(vals) - 1));
        if (f && last && sql_filter(ctx, l, q, f, key, vals, last) < 0)
            return -1;
    }
    if (marker && !l->nregs)
        sql_after_marker(q, l, marker);
    nb_srv_sql_add(q, " ORDER BY ");
    size_t i;
    json_t *v;
    json_array_foreach (l->sort_keys, i, v) {
        /* keys were checked against the lists of column names above */
        const char *dir = json_string_value(json_array_get(l->sort_dirs, i));
        nb_srv_sql_add(q, "%s%s %s", i ? ", " : "", json_string_value(v),
                       !strcmp(dir, "asc") ? "ASC" : "DESC");
    }
    if (!l->nregs)
        nb_srv_sql_add(q, " LIMIT %lld", l->limit);
    return 0;
}

/* Compares two column values as SQL's ORDER BY does (NULLs first, numbers
 * before text, text byte-wise). */
static int cmp_values(const json_t *a, const json_t *b)
{
    bool an = !a || json_is_null(a), bn = !b || json_is_null(b);
    if (an || bn)
        return an && bn ? 0 : (an ? -1 : 1);
    bool anum = json_is_number(a), bnum = json_is_number(b);
    if (anum && bnum) {
        double x = json_number_value(a), y = json_number_value(b);
        return x < y ? -1 : x > y;
    }
    if (anum != bnum)
        return anum ? -1 : 1;
    return strcmp(json_string_value(a), json_string_value(b));
}

/* >0 when row comes after marker in the sort order of l. */
static int cmp_sort(const struct list_req *l, const json_t *row, const json_t *marker)
{
    size_t i;
    json_t *v;
    json_array_foreach (l->sort_keys, i, v) {
        const char *k = json_string_value(v);
        int c = cmp_values(json_object_get(row, k), json_object_get(marker, k));
        if (!strcmp(json_string_value(json_array_get(l->sort_dirs, i)), "desc"))
            c = -c;
        if (c)
            return c;
    }
    return 0;
}

static bool regex_match(const struct list_req *l, const json_t *row)
{
    for (int i = 0; i < l->nregs; i++) {
        json_t *v = json_object_get(row, l->reg_cols[i]);
        char buf[32];
        const char *s;
        if (json_is_string(v)) {
            s = json_string_value(v);
        } else if (json_is_integer(v)) {
            snprintf(buf, sizeof(buf), "%lld", (long long)json_integer_value(v));
            s = buf;
        } else {
            return false;
        }
        if (regexec(&l->regs[i], s, 0, NULL, 0) != 0)
            return false;
    }
    return true;
}

/* The marker's row (*out NULL without a marker). 0, or -1 (400 when the
 * caller may not see it or there is none). */
static int load_marker(struct nb_ctx *ctx, const struct list_req *l, json_t **out)
{
    *out = NULL;
    if (!l->marker)
        return 0;
    json_t *row =
        nb_db_row(nb_srv_db(), ctx, "SELECT * FROM instances WHERE uuid = ?", "s", l->marker);
    if (!row && nb_ctx_failed(ctx))
        return -1;
    if (row && !ctx->is_admin && strcmp(nb_json_str(row, "project_id"), ctx->project_id) != 0) {
        json_decref(row);
        row = NULL;
    }
    if (!row)
        return nb_error(ctx, 400, NULL, "marker [%s] not found", l->marker);
    *out = row;
    return 0;
}

/* The page: rows filtered by the in-memory filters, after the marker, at
 * most limit. New array. */
static json_t *select_page(const struct list_req *l, json_t *rows, const json_t *marker_row)
{
    json_t *page = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        if ((long long)json_array_size(page) >= l->limit)
            break;
        if (marker_row && cmp_sort(l, r, marker_row) <= 0)
            continue;
        if (!regex_match(l, r))
            continue;
        json_array_append(page, r);
    }
    return page;
}

static int list_servers(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp, bool detail)
{
    const char *rule = detail ? "os_compute_api:servers:detail" : "os_compute_api:servers:index";
    if (nb_srv_policy(ctx, rule, ctx->is_reader || ctx->is_admin) < 0)
        return -1;
    struct list_req l;
    struct nb_srv_sql q;
    nb_srv_sql_init(&q);
    json_t *rows = NULL, *page = NULL, *marker = NULL;
    int rc = -1;
    if (parse_list_request(ctx, req, detail, &l) < 0 || load_marker(ctx, &l, &marker) < 0 ||
        build_list_sql(ctx, &l, marker, &q) < 0)
        goto out;
    if (l.empty || l.limit == 0) {
        rows = json_array();
    } else if (!(rows = nb_srv_sql_rows(ctx, &q))) {
        goto out;
    }
    page = select_page(&l, rows, marker);
    struct nb_srv_buf b;
    nb_srv_buf_init(&b);
    nb_srv_buf_lit(&b, "{\"servers\":[");
    if (detail) {
        struct nb_srv_view_opts o;
        nb_srv_view_opts_show(ctx, &o);
        if (nb_srv_view_write(ctx, page, &o, &b) < 0) {
            nb_srv_buf_free(&b);
            goto out;
        }
    } else {
        size_t i;
        json_t *r;
        json_array_foreach (page, i, r) {
            json_t *v = nb_srv_view_basic(r);
            if (i)
                nb_srv_buf_lit(&b, ",");
            nb_srv_buf_json(&b, v);
            json_decref(v);
        }
    }
    nb_srv_buf_lit(&b, "]");
    size_t n = json_array_size(page);
    if (n && (long long)n == l.limit) {
        json_t *links = nb_res_next_links(req, detail ? "servers/detail" : "servers",
                                          nb_json_str(json_array_get(page, n - 1), "uuid"));
        nb_srv_buf_lit(&b, ",\"servers_links\":");
        nb_srv_buf_json(&b, links);
        json_decref(links);
    }
    nb_srv_buf_lit(&b, "}");
    rc = nb_srv_buf_respond(resp, 200, &b);
out:
    list_req_free(&l);
    nb_srv_sql_free(&q);
    json_decref(rows);
    json_decref(page);
    json_decref(marker);
    return rc;
}

static int h_servers_index(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    return list_servers(ctx, req, resp, false);
}

static int h_servers_detail(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    return list_servers(ctx, req, resp, true);
}

/* ---- show, update, delete ---------------------------------------------------------- */

/* Answers {"server": <detailed view>} of one instance row. 0/-1. */
static int respond_server(struct nb_ctx *ctx, struct nb_resp *resp, json_t *inst,
                          const struct nb_srv_view_opts *o)
{
    json_t *rows = json_pack("[O]", inst);
    struct nb_srv_buf b;
    nb_srv_buf_init(&b);
    nb_srv_buf_lit(&b, "{\"server\":");
    int rc = nb_srv_view_write(ctx, rows, o, &b);
    json_decref(rows);
    if (rc < 0) {
        nb_srv_buf_free(&b);
        return -1;
    }
    nb_srv_buf_lit(&b, "}");
    return nb_srv_buf_respond(resp, 200, &b);
}

static int h_server_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    json_t *inst = nb_srv_instance_get(ctx, nb_req_param(req, "server_id"), false);
    if (!inst)
        return -1;
    int rc = -1;
    if (nb_srv_policy(ctx, "os_compute_api:servers:show",
                      nb_srv_is_reader_of(ctx, nb_json_str(inst, "project_id"))) == 0) {
        struct nb_srv_view_opts o;
        nb_srv_view_opts_show(ctx, &o);
        o.show_server_groups = nb_ctx_mv_ge(ctx, 2, 71);
        rc = respond_server(ctx, resp, inst, &o);
    }
    json_decref(inst);
    return rc;
}

static int validate_update(struct nb_ctx *ctx, json_t *server)
{
    const char *allowed[8] = {"name", "OS-DCF:diskConfig", "accessIPv4", "accessIPv6"};
    int n = 4;
    if (nb_ctx_mv_ge(ctx, 2, 19))
        allowed[n++] = "description";
    if (nb_ctx_mv_ge(ctx, 2, 90))
        allowed[n++] = "hostname";
    allowed[n] = NULL;
    if (nb_res_only_keys(ctx, "server", server, allowed) < 0)
        return -1;
    json_t *v;
    if ((v = json_object_get(server, "name")) && nb_srv_check_name(ctx, "name", v) < 0)
        return -1;
    if ((v = json_object_get(server, "description")) &&
        nb_srv_check_description(ctx, "description", v) < 0)
        return -1;
    if ((v = json_object_get(server, "hostname")) && nb_srv_check_hostname(ctx, v) < 0)
        return -1;
    if (nb_srv_check_access_ips(ctx, server) < 0)
        return -1;
    if (nb_srv_check_disk_config(ctx, server) < 0)
        return -1;
    return 0;
}

static int h_server_update(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    static const char *const top[] = {"server", NULL};
    json_t *server = nb_srv_body_object(ctx, req, "server", top);
    if (!server || validate_update(ctx, server) < 0)
        return -1;
    const char *id = nb_req_param(req, "server_id");
    json_t *inst = nb_srv_instance_get(ctx, id, false);
    if (!inst)
        return -1;
    int rc = -1;
    char *name = NULL;
    if (nb_srv_policy(ctx, "os_compute_api:servers:update",
                      nb_srv_is_member_of(ctx, nb_json_str(inst, "project_id"))) < 0)
        goto out;
    struct nb_instance_attrs a;
    name = nb_srv_attrs_from_body(server, &a);
    if (nb_instance_update_attrs(nb_srv_db(), ctx, id, &a) < 0)
        goto out;
    json_decref(inst);
    if (!(inst = nb_srv_instance_get(ctx, id, false)))
        goto out;
    struct nb_srv_view_opts o;
    nb_srv_view_opts_update(ctx, &o);
    rc = respond_server(ctx, resp, inst, &o);
out:
    free(name);
    json_decref(inst);
    return rc;
}

/* Is the compute service of host up (Nova's servicegroup check)? A host
 * without a service row counts as down, as in Nova. */
static bool compute_host_up(struct nb_ctx *ctx, const char *host)
{
    json_t *svc =
        nb_db_row(nb_srv_db(), ctx,
                  "SELECT forced_down, last_seen_up, updated_at, created_at FROM "
                  "services WHERE host = ? AND \"binary\" = 'nova-compute' AND deleted = 0",
                  "s", host);
    if (!svc)
        return false;
    bool up = false;
    if (!nb_json_int(svc, "forced_down", 0)) {
        const char *seen = nb_json_str(svc, "last_seen_up");
        if (!seen)
            seen = nb_json_str(svc, "updated_at");
        if (!seen)
            seen = nb_json_str(svc, "created_at");
        double t = nb_time_parse(seen);
        up = t > 0 && nb_time_now() - t <= (double)nb_conf_int("DEFAULT", "service_down_time", 60);
    }
    json_decref(svc);
    return up;
}

/* Deletes locally (no compute to ask): the row, then the allocations and
 * the volumes its mappings held. */
static int local_delete(struct nb_ctx *ctx, const char *uuid, bool only_unscheduled)
{
    struct nb_db *db = nb_srv_db();
    _cleanup_json_ json_t *volumes = nb_srv_instance_volume_bdms(ctx, uuid);
    if (!volumes || nb_db_begin(db, ctx) < 0)
        return -1;
    /* the guest, if any, is not ours to know about: power state kept */
    int n = nb_instance_destroy(db, ctx, uuid, only_unscheduled, false);
    if (n < 0 || nb_db_commit(db, ctx) < 0) {
        if (n < 0)
            nb_db_rollback(db);
        return -1;
    }
    if (n > 0) {
        nb_srv_release_volumes(ctx, volumes);
        struct nb_ctx sys; /* best-effort releases, with the system's rights */
        nb_ctx_init_system(&sys, ctx->request_id);
        if (nb_placement_delete_allocations(&sys, uuid) < 0)
            NB_WARN("nubo.compute.api", ctx, uuid, "could not release allocations: %s",
                    nb_ctx_message(&sys));
        nb_ctx_clear_error(&sys); /* the next release's failure is its own */
        if (nb_network_deallocate_for_instance(&sys, uuid) < 0)
            NB_WARN("nubo.compute.api", ctx, uuid, "could not release ports: %s",
                    nb_ctx_message(&sys));
        NB_INFO("nubo.compute.api", ctx, uuid,
                "Instance deleted locally (never scheduled or "
                "compute host down)");
    }
    return n;
}

static int h_server_delete(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *id = nb_req_param(req, "server_id");
    json_t *inst = nb_srv_instance_get(ctx, id, false);
    if (!inst)
        return -1;
    int rc = -1;
    struct nb_db *db = nb_srv_db();
    if (nb_srv_policy(ctx, "os_compute_api:servers:delete",
                      nb_srv_is_member_of(ctx, nb_json_str(inst, "project_id"))) < 0 ||
        nb_srv_check_lock(ctx, inst) < 0)
        goto out;
    const char *uuid = nb_json_str(inst, "uuid");
    const char *vm = nb_json_str(inst, "vm_state");
    const char *host = nb_json_str(inst, "host");
    bool may_have_ports = vm && (!strcmp(vm, NB_VM_ERROR) || !strcmp(vm, NB_VM_SHELVED_OFFLOADED));
    if ((!host || !*host) && !may_have_ports) {
        int n = local_delete(ctx, uuid, true);
        if (n < 0)
            goto out;
        if (n > 0) {
            rc = nb_resp_empty(resp, 204);
            goto out;
        }
        /* scheduled meanwhile: delete it through its compute */
        json_decref(inst);
        if (!(inst = nb_srv_instance_get(ctx, id, false)))
            goto out;
        uuid = nb_json_str(inst, "uuid");
        host = nb_json_str(inst, "host");
    }
    if (!host || !*host || !compute_host_up(ctx, host)) {
        int n = local_delete(ctx, uuid, false);
        if (n < 0)
            goto out;
        /* The host is down, not necessarily gone: a guest it still runs is
         * destroyed when its agent is back and reads its queue (Nova leaves
         * that to the host's running_deleted_instance reaper). Best effort. */
        if (n > 0 && host && *host && nb_compute_destroy_guest(ctx, host, uuid) < 0)
            nb_ctx_clear_error(ctx);
        rc = nb_resp_empty(resp, 204);
        goto out;
    }
    const char *task = nb_json_str(inst, "task_state");
    if (task && !strcmp(task, NB_TASK_DELETING)) {
        NB_INFO("nubo.compute.api", ctx, uuid,
                "Instance is already in deleting state, ignoring this request");
        rc = nb_resp_empty(resp, 204);
        goto out;
    }
    if (nb_db_begin(db, ctx) < 0)
        goto out;
    if (nb_instance_transition(
            db, ctx, uuid,
            &(struct nb_instance_change){.task_state = NB_TASK_DELETING, .reset_progress = true},
            NULL) < 0 ||
        nb_action_start(db, ctx, uuid, "delete") < 0) {
        nb_db_rollback(db);
        goto out;
    }
    if (nb_db_commit(db, ctx) < 0)
        goto out;
    if (nb_conductor_delete_instance(ctx, uuid) < 0) {
        nb_error(ctx, 503, NULL, "The compute conductor is not available.");
        goto out;
    }
    rc = nb_resp_empty(resp, 204);
out:
    json_decref(inst);
    return rc;
}

/* ---- registration ---------------------------------------------------------------------------- */

int nb_compute_servers_init(struct nb_env *env)
{
    nb_srv_env_set(env);
    nb_http_route("GET", "/compute/v2.1/servers", h_servers_index, 0);
    nb_http_route("GET", "/compute/v2.1/servers/detail", h_servers_detail, 0);
    nb_http_route("POST", "/compute/v2.1/servers", nb_srv_h_create, 0);
    nb_http_route("GET", "/compute/v2.1/servers/{server_id}", h_server_show, 0);
    nb_http_route("PUT", "/compute/v2.1/servers/{server_id}", h_server_update, 0);
    nb_http_route("DELETE", "/compute/v2.1/servers/{server_id}", h_server_delete, 0);
    return 0;
}
