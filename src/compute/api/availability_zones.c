/* availability_zones.c - /os-availability-zone, as Nova's
 * availability_zone.py and nova/availability_zones.py.
 *
 * There is no zone table: a zone exists because a service's host is in it.
 * A nova-compute host is in the availability_zone of the aggregates that
 * hold it (comma-joined if several), else in [DEFAULT]
 * default_availability_zone ("nova"); every other service is in [DEFAULT]
 * internal_service_availability_zone ("internal"). Zones of enabled services
 * are available; zones that only disabled services are in are not. The list
 * hides the internal zone; the admin detail shows it with hosts and
 * services. */
#include "compute/api/api.h"
#include "compute/api/resources.h"
#include "compute/api/validate.h"
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "db/db.h"

#include <stdlib.h>
#include <string.h>

static struct nb_env *env;

static const char *default_zone(void)
{
    return nb_conf_str("DEFAULT", "default_availability_zone", "nova");
}

static const char *internal_zone(void)
{
    return nb_conf_str("DEFAULT", "internal_service_availability_zone", "internal");
}

json_t *nb_res_aggregate_zones(struct nb_ctx *ctx)
{
    _cleanup_json_ json_t *rows =
        nb_db_rows(env->db, ctx,
                   "SELECT h.host AS host, m.value AS zone FROM aggregate_hosts h "
                   "JOIN aggregates a ON a.id = h.aggregate_id AND a.deleted = 0 "
                   "JOIN aggregate_metadata m ON m.aggregate_id = a.id AND "
                   "m.key = 'availability_zone' ORDER BY a.id",
                   "");
    if (!rows)
        return NULL;
    json_t *map = json_object();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        const char *host = nb_json_str(r, "host"), *zone = nb_json_str(r, "zone");
        if (!host || !zone)
            continue;
        const char *cur = nb_json_str(map, host);
        if (!cur) {
            json_object_set_new(map, host, json_string(zone));
            continue;
        }
        /* skip a zone already listed for the host */
        size_t zl = strlen(zone);
        bool dup = false;
        for (const char *p = cur; *p && !dup;) {
            size_t l = strcspn(p, ",");
            dup = l == zl && strncmp(p, zone, l) == 0;
            p += l + (p[l] == ',');
        }
        if (!dup) {
            _cleanup_free_ char *joined = malloc(strlen(cur) + zl + 2);
            if (!joined)
                abort();
            strcpy(joined, cur);
            strcat(joined, ",");
            strcat(joined, zone);
            json_object_set_new(map, host, json_string(joined));
        }
    }
    return map;
}

static bool is_compute(const json_t *svc)
{
    const char *bin = nb_json_str(svc, "binary"), *topic = nb_json_str(svc, "topic");
    return (bin && strcmp(bin, "nova-compute") == 0) || (topic && strcmp(topic, "compute") == 0);
}

const char *nb_res_service_zone(const json_t *zones, const json_t *svc)
{
    if (!is_compute(svc))
        return internal_zone();
    const char *z = zones ? nb_json_str(zones, nb_json_str(svc, "host")) : NULL;
    return z ? z : default_zone();
}

char *nb_host_availability_zone(struct nb_ctx *ctx, const char *host)
{
    _cleanup_json_ json_t *row =
        nb_db_row(env->db, ctx,
                  "SELECT m.value AS zone FROM aggregate_hosts h "
                  "JOIN aggregates a ON a.id = h.aggregate_id AND a.deleted = 0 "
                  "JOIN aggregate_metadata m ON m.aggregate_id = a.id AND "
                  "m.key = 'availability_zone' WHERE h.host = ? ORDER BY a.id LIMIT 1",
                  "s", host);
    const char *z = row ? nb_json_str(row, "zone") : NULL;
    return strdup(z ? z : default_zone());
}

json_t *nb_hosts_availability_zones(struct nb_ctx *ctx, json_t *hosts)
{
    char sql[512];
    snprintf(sql, sizeof(sql),
             "SELECT h.host AS host, m.value AS zone FROM aggregate_hosts h "
             "JOIN aggregates a ON a.id = h.aggregate_id AND a.deleted = 0 "
             "JOIN aggregate_metadata m ON m.aggregate_id = a.id AND "
             "m.key = 'availability_zone' WHERE h.host IN (SELECT value FROM %s) ORDER BY a.id",
             nb_db_json_each(env->db));
    _cleanup_json_ json_t *rows = nb_db_rows(env->db, ctx, sql, "j", hosts);
    if (!rows)
        return NULL;
    json_t *map = json_object();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        const char *host = nb_json_str(r, "host"), *zone = nb_json_str(r, "zone");
        if (host && !json_object_get(map, host)) /* the first aggregate's, as above */
            json_object_set_new(map, host, json_string(zone ? zone : default_zone()));
    }
    json_array_foreach (hosts, i, r) {
        if (json_is_string(r) && !json_object_get(map, json_string_value(r)))
            json_object_set_new(map, json_string_value(r), json_string(default_zone()));
    }
    return map;
}

/* Every live service with its zone set ("zone" key added). New ref or NULL. */
static json_t *services_with_zones(struct nb_ctx *ctx)
{
    _cleanup_json_ json_t *zones = nb_res_aggregate_zones(ctx);
    if (!zones)
        return NULL;
    json_t *rows =
        nb_db_rows(env->db, ctx, "SELECT * FROM services WHERE deleted = 0 ORDER BY id", "");
    if (!rows)
        return NULL;
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        json_object_set_new(r, "zone", json_string(nb_res_service_zone(zones, r)));
    }
    return rows;
}

/* Sorted zone names of enabled services (available) and of disabled
 * services only (not available), as Nova's _get_availability_zones.
 * Both new refs (arrays of strings). */
static void split_zones(json_t *services, json_t **avail, json_t **unavail)
{
    json_t *a = json_object(), *u = json_object();
    size_t i;
    json_t *s;
    json_array_foreach (services, i, s) {
        if (!nb_json_int(s, "disabled", 0))
            json_object_set_new(a, nb_json_str(s, "zone"), json_true());
    }
    json_array_foreach (services, i, s) {
        const char *z = nb_json_str(s, "zone");
        if (nb_json_int(s, "disabled", 0) && !json_object_get(a, z))
            json_object_set_new(u, z, json_true());
    }
    *avail = json_array();
    *unavail = json_array();
    const char *k;
    json_t *v;
    json_object_foreach (a, k, v) {
        json_array_append_new(*avail, json_string(k));
    }
    json_object_foreach (u, k, v) {
        json_array_append_new(*unavail, json_string(k));
    }
    json_decref(a);
    json_decref(u);
}

static int str_cmp(const void *x, const void *y)
{
    return strcmp(json_string_value(*(json_t *const *)x), json_string_value(*(json_t *const *)y));
}

static void sort_strings(json_t *arr)
{
    size_t n = json_array_size(arr);
    if (n < 2)
        return;
    json_t **items = malloc(n * sizeof(*items));
    if (!items)
        abort();
    for (size_t i = 0; i < n; i++)
        items[i] = json_incref(json_array_get(arr, i));
    qsort(items, n, sizeof(*items), str_cmp);
    json_array_clear(arr);
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, items[i]);
    free(items);
}

bool nb_availability_zone_exists(struct nb_ctx *ctx, const char *zone)
{
    struct nb_ctx sub;
    nb_ctx_init_system(&sub, ctx->request_id);
    _cleanup_json_ json_t *services = services_with_zones(&sub);
    if (!services || !zone || strcmp(zone, internal_zone()) == 0)
        return false;
    size_t i;
    json_t *s;
    json_array_foreach (services, i, s) {
        if (nb_json_int(s, "disabled", 0) || !is_compute(s))
            continue;
        const char *z = nb_json_str(s, "zone");
        if (strcmp(z, zone) == 0)
            return true;
    }
    return false;
}

static json_t *zone_entry(const char *name, bool available, json_t *hosts)
{
    return json_pack("{s:s, s:{s:b}, s:o}", "zoneName", name, "zoneState", "available", available,
                     "hosts", hosts ? hosts : json_null());
}

static int az_index(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    (void)req;
    _cleanup_json_ json_t *services = services_with_zones(ctx);
    if (!services)
        return -1;
    _cleanup_json_ json_t *avail = NULL, *unavail = NULL;
    split_zones(services, &avail, &unavail);
    sort_strings(avail);
    sort_strings(unavail);
    json_t *info = json_array();
    const char *internal = internal_zone();
    for (int pass = 0; pass < 2; pass++) {
        json_t *list = pass ? unavail : avail;
        size_t i;
        json_t *z;
        json_array_foreach (list, i, z) {
            if (strcmp(json_string_value(z), internal) != 0)
                json_array_append_new(info, zone_entry(json_string_value(z), !pass, NULL));
        }
    }
    return nb_resp_json(resp, 200, json_pack("{s:o}", "availabilityZoneInfo", info));
}

static int az_detail(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    (void)req;
    if (nb_res_admin(ctx, "os_compute_api:os-availability-zone:detail") < 0)
        return -1;
    _cleanup_json_ json_t *services = services_with_zones(ctx);
    if (!services)
        return -1;
    _cleanup_json_ json_t *avail = NULL, *unavail = NULL;
    split_zones(services, &avail, &unavail);
    sort_strings(avail);
    sort_strings(unavail);
    json_t *info = json_array();
    size_t i, j;
    json_t *z, *s;
    json_array_foreach (avail, i, z) {
        const char *zone = json_string_value(z);
        json_t *hosts = json_object();
        json_array_foreach (services, j, s) {
            const char *bin = nb_json_str(s, "binary");
            if (nb_json_int(s, "disabled", 0) || strcmp(nb_json_str(s, "zone"), zone) != 0 ||
                strcmp(bin, "nova-osapi_compute") == 0 || strcmp(bin, "nova-metadata") == 0)
                continue;
            const char *host = nb_json_str(s, "host");
            json_t *h = json_object_get(hosts, host);
            if (!h) {
                h = json_object();
                json_object_set_new(hosts, host, h);
            }
            json_object_set_new(h, bin,
                                json_pack("{s:b, s:b, s:o}", "available", nb_res_service_is_up(s),
                                          "active", !nb_json_int(s, "disabled", 0), "updated_at",
                                          nb_res_row_copy(s, "updated_at")));
        }
        json_array_append_new(info, zone_entry(zone, true, hosts));
    }
    json_array_foreach (unavail, i, z) {
        json_array_append_new(info, zone_entry(json_string_value(z), false, NULL));
    }
    return nb_resp_json(resp, 200, json_pack("{s:o}", "availabilityZoneInfo", info));
}

int nb_compute_availability_zones_init(struct nb_env *e)
{
    env = e;
    nb_http_route("GET", "/compute/v2.1/os-availability-zone", az_index, 0);
    nb_http_route("GET", "/compute/v2.1/os-availability-zone/detail", az_detail, 0);
    return 0;
}
