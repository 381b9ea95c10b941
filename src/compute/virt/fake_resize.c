/* fake_resize.c - cold migration and resize on the fake driver: the guest
 * moves between fake hosts instantly, as Nova's fake driver moves it, so
 * the whole workflow (placement, states, events) runs without a
 * hypervisor.
 *
 * Across hosts the source keeps its guest, powered off and marked
 * "resize_source", until confirm_migration removes it; the destination
 * gets a new guest with the new flavor. On one host the guest stays where
 * it is: finish_migration changes its flavor, finish_revert_migration
 * changes it back. The serial console tells each step.
 *
 * Fault injection per host and phase (the op names of driver.h):
 * nb_virt_fake_fail(host, op, n), [fake] fail_<op>_hosts, and the file
 * $state_path/fake/fail.json ({"<host>": {"<op>": n}}), re-read whenever
 * its modification time changes, so that a test can make the next n
 * steps of a phase fail on a running cloud. [fake] <op>_delay_ms delays a
 * step's answer (not its effect), to interrupt a move in a test. */
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "compute/virt/fake_internal.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LOGGER "nubo.compute.virt.fake"

static pthread_mutex_t file_lock = PTHREAD_MUTEX_INITIALIZER;
static struct timespec file_mtime;
static bool config_read;

/* Applies fail.json (when it changed) and [fake] fail_<op>_hosts (once). */
static void load_injections(void)
{
    static const char *const ops[] = {"prep_resize",      "migrate_disk_and_power_off",
                                      "finish_migration", "confirm_migration",
                                      "revert_migration", "finish_revert_migration"};
    char *path = nb_strdup_printf("%s/fake/fail.json",
                                  nb_conf_str("DEFAULT", "state_path", "/var/lib/nubo"));
    pthread_mutex_lock(&file_lock);
    if (!config_read) {
        config_read = true;
        for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
            char key[64];
            snprintf(key, sizeof(key), "fail_%s_hosts", ops[i]);
            char *copy = strdup(nb_conf_str("fake", key, "")), *save = NULL;
            for (char *t = strtok_r(copy, ", ", &save); t; t = strtok_r(NULL, ", ", &save))
                nb_virt_fake_fail(t, ops[i], -1);
            free(copy);
        }
    }
    struct stat st;
    if (stat(path, &st) == 0 &&
        (st.st_mtim.tv_sec != file_mtime.tv_sec || st.st_mtim.tv_nsec != file_mtime.tv_nsec)) {
        file_mtime = st.st_mtim;
        json_t *j = json_load_file(path, 0, NULL);
        const char *host;
        json_t *per;
        json_object_foreach (j, host, per) {
            const char *op;
            json_t *n;
            json_object_foreach (per, op, n) {
                if (json_is_integer(n))
                    nb_virt_fake_fail(host, op, (int)json_integer_value(n));
            }
        }
        NB_INFO(LOGGER, NULL, NULL, "fault injection read from %s", path);
        json_decref(j);
    }
    pthread_mutex_unlock(&file_lock);
    free(path);
}

/* -1 with the injected failure's error when op fails now on host. */
static int injected(struct nb_ctx *ctx, const char *host, const char *op, const char *uuid)
{
    load_injections();
    if (!nb_virt_fake_take_failure(host, op))
        return 0;
    return nb_error(ctx, 500, NULL, "Fake driver: %s failure injected on host %s for instance %s.",
                    op, host, uuid ? uuid : "?");
}

static void console_line(json_t *guest, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void console_line(json_t *guest, const char *fmt, ...)
{
    char line[512], ts[32];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    const char *old = nb_json_str(guest, "console");
    char *text = nb_strdup_printf("%s[%s] %s\n", old ? old : "", nb_now_iso(ts), line);
    json_object_set_new(guest, "console", json_string(text));
    free(text);
}

/* What one step does to the guests of its host(s). */
struct step {
    const char *op, *uuid;
    const char *host, *other; /* this host, and the peer host of the move */
    const json_t *flavor;     /* the flavor the guest gets (finish, revert) */
    bool same_host, power_on;
};

static const char *flavor_name(const json_t *f)
{
    return nb_json_str(f, "name") ? nb_json_str(f, "name") : "(unnamed)";
}

static int no_guest(struct nb_ctx *ctx, const struct step *s)
{
    return nb_error(ctx, 404, NULL, "Fake driver: no guest %s on host %s.", s->uuid, s->host);
}

/* Runs fn on host's guests (a one-host step). */
static int on_host(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                   int (*fn)(struct nb_ctx *, json_t *, json_t *, void *), struct step *s)
{
    if (!s->uuid)
        return nb_error(ctx, 400, NULL, "Instance without uuid given to the fake driver.");
    if (injected(ctx, host, s->op, s->uuid) < 0)
        return -1;
    int rc = nb_virt_fake_with_guests(drv, ctx, host, host, fn, s);
    /* [fake] <op>_delay_ms: the step's answer comes that much later (its
     * effect is there at once), so that a test can interrupt a move */
    char key[64];
    snprintf(key, sizeof(key), "%s_delay_ms", s->op);
    long delay = nb_conf_int("fake", key, 0);
    if (delay > 0)
        usleep((useconds_t)delay * 1000);
    return rc;
}

static int prep(struct nb_ctx *ctx, json_t *g, json_t *unused, void *arg)
{
    (void)unused;
    struct step *s = arg;
    if (!s->same_host && json_object_get(g, s->uuid))
        return nb_error(ctx, 409, NULL, "Fake driver: guest %s already exists on host %s.", s->uuid,
                        s->host);
    return 0;
}

json_t *nb_virt_fake_prep_resize(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                                 json_t *instance, const json_t *flavor, bool same_host)
{
    struct step s = {"prep_resize", nb_json_str(instance, "uuid"), host, NULL, flavor, same_host,
                     false};
    if (on_host(drv, ctx, host, prep, &s) < 0)
        return NULL;
    return json_pack("{s:s}", "host", host);
}

static int power_off_for_move(struct nb_ctx *ctx, json_t *guests, json_t *unused, void *arg)
{
    (void)unused;
    struct step *s = arg;
    json_t *g = json_object_get(guests, s->uuid);
    if (!g)
        return no_guest(ctx, s);
    json_object_set_new(g, "power_state", json_integer(NB_POWER_SHUTDOWN));
    json_object_set_new(g, "resize_source", json_true());
    if (s->same_host)
        console_line(g, "powered off for a resize on this host: disks stay in place");
    else
        console_line(g, "powered off for migration: disks sent to host %s", s->other);
    return 0;
}

int nb_virt_fake_migrate_disk(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                              json_t *instance, const json_t *flavor, const char *dest_host,
                              const json_t *dest, bool same_host, int timeout_s)
{
    (void)dest, (void)timeout_s;
    struct step s = {"migrate_disk_and_power_off",
                     nb_json_str(instance, "uuid"),
                     host,
                     dest_host,
                     flavor,
                     same_host,
                     false};
    return on_host(drv, ctx, host, power_off_for_move, &s);
}

static int finish(struct nb_ctx *ctx, json_t *guests, json_t *unused, void *arg)
{
    (void)unused;
    struct step *s = arg;
    json_t *g = json_object_get(guests, s->uuid);
    if (!s->same_host) {
        if (g)
            return nb_error(ctx, 409, NULL, "Fake driver: guest %s already exists on host %s.",
                            s->uuid, s->host);
        g = json_object();
        json_object_set_new(guests, s->uuid, g);
        console_line(g, "fake guest %s defined on host %s from the disks of a migration", s->uuid,
                     s->host);
    } else if (!g) {
        return no_guest(ctx, s);
    }
    console_line(g, "flavor %s: %lld vCPU, %lld MB RAM, %lld GB root disk", flavor_name(s->flavor),
                 nb_json_int(s->flavor, "vcpus", 0), nb_json_int(s->flavor, "memory_mb", 0),
                 nb_json_int(s->flavor, "root_gb", 0));
    json_object_set_new(g, "power_state",
                        json_integer(s->power_on ? NB_POWER_RUNNING : NB_POWER_SHUTDOWN));
    console_line(g, "%s", s->power_on ? "booted, running" : "left powered off, as before the move");
    return 0;
}

int nb_virt_fake_finish_migration(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                                  json_t *instance, bool same_host, bool power_on)
{
    struct step s = {"finish_migration",
                     nb_json_str(instance, "uuid"),
                     host,
                     NULL,
                     json_object_get(instance, "flavor"),
                     same_host,
                     power_on};
    return on_host(drv, ctx, host, finish, &s);
}

/* confirm on the source and revert on the destination: across hosts the
 * guest there goes; on one host only the mark of the move does. */
static int drop(struct nb_ctx *ctx, json_t *guests, json_t *unused, void *arg)
{
    (void)ctx, (void)unused;
    struct step *s = arg;
    json_t *g = json_object_get(guests, s->uuid);
    if (!g)
        return 0;
    if (!s->same_host) {
        json_object_del(guests, s->uuid);
        return 0;
    }
    if (!strcmp(s->op, "confirm_migration")) {
        json_object_del(g, "resize_source");
        console_line(g, "resize confirmed");
    }
    return 0;
}

int nb_virt_fake_confirm_migration(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                                   json_t *instance, bool same_host)
{
    struct step s = {
        "confirm_migration", nb_json_str(instance, "uuid"), host, NULL, NULL, same_host, false};
    return on_host(drv, ctx, host, drop, &s);
}

int nb_virt_fake_revert_migration(struct nb_virt_driver *drv, struct nb_ctx *ctx, const char *host,
                                  json_t *instance, bool same_host)
{
    struct step s = {
        "revert_migration", nb_json_str(instance, "uuid"), host, NULL, NULL, same_host, false};
    return on_host(drv, ctx, host, drop, &s);
}

static int restore(struct nb_ctx *ctx, json_t *guests, json_t *unused, void *arg)
{
    (void)unused;
    struct step *s = arg;
    json_t *g = json_object_get(guests, s->uuid);
    if (!g)
        return no_guest(ctx, s);
    json_object_del(g, "resize_source");
    console_line(g, "resize reverted: flavor %s", flavor_name(s->flavor));
    json_object_set_new(g, "power_state",
                        json_integer(s->power_on ? NB_POWER_RUNNING : NB_POWER_SHUTDOWN));
    console_line(g, "%s", s->power_on ? "booted, running" : "left powered off");
    return 0;
}

int nb_virt_fake_finish_revert_migration(struct nb_virt_driver *drv, struct nb_ctx *ctx,
                                         const char *host, json_t *instance, bool same_host,
                                         bool power_on)
{
    struct step s = {"finish_revert_migration",
                     nb_json_str(instance, "uuid"),
                     host,
                     NULL,
                     json_object_get(instance, "flavor"),
                     same_host,
                     power_on};
    return on_host(drv, ctx, host, restore, &s);
}
