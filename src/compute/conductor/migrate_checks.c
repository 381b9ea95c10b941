/* migrate_checks.c - the prechecks of a live migration, judged from facts
 * (migrate_checks.h). Each check is one function that appends its verdict:
 * a name, ok, the evidence it looked at, and on refusal the message, in
 * Nova's words (ComputeServiceUnavailable, UnableToMigrateToSelf,
 * ComputeHostNotFound, MigrationPreCheckError, InvalidCPUInfo,
 * InvalidHypervisorType, DestinationHypervisorTooOld, InvalidLocalStorage,
 * InvalidSharedStorage) followed by what nubo knows about the cause. */
#include "compute/conductor/migrate_checks.h"
#include "common/json.h"
#include "common/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct judge {
    const json_t *f;  /* the facts */
    json_t *checks;   /* the verdicts so far */
    const char *src;  /* source host */
    const char *dst;  /* destination host */
    const char *uuid; /* instance */
    json_t *agent;    /* the destination's reply when it answered ok, else NULL */
    bool block;       /* the block migration chosen (storage check) */
    bool shared;      /* instance path or block storage shared */
};

static void add(struct judge *j, const char *name, bool ok, bool warning, bool skipped,
                const char *evidence, const char *fmt, ...) __attribute__((format(printf, 7, 8)));
static void add(struct judge *j, const char *name, bool ok, bool warning, bool skipped,
                const char *evidence, const char *fmt, ...)
{
    char msg[2048] = "";
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
    }
    json_array_append_new(j->checks,
                          json_pack("{s:s, s:b, s:b, s:b, s:s, s:s?}", "check", name, "ok", ok,
                                    "warning", warning, "skipped", skipped, "evidence",
                                    evidence ? evidence : "", "message", fmt ? msg : NULL));
}

static void skip(struct judge *j, const char *name, const char *why)
{
    add(j, name, false, false, true, why, NULL);
}

static const char *str(const json_t *o, const char *k, const char *def)
{
    const char *s = nb_json_str(o, k);
    return s ? s : def;
}

/* 1: the destination's nova-compute service is enabled, up, not forced
 * down. */
static void check_service(struct judge *j)
{
    json_t *svc = json_object_get(j->f, "service");
    char ev[1024];
    if (!json_is_object(svc)) {
        add(j, "service", false, false, false, "no nova-compute service is registered",
            "Compute service of %s is unavailable at this time. (no nova-compute service is "
            "registered for host %s)",
            j->dst, j->dst);
        return;
    }
    long long age = nb_json_int(j->f, "service_age_s", -1);
    long long down = nb_json_int(j->f, "service_down_time", 60);
    bool disabled = nb_json_int(svc, "disabled", 0) != 0;
    bool forced = nb_json_int(svc, "forced_down", 0) != 0;
    snprintf(ev, sizeof(ev),
             "nova-compute on %s: %s, %s, last heartbeat %s%lld s ago (down after %lld s)", j->dst,
             disabled ? "disabled" : "enabled", forced ? "forced down" : "not forced down",
             age < 0 ? "never: " : "", age < 0 ? 0 : age, down);
    if (disabled)
        add(j, "service", false, false, false, ev,
            "Compute service of %s is unavailable at this time. (the service is disabled%s%s)",
            j->dst, nb_json_str(svc, "disabled_reason") ? ": " : "",
            str(svc, "disabled_reason", ""));
    else if (forced)
        add(j, "service", false, false, false, ev,
            "Compute service of %s is unavailable at this time. (the service is forced down)",
            j->dst);
    else if (age < 0 || age > down)
        add(j, "service", false, false, false, ev,
            "Compute service of %s is unavailable at this time. (not reporting: no heartbeat "
            "for more than service_down_time %lld s)",
            j->dst, down);
    else
        add(j, "service", true, false, false, ev, NULL);
}

/* 2: the destination is a known compute host other than the source. */
static void check_destination(struct judge *j)
{
    char ev[600];
    snprintf(ev, sizeof(ev), "source %s, destination %s", j->src, j->dst);
    if (!strcmp(j->src, j->dst))
        add(j, "destination", false, false, false, ev,
            "Unable to migrate instance (%s) to current host (%s).", j->uuid, j->dst);
    else if (!json_is_true(json_object_get(j->f, "dest_known")))
        add(j, "destination", false, false, false, ev, "Compute host %s could not be found.",
            j->dst);
    else
        add(j, "destination", true, false, false, ev, NULL);
}

/* 3: the placement claim for the instance on the destination. */
static void check_resources(struct judge *j)
{
    json_t *claim = json_object_get(j->f, "claim");
    if (!json_is_object(claim)) {
        skip(j, "resources", "not claimed");
        return;
    }
    if (json_is_true(json_object_get(claim, "ok")))
        add(j, "resources", true, false, false, str(claim, "evidence", ""), NULL);
    else
        add(j, "resources", false, false, false, str(claim, "evidence", ""), "%s",
            str(claim, "message", "the placement claim failed"));
}

/* 4: the destination runs the source's guest CPU. */
static void check_cpu(struct judge *j)
{
    if (!j->agent) {
        skip(j, "cpu", "the destination was not asked");
        return;
    }
    json_t *cpu = json_object_get(j->agent, "cpu");
    json_t *gc = json_object_get(json_object_get(j->agent, "source"), "guest_cpu");
    json_t *models = json_object_get(json_object_get(j->agent, "dest"), "cpu_models");
    char ev[1500], list[900] = "";
    size_t i;
    json_t *m;
    json_array_foreach (models, i, m)
        if (strlen(list) < sizeof(list) - 80)
            snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", i ? ", " : "",
                     json_string_value(m));
    snprintf(ev, sizeof(ev), "guest CPU from %s: mode %s, model %s; %s offers: %s", j->src,
             str(gc, "mode", "none"), str(gc, "model", "(none)"), j->dst, list[0] ? list : "?");
    if (json_is_true(json_object_get(cpu, "ok")))
        add(j, "cpu", true, false, false, ev, NULL);
    else
        add(j, "cpu", false, false, false, ev,
            "Unacceptable CPU info: CPU doesn't have compatibility: %s",
            str(cpu, "message", "the CPU comparison failed"));
}

/* 5: same hypervisor type, destination not older (compute nodes, as
 * Nova's _check_compatible_with_source_hypervisor). */
static void check_hypervisor(struct judge *j)
{
    json_t *sn = json_object_get(j->f, "source_node");
    json_t *dn = json_object_get(j->f, "dest_node");
    if (!json_is_object(sn) || !json_is_object(dn)) {
        skip(j, "hypervisor", "a compute node record is missing");
        return;
    }
    const char *st = str(sn, "hypervisor_type", "?"), *dt = str(dn, "hypervisor_type", "?");
    long long sv = nb_json_int(sn, "hypervisor_version", 0);
    long long dv = nb_json_int(dn, "hypervisor_version", 0);
    char ev[800];
    snprintf(ev, sizeof(ev), "source %s: %s %lld; destination %s: %s %lld", j->src, st, sv, j->dst,
             dt, dv);
    if (strcmp(st, dt))
        add(j, "hypervisor", false, false, false, ev,
            "The supplied hypervisor type of is invalid. (source %s: %s, destination %s: %s)",
            j->src, st, j->dst, dt);
    else if (sv > dv)
        add(j, "hypervisor", false, false, false, ev,
            "The instance requires a newer hypervisor version than has been provided. "
            "(DestinationHypervisorTooOld: source %s has %s %lld, destination %s has %s %lld)",
            j->src, st, sv, j->dst, dt, dv);
    else
        add(j, "hypervisor", true, false, false, ev, NULL);
}

/* "a, b" of the strings in arr into out. */
static void join(const json_t *arr, char *out, size_t n)
{
    out[0] = '\0';
    size_t i;
    json_t *v;
    json_array_foreach (arr, i, v)
        if (json_is_string(v) && strlen(out) < n - 2)
            snprintf(out + strlen(out), n - strlen(out), "%s%s", i ? ", " : "",
                     json_string_value(v));
}

/* 6: the source reaches the destination's hypervisor at its migration URI;
 * with native TLS, the certificates exist on both sides. */
static void check_transport(struct judge *j)
{
    if (!j->agent) {
        skip(j, "transport", "the destination was not asked");
        return;
    }
    json_t *t = json_object_get(j->agent, "transport");
    json_t *d = json_object_get(j->agent, "dest"), *s = json_object_get(j->agent, "source");
    char ev[1200], miss[900];
    snprintf(ev, sizeof(ev), "%s -> %s (migration address %s, native TLS %s): %s in %lld ms",
             j->src, str(d, "uri", "?"), str(d, "addr", "?"),
             json_is_true(json_object_get(d, "tls")) ? "on" : "off",
             json_is_true(json_object_get(t, "ok")) ? "reachable" : "unreachable",
             nb_json_int(t, "ms", 0));
    if (!json_is_true(json_object_get(t, "ok"))) {
        add(j, "transport", false, false, false, ev, "Migration pre-check error: %s",
            str(t, "message", "the destination's hypervisor is unreachable"));
        return;
    }
    if (json_is_true(json_object_get(d, "tls"))) {
        const json_t *sides[2] = {s, d};
        const char *names[2] = {j->src, j->dst};
        for (int k = 0; k < 2; k++) {
            join(json_object_get(sides[k], "tls_missing"), miss, sizeof(miss));
            if (miss[0]) {
                add(j, "transport", false, false, false, ev,
                    "Migration pre-check error: live_migration_with_native_tls needs %s on "
                    "host %s",
                    miss, names[k]);
                return;
            }
        }
    }
    add(j, "transport", true, false, false, ev, NULL);
}

/* The local, writable disks of the agent's disk list: their names into
 * out and their total virtual size. */
static long long local_disks(const json_t *disks, char *out, size_t n)
{
    long long total = 0;
    out[0] = '\0';
    size_t i;
    json_t *d;
    json_array_foreach (disks, i, d) {
        if (!json_is_true(json_object_get(d, "local")) ||
            json_is_true(json_object_get(d, "readonly")))
            continue;
        total += nb_json_int(d, "virtual_size", 0);
        if (strlen(out) < n - 80)
            snprintf(out + strlen(out), n - strlen(out), "%s%s %lld GiB", out[0] ? ", " : "",
                     str(d, "target", "?"), nb_json_int(d, "virtual_size", 0) >> 30);
    }
    return total;
}

/* Block migration's free-disk check (Nova's _assert_dest_node_has_enough_disk). */
static bool enough_disk(struct judge *j, long long need, char *ev, size_t n)
{
    json_t *dn = json_object_get(j->f, "dest_node");
    json_t *least = json_object_get(dn, "disk_available_least");
    long long avail_gb =
        json_is_integer(least) ? json_integer_value(least) : nb_json_int(dn, "free_disk_gb", 0);
    long long avail = avail_gb << 30;
    snprintf(ev + strlen(ev), n - strlen(ev), "; free disk on %s %lld GiB", j->dst, avail_gb);
    if (avail - need >= 0)
        return true;
    add(j, "storage", false, false, false, ev,
        "Migration pre-check error: Unable to migrate %s: Disk of instance is too "
        "large(available on destination host:%lld < need:%lld)",
        j->uuid, avail, need);
    return false;
}

/* 7: shared storage as the probe found it, against block_migration. */
static void check_storage(struct judge *j)
{
    if (!j->agent) {
        skip(j, "storage", "the destination was not asked");
        return;
    }
    const char *bm = str(j->f, "block_migration", "auto");
    bool shared_path = json_is_true(json_object_get(j->agent, "shared_storage"));
    char disks[600], ev[2000];
    long long need = local_disks(json_object_get(j->agent, "disks"), disks, sizeof(disks));
    bool shared_block = disks[0] == '\0'; /* volume-backed, no local disks */
    j->shared = shared_path || shared_block;
    j->block = !strcmp(bm, "auto") ? !j->shared : !strcmp(bm, "true");
    json_t *probe = json_object_get(j->agent, "probe");
    snprintf(ev, sizeof(ev),
             "probe file in %s's instances path %s %s from %s; local disks: %s; "
             "block_migration %s -> %s",
             j->dst, str(json_object_get(j->agent, "dest"), "instances_path", "?"),
             json_is_false(json_object_get(probe, "ok")) ? "could not be made"
             : shared_path                               ? "was seen"
                                                         : "was not seen",
             j->src, disks[0] ? disks : "none (volume-backed)", bm, j->block ? "true" : "false");
    if (json_is_false(json_object_get(probe, "ok"))) {
        add(j, "storage", false, false, false, ev, "Migration pre-check error: %s",
            str(probe, "message", "the shared-storage probe failed"));
        return;
    }
    if (j->block && j->shared) {
        add(j, "storage", false, false, false, ev,
            "%s is not on local storage: Block migration can not be used with shared storage.",
            j->src);
        return;
    }
    if (!j->block && !j->shared) {
        add(j, "storage", false, false, false, ev,
            "%s is not on shared storage: Shared storage live-migration requires either shared "
            "storage or boot-from-volume with no local disks.",
            j->src);
        return;
    }
    if (j->block && !enough_disk(j, need, ev, sizeof(ev)))
        return;
    add(j, "storage", true, false, false, ev, NULL);
}

/* 8: the interfaces holding the migration addresses have the same MTU
 * (a warning: a mismatch drops the large packets of a migration). */
static void check_network(struct judge *j)
{
    if (!j->agent) {
        skip(j, "network", "the destination was not asked");
        return;
    }
    json_t *s = json_object_get(j->agent, "source"), *d = json_object_get(j->agent, "dest");
    long long sm = nb_json_int(s, "mtu", 0), dm = nb_json_int(d, "mtu", 0);
    char ev[800];
    snprintf(ev, sizeof(ev), "%s: address %s, MTU %lld; %s: address %s, MTU %lld", j->src,
             str(s, "addr", "?"), sm, j->dst, str(d, "addr", "?"), dm);
    if (sm > 0 && dm > 0 && sm != dm)
        add(j, "network", true, true, false, ev,
            "The MTU of the migration network differs between the hosts (%s: %lld, %s: %lld): "
            "large packets of the migration stream may be dropped",
            j->src, sm, j->dst, dm);
    else
        add(j, "network", true, false, false, ev, NULL);
}

/* 9: the destination can wire the ports the network agents wire (vif_type
 * "bridge"): a live Linux bridge agent reports from it, and its VXLAN
 * underlay (the interface of the agent's local_ip) carries the network's
 * MTU plus the VXLAN header (50 bytes over IPv4). Ports of no agent (the
 * fake driver's "ovs") need nothing of the host. */
static void check_ports(struct judge *j)
{
    json_t *nf = json_object_get(j->f, "networking");
    if (nb_json_str(nf, "error")) {
        add(j, "ports", true, true, false, str(nf, "error", ""),
            "The network service could not describe the instance's ports: %s",
            str(nf, "error", ""));
        return;
    }
    char ev[1800] = "";
    const json_t *need = NULL; /* the wired port with the largest underlay need */
    const char *first = NULL;  /* the first wired port */
    long long want = 0;
    size_t i, wired = 0;
    json_t *p;
    json_array_foreach (json_object_get(nf, "ports"), i, p) {
        const char *type = str(p, "network_type", "local"), *vif = str(p, "vif_type", "?");
        long long mtu = nb_json_int(p, "mtu", 1500), under = mtu + (strcmp(type, "vxlan") ? 0 : 50);
        if (strlen(ev) < sizeof(ev) - 200)
            snprintf(ev + strlen(ev), sizeof(ev) - strlen(ev),
                     "%sport %s: %s on network %s (%s, "
                     "MTU %lld)",
                     *ev ? "; " : "", str(p, "id", "?"), vif, str(p, "network_id", "?"), type, mtu);
        if (strcmp(vif, "bridge"))
            continue;
        if (!wired++)
            first = str(p, "id", "?");
        if (!strcmp(type, "vxlan") && under > want) {
            want = under;
            need = p;
        }
    }
    if (!wired) {
        add(j, "ports", true, false, false, *ev ? ev : "the instance has no ports", NULL);
        return;
    }
    json_t *ag = json_object_get(nf, "agent");
    size_t at = strlen(ev);
    if (!json_is_object(ag)) {
        snprintf(ev + at, sizeof(ev) - at, "; no Linux bridge agent on %s", j->dst);
        add(j, "ports", false, false, false, ev,
            "Migration pre-check error: Binding failed for port %s on host %s: no Linux bridge "
            "agent reports from the host, so nothing would wire the guest's network there.",
            first, j->dst);
        return;
    }
    long long age = nb_json_int(ag, "age_s", -1);
    json_t *asu = json_object_get(ag, "admin_state_up");
    bool up = !json_is_false(asu) && !(json_is_integer(asu) && !json_integer_value(asu));
    snprintf(ev + at, sizeof(ev) - at,
             "; Linux bridge agent on %s: %s, admin_state_up %s, last report %s%lld s ago (down "
             "after %lld s), local_ip %s",
             j->dst, json_is_true(json_object_get(ag, "alive")) ? "alive" : "dead",
             up ? "true" : "false", age < 0 ? "never: " : "", age < 0 ? 0 : age,
             nb_json_int(ag, "down_time", 75), str(ag, "local_ip", "?"));
    if (!json_is_true(json_object_get(ag, "alive")) || !up) {
        add(j, "ports", false, false, false, ev,
            "Migration pre-check error: Binding failed for port %s on host %s: its Linux bridge "
            "agent is %s.",
            first, j->dst,
            up ? "not alive (no report within agent_down_time)" : "administratively down");
        return;
    }
    if (!need) {
        add(j, "ports", true, false, false, ev, NULL);
        return;
    }
    if (!j->agent) {
        skip(j, "ports", "the destination was not asked for its underlay");
        return;
    }
    json_t *tun = json_object_get(json_object_get(j->agent, "dest"), "tunnel");
    long long umtu = nb_json_int(tun, "mtu", 0);
    at = strlen(ev);
    snprintf(ev + at, sizeof(ev) - at, "; underlay %s MTU %lld (VXLAN needs %lld)",
             str(tun, "addr", "?"), umtu, want);
    if (umtu <= 0) {
        add(j, "ports", false, false, false, ev,
            "Migration pre-check error: the VXLAN underlay address %s of host %s is on no "
            "interface of the host.",
            str(tun, "addr", "?"), j->dst);
        return;
    }
    if (umtu < want)
        add(j, "ports", false, false, false, ev,
            "Migration pre-check error: the VXLAN underlay of host %s (%s, MTU %lld) cannot carry "
            "network %s (MTU %lld needs %lld with the VXLAN header).",
            j->dst, str(tun, "addr", "?"), umtu, str(need, "network_id", "?"),
            nb_json_int(need, "mtu", 0), want);
    else
        add(j, "ports", true, false, false, ev, NULL);
}

/* 10: the server itself: its state, and devices that cannot move. */
static void check_instance(struct judge *j)
{
    json_t *inst = json_object_get(j->f, "instance");
    json_t *specs = json_object_get(json_object_get(inst, "flavor"), "extra_specs");
    const char *vm = str(inst, "vm_state", "?");
    const char *cd = str(inst, "config_drive", "");
    char ev[800];
    snprintf(ev, sizeof(ev), "vm_state %s; config drive %s%s%s", vm, *cd ? "yes (" : "none",
             *cd ? str(j->f, "config_drive_format", "iso9660") : "", *cd ? ")" : "");
    if (strcmp(vm, "active") && strcmp(vm, "paused")) {
        add(j, "instance", false, false, false, ev,
            "Instance %s in vm_state %s cannot be live-migrated (it must be active or paused).",
            j->uuid, vm);
        return;
    }
    const char *pci = nb_json_str(specs, "pci_passthrough:alias");
    if (pci) {
        add(j, "instance", false, false, false, ev,
            "Migration pre-check error: Unable to migrate %s: its flavor asks for PCI devices "
            "(pci_passthrough:alias=%s), which cannot be live-migrated.",
            j->uuid, pci);
        return;
    }
    if (nb_json_str(specs, "hw:tpm_version") || nb_json_str(specs, "hw:tpm_model")) {
        add(j, "instance", false, false, false, ev,
            "Operation 'live-migration' not supported for vTPM-enabled instance (%s).", j->uuid);
        return;
    }
    add(j, "instance", true, false, false, ev, NULL);
}

json_t *cond_lm_evaluate(const json_t *facts)
{
    struct judge j = {
        .f = facts,
        .checks = json_array(),
        .src = str(facts, "source", "?"),
        .dst = str(facts, "dest", "?"),
        .uuid = str(json_object_get(facts, "instance"), "uuid", "?"),
    };
    json_t *agent = json_object_get(facts, "agent");
    j.agent = json_is_true(json_object_get(agent, "ok")) ? agent : NULL;
    check_service(&j);
    check_destination(&j);
    check_resources(&j);
    check_cpu(&j);
    check_hypervisor(&j);
    check_transport(&j);
    check_storage(&j);
    check_network(&j);
    check_ports(&j);
    check_instance(&j);
    const char *first = NULL;
    int warnings = 0;
    bool all = true;
    size_t i;
    json_t *c;
    json_array_foreach (j.checks, i, c) {
        if (json_is_true(json_object_get(c, "warning")))
            warnings++;
        if (json_is_true(json_object_get(c, "ok")))
            continue;
        all = false;
        if (!first && !json_is_true(json_object_get(c, "skipped")))
            first = nb_json_str(c, "message");
    }
    /* the destination was asked and could not answer: that is the cause */
    if (!all && !first && agent)
        first = str(agent, "message", "the destination's checks did not run");
    return json_pack("{s:s, s:b, s:s?, s:b, s:b, s:i, s:o}", "host", j.dst, "ok", all, "message",
                     all ? NULL : (first ? first : "the prechecks did not run"), "block_migration",
                     j.block, "shared_storage", j.shared, "warnings", warnings, "checks", j.checks);
}

char *cond_lm_verdict_text(const json_t *verdict)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    size_t i;
    json_t *c;
    json_array_foreach (json_object_get(verdict, "checks"), i, c) {
        bool ok = json_is_true(json_object_get(c, "ok"));
        bool warn = json_is_true(json_object_get(c, "warning"));
        if (json_is_true(json_object_get(c, "skipped")) || (ok && !warn))
            continue;
        fprintf(f, "%s%s %s: %s [%s]", len || ftell(f) ? "\n" : "", str(c, "check", "?"),
                warn ? "WARNING" : "REFUSED", str(c, "message", ""), str(c, "evidence", ""));
    }
    fclose(f);
    return buf;
}
