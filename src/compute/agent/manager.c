/* manager.c - the compute agent: the "compute.<host>" handler (spawn,
 * through builds.c; power actions, terminate, console), agent start/stop,
 * and the one periodic thread that runs heartbeats, usage reports and
 * power sync for every agent of the process.
 *
 * The agent reports every outcome back to the conductor (build_result,
 * op_result); it writes no state itself. Driver errors carry the driver's
 * own message, which becomes the fault message. Operations on one instance
 * are serialised with a striped lock. Before a domain starts, the formats of
 * its volume files are checked (disk_format.c). */
#include "bus/bus.h"
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "compute/agent/agent.h"
#include "compute/agent/internal.h"
#include "compute/agent/svc_client.h"
#include "compute/rpc/compute_api.h"
#include "compute/rpc/conductor_api.h"
#include "network/agent/netagent.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The agents of this process (nb_compute_agents_stop has no argument, so
 * the registry is process-wide). */
static pthread_mutex_t agents_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t agents_cond = PTHREAD_COND_INITIALIZER;
static struct agent *agents;
static bool periodic_running, periodic_stop;
static pthread_t periodic_thread;

/* A lock per instance, as Nova's @synchronized(instance.uuid): made on
 * first use and freed when no one holds or waits for it, so operations on
 * different instances never wait for each other. */
struct agent_ilock {
    char uuid[NB_UUID_LEN];
    pthread_mutex_t m;
    int refs; /* holders and waiters; under a->ilocks_lock */
    struct agent_ilock *next;
};

struct agent_ilock *nb_agent_lock(struct agent *a, const char *uuid)
{
    pthread_mutex_lock(&a->ilocks_lock);
    struct agent_ilock *l = a->ilocks;
    while (l && strcmp(l->uuid, uuid ? uuid : ""))
        l = l->next;
    if (!l) {
        l = calloc(1, sizeof(*l));
        nb_strlcpy(l->uuid, uuid ? uuid : "", sizeof(l->uuid));
        pthread_mutex_init(&l->m, NULL);
        l->next = a->ilocks;
        a->ilocks = l;
    }
    l->refs++;
    pthread_mutex_unlock(&a->ilocks_lock);
    pthread_mutex_lock(&l->m);
    return l;
}

void nb_agent_unlock(struct agent *a, struct agent_ilock *l)
{
    pthread_mutex_unlock(&l->m);
    pthread_mutex_lock(&a->ilocks_lock);
    if (--l->refs == 0) {
        for (struct agent_ilock **p = &a->ilocks; *p; p = &(*p)->next)
            if (*p == l) {
                *p = l->next;
                break;
            }
        pthread_mutex_destroy(&l->m);
        free(l);
    }
    pthread_mutex_unlock(&a->ilocks_lock);
}

static int guest_power_state(struct agent *a, struct nb_ctx *ctx, const char *uuid)
{
    struct nb_ctx tmp;
    nb_ctx_child(&tmp, ctx);
    struct nb_guest_info gi = {0};
    if (a->drv->ops->get_info(a->drv, &tmp, a->host, uuid, &gi) < 0)
        return NB_POWER_NOSTATE;
    return gi.power_state;
}

int nb_agent_guest_power_state(struct agent *a, struct nb_ctx *ctx, const char *uuid)
{
    return guest_power_state(a, ctx, uuid);
}

/* The driver entry point of a pause/unpause/suspend/resume op (NULL when
 * the driver has none). */
typedef int (*guest_op_fn)(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                           json_t *instance);
static guest_op_fn guest_op(const struct nb_virt_ops *ops, const char *op, const char **done)
{
    if (!strcmp(op, "pause")) {
        *done = "Instance paused";
        return ops->pause;
    }
    if (!strcmp(op, "unpause")) {
        *done = "Instance unpaused";
        return ops->unpause;
    }
    if (!strcmp(op, "suspend")) {
        *done = "Instance suspended";
        return ops->suspend;
    }
    *done = "Instance resumed";
    return ops->resume;
}

/* Runs op on the driver (instance lock held). 0/-1 with the error on dctx;
 * *unsupported set when the driver lacks the op (Nova's
 * NotImplementedError). */
static int run_op(struct agent *a, struct nb_ctx *dctx, const char *op, json_t *inst, bool hard,
                  const char **done, bool *unsupported)
{
    *unsupported = false;
    if (!strcmp(op, "start")) {
        *done = "Instance started";
        return a->drv->ops->power_on(a->drv, dctx, a->host, inst);
    }
    if (!strcmp(op, "stop")) {
        *done = "Instance shut down";
        return a->drv->ops->power_off(
            a->drv, dctx, a->host, inst,
            (int)nb_conf_int("compute", "shutdown_timeout",
                             nb_conf_int("DEFAULT", "shutdown_timeout", 60)));
    }
    if (!strcmp(op, "reboot")) {
        *done = hard ? "Instance rebooted (hard)" : "Instance rebooted (soft)";
        return a->drv->ops->reboot(a->drv, dctx, a->host, inst, hard);
    }
    if (!strcmp(op, "terminate")) {
        *done = "Instance destroyed successfully.";
        __atomic_store_n(&a->dirty, true, __ATOMIC_RELAXED);
        return a->drv->ops->destroy(a->drv, dctx, a->host, inst);
    }
    guest_op_fn fn = guest_op(a->drv->ops, op, done);
    if (!fn) {
        *unsupported = true;
        return nb_error(dctx, 501, NULL, "The %s virt driver does not support %s.",
                        a->drv->ops->name, op);
    }
    return fn(a->drv, dctx, a->host, inst);
}

/* start/stop/reboot/terminate/pause/unpause/suspend/resume: the driver
 * call, then op_result with the guest's power state after it. */
static void power_op(struct agent *a, struct nb_ctx *ctx, const char *op, json_t *args)
{
    json_t *inst = json_object_get(args, "instance");
    const char *uuid = nb_json_str(inst, "uuid");
    if (!uuid)
        return;
    bool hard =
        !strcmp(nb_json_str(args, "reboot_type") ? nb_json_str(args, "reboot_type") : "", "HARD");
    struct nb_ctx dctx;
    nb_ctx_child(&dctx, ctx);
    struct agent_ilock *lk = nb_agent_lock(a, uuid);
    const char *done = NULL;
    bool unsupported = false;
    /* the ops that start a domain check its volumes' formats first */
    bool starts = !strcmp(op, "start") || !strcmp(op, "resume") || (!strcmp(op, "reboot") && hard);
    int rc = starts ? nb_agent_verify_disks(a, &dctx, inst, NULL) : 0;
    if (rc == 0)
        rc = run_op(a, &dctx, op, inst, hard, &done, &unsupported);
    int power = !strcmp(op, "terminate") ? NB_POWER_NOSTATE : guest_power_state(a, ctx, uuid);
    nb_agent_unlock(a, lk);
    if (rc == 0)
        NB_INFO(LOG_AGENT, ctx, uuid, "%s", done);
    else
        NB_ERROR(LOG_AGENT, ctx, uuid, "%s of the instance failed on %s: %s", op, a->host,
                 nb_ctx_message(&dctx));
    const struct nb_op_result res = {
        uuid, a->host, op, rc == 0, rc == 0 ? NULL : nb_ctx_message(&dctx), power, unsupported};
    nb_conductor_op_result(ctx, &res);
}

/* attach_volume / detach_volume {"instance", "bdm"}: the driver hot-plugs
 * or unplugs the volume (an attach first checks the volume file's format),
 * then attach_result / detach_result. A driver without the op is Nova's
 * NotImplementedError (501). */
static void volume_op(struct agent *a, struct nb_ctx *ctx, json_t *args, bool attach)
{
    json_t *inst = json_object_get(args, "instance");
    json_t *bdm = json_object_get(args, "bdm");
    const char *uuid = nb_json_str(inst, "uuid");
    if (!uuid || !json_is_object(bdm))
        return;
    const char *vid = nb_json_str(bdm, "volume_id");
    struct nb_ctx dctx;
    nb_ctx_child(&dctx, ctx);
    int (*fn)(struct nb_virt_driver *, struct nb_ctx *, const char *, json_t *, const json_t *) =
        attach ? a->drv->ops->attach_volume : a->drv->ops->detach_volume;
    struct agent_ilock *lk = nb_agent_lock(a, uuid);
    int rc;
    if (!fn)
        rc = nb_error(&dctx, 501, NULL, "The %s virt driver does not support %s.",
                      a->drv->ops->name, attach ? "attach_volume" : "detach_volume");
    else if (attach && nb_agent_verify_disks(a, &dctx, inst, bdm) < 0)
        rc = -1;
    else
        rc = fn(a->drv, &dctx, a->host, inst, bdm);
    nb_agent_unlock(a, lk);
    if (rc == 0)
        NB_INFO(LOG_AGENT, ctx, uuid, "%s volume %s %s %s", attach ? "Attached" : "Detached",
                vid ? vid : "?", attach ? "at" : "from",
                nb_json_str(bdm, "device_name") ? nb_json_str(bdm, "device_name") : "?");
    else
        NB_ERROR(LOG_AGENT, ctx, uuid, "Failed to %s volume %s: %s", attach ? "attach" : "detach",
                 vid ? vid : "?", nb_ctx_message(&dctx));
    (attach ? nb_conductor_attach_result
            : nb_conductor_detach_result)(ctx, uuid, a->host, nb_json_str(bdm, "uuid"), vid,
                                          rc == 0, rc == 0 ? NULL : nb_ctx_message(&dctx));
}

/* Where snapshots are written before the upload: Nova's
 * [libvirt] snapshots_directory, $instances_path/snapshots. */
static void snapshot_dir(char *out, size_t n)
{
    const char *ip = nb_conf_str("DEFAULT", "instances_path", NULL);
    if (ip && *ip)
        snprintf(out, n, "%s/snapshots", ip);
    else
        snprintf(out, n, "%s/instances/snapshots",
                 nb_conf_str("DEFAULT", "state_path", "/var/lib/nubo"));
}

/* snapshot_instance {"instance", "image_id"}: the driver writes a qcow2
 * copy of the root disk to a temporary file, which is uploaded as the
 * image's data and removed; then snapshot_result. The instance lock is
 * held throughout, so no power action runs in between. */
static void snapshot_instance(struct agent *a, struct nb_ctx *ctx, json_t *args)
{
    json_t *inst = json_object_get(args, "instance");
    const char *uuid = nb_json_str(inst, "uuid");
    const char *image_id = nb_json_str(args, "image_id");
    if (!uuid || !image_id)
        return;
    struct nb_ctx dctx;
    nb_ctx_child(&dctx, ctx);
    char dir[4096], path[4200];
    snapshot_dir(dir, sizeof(dir));
    snprintf(path, sizeof(path), "%s/%s.qcow2", dir, image_id);
    double t0 = nb_time_mono();
    struct agent_ilock *lk = nb_agent_lock(a, uuid);
    int rc = 0;
    if (!a->drv->ops->snapshot)
        rc = nb_error(&dctx, 501, NULL, "The %s virt driver does not support snapshot.",
                      a->drv->ops->name);
    else if (nb_mkdir_p(dir) < 0)
        rc = nb_error(&dctx, 500, NULL, "Cannot create the snapshot directory %s.", dir);
    if (rc == 0) {
        NB_INFO(LOG_AGENT, ctx, uuid, "instance snapshotting");
        rc = a->drv->ops->snapshot(a->drv, &dctx, a->host, inst, path);
    }
    if (rc == 0) {
        NB_INFO(LOG_AGENT, ctx, uuid,
                "Took %.2f seconds to snapshot the instance on the hypervisor.",
                nb_time_mono() - t0);
        rc = nb_svc_image_upload(&dctx, image_id, path);
    }
    unlink(path);
    nb_agent_unlock(a, lk);
    if (rc == 0)
        NB_INFO(LOG_AGENT, ctx, uuid, "Snapshot image upload complete (image %s)", image_id);
    else
        NB_ERROR(LOG_AGENT, ctx, uuid, "Snapshot to image %s failed: %s", image_id,
                 nb_ctx_message(&dctx));
    nb_conductor_snapshot_result(ctx, uuid, a->host, image_id, rc == 0,
                                 rc == 0 ? NULL : nb_ctx_message(&dctx));
}

static void destroy_guest(struct agent *a, struct nb_ctx *ctx, json_t *args)
{
    const char *uuid = nb_json_str(args, "uuid");
    if (!uuid)
        return;
    struct nb_ctx dctx;
    nb_ctx_child(&dctx, ctx);
    _cleanup_json_ json_t *inst = json_pack("{s:s}", "uuid", uuid);
    struct agent_ilock *lk = nb_agent_lock(a, uuid);
    int rc = a->drv->ops->destroy(a->drv, &dctx, a->host, inst);
    nb_agent_unlock(a, lk);
    __atomic_store_n(&a->dirty, true, __ATOMIC_RELAXED);
    if (rc == 0)
        NB_INFO(LOG_AGENT, ctx, uuid, "Guest of a deleted instance destroyed on %s", a->host);
    else
        NB_ERROR(LOG_AGENT, ctx, uuid, "Could not destroy the guest on %s: %s", a->host,
                 nb_ctx_message(&dctx));
}

/* The tail of a console log as Nova's _tail_log cuts it: the last `length`
 * pieces of the text split at newlines (so a final newline counts as one
 * empty piece), "" for 0, all of it for a negative length. Borrowed
 * pointer into text. */
static const char *console_tail(const char *text, long long length)
{
    if (length < 0)
        return text;
    size_t len = strlen(text);
    if (length == 0)
        return text + len;
    long long seen = 0;
    for (size_t i = len; i > 0; i--)
        if (text[i - 1] == '\n' && ++seen == length)
            return text + i;
    return text;
}

/* Nova's get_console_output: the driver's serial log, its tail when a
 * length is given. A driver without console_log is Nova's
 * NotImplementedError (code 501); a missing guest or log is 404. */
static json_t *console_output(struct agent *a, struct nb_ctx *ctx, json_t *args)
{
    const char *uuid = nb_json_str(args, "uuid");
    json_t *l = json_object_get(args, "length");
    long long length = json_is_integer(l) ? json_integer_value(l) : -1;
    if (!a->drv->ops->console_log)
        return json_pack("{s:s, s:i}", "error", "The virt driver does not provide console logs.",
                         "code", 501);
    struct nb_ctx dctx;
    nb_ctx_child(&dctx, ctx);
    _cleanup_free_ char *text = a->drv->ops->console_log(a->drv, &dctx, a->host, uuid);
    if (!text)
        return json_pack("{s:s, s:i}", "error",
                         nb_ctx_failed(&dctx) ? nb_ctx_message(&dctx)
                                              : "No console log is available.",
                         "code", nb_ctx_failed(&dctx) ? nb_ctx_status(&dctx) : 404);
    return json_pack("{s:s}", "output", console_tail(text, length));
}

/* Nova's power_state.STATE_MAP names. */
static const char *power_state_name(int s)
{
    switch (s) {
    case NB_POWER_RUNNING: return "running";
    case NB_POWER_PAUSED: return "paused";
    case NB_POWER_SHUTDOWN: return "shutdown";
    case NB_POWER_CRASHED: return "crashed";
    case NB_POWER_SUSPENDED: return "suspended";
    default: return "pending";
    }
}

/* Nova's get_diagnostics / get_instance_diagnostics: only a running guest
 * (409 with its power state otherwise); a driver without diagnostics is
 * NotImplementedError (501); a missing guest is 404. */
static json_t *diagnostics(struct agent *a, struct nb_ctx *ctx, json_t *args)
{
    const char *uuid = nb_json_str(args, "uuid");
    if (!a->drv->ops->diagnostics)
        return json_pack("{s:s, s:i}", "error", "The virt driver does not provide diagnostics.",
                         "code", 501);
    struct nb_ctx dctx;
    nb_ctx_child(&dctx, ctx);
    struct nb_guest_info gi = {0};
    if (!uuid || a->drv->ops->get_info(a->drv, &dctx, a->host, uuid, &gi) < 0)
        return json_pack("{s:s, s:i}", "error",
                         nb_ctx_failed(&dctx) ? nb_ctx_message(&dctx) : "No such guest.", "code",
                         404);
    if (gi.power_state != NB_POWER_RUNNING)
        return json_pack("{s:s, s:i, s:s}", "error", "The guest is not running.", "code", 409,
                         "state", power_state_name(gi.power_state));
    NB_INFO(LOG_AGENT, ctx, uuid, "Retrieving diagnostics");
    json_t *d = a->drv->ops->diagnostics(a->drv, &dctx, a->host, uuid,
                                         json_is_true(json_object_get(args, "standard")));
    if (!d)
        return json_pack("{s:s, s:i}", "error",
                         nb_ctx_failed(&dctx) ? nb_ctx_message(&dctx) : "No diagnostics.", "code",
                         nb_ctx_failed(&dctx) ? nb_ctx_status(&dctx) : 404);
    return json_pack("{s:o}", "diagnostics", d);
}

/* uptime(1)'s line for the host (os-hypervisors uptime): the agent runs on
 * the host, so the host's /proc is read. A JSON string, or null. */
static json_t *host_uptime(void)
{
    double up = 0, l1 = 0, l5 = 0, l15 = 0;
    FILE *f = fopen("/proc/uptime", "r");
    if (!f || fscanf(f, "%lf", &up) != 1) {
        if (f)
            fclose(f);
        return json_null();
    }
    fclose(f);
    if ((f = fopen("/proc/loadavg", "r"))) {
        if (fscanf(f, "%lf %lf %lf", &l1, &l5, &l15) != 3)
            l1 = l5 = l15 = 0;
        fclose(f);
    }
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    long mins = (long)up / 60, days = mins / 1440;
    char span[64];
    if (days > 0)
        snprintf(span, sizeof(span), "%ld day%s, %2ld:%02ld", days, days == 1 ? "" : "s",
                 (mins % 1440) / 60, mins % 60);
    else if (mins >= 60)
        snprintf(span, sizeof(span), "%2ld:%02ld", mins / 60, mins % 60);
    else
        snprintf(span, sizeof(span), "%ld min", mins);
    char line[256];
    snprintf(line, sizeof(line), " %02d:%02d:%02d up %s,  0 users,  load average: %.2f, %.2f, %.2f",
             tm.tm_hour, tm.tm_min, tm.tm_sec, span, l1, l5, l15);
    return json_string(line);
}

/* The methods as bus handlers (the bus passes the agent as opaque). */
static json_t *rpc_build_and_run(void *a, struct nb_ctx *ctx, const char *method, json_t *args)
{
    (void)method;
    nb_agent_build_and_run(a, ctx, args);
    return NULL;
}

/* start_instance … resume_instance and terminate_instance: power_op with
 * the method's op. */
#define POWER_OP(name, op)                                                                         \
    static json_t *name(void *a, struct nb_ctx *ctx, const char *method, json_t *args)             \
    {                                                                                              \
        (void)method;                                                                              \
        power_op(a, ctx, op, args);                                                                \
        return NULL;                                                                               \
    }
POWER_OP(rpc_start, "start")
POWER_OP(rpc_stop, "stop")
POWER_OP(rpc_reboot, "reboot")
POWER_OP(rpc_terminate, "terminate")
POWER_OP(rpc_pause, "pause")
POWER_OP(rpc_unpause, "unpause")
POWER_OP(rpc_suspend, "suspend")
POWER_OP(rpc_resume, "resume")

static json_t *rpc_rebuild(void *a, struct nb_ctx *ctx, const char *method, json_t *args)
{
    (void)method;
    nb_agent_rebuild_instance(a, ctx, args);
    return NULL;
}

static json_t *rpc_attach_volume(void *a, struct nb_ctx *ctx, const char *method, json_t *args)
{
    (void)method;
    volume_op(a, ctx, args, true);
    return NULL;
}

static json_t *rpc_detach_volume(void *a, struct nb_ctx *ctx, const char *method, json_t *args)
{
    (void)method;
    volume_op(a, ctx, args, false);
    return NULL;
}

static json_t *rpc_snapshot(void *a, struct nb_ctx *ctx, const char *method, json_t *args)
{
    (void)method;
    snapshot_instance(a, ctx, args);
    return NULL;
}

static json_t *rpc_destroy_guest(void *a, struct nb_ctx *ctx, const char *method, json_t *args)
{
    (void)method;
    destroy_guest(a, ctx, args);
    return NULL;
}

/* Nova's external_instance_event: each event logged as Nova does
 * ("Received event <name>-<tag>"); network-vif-plugged wakes the driver's
 * wait for that port (nb_vif_event). */
static json_t *rpc_external_event(void *a, struct nb_ctx *ctx, const char *method, json_t *args)
{
    (void)a, (void)method;
    size_t i;
    json_t *ev;
    json_array_foreach (json_object_get(args, "events"), i, ev) {
        const char *name = nb_json_str(ev, "name"), *tag = nb_json_str(ev, "tag");
        const char *status = nb_json_str(ev, "status");
        NB_INFO(LOG_AGENT, ctx, nb_json_str(ev, "server_uuid"), "Received event %s%s%s (%s)",
                name ? name : "?", tag ? "-" : "", tag ? tag : "", status ? status : "completed");
        if (name && tag && !strcmp(name, "network-vif-plugged"))
            nb_vif_event(tag, status);
    }
    return NULL;
}

static json_t *rpc_console_output(void *a, struct nb_ctx *ctx, const char *method, json_t *args)
{
    (void)method;
    return console_output(a, ctx, args);
}

static json_t *rpc_diagnostics(void *a, struct nb_ctx *ctx, const char *method, json_t *args)
{
    (void)method;
    return diagnostics(a, ctx, args);
}

static json_t *rpc_guest_info(void *opaque, struct nb_ctx *ctx, const char *method, json_t *args)
{
    (void)method;
    struct agent *a = opaque;
    struct nb_ctx dctx;
    nb_ctx_child(&dctx, ctx);
    struct nb_guest_info gi = {0};
    const char *uuid = nb_json_str(args, "uuid");
    bool found = uuid && a->drv->ops->get_info(a->drv, &dctx, a->host, uuid, &gi) == 0;
    return json_pack("{s:b, s:i}", "found", found, "power_state",
                     found ? gi.power_state : NB_POWER_NOSTATE);
}

static json_t *rpc_host_uptime(void *a, struct nb_ctx *ctx, const char *method, json_t *args)
{
    (void)a, (void)ctx, (void)method, (void)args;
    return host_uptime();
}

static json_t *rpc_ping(void *opaque, struct nb_ctx *ctx, const char *method, json_t *args)
{
    (void)ctx, (void)method, (void)args;
    struct agent *a = opaque;
    return json_pack("{s:b, s:s}", "ok", 1, "host", a->host);
}

/* The methods of topic "compute.<host>" (the messages: compute_api.h). */
static const struct nb_bus_method methods[] = {
    {NB_COMPUTE_BUILD_AND_RUN_INSTANCE, NB_BUS_CAST, rpc_build_and_run},
    {NB_COMPUTE_START_INSTANCE, NB_BUS_CAST, rpc_start},
    {NB_COMPUTE_STOP_INSTANCE, NB_BUS_CAST, rpc_stop},
    {NB_COMPUTE_REBOOT_INSTANCE, NB_BUS_CAST, rpc_reboot},
    {NB_COMPUTE_TERMINATE_INSTANCE, NB_BUS_CAST, rpc_terminate},
    {NB_COMPUTE_PAUSE_INSTANCE, NB_BUS_CAST, rpc_pause},
    {NB_COMPUTE_UNPAUSE_INSTANCE, NB_BUS_CAST, rpc_unpause},
    {NB_COMPUTE_SUSPEND_INSTANCE, NB_BUS_CAST, rpc_suspend},
    {NB_COMPUTE_RESUME_INSTANCE, NB_BUS_CAST, rpc_resume},
    {NB_COMPUTE_ATTACH_VOLUME, NB_BUS_CAST, rpc_attach_volume},
    {NB_COMPUTE_DETACH_VOLUME, NB_BUS_CAST, rpc_detach_volume},
    {NB_COMPUTE_SNAPSHOT_INSTANCE, NB_BUS_CAST, rpc_snapshot},
    {NB_COMPUTE_DESTROY_GUEST, NB_BUS_CAST, rpc_destroy_guest},
    {NB_COMPUTE_EXTERNAL_INSTANCE_EVENT, NB_BUS_CAST, rpc_external_event},
    {NB_COMPUTE_GET_CONSOLE_OUTPUT, NB_BUS_CALL, rpc_console_output},
    {NB_COMPUTE_GET_DIAGNOSTICS, NB_BUS_CALL, rpc_diagnostics},
    {NB_COMPUTE_GUEST_INFO, NB_BUS_CALL, rpc_guest_info},
    {NB_COMPUTE_GET_HOST_UPTIME, NB_BUS_CALL, rpc_host_uptime},
    {NB_COMPUTE_PING, NB_BUS_CALL, rpc_ping},
    {NB_COMPUTE_REBUILD_INSTANCE, NB_BUS_CAST, rpc_rebuild},
    {NB_COMPUTE_CHECK_CAN_LIVE_MIGRATE_DESTINATION, NB_BUS_CALL, nb_lm_check_destination},
    {NB_COMPUTE_CHECK_CAN_LIVE_MIGRATE_SOURCE, NB_BUS_CALL, nb_lm_check_source},
    {NB_COMPUTE_PRE_LIVE_MIGRATION, NB_BUS_CALL, nb_lm_pre},
    {NB_COMPUTE_LIVE_MIGRATION, NB_BUS_CAST, nb_lm_start},
    {NB_COMPUTE_LIVE_MIGRATION_ABORT, NB_BUS_CAST, nb_lm_abort},
    {NB_COMPUTE_LIVE_MIGRATION_FORCE_COMPLETE, NB_BUS_CAST, nb_lm_force_complete},
    {NB_COMPUTE_LIVE_MIGRATION_RUNNING, NB_BUS_CALL, nb_lm_running},
    {NB_COMPUTE_POST_LIVE_MIGRATION_AT_DESTINATION, NB_BUS_CALL, nb_lm_post_dest},
    {NB_COMPUTE_POST_LIVE_MIGRATION_AT_SOURCE, NB_BUS_CALL, nb_lm_post_source},
    {NB_COMPUTE_ROLLBACK_LIVE_MIGRATION_AT_DESTINATION, NB_BUS_CALL, nb_lm_rollback_dest},
    {NB_COMPUTE_PREP_RESIZE, NB_BUS_CALL, nb_agent_prep_resize},
    {NB_COMPUTE_RESIZE_INSTANCE, NB_BUS_CALL, nb_agent_resize_instance},
    {NB_COMPUTE_FINISH_RESIZE, NB_BUS_CALL, nb_agent_finish_resize},
    {NB_COMPUTE_CONFIRM_RESIZE, NB_BUS_CALL, nb_agent_drop_resize},
    {NB_COMPUTE_REVERT_RESIZE, NB_BUS_CALL, nb_agent_drop_resize},
    {NB_COMPUTE_FINISH_REVERT_RESIZE, NB_BUS_CALL, nb_agent_finish_resize},
    {NULL, 0, NULL},
};

static const struct nb_bus_service service = {"compute", LOG_AGENT, methods};

json_t *nb_agent_handle(void *opaque, struct nb_ctx *ctx, const char *method, json_t *args)
{
    return nb_bus_dispatch(&service, opaque, ctx, method, args);
}

/* The agent the slow part of the next pass starts at (NULL: the head).
 * Only the periodic thread touches it; agents are never freed while it
 * runs. */
static struct agent *work_cursor;

/* The cheap part of a pass: registrations and the heartbeats due, sent as
 * one batch (one cast, one transaction for all the hosts of the process). */
static void pass_heartbeats(struct agent *list, struct nb_ctx *ctx, double report, double sync)
{
    json_t *beats = json_array();
    double now = nb_time_mono();
    for (struct agent *a = list; a && !periodic_stop; a = a->next) {
        if (!a->registered) {
            if (now >= a->next_register && nb_rt_register(a, ctx) < 0)
                a->next_register = now + 5;
            if (!a->registered)
                continue;
            a->next_heartbeat = now + report;
            a->next_usage = now;
            /* the first sync soon after start: guests may have changed
             * while the agent was down */
            a->next_sync = sync > 0 ? now + (sync < 2 ? sync : 2) : -1;
        }
        if (now >= a->next_heartbeat) {
            json_array_append_new(beats, json_string(a->host));
            a->next_heartbeat = now + report;
        }
    }
    if (json_array_size(beats))
        nb_conductor_service_heartbeat(ctx, "nova-compute", beats);
    json_decref(beats);
}

/* The slow part for one agent (usage report, power sync: bus calls);
 * lowers *wait to when its next sync is due. */
static void agent_work(struct agent *a, struct nb_ctx *ctx, double now, double usage, double sync,
                       double *wait)
{
    if (!a->evacuations_checked)
        a->evacuations_checked = nb_agent_destroy_evacuated(a, ctx) == 0;
    if (now >= a->next_usage ||
        (__atomic_load_n(&a->dirty, __ATOMIC_RELAXED) && now - a->last_usage >= 1.0)) {
        __atomic_store_n(&a->dirty, false, __ATOMIC_RELAXED);
        nb_rt_update_usage(a, ctx);
        a->last_usage = now;
        a->next_usage = now + usage;
    }
    pthread_mutex_lock(&agents_lock);
    double due = a->event_sync_due;
    bool event_sync = due > 0 && now >= due;
    if (event_sync)
        a->event_sync_due = 0;
    pthread_mutex_unlock(&agents_lock);
    if (event_sync || (a->next_sync >= 0 && now >= a->next_sync)) {
        struct nb_ctx sctx;
        nb_ctx_init_system(&sctx, NULL);
        nb_power_sync(a, &sctx);
        if (a->next_sync >= 0)
            a->next_sync = nb_time_mono() + sync;
    }
    if (a->next_sync >= 0 && a->next_sync - now < *wait)
        *wait = a->next_sync - now;
    if (due > 0 && !event_sync && due - now < *wait)
        *wait = due - now;
}

/* One pass of periodic work over all agents; returns seconds until the
 * next thing is due (capped). Heartbeats first: with thousands of hosts
 * in one process (fake hosts) the usage reports of a busy moment take
 * longer than a report interval, and the hosts must not look down
 * meanwhile. So the slow part stops after a quarter of the report
 * interval and the next pass resumes it where it stopped, after the
 * heartbeats due by then. Called without agents_lock held for the
 * bus/driver work: the list only grows, and agents are never freed while
 * the thread runs. */
static double periodic_pass(void)
{
    double report = (double)nb_conf_int("DEFAULT", "report_interval", 10);
    double usage = (double)nb_conf_int("DEFAULT", "update_resources_interval", 60);
    double sync = nb_conf_double("compute", "sync_power_state_interval", 600);
    if (usage <= 0)
        usage = 60;
    double budget = report > 0 ? report / 4 : 2.5;
    pthread_mutex_lock(&agents_lock);
    struct agent *list = agents;
    pthread_mutex_unlock(&agents_lock);

    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    pass_heartbeats(list, &ctx, report, sync);
    double start = nb_time_mono(), wait = 1.0;
    /* from the cursor to the end, then from the head to the cursor (the
     * agents added or skipped since) */
    struct agent *first = work_cursor ? work_cursor : list;
    work_cursor = NULL;
    struct agent *a = first;
    bool wrapped = false;
    while (a && !periodic_stop) {
        if (a->registered) {
            double now = nb_time_mono();
            if (now - start > budget) {
                work_cursor = a;
                return 0.05;
            }
            agent_work(a, &ctx, now, usage, sync, &wait);
        }
        if (!a->next && !wrapped && first != list)
            wrapped = true, a = list;
        else
            a = a->next;
        if (a == first)
            break;
    }
    return wait < 0.05 ? 0.05 : wait;
}

static void *periodic_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&agents_lock);
    while (!periodic_stop) {
        pthread_mutex_unlock(&agents_lock);
        double wait = periodic_pass();
        pthread_mutex_lock(&agents_lock);
        if (periodic_stop)
            break;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        long ns = ts.tv_nsec + (long)(wait * 1e9);
        ts.tv_sec += ns / 1000000000L;
        ts.tv_nsec = ns % 1000000000L;
        pthread_cond_timedwait(&agents_cond, &agents_lock, &ts);
    }
    pthread_mutex_unlock(&agents_lock);
    return NULL;
}

/* The driver's lifecycle-event hook (its own thread): schedule a power
 * sync of the guest's host a second from now (a reboot's stop and start
 * events fold into one sync; instances with a task in progress are skipped
 * by the sync anyway). */
static void on_guest_event(void *opaque, const char *host, const char *uuid, int power_state)
{
    (void)opaque;
    NB_DEBUG(LOG_AGENT, NULL, uuid, "lifecycle event on %s: power_state %d", host, power_state);
    pthread_mutex_lock(&agents_lock);
    for (struct agent *a = agents; a; a = a->next) {
        if (!strcmp(a->host, host)) {
            a->event_sync_due = nb_time_mono() + 1.0;
            pthread_cond_broadcast(&agents_cond);
        }
    }
    pthread_mutex_unlock(&agents_lock);
}

/* What the drivers fetch images with: the image service as this process
 * reaches it (svc_client.h). */
static const struct nb_virt_image_source agent_images = {
    .show = nb_svc_image_show,
    .download = nb_svc_image_download,
};

int nb_compute_agent_start(struct nb_env *env, struct nb_virt_driver *drv, const char *host)
{
    if (!drv || !host || !*host) {
        NB_ERROR(LOG_AGENT, NULL, NULL, "a compute agent needs a driver and a host name");
        return -1;
    }
    struct agent *a = calloc(1, sizeof(*a));
    a->env = env;
    a->drv = drv;
    nb_strlcpy(a->host, host, sizeof(a->host));
    snprintf(a->topic, sizeof(a->topic), NB_COMPUTE_TOPIC_PREFIX "%s", host);
    pthread_mutex_init(&a->ilocks_lock, NULL);

    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    /* Listen first, then register: once registered the host can be chosen,
     * so it must already answer. If the conductor is not up yet, the
     * periodic thread retries the registration. */
    nb_agent_builds_open();
    nb_agent_lm_open();
    nb_agent_builds_recover(a); /* its list is read before this run takes builds */
    int workers = (int)nb_conf_int("compute", "agent_workers", 2);
    if ((nb_conf_bool("compute", "agent_shared_workers", false)
             ? nb_bus_listen_shared(a->topic, nb_agent_handle, a, workers)
             : nb_bus_listen(a->topic, nb_agent_handle, a, workers)) < 0) {
        NB_ERROR(LOG_AGENT, &ctx, NULL, "cannot listen on topic %s", a->topic);
        pthread_mutex_destroy(&a->ilocks_lock);
        free(a);
        return -1;
    }
    if (nb_rt_register(a, &ctx) < 0)
        a->next_register = nb_time_mono() + 1;
    double now = nb_time_mono();
    double sync = nb_conf_double("compute", "sync_power_state_interval", 600);
    a->next_heartbeat = now + (double)nb_conf_int("DEFAULT", "report_interval", 10);
    a->next_usage = now + (double)nb_conf_int("DEFAULT", "update_resources_interval", 60);
    a->last_usage = now;
    a->next_sync = sync > 0 ? now + (sync < 2 ? sync : 2) : -1;

    if (drv->ops->set_event_callback)
        drv->ops->set_event_callback(drv, on_guest_event, NULL);
    if (drv->ops->set_image_source)
        drv->ops->set_image_source(drv, &agent_images);
    pthread_mutex_lock(&agents_lock);
    a->next = agents;
    agents = a;
    bool start = !periodic_running;
    periodic_running = true;
    periodic_stop = false;
    pthread_mutex_unlock(&agents_lock);
    if (start && pthread_create(&periodic_thread, NULL, periodic_main, NULL) != 0) {
        NB_ERROR(LOG_AGENT, &ctx, NULL, "cannot start the compute periodic thread");
        pthread_mutex_lock(&agents_lock);
        periodic_running = false;
        pthread_mutex_unlock(&agents_lock);
        return -1;
    }
    NB_INFO(LOG_AGENT, &ctx, NULL, "Compute agent for host %s started (driver %s)", host,
            drv->ops->name);
    return 0;
}

void nb_compute_agents_stop(void)
{
    nb_agent_builds_drain();
    nb_agent_lm_drain();
    pthread_mutex_lock(&agents_lock);
    bool running = periodic_running;
    periodic_stop = true;
    pthread_cond_broadcast(&agents_cond);
    pthread_mutex_unlock(&agents_lock);
    if (running)
        pthread_join(periodic_thread, NULL);
    pthread_mutex_lock(&agents_lock);
    periodic_running = false;
    work_cursor = NULL;
    pthread_mutex_unlock(&agents_lock);
}
