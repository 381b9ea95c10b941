/* fake_moves.c - live migration on the fake driver: the guest moves from
 * one fake host's guest table to another's, instantly or over [fake]
 * live_migration_ms with progress reports, so that the control plane's
 * whole flow (prechecks, phases, abort, force-complete, rollback) runs
 * without a hypervisor.
 *
 * What each host offers migrations, per host with "<key>.<host>":
 *  - [fake] hypervisor_version (fake.c) and cpu_model: a host offers its
 *    own CPU model and every older one of a fixed generation list
 *    (Nehalem … Icelake-Server; an unknown model offers only itself);
 *    guests get [fake] guest_cpu_model (default: the host's model), so
 *    "custom" baseline models can be modelled;
 *  - [fake] shared_storage (default true): hosts with true share one
 *    instances path (the probe file made on one is seen by all of them);
 *    a host with false has its own;
 *  - [fake] migration_addr (default 127.0.0.1) and mtu (default 1500).
 * The migration URI of host H is "fake://H/system".
 *
 * Fault injection ([fake] fail_<op>_hosts, nb_virt_fake_fail(host, op, n)):
 * "check_migration_target" (on the source or on the destination the URI
 * names: the destination is "unreachable"), "check_cpu" (destination),
 * "pre_live_migration" (destination), "live_migrate" (source: fails half
 * way), "post_live_migration" (destination), "rollback_live_migration"
 * (destination).
 *
 * Probe files live in a process-wide table (guarded by its own mutex), as
 * the injection table does: a probe is a name and the storage it was made
 * on. */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "compute/virt/driver.h"
#include "compute/virt/fake_moves.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define STEP_MS 100

static pthread_mutex_t probe_lock = PTHREAD_MUTEX_INITIALIZER;
static json_t *probes; /* {name: storage} */

/* CPU models by generation: a host offers its own and every older one. */
static const char *const generations[] = {
    "Nehalem",        "Westmere",  "SandyBridge",    "IvyBridge",      "Haswell-noTSX-IBRS",
    "Haswell",        "Broadwell", "Skylake-Client", "Skylake-Server", "Cascadelake-Server",
    "Icelake-Server", NULL};

/* The models host's CPU model offers, new array. */
static json_t *offered_models(const char *model)
{
    json_t *out = json_array();
    int idx = -1;
    for (int i = 0; generations[i]; i++)
        if (!strcasecmp(generations[i], model))
            idx = i;
    if (idx < 0) {
        json_array_append_new(out, json_string(model));
        return out;
    }
    for (int i = 0; i <= idx; i++)
        json_array_append_new(out, json_string(generations[i]));
    return out;
}

/* The storage host's instances path lives on ("shared" or the host's own
 * name), into out. */
static void storage_of(const char *host, char *out, size_t n)
{
    if (fake_conf_bool(host, "shared_storage", true))
        nb_strlcpy(out, "shared", n);
    else
        snprintf(out, n, "local-%s", host);
}

static int need_host(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host)
{
    if (!host || !fake_has_host(drv, host))
        return nb_error(ctx, 404, NULL, "Host %s is not managed by the fake virt driver.",
                        host ? host : "(null)");
    return 0;
}

json_t *fake_migration_info(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host)
{
    if (need_host(drv, ctx, host) < 0)
        return NULL;
    const char *model = fake_host_cpu_model(drv, host);
    char storage[300], uri[320], path[4400];
    storage_of(host, storage, sizeof(storage));
    snprintf(uri, sizeof(uri), "fake://%s/system", host);
    snprintf(path, sizeof(path), "%s/fake/%s",
             nb_conf_str("DEFAULT", "state_path", "/var/lib/nubo"), storage);
    return json_pack("{s:s, s:I, s:I, s:s, s:s, s:I, s:o, s:{s:s, s:s, s:[]}, s:s, s:b, s:[]}",
                     "hypervisor_type", "fake", "hypervisor_version",
                     (json_int_t)fake_host_hv_version(drv, host), "libvirt_version", (json_int_t)0,
                     "uri", uri, "addr", fake_conf_str(host, "migration_addr", "127.0.0.1"), "mtu",
                     (json_int_t)fake_conf_int(host, "mtu", 1500), "cpu_models",
                     offered_models(model), "guest_cpu", "mode", "custom", "model",
                     fake_conf_str(host, "guest_cpu_model", model), "features", "instances_path",
                     path, "tls", 0, "tls_missing");
}

int fake_check_cpu(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                   const json_t *guest_cpu)
{
    if (need_host(drv, ctx, host) < 0)
        return -1;
    const char *want = nb_json_str(guest_cpu, "model");
    if (fake_take_failure(host, "check_cpu"))
        return nb_error(ctx, 500, NULL, "Fake driver: CPU comparison failure injected on host %s.",
                        host);
    if (!want || !*want)
        return 0; /* no model asked for: any host runs it */
    const char *model = fake_host_cpu_model(drv, host);
    _cleanup_json_ json_t *offered = offered_models(model);
    char list[1024] = "";
    size_t i;
    json_t *m;
    json_array_foreach (offered, i, m) {
        if (!strcasecmp(json_string_value(m), want))
            return 0;
        snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", i ? ", " : "",
                 json_string_value(m));
    }
    return nb_error(ctx, 409, NULL,
                    "the guest CPU model %s is missing on host %s (host CPU %s offers: %s)", want,
                    host, model, list);
}

int fake_storage_probe_create(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                              char name[64])
{
    if (need_host(drv, ctx, host) < 0)
        return -1;
    char u[NB_UUID_LEN], storage[300];
    nb_uuid(u);
    snprintf(name, 64, "tmp%.24s", u);
    storage_of(host, storage, sizeof(storage));
    pthread_mutex_lock(&probe_lock);
    if (!probes)
        probes = json_object();
    json_object_set_new(probes, name, json_string(storage));
    pthread_mutex_unlock(&probe_lock);
    return 0;
}

int fake_storage_probe_exists(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                              const char *name, bool *exists)
{
    if (need_host(drv, ctx, host) < 0)
        return -1;
    char storage[300];
    storage_of(host, storage, sizeof(storage));
    pthread_mutex_lock(&probe_lock);
    const char *at = name ? nb_json_str(probes, name) : NULL;
    *exists = at && !strcmp(at, storage);
    pthread_mutex_unlock(&probe_lock);
    return 0;
}

int fake_storage_probe_remove(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                              const char *name)
{
    if (need_host(drv, ctx, host) < 0)
        return -1;
    pthread_mutex_lock(&probe_lock);
    if (probes && name)
        json_object_del(probes, name);
    pthread_mutex_unlock(&probe_lock);
    return 0;
}

int fake_check_migration_target(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                                const char *dest_uri, int timeout_ms)
{
    (void)timeout_ms;
    if (need_host(drv, ctx, host) < 0)
        return -1;
    char dest[256] = "";
    if (dest_uri && nb_startswith(dest_uri, "fake://")) {
        nb_strlcpy(dest, dest_uri + 7, sizeof(dest));
        char *slash = strchr(dest, '/');
        if (slash)
            *slash = '\0';
    }
    if (!dest[0] || !fake_has_host(drv, dest))
        return nb_error(ctx, 503, NULL,
                        "Cannot connect to %s from host %s: host %s is not a fake hypervisor",
                        dest_uri ? dest_uri : "(none)", host, dest[0] ? dest : "(none)");
    if (fake_take_failure(host, "check_migration_target") ||
        fake_take_failure(dest, "check_migration_target"))
        return nb_error(ctx, 503, NULL,
                        "Cannot connect to %s from host %s: host %s, port 16509: Connection "
                        "refused (failure injected)",
                        dest_uri, host, dest);
    return 0;
}

/* Whether the instance boots from a volume (mapping with boot_index 0). */
static bool boots_from_volume(json_t *instance)
{
    size_t i;
    json_t *b;
    json_array_foreach (json_object_get(instance, "block_device_mapping"), i, b) {
        json_t *bi = json_object_get(b, "boot_index");
        const char *dst = nb_json_str(b, "destination_type");
        if (json_is_integer(bi) && json_integer_value(bi) == 0 && dst && !strcmp(dst, "volume") &&
            nb_json_int(b, "deleted", 0) == 0)
            return true;
    }
    return false;
}

json_t *fake_migration_disks(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                             json_t *instance)
{
    _cleanup_json_ json_t *info = fake_migration_info(drv, ctx, host);
    if (!info)
        return NULL;
    const char *uuid = nb_json_str(instance, "uuid");
    const char *ipath = nb_json_str(info, "instances_path");
    json_t *flavor = json_object_get(instance, "flavor");
    json_t *out = json_array();
    char path[4600];
    if (!boots_from_volume(instance)) {
        snprintf(path, sizeof(path), "%s/%s/disk", ipath, uuid);
        json_array_append_new(out, json_pack("{s:s, s:s, s:s, s:I, s:n, s:b, s:b}", "target", "vda",
                                             "path", path, "format", "qcow2", "virtual_size",
                                             (json_int_t)nb_json_int(flavor, "root_gb", 0) << 30,
                                             "backing", "readonly", 0, "local", 1));
    }
    if (nb_json_int(flavor, "ephemeral_gb", 0) > 0) {
        snprintf(path, sizeof(path), "%s/%s/disk.eph0", ipath, uuid);
        json_array_append_new(out,
                              json_pack("{s:s, s:s, s:s, s:I, s:n, s:b, s:b}", "target", "vdb",
                                        "path", path, "format", "qcow2", "virtual_size",
                                        (json_int_t)nb_json_int(flavor, "ephemeral_gb", 0) << 30,
                                        "backing", "readonly", 0, "local", 1));
    }
    const char *cd = nb_json_str(instance, "config_drive");
    if (cd && *cd) {
        snprintf(path, sizeof(path), "%s/%s/disk.config", ipath, uuid);
        json_array_append_new(out, json_pack("{s:s, s:s, s:s, s:I, s:n, s:b, s:b}", "target", "hda",
                                             "path", path, "format", "raw", "virtual_size",
                                             (json_int_t)(64 << 20), "backing", "readonly", 1,
                                             "local", 1));
    }
    size_t i;
    json_t *b;
    json_array_foreach (json_object_get(instance, "block_device_mapping"), i, b) {
        const char *dst = nb_json_str(b, "destination_type");
        const char *vid = nb_json_str(b, "volume_id");
        if (!dst || strcmp(dst, "volume") || !vid || nb_json_int(b, "deleted", 0) != 0)
            continue;
        const char *dev = nb_json_str(b, "device_name");
        json_array_append_new(out, json_pack("{s:s, s:s, s:s, s:I, s:n, s:b, s:b}", "target",
                                             dev ? dev : "", "path", vid, "format", "raw",
                                             "virtual_size",
                                             (json_int_t)nb_json_int(b, "volume_size", 0) << 30,
                                             "backing", "readonly", 0, "local", 0));
    }
    return out;
}

json_t *fake_pre_live_migration(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                                json_t *instance, const json_t *disks, bool shared_storage,
                                bool block_migration)
{
    if (need_host(drv, ctx, host) < 0)
        return NULL;
    const char *uuid = nb_json_str(instance, "uuid");
    if (fake_take_failure(host, "pre_live_migration")) {
        nb_error(ctx, 500, NULL,
                 "Fake driver: pre_live_migration failure injected on host %s for instance %s.",
                 host, uuid ? uuid : "(null)");
        return NULL;
    }
    NB_INFO(FAKE_LOGGER, ctx, uuid, "prepared host %s for the incoming guest (%s, %s)", host,
            shared_storage ? "shared storage" : "local disks",
            block_migration ? "block migration" : "no block migration");
    return json_pack("{s:O, s:s}", "disks", disks ? (json_t *)disks : json_null(), "host", host);
}

/* Reports progress: memory (and disk for a block migration) done over the
 * fraction f of the run. */
static void report(struct nb_live_migration *m, long long mem, long long disk, double f)
{
    if (!m->progress)
        return;
    struct nb_migration_progress p = {
        .memory_total = mem,
        .memory_processed = (long long)(mem * f),
        .memory_remaining = mem - (long long)(mem * f),
        .disk_total = disk,
        .disk_processed = (long long)(disk * f),
        .disk_remaining = disk - (long long)(disk * f),
    };
    m->progress(m->opaque, &p);
}

/* Moves the guest from host to dest in the tables (lock taken here). */
static int move_guest(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                      const char *dest, const char *uuid)
{
    fake_lock(drv);
    int rc = -1;
    json_t *src = fake_host_guests(drv, ctx, host);
    json_t *dst = src ? fake_host_guests(drv, ctx, dest) : NULL;
    json_t *g = src && uuid ? json_object_get(src, uuid) : NULL;
    if (!dst)
        goto out;
    if (!g) {
        nb_error(ctx, 404, NULL, "Fake driver: no guest %s on host %s.", uuid ? uuid : "(null)",
                 host);
        goto out;
    }
    if (json_object_get(dst, uuid)) {
        nb_error(ctx, 409, NULL, "Fake driver: guest %s already exists on host %s.", uuid, dest);
        goto out;
    }
    char line[600];
    snprintf(line, sizeof(line), "live-migrated from host %s to host %s", host, dest);
    fake_console_line(g, line);
    json_object_set(dst, uuid, g);
    json_object_del(src, uuid);
    fake_host_persist(drv, host);
    fake_host_persist(drv, dest);
    rc = 0;
out:
    fake_unlock(drv);
    return rc;
}

int fake_live_migrate(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                      json_t *instance, struct nb_live_migration *m)
{
    const char *uuid = nb_json_str(instance, "uuid");
    if (need_host(drv, ctx, host) < 0 || need_host(drv, ctx, m->dest_host) < 0)
        return -1;
    long long mem = nb_json_int(json_object_get(instance, "flavor"), "memory_mb", 0) << 20;
    long long disk = 0;
    size_t i;
    json_t *d;
    json_array_foreach (m->dest_disks ? json_object_get(m->dest_disks, "disks") : NULL, i, d)
        if (m->block_migration && json_is_true(json_object_get(d, "local")))
            disk += nb_json_int(d, "virtual_size", 0);
    long total_ms = fake_conf_int(host, "live_migration_ms", 0);
    bool fail = fake_take_failure(host, "live_migrate");
    long steps = total_ms / STEP_MS;
    for (long s = 0; s <= steps; s++) {
        double f = steps ? (double)s / (double)steps : 1.0;
        if (atomic_load(&m->abort_requested)) {
            m->cancelled = true;
            return nb_error(ctx, 409, NULL,
                            "Migration of instance %s to %s cancelled by request (at %.0f%%)",
                            uuid ? uuid : "(null)", m->dest_host, f * 100);
        }
        if (fail && f >= 0.5)
            return nb_error(ctx, 500, NULL,
                            "Fake driver: live migration of %s to %s failed: operation failed: "
                            "migration job: unexpectedly failed (failure injected on host %s)",
                            uuid ? uuid : "(null)", m->dest_host, host);
        if (atomic_load(&m->force_complete_requested))
            break;
        report(m, mem, disk, f);
        if (s < steps)
            usleep(STEP_MS * 1000);
    }
    if (fail)
        return nb_error(ctx, 500, NULL,
                        "Fake driver: live migration of %s to %s failed: operation failed: "
                        "migration job: unexpectedly failed (failure injected on host %s)",
                        uuid ? uuid : "(null)", m->dest_host, host);
    report(m, mem, disk, 1.0);
    return move_guest(drv, ctx, host, m->dest_host, uuid);
}

int fake_post_live_migration_dest(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                                  json_t *instance)
{
    if (need_host(drv, ctx, host) < 0)
        return -1;
    const char *uuid = nb_json_str(instance, "uuid");
    if (fake_take_failure(host, "post_live_migration"))
        return nb_error(ctx, 500, NULL,
                        "Fake driver: post_live_migration failure injected on host %s for "
                        "instance %s.",
                        host, uuid ? uuid : "(null)");
    fake_lock(drv);
    json_t *guests = fake_host_guests(drv, ctx, host);
    json_t *g = guests && uuid ? json_object_get(guests, uuid) : NULL;
    if (g) {
        fake_console_line(g, "guest defined persistently after the live migration");
        fake_host_persist(drv, host);
    }
    fake_unlock(drv);
    if (!g)
        return nb_error(ctx, 404, NULL, "Fake driver: no guest %s on host %s.",
                        uuid ? uuid : "(null)", host);
    return 0;
}

int fake_post_live_migration_source(struct nb_virt_driver *drv, struct nb_ctx *ctx,
                                    const char *host, json_t *instance, bool shared_storage)
{
    if (need_host(drv, ctx, host) < 0)
        return -1;
    NB_INFO(FAKE_LOGGER, ctx, nb_json_str(instance, "uuid"),
            "source %s cleaned up after the live migration (%s)", host,
            shared_storage ? "shared storage: files kept" : "local files removed");
    return 0;
}

int fake_rollback_live_migration_dest(struct nb_virt_driver *drv, struct nb_ctx *ctx,
                                      const char *host, json_t *instance, bool shared_storage)
{
    (void)shared_storage;
    if (need_host(drv, ctx, host) < 0)
        return -1;
    const char *uuid = nb_json_str(instance, "uuid");
    if (fake_take_failure(host, "rollback_live_migration"))
        return nb_error(ctx, 500, NULL,
                        "Fake driver: rollback failure injected on host %s for instance %s.", host,
                        uuid ? uuid : "(null)");
    fake_lock(drv);
    json_t *guests = fake_host_guests(drv, ctx, host);
    if (guests && uuid && json_object_get(guests, uuid)) {
        json_object_del(guests, uuid);
        fake_host_persist(drv, host);
    }
    fake_unlock(drv);
    return guests ? 0 : -1;
}

void fake_moves_configure(void)
{
    static const char *const ops[] = {"check_migration_target", "check_cpu",
                                      "pre_live_migration",     "live_migrate",
                                      "post_live_migration",    "rollback_live_migration"};
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
        char key[64];
        snprintf(key, sizeof(key), "fail_%s_hosts", ops[i]);
        char *copy = strdup(nb_conf_str("fake", key, "")), *save = NULL;
        for (char *t = strtok_r(copy, ", ", &save); t; t = strtok_r(NULL, ", ", &save))
            nb_virt_fake_fail(t, ops[i], -1);
        free(copy);
    }
}
