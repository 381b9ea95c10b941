/* doctor_checks.c - the diagnosis of `nubo doctor server`, in the runbook's
 * order: the server (status, task and power state, host, fault), its boot
 * volume, one and only one boot_index 0 mapping, the libvirt domain on its
 * host, and for every volume mapping the file, its real format against
 * connection_info.data.format, and the volume's status and attachment.
 *
 * Every check prints one line with its evidence; a format mismatch the fix
 * can correct (the file is raw or qcow2) is also recorded in the report for
 * doctor_fix.c. Nothing here writes to the database. */
#include "cmd/doctor.h"

#include "common/cleanup.h"
#include "common/json.h"
#include "common/util.h"
#include "compute/bdm.h"
#include "compute/compute.h"
#include "compute/objects/block_device.h"
#include "compute/objects/instance.h"
#include "db/db.h"
#include "image/format.h"
#include "volume/volume.h"

#include <errno.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *const verdict_names[] = {"OK", "WARN", "PROBLEM", "SKIP"};

void nb_dr_check(struct nb_dr_report *r, enum nb_dr_verdict v, const char *check, const char *fmt,
                 ...)
{
    FILE *out = r->out ? r->out : stdout;
    fprintf(out, "[%s] %s: ", verdict_names[v], check);
    va_list ap;
    va_start(ap, fmt);
    if (fmt)
        vfprintf(out, fmt, ap);
    va_end(ap);
    fputc('\n', out);
    fflush(out);
    if (v == NB_DR_PROBLEM)
        r->problems++;
    else if (v == NB_DR_WARN)
        r->warnings++;
}

void nb_dr_report_clear(struct nb_dr_report *r)
{
    FILE *out = r->out;
    json_decref(r->server);
    for (int i = 0; i < r->nfixes; i++) {
        free(r->fixes[i].old_connection_info);
        free(r->fixes[i].new_connection_info);
        free(r->fixes[i].old_admin_format);
    }
    memset(r, 0, sizeof(*r));
    r->out = out;
}

static bool is_volume_format(const char *f)
{
    return f && (!strcmp(f, "raw") || !strcmp(f, "qcow2"));
}

enum nb_dr_verdict nb_dr_compare_format(const char *declared, const char *real, bool *fixable)
{
    *fixable = false;
    if (declared && real && !strcmp(declared, real))
        return NB_DR_OK;
    *fixable = is_volume_format(declared) && is_volume_format(real);
    return NB_DR_PROBLEM;
}

int nb_dr_exit_status(int problems, bool fix_asked, bool fixed)
{
    if (problems == 0)
        return NB_DR_EXIT_HEALTHY;
    return fix_asked && fixed ? NB_DR_EXIT_FIXED : NB_DR_EXIT_PROBLEM;
}

static const char *or_none(const char *s)
{
    return s && *s ? s : "None";
}

/* Nova's power_state names. */
static const char *power_name(long long p)
{
    switch (p) {
    case 0: return "NOSTATE";
    case 1: return "RUNNING";
    case 3: return "PAUSED";
    case 4: return "SHUTDOWN";
    case 6: return "CRASHED";
    case 7: return "SUSPENDED";
    default: return "?";
    }
}

/* The live instance row by UUID, else by a name that only one live server
 * has. NULL with the reason on ctx. */
static json_t *find_server(struct nb_db *db, struct nb_ctx *ctx, const char *ref)
{
    json_t *row = nb_instance_get(db, ctx, ref, false);
    if (row || nb_ctx_failed(ctx))
        return row;
    _cleanup_json_ json_t *rows = nb_instance_list_by_name(db, ctx, ref);
    if (!rows)
        return NULL;
    if (json_array_size(rows) > 1) {
        nb_error(ctx, 409, NULL, "more than one server is named '%s'; give its id", ref);
        return NULL;
    }
    if (json_array_size(rows) == 0) {
        nb_error(ctx, 404, NULL, "no server with id or name '%s' in the database", ref);
        return NULL;
    }
    return json_incref(json_array_get(rows, 0));
}

static void check_server(struct nb_dr_report *r)
{
    const json_t *s = r->server;
    const char *vm = nb_json_str(s, "vm_state");
    const char *task = nb_json_str(s, "task_state");
    long long power = nb_json_int(s, "power_state", 0);
    const char *status = nb_server_status(vm, task);
    enum nb_dr_verdict v = NB_DR_OK;
    const char *why = "";
    if (!strcmp(status, "ERROR")) {
        v = NB_DR_PROBLEM;
        why = "; the server is in ERROR";
    } else if (task && *task) {
        v = NB_DR_WARN;
        why = "; a task is in progress";
    } else if (vm && !strcmp(vm, NB_VM_ACTIVE) && power != 1) {
        v = NB_DR_PROBLEM;
        why = "; ACTIVE in the API but the guest is not running";
    }
    nb_dr_check(r, v, "server",
                "%s name=\"%s\" status=%s vm_state=%s task_state=%s power_state=%lld (%s) "
                "host=%s node=%s%s",
                r->uuid, or_none(nb_json_str(s, "display_name")), status, or_none(vm),
                or_none(task), power, power_name(power), or_none(nb_json_str(s, "host")),
                or_none(nb_json_str(s, "node")), why);
}

static int check_fault(struct nb_db *db, struct nb_ctx *ctx, struct nb_dr_report *r)
{
    _cleanup_json_ json_t *f = nb_fault_latest(db, ctx, r->uuid, NULL);
    if (!f) {
        if (nb_ctx_failed(ctx))
            return -1;
        nb_dr_check(r, NB_DR_OK, "fault", "none recorded");
        return 0;
    }
    /* The latest fault is evidence; the server check says whether the
     * server is in trouble now. Its details (the causes, e.g. each build
     * attempt's) on the same line, newlines as " | ". */
    const char *d = nb_json_str(f, "details");
    char details[2048] = "";
    if (d && *d && strcmp(d, or_none(nb_json_str(f, "message")))) {
        size_t k = 0;
        for (const char *p = d; *p && k + 4 < sizeof(details); p++) {
            if (*p == '\n') {
                memcpy(details + k, " | ", 3);
                k += 3;
            } else {
                details[k++] = *p;
            }
        }
        details[k] = '\0';
    }
    nb_dr_check(r, NB_DR_WARN, "fault", "code=%lld created_at=%s host=%s message=\"%s\"%s%s%s",
                nb_json_int(f, "code", 0), or_none(nb_json_str(f, "created_at")),
                or_none(nb_json_str(f, "host")), or_none(nb_json_str(f, "message")),
                *details ? " details=\"" : "", details, *details ? "\"" : "");
    return 0;
}

/* The boot volume and the one-and-only boot_index 0 mapping. */
static void check_boot(struct nb_dr_report *r, const json_t *bdms)
{
    size_t i, nboot = 0;
    json_t *b;
    const json_t *boot = NULL;
    char uuids[1024] = "";
    json_array_foreach (bdms, i, b) {
        if (!nb_bdm_is_boot(b))
            continue;
        nboot++;
        boot = boot ? boot : b;
        size_t len = strlen(uuids);
        snprintf(uuids + len, sizeof(uuids) - len, "%s%s", len ? "," : "",
                 or_none(nb_json_str(b, "uuid")));
    }
    const json_t *vol = NULL;
    json_array_foreach (bdms, i, b)
        if (!vol && nb_bdm_is_boot(b) && nb_bdm_is_volume(b))
            vol = b;
    const char *image = nb_json_str(r->server, "image_ref");
    if (vol)
        nb_dr_check(r, NB_DR_OK, "boot volume",
                    "volume %s (bdm %s, source_type=%s, destination_type=volume, device=%s)",
                    or_none(nb_json_str(vol, "volume_id")), or_none(nb_json_str(vol, "uuid")),
                    or_none(nb_json_str(vol, "source_type")),
                    or_none(nb_json_str(vol, "device_name")));
    else if (image && *image)
        nb_dr_check(r, NB_DR_OK, "boot volume", "none; the server is image-backed (image %s)",
                    image);
    else {
        nb_dr_check(r, NB_DR_PROBLEM, "boot volume",
                    "none, and the server has no image: nothing to boot from");
        r->unfixable++;
    }

    if (nboot == 1)
        nb_dr_check(r, NB_DR_OK, "boot_index 0", "exactly one mapping (bdm %s, %s -> %s)", uuids,
                    or_none(nb_json_str(boot, "source_type")),
                    or_none(nb_json_str(boot, "destination_type")));
    else if (nboot == 0 && !vol && image && *image)
        /* Servers created before mappings were recorded boot from image_ref. */
        nb_dr_check(r, NB_DR_WARN, "boot_index 0", "no mapping; the server boots from image %s",
                    image);
    else {
        if (nboot == 0)
            nb_dr_check(r, NB_DR_PROBLEM, "boot_index 0",
                        "no mapping with boot_index 0 for a volume-backed server");
        else
            nb_dr_check(r, NB_DR_PROBLEM, "boot_index 0", "%zu mappings have boot_index 0 (bdm %s)",
                        nboot, uuids);
        r->unfixable++;
    }
}

static void quiet_libvirt(void *opaque, virErrorPtr err) {}

static const char *domain_state_name(int st)
{
    switch (st) {
    case VIR_DOMAIN_RUNNING: return "running";
    case VIR_DOMAIN_BLOCKED: return "blocked";
    case VIR_DOMAIN_PAUSED: return "paused";
    case VIR_DOMAIN_SHUTDOWN: return "shutting down";
    case VIR_DOMAIN_SHUTOFF: return "shut off";
    case VIR_DOMAIN_CRASHED: return "crashed";
    case VIR_DOMAIN_PMSUSPENDED: return "suspended";
    default: return "no state";
    }
}

/* Whether the libvirt domain (named and UUID'd by the instance UUID) exists
 * on this host and agrees with the database's power state. */
static void check_domain(struct nb_dr_report *r, const struct nb_dr_host *h)
{
    const char *host = nb_json_str(r->server, "host");
    const char *vm = nb_json_str(r->server, "vm_state");
    if (strcmp(h->driver, "libvirt")) {
        nb_dr_check(r, NB_DR_SKIP, "libvirt domain",
                    "[compute] driver is %s on this host; there is no libvirt domain to check",
                    h->driver);
        return;
    }
    if (!host || !*host) {
        nb_dr_check(r, NB_DR_SKIP, "libvirt domain", "the server has no host");
        return;
    }
    if (strcmp(host, h->my_host)) {
        nb_dr_check(r, NB_DR_SKIP, "libvirt domain",
                    "the server is on host %s and this is host %s; run the doctor on %s", host,
                    h->my_host, host);
        return;
    }
    virSetErrorFunc(NULL, quiet_libvirt);
    virConnectPtr conn = virConnectOpenReadOnly(h->libvirt_uri);
    if (!conn) {
        nb_dr_check(r, NB_DR_WARN, "libvirt domain", "cannot connect to %s: %s", h->libvirt_uri,
                    or_none(virGetLastErrorMessage()));
        return;
    }
    virDomainPtr dom = virDomainLookupByUUIDString(conn, r->uuid);
    if (!dom) {
        /* A stopped or never-started server may have no domain; one that the
         * database says runs must have it. */
        bool needed = vm && (!strcmp(vm, NB_VM_ACTIVE) || !strcmp(vm, NB_VM_PAUSED) ||
                             !strcmp(vm, NB_VM_SUSPENDED));
        nb_dr_check(r, needed ? NB_DR_PROBLEM : NB_DR_WARN, "libvirt domain",
                    "no domain %s on host %s (%s), vm_state=%s", r->uuid, host, h->libvirt_uri,
                    or_none(vm));
        virConnectClose(conn);
        return;
    }
    int st = VIR_DOMAIN_NOSTATE, reason = 0;
    virDomainGetState(dom, &st, &reason, 0);
    long long power = nb_json_int(r->server, "power_state", 0);
    bool running = st == VIR_DOMAIN_RUNNING || st == VIR_DOMAIN_BLOCKED;
    bool agrees = running == (power == 1);
    nb_dr_check(r, agrees ? NB_DR_OK : NB_DR_WARN, "libvirt domain",
                "domain %s on host %s is %s; the database says power_state=%lld (%s)%s", r->uuid,
                host, domain_state_name(st), power, power_name(power),
                agrees ? "" : "; they disagree");
    virDomainFree(dom);
    virConnectClose(conn);
}

static void remember_fix(struct nb_dr_report *r, const json_t *bdm, const char *vid,
                         const char *path, const char *declared, const char *real)
{
    if (r->nfixes >= NB_DR_MAX_FIXES) {
        r->unfixable++;
        return;
    }
    struct nb_dr_format_fix *f = &r->fixes[r->nfixes++];
    memset(f, 0, sizeof(*f));
    nb_strlcpy(f->bdm_uuid, or_none(nb_json_str(bdm, "uuid")), sizeof(f->bdm_uuid));
    nb_strlcpy(f->volume_id, vid, sizeof(f->volume_id));
    nb_strlcpy(f->path, path, sizeof(f->path));
    nb_strlcpy(f->old_format, declared, sizeof(f->old_format));
    nb_strlcpy(f->new_format, real, sizeof(f->new_format));
}

/* The file of one volume mapping and its real format against the mapping's
 * (and the volume's admin metadata). */
static void check_volume_file(struct nb_db *db, struct nb_ctx *ctx, struct nb_dr_report *r,
                              const json_t *bdm, const char *vid)
{
    const char *bdm_uuid = or_none(nb_json_str(bdm, "uuid"));
    _cleanup_json_ json_t *ci = nb_bdm_connection_info(bdm);
    if (!ci) {
        nb_dr_check(r, NB_DR_PROBLEM, "volume file",
                    "volume %s (bdm %s) has no connection_info; the mapping is not attached", vid,
                    bdm_uuid);
        r->unfixable++;
        return;
    }
    char path[4096];
    if (nb_bdm_volume_path(ci, path, sizeof(path)) < 0) {
        nb_dr_check(r, NB_DR_PROBLEM, "volume file",
                    "volume %s (bdm %s): connection_info lacks data.export, data.name or "
                    "mount_point_base",
                    vid, bdm_uuid);
        r->unfixable++;
        return;
    }
    struct stat sb;
    if (stat(path, &sb) < 0) {
        nb_dr_check(r, NB_DR_PROBLEM, "volume file", "volume %s file %s: %s", vid, path,
                    strerror(errno));
        r->unfixable++;
        return;
    }
    nb_dr_check(r, NB_DR_OK, "volume file", "volume %s file %s exists (%lld bytes)", vid, path,
                (long long)sb.st_size);

    struct nb_format_info info;
    char err[256];
    if (nb_format_inspect_path(path, &info, err, sizeof(err)) < 0) {
        nb_dr_check(r, NB_DR_PROBLEM, "disk format", "volume %s file %s cannot be inspected: %s",
                    vid, path, err);
        r->unfixable++;
        return;
    }
    const json_t *data = json_object_get(ci, "data");
    bool absent = !nb_json_str(data, "format") || !*nb_json_str(data, "format");
    const char *declared = nb_bdm_declared_format(ci);
    _cleanup_free_ char *meta = nb_volume_format(db, ctx, vid);
    char extra[600] = "";
    if (info.has_backing_file)
        snprintf(extra, sizeof(extra), ", backing file %s", info.backing_file);
    char evidence[5200];
    snprintf(evidence, sizeof(evidence),
             "volume %s connection_info.data.format=%s%s, file %s is %s%s "
             "(volume_admin_metadata format=%s)",
             vid, declared, absent ? " (absent; raw assumed)" : "", path, info.format, extra,
             meta ? meta : "None");
    bool fixable;
    if (nb_dr_compare_format(declared, info.format, &fixable) == NB_DR_OK) {
        bool meta_ok = !meta || !strcmp(meta, info.format);
        nb_dr_check(r, meta_ok ? NB_DR_OK : NB_DR_WARN, "disk format", "%s%s", evidence,
                    meta_ok ? "" : "; the volume's admin metadata disagrees");
        return;
    }
    /* a raw disk the guest wrote a qcow2 header into: never switch it to qcow2
     * when that header makes the host open another file */
    bool foreign = info.type == NB_FORMAT_QCOW2 &&
                   (info.has_data_file ||
                    (info.has_backing_file && !nb_bdm_own_chain_file(info.backing_file, vid)));
    if (fixable && foreign)
        fixable = false;
    nb_dr_check(r, NB_DR_PROBLEM, "disk format", "%s%s", evidence,
                foreign   ? "; its qcow2 header refers to a file outside the volume's own "
                            "chain, so it is not switched to qcow2"
                : fixable ? ""
                          : "; not a format a volume may have");
    if (fixable)
        remember_fix(r, bdm, vid, path, declared, info.format);
    else
        r->unfixable++;
}

/* The volume's own record: status and this server's attachment. */
static int check_volume_record(struct nb_db *db, struct nb_ctx *ctx, struct nb_dr_report *r,
                               const char *vid)
{
    _cleanup_json_ json_t *v = NULL, *a = NULL;
    if (nb_volume_attachment_state(db, ctx, vid, r->uuid, &v, &a) < 0)
        return -1;
    if (!v) {
        nb_dr_check(r, NB_DR_PROBLEM, "volume record", "volume %s does not exist (or is deleted)",
                    vid);
        r->unfixable++;
        return 0;
    }
    const char *status = or_none(nb_json_str(v, "status"));
    char att[400];
    if (a)
        snprintf(att, sizeof(att), "attachment %s attach_status=%s host=%s mountpoint=%s",
                 or_none(nb_json_str(a, "id")), or_none(nb_json_str(a, "attach_status")),
                 or_none(nb_json_str(a, "attached_host")), or_none(nb_json_str(a, "mountpoint")));
    else
        snprintf(att, sizeof(att), "no attachment record for this server");
    enum nb_dr_verdict verdict = NB_DR_OK;
    const char *why = "";
    if (!strcmp(status, "attaching") || !strcmp(status, "detaching") ||
        !strcmp(status, "reserved")) {
        verdict = NB_DR_WARN;
        why = "; an attach or detach is in progress";
    } else if (strcmp(status, "in-use") || !a) {
        verdict = NB_DR_PROBLEM;
        why = "; a mapped volume must be in-use and attached to the server";
        r->unfixable++;
    }
    nb_dr_check(r, verdict, "volume record",
                "volume %s status=%s attach_status=%s size=%lldGiB bootable=%s, %s%s", vid, status,
                or_none(nb_json_str(v, "attach_status")), nb_json_int(v, "size", 0),
                nb_json_int(v, "bootable", 0) ? "true" : "false", att, why);
    return 0;
}

int nb_dr_diagnose(struct nb_db *db, struct nb_ctx *ctx, const struct nb_dr_host *host,
                   const char *server_ref, struct nb_dr_report *r)
{
    r->server = find_server(db, ctx, server_ref);
    if (!r->server)
        return -1;
    nb_strlcpy(r->uuid, nb_json_str(r->server, "uuid"), sizeof(r->uuid));
    check_server(r);
    if (check_fault(db, ctx, r) < 0)
        return -1;
    _cleanup_json_ json_t *bdms = nb_bdm_rows(db, ctx, r->uuid);
    if (!bdms)
        return -1;
    check_boot(r, bdms);
    check_domain(r, host);
    nb_dr_check_network(db, r, host);
    size_t i;
    json_t *b;
    int nvol = 0;
    json_array_foreach (bdms, i, b) {
        const char *vid = nb_json_str(b, "volume_id");
        if (!nb_bdm_is_volume(b) || !vid)
            continue;
        nvol++;
        check_volume_file(db, ctx, r, b, vid);
        if (check_volume_record(db, ctx, r, vid) < 0)
            return -1;
    }
    if (!nvol)
        nb_dr_check(r, NB_DR_SKIP, "volumes", "the server has no volume mappings");
    return 0;
}

int nb_dr_check_volume_formats(struct nb_db *db, struct nb_ctx *ctx, struct nb_dr_report *r,
                               const json_t *bdms)
{
    size_t i;
    json_t *b;
    int nvol = 0;
    json_array_foreach (bdms, i, b) {
        const char *vid = nb_json_str(b, "volume_id");
        if (!nb_bdm_is_volume(b) || !vid)
            continue;
        nvol++;
        check_volume_file(db, ctx, r, b, vid);
    }
    return nvol;
}
