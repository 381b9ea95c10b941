/* servers.c - /compute/v2.1/servers: list, detail, show, update, delete, and
 * the helpers the other server files share (policy, dynamic SQL, instance
 * lookup, query strings). Server create lives in server_create.inc, included
 * at the end, so this file stays about the resource.
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
#include "compute/api/servers_priv.h"
#include "compute/compute.h"
#include "bus/bus.h"
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

static const struct nb_env *srv_env;

const struct nb_env *nb_srv_env(void)
{
    return srv_env;
}
struct nb_db *nb_srv_db(void)
{
    return srv_env->db;
}

/* ---- policy ------------------------------------------------------------------ */

int nb_srv_policy(struct nb_ctx *ctx, const char *rule, bool ok)
{
    if (ok)
        return 0;
    return nb_error(ctx, 403, NULL, "Policy doesn't allow %s to be performed.", rule);
}

bool nb_srv_is_reader_of(const struct nb_ctx *ctx, const char *project_id)
{
    if (ctx->is_admin)
        return true;
    return ctx->is_reader && project_id && strcmp(ctx->project_id, project_id) == 0;
}

bool nb_srv_is_member_of(const struct nb_ctx *ctx, const char *project_id)
{
    if (ctx->is_admin)
        return true;
    return ctx->is_member && project_id && strcmp(ctx->project_id, project_id) == 0;
}

/* ---- dynamic SQL ------------------------------------------------------------------ */

void nb_srv_sql_init(struct nb_srv_sql *q)
{
    memset(q, 0, sizeof(*q));
    q->cap = 512;
    q->text = malloc(q->cap);
    q->text[0] = '\0';
}

void nb_srv_sql_free(struct nb_srv_sql *q)
{
    free(q->text);
    for (int i = 0; i < q->nargs; i++)
        free(q->args[i]);
    memset(q, 0, sizeof(*q));
}

void nb_srv_sql_add(struct nb_srv_sql *q, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        abort();
    va_end(ap);
    size_t n = strlen(s);
    if (q->len + n + 1 > q->cap) {
        while (q->len + n + 1 > q->cap)
            q->cap *= 2;
        q->text = realloc(q->text, q->cap);
    }
    memcpy(q->text + q->len, s, n + 1);
    q->len += n;
    free(s);
}

void nb_srv_sql_arg(struct nb_srv_sql *q, const char *value)
{
    if (q->nargs == NB_SRV_SQL_MAX_ARGS) {
        q->overflow = true;
        return;
    }
    nb_srv_sql_add(q, "?");
    q->args[q->nargs++] = value ? strdup(value) : NULL;
}

int nb_srv_sql_id_list(struct nb_srv_sql *q, json_t *ids)
{
    int n = 0;
    size_t i;
    json_t *v;
    nb_srv_sql_add(q, "(");
    json_array_foreach (ids, i, v) {
        const char *s = json_string_value(v);
        if (!s || !*s)
            continue;
        bool ok = true;
        for (const char *p = s; *p && ok; p++)
            ok = isalnum((unsigned char)*p) || *p == '-';
        if (!ok)
            continue;
        nb_srv_sql_add(q, "%s'%s'", n ? ", " : "", s);
        n++;
    }
    if (!n)
        nb_srv_sql_add(q, "NULL");
    nb_srv_sql_add(q, ")");
    return n;
}

/* The db interface is variadic; a built statement binds its strings
 * through a call with the maximum number of arguments, of which the type
 * string names only the first nargs (the others are never read). */
#define A8(b)                                                                                      \
    q->args[b], q->args[b + 1], q->args[b + 2], q->args[b + 3], q->args[b + 4], q->args[b + 5],    \
        q->args[b + 6], q->args[b + 7]
json_t *nb_srv_sql_rows(struct nb_ctx *ctx, struct nb_srv_sql *q)
{
    _Static_assert(NB_SRV_SQL_MAX_ARGS == 64, "update the argument list below");
    if (q->overflow) {
        nb_error(ctx, 400, NULL, "Too many values in the request's filters.");
        return NULL;
    }
    char types[NB_SRV_SQL_MAX_ARGS + 1];
    memset(types, 's', (size_t)q->nargs);
    types[q->nargs] = '\0';
    return nb_db_rows(nb_srv_db(), ctx, q->text, types, A8(0), A8(8), A8(16), A8(24), A8(32),
                      A8(40), A8(48), A8(56));
}
#undef A8

/* ---- instances ------------------------------------------------------------------ */

json_t *nb_srv_instance_get(struct nb_ctx *ctx, const char *uuid, bool with_deleted)
{
    json_t *row = NULL;
    if (uuid && nb_is_uuid(uuid)) {
        row = nb_db_row(nb_srv_db(), ctx,
                        with_deleted ? "SELECT * FROM instances WHERE uuid = ? "
                                       "ORDER BY deleted ASC, id DESC"
                                     : "SELECT * FROM instances WHERE uuid = ? AND deleted = 0",
                        "s", uuid);
        if (!row && ctx->err_status)
            return NULL;
    }
    if (row && !ctx->is_admin && strcmp(nb_json_str(row, "project_id"), ctx->project_id) != 0) {
        json_decref(row);
        row = NULL;
    }
    if (!row)
        nb_error(ctx, 404, NULL, "Instance %s could not be found.", uuid ? uuid : "");
    return row;
}

int nb_srv_check_lock(struct nb_ctx *ctx, const json_t *inst)
{
    if (nb_json_int(inst, "locked", 0) && !ctx->is_admin)
        return nb_error(ctx, 409, NULL, "Instance %s is locked", nb_json_str(inst, "uuid"));
    return 0;
}

int nb_srv_invalid_state(struct nb_ctx *ctx, const char *action, const char *uuid, const char *attr,
                         const char *state)
{
    return nb_error(ctx, 409, NULL, "Cannot '%s' instance %s while it is in %s %s", action, uuid,
                    attr, state ? state : "None");
}

int nb_srv_error_as(struct nb_ctx *ctx, int status, const char *msg)
{
    char keep[sizeof(ctx->err_msg)];
    nb_strlcpy(keep, msg ? msg : ctx->err_msg, sizeof(keep));
    ctx->err_status = 0;
    ctx->err_name[0] = '\0';
    return nb_error(ctx, status, NULL, "%s", keep);
}

/* ---- query strings ------------------------------------------------------------------ */

static void collect_query(void *opaque, const char *key, const char *value)
{
    json_t *q = opaque;
    json_t *list = json_object_get(q, key);
    if (!list) {
        list = json_array();
        json_object_set_new(q, key, list);
    }
    json_t *v = json_string(value ? value : "");
    json_array_append_new(list, v ? v : json_string(""));
}

json_t *nb_srv_query_all(struct nb_req *req)
{
    json_t *q = json_object();
    nb_req_query_each(req, collect_query, q);
    return q;
}

const char *nb_srv_query_last(json_t *q, const char *key)
{
    json_t *list = json_object_get(q, key);
    size_t n = json_array_size(list);
    return n ? json_string_value(json_array_get(list, n - 1)) : NULL;
}

int nb_srv_bool_from_string(const char *s, bool strict)
{
    int b = nb_bool_from_string(s);
    return b < 0 && !strict ? 0 : b;
}

int nb_srv_query_nonneg_int(struct nb_ctx *ctx, const char *name, const char *value, long long *out)
{
    const char *p = value;
    if (!p || !*p)
        return nb_error(ctx, 400, NULL,
                        "Invalid input for query parameters %s. Value: %s. '%s' is too short", name,
                        p ? p : "", p ? p : "");
    for (; *p; p++)
        if (*p < '0' || *p > '9')
            return nb_error(ctx, 400, NULL,
                            "Invalid input for query parameters %s. Value: %s. '%s' does not "
                            "match '^[0-9]*$'",
                            name, value, value);
    errno = 0;
    long long v = strtoll(value, NULL, 10);
    if (errno)
        return nb_error(ctx, 400, NULL, "%s must be an integer", name);
    *out = v;
    return 0;
}

/* ---- listing --------------------------------------------------------------------- */

/* Nova's _STATE_MAP: (vm_state, task_state or "default") -> status. */
static const struct {
    const char *vm, *task, *status;
} state_map[] = {
    {"active", "default", "ACTIVE"},
    {"active", "rebooting", "REBOOT"},
    {"active", "reboot_pending", "REBOOT"},
    {"active", "reboot_started", "REBOOT"},
    {"active", "rebooting_hard", "HARD_REBOOT"},
    {"active", "reboot_pending_hard", "HARD_REBOOT"},
    {"active", "reboot_started_hard", "HARD_REBOOT"},
    {"active", "updating_password", "PASSWORD"},
    {"active", "rebuilding", "REBUILD"},
    {"active", "rebuild_block_device_mapping", "REBUILD"},
    {"active", "rebuild_spawning", "REBUILD"},
    {"active", "migrating", "MIGRATING"},
    {"active", "resize_prep", "RESIZE"},
    {"active", "resize_migrating", "RESIZE"},
    {"active", "resize_migrated", "RESIZE"},
    {"active", "resize_finish", "RESIZE"},
    {"building", "default", "BUILD"},
    {"stopped", "default", "SHUTOFF"},
    {"stopped", "resize_prep", "RESIZE"},
    {"stopped", "resize_migrating", "RESIZE"},
    {"stopped", "resize_migrated", "RESIZE"},
    {"stopped", "resize_finish", "RESIZE"},
    {"stopped", "rebuilding", "REBUILD"},
    {"stopped", "rebuild_block_device_mapping", "REBUILD"},
    {"stopped", "rebuild_spawning", "REBUILD"},
    {"resized", "default", "VERIFY_RESIZE"},
    {"resized", "resize_reverting", "REVERT_RESIZE"},
    {"paused", "default", "PAUSED"},
    {"paused", "migrating", "MIGRATING"},
    {"suspended", "default", "SUSPENDED"},
    {"rescued", "default", "RESCUE"},
    {"error", "default", "ERROR"},
    {"error", "rebuilding", "REBUILD"},
    {"error", "rebuild_block_device_mapping", "REBUILD"},
    {"error", "rebuild_spawning", "REBUILD"},
    {"deleted", "default", "DELETED"},
    {"soft-delete", "default", "SOFT_DELETED"},
    {"shelved", "default", "SHELVED"},
    {"shelved_offloaded", "default", "SHELVED_OFFLOADED"},
};

/* Adds s to the array set if it is not there yet. */
static void set_add(json_t *set, const char *s)
{
    size_t i;
    json_t *v;
    json_array_foreach (set, i, v)
        if (!strcmp(json_string_value(v), s))
            return;
    json_array_append_new(set, json_string(s));
}

/* Nova's task_and_vm_state_from_status: fills vm_states and task_states
 * (which may contain "default") for a list of status names. */
static void states_from_statuses(json_t *statuses, json_t *vm_states, json_t *task_states)
{
    for (size_t k = 0; k < sizeof(state_map) / sizeof(state_map[0]); k++) {
        size_t i;
        json_t *v;
        json_array_foreach (statuses, i, v) {
            if (strcasecmp(json_string_value(v), state_map[k].status) == 0) {
                set_add(vm_states, state_map[k].vm);
                set_add(task_states, state_map[k].task);
            }
        }
    }
}

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

static bool in_list(const char *s, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(s, list[i]))
            return true;
    return false;
}
#define IN_LIST(s, l) in_list(s, l, sizeof(l) / sizeof(l[0]))

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
                bool ok = IN_LIST(s, sort_keys_valid) ||
                          (!strcmp(s, "locked") && nb_ctx_mv_ge(ctx, 2, 73)) ||
                          (!nb_ctx_mv_ge(ctx, 2, 75) && IN_LIST(s, sort_keys_ignored));
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
        bool ignored = IN_LIST(key, sort_keys_ignored) &&
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

/* Parses and checks the request; fills l. Returns 0/-1. */
static int parse_list_request(struct nb_ctx *ctx, struct nb_req *req, bool detail,
                              struct list_req *l)
{
    memset(l, 0, sizeof(*l));
    json_t *q = nb_srv_query_all(req);
    int rc = -1;
    if (validate_list_query(ctx, q) < 0)
        goto out;
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
        if (is_joined_table_param(key) || key[0] == '_') {
            nb_error(ctx, 400, NULL, "Invalid filter field: %s.", key);
            goto out;
        }
        json_object_set(l->opts, key, vals);
    }

    json_t *statuses = json_object_get(q, "status");
    json_object_del(l->opts, "status");
    if (statuses) {
        json_t *vms = json_array(), *tasks = json_array();
        states_from_statuses(statuses, vms, tasks);
        if (!json_array_size(vms) && !json_array_size(tasks)) {
            json_decref(vms);
            json_decref(tasks);
            if (nb_ctx_mv_ge(ctx, 2, 38)) {
                nb_error(ctx, 400, NULL, "Invalid status value");
                goto out;
            }
            l->empty = true;
        } else {
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
        }
    }

    const char *since = nb_srv_query_last(l->opts, "changes-since");
    const char *before = nb_srv_query_last(l->opts, "changes-before");
    if (since && before && nb_time_parse(before) < nb_time_parse(since)) {
        nb_error(ctx, 400, NULL,
                 "The value of changes-since must be less than or equal to changes-before.");
        goto out;
    }
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
        if (!ctx->is_admin) {
            nb_error(ctx, 403, NULL, "Only administrators may list deleted instances");
            goto out;
        }
        json_object_set_new(l->opts, "deleted", json_pack("[s]", "true"));
    }

    if (json_object_get(l->opts, "all_tenants")) {
        const char *at = nb_srv_query_last(l->opts, "all_tenants");
        int b = *at ? nb_srv_bool_from_string(at, true) : 1;
        if (b < 0) {
            nb_error(ctx, 400, NULL,
                     "Invalid input received: Unrecognized value '%s', acceptable values are: "
                     "'0', '1', 'f', 'false', 'n', 'no', 'off', 'on', 't', 'true', 'y', 'yes'",
                     at);
            goto out;
        }
        l->all_tenants = b == 1;
        json_object_del(l->opts, "all_tenants");
    }
    if (json_object_get(l->opts, "locked")) {
        int b = nb_srv_bool_from_string(nb_srv_query_last(l->opts, "locked"), true);
        if (b < 0) {
            nb_error(ctx, 400, NULL,
                     "Invalid input received: Unrecognized value '%s', acceptable values are: "
                     "'0', '1', 'f', 'false', 'n', 'no', 'off', 'on', 't', 'true', 'y', 'yes'",
                     nb_srv_query_last(l->opts, "locked"));
            goto out;
        }
        json_object_set_new(l->opts, "locked", json_pack("[s]", b ? "1" : "0"));
    }
    if (l->all_tenants) {
        const char *rule = detail ? "os_compute_api:servers:detail:get_all_tenants"
                                  : "os_compute_api:servers:index:get_all_tenants";
        if (nb_srv_policy(ctx, rule, ctx->is_admin) < 0)
            goto out;
    } else {
        json_object_del(l->opts, "tenant_id");
        json_object_set_new(l->opts, "project_id", json_pack("[s]", ctx->project_id));
    }

    long long max_limit = nb_conf_int("api", "max_limit", 1000);
    l->limit = max_limit;
    const char *lim = nb_srv_query_last(q, "limit");
    if (lim) {
        long long v;
        if (nb_srv_query_nonneg_int(ctx, "limit", lim, &v) < 0)
            goto out;
        if (v < l->limit)
            l->limit = v;
    }
    const char *marker = nb_srv_query_last(q, "marker");
    l->marker = marker ? strdup(marker) : NULL;
    if (parse_sort(ctx, q, l) < 0)
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

/* Builds the SELECT for the filters in l.opts; regex filters go to l.regs. */
static int build_list_sql(struct nb_ctx *ctx, struct list_req *l, struct nb_srv_sql *q)
{
    nb_srv_sql_add(q, "SELECT " LIST_COLUMNS " FROM instances WHERE 1 = 1");
    const char *key;
    json_t *vals;
    json_object_foreach (l->opts, key, vals) {
        const struct filt *f = find_filter(key);
        const char *last = json_string_value(json_array_get(vals, json_array_size(vals) - 1));
        if (!f || !last)
            continue;
        if (f->kind == F_EXACT) {
            if (json_array_size(vals) > 1 && strcmp(key, "vm_state") && strcmp(key, "task_state")) {
                json_t *one = json_pack("[s]", last);
                sql_in(q, f->column, one);
                json_decref(one);
            } else {
                sql_in(q, f->column, vals);
            }
        } else if (f->kind == F_REGEX) {
            if (l->nregs == 32)
                return nb_error(ctx, 400, NULL, "Too many filters.");
            if (regcomp(&l->regs[l->nregs], last, REG_EXTENDED | REG_NOSUB) != 0)
                return nb_error(ctx, 400, NULL, "Invalid filter field: %s.", key);
            l->reg_cols[l->nregs++] = f->column;
        } else if (!strcmp(key, "flavor")) {
            json_t *fl =
                nb_db_row(nb_srv_db(), ctx, "SELECT id FROM flavors WHERE flavorid = ?", "s", last);
            if (!fl && ctx->err_status)
                return -1;
            if (!fl) {
                l->empty = true;
            } else {
                nb_srv_sql_add(q, " AND instance_type_id = %lld", nb_json_int(fl, "id", 0));
                json_decref(fl);
            }
        } else if (!strcmp(key, "locked")) {
            nb_srv_sql_add(q, " AND locked = %d", !strcmp(last, "1"));
        } else if (!strcmp(key, "changes-since") || !strcmp(key, "changes-before")) {
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
        } else if (!strcmp(key, "deleted")) {
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
        } else if (!strcmp(key, "ip") || !strcmp(key, "ip6")) {
            /* both in one pass, as Nova's _ip_filter (ip6 is done with ip) */
            const char *ip = nb_srv_query_last(l->opts, "ip");
            if (!strcmp(key, "ip6") && ip)
                continue;
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
        } else if (!strncmp(key, "tags", 4) || !strncmp(key, "not-tags", 8)) {
            json_t *tags = split_commas(last);
            if (json_array_size(tags)) {
                bool neg = key[0] == 'n';
                bool any = strstr(key, "-any") != NULL;
                nb_srv_sql_add(q, neg ? " AND NOT " : " AND ");
                sql_tag_set(q, tags, !any);
            }
            json_decref(tags);
        }
    }
    nb_srv_sql_add(q, " ORDER BY ");
    size_t i;
    json_t *v;
    json_array_foreach (l->sort_keys, i, v) {
        /* keys were checked against the lists of column names above */
        const char *dir = json_string_value(json_array_get(l->sort_dirs, i));
        nb_srv_sql_add(q, "%s%s %s", i ? ", " : "", json_string_value(v),
                       !strcmp(dir, "asc") ? "ASC" : "DESC");
    }
    if (!l->nregs && !l->marker)
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

/* The page: rows filtered by the in-memory filters, after the marker, at
 * most limit. New array or NULL. */
static json_t *select_page(struct nb_ctx *ctx, struct list_req *l, json_t *rows)
{
    json_t *marker_row = NULL;
    if (l->marker) {
        marker_row =
            nb_db_row(nb_srv_db(), ctx, "SELECT * FROM instances WHERE uuid = ?", "s", l->marker);
        if (!marker_row && ctx->err_status)
            return NULL;
        if (marker_row && !ctx->is_admin &&
            strcmp(nb_json_str(marker_row, "project_id"), ctx->project_id) != 0) {
            json_decref(marker_row);
            marker_row = NULL;
        }
        if (!marker_row) {
            nb_error(ctx, 400, NULL, "marker [%s] not found", l->marker);
            return NULL;
        }
    }
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
    json_decref(marker_row);
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
    json_t *rows = NULL, *page = NULL;
    int rc = -1;
    if (parse_list_request(ctx, req, detail, &l) < 0 || build_list_sql(ctx, &l, &q) < 0)
        goto out;
    if (l.empty || l.limit == 0) {
        rows = json_array();
    } else if (!(rows = nb_srv_sql_rows(ctx, &q))) {
        goto out;
    }
    if (!(page = select_page(ctx, &l, rows)))
        goto out;
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
        json_t *links = nb_srv_next_link(req, detail ? "servers/detail" : "servers",
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

/* ---- input validation as Nova's JSON schemas ---------------------------------- */

/* Python's repr of a JSON value, as jsonschema prints it in messages. */
char *nb_srv_py_repr(const json_t *v)
{
    if (json_is_string(v))
        return nb_strdup_printf("'%s'", json_string_value(v));
    if (json_is_true(v))
        return strdup("True");
    if (json_is_false(v))
        return strdup("False");
    if (!v || json_is_null(v))
        return strdup("None");
    return nb_json_dump(v);
}

/* Records Nova's schema error for field: "<repr> <why>". Returns -1. */
int nb_srv_bad(struct nb_ctx *ctx, const char *field, const json_t *value, const char *why)
{
    char *r = nb_srv_py_repr(value);
    char *msg = nb_strdup_printf("%s %s", r, why);
    nb_compute_bad_field(ctx, field, value, msg);
    free(r);
    free(msg);
    return -1;
}

/* Decodes one UTF-8 code point at *p (advancing it); -1 when invalid. */
static long utf8_next(const unsigned char **p)
{
    const unsigned char *s = *p;
    long c;
    int n;
    if (s[0] < 0x80) {
        c = s[0];
        n = 1;
    } else if ((s[0] & 0xe0) == 0xc0) {
        c = s[0] & 0x1f;
        n = 2;
    } else if ((s[0] & 0xf0) == 0xe0) {
        c = s[0] & 0x0f;
        n = 3;
    } else if ((s[0] & 0xf8) == 0xf0) {
        c = s[0] & 0x07;
        n = 4;
    } else {
        *p = s + 1;
        return -1;
    }
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) {
            *p = s + i;
            return -1;
        }
        c = (c << 6) | (s[i] & 0x3f);
    }
    *p = s + n;
    return c;
}

/* Unicode categories Nova's name regex refuses: C* (controls, format,
 * private use, surrogates) and Zl/Zp; and the Zs spaces. An approximation
 * by ranges, enough for names typed by people and tools. */
static bool is_control_or_format(long c)
{
    return c < 0x20 || (c >= 0x7f && c <= 0x9f) || c == 0xad || (c >= 0x200b && c <= 0x200f) ||
           c == 0x2028 || c == 0x2029 || (c >= 0x202a && c <= 0x202e) ||
           (c >= 0x2060 && c <= 0x206f) || c == 0xfeff || (c >= 0xd800 && c <= 0xf8ff) ||
           (c >= 0xfff9 && c <= 0xfffb) || c > 0xffff;
}

static bool is_space_sep(long c)
{
    return c == 0x20 || c == 0xa0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x202f ||
           c == 0x205f || c == 0x3000;
}

/* Checks Nova's "name" format: printable, not starting or ending with
 * whitespace. */
static bool name_format_ok(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    long first = -2, last = -2;
    while (*p) {
        long c = utf8_next(&p);
        if (c < 0 || is_control_or_format(c))
            return false;
        if (first == -2)
            first = c;
        last = c;
    }
    if (first == -2)
        return true;
    return !is_space_sep(first) && !is_space_sep(last);
}

static bool printable_ok(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        long c = utf8_next(&p);
        if (c < 0 || is_control_or_format(c))
            return false;
    }
    return true;
}

static size_t utf8_len(const char *s)
{
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if ((*p & 0xc0) != 0x80)
            n++;
    return n;
}

int nb_srv_check_string(struct nb_ctx *ctx, const char *field, const json_t *v, size_t min,
                        size_t max, bool nullable)
{
    if (nullable && json_is_null(v))
        return 0;
    if (!json_is_string(v))
        return nb_srv_bad(ctx, field, v,
                          nullable ? "is not of type 'string', 'null'" : "is not of type 'string'");
    size_t n = utf8_len(json_string_value(v));
    if (n < min)
        return nb_srv_bad(ctx, field, v, "is too short");
    if (n > max)
        return nb_srv_bad(ctx, field, v, "is too long");
    return 0;
}

int nb_srv_check_name(struct nb_ctx *ctx, const char *field, const json_t *v)
{
    if (nb_srv_check_string(ctx, field, v, 1, 255, false) < 0)
        return -1;
    if (!name_format_ok(json_string_value(v)))
        return nb_error(ctx, 400, NULL,
                        "An invalid 'name' value was provided. The name must be: printable "
                        "characters. Can not start or end with whitespace.");
    return 0;
}

int nb_srv_check_description(struct nb_ctx *ctx, const char *field, const json_t *v)
{
    if (nb_srv_check_string(ctx, field, v, 0, 255, true) < 0)
        return -1;
    if (json_is_string(v) && !printable_ok(json_string_value(v)))
        return nb_srv_bad(ctx, field, v, "does not match the printable characters pattern");
    return 0;
}

int nb_srv_check_bool(struct nb_ctx *ctx, const char *field, const json_t *v)
{
    static const char *const ok[] = {"True", "TRUE", "true", "1",     "ON",    "On",    "on",
                                     "YES",  "Yes",  "yes",  "False", "FALSE", "false", "0",
                                     "OFF",  "Off",  "off",  "NO",    "No",    "no"};
    if (json_is_boolean(v))
        return 0;
    if (json_is_string(v) && IN_LIST(json_string_value(v), ok))
        return 0;
    if (!json_is_string(v))
        return nb_srv_bad(ctx, field, v, "is not of type 'boolean', 'string'");
    return nb_srv_bad(ctx, field, v,
                      "is not one of [True, 'True', 'TRUE', 'true', '1', 'ON', 'On', 'on', 'YES', "
                      "'Yes', 'yes', False, 'False', 'FALSE', 'false', '0', 'OFF', 'Off', 'off', "
                      "'NO', 'No', 'no']");
}

bool nb_srv_json_truthy(const json_t *v)
{
    if (json_is_boolean(v))
        return json_is_true(v);
    if (json_is_string(v))
        return nb_srv_bool_from_string(json_string_value(v), false) == 1;
    return false;
}

int nb_srv_check_uuid(struct nb_ctx *ctx, const char *field, const json_t *v)
{
    if (!json_is_string(v))
        return nb_srv_bad(ctx, field, v, "is not of type 'string'");
    if (!nb_is_uuid(json_string_value(v)))
        return nb_srv_bad(ctx, field, v, "is not a 'uuid'");
    return 0;
}

/* positive_integer / non_negative_integer: an integer or a digit string,
 * >= min. Sets *out. */
int nb_srv_check_int(struct nb_ctx *ctx, const char *field, const json_t *v, long long min,
                     long long *out)
{
    long long n;
    if (json_is_integer(v)) {
        n = json_integer_value(v);
    } else if (json_is_string(v)) {
        const char *s = json_string_value(v);
        if (!*s)
            return nb_srv_bad(ctx, field, v, "is too short");
        for (const char *p = s; *p; p++)
            if (*p < '0' || *p > '9')
                return nb_srv_bad(ctx, field, v, "does not match '^[0-9]*$'");
        n = strtoll(s, NULL, 10);
    } else {
        return nb_srv_bad(ctx, field, v, "is not of type 'integer', 'string'");
    }
    if (n < min) {
        char why[64];
        snprintf(why, sizeof(why), "is less than the minimum of %lld", min);
        return nb_srv_bad(ctx, field, v, why);
    }
    if (out)
        *out = n;
    return 0;
}

/* Nova's parameter_types.metadata: keys ^[a-zA-Z0-9-_:. ]{1,255}$, string
 * values of at most 255 characters. */
int nb_srv_check_metadata(struct nb_ctx *ctx, const char *field, const json_t *v)
{
    if (!json_is_object(v))
        return nb_srv_bad(ctx, field, v, "is not of type 'object'");
    const char *k;
    json_t *val;
    json_object_foreach ((json_t *)v, k, val) {
        size_t n = strlen(k);
        bool ok = n >= 1 && n <= 255;
        for (const char *p = k; *p && ok; p++)
            ok = isalnum((unsigned char)*p) || strchr("-_:. ", *p);
        if (!ok)
            return nb_error(ctx, 400, NULL,
                            "Invalid input for field/attribute %s. Value: %s. Additional "
                            "properties are not allowed ('%s' was unexpected)",
                            field, "{...}", k);
        if (!json_is_string(val))
            return nb_srv_bad(ctx, k, val, "is not of type 'string'");
        if (utf8_len(json_string_value(val)) > 255)
            return nb_srv_bad(ctx, k, val, "is too long");
    }
    return 0;
}

/* Refuses keys of obj not in allowed (NULL-terminated). */
int nb_srv_check_keys(struct nb_ctx *ctx, const char *field, const json_t *obj,
                      const char *const *allowed)
{
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)obj, k, v) {
        bool ok = false;
        for (const char *const *a = allowed; *a && !ok; a++)
            ok = !strcmp(*a, k);
        if (!ok) {
            if (field)
                return nb_error(ctx, 400, NULL,
                                "Invalid input for field/attribute %s. Value: %s. Additional "
                                "properties are not allowed ('%s' was unexpected)",
                                field, "{...}", k);
            return nb_error(ctx, 400, NULL,
                            "Additional properties are not allowed ('%s' was unexpected)", k);
        }
    }
    return 0;
}

/* The body's one object under key ({"server": {...}}), or NULL after 400. */
json_t *nb_srv_body_object(struct nb_ctx *ctx, struct nb_req *req, const char *key,
                           const char *const *top_allowed)
{
    json_t *body = nb_req_json_object(ctx, req);
    if (!body)
        return NULL;
    json_t *obj = json_object_get(body, key);
    if (!obj) {
        nb_error(ctx, 400, NULL, "'%s' is a required property", key);
        return NULL;
    }
    if (top_allowed && nb_srv_check_keys(ctx, NULL, body, top_allowed) < 0)
        return NULL;
    if (!json_is_object(obj)) {
        nb_srv_bad(ctx, key, obj, "is not of type 'object'");
        return NULL;
    }
    return obj;
}

static bool ip_ok(const char *s, int family)
{
    unsigned char buf[16];
    return s && inet_pton(family, s, buf) == 1;
}

int nb_srv_check_ip(struct nb_ctx *ctx, const char *field, const json_t *v, int family)
{
    if (!json_is_string(v))
        return nb_srv_bad(ctx, field, v, "is not of type 'string'");
    if (family && !ip_ok(json_string_value(v), family))
        return nb_srv_bad(ctx, field, v, family == AF_INET ? "is not a 'ipv4'" : "is not a 'ipv6'");
    if (!family && !ip_ok(json_string_value(v), AF_INET) && !ip_ok(json_string_value(v), AF_INET6))
        return nb_srv_bad(ctx, field, v, "is not valid under any of the given schemas");
    /* Nova stores addresses in canonical form ("::babe:dc0c:1602") */
    unsigned char bin[sizeof(struct in6_addr)];
    char canon[INET6_ADDRSTRLEN];
    int fam = family ? family : (strchr(json_string_value(v), ':') ? AF_INET6 : AF_INET);
    if (inet_pton(fam, json_string_value(v), bin) == 1 && inet_ntop(fam, bin, canon, sizeof(canon)))
        json_string_set((json_t *)v, canon);
    return 0;
}

/* Hostname at 2.90: 2-63 of [a-zA-Z0-9-], not starting/ending with '-'. */
static int check_hostname(struct nb_ctx *ctx, const json_t *v)
{
    if (nb_srv_check_string(ctx, "hostname", v, 2, 63, false) < 0)
        return -1;
    const char *s = json_string_value(v);
    size_t n = strlen(s);
    bool ok = isalnum((unsigned char)s[0]) && isalnum((unsigned char)s[n - 1]);
    for (const char *p = s; *p && ok; p++)
        ok = isalnum((unsigned char)*p) || *p == '-';
    if (!ok)
        return nb_srv_bad(ctx, "hostname", v,
                          "does not match '^[a-zA-Z0-9]+[a-zA-Z0-9-]*[a-zA-Z0-9]+$'");
    return 0;
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

/* Strips leading and trailing whitespace (Nova's normalize_name). */
static char *normalize_name(const char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    return strndup(s, n);
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
    if (nb_srv_check_keys(ctx, "server", server, allowed) < 0)
        return -1;
    json_t *v;
    if ((v = json_object_get(server, "name")) && nb_srv_check_name(ctx, "name", v) < 0)
        return -1;
    if ((v = json_object_get(server, "description")) &&
        nb_srv_check_description(ctx, "description", v) < 0)
        return -1;
    if ((v = json_object_get(server, "hostname")) && check_hostname(ctx, v) < 0)
        return -1;
    if ((v = json_object_get(server, "accessIPv4")) &&
        nb_srv_check_ip(ctx, "accessIPv4", v, AF_INET) < 0)
        return -1;
    if ((v = json_object_get(server, "accessIPv6")) &&
        nb_srv_check_ip(ctx, "accessIPv6", v, AF_INET6) < 0)
        return -1;
    if ((v = json_object_get(server, "OS-DCF:diskConfig"))) {
        const char *s = json_string_value(v);
        if (!s || (strcmp(s, "AUTO") && strcmp(s, "MANUAL")))
            return nb_srv_bad(ctx, "OS-DCF:diskConfig", v, "is not one of ['AUTO', 'MANUAL']");
    }
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
    json_t *v;
    char now[32];
    nb_now_iso_us(now);
    name = (v = json_object_get(server, "name")) ? normalize_name(json_string_value(v)) : NULL;
    json_t *desc = json_object_get(server, "description");
    json_t *hostname = json_object_get(server, "hostname");
    json_t *ip4 = json_object_get(server, "accessIPv4"),
           *ip6 = json_object_get(server, "accessIPv6");
    json_t *dc = json_object_get(server, "OS-DCF:diskConfig");
    /* each column changes only when its field is present */
    if (nb_db_exec(nb_srv_db(), ctx,
                   "UPDATE instances SET display_name = CASE WHEN ? THEN ? ELSE display_name END, "
                   "display_description = CASE WHEN ? THEN ? ELSE display_description END, "
                   "hostname = CASE WHEN ? THEN ? ELSE hostname END, "
                   "access_ip_v4 = CASE WHEN ? THEN ? ELSE access_ip_v4 END, "
                   "access_ip_v6 = CASE WHEN ? THEN ? ELSE access_ip_v6 END, "
                   "auto_disk_config = CASE WHEN ? THEN ? ELSE auto_disk_config END, "
                   "updated_at = ? WHERE uuid = ? AND deleted = 0",
                   "bsbsbsbsbsbiss", name != NULL, name, desc != NULL, json_string_value(desc),
                   hostname != NULL, json_string_value(hostname), ip4 != NULL,
                   json_string_value(ip4), ip6 != NULL, json_string_value(ip6), dc != NULL,
                   (long long)(dc && !strcmp(json_string_value(dc), "AUTO")), now, id) < 0)
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

/* Soft-deletes an instance row and what hangs off it, as Nova's local
 * delete then instance.destroy() do, in the caller's transaction. With
 * only_unscheduled, only while the instance has no host (the conductor may
 * be placing it). Returns the number of instances deleted (0/1) or -1. */
int nb_srv_destroy_instance(struct nb_ctx *ctx, const char *uuid, bool only_unscheduled)
{
    struct nb_db *db = nb_srv_db();
    char now[32];
    nb_now_iso_us(now);
    int n = nb_db_exec(db, ctx,
                       only_unscheduled
                           ? "UPDATE instances SET vm_state = 'deleted', task_state = NULL, "
                             "progress = 0, terminated_at = ?, deleted_at = ?, updated_at = ?, "
                             "deleted = id WHERE uuid = ? AND deleted = 0 AND "
                             "(host IS NULL OR host = '')"
                           : "UPDATE instances SET vm_state = 'deleted', task_state = NULL, "
                             "progress = 0, terminated_at = ?, deleted_at = ?, updated_at = ?, "
                             "deleted = id WHERE uuid = ? AND deleted = 0",
                       "ssss", now, now, now, uuid);
    if (n <= 0)
        return n;
    if (nb_db_exec(db, ctx,
                   "UPDATE instance_metadata SET deleted = id WHERE instance_uuid = ? AND "
                   "deleted = 0",
                   "s", uuid) < 0 ||
        nb_db_exec(db, ctx,
                   "UPDATE instance_system_metadata SET deleted = id WHERE instance_uuid = ? AND "
                   "deleted = 0",
                   "s", uuid) < 0 ||
        nb_db_exec(db, ctx,
                   "UPDATE block_device_mapping SET deleted = id, deleted_at = ? WHERE "
                   "instance_uuid = ? AND deleted = 0",
                   "ss", now, uuid) < 0 ||
        nb_db_exec(db, ctx,
                   "UPDATE instance_faults SET deleted = id WHERE instance_uuid = ? AND "
                   "deleted = 0",
                   "s", uuid) < 0 ||
        nb_db_exec(db, ctx,
                   "UPDATE instance_info_caches SET deleted = id, deleted_at = ? WHERE "
                   "instance_uuid = ? AND deleted = 0",
                   "ss", now, uuid) < 0 ||
        nb_db_exec(db, ctx, "DELETE FROM tags WHERE resource_id = ?", "s", uuid) < 0 ||
        nb_db_exec(db, ctx, "DELETE FROM instance_group_member WHERE instance_uuid = ?", "s",
                   uuid) < 0)
        return -1;
    return 1;
}

/* Is the compute service of host up (Nova's servicegroup check)? A host
 * without a service row counts as down, as in Nova. */
static bool compute_host_up(struct nb_ctx *ctx, const char *host)
{
    json_t *svc = nb_db_row(nb_srv_db(), ctx,
                            "SELECT forced_down, last_seen_up, updated_at, created_at FROM "
                            "services WHERE host = ? AND binary = 'nova-compute' AND deleted = 0",
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
    int n = nb_srv_destroy_instance(ctx, uuid, only_unscheduled);
    if (n < 0 || nb_db_commit(db, ctx) < 0) {
        if (n < 0)
            nb_db_rollback(db);
        return -1;
    }
    if (n > 0) {
        nb_srv_release_volumes(ctx, volumes);
        struct nb_ctx sys;
        nb_ctx_init_system(&sys, ctx->request_id);
        if (nb_placement_delete_allocations(&sys, uuid) < 0)
            NB_WARN("nubo.compute.api", ctx, uuid, "could not release allocations: %s",
                    sys.err_msg);
        nb_ctx_init_system(&sys, ctx->request_id); /* a fresh error slot */
        if (nb_network_deallocate_for_instance(&sys, uuid) < 0)
            NB_WARN("nubo.compute.api", ctx, uuid, "could not release ports: %s", sys.err_msg);
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
        if (local_delete(ctx, uuid, false) < 0)
            goto out;
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
    char now[32];
    nb_now_iso_us(now);
    if (nb_db_begin(db, ctx) < 0)
        goto out;
    if (nb_db_exec(db, ctx,
                   "UPDATE instances SET task_state = 'deleting', progress = 0, updated_at = ? "
                   "WHERE uuid = ? AND deleted = 0",
                   "ss", now, uuid) < 0 ||
        nb_action_start(db, ctx, uuid, "delete") < 0) {
        nb_db_rollback(db);
        goto out;
    }
    if (nb_db_commit(db, ctx) < 0)
        goto out;
    if (nb_bus_cast(ctx, "conductor", "delete_instance", json_pack("{s:s}", "uuid", uuid)) < 0) {
        nb_error(ctx, 503, NULL, "The compute conductor is not available.");
        goto out;
    }
    rc = nb_resp_empty(resp, 204);
out:
    json_decref(inst);
    return rc;
}

/* ---- create: request checks --------------------------------------------------------- */

/* base64 as oslo's decode_as_bytes accepts it (characters outside the
 * alphabet are skipped, the padding must be right). */
static bool base64_ok(const char *s)
{
    size_t n = 0, pad = 0;
    for (const char *p = s; *p; p++) {
        if (isalnum((unsigned char)*p) || *p == '+' || *p == '/') {
            if (pad) /* data after padding: Python stops at the padding */
                break;
            n++;
        } else if (*p == '=') {
            pad++;
        }
    }
    switch (n % 4) {
    case 0: return true;
    case 2: return pad >= 2;
    case 3: return pad >= 1;
    default: return false;
    }
}

static int check_base64(struct nb_ctx *ctx, const char *field, const json_t *v, size_t max)
{
    if (!json_is_string(v))
        return nb_srv_bad(ctx, field, v, "is not of type 'string'");
    if (max && json_string_length(v) > max)
        return nb_srv_bad(ctx, field, v, "is too long");
    if (!base64_ok(json_string_value(v)))
        return nb_srv_bad(ctx, field, v, "is not a 'base64'");
    return 0;
}

static int check_tag(struct nb_ctx *ctx, const json_t *v)
{
    if (nb_srv_check_string(ctx, "tags", v, 1, 60, false) < 0)
        return -1;
    const char *s = json_string_value(v);
    if (strchr(s, '/') || strchr(s, ','))
        return nb_srv_bad(ctx, "tags", v, "does not match '^[^,/]*$'");
    return 0;
}

static int check_string_array(struct nb_ctx *ctx, const char *field, const json_t *v,
                              int (*item)(struct nb_ctx *, const json_t *), size_t max_items)
{
    if (!json_is_array(v))
        return nb_srv_bad(ctx, field, v, "is not of type 'array'");
    if (max_items && json_array_size(v) > max_items)
        return nb_srv_bad(ctx, field, v, "is too long");
    size_t i;
    json_t *x;
    json_array_foreach ((json_t *)v, i, x)
        if (item(ctx, x) < 0)
            return -1;
    return 0;
}

static int check_cert_id(struct nb_ctx *ctx, const json_t *v)
{
    return nb_srv_check_string(ctx, "trusted_image_certificates", v, 1, 255, false);
}

static int validate_networks(struct nb_ctx *ctx, const json_t *nets)
{
    bool v237 = nb_ctx_mv_ge(ctx, 2, 37);
    if (v237 && json_is_string(nets)) {
        const char *s = json_string_value(nets);
        if (strcmp(s, "none") && strcmp(s, "auto"))
            return nb_srv_bad(ctx, "networks", nets, "is not valid under any of the given schemas");
        return 0;
    }
    if (!json_is_array(nets))
        return nb_srv_bad(ctx, "networks", nets,
                          v237 ? "is not valid under any of the given schemas"
                               : "is not of type 'array'");
    bool tag = (ctx->mv_minor >= 32 && ctx->mv_minor <= 36) || nb_ctx_mv_ge(ctx, 2, 42);
    const char *allowed[] = {"fixed_ip", "port", "uuid", tag ? "tag" : NULL, NULL};
    size_t i;
    json_t *n;
    json_array_foreach ((json_t *)nets, i, n) {
        if (!json_is_object(n))
            return nb_srv_bad(ctx, "networks", n, "is not of type 'object'");
        if (nb_srv_check_keys(ctx, "networks", n, allowed) < 0)
            return -1;
        json_t *v;
        if ((v = json_object_get(n, "fixed_ip")) && nb_srv_check_ip(ctx, "fixed_ip", v, 0) < 0)
            return -1;
        if ((v = json_object_get(n, "port")) && !json_is_null(v) &&
            nb_srv_check_uuid(ctx, "port", v) < 0)
            return -1;
        if ((v = json_object_get(n, "uuid"))) {
            if (v237 ? nb_srv_check_uuid(ctx, "uuid", v) < 0 : !json_is_string(v))
                return v237 ? -1 : nb_srv_bad(ctx, "uuid", v, "is not of type 'string'");
        }
        if ((v = json_object_get(n, "tag")) && check_tag(ctx, v) < 0)
            return -1;
    }
    return 0;
}

static int validate_bdm(struct nb_ctx *ctx, const json_t *b, bool v2)
{
    if (!json_is_object(b))
        return nb_srv_bad(ctx, v2 ? "block_device_mapping_v2" : "block_device_mapping", b,
                          "is not of type 'object'");
    bool tag = v2 && (ctx->mv_minor == 32 || nb_ctx_mv_ge(ctx, 2, 42));
    const char *allowed[20] = {"virtual_name", "volume_id",      "snapshot_id",
                               "volume_size",  "device_name",    "delete_on_termination",
                               "no_device",    "connection_info"};
    int n = 8;
    if (v2) {
        static const char *const more[] = {"source_type",      "uuid",         "image_id",
                                           "destination_type", "guest_format", "device_type",
                                           "disk_bus",         "boot_index"};
        for (size_t i = 0; i < 8; i++)
            allowed[n++] = more[i];
        if (tag)
            allowed[n++] = "tag";
        if (nb_ctx_mv_ge(ctx, 2, 67))
            allowed[n++] = "volume_type";
    }
    allowed[n] = NULL;
    if (nb_srv_check_keys(ctx, v2 ? "block_device_mapping_v2" : "block_device_mapping", b,
                          allowed) < 0)
        return -1;
    json_t *v;
    if ((v = json_object_get(b, "volume_id")) && nb_srv_check_uuid(ctx, "volume_id", v) < 0)
        return -1;
    if ((v = json_object_get(b, "snapshot_id")) && nb_srv_check_uuid(ctx, "snapshot_id", v) < 0)
        return -1;
    if ((v = json_object_get(b, "image_id")) && nb_srv_check_uuid(ctx, "image_id", v) < 0)
        return -1;
    if ((v = json_object_get(b, "volume_size")) &&
        nb_srv_check_int(ctx, "volume_size", v, 1, NULL) < 0)
        return -1;
    if ((v = json_object_get(b, "delete_on_termination")) &&
        nb_srv_check_bool(ctx, "delete_on_termination", v) < 0)
        return -1;
    if ((v = json_object_get(b, "device_name"))) {
        if (nb_srv_check_string(ctx, "device_name", v, 1, 255, false) < 0)
            return -1;
        for (const char *p = json_string_value(v); *p; p++)
            if (!isalnum((unsigned char)*p) && !strchr("._-/", *p))
                return nb_srv_bad(ctx, "device_name", v, "does not match '^[a-zA-Z0-9._-r/]*$'");
    }
    static const char *const strs[] = {"virtual_name", "guest_format", "device_type", "disk_bus"};
    for (size_t i = 0; i < 4; i++)
        if ((v = json_object_get(b, strs[i])) &&
            nb_srv_check_string(ctx, strs[i], v, 0, 255, false) < 0)
            return -1;
    if ((v = json_object_get(b, "source_type"))) {
        const char *s = json_string_value(v);
        if (!s || (strcmp(s, "volume") && strcmp(s, "image") && strcmp(s, "snapshot") &&
                   strcmp(s, "blank")))
            return nb_srv_bad(ctx, "source_type", v,
                              "is not one of ['volume', 'image', 'snapshot', 'blank']");
    }
    if ((v = json_object_get(b, "destination_type"))) {
        const char *s = json_string_value(v);
        if (!s || (strcmp(s, "local") && strcmp(s, "volume")))
            return nb_srv_bad(ctx, "destination_type", v, "is not one of ['local', 'volume']");
    }
    if ((v = json_object_get(b, "uuid"))) {
        if (nb_srv_check_string(ctx, "uuid", v, 1, 255, false) < 0)
            return -1;
        for (const char *p = json_string_value(v); *p; p++)
            if (!isalnum((unsigned char)*p) && !strchr("._-", *p))
                return nb_srv_bad(ctx, "uuid", v, "does not match '^[a-zA-Z0-9._-]*$'");
    }
    if ((v = json_object_get(b, "boot_index")) && !json_is_null(v)) {
        if (json_is_string(v)) {
            const char *s = json_string_value(v);
            const char *p = *s == '-' ? s + 1 : s;
            bool ok = *p != '\0';
            for (; *p && ok; p++)
                ok = isdigit((unsigned char)*p);
            if (!ok)
                return nb_srv_bad(ctx, "boot_index", v, "does not match '^-?[0-9]+$'");
        } else if (!json_is_integer(v)) {
            return nb_srv_bad(ctx, "boot_index", v, "is not of type 'integer', 'string', 'null'");
        }
    }
    if ((v = json_object_get(b, "tag")) && check_tag(ctx, v) < 0)
        return -1;
    if ((v = json_object_get(b, "volume_type")) &&
        nb_srv_check_string(ctx, "volume_type", v, 0, 255, true) < 0)
        return -1;
    if ((v = json_object_get(b, "connection_info")) &&
        nb_srv_check_string(ctx, "connection_info", v, 0, 16777215, false) < 0)
        return -1;
    return 0;
}

static int validate_hints(struct nb_ctx *ctx, const char *field, const json_t *h)
{
    if (!json_is_object(h))
        return nb_srv_bad(ctx, field, h, "is not of type 'object'");
    json_t *v;
    if ((v = json_object_get(h, "group")) && nb_srv_check_uuid(ctx, "group", v) < 0)
        return -1;
    static const char *const lists[] = {"different_host", "same_host"};
    for (size_t k = 0; k < 2; k++) {
        if (!(v = json_object_get(h, lists[k])))
            continue;
        if (json_is_string(v)) {
            if (nb_srv_check_uuid(ctx, lists[k], v) < 0)
                return -1;
        } else if (json_is_array(v)) {
            size_t i;
            json_t *x;
            json_array_foreach (v, i, x)
                if (nb_srv_check_uuid(ctx, lists[k], x) < 0)
                    return -1;
        } else {
            return nb_srv_bad(ctx, lists[k], v, "is not of type 'string', 'array'");
        }
    }
    if ((v = json_object_get(h, "query")) && !json_is_string(v) && !json_is_object(v))
        return nb_srv_bad(ctx, "query", v, "is not of type 'string', 'object'");
    if ((v = json_object_get(h, "target_cell")) && nb_srv_check_name(ctx, "target_cell", v) < 0)
        return -1;
    if ((v = json_object_get(h, "build_near_host_ip")) &&
        nb_srv_check_ip(ctx, "build_near_host_ip", v, 0) < 0)
        return -1;
    if ((v = json_object_get(h, "cidr"))) {
        const char *s = json_string_value(v);
        bool ok = s && s[0] == '/' && s[1];
        for (const char *p = s ? s + 1 : ""; *p && ok; p++)
            ok = isxdigit((unsigned char)*p) || *p == '.' || *p == ':';
        if (!ok)
            return nb_srv_bad(ctx, "cidr", v, "does not match '^/[0-9a-f.:]+$'");
    }
    return 0;
}

/* Nova's create schema for the negotiated microversion. */
static int validate_create(struct nb_ctx *ctx, json_t *body, json_t *server)
{
    static const char *const top[] = {"server", "os:scheduler_hints", "OS-SCH-HNT:scheduler_hints",
                                      NULL};
    if (nb_srv_check_keys(ctx, NULL, body, top) < 0)
        return -1;
    const char *allowed[40] = {"name",
                               "imageRef",
                               "flavorRef",
                               "adminPass",
                               "metadata",
                               "networks",
                               "OS-DCF:diskConfig",
                               "accessIPv4",
                               "accessIPv6",
                               "availability_zone",
                               "block_device_mapping",
                               "block_device_mapping_v2",
                               "config_drive",
                               "key_name",
                               "min_count",
                               "max_count",
                               "return_reservation_id",
                               "security_groups",
                               "user_data"};
    int n = 19;
    if (!nb_ctx_mv_ge(ctx, 2, 57))
        allowed[n++] = "personality";
    if (nb_ctx_mv_ge(ctx, 2, 19))
        allowed[n++] = "description";
    if (nb_ctx_mv_ge(ctx, 2, 52))
        allowed[n++] = "tags";
    if (nb_ctx_mv_ge(ctx, 2, 63))
        allowed[n++] = "trusted_image_certificates";
    if (nb_ctx_mv_ge(ctx, 2, 74)) {
        allowed[n++] = "host";
        allowed[n++] = "hypervisor_hostname";
    }
    if (nb_ctx_mv_ge(ctx, 2, 90))
        allowed[n++] = "hostname";
    allowed[n] = NULL;
    static const char *const required[] = {"name", "flavorRef", "networks"};
    for (size_t i = 0; i < (nb_ctx_mv_ge(ctx, 2, 37) ? 3u : 2u); i++)
        if (!json_object_get(server, required[i]))
            return nb_error(ctx, 400, NULL,
                            "Invalid input for field/attribute server. Value: {...}. '%s' is a "
                            "required property",
                            required[i]);
    if (nb_srv_check_keys(ctx, "server", server, allowed) < 0)
        return -1;

    json_t *v;
    if (nb_srv_check_name(ctx, "name", json_object_get(server, "name")) < 0)
        return -1;
    if ((v = json_object_get(server, "imageRef"))) {
        if (!json_is_string(v) || (json_string_length(v) && !nb_is_uuid(json_string_value(v))))
            return nb_srv_bad(ctx, "imageRef", v, "is not valid under any of the given schemas");
    }
    v = json_object_get(server, "flavorRef");
    if (json_is_string(v) ? json_string_length(v) == 0 : !json_is_integer(v))
        return json_is_string(v)
                   ? nb_srv_bad(ctx, "flavorRef", v, "is too short")
                   : nb_srv_bad(ctx, "flavorRef", v, "is not of type 'string', 'integer'");
    if ((v = json_object_get(server, "adminPass")) && !json_is_string(v))
        return nb_srv_bad(ctx, "adminPass", v, "is not of type 'string'");
    if ((v = json_object_get(server, "metadata")) && nb_srv_check_metadata(ctx, "metadata", v) < 0)
        return -1;
    if ((v = json_object_get(server, "networks")) && validate_networks(ctx, v) < 0)
        return -1;
    if ((v = json_object_get(server, "OS-DCF:diskConfig"))) {
        const char *s = json_string_value(v);
        if (!s || (strcmp(s, "AUTO") && strcmp(s, "MANUAL")))
            return nb_srv_bad(ctx, "OS-DCF:diskConfig", v, "is not one of ['AUTO', 'MANUAL']");
    }
    if ((v = json_object_get(server, "accessIPv4")) &&
        nb_srv_check_ip(ctx, "accessIPv4", v, AF_INET) < 0)
        return -1;
    if ((v = json_object_get(server, "accessIPv6")) &&
        nb_srv_check_ip(ctx, "accessIPv6", v, AF_INET6) < 0)
        return -1;
    if ((v = json_object_get(server, "personality"))) {
        if (!json_is_array(v))
            return nb_srv_bad(ctx, "personality", v, "is not of type 'array'");
        static const char *const pk[] = {"path", "contents", NULL};
        size_t i;
        json_t *f;
        json_array_foreach (v, i, f) {
            if (!json_is_object(f))
                return nb_srv_bad(ctx, "personality", f, "is not of type 'object'");
            if (nb_srv_check_keys(ctx, "personality", f, pk) < 0)
                return -1;
            json_t *p = json_object_get(f, "path"), *c = json_object_get(f, "contents");
            if (p && !json_is_string(p))
                return nb_srv_bad(ctx, "path", p, "is not of type 'string'");
            if (c && check_base64(ctx, "contents", c, 0) < 0)
                return -1;
        }
    }
    if ((v = json_object_get(server, "availability_zone")) &&
        nb_srv_check_name(ctx, "availability_zone", v) < 0)
        return -1;
    static const char *const bdm_keys[] = {"block_device_mapping", "block_device_mapping_v2"};
    for (size_t k = 0; k < 2; k++) {
        if (!(v = json_object_get(server, bdm_keys[k])))
            continue;
        if (!json_is_array(v))
            return nb_srv_bad(ctx, bdm_keys[k], v, "is not of type 'array'");
        size_t i;
        json_t *b;
        json_array_foreach (v, i, b)
            if (validate_bdm(ctx, b, k == 1) < 0)
                return -1;
    }
    if ((v = json_object_get(server, "config_drive")) &&
        nb_srv_check_bool(ctx, "config_drive", v) < 0)
        return -1;
    if ((v = json_object_get(server, "key_name")) && nb_srv_check_name(ctx, "key_name", v) < 0)
        return -1;
    if ((v = json_object_get(server, "min_count")) &&
        nb_srv_check_int(ctx, "min_count", v, 1, NULL) < 0)
        return -1;
    if ((v = json_object_get(server, "max_count")) &&
        nb_srv_check_int(ctx, "max_count", v, 1, NULL) < 0)
        return -1;
    if ((v = json_object_get(server, "return_reservation_id")) &&
        nb_srv_check_bool(ctx, "return_reservation_id", v) < 0)
        return -1;
    if ((v = json_object_get(server, "security_groups"))) {
        if (!json_is_array(v))
            return nb_srv_bad(ctx, "security_groups", v, "is not of type 'array'");
        static const char *const sk[] = {"name", NULL};
        size_t i;
        json_t *g;
        json_array_foreach (v, i, g) {
            if (!json_is_object(g))
                return nb_srv_bad(ctx, "security_groups", g, "is not of type 'object'");
            if (nb_srv_check_keys(ctx, "security_groups", g, sk) < 0)
                return -1;
            json_t *nm = json_object_get(g, "name");
            if (nm && nb_srv_check_name(ctx, "name", nm) < 0)
                return -1;
        }
    }
    if ((v = json_object_get(server, "user_data")) && check_base64(ctx, "user_data", v, 65535) < 0)
        return -1;
    if ((v = json_object_get(server, "description")) &&
        nb_srv_check_description(ctx, "description", v) < 0)
        return -1;
    if ((v = json_object_get(server, "tags")) &&
        check_string_array(ctx, "tags", v, check_tag, 50) < 0)
        return -1;
    if ((v = json_object_get(server, "trusted_image_certificates")) && !json_is_null(v)) {
        if (check_string_array(ctx, "trusted_image_certificates", v, check_cert_id, 50) < 0)
            return -1;
        if (json_array_size(v) == 0)
            return nb_srv_bad(ctx, "trusted_image_certificates", v, "is too short");
        for (size_t i = 0; i < json_array_size(v); i++)
            for (size_t j = i + 1; j < json_array_size(v); j++)
                if (json_equal(json_array_get(v, i), json_array_get(v, j)))
                    return nb_srv_bad(ctx, "trusted_image_certificates", v,
                                      "has non-unique elements");
    }
    static const char *const fq[] = {"host", "hypervisor_hostname"};
    for (size_t k = 0; k < 2; k++) {
        if (!(v = json_object_get(server, fq[k])))
            continue;
        if (nb_srv_check_string(ctx, fq[k], v, 1, 255, false) < 0)
            return -1;
        for (const char *p = json_string_value(v); *p; p++)
            if (!isalnum((unsigned char)*p) && !strchr("-._", *p))
                return nb_srv_bad(ctx, fq[k], v, "does not match '^[a-zA-Z0-9-._]*$'");
    }
    if ((v = json_object_get(server, "hostname")) && check_hostname(ctx, v) < 0)
        return -1;
    static const char *const hk[] = {"os:scheduler_hints", "OS-SCH-HNT:scheduler_hints"};
    for (size_t k = 0; k < 2; k++)
        if ((v = json_object_get(body, hk[k])) && validate_hints(ctx, hk[k], v) < 0)
            return -1;
    return 0;
}

/* ---- create: the request's meaning ------------------------------------------------------ */

/* What a validated create request resolves to. */
struct create_req {
    json_t *server;          /* borrowed from the body */
    char *name;              /* normalized */
    const char *description; /* NULL = none */
    const char *hostname;    /* requested at 2.90, or NULL */
    const char *image_ref;   /* "" when booting from volume */
    json_t *image;           /* Glance view, NULL for BFV */
    json_t *flavor;          /* flavor row + extra_specs */
    json_t *keypair;         /* or NULL */
    json_t *group;           /* server group or NULL */
    json_t *hints;           /* scheduler hints without _nova* keys */
    json_t *bdms;            /* block device mappings to store (v2 form) */
    json_t *networks;        /* "none" | "auto" | [...] | NULL */
    json_t *security_groups; /* [name] */
    char *az;                /* requested zone or NULL */
    char *forced_host, *forced_node;
    const char *req_host, *req_node; /* 2.74 host / hypervisor_hostname */
    long long min_count, max_count;
    bool bfv, config_drive, auto_disk_config;
    char *admin_pass;
};

static void create_req_free(struct create_req *c)
{
    free(c->name);
    json_decref(c->image);
    json_decref(c->flavor);
    json_decref(c->keypair);
    json_decref(c->group);
    json_decref(c->hints);
    json_decref(c->bdms);
    json_decref(c->security_groups);
    free(c->az);
    free(c->forced_host);
    free(c->forced_node);
    free(c->admin_pass);
}

/* Random bytes for passwords and IDs (aborts if the kernel has none). */
static void random_bytes(unsigned char *buf, size_t n)
{
    char hex[2 * 64 + 1];
    while (n) {
        size_t k = n > 64 ? 64 : n;
        nb_random_hex(hex, k);
        for (size_t i = 0; i < k; i++) {
            unsigned v;
            sscanf(hex + 2 * i, "%2x", &v);
            *buf++ = (unsigned char)v;
        }
        n -= k;
    }
}

/* Nova's generate_password: 12 characters, one of each symbol group. */
static void generate_password(char out[13])
{
    static const char *const groups[] = {"23456789", "ABCDEFGHJKLMNPQRSTUVWXYZ",
                                         "abcdefghijkmnopqrstuvwxyz"};
    static const char all[] = "23456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
    unsigned char r[24];
    random_bytes(r, sizeof(r));
    for (int i = 0; i < 3; i++)
        out[i] = groups[i][r[i] % strlen(groups[i])];
    for (int i = 3; i < 12; i++)
        out[i] = all[r[i] % (sizeof(all) - 1)];
    for (int i = 11; i > 0; i--) { /* shuffle */
        int j = r[12 + i % 12] % (i + 1);
        char t = out[i];
        out[i] = out[j];
        out[j] = t;
    }
    out[12] = '\0';
}

/* Nova's generate_uid('r'): "r-" + 8 of [0-9a-z]. */
static void reservation_id(char out[11])
{
    static const char chars[] = "01234567890abcdefghijklmnopqrstuvwxyz";
    unsigned char r[8];
    random_bytes(r, sizeof(r));
    out[0] = 'r';
    out[1] = '-';
    for (int i = 0; i < 8; i++)
        out[2 + i] = chars[r[i] % (sizeof(chars) - 1)];
    out[10] = '\0';
}

/* Nova's utils.sanitize_hostname: Latin-1 only, at most 63 characters,
 * " _." -> "-", only word characters, "." and "-", lower case, no leading
 * or trailing "." or "-". New string (maybe ""). */
char *nb_srv_sanitize_hostname(const char *name)
{
    long cps[64];
    int n = 0;
    const unsigned char *p = (const unsigned char *)name;
    while (*p && n < 63) {
        long c = utf8_next(&p);
        if (c < 0 || c > 0xff)
            continue;
        cps[n++] = c;
    }
    char *out = malloc((size_t)n * 2 + 1);
    size_t o = 0;
    for (int i = 0; i < n; i++) {
        long c = cps[i];
        if (c == ' ' || c == '_' || c == '.')
            c = '-';
        bool word = (c < 0x80 && (isalnum((int)c) || c == '-')) ||
                    (c >= 0xc0 && c != 0xd7 && c != 0xf7) || c == 0xaa || c == 0xb2 || c == 0xb3 ||
                    c == 0xb5 || c == 0xb9 || c == 0xba || c == 0xbc || c == 0xbd || c == 0xbe;
        if (!word)
            continue;
        if (c < 0x80)
            c = tolower((int)c);
        else if (c >= 0xc0 && c <= 0xde && c != 0xd7)
            c += 0x20;
        if (c < 0x80) {
            out[o++] = (char)c;
        } else {
            out[o++] = (char)(0xc0 | (c >> 6));
            out[o++] = (char)(0x80 | (c & 0x3f));
        }
    }
    out[o] = '\0';
    size_t start = 0;
    while (out[start] == '-' || out[start] == '.')
        start++;
    while (o > start && (out[o - 1] == '-' || out[o - 1] == '.'))
        out[--o] = '\0';
    memmove(out, out + start, o - start + 1);
    return out;
}

/* Nova's parse_availability_zone: "az", "az:host", "az::node", "az:host:node". */
static int parse_az(struct nb_ctx *ctx, const char *in, struct create_req *c)
{
    if (!in || !*in) {
        const char *def = nb_conf_str("DEFAULT", "default_schedule_zone", NULL);
        c->az = def && *def ? strdup(def) : NULL;
        return 0;
    }
    int colons = 0;
    for (const char *p = in; *p; p++)
        colons += *p == ':';
    if (colons > 2)
        return nb_error(ctx, 400, NULL,
                        "Invalid input received: Unable to parse availability_zone");
    char *copy = strdup(in);
    char *first = strchr(copy, ':');
    if (first) {
        *first = '\0';
        char *rest = first + 1;
        char *second = strchr(rest, ':');
        if (second) {
            *second = '\0';
            if (*rest)
                c->forced_host = strdup(rest);
            if (second[1])
                c->forced_node = strdup(second + 1);
        } else if (*rest) {
            c->forced_host = strdup(rest);
        }
    }
    c->az = *copy ? strdup(copy) : NULL;
    free(copy);
    if (!c->az) {
        const char *def = nb_conf_str("DEFAULT", "default_schedule_zone", NULL);
        c->az = def && *def ? strdup(def) : NULL;
    }
    return 0;
}

/* Turns the request's block device mappings into the rows to store
 * (Nova's BlockDeviceDict.from_api and _check_and_transform_bdm, without
 * the volume checks that need the volume service). */
static int resolve_bdms(struct nb_ctx *ctx, struct create_req *c)
{
    json_t *legacy = json_object_get(c->server, "block_device_mapping");
    json_t *v2 = json_object_get(c->server, "block_device_mapping_v2");
    const char *image_ref = json_string_value(json_object_get(c->server, "imageRef"));
    bool image_given = json_object_get(c->server, "imageRef") != NULL;
    c->bdms = json_array();
    if (json_array_size(legacy) && json_array_size(v2))
        return nb_error(ctx, 400, NULL,
                        "Using different block_device_mapping syntaxes is not allowed in the same "
                        "request.");
    size_t i;
    json_t *b;
    json_array_foreach (legacy, i, b) {
        const char *vol = json_string_value(json_object_get(b, "volume_id"));
        const char *snap = json_string_value(json_object_get(b, "snapshot_id"));
        const char *dev = json_string_value(json_object_get(b, "device_name"));
        bool root = dev && (!strcmp(dev, "vda") || !strcmp(dev, "/dev/vda") ||
                            !strcmp(dev, "sda") || !strcmp(dev, "/dev/sda"));
        json_t *row =
            json_pack("{s:s, s:s, s:s?, s:s?, s:s?, s:O?, s:b, s:b}", "source_type",
                      snap ? "snapshot" : "volume", "destination_type", "volume", "volume_id", vol,
                      "snapshot_id", snap, "device_name", dev, "volume_size",
                      json_object_get(b, "volume_size"), "delete_on_termination",
                      nb_srv_json_truthy(json_object_get(b, "delete_on_termination")), "no_device",
                      json_object_get(b, "no_device") != NULL);
        if (root)
            json_object_set_new(row, "boot_index", json_integer(0));
        json_array_append_new(c->bdms, row);
    }
    json_array_foreach (v2, i, b) {
        json_t *row = json_deep_copy(b);
        if (!json_object_get(b, "no_device")) {
            const char *src = json_string_value(json_object_get(b, "source_type"));
            const char *dst = json_string_value(json_object_get(b, "destination_type"));
            const char *dev_uuid = json_string_value(json_object_get(b, "uuid"));
            const char *vtype = json_string_value(json_object_get(b, "volume_type"));
            const char *why = NULL;
            if (src && !strcmp(src, "blank") && dev_uuid)
                why = "Invalid device UUID.";
            else if ((!src || strcmp(src, "blank")) && !dev_uuid)
                why = "Missing device UUID.";
            if (!why && src && !strcmp(src, "image") && dst && !strcmp(dst, "local")) {
                json_t *bi = json_object_get(b, "boot_index");
                long long idx = json_is_integer(bi)  ? json_integer_value(bi)
                                : json_is_string(bi) ? strtoll(json_string_value(bi), NULL, 10)
                                                     : -1;
                if (!(image_given && idx == 0))
                    why = "Mapping image to local is not supported.";
            }
            if (!why && dst && !strcmp(dst, "local") && vtype)
                why = "Specifying a volume_type with destination_type=local is not supported.";
            if (!why && src && !strcmp(src, "volume") && vtype)
                why = "Specifying volume type to existing volume is not supported.";
            if (why) {
                json_decref(row);
                return nb_error(ctx, 400, NULL, "Block Device Mapping is Invalid: %s", why);
            }
            if (src && dev_uuid && strcmp(src, "blank")) {
                char key[32];
                snprintf(key, sizeof(key), "%s_id", src);
                json_object_set_new(row, key, json_string(dev_uuid));
            }
        }
        json_object_del(row, "uuid");
        json_t *bi = json_object_get(row, "boot_index");
        if (json_is_string(bi))
            json_object_set_new(row, "boot_index",
                                json_integer(strtoll(json_string_value(bi), NULL, 10)));
        json_object_set_new(
            row, "delete_on_termination",
            json_boolean(nb_srv_json_truthy(json_object_get(b, "delete_on_termination"))));
        json_array_append_new(c->bdms, row);
    }
    /* the root disk: a volume with boot index 0 makes a volume-backed server */
    json_array_foreach (c->bdms, i, b) {
        json_t *bi = json_object_get(b, "boot_index");
        const char *dst = json_string_value(json_object_get(b, "destination_type"));
        if (json_is_integer(bi) && json_integer_value(bi) == 0 && dst && !strcmp(dst, "volume"))
            c->bfv = true;
    }
    if (!image_ref || !*image_ref) {
        if (!json_array_size(c->bdms))
            return nb_error(ctx, 400, NULL, "Missing imageRef attribute");
        c->image_ref = "";
    } else {
        c->image_ref = image_ref;
    }
    return 0;
}

/* Networks before 2.37 (Nova's _get_requested_networks), then the
 * Networking service's checks (Nova's validate_networks). */
static int resolve_networks(struct nb_ctx *ctx, struct create_req *c)
{
    json_t *nets = json_object_get(c->server, "networks");
    c->networks = nets;
    if (!json_is_array(nets))
        return nb_network_validate_request(ctx, nets);
    json_t *ports = json_array();
    size_t i;
    json_t *n;
    int rc = 0;
    json_array_foreach (nets, i, n) {
        const char *port = json_string_value(json_object_get(n, "port"));
        const char *fixed = json_string_value(json_object_get(n, "fixed_ip"));
        if (port) {
            size_t k;
            json_t *p;
            json_array_foreach (ports, k, p)
                if (!strcmp(json_string_value(p), port)) {
                    rc = nb_error(ctx, 400, NULL,
                                  "Port ID '%s' was specified twice: you cannot attach a port "
                                  "multiple times.",
                                  port);
                    goto out;
                }
            if (fixed) {
                rc = nb_error(ctx, 400, NULL,
                              "Specified Fixed IP '%s' cannot be used with port '%s': the two "
                              "cannot be specified together.",
                              fixed, port);
                goto out;
            }
            json_array_append_new(ports, json_string(port));
            continue;
        }
        json_t *uuid = json_object_get(n, "uuid");
        if (!uuid) {
            rc = nb_error(ctx, 400, NULL, "Bad network format: missing 'uuid'");
            goto out;
        }
        if (!nb_is_uuid(json_string_value(uuid))) {
            rc = nb_error(ctx, 400, NULL,
                          "Bad networks format: network uuid is not in proper format (%s)",
                          json_string_value(uuid));
            goto out;
        }
    }
    rc = nb_network_validate_request(ctx, nets);
out:
    json_decref(ports);
    return rc;
}

/* Splits a Glance v2 view into its standard fields and its properties. */
static json_t *image_for_spec(const json_t *img)
{
    json_t *out = json_object(), *props = json_object();
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)img, k, v) {
        if (nb_image_is_core_attr(k))
            json_object_set(out, k, v);
        else
            json_object_set(props, k, v);
    }
    json_object_set_new(out, "properties", props);
    return out;
}

static const char *image_prop(const json_t *img, const char *key)
{
    return img ? json_string_value(json_object_get(img, key)) : NULL;
}

/* Flavor/image compatibility (Nova's _validate_flavor_image_nostatus). */
static int check_flavor_image(struct nb_ctx *ctx, struct create_req *c)
{
    if (!c->image)
        return 0;
    const char *icd = image_prop(c->image, "img_config_drive");
    if (icd && strcmp(icd, "optional") && strcmp(icd, "mandatory"))
        return nb_error(ctx, 400, NULL, "Image's config drive option '%s' is invalid", icd);
    long long mem = nb_json_int(c->flavor, "memory_mb", 0);
    if (mem < nb_json_int(c->image, "min_ram", 0))
        return nb_error(ctx, 400, NULL, "Flavor's memory is too small for requested image.");
    if (c->bfv)
        return 0;
    long long gib = 1024LL * 1024 * 1024;
    long long dest = nb_json_int(c->flavor, "root_gb", 0) * gib;
    long long size = nb_json_int(c->image, "size", 0);
    long long min_disk = nb_json_int(c->image, "min_disk", 0) * gib;
    if (dest) {
        if (size > dest)
            return nb_error(ctx, 400, NULL,
                            "Flavor's disk is too small for requested image. Flavor disk is %lld "
                            "bytes, image is %lld bytes.",
                            dest, size);
        if (min_disk > dest)
            return nb_error(ctx, 400, NULL,
                            "Flavor's disk is smaller than the minimum size specified in image "
                            "metadata. Flavor disk is %lld bytes, minimum size is %lld bytes.",
                            dest, min_disk);
    } else if (!ctx->is_admin) {
        /* os_compute_api:servers:create:zero_disk_flavor is admin-only */
        return nb_error(ctx, 403, NULL,
                        "Only volume-backed servers are allowed for flavors with zero disk.");
    }
    return 0;
}

/* Personality files against the injected_* quotas. */
static int check_personality(struct nb_ctx *ctx, const json_t *files, const long long lim[])
{
    size_t n = json_array_size(files);
    if (!n)
        return 0;
    if (lim[NB_Q_INJECTED_FILES] >= 0 && (long long)n > lim[NB_Q_INJECTED_FILES])
        return nb_error(ctx, 403, NULL, "Personality file limit exceeded");
    size_t i;
    json_t *f;
    size_t max_path = 0, max_content = 0;
    json_array_foreach ((json_t *)files, i, f) {
        const char *p = nb_json_str(f, "path"), *cnt = nb_json_str(f, "contents");
        if (p && strlen(p) > max_path)
            max_path = strlen(p);
        if (cnt && strlen(cnt) > max_content)
            max_content = strlen(cnt);
    }
    if (lim[NB_Q_INJECTED_FILE_PATH_BYTES] >= 0 &&
        (long long)max_path > lim[NB_Q_INJECTED_FILE_PATH_BYTES])
        return nb_error(ctx, 403, NULL, "Personality file path exceeds maximum %lld",
                        lim[NB_Q_INJECTED_FILE_PATH_BYTES]);
    if (lim[NB_Q_INJECTED_FILE_CONTENT_BYTES] >= 0 &&
        (long long)max_content > lim[NB_Q_INJECTED_FILE_CONTENT_BYTES])
        return nb_error(ctx, 403, NULL, "Personality file content exceeds maximum %lld",
                        lim[NB_Q_INJECTED_FILE_CONTENT_BYTES]);
    return 0;
}

/* A volume-backed snapshot image (property block_device_mapping) brings
 * its mappings: they are merged with the request's (Nova's
 * _check_and_transform_bdm) and a volume root makes the server
 * volume-backed. */
static int merge_image_bdms(struct nb_ctx *ctx, struct create_req *c)
{
    json_t *image_bdms = nb_srv_image_bdms(ctx, c->image);
    if (!image_bdms)
        return -1;
    if (json_array_size(image_bdms)) {
        json_t *merged = nb_srv_merge_bdms(image_bdms, c->bdms);
        json_decref(c->bdms);
        c->bdms = merged;
        size_t i;
        json_t *b;
        json_array_foreach (c->bdms, i, b) {
            const char *dst = nb_json_str(b, "destination_type");
            if (nb_srv_bdm_is_root(b) && dst && !strcmp(dst, "volume"))
                c->bfv = true;
        }
    }
    json_decref(image_bdms);
    return 0;
}

/* Resolves everything the request names, in Nova's order of checks. */
static int resolve_create(struct nb_ctx *ctx, json_t *body, struct create_req *c)
{
    json_t *s = c->server;
    json_t *v;
    if (nb_srv_policy(ctx, "os_compute_api:servers:create",
                      nb_srv_is_member_of(ctx, ctx->project_id)) < 0)
        return -1;
    c->name = normalize_name(json_string_value(json_object_get(s, "name")));
    c->description = c->name;
    if (nb_ctx_mv_ge(ctx, 2, 19))
        c->description = json_string_value(json_object_get(s, "description"));
    if (nb_ctx_mv_ge(ctx, 2, 90))
        c->hostname = json_string_value(json_object_get(s, "hostname"));
    json_t *hints = json_object_get(body, "os:scheduler_hints");
    if (!hints)
        hints = json_object_get(body, "OS-SCH-HNT:scheduler_hints");
    c->hints = json_object();
    const char *k;
    json_object_foreach (hints, k, v)
        if (strncmp(k, "_nova", 5))
            json_object_set(c->hints, k, v);

    c->min_count = 1;
    if ((v = json_object_get(s, "min_count")))
        nb_srv_check_int(ctx, "min_count", v, 1, &c->min_count);
    c->max_count = c->min_count;
    if ((v = json_object_get(s, "max_count")))
        nb_srv_check_int(ctx, "max_count", v, 1, &c->max_count);
    if (c->min_count > c->max_count)
        return nb_error(ctx, 400, NULL, "min_count must be <= max_count");

    c->security_groups = json_array();
    size_t i;
    json_array_foreach (json_object_get(s, "security_groups"), i, v) {
        const char *nm = nb_json_str(v, "name");
        if (nm)
            set_add(c->security_groups, nm);
    }
    if (!json_array_size(c->security_groups))
        json_array_append_new(c->security_groups, json_string("default"));

    if (parse_az(ctx, json_string_value(json_object_get(s, "availability_zone")), c) < 0)
        return -1;
    if ((c->forced_host || c->forced_node) &&
        nb_srv_policy(ctx, "os_compute_api:servers:create:forced_host", ctx->is_admin) < 0)
        return -1;
    if (c->forced_host && c->az) {
        char *haz = nb_host_availability_zone(ctx, c->forced_host);
        if (!haz || strcmp(haz, c->az)) {
            free(c->az);
            c->az = NULL;
        }
        free(haz);
    }
    if (nb_ctx_mv_ge(ctx, 2, 74)) {
        c->req_host = json_string_value(json_object_get(s, "host"));
        c->req_node = json_string_value(json_object_get(s, "hypervisor_hostname"));
        if (c->req_host || c->req_node) {
            if (nb_srv_policy(ctx, "compute:servers:create:requested_destination", ctx->is_admin) <
                0)
                return -1;
            if (c->forced_host || c->forced_node)
                return nb_error(ctx, 400, NULL,
                                "One mechanism with host and/or hypervisor_hostname and another "
                                "mechanism with zone:host:node are mutually exclusive.");
        }
    }
    if (resolve_bdms(ctx, c) < 0 || resolve_networks(ctx, c) < 0)
        return -1;

    /* the flavor: id or link */
    json_t *fref = json_object_get(s, "flavorRef");
    char fid[256];
    if (json_is_integer(fref)) {
        snprintf(fid, sizeof(fid), "%lld", (long long)json_integer_value(fref));
    } else {
        const char *f = json_string_value(fref);
        const char *q = strchr(f, '?');
        size_t len = q ? (size_t)(q - f) : strlen(f);
        const char *slash = memrchr(f, '/', len);
        const char *start = slash ? slash + 1 : f;
        snprintf(fid, sizeof(fid), "%.*s", (int)(len - (size_t)(start - f)), start);
    }
    c->flavor = nb_flavor_get(ctx, fid);
    if (!c->flavor)
        return nb_srv_error_as(ctx, 400, NULL);
    if (nb_json_int(c->flavor, "disabled", 0))
        return nb_error(ctx, 400, NULL, "Flavor %s could not be found.", fid);

    if (c->hostname && c->max_count > 1)
        return nb_error(ctx, 400, NULL,
                        "Unable to allocate a single hostname to multiple instances");
    if (c->az && !c->forced_host && !nb_availability_zone_exists(ctx, c->az))
        return nb_error(ctx, 400, NULL, "The requested availability zone is not available");
    if ((c->req_host || c->req_node)) {
        long long found = nb_db_int(nb_srv_db(), ctx, 0,
                                    "SELECT COUNT(*) FROM compute_nodes WHERE deleted = 0 AND "
                                    "(? IS NULL OR host = ?) AND (? IS NULL OR "
                                    "hypervisor_hostname = ?)",
                                    "ssss", c->req_host, c->req_host, c->req_node, c->req_node);
        if (found < 0)
            return -1;
        if (!found)
            return nb_error(ctx, 400, NULL, "Compute host %s could not be found.",
                            c->req_host ? c->req_host : c->req_node);
    }

    /* the image */
    json_t *certs = json_object_get(s, "trusted_image_certificates");
    if (*c->image_ref) {
        c->image = nb_image_lookup(ctx, c->image_ref);
        if (!c->image)
            return ctx->err_status == 400 || ctx->err_status == 404
                       ? nb_srv_error_as(ctx, 400, "Can not find requested image")
                       : -1;
        const char *st = nb_json_str(c->image, "status");
        if (!st || strcmp(st, "active"))
            return nb_error(ctx, 400, NULL, "Image %s is not active.", c->image_ref);
        if (merge_image_bdms(ctx, c) < 0)
            return -1;
    } else if (json_array_size(certs)) {
        return nb_error(ctx, 400, NULL,
                        "Image certificate validation is not supported when booting from volume");
    }
    const char *dc = json_string_value(json_object_get(s, "OS-DCF:diskConfig"));
    const char *img_adc = image_prop(c->image, "auto_disk_config");
    if (dc && !strcmp(dc, "AUTO") && img_adc && !strcmp(img_adc, "disabled"))
        return nb_error(ctx, 400, NULL, "Requested image %s has automatic disk resize disabled.",
                        c->image_ref);
    c->auto_disk_config =
        dc ? !strcmp(dc, "AUTO") : (img_adc && nb_srv_bool_from_string(img_adc, false) == 1);
    c->config_drive = nb_srv_json_truthy(json_object_get(s, "config_drive"));
    const char *key_name = json_string_value(json_object_get(s, "key_name"));
    if (key_name) {
        c->keypair = nb_keypair_get(ctx, ctx->user_id, key_name);
        if (!c->keypair)
            return ctx->err_status == 404 ? nb_srv_error_as(ctx, 400, "Invalid key_name provided.")
                                          : -1;
    }
    if (check_flavor_image(ctx, c) < 0)
        return -1;

    long long lim[NB_Q_COUNT];
    if (nb_quota_limits(ctx, ctx->project_id, ctx->user_id, lim) < 0)
        return -1;
    json_t *md = json_object_get(s, "metadata");
    if (lim[NB_Q_METADATA_ITEMS] >= 0 && (long long)json_object_size(md) > lim[NB_Q_METADATA_ITEMS])
        return nb_error(ctx, 403, NULL, "Maximum number of metadata items exceeds %lld",
                        lim[NB_Q_METADATA_ITEMS]);
    if (check_personality(ctx, json_object_get(s, "personality"), lim) < 0)
        return -1;

    const char *group = json_string_value(json_object_get(c->hints, "group"));
    if (group) {
        c->group = nb_server_group_get(ctx, group);
        if (!c->group) {
            if (ctx->err_status != 404 && ctx->err_status != 400)
                return -1;
            char msg[128];
            snprintf(msg, sizeof(msg), "Instance group %s could not be found.", group);
            return nb_srv_error_as(ctx, 400, msg);
        }
    }
    const char *pass = json_string_value(json_object_get(s, "adminPass"));
    if (pass) {
        c->admin_pass = strdup(pass);
    } else {
        c->admin_pass = malloc(13);
        generate_password(c->admin_pass);
    }
    return 0;
}

/* ---- create: the records ------------------------------------------------------------------ */

/* The scheduling request stored with each instance (instances.request_spec),
 * read by the conductor and the scheduler. */
static json_t *build_request_spec(struct nb_ctx *ctx, const struct create_req *c, const char *uuid,
                                  int index, int num)
{
    json_t *spec = json_object();
    json_object_set_new(spec, "instance_uuid", json_string(uuid));
    json_object_set_new(spec, "project_id", json_string(ctx->project_id));
    json_object_set_new(spec, "user_id", json_string(ctx->user_id));
    json_object_set(spec, "flavor", c->flavor);
    json_object_set_new(spec, "image", c->image ? image_for_spec(c->image) : json_object());
    json_object_set_new(spec, "availability_zone", c->az ? json_string(c->az) : json_null());
    json_object_set_new(spec, "force_hosts",
                        c->forced_host ? json_pack("[s]", c->forced_host) : json_array());
    json_object_set_new(spec, "force_nodes",
                        c->forced_node ? json_pack("[s]", c->forced_node) : json_array());
    json_object_set_new(spec, "requested_destination",
                        c->req_host || c->req_node
                            ? json_pack("{s:s?, s:s?}", "host", c->req_host, "node", c->req_node)
                            : json_null());
    json_object_set(spec, "scheduler_hints", c->hints);
    json_object_set_new(spec, "group",
                        c->group ? json_pack("{s:O?, s:O?, s:O?, s:O?}", "uuid",
                                             json_object_get(c->group, "uuid"), "policy",
                                             json_object_get(c->group, "policy"), "rules",
                                             json_object_get(c->group, "rules"), "members",
                                             json_object_get(c->group, "members"))
                                 : json_null());
    json_object_set_new(spec, "num_instances", json_integer(num));
    json_object_set_new(spec, "launch_index", json_integer(index));
    json_object_set_new(spec, "is_bfv", json_boolean(c->bfv));
    json_object_set(spec, "security_groups", c->security_groups);
    json_object_set_new(spec, "requested_networks",
                        c->networks ? json_incref(c->networks) : json_string("auto"));
    json_t *files = json_object_get(c->server, "personality");
    json_object_set_new(spec, "injected_files", files ? json_incref(files) : json_array());
    json_object_set_new(spec, "ignore_hosts", json_array());
    json_object_set_new(spec, "retry", json_pack("{s:i, s:[]}", "num_attempts", 0, "hosts"));
    return spec;
}

static int insert_bdm(struct nb_ctx *ctx, const char *instance_uuid, const json_t *b,
                      const char *now)
{
    char buuid[NB_UUID_LEN];
    nb_uuid(buuid);
    json_t *bi = json_object_get(b, "boot_index");
    json_t *vs = json_object_get(b, "volume_size");
    long long size = json_is_integer(vs)  ? json_integer_value(vs)
                     : json_is_string(vs) ? strtoll(json_string_value(vs), NULL, 10)
                                          : -1;
    return nb_db_exec(nb_srv_db(), ctx,
                      "INSERT INTO block_device_mapping (uuid, instance_uuid, source_type, "
                      "destination_type, guest_format, device_type, disk_bus, device_name, "
                      "boot_index, volume_id, image_id, snapshot_id, volume_size, volume_type, "
                      "delete_on_termination, no_device, tag, created_at, updated_at) VALUES "
                      "(?, ?, ?, ?, ?, ?, ?, ?, CASE WHEN ? THEN ? END, ?, ?, ?, "
                      "CASE WHEN ? >= 0 THEN ? END, ?, ?, ?, ?, ?, ?)",
                      "ssssssssbisssiisbbsss", buuid, instance_uuid, nb_json_str(b, "source_type"),
                      nb_json_str(b, "destination_type"), nb_json_str(b, "guest_format"),
                      nb_json_str(b, "device_type"), nb_json_str(b, "disk_bus"),
                      nb_json_str(b, "device_name"), json_is_integer(bi),
                      (long long)(json_is_integer(bi) ? json_integer_value(bi) : 0),
                      nb_json_str(b, "volume_id"), nb_json_str(b, "image_id"),
                      nb_json_str(b, "snapshot_id"), size, size, nb_json_str(b, "volume_type"),
                      json_is_true(json_object_get(b, "delete_on_termination")),
                      json_object_get(b, "no_device") != NULL, nb_json_str(b, "tag"), now, now) < 0
               ? -1
               : 0;
}

/* The mappings of one instance: the request's, plus the image root disk
 * and the flavor's ephemeral and swap disks Nova adds. */
static json_t *instance_bdms(const struct create_req *c)
{
    json_t *all = json_deep_copy(c->bdms);
    bool root = false, eph = false, swap = false;
    size_t i;
    json_t *b;
    json_array_foreach (all, i, b) {
        json_t *bi = json_object_get(b, "boot_index");
        const char *src = nb_json_str(b, "source_type");
        const char *dst = nb_json_str(b, "destination_type");
        const char *gf = nb_json_str(b, "guest_format");
        if (json_is_integer(bi) && json_integer_value(bi) == 0)
            root = true;
        if (src && !strcmp(src, "blank") && dst && !strcmp(dst, "local")) {
            if (gf && !strcmp(gf, "swap"))
                swap = true;
            else
                eph = true;
        }
    }
    if (!root && *c->image_ref)
        json_array_insert_new(all, 0,
                              json_pack("{s:s, s:s, s:s, s:s, s:i, s:b}", "source_type", "image",
                                        "destination_type", "local", "device_type", "disk",
                                        "image_id", c->image_ref, "boot_index", 0,
                                        "delete_on_termination", 1));
    long long eph_gb = nb_json_int(c->flavor, "ephemeral_gb", 0);
    long long swap_mb = nb_json_int(c->flavor, "swap", 0);
    if (eph_gb > 0 && !eph)
        json_array_append_new(all, json_pack("{s:s, s:s, s:s, s:i, s:I, s:b}", "source_type",
                                             "blank", "destination_type", "local", "device_type",
                                             "disk", "boot_index", -1, "volume_size",
                                             (json_int_t)eph_gb, "delete_on_termination", 1));
    if (swap_mb > 0 && !swap)
        json_array_append_new(all,
                              json_pack("{s:s, s:s, s:s, s:s, s:i, s:I, s:b}", "source_type",
                                        "blank", "destination_type", "local", "device_type", "disk",
                                        "guest_format", "swap", "boot_index", -1, "volume_size",
                                        (json_int_t)swap_mb, "delete_on_termination", 1));
    return all;
}

static int insert_instance(struct nb_ctx *ctx, const struct create_req *c, const char *uuid,
                           int index, int num, const char *resv, const char *now)
{
    struct nb_db *db = nb_srv_db();
    json_t *s = c->server;
    char *name = num > 1 ? nb_strdup_printf("%s-%d", c->name, index + 1) : strdup(c->name);
    char *hostname;
    if (c->hostname) {
        hostname = strdup(c->hostname);
    } else {
        char *h = nb_srv_sanitize_hostname(c->name);
        hostname = !*h       ? nb_strdup_printf("Server-%s", uuid)
                   : num > 1 ? nb_strdup_printf("%s-%d", h, index + 1)
                             : strdup(h);
        free(h);
    }
    const char *kernel = image_prop(c->image, "kernel_id");
    const char *ramdisk = image_prop(c->image, "ramdisk_id");
    if (kernel && !strcmp(kernel, "nokernel"))
        kernel = ramdisk = NULL;
    json_t *certs = json_object_get(s, "trusted_image_certificates");
    json_t *spec = build_request_spec(ctx, c, uuid, index, num);
    int rc = nb_db_exec(
        db, ctx,
        "INSERT INTO instances (uuid, project_id, user_id, display_name, display_description, "
        "hostname, vm_state, task_state, power_state, availability_zone, instance_type_id, "
        "flavor, image_ref, key_name, key_data, user_data, config_drive, reservation_id, "
        "launch_index, access_ip_v4, access_ip_v6, progress, root_device_name, locked, "
        "request_spec, created_at, updated_at, vcpus, memory_mb, root_gb, ephemeral_gb, "
        "kernel_id, ramdisk_id, auto_disk_config, trusted_certs) VALUES (?, ?, ?, ?, ?, ?, "
        "'building', 'scheduling', 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, 0, ?, ?, ?, ?, ?, "
        "?, ?, ?, ?, ?, ?)",
        "sssssssijssssssisssjssiiiissbj", uuid, ctx->project_id, ctx->user_id, name, c->description,
        hostname, c->az, nb_json_int(c->flavor, "id", 0), c->flavor, c->image_ref,
        c->keypair ? nb_json_str(c->keypair, "name") : NULL,
        c->keypair ? nb_json_str(c->keypair, "public_key") : NULL,
        json_string_value(json_object_get(s, "user_data")), c->config_drive ? "True" : "", resv,
        (long long)index, json_string_value(json_object_get(s, "accessIPv4")),
        json_string_value(json_object_get(s, "accessIPv6")),
        image_prop(c->image, "root_device_name"), spec, now, now,
        nb_json_int(c->flavor, "vcpus", 0), nb_json_int(c->flavor, "memory_mb", 0),
        nb_json_int(c->flavor, "root_gb", 0), nb_json_int(c->flavor, "ephemeral_gb", 0),
        kernel ? kernel : "", ramdisk ? ramdisk : "", (int)c->auto_disk_config,
        json_is_array(certs) ? certs : NULL);
    free(name);
    free(hostname);
    json_decref(spec);
    if (rc < 0)
        return -1;
    const char *k;
    json_t *v;
    json_object_foreach (json_object_get(s, "metadata"), k, v) {
        if (nb_db_exec(db, ctx,
                       "INSERT INTO instance_metadata (instance_uuid, key, value) VALUES (?, ?, ?)",
                       "sss", uuid, k, json_string_value(v)) < 0)
            return -1;
    }
    size_t i;
    json_array_foreach (json_object_get(s, "tags"), i, v) {
        if (nb_db_exec(db, ctx, "INSERT OR IGNORE INTO tags (resource_id, tag) VALUES (?, ?)", "ss",
                       uuid, json_string_value(v)) < 0)
            return -1;
    }
    json_t *bdms = instance_bdms(c);
    json_array_foreach (bdms, i, v) {
        if (insert_bdm(ctx, uuid, v, now) < 0) {
            json_decref(bdms);
            return -1;
        }
    }
    json_decref(bdms);
    if (c->group && nb_server_group_add_member(ctx, nb_json_str(c->group, "uuid"), uuid) < 0)
        return -1;
    return nb_action_start(db, ctx, uuid, "create");
}

/* Quota, then the rows, in one transaction. Fills uuids; returns 0/-1. */
static int store_instances(struct nb_ctx *ctx, const struct create_req *c, const char *resv,
                           json_t *uuids)
{
    struct nb_db *db = nb_srv_db();
    char now[32];
    nb_now_iso_us(now);
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    int num = nb_quota_check_instances(
        ctx, ctx->project_id, ctx->user_id, nb_json_int(c->flavor, "vcpus", 0),
        nb_json_int(c->flavor, "memory_mb", 0), (int)c->min_count, (int)c->max_count);
    if (num < 0)
        goto fail;
    /* the group's member quota is checked as each member is added */
    for (int i = 0; i < num; i++) {
        char uuid[NB_UUID_LEN];
        nb_uuid(uuid);
        if (insert_instance(ctx, c, uuid, i, num, resv, now) < 0)
            goto fail;
        json_array_append_new(uuids, json_string(uuid));
    }
    return nb_db_commit(db, ctx);
fail:
    nb_db_rollback(db);
    return -1;
}

static int h_server_create(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    json_t *body = nb_req_json_object(ctx, req);
    if (!body)
        return -1;
    json_t *server = json_object_get(body, "server");
    if (!server)
        return nb_error(ctx, 400, NULL, "'server' is a required property");
    if (!json_is_object(server))
        return nb_srv_bad(ctx, "server", server, "is not of type 'object'");
    if (validate_create(ctx, body, server) < 0)
        return -1;
    struct create_req c;
    memset(&c, 0, sizeof(c));
    c.server = server;
    json_t *uuids = json_array();
    int rc = -1;
    char resv[11];
    reservation_id(resv);
    if (resolve_create(ctx, body, &c) < 0 ||
        nb_srv_check_bdms(ctx, c.bdms, c.image_ref, c.max_count) < 0 ||
        nb_srv_reserve_volumes(ctx, c.bdms) < 0)
        goto out;
    if (store_instances(ctx, &c, resv, uuids) < 0) {
        nb_srv_unreserve_volumes(ctx, c.bdms);
        goto out;
    }
    NB_INFO("nubo.compute.api", ctx, json_string_value(json_array_get(uuids, 0)),
            "Accepted create of %zu instance(s) %s (reservation %s)", json_array_size(uuids),
            c.name, resv);
    json_t *args = json_pack("{s:O, s:s}", "instance_uuids", uuids, "admin_password", c.admin_pass);
    if (nb_bus_cast(ctx, "conductor", "build_instances", args) < 0)
        NB_ERROR("nubo.compute.api", ctx, NULL,
                 "no conductor listening: instances stay in BUILD until one is started");
    if (nb_srv_json_truthy(json_object_get(server, "return_reservation_id"))) {
        rc = nb_resp_json(resp, 202, json_pack("{s:s}", "reservation_id", resv));
        goto out;
    }
    const char *uuid = json_string_value(json_array_get(uuids, 0));
    json_t *sgs = json_object_get(server, "security_groups");
    json_t *view =
        json_pack("{s:s, s:o, s:s, s:o}", "id", uuid, "links", nb_srv_links("servers", uuid),
                  "OS-DCF:diskConfig", c.auto_disk_config ? "AUTO" : "MANUAL", "security_groups",
                  sgs ? json_incref(sgs) : json_pack("[{s:s}]", "name", "default"));
    if (nb_conf_bool("api", "enable_instance_password", true))
        json_object_set_new(view, "adminPass", json_string(c.admin_pass));
    const char *self = nb_json_str(json_array_get(json_object_get(view, "links"), 0), "href");
    nb_resp_header(resp, "Location", self);
    rc = nb_resp_json(resp, 202, json_pack("{s:o}", "server", view));
out:
    create_req_free(&c);
    json_decref(uuids);
    return rc;
}

/* ---- registration ---------------------------------------------------------------------------- */

int nb_compute_servers_init(struct nb_env *env)
{
    srv_env = env;
    nb_http_route("GET", "/compute/v2.1/servers", h_servers_index, 0);
    nb_http_route("GET", "/compute/v2.1/servers/detail", h_servers_detail, 0);
    nb_http_route("POST", "/compute/v2.1/servers", h_server_create, 0);
    nb_http_route("GET", "/compute/v2.1/servers/{server_id}", h_server_show, 0);
    nb_http_route("PUT", "/compute/v2.1/servers/{server_id}", h_server_update, 0);
    nb_http_route("DELETE", "/compute/v2.1/servers/{server_id}", h_server_delete, 0);
    return 0;
}
