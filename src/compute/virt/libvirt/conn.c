/* conn.c - the libvirt driver's connection to libvirtd, its error helpers
 * and the thread that runs libvirt's event loop (lifecycle events,
 * keepalive).
 *
 * The connection ([libvirt] connection_uri, default qemu:///system) is
 * shared by all threads (libvirt connections are thread-safe) and reopened
 * when libvirtd went away, so a libvirtd restart costs the operations in
 * flight at that moment, not the agent. */
#include "common/log.h"
#include "compute/virt/libvirt/lv.h"

#include <libvirt/virterror.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int lv_error(struct nb_ctx *ctx, int status, const char *what, ...)
{
    char head[512];
    va_list ap;
    va_start(ap, what);
    vsnprintf(head, sizeof(head), what, ap);
    va_end(ap);
    const char *msg = virGetLastErrorMessage();
    return nb_error(ctx, status, NULL, "%s: %s", head, msg ? msg : "unknown libvirt error");
}

int lv_power_state(int vir_state)
{
    switch (vir_state) {
    case VIR_DOMAIN_RUNNING:
    case VIR_DOMAIN_BLOCKED: return NB_POWER_RUNNING;
    case VIR_DOMAIN_PAUSED: return NB_POWER_PAUSED;
    case VIR_DOMAIN_SHUTDOWN:
    case VIR_DOMAIN_SHUTOFF: return NB_POWER_SHUTDOWN;
    case VIR_DOMAIN_CRASHED: return NB_POWER_CRASHED;
    case VIR_DOMAIN_PMSUSPENDED: return NB_POWER_SUSPENDED;
    default: return NB_POWER_NOSTATE;
    }
}

static void silent_error(void *opaque, virErrorPtr err)
{
    (void)opaque;
    (void)err; /* errors are read with virGetLastErrorMessage where they matter */
}

void lv_errors_silence(void)
{
    virSetErrorFunc(NULL, silent_error);
}

static int lifecycle_cb(virConnectPtr conn, virDomainPtr dom, int event, int detail, void *opaque)
{
    (void)conn;
    struct lv *lv = opaque;
    char uuid[VIR_UUID_STRING_BUFLEN];
    if (virDomainGetUUIDString(dom, uuid) < 0)
        return 0;
    const char *name = virDomainGetName(dom);
    if (!name || strcmp(name, uuid) != 0)
        return 0; /* not one of ours */
    int state = 0, reason = 0;
    int power =
        virDomainGetState(dom, &state, &reason, 0) == 0 ? lv_power_state(state) : NB_POWER_NOSTATE;
    NB_DEBUG(LV_LOG, NULL, uuid, "libvirt lifecycle event %d (detail %d): power_state %d", event,
             detail, power);
    if (lv->on_event)
        lv->on_event(lv->on_event_opaque, lv->host, uuid, power);
    return 0;
}

static int open_locked(struct lv *lv, struct nb_ctx *ctx)
{
    if (lv->conn) {
        if (lv->event_cb_id >= 0)
            virConnectDomainEventDeregisterAny(lv->conn, lv->event_cb_id);
        virConnectClose(lv->conn);
        lv->conn = NULL;
        lv->event_cb_id = -1;
    }
    lv->conn = virConnectOpen(lv->uri);
    if (!lv->conn)
        return lv_error(ctx, 503, "Connection to the hypervisor is broken on host: %s (%s)",
                        lv->host, lv->uri);
    virConnectSetKeepAlive(lv->conn, 5, 3);
    lv->event_cb_id =
        virConnectDomainEventRegisterAny(lv->conn, NULL, VIR_DOMAIN_EVENT_ID_LIFECYCLE,
                                         VIR_DOMAIN_EVENT_CALLBACK(lifecycle_cb), lv, NULL);
    if (lv->event_cb_id < 0)
        NB_WARN(LV_LOG, ctx, NULL,
                "cannot register for libvirt lifecycle events (%s): power states are synced "
                "on the period only",
                virGetLastErrorMessage());
    return 0;
}

virConnectPtr lv_conn(struct lv *lv, struct nb_ctx *ctx)
{
    pthread_mutex_lock(&lv->conn_lock);
    if (!lv->conn || virConnectIsAlive(lv->conn) != 1) {
        if (lv->conn)
            NB_WARN(LV_LOG, ctx, NULL, "the connection to libvirt (%s) was lost; reconnecting",
                    lv->uri);
        if (open_locked(lv, ctx) < 0) {
            pthread_mutex_unlock(&lv->conn_lock);
            return NULL;
        }
    }
    virConnectPtr c = lv->conn;
    pthread_mutex_unlock(&lv->conn_lock);
    return c;
}

static void *event_main(void *arg)
{
    struct lv *lv = arg;
    while (!__atomic_load_n(&lv->event_stop, __ATOMIC_ACQUIRE)) {
        if (virEventRunDefaultImpl() < 0) {
            NB_WARN(LV_LOG, NULL, NULL, "libvirt event loop: %s", virGetLastErrorMessage());
            usleep(100 * 1000);
        }
    }
    return NULL;
}

/* A timer that fires every 500 ms keeps the event loop turning, so the
 * stop flag is seen promptly. */
static void tick(int timer, void *opaque)
{
    (void)timer;
    (void)opaque;
}

/* libvirt's default event loop implementation, registered once per process
 * (before the first connection), run by one thread per driver. */
static void register_event_impl(void)
{
    virEventRegisterDefaultImpl();
    virEventAddTimeout(500, tick, NULL, NULL);
}

int lv_events_start(struct lv *lv)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, register_event_impl);
    if (pthread_create(&lv->event_thread, NULL, event_main, lv) != 0)
        return -1;
    lv->event_running = true;
    return 0;
}

void lv_conn_close(struct lv *lv)
{
    if (lv->event_running) {
        __atomic_store_n(&lv->event_stop, true, __ATOMIC_RELEASE);
        pthread_join(lv->event_thread, NULL);
    }
    if (lv->conn) {
        if (lv->event_cb_id >= 0)
            virConnectDomainEventDeregisterAny(lv->conn, lv->event_cb_id);
        virConnectClose(lv->conn);
    }
}

virDomainPtr lv_lookup(struct lv *lv, struct nb_ctx *ctx, const char *uuid, bool must)
{
    virConnectPtr conn = lv_conn(lv, ctx);
    if (!conn)
        return NULL;
    virDomainPtr dom = uuid ? virDomainLookupByUUIDString(conn, uuid) : NULL;
    if (!dom && must)
        nb_error(ctx, 404, NULL, "Instance %s could not be found on host %s.", uuid ? uuid : "?",
                 lv->host);
    return dom;
}

int lv_dom_state(virDomainPtr dom)
{
    int state = VIR_DOMAIN_NOSTATE, reason = 0;
    if (virDomainGetState(dom, &state, &reason, 0) < 0)
        return VIR_DOMAIN_NOSTATE;
    return state;
}
