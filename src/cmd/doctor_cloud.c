/* doctor_cloud.c - `nubo doctor cloud [--json]` (and `nubo doctor` with no
 * argument): the whole cloud checked from the database, as compute/audit.c
 * does it (allocations, migrations, tasks, services, clock skew, port
 * bindings), plus what only this host can see: the libvirt domains of the
 * servers on this host ([DEFAULT] host, libvirt driver) and every volume
 * mapping's format against its file (doctor_checks.c's per-server check).
 * One line per finding, "[VERDICT] check: evidence", or one JSON document. */
#include "cmd/doctor.h"

#include "common/cleanup.h"
#include "common/json.h"
#include "common/util.h"
#include "compute/audit.h"
#include "compute/bdm.h"
#include "compute/objects/block_device.h"
#include "compute/objects/states.h"
#include "db/db.h"
#include "placement/placement.h"

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void quiet(void *opaque, virErrorPtr err) {}

/* {uuid: row} of the live servers whose host is h->my_host. */
static json_t *servers_here(json_t *servers, const struct nb_dr_host *h)
{
    json_t *here = json_object();
    size_t i;
    json_t *s;
    json_array_foreach (servers, i, s) {
        const char *host = nb_json_str(s, "host");
        if (host && !strcmp(host, h->my_host))
            json_object_set(here, nb_json_str(s, "uuid"), s);
    }
    return here;
}

static bool needs_domain(const char *vm)
{
    return vm &&
           (!strcmp(vm, NB_VM_ACTIVE) || !strcmp(vm, NB_VM_PAUSED) || !strcmp(vm, NB_VM_SUSPENDED));
}

/* Servers on this host without their domain; domains named as nubo names
 * its guests (the instance UUID) without a live server. */
static void check_domains(json_t *servers, const struct nb_dr_host *h, json_t *out)
{
    if (strcmp(h->driver, "libvirt")) {
        nb_audit_add(out, "SKIP", "libvirt domain", NULL, NULL,
                     "[compute] driver is %s on this host; its guests are known only to the "
                     "agent",
                     h->driver);
        return;
    }
    virSetErrorFunc(NULL, quiet);
    virConnectPtr conn = virConnectOpenReadOnly(h->libvirt_uri);
    if (!conn) {
        nb_audit_add(out, "SKIP", "libvirt domain", NULL, NULL, "cannot connect to %s: %s",
                     h->libvirt_uri, virGetLastErrorMessage());
        return;
    }
    _cleanup_json_ json_t *here = servers_here(servers, h);
    size_t before = json_array_size(out);
    const char *uuid;
    json_t *s;
    json_object_foreach (here, uuid, s) {
        virDomainPtr d = virDomainLookupByUUIDString(conn, uuid);
        if (d) {
            virDomainFree(d);
            continue;
        }
        if (needs_domain(nb_json_str(s, "vm_state")))
            nb_audit_add(out, "PROBLEM", "libvirt domain", uuid, NULL,
                         "server %s is %s on host %s but %s has no domain %s", uuid,
                         nb_json_str(s, "vm_state"), h->my_host, h->libvirt_uri, uuid);
    }
    virDomainPtr *doms = NULL;
    int n = virConnectListAllDomains(conn, &doms, 0);
    for (int i = 0; i < n; i++) {
        char u[VIR_UUID_STRING_BUFLEN] = "";
        virDomainGetUUIDString(doms[i], u);
        const char *name = virDomainGetName(doms[i]);
        /* nubo names a guest by its instance UUID */
        if (name && !strcmp(name, u) && !json_object_get(here, u))
            nb_audit_add(out, "PROBLEM", "libvirt domain", u, NULL,
                         "domain %s on host %s (%s) belongs to no live server on this host", u,
                         h->my_host, h->libvirt_uri);
        virDomainFree(doms[i]);
    }
    free(doms);
    if (json_array_size(out) == before)
        nb_audit_add(out, "OK", "libvirt domain", NULL, NULL,
                     "%zu server(s) on host %s and the domains of %s agree", json_object_size(here),
                     h->my_host, h->libvirt_uri);
    virConnectClose(conn);
}

/* Every live server's volume mappings through doctor_checks.c's check. */
static void check_formats(struct nb_db *db, struct nb_ctx *ctx, json_t *servers, json_t *out)
{
    FILE *devnull = fopen("/dev/null", "w");
    size_t i, before = json_array_size(out);
    json_t *s;
    int nvol = 0;
    json_array_foreach (servers, i, s) {
        const char *uuid = nb_json_str(s, "uuid");
        _cleanup_json_ json_t *bdms = nb_bdm_rows(db, ctx, uuid);
        nb_ctx_clear_error(ctx);
        struct nb_dr_report r = {.out = devnull};
        nb_strlcpy(r.uuid, uuid, sizeof(r.uuid));
        nvol += nb_dr_check_volume_formats(db, ctx, &r, bdms);
        for (int k = 0; k < r.nfixes; k++)
            nb_audit_add(out, "PROBLEM", "disk format", uuid, NULL,
                         "server %s volume %s (bdm %s): connection_info.data.format=%s, file %s "
                         "is %s; `nubo doctor server %s --fix` corrects it",
                         uuid, r.fixes[k].volume_id, r.fixes[k].bdm_uuid, r.fixes[k].old_format,
                         r.fixes[k].path, r.fixes[k].new_format, uuid);
        nb_dr_report_clear(&r);
    }
    if (devnull)
        fclose(devnull);
    if (json_array_size(out) == before)
        nb_audit_add(out, "OK", "disk format", NULL, NULL,
                     "%d volume mapping(s) declare their file's format", nvol);
}

/* Every finding of the cloud and this host. New array, or NULL (printed). */
static json_t *collect(struct nb_db *db, struct nb_ctx *ctx, const struct nb_dr_host *h)
{
    struct nb_audit_opts o;
    nb_audit_opts_from_conf(&o);
    json_t *out = nb_audit_cloud(db, ctx, &o);
    _cleanup_json_ json_t *servers = out ? nb_audit_servers(db, ctx) : NULL;
    if (!servers) {
        fprintf(stderr, "nubo doctor: cannot check the cloud: %s (details in nubo-db.log)\n",
                nb_ctx_message(ctx));
        json_decref(out);
        return NULL;
    }
    check_domains(servers, h, out);
    check_formats(db, ctx, servers, out);
    return out;
}

/* Prints the findings (lines, or JSON); the number of PROBLEMs. */
static int report(json_t *out, bool as_json)
{
    struct nb_dr_report r = {.out = as_json ? fopen("/dev/null", "w") : stdout};
    size_t i;
    json_t *f;
    json_array_foreach (out, i, f) {
        const char *v = nb_json_str(f, "verdict");
        enum nb_dr_verdict vd = !strcmp(v, "PROBLEM") ? NB_DR_PROBLEM
                                : !strcmp(v, "WARN")  ? NB_DR_WARN
                                : !strcmp(v, "SKIP")  ? NB_DR_SKIP
                                                      : NB_DR_OK;
        nb_dr_check(&r, vd, nb_json_str(f, "check"), "%s", nb_json_str(f, "evidence"));
    }
    if (as_json) {
        if (r.out)
            fclose(r.out);
        _cleanup_json_ json_t *doc = json_pack("{s:O, s:i, s:i}", "findings", out, "problems",
                                               r.problems, "warnings", r.warnings);
        json_dumpf(doc, stdout, JSON_INDENT(2));
        fputc('\n', stdout);
    } else {
        printf("summary: cloud: %d problem(s), %d warning(s)\n", r.problems, r.warnings);
    }
    return r.problems;
}

int nb_dr_cloud(struct nb_db *db, const struct nb_dr_host *h, bool as_json, bool fix)
{
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    nb_placement_use_db(db);
    _cleanup_json_ json_t *out = collect(db, &ctx, h);
    if (!out)
        return NB_DR_EXIT_CANNOT;
    int found = report(out, as_json && !fix);
    if (!found || !fix)
        return nb_dr_exit_status(found, false, false);
    nb_dr_cloud_fix(db, &ctx, out);
    printf("after the fix:\n");
    _cleanup_json_ json_t *after = collect(db, &ctx, h);
    if (!after)
        return NB_DR_EXIT_PROBLEM;
    return nb_dr_exit_status(found, true, report(after, false) == 0);
}
