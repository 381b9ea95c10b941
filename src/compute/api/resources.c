/* resources.c - database row helpers and the compute services' liveness,
 * shared by the resource files (resources.h). */
#include "common/config.h"
#include "common/json.h"
#include "common/util.h"
#include "compute/api/resources.h"

/* --- rows and services ---------------------------------------------------------- */

json_t *nb_res_row_bool(const json_t *row, const char *key)
{
    return json_boolean(nb_json_int(row, key, 0) != 0);
}

json_t *nb_res_row_copy(const json_t *row, const char *key)
{
    json_t *v = json_object_get(row, key);
    return v ? json_deep_copy(v) : json_null();
}

bool nb_res_service_is_up(const json_t *svc)
{
    if (nb_json_int(svc, "forced_down", 0))
        return false;
    const char *hb = nb_json_str(svc, "last_seen_up");
    if (!hb || !*hb)
        hb = nb_json_str(svc, "created_at");
    double t = nb_time_parse(hb);
    if (t < 0)
        return false;
    double elapsed = nb_time_now() - t;
    if (elapsed < 0)
        elapsed = -elapsed;
    return elapsed <= (double)nb_conf_int("DEFAULT", "service_down_time", 60);
}
