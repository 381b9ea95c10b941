/* nb_vif_wait_active: the libvirt driver's wait for "network-vif-plugged"
 * (Nova's _create_guest_with_network with [DEFAULT] vif_plugging_timeout
 * and vif_plugging_is_fatal): a guest is reported running only once the
 * host's agent has wired its taps and the plugin marked the ports ACTIVE,
 * so a server that turns ACTIVE has ports that carry traffic (Tempest's
 * scenario tests look for an ACTIVE port the moment the server is ACTIVE).
 * The statuses are asked of the plugin over the bus ("get_port_statuses"),
 * so a compute host apart from the database waits the same way. */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "bus/bus.h"
#include "network/agent/netagent.h"

#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LOG_VW "nova.virt.libvirt.driver"

/* The ids of inst's bridge VIFs (the ones a host agent wires). New ref. */
static json_t *bridge_vifs(const json_t *inst)
{
    json_t *ids = json_array();
    size_t i;
    json_t *vif;
    json_array_foreach (json_object_get(inst, "network_info"), i, vif) {
        const char *type = nb_json_str(vif, "type"), *id = nb_json_str(vif, "id");
        if (type && id && !strcmp(type, "bridge"))
            json_array_append_new(ids, json_string(id));
    }
    return ids;
}

/* 1: all ACTIVE, 0: not yet, -1: a port failed or the plugin cannot say
 * (error on ctx; *last: the first port not ACTIVE and its status). */
static int check_once(struct nb_ctx *ctx, const json_t *ids, char *last, size_t n)
{
    json_t *r = nb_bus_call(ctx, "q-plugin", "get_port_statuses",
                            json_pack("{s:O}", "port_ids", ids), 10000);
    if (!r)
        return -1;
    _cleanup_json_ json_t *reply = r;
    const json_t *st = json_object_get(reply, "statuses");
    size_t i;
    json_t *id;
    json_array_foreach (ids, i, id) {
        const json_t *p = json_object_get(st, json_string_value(id));
        const char *status = nb_json_str(p, "status");
        if (status && !strcmp(status, "ACTIVE"))
            continue;
        const char *why = nb_json_str(p, "status_reason");
        snprintf(last, n, "port %s is %s%s%s", json_string_value(id), status ? status : "gone",
                 why && *why ? ": " : "", why && *why ? why : "");
        if (!status)
            return nb_error(ctx, 500, NULL, "Virtual Interface creation failed: %s", last);
        if (!strcmp(status, "ERROR"))
            return nb_error(ctx, 500, NULL, "Virtual Interface creation failed: %s", last);
        return 0;
    }
    return 1;
}

/* The events seen: a counter the waits sleep on between two asks of the
 * plugin. An event wakes them all (a host has a handful of waits); each
 * asks again, so no event is tied to one wait and none can be missed. */
static pthread_mutex_t ev_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ev_cond = PTHREAD_COND_INITIALIZER;
static unsigned long ev_seq;

void nb_vif_event(const char *port_id, const char *status)
{
    (void)port_id, (void)status;
    pthread_mutex_lock(&ev_lock);
    ev_seq++;
    pthread_cond_broadcast(&ev_cond);
    pthread_mutex_unlock(&ev_lock);
}

/* Sleeps up to secs, or until an event after seen. */
static void wait_event(unsigned long seen, double secs)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    long long ns = until.tv_nsec + (long long)(secs * 1e9);
    until.tv_sec += (time_t)(ns / 1000000000LL);
    until.tv_nsec = (long)(ns % 1000000000LL);
    pthread_mutex_lock(&ev_lock);
    while (ev_seq == seen)
        if (pthread_cond_timedwait(&ev_cond, &ev_lock, &until) != 0)
            break;
    pthread_mutex_unlock(&ev_lock);
}

int nb_vif_wait_active(struct nb_ctx *ctx, const json_t *inst)
{
    _cleanup_json_ json_t *ids = bridge_vifs(inst);
    long long timeout = nb_conf_int("DEFAULT", "vif_plugging_timeout", 300);
    if (!json_array_size(ids) || timeout <= 0)
        return 0;
    const char *uuid = nb_json_str(inst, "uuid");
    double t0 = nb_time_mono();
    char last[512] = "";
    for (;;) {
        pthread_mutex_lock(&ev_lock);
        unsigned long seen = ev_seq;
        pthread_mutex_unlock(&ev_lock);
        int rc = check_once(ctx, ids, last, sizeof(last));
        if (rc == 1) {
            NB_DEBUG(LOG_VW, ctx, uuid, "network-vif-plugged for %zu VIF(s) after %.2f s",
                     json_array_size(ids), nb_time_mono() - t0);
            return 0;
        }
        if (rc < 0)
            return -1;
        if (nb_time_mono() - t0 >= (double)timeout)
            break;
        /* the plugin's event wakes this; asking every half second is the
         * fallback when an event is lost */
        wait_event(seen, 0.5);
    }
    if (!nb_conf_bool("DEFAULT", "vif_plugging_is_fatal", true)) {
        NB_WARN(LOG_VW, ctx, uuid, "Timeout waiting for network-vif-plugged (%s) after %lld s",
                last, timeout);
        return 0;
    }
    return nb_error(ctx, 500, NULL,
                    "Virtual Interface creation failed: timeout waiting for network-vif-plugged "
                    "after %lld s ([DEFAULT] vif_plugging_timeout): %s; is the network agent of "
                    "this host alive (openstack network agent list)?",
                    timeout, last);
}
