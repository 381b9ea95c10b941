/* fake.c - the fake virt driver: any number of hypervisor hosts in one
 * process, no hypervisor behind them.
 *
 * Hosts come from [fake] hosts (comma list, default "fake-1,fake-2,fake-3");
 * each has a CPU model, capacity and hypervisor version from [fake]
 * cpu_model / vcpus / memory_mb / disk_gb / hypervisor_version, overridable
 * per host with "<key>.<host>" (e.g. `--set fake.memory_mb.fake-2=1024`).
 * Guests live in memory as {uuid: {"power_state", "console",
 * "managed_save" (true while suspended)}} per host and
 * are mirrored to $state_path/fake/<host>.json (unless [fake]
 * persist_guests = false), so that, as with a real hypervisor, guests
 * outlive a restart of nubo. Editing that file behind nubo's back (say,
 * setting a guest's power_state to 4, or removing a guest) is how a test
 * makes a guest "shut down by itself" or vanish: every guest operation
 * first re-reads a file whose mtime is not that of the driver's own write.
 *
 * Volumes: a guest's "volumes" member maps its attached devices to volume
 * IDs ({"vdb": "<volume id>"}); attach/detach change it whatever the power
 * state (the next start of a real guest would pick the mappings up), and
 * boot volumes are not listed there. A snapshot writes a small valid,
 * empty qcow2 (the flavor's root_gb as virtual size, 1 GiB when 0), so what
 * is uploaded from it is a real image.
 *
 * Fault injection: [fake] fail_spawn_hosts (comma list: every spawn there
 * fails) and nb_virt_fake_fail_spawn(host, n); the same for the other
 * failing operations with [fake] fail_<op>_hosts and nb_virt_fake_fail(host,
 * op, n), op one of "spawn", "attach_volume", "detach_volume", "snapshot".
 * [fake] spawn_delay_ms makes spawns take time (to have builds in flight in
 * tests); [fake] snapshot_delay_ms does the same for snapshots (a real one
 * takes seconds, and clients such as Tempest test what happens while an
 * image is being saved).
 *
 * Thread-safety: one mutex per driver guards the hosts and their guests;
 * the injection table has its own. Spawn does no I/O but the small per-host
 * state file write. */
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "compute/virt/driver.h"
#include "compute/virt/fake_rebuild.h"
#include "compute/virt/fake_moves.h"
#include "compute/virt/fake_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LOGGER "nubo.compute.virt.fake"
#define MAX_INJECT 256
#define CONSOLE_MAX 4096

struct fake_host {
    char name[256];
    char cpu_model[64];
    int vcpus;
    long memory_mb;
    long disk_gb;
    long hv_version;
    json_t *guests;          /* {uuid: {"power_state": n, "console": "…"}} */
    char *state_file;        /* NULL when not persisted */
    struct timespec written; /* mtime after our last write of state_file */
};

struct fake_priv {
    pthread_mutex_t lock;
    struct fake_host *hosts;
    size_t nhosts;
    json_t *index; /* {host name: index into hosts} */
    long spawn_delay_ms;
    long snapshot_delay_ms;
};

/* Pending failures per (host, operation), shared by every fake driver of
 * the process: nb_virt_fake_fail() has no driver argument. n = -1 means
 * all. */
static pthread_mutex_t inject_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    char host[256];
    char op[32];
    int n;
} injections[MAX_INJECT];
static int ninjections;

void nb_virt_fake_fail(const char *host, const char *op, int n)
{
    pthread_mutex_lock(&inject_lock);
    int i;
    for (i = 0; i < ninjections; i++)
        if (!strcmp(injections[i].host, host) && !strcmp(injections[i].op, op))
            break;
    if (i == ninjections && ninjections < MAX_INJECT) {
        nb_strlcpy(injections[i].host, host, sizeof(injections[0].host));
        nb_strlcpy(injections[i].op, op, sizeof(injections[0].op));
        ninjections++;
    }
    if (i < ninjections)
        injections[i].n = n;
    pthread_mutex_unlock(&inject_lock);
}

void nb_virt_fake_fail_spawn(const char *host, int n)
{
    nb_virt_fake_fail(host, "spawn", n);
}

/* True (and one pending failure consumed) if the next op on host fails. */
static bool take_injected_failure(const char *host, const char *op)
{
    bool fail = false;
    pthread_mutex_lock(&inject_lock);
    for (int i = 0; i < ninjections; i++) {
        if (strcmp(injections[i].host, host) || strcmp(injections[i].op, op) ||
            injections[i].n == 0)
            continue;
        fail = true;
        if (injections[i].n > 0)
            injections[i].n--;
    }
    pthread_mutex_unlock(&inject_lock);
    return fail;
}

bool nb_virt_fake_take_failure(const char *host, const char *op)
{
    return take_injected_failure(host, op);
}

/* [fake] key.<host> if set, else [fake] key, else def. */
static long host_conf_int(const char *host, const char *key, long def)
{
    char k[320];
    snprintf(k, sizeof(k), "%s.%s", key, host);
    if (nb_conf_str("fake", k, NULL))
        return nb_conf_int("fake", k, def);
    return nb_conf_int("fake", key, def);
}

static const char *host_conf_str(const char *host, const char *key, const char *def)
{
    char k[320];
    snprintf(k, sizeof(k), "%s.%s", key, host);
    const char *v = nb_conf_str("fake", k, NULL);
    return v ? v : nb_conf_str("fake", key, def);
}

/* CPU flags (libvirt names) a model offers. Haswell-noTSX-IBRS as QEMU
 * defines it; other names get the x86-64-v2 baseline. */
static json_t *model_features(const char *model)
{
    static const char *const haswell[] = {
        "aes",          "apic",    "avx",     "avx2",   "bmi1",   "bmi2",   "clflush",  "cmov",
        "cx16",         "cx8",     "de",      "erms",   "f16c",   "fma",    "fpu",      "fsgsbase",
        "fxsr",         "invpcid", "lahf_lm", "lm",     "mca",    "mce",    "mmx",      "movbe",
        "msr",          "mtrr",    "nx",      "pae",    "pat",    "pcid",   "pclmuldq", "pge",
        "pni",          "popcnt",  "pse",     "pse36",  "rdrand", "rdtscp", "sep",      "smep",
        "spec-ctrl",    "sse",     "sse2",    "sse4.1", "sse4.2", "ssse3",  "syscall",  "tsc",
        "tsc-deadline", "vme",     "x2apic",  "xsave",  NULL};
    static const char *const baseline[] = {"apic",   "clflush", "cmov",    "cx16",    "cx8",
                                           "fpu",    "fxsr",    "lahf_lm", "lm",      "mmx",
                                           "nx",     "pni",     "popcnt",  "sse",     "sse2",
                                           "sse4.1", "sse4.2",  "ssse3",   "syscall", NULL};
    const char *const *list = nb_startswith(model, "Haswell") ? haswell : baseline;
    json_t *a = json_array();
    for (int i = 0; list[i]; i++)
        json_array_append_new(a, json_string(list[i]));
    return a;
}

static struct fake_host *find_host(struct fake_priv *p, const char *host)
{
    json_t *i = host ? json_object_get(p->index, host) : NULL;
    return i ? &p->hosts[json_integer_value(i)] : NULL;
}

static void reload_if_changed(struct fake_host *h);

/* Looks the host up, recording 404 on ctx if this driver does not run it. */
static struct fake_host *get_host(struct fake_priv *p, struct nb_ctx *ctx, const char *host)
{
    struct fake_host *h = find_host(p, host);
    if (!h)
        nb_error(ctx, 404, NULL, "Host %s is not managed by the fake virt driver.",
                 host ? host : "(null)");
    return h;
}

/* get_host for guest operations (lock held): first picks up changes made
 * to the host's state file behind nubo's back. */
static struct fake_host *get_host_guests(struct fake_priv *p, struct nb_ctx *ctx, const char *host)
{
    struct fake_host *h = get_host(p, ctx, host);
    if (h)
        reload_if_changed(h);
    return h;
}

static const char *instance_uuid(json_t *instance)
{
    return nb_json_str(instance, "uuid");
}

static void console_append(json_t *guest, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void console_append(json_t *guest, const char *fmt, ...)
{
    char line[512], ts[32];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    const char *old = nb_json_str(guest, "console");
    size_t oldlen = old ? strlen(old) : 0;
    /* keep the tail only, as a serial log ring would */
    if (oldlen > CONSOLE_MAX)
        old += oldlen - CONSOLE_MAX;
    char *text = nb_strdup_printf("%s[%s] %s\n", old ? old : "", nb_now_iso(ts), line);
    json_object_set_new(guest, "console", json_string(text));
    free(text);
}

/* What a guest's serial console shows when it boots: what the fake
 * "hypervisor" was asked to run, one fact a line. */
static void console_boot(json_t *guest, json_t *instance, const char *host)
{
    json_t *flavor = json_object_get(instance, "flavor");
    const char *image = nb_json_str(instance, "image_ref");
    console_append(guest, "fake guest %s defined on host %s", instance_uuid(instance), host);
    console_append(guest, "flavor %s: %lld vCPU, %lld MB RAM, %lld GB root disk",
                   nb_json_str(flavor, "name") ? nb_json_str(flavor, "name") : "(unnamed)",
                   nb_json_int(flavor, "vcpus", 0), nb_json_int(flavor, "memory_mb", 0),
                   nb_json_int(flavor, "root_gb", 0));
    console_append(guest, "boot source: %s",
                   image && *image ? image : "volume (block device mapping)");
    console_append(guest, "hostname %s: booted, running",
                   nb_json_str(instance, "hostname") ? nb_json_str(instance, "hostname") : "-");
}

/* The guest's "volumes" from the instance's connected, non-boot volume
 * mappings, as a real driver builds the domain's disks at spawn. */
static void add_mapped_volumes(json_t *guest, json_t *instance)
{
    json_t *vols = json_object();
    size_t i;
    json_t *b;
    json_array_foreach (json_object_get(instance, "block_device_mapping"), i, b) {
        const char *dst = nb_json_str(b, "destination_type");
        const char *dev = nb_json_str(b, "device_name");
        const char *vid = nb_json_str(b, "volume_id");
        json_t *bi = json_object_get(b, "boot_index");
        if (!dst || strcmp(dst, "volume") != 0 || nb_json_int(b, "deleted", 0) != 0 || !dev ||
            !vid || !nb_json_str(b, "connection_info") ||
            (json_is_integer(bi) && json_integer_value(bi) == 0))
            continue;
        json_object_set_new(vols, strncmp(dev, "/dev/", 5) ? dev : dev + 5, json_string(vid));
        console_append(guest, "BLOCK-DEVICES: volume %s at %s", vid, dev);
    }
    if (json_object_size(vols))
        json_object_set(guest, "volumes", vols);
    json_decref(vols);
}

/* Writes h's guests to its state file (no fsync: a crash may lose the last
 * change, as a hypervisor may lose a guest). Called with the lock held. */
static void persist(struct fake_host *h)
{
    if (!h->state_file)
        return;
    char *text = json_dumps(h->guests, JSON_COMPACT);
    char *tmp = nb_strdup_printf("%s.tmp", h->state_file);
    FILE *f = fopen(tmp, "w");
    bool ok = f && fputs(text, f) >= 0;
    if (f && fclose(f) != 0)
        ok = false;
    if (ok && rename(tmp, h->state_file) == 0) {
        struct stat st;
        if (stat(h->state_file, &st) == 0)
            h->written = st.st_mtim;
    } else {
        NB_WARN(LOGGER, NULL, NULL, "cannot write %s: %s", h->state_file, strerror(errno));
        unlink(tmp);
    }
    free(tmp);
    free(text);
}

/* Re-reads h's state file if someone else changed it. Lock held. */
static void reload_if_changed(struct fake_host *h)
{
    struct stat st;
    if (!h->state_file || stat(h->state_file, &st) < 0)
        return;
    if (st.st_mtim.tv_sec == h->written.tv_sec && st.st_mtim.tv_nsec == h->written.tv_nsec)
        return;
    json_error_t err;
    json_t *g = json_load_file(h->state_file, 0, &err);
    if (!json_is_object(g)) {
        NB_WARN(LOGGER, NULL, NULL, "ignoring unreadable %s: %s", h->state_file, err.text);
        json_decref(g);
        return;
    }
    NB_INFO(LOGGER, NULL, NULL, "guests of %s changed outside nubo; reloaded %s", h->name,
            h->state_file);
    json_decref(h->guests);
    h->guests = g;
    h->written = st.st_mtim;
}

static int fake_host_info(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                          struct nb_host_info *info)
{
    struct fake_priv *p = drv->priv;
    struct fake_host *h = get_host(p, ctx, host);
    if (!h)
        return -1;
    memset(info, 0, sizeof(*info));
    nb_strlcpy(info->hypervisor_hostname, h->name, sizeof(info->hypervisor_hostname));
    nb_strlcpy(info->hypervisor_type, "fake", sizeof(info->hypervisor_type));
    info->hypervisor_version = h->hv_version;
    nb_strlcpy(info->cpu_model, h->cpu_model, sizeof(info->cpu_model));
    nb_strlcpy(info->cpu_vendor, "Intel", sizeof(info->cpu_vendor));
    nb_strlcpy(info->cpu_arch, "x86_64", sizeof(info->cpu_arch));
    info->cpu_features = model_features(h->cpu_model);
    info->vcpus = h->vcpus;
    info->memory_mb = h->memory_mb;
    info->local_gb = h->disk_gb;
    nb_strlcpy(info->host_ip, "127.0.0.1", sizeof(info->host_ip));
    return 0;
}

static int fake_spawn(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                      json_t *instance)
{
    struct fake_priv *p = drv->priv;
    const char *uuid = instance_uuid(instance);
    if (!uuid)
        return nb_error(ctx, 400, NULL, "Instance without uuid given to the fake driver.");
    if (p->spawn_delay_ms > 0)
        usleep((useconds_t)p->spawn_delay_ms * 1000);
    if (take_injected_failure(host, "spawn"))
        return nb_error(ctx, 500, NULL,
                        "Fake driver: spawn failure injected on host %s for instance %s.", host,
                        uuid);
    pthread_mutex_lock(&p->lock);
    int rc = -1;
    struct fake_host *h = get_host_guests(p, ctx, host);
    if (!h)
        goto out;
    if (json_object_get(h->guests, uuid)) {
        nb_error(ctx, 409, NULL, "Fake driver: guest %s already exists on host %s.", uuid, host);
        goto out;
    }
    json_t *g = json_pack("{s:i}", "power_state", NB_POWER_RUNNING);
    console_boot(g, instance, host);
    add_mapped_volumes(g, instance);
    json_object_set_new(h->guests, uuid, g);
    persist(h);
    rc = 0;
out:
    pthread_mutex_unlock(&p->lock);
    return rc;
}

static int fake_destroy(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                        json_t *instance)
{
    struct fake_priv *p = drv->priv;
    const char *uuid = instance_uuid(instance);
    pthread_mutex_lock(&p->lock);
    struct fake_host *h = get_host_guests(p, ctx, host);
    if (h && uuid && json_object_get(h->guests, uuid)) {
        json_object_del(h->guests, uuid);
        persist(h);
    }
    pthread_mutex_unlock(&p->lock);
    return h ? 0 : -1;
}

/* Sets the power state of an existing guest; 404 if absent. */
static int set_power(struct fake_priv *p, struct nb_ctx *ctx, const char *host, const char *uuid,
                     int state, const char *what)
{
    pthread_mutex_lock(&p->lock);
    int rc = -1;
    struct fake_host *h = get_host_guests(p, ctx, host);
    json_t *g = h && uuid ? json_object_get(h->guests, uuid) : NULL;
    if (h && !g)
        nb_error(ctx, 404, NULL, "Fake driver: no guest %s on host %s.", uuid ? uuid : "(null)",
                 host);
    if (g) {
        json_object_set_new(g, "power_state", json_integer(state));
        if (state == NB_POWER_RUNNING)
            json_object_del(g, "managed_save"); /* a fresh start discards it */
        console_append(g, "%s", what);
        persist(h);
        rc = 0;
    }
    pthread_mutex_unlock(&p->lock);
    return rc;
}

/* Pause, unpause, suspend and resume: a guest moves from one of the power
 * states in `from` (terminated by -1) to `to`, as libvirt's
 * suspend/resume/managedSave/create do. "managed_save" marks a guest whose
 * memory was saved by suspend; resume restores from it and drops it.
 * Pausing a paused guest or unpausing a running one does nothing, as
 * libvirt's virDomainSuspend/virDomainResume. 404 if the guest is absent,
 * 409 in a state the operation does not apply to (with libvirt's
 * reason). */
static int transition(struct fake_priv *p, struct nb_ctx *ctx, const char *host, const char *uuid,
                      const char *op, const int *from, int to, const char *why_not)
{
    pthread_mutex_lock(&p->lock);
    int rc = -1;
    struct fake_host *h = get_host_guests(p, ctx, host);
    json_t *g = h && uuid ? json_object_get(h->guests, uuid) : NULL;
    if (h && !g)
        nb_error(ctx, 404, NULL, "Fake driver: no guest %s on host %s.", uuid ? uuid : "(null)",
                 host);
    if (!g)
        goto out;
    int cur = (int)nb_json_int(g, "power_state", NB_POWER_NOSTATE);
    bool ok = false;
    for (const int *f = from; *f >= 0; f++)
        ok = ok || *f == cur;
    if (!ok) {
        nb_error(ctx, 409, NULL,
                 "Fake driver: cannot %s guest %s on host %s: Requested operation is not valid: "
                 "%s (power_state %d)",
                 op, uuid, host, why_not, cur);
        goto out;
    }
    bool saved = json_is_true(json_object_get(g, "managed_save"));
    json_object_set_new(g, "power_state", json_integer(to));
    if (!strcmp(op, "suspend")) {
        json_object_set_new(g, "managed_save", json_true());
        console_append(g, "suspended: memory state saved to disk, guest stopped");
    } else if (!strcmp(op, "resume")) {
        json_object_del(g, "managed_save");
        console_append(g, "%s",
                       saved ? "resumed from the saved memory state, running"
                             : "started (no saved memory state: fresh boot), running");
    } else if (cur == to) {
        console_append(g, "%s: already %s", op, to == NB_POWER_PAUSED ? "paused" : "running");
    } else {
        console_append(g, "%s",
                       !strcmp(op, "pause") ? "paused: vCPUs stopped" : "unpaused: vCPUs running");
    }
    persist(h);
    rc = 0;
out:
    pthread_mutex_unlock(&p->lock);
    return rc;
}

static int fake_pause(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                      json_t *instance)
{
    static const int from[] = {NB_POWER_RUNNING, NB_POWER_PAUSED, -1};
    return transition(drv->priv, ctx, host, instance_uuid(instance), "pause", from, NB_POWER_PAUSED,
                      "domain is not running");
}

static int fake_unpause(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                        json_t *instance)
{
    static const int from[] = {NB_POWER_PAUSED, NB_POWER_RUNNING, -1};
    return transition(drv->priv, ctx, host, instance_uuid(instance), "unpause", from,
                      NB_POWER_RUNNING, "domain is not running");
}

static int fake_suspend(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                        json_t *instance)
{
    static const int from[] = {NB_POWER_RUNNING, NB_POWER_PAUSED, -1};
    return transition(drv->priv, ctx, host, instance_uuid(instance), "suspend", from,
                      NB_POWER_SHUTDOWN, "domain is not running");
}

static int fake_resume(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                       json_t *instance)
{
    static const int from[] = {NB_POWER_SHUTDOWN, -1};
    return transition(drv->priv, ctx, host, instance_uuid(instance), "resume", from,
                      NB_POWER_RUNNING, "domain is already running");
}

static int fake_power_on(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                         json_t *instance)
{
    return set_power(drv->priv, ctx, host, instance_uuid(instance), NB_POWER_RUNNING, "powered on");
}

static int fake_power_off(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                          json_t *instance, int timeout_s)
{
    return set_power(drv->priv, ctx, host, instance_uuid(instance), NB_POWER_SHUTDOWN,
                     timeout_s > 0 ? "shut down (ACPI)" : "powered off (forced)");
}

static int fake_reboot(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                       json_t *instance, bool hard)
{
    return set_power(drv->priv, ctx, host, instance_uuid(instance), NB_POWER_RUNNING,
                     hard ? "hard reboot" : "soft reboot");
}

static int fake_get_info(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                         const char *uuid, struct nb_guest_info *info)
{
    struct fake_priv *p = drv->priv;
    pthread_mutex_lock(&p->lock);
    int rc = -1;
    struct fake_host *h = get_host_guests(p, ctx, host);
    json_t *g = h && uuid ? json_object_get(h->guests, uuid) : NULL;
    if (h && !g)
        nb_error(ctx, 404, NULL, "Fake driver: no guest %s on host %s.", uuid ? uuid : "(null)",
                 host);
    if (g) {
        info->power_state = (int)nb_json_int(g, "power_state", NB_POWER_NOSTATE);
        rc = 0;
    }
    pthread_mutex_unlock(&p->lock);
    return rc;
}

static json_t *fake_list(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host)
{
    struct fake_priv *p = drv->priv;
    pthread_mutex_lock(&p->lock);
    json_t *out = NULL;
    struct fake_host *h = get_host_guests(p, ctx, host);
    if (h) {
        out = json_object();
        const char *uuid;
        json_t *g;
        json_object_foreach (h->guests, uuid, g)
            json_object_set_new(out, uuid,
                                json_integer(nb_json_int(g, "power_state", NB_POWER_NOSTATE)));
    }
    pthread_mutex_unlock(&p->lock);
    return out;
}

static char *fake_console_log(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                              const char *uuid)
{
    struct fake_priv *p = drv->priv;
    pthread_mutex_lock(&p->lock);
    char *out = NULL;
    struct fake_host *h = get_host_guests(p, ctx, host);
    json_t *g = h && uuid ? json_object_get(h->guests, uuid) : NULL;
    if (h && !g)
        nb_error(ctx, 404, NULL, "Fake driver: no guest %s on host %s.", uuid ? uuid : "(null)",
                 host);
    if (g) {
        const char *c = nb_json_str(g, "console");
        out = strdup(c ? c : "");
    }
    pthread_mutex_unlock(&p->lock);
    return out;
}

/* Fixed figures of a running guest, the way Nova's fake driver has them:
 * one vCPU, 512 MiB, one NIC, a root disk and one disk per volume. */
static json_t *fake_diag_of(json_t *g, bool standard)
{
    size_t vols = json_object_size(json_object_get(g, "volumes"));
    if (!standard) {
        json_t *d =
            json_pack("{s:I, s:i, s:i, s:i, s:i, s:i, s:i}", "cpu0_time", (json_int_t)17300000000,
                      "memory", 524288, "vda_errors", -1, "vda_read", 262144, "vda_read_req", 112,
                      "vda_write", 5778432, "vda_write_req", 488);
        json_t *n = json_pack("{s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i}", "vnet0_rx", 2070139,
                              "vnet0_rx_drop", 0, "vnet0_rx_errors", 0, "vnet0_rx_packets", 26701,
                              "vnet0_tx", 140208, "vnet0_tx_drop", 0, "vnet0_tx_errors", 0,
                              "vnet0_tx_packets", 662);
        json_object_update(d, n);
        json_decref(n);
        return d;
    }
    json_t *disks = json_array();
    for (size_t i = 0; i < 1 + vols; i++)
        json_array_append_new(disks, json_pack("{s:i, s:i, s:i, s:i, s:i}", "read_bytes", 262144,
                                               "read_requests", 112, "write_bytes", 5778432,
                                               "write_requests", 488, "errors_count", 0));
    return json_pack(
        "{s:s, s:s, s:s, s:s, s:i, s:b, s:i, s:I, s:i, s:{s:i, s:i}, s:[{s:i, s:I, s:i}],"
        " s:[{s:s, s:i, s:i, s:i, s:i, s:n, s:i, s:i, s:i, s:i, s:n}], s:o}",
        "state", "running", "driver", "libvirt", "hypervisor", "kvm", "hypervisor_os", "linux",
        "uptime", 46664, "config_drive", 0, "num_cpus", 1, "num_disks", (json_int_t)(1 + vols),
        "num_nics", 1, "memory_details", "maximum", 512, "used", 0, "cpu_details", "id", 0, "time",
        (json_int_t)17300000000, "utilisation", 15, "nic_details", "mac_address",
        "fa:16:3e:00:00:01", "rx_octets", 2070139, "rx_errors", 0, "rx_drop", 0, "rx_packets",
        26701, "rx_rate", "tx_octets", 140208, "tx_errors", 0, "tx_drop", 0, "tx_packets", 662,
        "tx_rate", "disk_details", disks);
}

static json_t *fake_diagnostics(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                                const char *uuid, bool standard)
{
    struct fake_priv *p = drv->priv;
    pthread_mutex_lock(&p->lock);
    json_t *out = NULL;
    struct fake_host *h = get_host_guests(p, ctx, host);
    json_t *g = h && uuid ? json_object_get(h->guests, uuid) : NULL;
    if (h && !g)
        nb_error(ctx, 404, NULL, "Fake driver: no guest %s on host %s.", uuid ? uuid : "(null)",
                 host);
    if (g)
        out = fake_diag_of(g, standard);
    pthread_mutex_unlock(&p->lock);
    return out;
}

/* The guest of instance on host (lock held), or NULL with 404 recorded. */
static json_t *get_guest(struct fake_priv *p, struct nb_ctx *ctx, const char *host,
                         json_t *instance, struct fake_host **hp)
{
    const char *uuid = instance_uuid(instance);
    struct fake_host *h = get_host_guests(p, ctx, host);
    json_t *g = h && uuid ? json_object_get(h->guests, uuid) : NULL;
    if (h && !g)
        nb_error(ctx, 404, NULL, "Fake driver: no guest %s on host %s.", uuid ? uuid : "(null)",
                 host);
    *hp = h;
    return g;
}

/* The device of a mapping ("vdb") and its volume ID; 400 without them. */
static int bdm_device(struct nb_ctx *ctx, const json_t *bdm, const char *uuid, char dev[32],
                      const char **vid)
{
    const char *name = nb_json_str(bdm, "device_name");
    *vid = nb_json_str(bdm, "volume_id");
    if (name && !strncmp(name, "/dev/", 5))
        name += 5;
    if (!name || !*name || !*vid || strlen(name) >= 32 || strchr(name, '/'))
        return nb_error(ctx, 400, NULL,
                        "Fake driver: the mapping of volume %s to instance %s has no valid "
                        "device name",
                        *vid ? *vid : "(null)", uuid ? uuid : "(null)");
    nb_strlcpy(dev, name, 32);
    return 0;
}

/* Shared by attach and detach: checks, injected failure, then the change. */
static int volume_op(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                     json_t *instance, const json_t *bdm, bool attach)
{
    struct fake_priv *p = drv->priv;
    const char *uuid = instance_uuid(instance), *vid;
    const char *op = attach ? "attach_volume" : "detach_volume";
    char dev[32];
    if (bdm_device(ctx, bdm, uuid, dev, &vid) < 0)
        return -1;
    pthread_mutex_lock(&p->lock);
    int rc = -1;
    struct fake_host *h;
    json_t *g = get_guest(p, ctx, host, instance, &h);
    if (!g)
        goto out;
    if (take_injected_failure(host, op)) {
        if (attach)
            nb_error(ctx, 500, NULL,
                     "Fake driver: attach failure injected on host %s: volume %s at /dev/%s", host,
                     vid, dev);
        else
            nb_error(ctx, 500, NULL,
                     "Device detach failed for %s: failure injected on host %s (volume %s)", dev,
                     host, vid);
        goto out;
    }
    json_t *vols = json_object_get(g, "volumes");
    if (!json_is_object(vols)) {
        vols = json_object();
        json_object_set_new(g, "volumes", vols);
    }
    const char *cur = nb_json_str(vols, dev);
    if (attach && cur && strcmp(cur, vid) != 0) {
        nb_error(ctx, 409, NULL,
                 "Fake driver: cannot attach volume %s to %s: device /dev/%s already holds "
                 "volume %s",
                 vid, uuid, dev, cur);
        goto out;
    }
    if (!attach && cur && strcmp(cur, vid) != 0) {
        nb_error(ctx, 409, NULL,
                 "Fake driver: volume %s of instance %s is not the disk at %s (that is volume "
                 "%s): not detached",
                 vid, uuid, dev, cur);
        goto out;
    }
    if (attach && !cur) {
        json_object_set_new(vols, dev, json_string(vid));
        console_append(g, "BLOCK-DEVICES: volume %s attached at /dev/%s", vid, dev);
    } else if (!attach && cur) {
        json_object_del(vols, dev);
        console_append(g, "BLOCK-DEVICES: volume %s detached from /dev/%s", vid, dev);
    }
    persist(h);
    rc = 0;
out:
    pthread_mutex_unlock(&p->lock);
    return rc;
}

static int fake_attach_volume(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                              json_t *instance, const json_t *bdm)
{
    return volume_op(drv, ctx, host, instance, bdm, true);
}

static int fake_detach_volume(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                              json_t *instance, const json_t *bdm)
{
    return volume_op(drv, ctx, host, instance, bdm, false);
}

/* A valid, empty qcow2 (version 2, 64 KiB clusters) of virtual size bytes:
 * header, refcount table, one refcount block, L1 table, one cluster each,
 * as `qemu-img create -f qcow2 -o compat=0.10` makes it. 0, or -1 with
 * errno. */
static int write_empty_qcow2(const char *path, unsigned long long size)
{
    enum { CL = 65536 };
    unsigned long long l2_span = (unsigned long long)CL / 8 * CL; /* 512 MiB per L2 table */
    unsigned long long l1_size = (size + l2_span - 1) / l2_span;
    if (l1_size * 8 > CL) {
        errno = EFBIG;
        return -1;
    }
    unsigned char *img = calloc(4, CL);
    if (!img)
        return -1;
#define BE32(off, v)                                                                               \
    do {                                                                                           \
        for (int b_ = 0; b_ < 4; b_++)                                                             \
            img[(off) + b_] = (unsigned char)((unsigned long long)(v) >> (24 - 8 * b_));           \
    } while (0)
#define BE64(off, v)                                                                               \
    do {                                                                                           \
        for (int b_ = 0; b_ < 8; b_++)                                                             \
            img[(off) + b_] = (unsigned char)((unsigned long long)(v) >> (56 - 8 * b_));           \
    } while (0)
    memcpy(img, "QFI\xfb", 4);
    BE32(4, 2);          /* version */
    BE32(20, 16);        /* cluster_bits */
    BE64(24, size);      /* virtual size */
    BE32(36, l1_size);   /* l1_size */
    BE64(40, 3ULL * CL); /* l1_table_offset */
    BE64(48, 1ULL * CL); /* refcount_table_offset */
    BE32(56, 1);         /* refcount_table_clusters */
    BE64(CL, 2ULL * CL); /* refcount table[0] -> the refcount block */
    for (int c = 0; c < 4; c++)
        img[2 * CL + 2 * c + 1] = 1; /* 16-bit refcounts of clusters 0..3 */
#undef BE32
#undef BE64
    FILE *f = fopen(path, "wb");
    bool ok = f && fwrite(img, 1, 4 * CL, f) == 4 * CL;
    int saved = errno;
    if (f && fclose(f) != 0 && ok) {
        ok = false;
        saved = errno;
    }
    free(img);
    if (!ok) {
        unlink(path);
        errno = saved;
        return -1;
    }
    return 0;
}

static int fake_snapshot(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                         json_t *instance, const char *out_path)
{
    struct fake_priv *p = drv->priv;
    const char *uuid = instance_uuid(instance);
    size_t i;
    json_t *b;
    json_array_foreach (json_object_get(instance, "block_device_mapping"), i, b) {
        json_t *bi = json_object_get(b, "boot_index");
        const char *dst = nb_json_str(b, "destination_type");
        if (json_is_integer(bi) && json_integer_value(bi) == 0 && dst && !strcmp(dst, "volume") &&
            nb_json_int(b, "deleted", 0) == 0)
            return nb_error(ctx, 400, NULL,
                            "Instance %s is volume-backed: its image is made of volume "
                            "snapshots, not by the virt driver",
                            uuid ? uuid : "(null)");
    }
    if (p->snapshot_delay_ms > 0)
        usleep((useconds_t)p->snapshot_delay_ms * 1000);
    pthread_mutex_lock(&p->lock);
    int rc = -1;
    struct fake_host *h;
    json_t *g = get_guest(p, ctx, host, instance, &h);
    if (!g)
        goto out;
    if (take_injected_failure(host, "snapshot")) {
        nb_error(ctx, 500, NULL, "Fake driver: snapshot failure injected on host %s for %s", host,
                 uuid);
        goto out;
    }
    long long gb = nb_json_int(json_object_get(instance, "flavor"), "root_gb", 0);
    if (write_empty_qcow2(out_path, (unsigned long long)(gb > 0 ? gb : 1) << 30) < 0) {
        nb_error(ctx, 500, NULL, "Fake driver: cannot write the snapshot %s: %s", out_path,
                 strerror(errno));
        goto out;
    }
    console_append(g, "snapshot of the root disk written to %s", out_path);
    persist(h);
    rc = 0;
out:
    pthread_mutex_unlock(&p->lock);
    return rc;
}

static void fake_close(struct nb_virt_driver *drv)
{
    struct fake_priv *p = drv->priv;
    for (size_t i = 0; i < p->nhosts; i++) {
        json_decref(p->hosts[i].guests);
        free(p->hosts[i].state_file);
    }
    free(p->hosts);
    json_decref(p->index);
    pthread_mutex_destroy(&p->lock);
    free(p);
    free(drv);
}

/* ---- shared with fake_moves.c (fake_moves.h) ---- */

void fake_lock(struct nb_virt_driver *drv)
{
    pthread_mutex_lock(&((struct fake_priv *)drv->priv)->lock);
}

void fake_unlock(struct nb_virt_driver *drv)
{
    pthread_mutex_unlock(&((struct fake_priv *)drv->priv)->lock);
}
json_t *fake_host_guests(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host)
{
    struct fake_host *h = get_host_guests(drv->priv, ctx, host);
    return h ? h->guests : NULL;
}

void fake_host_persist(struct nb_virt_driver *drv, const char *host)
{
    struct fake_host *h = find_host(drv->priv, host);
    if (h)
        persist(h);
}

bool fake_has_host(struct nb_virt_driver *drv, const char *host)
{
    return find_host(drv->priv, host) != NULL;
}

const char *fake_host_cpu_model(struct nb_virt_driver *drv, const char *host)
{
    struct fake_host *h = find_host(drv->priv, host);
    return h ? h->cpu_model : "";
}

long fake_host_hv_version(struct nb_virt_driver *drv, const char *host)
{
    struct fake_host *h = find_host(drv->priv, host);
    return h ? h->hv_version : 0;
}

bool fake_take_failure(const char *host, const char *op)
{
    return take_injected_failure(host, op);
}

long fake_conf_int(const char *host, const char *key, long def)
{
    return host_conf_int(host, key, def);
}

const char *fake_conf_str(const char *host, const char *key, const char *def)
{
    return host_conf_str(host, key, def);
}

bool fake_conf_bool(const char *host, const char *key, bool def)
{
    char k[320];
    snprintf(k, sizeof(k), "%s.%s", key, host);
    if (nb_conf_str("fake", k, NULL))
        return nb_conf_bool("fake", k, def);
    return nb_conf_bool("fake", key, def);
}

void fake_console_line(json_t *guest, const char *line)
{
    console_append(guest, "%s", line);
}

int nb_virt_fake_with_guests(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *a,
                             const char *b,
                             int (*fn)(struct nb_ctx *ctx, json_t *ga, json_t *gb, void *arg),
                             void *arg)
{
    struct fake_priv *p = drv->priv;
    pthread_mutex_lock(&p->lock);
    int rc = -1;
    struct fake_host *ha = get_host_guests(p, ctx, a);
    struct fake_host *hb = ha ? get_host_guests(p, ctx, b) : NULL;
    if (hb) {
        rc = fn(ctx, ha->guests, hb->guests, arg);
        if (rc == 0) {
            persist(ha);
            if (hb != ha)
                persist(hb);
        }
    }
    pthread_mutex_unlock(&p->lock);
    return rc;
}

static const struct nb_virt_ops fake_ops = {
    .name = "fake",
    .host_info = fake_host_info,
    .spawn = fake_spawn,
    .destroy = fake_destroy,
    .power_on = fake_power_on,
    .power_off = fake_power_off,
    .reboot = fake_reboot,
    .get_info = fake_get_info,
    .list = fake_list,
    .pause = fake_pause,
    .unpause = fake_unpause,
    .suspend = fake_suspend,
    .resume = fake_resume,
    .console_log = fake_console_log,
    .diagnostics = fake_diagnostics,
    .attach_volume = fake_attach_volume,
    .detach_volume = fake_detach_volume,
    .snapshot = fake_snapshot,
    .migration_info = fake_migration_info,
    .check_cpu = fake_check_cpu,
    .storage_probe_create = fake_storage_probe_create,
    .storage_probe_exists = fake_storage_probe_exists,
    .storage_probe_remove = fake_storage_probe_remove,
    .check_migration_target = fake_check_migration_target,
    .migration_disks = fake_migration_disks,
    .pre_live_migration = fake_pre_live_migration,
    .live_migrate = fake_live_migrate,
    .post_live_migration_dest = fake_post_live_migration_dest,
    .post_live_migration_source = fake_post_live_migration_source,
    .rollback_live_migration_dest = fake_rollback_live_migration_dest,
    .prep_resize = nb_virt_fake_prep_resize,
    .migrate_disk_and_power_off = nb_virt_fake_migrate_disk,
    .finish_migration = nb_virt_fake_finish_migration,
    .confirm_migration = nb_virt_fake_confirm_migration,
    .revert_migration = nb_virt_fake_revert_migration,
    .finish_revert_migration = nb_virt_fake_finish_revert_migration,
    .rebuild = nb_fake_rebuild,
    .instance_on_disk = nb_fake_instance_on_disk,
    .destroy_evacuated = nb_fake_destroy_evacuated,
    .close = fake_close,
};

/* Sets up host h: capacity from config, guests from its state file. */
static void init_host(struct fake_host *h, const char *name, const char *dir)
{
    nb_strlcpy(h->name, name, sizeof(h->name));
    nb_strlcpy(h->cpu_model, host_conf_str(name, "cpu_model", "Haswell-noTSX-IBRS"),
               sizeof(h->cpu_model));
    h->vcpus = (int)host_conf_int(name, "vcpus", 16);
    h->memory_mb = host_conf_int(name, "memory_mb", 32768);
    h->disk_gb = host_conf_int(name, "disk_gb", 500);
    h->hv_version = host_conf_int(name, "hypervisor_version", 1000);
    h->guests = NULL;
    if (dir) {
        h->state_file = nb_strdup_printf("%s/%s.json", dir, name);
        h->guests = json_load_file(h->state_file, 0, NULL);
        if (h->guests && !json_is_object(h->guests)) {
            json_decref(h->guests);
            h->guests = NULL;
        }
        struct stat st;
        if (h->guests && stat(h->state_file, &st) == 0)
            h->written = st.st_mtim;
    }
    if (!h->guests)
        h->guests = json_object();
}

/* Applies [fake] fail_<op>_hosts to the injection table. */
static void configure_injections(void)
{
    static const char *const ops[] = {"spawn", "attach_volume", "detach_volume", "snapshot"};
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
        char key[64];
        snprintf(key, sizeof(key), "fail_%s_hosts", ops[i]);
        char *copy = strdup(nb_conf_str("fake", key, "")), *save = NULL;
        for (char *t = strtok_r(copy, ", ", &save); t; t = strtok_r(NULL, ", ", &save))
            nb_virt_fake_fail(t, ops[i], -1);
        free(copy);
    }
}

struct nb_virt_driver *nb_virt_fake_open(void)
{
    struct fake_priv *p = calloc(1, sizeof(*p));
    pthread_mutex_init(&p->lock, NULL);
    p->index = json_object();
    p->spawn_delay_ms = nb_conf_int("fake", "spawn_delay_ms", 0);
    p->snapshot_delay_ms = nb_conf_int("fake", "snapshot_delay_ms", 0);

    char *dir = NULL;
    if (nb_conf_bool("fake", "persist_guests", true)) {
        dir = nb_strdup_printf("%s/fake", nb_conf_str("DEFAULT", "state_path", "/var/lib/nubo"));
        if (nb_mkdir_p(dir) < 0) {
            NB_WARN(LOGGER, NULL, NULL, "cannot create %s (%s): fake guests are not persisted", dir,
                    strerror(errno));
            free(dir);
            dir = NULL;
        }
    }
    char *copy = strdup(nb_conf_str("fake", "hosts", "fake-1,fake-2,fake-3")), *save = NULL;
    for (char *t = strtok_r(copy, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
        if (json_object_get(p->index, t))
            continue;
        p->hosts = realloc(p->hosts, (p->nhosts + 1) * sizeof(*p->hosts));
        memset(&p->hosts[p->nhosts], 0, sizeof(*p->hosts));
        init_host(&p->hosts[p->nhosts], t, dir);
        json_object_set_new(p->index, t, json_integer((json_int_t)p->nhosts));
        p->nhosts++;
    }
    free(copy);
    free(dir);
    configure_injections();
    fake_moves_configure();
    /* every served host has its state file, so that another process knows
     * it as a fake hypervisor (a live migration's destination) */
    for (size_t i = 0; i < p->nhosts; i++)
        if (p->hosts[i].state_file && access(p->hosts[i].state_file, F_OK) != 0)
            persist(&p->hosts[i]);

    struct nb_virt_driver *drv = calloc(1, sizeof(*drv));
    drv->ops = &fake_ops;
    drv->priv = p;
    NB_INFO(LOGGER, NULL, NULL, "fake virt driver serving %zu host(s)", p->nhosts);
    return drv;
}
