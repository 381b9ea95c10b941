/* service.c - service rows and heartbeats of the control-plane roles that
 * have a database (nova-conductor, nova-scheduler), so that
 * `openstack compute service list` shows them up or down as Nova does. The
 * compute agents keep their own rows through the conductor. One thread
 * beats for every role registered in this process. */
#include "common/config.h"
#include "common/log.h"
#include "common/util.h"
#include "compute/compute.h"
#include "db/db.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_KEEPALIVE 8

static struct {
    struct nb_db *db;
    char host[256];
    char binary[64];
} beats[MAX_KEEPALIVE];
static int nbeats;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static pthread_t thread;
static bool running, stopping;

/* Upserts the service row and bumps its heartbeat. 0/-1. */
static int beat(struct nb_db *db, const char *host, const char *binary, const char *topic)
{
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    char now[32];
    nb_now_iso_us(now);
    int n = nb_db_exec(db, &ctx,
                       "UPDATE services SET last_seen_up = ?, updated_at = ?, report_count = "
                       "report_count + 1 WHERE host = ? AND \"binary\" = ? AND deleted = 0",
                       "ssss", now, now, host, binary);
    if (n == 0 && topic) {
        char uuid[NB_UUID_LEN];
        nb_uuid(uuid);
        n = nb_db_exec(db, &ctx,
                       "INSERT INTO services (uuid, host, \"binary\", topic, report_count, "
                       "last_seen_up, created_at, updated_at) VALUES (?, ?, ?, ?, 1, ?, ?, ?)",
                       "sssssss", uuid, host, binary, topic, now, now, now);
        if (n > 0)
            NB_INFO("nubo.conductor.manager", &ctx, NULL, "Registered service %s on host %s",
                    binary, host);
    }
    return n < 0 ? -1 : 0;
}

static void *beat_loop(void *arg)
{
    (void)arg;
    long interval = nb_conf_int("DEFAULT", "report_interval", 10);
    pthread_mutex_lock(&lock);
    while (!stopping) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += interval > 0 ? interval : 10;
        pthread_cond_timedwait(&wake, &lock, &until);
        if (stopping)
            break;
        for (int i = 0; i < nbeats; i++)
            beat(beats[i].db, beats[i].host, beats[i].binary, NULL);
    }
    pthread_mutex_unlock(&lock);
    return NULL;
}

int nb_service_keepalive_start(struct nb_db *db, const char *host, const char *binary,
                               const char *topic)
{
    if (beat(db, host, binary, topic) < 0)
        return -1;
    pthread_mutex_lock(&lock);
    if (nbeats < MAX_KEEPALIVE) {
        beats[nbeats].db = db;
        nb_strlcpy(beats[nbeats].host, host, sizeof(beats[nbeats].host));
        nb_strlcpy(beats[nbeats].binary, binary, sizeof(beats[nbeats].binary));
        nbeats++;
    }
    if (!running && pthread_create(&thread, NULL, beat_loop, NULL) == 0)
        running = true;
    pthread_mutex_unlock(&lock);
    return 0;
}

void nb_service_keepalive_stop(void)
{
    pthread_mutex_lock(&lock);
    stopping = true;
    pthread_cond_broadcast(&wake);
    pthread_mutex_unlock(&lock);
    if (running)
        pthread_join(thread, NULL);
    running = false;
}
