/* server_views.c - the server representations of the Compute API, as Nova's
 * views/servers.py builds them at each microversion, plus time formats and
 * hostId.
 *
 * A detailed view of a page of servers needs data from other tables
 * (metadata, faults, volumes, tags, group membership, compute services,
 * availability zones). Those are loaded for the whole page at once, with one
 * statement per table for every NB_SRV_IDS_PER_QUERY servers, keyed by
 * instance UUID, and then joined in memory; the per-server work is only
 * shaping JSON. "addresses" is written by server_addresses.c. */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/util.h"
#include "compute/api/api.h"
#include "compute/api/instances.h"
#include "compute/api/jsonbuf.h"
#include "compute/api/links.h"
#include "compute/api/server_addresses.h"
#include "compute/api/server_views.h"
#include "compute/api/sql.h"
#include "compute/compute.h"
#include "db/db.h"
#include "network/network.h"

#include <openssl/evp.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- time formats and host IDs ------------------------------------------ */

/* Splits a stored time stamp into "YYYY-MM-DDTHH:MM:SS" and microseconds.
 * Accepts "T" or " " between date and time, any fraction, optional "Z".
 * Returns false if it does not look like one. */
static bool split_time(const char *s, char date[20], long *usec)
{
    if (!s || strlen(s) < 19)
        return false;
    memcpy(date, s, 19);
    date[19] = '\0';
    date[10] = 'T';
    *usec = 0;
    if (s[19] == '.') {
        const char *p = s + 20;
        long v = 0;
        int digits = 0;
        while (*p >= '0' && *p <= '9') {
            if (digits < 6) {
                v = v * 10 + (*p - '0');
                digits++;
            }
            p++;
        }
        while (digits++ < 6)
            v *= 10;
        *usec = v;
    }
    return true;
}

const char *nb_srv_isotime(const char *stored, char *buf)
{
    char date[20];
    long usec;
    if (!split_time(stored, date, &usec))
        return NULL;
    snprintf(buf, 32, "%sZ", date);
    return buf;
}

const char *nb_srv_dbtime(const char *stored, char *buf)
{
    char date[20];
    long usec;
    if (!split_time(stored, date, &usec))
        return NULL;
    snprintf(buf, 32, "%s.%06ld", date, usec);
    return buf;
}

json_t *nb_srv_json_isotime(const char *stored)
{
    char buf[32];
    const char *s = nb_srv_isotime(stored, buf);
    return s ? json_string(s) : json_null();
}

json_t *nb_srv_json_dbtime(const char *stored)
{
    char buf[32];
    const char *s = nb_srv_dbtime(stored, buf);
    return s ? json_string(s) : json_null();
}

void nb_srv_host_id(const char *project_id, const char *host, char out[57])
{
    out[0] = '\0';
    if (!host || !*host)
        return;
    char *data = nb_strdup_printf("%s%s", project_id ? project_id : "None", host);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    if (EVP_Digest(data, strlen(data), md, &mdlen, EVP_sha224(), NULL) == 1) {
        for (unsigned int i = 0; i < mdlen && i < 28; i++)
            snprintf(out + 2 * i, 3, "%02x", md[i]);
    }
    free(data);
}

/* ---- view options ----------------------------------------------------------- */

void nb_srv_view_opts_show(const struct nb_ctx *ctx, struct nb_srv_view_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->show_az = o->show_config_drive = o->show_keypair = o->show_srv_usg = true;
    o->show_sec_grp = o->show_extended_status = o->show_extended_volumes = true;
    o->show_user_data = true;
    o->show_extended_attr = -1;
    o->show_host_status = -1;
    o->show_server_groups = false;
    (void)ctx;
}

void nb_srv_view_opts_update(const struct nb_ctx *ctx, struct nb_srv_view_opts *o)
{
    bool all = nb_ctx_mv_ge(ctx, 2, 75);
    memset(o, 0, sizeof(*o));
    o->show_az = o->show_config_drive = o->show_keypair = o->show_srv_usg = all;
    o->show_sec_grp = o->show_extended_status = o->show_extended_volumes = all;
    o->show_user_data = true;
    o->show_extended_attr = all ? -1 : 0;
    o->show_host_status = all ? -1 : 0;
    o->show_server_groups = nb_ctx_mv_ge(ctx, 2, 71);
}

/* ---- page-wide lookups ------------------------------------------------------- */

#define NB_SRV_IDS_PER_QUERY 64

/* Runs sql_head + "IN (…)" + sql_tail for each chunk of ids and appends the
 * rows to a new array. The text of each statement only depends on the chunk
 * size, so the prepared statements are reused. */
static json_t *rows_for_ids(struct nb_ctx *ctx, const char *sql_head, const char *sql_tail,
                            json_t *ids)
{
    json_t *all = json_array();
    size_t n = json_array_size(ids);
    for (size_t start = 0; start < n; start += NB_SRV_IDS_PER_QUERY) {
        size_t cnt = n - start < NB_SRV_IDS_PER_QUERY ? n - start : NB_SRV_IDS_PER_QUERY;
        /* pad to a fixed arity with NULLs so the SQL text is always the same */
        size_t arity = n <= 8 ? cnt : NB_SRV_IDS_PER_QUERY;
        struct nb_srv_sql q;
        nb_srv_sql_init(&q);
        nb_srv_sql_add(&q, "%s IN (", sql_head);
        for (size_t i = 0; i < arity; i++) {
            if (i)
                nb_srv_sql_add(&q, ", ");
            nb_srv_sql_arg(&q, i < cnt ? json_string_value(json_array_get(ids, start + i)) : NULL);
        }
        nb_srv_sql_add(&q, ")%s", sql_tail);
        json_t *rows = nb_srv_sql_rows(ctx, &q);
        nb_srv_sql_free(&q);
        if (!rows) {
            json_decref(all);
            return NULL;
        }
        json_array_extend(all, rows);
        json_decref(rows);
    }
    return all;
}

/* What one page of servers needs from other tables, keyed by UUID. */
struct page_data {
    json_t *metadata;     /* uuid -> {k: v} */
    json_t *faults;       /* uuid -> newest fault row */
    json_t *volumes;      /* uuid -> [bdm rows with a volume] */
    json_t *tags;         /* uuid -> [tag] */
    json_t *groups;       /* uuid -> [group uuid] */
    json_t *services;     /* host -> compute service row */
    json_t *zones;        /* host -> zone name */
    json_t *hidden_hosts; /* [host names] hidden from non-admins in faults */
    json_t *flavor_views; /* flavor JSON text -> view (shared by servers) */
    json_t *image_views;  /* image ref -> view */
    json_t *host_ids;     /* project + "/" + host -> hostId */
    json_t *nw_info;      /* uuid -> network_info (parsed list) */
    json_t *sec_groups;   /* uuid -> [{"name"}], only servers with groups */
    char *url_v21, *url_bookmark;
};

static void page_data_free(struct page_data *d)
{
    json_decref(d->metadata);
    json_decref(d->faults);
    json_decref(d->volumes);
    json_decref(d->tags);
    json_decref(d->groups);
    json_decref(d->sec_groups);
    json_decref(d->services);
    json_decref(d->zones);
    json_decref(d->hidden_hosts);
    json_decref(d->flavor_views);
    json_decref(d->image_views);
    json_decref(d->host_ids);
    json_decref(d->nw_info);
    free(d->url_v21);
    free(d->url_bookmark);
}

static const char *row_str(const json_t *row, const char *key)
{
    return json_string_value(json_object_get(row, key));
}

static bool row_deleted(const json_t *row)
{
    json_t *d = json_object_get(row, "deleted");
    return json_is_integer(d) && json_integer_value(d) != 0;
}

static const char *row_status(const json_t *row)
{
    if (row_deleted(row))
        return "DELETED";
    return nb_server_status(row_str(row, "vm_state"), row_str(row, "task_state"));
}

/* Groups rows by their key column into obj[key] = [rows…]. */
static void group_rows(json_t *obj, json_t *rows, const char *key)
{
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        const char *k = row_str(r, key);
        if (!k)
            continue;
        json_t *list = json_object_get(obj, k);
        if (!list) {
            list = json_array();
            json_object_set_new(obj, k, list);
        }
        json_array_append(list, r);
    }
}

/* obj[key], a list created on first use, gets value appended. */
static void append_to(json_t *obj, const char *key, json_t *value)
{
    json_t *list = json_object_get(obj, key);
    if (!list) {
        list = json_array();
        json_object_set_new(obj, key, list);
    }
    json_array_append(list, value);
}

/* The keys a page's lookups go by: all UUIDs, those that may have a fault
 * (ERROR or DELETED), those past building (they may show addresses), and
 * the distinct hosts. */
struct page_keys {
    json_t *uuids, *faulted, *built, *hosts;
};

static void page_keys_collect(json_t *rows, struct page_keys *k)
{
    k->uuids = json_array();
    k->faulted = json_array();
    k->built = json_array();
    k->hosts = json_array();
    json_t *seen_hosts = json_object();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        const char *u = row_str(r, "uuid");
        json_array_append_new(k->uuids, json_string(u));
        const char *st = row_status(r);
        if (!strcmp(st, "ERROR") || !strcmp(st, "DELETED"))
            json_array_append_new(k->faulted, json_string(u));
        const char *vm = row_str(r, "vm_state");
        if (!vm || strcmp(vm, NB_VM_BUILDING))
            json_array_append_new(k->built, json_string(u));
        const char *h = row_str(r, "host");
        if (h && *h && !json_object_get(seen_hosts, h)) {
            json_object_set_new(seen_hosts, h, json_true());
            json_array_append_new(k->hosts, json_string(h));
        }
    }
    json_decref(seen_hosts);
}

static void page_keys_free(struct page_keys *k)
{
    json_decref(k->uuids);
    json_decref(k->faulted);
    json_decref(k->built);
    json_decref(k->hosts);
}

/* The empty maps of a page and its base URLs. */
static void page_data_init(struct page_data *d)
{
    memset(d, 0, sizeof(*d));
    d->metadata = json_object();
    d->faults = json_object();
    d->volumes = json_object();
    d->tags = json_object();
    d->groups = json_object();
    d->services = json_object();
    d->zones = json_object();
    d->hidden_hosts = json_array();
    d->flavor_views = json_object();
    d->image_views = json_object();
    d->host_ids = json_object();
    d->nw_info = json_object();
    d->url_v21 = nb_res_api_url();
    d->url_bookmark = nb_res_bookmark_url();
}

/* The steps of load_page_data: each fills its map of d for the given keys.
 * 0, or -1 after a database error. */
static int load_metadata(struct nb_ctx *ctx, struct page_data *d, json_t *uuids)
{
    json_t *res = rows_for_ids(ctx,
                               "SELECT instance_uuid, \"key\", value FROM instance_metadata "
                               "WHERE deleted = 0 AND instance_uuid",
                               " ORDER BY id", uuids);
    if (!res)
        return -1;
    size_t i;
    json_t *r;
    json_array_foreach (res, i, r) {
        const char *u = row_str(r, "instance_uuid");
        json_t *m = json_object_get(d->metadata, u);
        if (!m) {
            m = json_object();
            json_object_set_new(d->metadata, u, m);
        }
        json_t *v = json_object_get(r, "value");
        json_object_set_new(m, row_str(r, "key"),
                            json_is_string(v) ? json_incref(v) : json_string(""));
    }
    json_decref(res);
    return 0;
}

/* The host names a non-admin must not see in fault details. */
static int load_hidden_hosts(struct nb_ctx *ctx, struct page_data *d)
{
    json_t *hn = nb_db_rows(nb_srv_db(), ctx,
                            "SELECT DISTINCT host AS h FROM compute_nodes WHERE deleted = 0 "
                            "UNION SELECT DISTINCT hypervisor_hostname FROM compute_nodes "
                            "WHERE deleted = 0 UNION SELECT DISTINCT host FROM services "
                            "WHERE deleted = 0",
                            "");
    if (!hn)
        return -1;
    size_t i;
    json_t *r;
    json_array_foreach (hn, i, r) {
        json_t *h = json_object_get(r, "h");
        if (json_is_string(h) && json_string_length(h) >= 3)
            json_array_append(d->hidden_hosts, h);
    }
    json_decref(hn);
    return 0;
}

static int load_faults(struct nb_ctx *ctx, struct page_data *d, json_t *faulted)
{
    if (!json_array_size(faulted))
        return 0;
    json_t *res = rows_for_ids(ctx,
                               "SELECT instance_uuid, code, message, details, host, created_at "
                               "FROM instance_faults WHERE instance_uuid",
                               " ORDER BY created_at DESC, id DESC", faulted);
    if (!res)
        return -1;
    size_t i;
    json_t *r;
    json_array_foreach (res, i, r) {
        const char *u = row_str(r, "instance_uuid");
        if (!json_object_get(d->faults, u))
            json_object_set(d->faults, u, r);
    }
    json_decref(res);
    if (!ctx->is_admin && json_object_size(d->faults))
        return load_hidden_hosts(ctx, d);
    return 0;
}

static int load_network_info(struct nb_ctx *ctx, struct page_data *d, json_t *built)
{
    if (!json_array_size(built))
        return 0;
    json_t *res = rows_for_ids(ctx,
                               "SELECT instance_uuid, network_info FROM instance_info_caches "
                               "WHERE network_info IS NOT NULL AND network_info != '[]' AND "
                               "instance_uuid",
                               "", built);
    if (!res)
        return -1;
    size_t i;
    json_t *r;
    json_array_foreach (res, i, r) {
        json_t *nw = nb_json_parse(row_str(r, "network_info"));
        if (json_is_array(nw))
            json_object_set_new(d->nw_info, row_str(r, "instance_uuid"), nw);
        else
            json_decref(nw);
    }
    json_decref(res);
    return 0;
}

static int load_volumes(struct nb_ctx *ctx, struct page_data *d, json_t *uuids)
{
    json_t *res = rows_for_ids(ctx,
                               "SELECT instance_uuid, volume_id, delete_on_termination FROM "
                               "block_device_mapping WHERE deleted = 0 AND volume_id IS NOT NULL "
                               "AND volume_id != '' AND instance_uuid",
                               " ORDER BY id", uuids);
    if (!res)
        return -1;
    group_rows(d->volumes, res, "instance_uuid");
    json_decref(res);
    return 0;
}

/* map[row[key]] = [row[value]…] for the rows of sql_head IN (ids) sql_tail
 * (tags, server groups). 0/-1. */
static int load_lists(struct nb_ctx *ctx, json_t *map, const char *sql_head, const char *sql_tail,
                      json_t *ids, const char *key, const char *value)
{
    json_t *res = rows_for_ids(ctx, sql_head, sql_tail, ids);
    if (!res)
        return -1;
    size_t i;
    json_t *r;
    json_array_foreach (res, i, r)
        append_to(map, row_str(r, key), json_object_get(r, value));
    json_decref(res);
    return 0;
}

static int load_tags(struct nb_ctx *ctx, struct page_data *d, json_t *uuids)
{
    return load_lists(ctx, d->tags, "SELECT resource_id, tag FROM tags WHERE resource_id",
                      " ORDER BY tag", uuids, "resource_id", "tag");
}

static int load_groups(struct nb_ctx *ctx, struct page_data *d, json_t *uuids)
{
    return load_lists(ctx, d->groups,
                      "SELECT m.instance_uuid, g.uuid FROM instance_group_member m JOIN "
                      "instance_groups g ON g.id = m.group_id WHERE g.deleted = 0 AND "
                      "m.instance_uuid",
                      "", uuids, "instance_uuid", "uuid");
}

static int load_services(struct nb_ctx *ctx, struct page_data *d, json_t *hosts)
{
    if (!json_array_size(hosts))
        return 0;
    json_t *res = rows_for_ids(ctx,
                               "SELECT host, disabled, forced_down, last_seen_up, updated_at, "
                               "created_at FROM services WHERE deleted = 0 AND \"binary\" = "
                               "'nova-compute' AND host",
                               "", hosts);
    if (!res)
        return -1;
    size_t i;
    json_t *r;
    json_array_foreach (res, i, r)
        json_object_set(d->services, row_str(r, "host"), r);
    json_decref(res);
    return 0;
}

static int load_zones(struct nb_ctx *ctx, struct page_data *d, json_t *hosts)
{
    if (!json_array_size(hosts))
        return 0;
    json_t *zones = nb_hosts_availability_zones(ctx, hosts);
    if (!zones)
        return -1;
    json_decref(d->zones);
    d->zones = zones;
    return 0;
}

/* Loads what the views of rows need from other tables into d (which the
 * caller frees with page_data_free on success; freed here on failure):
 * only the tables the options and microversion show. 0/-1. */
static int load_page_data(struct nb_ctx *ctx, json_t *rows, const struct nb_srv_view_opts *o,
                          bool ext_attr, bool host_status, struct page_data *d)
{
    (void)ext_attr;
    page_data_init(d);
    struct page_keys k;
    page_keys_collect(rows, &k);
    int rc = -1;
    if (load_metadata(ctx, d, k.uuids) < 0 || load_faults(ctx, d, k.faulted) < 0 ||
        load_network_info(ctx, d, k.built) < 0 ||
        (o->show_extended_volumes && load_volumes(ctx, d, k.uuids) < 0) ||
        (nb_ctx_mv_ge(ctx, 2, 26) && load_tags(ctx, d, k.uuids) < 0) ||
        (o->show_server_groups && load_groups(ctx, d, k.uuids) < 0) ||
        (host_status && load_services(ctx, d, k.hosts) < 0))
        goto out;
    if (o->show_sec_grp && !(d->sec_groups = nb_network_instances_sg_names(ctx, k.uuids)))
        goto out;
    if (o->show_az && load_zones(ctx, d, k.hosts) < 0)
        goto out;
    rc = 0;
out:
    page_keys_free(&k);
    if (rc < 0)
        page_data_free(d);
    return rc;
}

/* ---- one server -------------------------------------------------------------- */

/* Nova's host_status of a compute service row (NULL: no service). */
static const char *host_status_of(const json_t *svc)
{
    if (!svc)
        return "";
    if (nb_json_int(svc, "forced_down", 0))
        return "DOWN";
    if (nb_json_int(svc, "disabled", 0))
        return "MAINTENANCE";
    const char *seen = row_str(svc, "last_seen_up");
    if (!seen)
        seen = row_str(svc, "updated_at");
    if (!seen)
        seen = row_str(svc, "created_at");
    double t = nb_time_parse(seen);
    long down_time = nb_conf_int("DEFAULT", "service_down_time", 60);
    if (t > 0 && nb_time_now() - t <= (double)down_time)
        return "UP";
    return "UNKNOWN";
}

/* Replaces each occurrence of the hosts in s by "***" (new string). */
static char *hide_hosts(const char *s, json_t *hosts)
{
    char *out = strdup(s);
    size_t i;
    json_t *h;
    json_array_foreach (hosts, i, h) {
        const char *name = json_string_value(h);
        size_t nl = strlen(name);
        char *p;
        while ((p = strstr(out, name))) {
            size_t pre = (size_t)(p - out);
            char *n = nb_strdup_printf("%.*s***%s", (int)pre, out, p + nl);
            free(out);
            out = n;
        }
    }
    return out;
}

static json_t *fault_view(struct nb_ctx *ctx, const json_t *f, json_t *hidden_hosts)
{
    json_int_t code = nb_json_int(f, "code", 500);
    const char *msg = row_str(f, "message");
    const char *details = row_str(f, "details");
    char *m = hide_hosts(msg ? msg : "", ctx->is_admin ? NULL : hidden_hosts);
    json_t *v = json_pack("{s:I, s:o, s:s}", "code", code, "created",
                          nb_srv_json_isotime(row_str(f, "created_at")), "message", m);
    free(m);
    if (details && *details && (ctx->is_admin || code != 500)) {
        char *dd = hide_hosts(details, ctx->is_admin ? NULL : hidden_hosts);
        json_object_set_new(v, "details", json_string(dd));
        free(dd);
    }
    return v;
}

static json_t *flavor_view(struct nb_ctx *ctx, const char *flavor_text, bool extra_specs)
{
    json_t *fl = nb_json_parse(flavor_text);
    json_t *v;
    if (!json_is_object(fl)) {
        v = json_object();
    } else if (nb_ctx_mv_ge(ctx, 2, 47)) {
        const char *name = nb_json_str(fl, "name");
        v = json_pack("{s:I, s:I, s:I, s:I, s:I, s:s}", "vcpus",
                      (json_int_t)nb_json_int(fl, "vcpus", 0), "ram",
                      (json_int_t)nb_json_int(fl, "memory_mb", 0), "disk",
                      (json_int_t)nb_json_int(fl, "root_gb", 0), "ephemeral",
                      (json_int_t)nb_json_int(fl, "ephemeral_gb", 0), "swap",
                      (json_int_t)nb_json_int(fl, "swap", 0), "original_name", name ? name : "");
        if (extra_specs) {
            json_t *es = json_object_get(fl, "extra_specs");
            json_object_set_new(v, "extra_specs",
                                json_is_object(es) ? json_incref(es) : json_object());
        }
    } else {
        json_t *fid = json_object_get(fl, "flavorid");
        char idbuf[32];
        const char *id = json_string_value(fid);
        if (!id && json_is_integer(fid)) {
            snprintf(idbuf, sizeof(idbuf), "%lld", (long long)json_integer_value(fid));
            id = idbuf;
        }
        v = json_pack("{s:s, s:o}", "id", id ? id : "", "links",
                      nb_res_bookmark_links("flavors", id ? id : ""));
    }
    json_decref(fl);
    return v;
}

json_t *nb_srv_view_basic(const json_t *inst)
{
    const char *uuid = row_str(inst, "uuid");
    const char *name = row_str(inst, "display_name");
    return json_pack("{s:s, s:s, s:o}", "id", uuid, "name", name ? name : "", "links",
                     nb_res_links("servers", uuid));
}

static bool is_progress_status(const char *st)
{
    static const char *const list[] = {"ACTIVE", "BUILD",         "REBUILD",
                                       "RESIZE", "VERIFY_RESIZE", "MIGRATING"};
    for (size_t i = 0; i < sizeof(list) / sizeof(list[0]); i++)
        if (!strcmp(st, list[i]))
            return true;
    return false;
}

/* ---- one server ----------------------------------------------------------------------- */

/* The page-wide pieces shared by servers: hostId per (project, host),
 * flavor view per stored flavor, image link per image, as JSON text. */
static const char *cached_text(json_t *cache, const char *key,
                               json_t *(*make)(void *, const char *), void *opaque)
{
    json_t *v = json_object_get(cache, key);
    if (!v) {
        json_t *j = make(opaque, key);
        struct nb_srv_buf b;
        nb_srv_buf_init(&b);
        nb_srv_buf_json(&b, j);
        json_decref(j);
        v = json_string(b.s);
        nb_srv_buf_free(&b);
        json_object_set_new(cache, key, v);
    }
    return json_string_value(v);
}

struct view_env {
    struct nb_ctx *ctx;
    struct page_data *d;
};

static json_t *make_flavor(void *opaque, const char *text)
{
    struct view_env *e = opaque;
    return flavor_view(e->ctx, text, true);
}

static json_t *make_image(void *opaque, const char *image_ref)
{
    struct view_env *e = opaque;
    if (!*image_ref)
        return json_string("");
    char book[512];
    snprintf(book, sizeof(book), "%s/images/%s", e->d->url_bookmark, image_ref);
    return json_pack("{s:s, s:[{s:s, s:s}]}", "id", image_ref, "links", "rel", "bookmark", "href",
                     book);
}

/* key: project "/" host */
static json_t *make_host_id(void *opaque, const char *key)
{
    (void)opaque;
    const char *slash = strchr(key, '/');
    char project[256];
    snprintf(project, sizeof(project), "%.*s", (int)(slash - key), key);
    char hostid[57];
    nb_srv_host_id(project, slash + 1, hostid);
    return json_string(hostid);
}

static void put_time(struct nb_srv_buf *b, bool *first, const char *key, const char *stored,
                     bool iso)
{
    char buf[32];
    nb_srv_buf_put_str(b, first, key,
                       iso ? nb_srv_isotime(stored, buf) : nb_srv_dbtime(stored, buf));
}

static void put_links(struct nb_srv_buf *b, bool *first, const struct page_data *d,
                      const char *uuid)
{
    nb_srv_buf_key(b, "links", first);
    nb_srv_buf_lit(b, "[{\"rel\":\"self\",\"href\":");
    char url[512];
    snprintf(url, sizeof(url), "%s/servers/%s", d->url_v21, uuid);
    nb_srv_buf_str(b, url);
    nb_srv_buf_lit(b, "},{\"rel\":\"bookmark\",\"href\":");
    snprintf(url, sizeof(url), "%s/servers/%s", d->url_bookmark, uuid);
    nb_srv_buf_str(b, url);
    nb_srv_buf_lit(b, "}]");
}

/* One server being written: the row, the page's data, the options. */
struct server_out {
    struct nb_srv_buf *b;
    bool first; /* no key written yet */
    struct nb_ctx *ctx;
    const json_t *inst;
    const struct nb_srv_view_opts *o;
    struct page_data *d;
    bool ext_attr, host_status;
    const char *uuid, *host, *status;
};

/* The keys every view has, from "id" to "progress". */
static void write_base(struct server_out *w)
{
    struct nb_srv_buf *b = w->b;
    bool *first = &w->first;
    struct nb_ctx *ctx = w->ctx;
    const json_t *inst = w->inst;
    const char *uuid = w->uuid, *host = w->host, *status = w->status;
    struct page_data *d = w->d;
    const struct nb_srv_view_opts *o = w->o;
    struct view_env env = {ctx, d};
    const char *project = row_str(inst, "project_id");
    const char *ip4 = row_str(inst, "access_ip_v4"), *ip6 = row_str(inst, "access_ip_v6");
    const char *image_ref = row_str(inst, "image_ref");
    const char *flavor = row_str(inst, "flavor");
    char hkey[512];
    snprintf(hkey, sizeof(hkey), "%s/%s", project ? project : "", host ? host : "");
    nb_srv_buf_put_str(b, first, "id", uuid);
    nb_srv_buf_put_str(b, first, "name", row_str(inst, "display_name") ?: "");
    nb_srv_buf_put_str(b, first, "status", status);
    nb_srv_buf_put_str(b, first, "tenant_id", project ?: "");
    nb_srv_buf_put_str(b, first, "user_id", row_str(inst, "user_id") ?: "");
    json_t *meta = json_object_get(d->metadata, uuid);
    if (meta)
        nb_srv_buf_put_json(b, first, "metadata", meta);
    else
        nb_srv_buf_put_raw(b, first, "metadata", "{}");
    nb_srv_buf_put_raw(b, first, "hostId", cached_text(d->host_ids, hkey, make_host_id, &env));
    nb_srv_buf_put_raw(b, first, "image",
                       cached_text(d->image_views, image_ref ? image_ref : "", make_image, &env));
    nb_srv_buf_put_raw(b, first, "flavor",
                       cached_text(d->flavor_views, flavor ? flavor : "", make_flavor, &env));
    const char *upd = row_str(inst, "updated_at");
    put_time(b, first, "created", row_str(inst, "created_at"), true);
    put_time(b, first, "updated", upd ? upd : row_str(inst, "created_at"), true);
    /* Nova hides the addresses of a building server; the extended keys are
     * shown wherever the extended status is (GET always, PUT from 2.75) */
    nb_srv_buf_key(b, "addresses", first);
    nb_srv_write_addresses(b, json_object_get(d->nw_info, uuid), o->show_extended_status);
    nb_srv_buf_put_str(b, first, "accessIPv4", ip4 ? ip4 : "");
    nb_srv_buf_put_str(b, first, "accessIPv6", ip6 ? ip6 : "");
    put_links(b, first, d, uuid);
    nb_srv_buf_put_str(b, first, "OS-DCF:diskConfig",
                       nb_json_int(inst, "auto_disk_config", 0) ? "AUTO" : "MANUAL");
    if (!strcmp(status, "ERROR") || !strcmp(status, "DELETED")) {
        json_t *f = json_object_get(d->faults, uuid);
        if (f) {
            json_t *fv = fault_view(ctx, f, d->hidden_hosts);
            nb_srv_buf_put_json(b, first, "fault", fv);
            json_decref(fv);
        }
    }
    if (is_progress_status(status))
        nb_srv_buf_put_int(b, first, "progress", nb_json_int(inst, "progress", 0));
}

/* Zone, config drive, key name and usage times (as the options say). */
static void write_optional(struct server_out *w)
{
    struct nb_srv_buf *b = w->b;
    bool *first = &w->first;
    const json_t *inst = w->inst;
    const char *host = w->host;
    struct page_data *d = w->d;
    const struct nb_srv_view_opts *o = w->o;
    if (o->show_az) {
        const char *az = NULL;
        if (host && *host)
            az = json_string_value(json_object_get(d->zones, host));
        else
            az = row_str(inst, "availability_zone");
        nb_srv_buf_put_str(b, first, "OS-EXT-AZ:availability_zone", az ? az : "");
    }
    if (o->show_config_drive)
        nb_srv_buf_put_str(b, first, "config_drive", row_str(inst, "config_drive") ?: "");
    if (o->show_keypair)
        nb_srv_buf_put_str(b, first, "key_name", row_str(inst, "key_name"));
    if (o->show_srv_usg) {
        put_time(b, first, "OS-SRV-USG:launched_at", row_str(inst, "launched_at"), false);
        put_time(b, first, "OS-SRV-USG:terminated_at", row_str(inst, "terminated_at"), false);
    }
    /* Nova's _add_security_grps: only a server whose ports have groups */
    json_t *sg = o->show_sec_grp ? json_object_get(d->sec_groups, w->uuid) : NULL;
    if (sg)
        nb_srv_buf_put_json(b, first, "security_groups", sg);
}

/* The OS-EXT-SRV-ATTR keys (admins by default). */
static void write_ext_attrs(struct server_out *w)
{
    struct nb_srv_buf *b = w->b;
    bool *first = &w->first;
    struct nb_ctx *ctx = w->ctx;
    const json_t *inst = w->inst;
    const char *uuid = w->uuid;
    const char *host = w->host;
    const struct nb_srv_view_opts *o = w->o;
    if (w->ext_attr) {
        nb_srv_buf_put_str(b, first, "OS-EXT-SRV-ATTR:host", host);
        nb_srv_buf_put_str(b, first, "OS-EXT-SRV-ATTR:instance_name", uuid);
        nb_srv_buf_put_str(b, first, "OS-EXT-SRV-ATTR:hypervisor_hostname", row_str(inst, "node"));
        if (nb_ctx_mv_ge(ctx, 2, 3)) {
            nb_srv_buf_put_str(b, first, "OS-EXT-SRV-ATTR:reservation_id",
                               row_str(inst, "reservation_id"));
            nb_srv_buf_put_int(b, first, "OS-EXT-SRV-ATTR:launch_index",
                               nb_json_int(inst, "launch_index", 0));
            nb_srv_buf_put_str(b, first, "OS-EXT-SRV-ATTR:hostname", row_str(inst, "hostname"));
            nb_srv_buf_put_str(b, first, "OS-EXT-SRV-ATTR:kernel_id", row_str(inst, "kernel_id"));
            nb_srv_buf_put_str(b, first, "OS-EXT-SRV-ATTR:ramdisk_id", row_str(inst, "ramdisk_id"));
            nb_srv_buf_put_str(b, first, "OS-EXT-SRV-ATTR:root_device_name",
                               row_str(inst, "root_device_name"));
            if (o->show_user_data)
                nb_srv_buf_put_str(b, first, "OS-EXT-SRV-ATTR:user_data",
                                   row_str(inst, "user_data"));
        }
    }
}

/* The OS-EXT-STS keys. */
static void write_ext_status(struct server_out *w)
{
    struct nb_srv_buf *b = w->b;
    bool *first = &w->first;
    const json_t *inst = w->inst;
    const struct nb_srv_view_opts *o = w->o;
    if (o->show_extended_status) {
        nb_srv_buf_put_str(b, first, "OS-EXT-STS:task_state", row_str(inst, "task_state"));
        nb_srv_buf_put_str(b, first, "OS-EXT-STS:vm_state", row_str(inst, "vm_state"));
        nb_srv_buf_put_int(b, first, "OS-EXT-STS:power_state", nb_json_int(inst, "power_state", 0));
    }
}

/* "os-extended-volumes:volumes_attached". */
static void write_volumes(struct server_out *w)
{
    struct nb_srv_buf *b = w->b;
    bool *first = &w->first;
    struct nb_ctx *ctx = w->ctx;
    const char *uuid = w->uuid;
    struct page_data *d = w->d;
    const struct nb_srv_view_opts *o = w->o;
    if (o->show_extended_volumes) {
        nb_srv_buf_key(b, "os-extended-volumes:volumes_attached", first);
        nb_srv_buf_raw(b, "[", 1);
        json_t *bdms = json_object_get(d->volumes, uuid);
        size_t i;
        json_t *v;
        json_array_foreach (bdms, i, v) {
            if (i)
                nb_srv_buf_raw(b, ",", 1);
            bool f2 = true;
            nb_srv_buf_raw(b, "{", 1);
            nb_srv_buf_put_str(b, &f2, "id", row_str(v, "volume_id"));
            if (nb_ctx_mv_ge(ctx, 2, 3))
                nb_srv_buf_put_raw(b, &f2, "delete_on_termination",
                                   nb_json_int(v, "delete_on_termination", 0) ? "true" : "false");
            nb_srv_buf_raw(b, "}", 1);
        }
        nb_srv_buf_raw(b, "]", 1);
    }
}

/* The keys later microversions add (2.16 to 2.90, and server groups). */
static void write_later_keys(struct server_out *w)
{
    struct nb_srv_buf *b = w->b;
    bool *first = &w->first;
    struct nb_ctx *ctx = w->ctx;
    const json_t *inst = w->inst;
    const char *uuid = w->uuid;
    const char *host = w->host;
    struct page_data *d = w->d;
    const struct nb_srv_view_opts *o = w->o;
    if (nb_ctx_mv_ge(ctx, 2, 16) && w->host_status) {
        const char *hs = "";
        if (host && *host)
            hs = host_status_of(json_object_get(d->services, host));
        nb_srv_buf_put_str(b, first, "host_status", hs);
    }
    if (nb_ctx_mv_ge(ctx, 2, 9)) {
        const char *lb = row_str(inst, "locked_by");
        nb_srv_buf_put_raw(b, first, "locked", lb && *lb ? "true" : "false");
    }
    if (nb_ctx_mv_ge(ctx, 2, 73))
        nb_srv_buf_put_str(b, first, "locked_reason", row_str(inst, "locked_reason"));
    if (nb_ctx_mv_ge(ctx, 2, 19))
        nb_srv_buf_put_str(b, first, "description", row_str(inst, "display_description"));
    if (nb_ctx_mv_ge(ctx, 2, 26)) {
        json_t *tags = json_object_get(d->tags, uuid);
        if (tags)
            nb_srv_buf_put_json(b, first, "tags", tags);
        else
            nb_srv_buf_put_raw(b, first, "tags", "[]");
    }
    if (nb_ctx_mv_ge(ctx, 2, 63)) {
        json_t *tc = nb_json_parse(row_str(inst, "trusted_certs"));
        if (json_is_array(tc) && json_array_size(tc))
            nb_srv_buf_put_json(b, first, "trusted_image_certificates", tc);
        else
            nb_srv_buf_put_raw(b, first, "trusted_image_certificates", "null");
        json_decref(tc);
    }
    if (nb_ctx_mv_ge(ctx, 2, 90) && !w->ext_attr)
        nb_srv_buf_put_str(b, first, "OS-EXT-SRV-ATTR:hostname", row_str(inst, "hostname"));
    if (o->show_server_groups) {
        json_t *g = json_object_get(d->groups, uuid);
        if (g)
            nb_srv_buf_put_json(b, first, "server_groups", g);
        else
            nb_srv_buf_put_raw(b, first, "server_groups", "[]");
    }
}

static void write_server(struct nb_srv_buf *b, struct nb_ctx *ctx, const json_t *inst,
                         const struct nb_srv_view_opts *o, bool ext_attr, bool host_status,
                         struct page_data *d)
{
    struct server_out w = {.b = b,
                           .first = true,
                           .ctx = ctx,
                           .inst = inst,
                           .o = o,
                           .d = d,
                           .ext_attr = ext_attr,
                           .host_status = host_status,
                           .uuid = row_str(inst, "uuid"),
                           .host = row_str(inst, "host"),
                           .status = row_status(inst)};
    nb_srv_buf_raw(b, "{", 1);
    write_base(&w);
    write_optional(&w);
    write_ext_attrs(&w);
    write_ext_status(&w);
    write_volumes(&w);
    write_later_keys(&w);
    nb_srv_buf_raw(b, "}", 1);
}

int nb_srv_view_write(struct nb_ctx *ctx, json_t *rows, const struct nb_srv_view_opts *o,
                      struct nb_srv_buf *b)
{
    /* Extended attributes and host status are admin-only in Nova's default
     * policy (os_compute_api:os-extended-server-attributes, servers:show:
     * host_status). */
    bool ext_attr = o->show_extended_attr < 0 ? ctx->is_admin : o->show_extended_attr > 0;
    bool host_status = o->show_host_status < 0 ? ctx->is_admin : o->show_host_status > 0;
    struct page_data d;
    if (load_page_data(ctx, rows, o, ext_attr, host_status, &d) < 0)
        return -1;
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        if (i)
            nb_srv_buf_raw(b, ",", 1);
        write_server(b, ctx, r, o, ext_attr, host_status, &d);
    }
    page_data_free(&d);
    return 0;
}
