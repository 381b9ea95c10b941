/* doctor_network.c - `nubo doctor server`'s checks of the server's network
 * path, each with its evidence: per port, its record (status, binding,
 * addresses), and on the server's own host, for a port the Linux bridge
 * agent wires (binding:vif_type "bridge"): the tap tap<port[:11]>, that it
 * is on the network's bridge brq<net[:11]>, the MTUs of both against the
 * network's, and the network's DHCP: the qdhcp-<net> namespace and the
 * port's line in the dnsmasq hostsfile the agent writes (under
 * <state_path>/network-agent/), when this host serves it; and, for a port
 * with port security, that a security-group table of an agent (bridge
 * nubo_port_<tag>, inet nubo_sg_<tag>) names its tap. First, that the
 * network service's desired state for the host (GET /networking/v2.0/
 * hosts/{host}/state, what the agent reconciles) lists the port. */
#include "cmd/api_client.h"
#include "cmd/doctor.h"

#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/proc.h"
#include "common/util.h"
#include "db/db.h"
#include "network/network.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum nb_dr_verdict nb_dr_net_wiring(const struct nb_dr_wiring *w, char *why, size_t n)
{
    if (!w->tap_exists) {
        snprintf(why, n, "no device %s%s", w->tap,
                 w->running ? " while the guest runs" : " (the guest is not running)");
        return w->running ? NB_DR_PROBLEM : NB_DR_WARN;
    }
    if (!w->master[0] || strcmp(w->master, w->bridge)) {
        snprintf(why, n, "%s is on %s, not on the network's bridge %s", w->tap,
                 w->master[0] ? w->master : "no bridge", w->bridge);
        return NB_DR_PROBLEM;
    }
    if (w->net_mtu > 0 && (w->tap_mtu != w->net_mtu || w->bridge_mtu != w->net_mtu)) {
        snprintf(why, n, "%s mtu %d, %s mtu %d, network mtu %d: they differ", w->tap, w->tap_mtu,
                 w->bridge, w->bridge_mtu, w->net_mtu);
        return NB_DR_WARN;
    }
    snprintf(why, n, "%s on %s, mtu %d (network %d)", w->tap, w->bridge, w->tap_mtu, w->net_mtu);
    return NB_DR_OK;
}

static int sys_int(const char *dev, const char *attr)
{
    char path[PATH_MAX], buf[32] = "";
    snprintf(path, sizeof(path), "/sys/class/net/%s/%s", dev, attr);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    if (!fgets(buf, sizeof(buf), f))
        buf[0] = '\0';
    fclose(f);
    return atoi(buf);
}

/* Looks for mac in the files named "host" or "hosts" under dir (the
 * agent's dnsmasq hostsfiles); the first line found goes to where/line. */
static bool find_host_line(const char *dir, const char *mac, int depth, char *where, size_t wn,
                           char *line, size_t ln)
{
    DIR *d = depth < 6 ? opendir(dir) : NULL;
    if (!d)
        return false;
    struct dirent *e;
    bool found = false;
    while (!found && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(p, &st) < 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            found = find_host_line(p, mac, depth + 1, where, wn, line, ln);
        } else if (S_ISREG(st.st_mode) &&
                   (!strcmp(e->d_name, "host") || !strcmp(e->d_name, "hosts"))) {
            FILE *f = fopen(p, "r");
            char buf[512];
            while (f && !found && fgets(buf, sizeof(buf), f))
                if (strcasestr(buf, mac)) {
                    buf[strcspn(buf, "\n")] = '\0';
                    nb_strlcpy(where, p, wn);
                    nb_strlcpy(line, buf, ln);
                    found = true;
                }
            if (f)
                fclose(f);
        }
    }
    closedir(d);
    return found;
}

static void check_dhcp(struct nb_db *db, struct nb_ctx *ctx, struct nb_dr_report *r,
                       const struct nb_dr_host *h, const json_t *port)
{
    const char *net = nb_json_str(port, "network_id");
    const char *mac = nb_json_str(port, "mac_address");
    const json_t *dhcp = json_object_get(port, "dhcp_ports");
    if (!json_array_size(dhcp)) {
        nb_dr_check(r, NB_DR_WARN, "dhcp",
                    "network %s has no DHCP port: the guest gets no address by DHCP", net);
        return;
    }
    const json_t *mine = NULL;
    size_t i;
    json_t *d;
    json_array_foreach (dhcp, i, d)
        if (!strcmp(nb_json_str(d, "binding_host_id"), h->my_host))
            mine = d;
    if (!mine) {
        nb_dr_check(r, NB_DR_SKIP, "dhcp",
                    "network %s's DHCP is served by host %s; run the "
                    "doctor there",
                    net, nb_json_str(json_array_get(dhcp, 0), "binding_host_id"));
        return;
    }
    char ns[PATH_MAX], where[PATH_MAX] = "", line[512] = "", agentdir[PATH_MAX];
    snprintf(ns, sizeof(ns), "/run/netns/qdhcp-%s", net);
    bool have_ns = access(ns, F_OK) == 0;
    snprintf(agentdir, sizeof(agentdir), "%s/network-agent",
             nb_conf_str("DEFAULT", "state_path", "/var/lib/nubo"));
    bool have_line = find_host_line(agentdir, mac, 0, where, sizeof(where), line, sizeof(line));
    if (have_ns && have_line)
        nb_dr_check(r, NB_DR_OK, "dhcp", "namespace qdhcp-%s present; %s has \"%s\"", net, where,
                    line);
    else
        nb_dr_check(r, NB_DR_PROBLEM, "dhcp", "namespace qdhcp-%s %s; %s%s%s", net,
                    have_ns ? "present" : "missing (ip netns list)",
                    have_line ? where : "no hostsfile line for ", have_line ? " has the port" : mac,
                    have_line ? "" : " under the agent's state");
}

/* The security-group filter of tap: a bridge nubo_port_<tag> table naming
 * it (the agent's anti-spoofing chain), and its inet nubo_sg_<tag>. */
static void check_sg(struct nb_dr_report *r, const json_t *port, const char *tap)
{
    if (!nb_json_int(port, "port_security_enabled", 1)) {
        nb_dr_check(r, NB_DR_SKIP, "security groups", "port security is disabled on the port");
        return;
    }
    static char out[1 << 18];
    const char *const list[] = {"nft", "list", "tables", NULL};
    int st = nb_run(list, out, sizeof(out), 10);
    if (st != 0) {
        nb_dr_check(r, NB_DR_WARN, "security groups", "nft list tables failed (%d): %.200s", st,
                    out);
        return;
    }
    char tables[4096] = "", found[128] = "";
    char *save = NULL;
    _cleanup_free_ char *copy = strdup(out);
    for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        char fam[16], name[96];
        if (sscanf(l, "table %15s %95s", fam, name) != 2 || strncmp(name, "nubo_", 5))
            continue;
        snprintf(tables + strlen(tables), sizeof(tables) - strlen(tables), "%s%s %s",
                 tables[0] ? ", " : "", fam, name);
        if (found[0] || strcmp(fam, "bridge") || strncmp(name, "nubo_port_", 10))
            continue;
        const char *const show[] = {"nft", "list", "table", "bridge", name, NULL};
        if (nb_run(show, out, sizeof(out), 10) == 0 && strstr(out, tap))
            snprintf(found, sizeof(found), "bridge %s", name);
    }
    if (found[0])
        nb_dr_check(r, NB_DR_OK, "security groups", "%s is filtered in table %s (tables: %s)", tap,
                    found, tables);
    else
        nb_dr_check(r, NB_DR_WARN, "security groups", "no nubo_port_* table names %s (tables: %s)",
                    tap, tables[0] ? tables : "none");
}

/* The host's desired state from the API, once per run (NULL with why). */
static json_t *host_state(struct nb_db *db, const char *host, char *why, size_t n)
{
    static json_t *cached;
    static char cached_why[1100];
    static bool asked;
    if (asked) {
        nb_strlcpy(why, cached_why, n);
        return cached;
    }
    asked = true;
    struct nb_ctx ctx;
    nb_ctx_init(&ctx);
    struct nb_api_client c = {.timeout_s = 20};
    if (nb_api_client_open(&c, db, &ctx, 120) < 0) {
        snprintf(cached_why, sizeof(cached_why), "cannot reach the API: %s", nb_ctx_message(&ctx));
    } else {
        char path[512], err[256] = "";
        snprintf(path, sizeof(path), "/networking/v2.0/hosts/%s/state", host);
        long st = nb_api_call(&c, "GET", path, NULL, NULL, &cached, err, sizeof(err));
        if (st != 200 || !json_is_object(cached)) {
            char msg[200];
            nb_api_error_message(cached, st, msg, sizeof(msg));
            snprintf(cached_why, sizeof(cached_why), "GET %s: %s%s%s", path, msg,
                     err[0] ? ": " : "", err);
            json_decref(cached);
            cached = NULL;
        }
    }
    nb_strlcpy(why, cached_why, n);
    return cached;
}

static void check_host_state(struct nb_db *db, struct nb_dr_report *r, const char *host,
                             const json_t *port)
{
    char why[1100];
    const json_t *st = host_state(db, host, why, sizeof(why));
    if (!st) {
        nb_dr_check(r, NB_DR_WARN, "host state", "%s", why);
        return;
    }
    const char *id = nb_json_str(port, "id");
    size_t i;
    json_t *p, *n;
    json_array_foreach (json_object_get(st, "ports"), i, p)
        if (!strcmp(nb_json_str(p, "id") ? nb_json_str(p, "id") : "", id)) {
            const char *dhcp = "not served on this host";
            json_array_foreach (json_object_get(st, "networks"), i, n)
                if (!strcmp(nb_json_str(n, "id") ? nb_json_str(n, "id") : "",
                            nb_json_str(port, "network_id")) &&
                    json_is_object(json_object_get(n, "dhcp")))
                    dhcp = "served on this host";
            nb_dr_check(r, NB_DR_OK, "host state",
                        "the network service sends host %s's agent port %s (tap %s, %zu security "
                        "groups); its network's DHCP is %s",
                        host, id, nb_json_str(p, "tap") ? nb_json_str(p, "tap") : "-",
                        json_array_size(json_object_get(p, "security_groups")), dhcp);
            return;
        }
    nb_dr_check(r, NB_DR_PROBLEM, "host state",
                "the desired state of host %s does not list port %s: its agent will not wire it",
                host, id);
}

static void check_port(struct nb_db *db, struct nb_ctx *ctx, struct nb_dr_report *r,
                       const struct nb_dr_host *h, const json_t *port)
{
    const char *id = nb_json_str(port, "id"), *net = nb_json_str(port, "network_id");
    const char *bound = nb_json_str(port, "binding_host_id");
    const char *vif = nb_json_str(port, "binding_vif_type");
    const char *status = nb_json_str(port, "status");
    const char *host = nb_json_str(r->server, "host");
    bool running = nb_json_int(r->server, "power_state", 0) == 1;
    const char *ips = nb_json_str(port, "ips"), *netname = nb_json_str(port, "network_name");
    int mtu = (int)nb_json_int(port, "network_mtu", 0);
    enum nb_dr_verdict v = NB_DR_OK;
    const char *why = "";
    char failed[1024];
    if (host && *host && strcmp(bound, host)) {
        v = NB_DR_PROBLEM;
        why = "; bound to another host than the server's";
    } else if (!strcmp(status, "ERROR")) {
        v = NB_DR_PROBLEM;
        const char *reason = nb_json_str(port, "status_reason");
        snprintf(failed, sizeof(failed), "; the agent failed to wire it: %s",
                 reason && *reason ? reason : "no reason recorded");
        why = failed;
    } else if (running && strcmp(status, "ACTIVE")) {
        v = NB_DR_WARN;
        why = "; not ACTIVE while the guest runs";
    }
    char check[32];
    snprintf(check, sizeof(check), "port %.8s", id);
    nb_dr_check(r, v, check,
                "%s mac=%s ips=%s network=%s (%s, mtu %d) status=%s binding:host_id=%s "
                "binding:vif_type=%s%s",
                id, nb_json_str(port, "mac_address"), ips && *ips ? ips : "-", net,
                netname && *netname ? netname : "-", mtu, status, *bound ? bound : "-", vif, why);
    if (strcmp(vif, "bridge")) {
        nb_dr_check(r, NB_DR_SKIP, "data plane",
                    "binding:vif_type %s: no Linux bridge agent wires this port", vif);
        return;
    }
    if (!host || strcmp(host, h->my_host)) {
        nb_dr_check(r, NB_DR_SKIP, "data plane",
                    "the server is on host %s and this is host %s; run the doctor on %s",
                    host ? host : "-", h->my_host, host ? host : "its host");
        return;
    }
    check_host_state(db, r, host, port);
    struct nb_dr_wiring w = {.running = running, .net_mtu = mtu};
    snprintf(w.tap, sizeof(w.tap), "tap%.11s", id);
    snprintf(w.bridge, sizeof(w.bridge), "brq%.11s", net);
    char link[PATH_MAX], target[PATH_MAX];
    snprintf(link, sizeof(link), "/sys/class/net/%s", w.tap);
    w.tap_exists = access(link, F_OK) == 0;
    snprintf(link, sizeof(link), "/sys/class/net/%s/master", w.tap);
    ssize_t n = readlink(link, target, sizeof(target) - 1);
    if (n > 0) {
        target[n] = '\0';
        nb_strlcpy(w.master, strrchr(target, '/') ? strrchr(target, '/') + 1 : target,
                   sizeof(w.master));
    }
    w.tap_mtu = sys_int(w.tap, "mtu");
    w.bridge_mtu = sys_int(w.bridge, "mtu");
    char evidence[512];
    v = nb_dr_net_wiring(&w, evidence, sizeof(evidence));
    nb_dr_check(r, v, "tap", "%s", evidence);
    check_dhcp(db, ctx, r, h, port);
    check_sg(r, port, w.tap);
}

void nb_dr_check_network(struct nb_db *db, struct nb_dr_report *r, const struct nb_dr_host *h)
{
    struct nb_ctx own, *ctx = &own; /* a failed query here fails no other check */
    nb_ctx_init(&own);
    _cleanup_json_ json_t *ports = nb_network_doctor_ports(db, ctx, r->uuid);
    if (!ports) {
        nb_dr_check(r, NB_DR_SKIP, "ports", "cannot read the ports: %s", nb_ctx_message(ctx));
        return;
    }
    if (!json_array_size(ports)) {
        nb_dr_check(r, NB_DR_SKIP, "ports", "the server has no ports");
        return;
    }
    size_t i;
    json_t *p;
    json_array_foreach (ports, i, p)
        check_port(db, ctx, r, h, p);
}
