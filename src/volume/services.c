/* services.c - the Block Storage service's service records and
 * GET /volume/v3/{project_id}/os-services (`openstack volume service list`).
 *
 * What nubo runs of Cinder lives in the process that serves the volume API:
 * the scheduling of a volume onto a share (cinder-scheduler's part) and the
 * NFS-style file backend (cinder-volume, host "<host>@nfs" as the volumes'
 * host column says). Each gets a row in volume_services, registered at
 * start and kept up by a heartbeat every [DEFAULT] report_interval seconds
 * from one thread, until nb_volume_shutdown(). A row is "up" when its
 * updated_at is within [DEFAULT] service_down_time, as Cinder's index says;
 * a process that died leaves its rows to go down. */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/http.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "db/db.h"
#include "volume/volume.h"
#include "volume/volume_int.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static struct {
    char scheduler_host[256], volume_host[300];
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_t thread;
    bool running, stopping;
} svc = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

/* Bumps the heartbeat of (host, binary), inserting the row the first time.
 * 0/-1 (logged). */
static int beat(const char *host, const char *binary, const char *topic)
{
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    char now[32];
    nb_now_iso_us(now);
    struct nb_db *db = nb_vol_env->db;
    int n = nb_db_exec(db, &ctx,
                       "UPDATE volume_services SET updated_at = ?, report_count = report_count + "
                       "1 WHERE host = ? AND \"binary\" = ? AND deleted = 0",
                       "sss", now, host, binary);
    if (n == 0) {
        n = nb_db_exec(db, &ctx,
                       "INSERT INTO volume_services (host, \"binary\", topic, report_count, "
                       "availability_zone, created_at, updated_at) VALUES (?, ?, ?, 1, ?, ?, ?)",
                       "ssssss", host, binary, topic, nb_vol_az(), now, now);
        if (n > 0)
            NB_INFO(NB_VOL_LOG, &ctx, NULL, "Registered service %s on host %s", binary, host);
    }
    if (n < 0)
        NB_ERROR(NB_VOL_LOG, &ctx, NULL, "could not record the heartbeat of %s on %s: %s", binary,
                 host, nb_ctx_message(&ctx));
    return n < 0 ? -1 : 0;
}

static void beat_all(void)
{
    beat(svc.scheduler_host, "cinder-scheduler", "cinder-scheduler");
    beat(svc.volume_host, "cinder-volume", "cinder-volume");
}

static void *beat_loop(void *arg)
{
    (void)arg;
    long interval = nb_conf_int("DEFAULT", "report_interval", 10);
    pthread_mutex_lock(&svc.lock);
    while (!svc.stopping) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += interval > 0 ? interval : 10;
        pthread_cond_timedwait(&svc.wake, &svc.lock, &until);
        if (!svc.stopping)
            beat_all();
    }
    pthread_mutex_unlock(&svc.lock);
    return NULL;
}

int nb_vol_services_start(void)
{
    snprintf(svc.scheduler_host, sizeof(svc.scheduler_host), "%s", nb_vol_env->my_host);
    snprintf(svc.volume_host, sizeof(svc.volume_host), "%s@nfs", nb_vol_env->my_host);
    pthread_mutex_lock(&svc.lock);
    beat_all();
    svc.stopping = false;
    if (!svc.running && pthread_create(&svc.thread, NULL, beat_loop, NULL) == 0)
        svc.running = true;
    pthread_mutex_unlock(&svc.lock);
    return svc.running ? 0 : -1;
}

void nb_volume_shutdown(void)
{
    pthread_mutex_lock(&svc.lock);
    svc.stopping = true;
    pthread_cond_broadcast(&svc.wake);
    pthread_mutex_unlock(&svc.lock);
    if (svc.running)
        pthread_join(svc.thread, NULL);
    svc.running = false;
}

/* One row as Cinder's services index shows it at ctx's microversion (with
 * os-extended-services, which Cinder loads by default). New ref. */
static json_t *service_view(const struct nb_ctx *ctx, const json_t *row)
{
    const char *updated = nb_json_str(row, "updated_at");
    if (!updated)
        updated = nb_json_str(row, "created_at");
    double t = updated ? nb_time_parse(updated) : -1;
    bool up = t > 0 && nb_time_now() - t <= (double)nb_conf_int("DEFAULT", "service_down_time", 60);
    bool volume = !strcmp(nb_json_str(row, "binary"), "cinder-volume");
    json_t *v = json_pack(
        "{s:s, s:s, s:s?, s:s, s:s, s:s?, s:s?}", "binary", nb_json_str(row, "binary"), "host",
        nb_json_str(row, "host"), "zone", nb_json_str(row, "availability_zone"), "status",
        nb_json_int(row, "disabled", 0) ? "disabled" : "enabled", "state", up ? "up" : "down",
        "updated_at", updated, "disabled_reason", nb_json_str(row, "disabled_reason"));
    if (volume && nb_vol_mv(ctx, 49))
        json_object_set_new(v, "backend_state", json_string(up ? "up" : "down"));
    if (nb_vol_mv(ctx, 7))
        json_object_set_new(v, "cluster", json_null());
    if (volume) {
        json_object_set_new(v, "replication_status", json_string("disabled"));
        json_object_set_new(v, "active_backend_id", json_null());
        json_object_set_new(v, "frozen", json_false());
    }
    return v;
}

/* GET os-services: admin only (volume_extension:services:index), filters
 * host and binary. */
static int services_index(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_vol_begin(ctx, req, resp) < 0)
        return -1;
    if (!ctx->is_admin)
        return nb_error(ctx, 403, NULL,
                        "Policy doesn't allow volume_extension:services:index to be performed.");
    const char *host = nb_req_query(req, "host"), *binary = nb_req_query(req, "binary");
    _cleanup_json_ json_t *rows =
        nb_db_rows(nb_vol_env->db, ctx,
                   "SELECT host, \"binary\", disabled, disabled_reason, availability_zone, "
                   "created_at, updated_at FROM volume_services WHERE deleted = 0 AND "
                   "(? IS NULL OR host = ?) AND (? IS NULL OR \"binary\" = ?) ORDER BY id",
                   "ssss", host, host, binary, binary);
    if (!rows)
        return -1;
    json_t *list = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        json_array_append_new(list, service_view(ctx, r));
    }
    return nb_resp_json(resp, 200, json_pack("{s:o}", "services", list));
}

void nb_vol_services_routes(void)
{
    nb_http_route("GET", "/volume/v3/{project_id}/os-services", services_index, 0);
}
