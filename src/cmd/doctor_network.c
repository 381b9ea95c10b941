/* doctor_network.c - `nubo doctor server`'s checks of the server's network
 * path, each with its evidence: per port, its record (status, binding,
 * addresses), and on the server's own host, for a port the Linux bridge
 * agent wires (binding:vif_type "bridge"): the tap tap<port[:11]>, that it
 * is on the network's bridge brq<net[:11]>, the MTUs of both against the
 * network's, and the network's DHCP: the qdhcp-<net> namespace and the
 * port's line in the dnsmasq hostsfile the agent writes (under
 * <state_path>/network-agent/), when this host serves it; and, for a port
 * with port security, that a security-group table of an agent (bridge
 * nubo_port_<tag>, inet nubo_sg_<tag>) names its tap and lets the guest's
 * DHCP through (the base rules Neutron keeps whatever the groups say). First,
 * that the network service's desired state for the host (GET /networking/
 * v2.0/hosts/{host}/state, what the agent reconciles) lists the port.
 * On any host, for a port with port security: that an egress rule of its
 * groups lets the guest reach the metadata service (a PROBLEM when the
 * server has no config drive to read instead, a WARN when it has one). */
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

enum nb_dr_verdict nb_dr_net_metadata(const json_t *groups, bool config_drive, char *why, size_t n)
{
    const json_t *group = NULL;
    const json_t *rule = nb_sg_groups_allow_metadata(groups, &group);
    if (rule) {
        const char *name = nb_json_str(group, "name");
        snprintf(why, n, "egress to 169.254.169.254:80 is allowed by rule %s of group %s (%s)",
                 nb_json_str(rule, "id") ? nb_json_str(rule, "id") : "-",
                 name && *name ? name : "-", nb_json_str(group, "id"));
        return NB_DR_OK;
    }
    const char *effect = config_drive ? "; the server has a config drive, so only what the guest "
                                        "asks of the metadata service fails"
                                      : " and the server has no config drive: the guest cannot "
                                        "read its metadata (hostname, keys, user data)";
    if (!json_array_size(groups)) {
        snprintf(why, n,
                 "the port has no security group, so its filter lets no egress out, IPv4 TCP to "
                 "169.254.169.254:80 included%s; give it one (openstack port set "
                 "--security-group <group> <port>)",
                 effect);
        return config_drive ? NB_DR_WARN : NB_DR_PROBLEM;
    }
    char names[1024] = "";
    size_t i;
    json_t *g;
    json_array_foreach (groups, i, g) {
        size_t k = strlen(names);
        const char *name = nb_json_str(g, "name");
        snprintf(names + k, sizeof(names) - k, "%s%s (%s%s)", k ? ", " : "",
                 name && *name ? name : "-", nb_json_str(g, "id"),
                 nb_json_int(g, "known", 1) ? "" : ", no such group");
    }
    snprintf(why, n,
             "no egress rule of group%s %s allows IPv4 TCP to 169.254.169.254:80%s; it needs "
             "e.g. `openstack security group rule create --egress --protocol tcp --dst-port 80 "
             "--remote-ip 169.254.169.254/32 %s`",
             json_array_size(groups) > 1 ? "s" : "", names, effect,
             nb_json_str(json_array_get(groups, 0), "id"));
    return config_drive ? NB_DR_WARN : NB_DR_PROBLEM;
}

/* --- the DHCP allowance in the agent's nft tables -------------------------- */

enum chain_find { CH_FOUND, CH_NO_CHAIN, CH_MISSING, CH_BLOCKED };

/* A rule line of an `nft list` listing without its leading blanks, its
 * comment and its counter ("counter" or "counter packets N bytes M"), in
 * out[n]: what it matches and its verdict. */
static void rule_core(const char *line, char *out, size_t n)
{
    char buf[1024];
    nb_strlcpy(buf, line + strspn(line, " \t"), sizeof(buf));
    char *c = strstr(buf, " comment \"");
    if (c)
        *c = '\0';
    out[0] = '\0';
    size_t k = 0;
    int after = 0; /* tokens of "counter packets N bytes M" seen */
    char *save = NULL;
    for (char *w = strtok_r(buf, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
        bool skip;
        switch (after) {
        case 0: skip = !strcmp(w, "counter"); break;
        case 1: skip = !strcmp(w, "packets"); break;
        case 3: skip = !strcmp(w, "bytes"); break;
        default: skip = true; break; /* the two numbers */
        }
        after = skip ? (after + 1) % 5 : 0;
        if (skip)
            continue;
        snprintf(out + k, n - k, "%s%s", k ? " " : "", w);
        k = strlen(out);
    }
}

/* Whether a rule drops every packet that reaches it; with v4_source, also a
 * drop by IPv4 source (a DHCP discover comes from 0.0.0.0, which no port's
 * source check admits). */
static bool blocks(const char *line, bool v4_source)
{
    char core[1024];
    rule_core(line, core, sizeof(core));
    if (!strcmp(core, "drop") || !strcmp(core, "reject"))
        return true;
    if (!v4_source || !strstr(core, "drop") || strstr(core, "ip saddr 0.0.0.0 "))
        return false;
    return strstr(core, "ip saddr") || !strncmp(core, "meta protocol ip ", 17);
}

/* Looks in listing for chain name and, in it, the first rule that has
 * match and ends in one of the verdicts (" accept", " return"), before a
 * rule that blocks it. The rule (or the one that blocks) goes to line[n]. */
static enum chain_find find_rule(const char *listing, const char *name, const char *match,
                                 bool returns, bool v4_source, char *line, size_t n)
{
    char head[96];
    snprintf(head, sizeof(head), "chain %s {", name);
    const char *p = listing ? strstr(listing, head) : NULL;
    line[0] = '\0';
    if (!p)
        return CH_NO_CHAIN;
    p = strchr(p, '\n');
    while (p && *p) {
        p++;
        const char *end = strchr(p, '\n');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char buf[1024];
        snprintf(buf, sizeof(buf), "%.*s", (int)(len < sizeof(buf) ? len : sizeof(buf) - 1), p);
        char *t = buf + strspn(buf, " \t");
        if (!strcmp(t, "}"))
            break;
        char core[1024];
        rule_core(t, core, sizeof(core));
        size_t cl = strlen(core);
        bool verdict = (cl > 7 && !strcmp(core + cl - 7, " accept")) ||
                       (returns && cl > 7 && !strcmp(core + cl - 7, " return"));
        if (strstr(core, match) && verdict) {
            nb_strlcpy(line, t, n);
            return CH_FOUND;
        }
        if (*t && blocks(t, v4_source)) {
            nb_strlcpy(line, t, n);
            return CH_BLOCKED;
        }
        p = end;
    }
    return CH_MISSING;
}

enum nb_dr_verdict nb_dr_nft_dhcp(const char *bridge_list, const char *inet_list, const char *tap,
                                  char *why, size_t n)
{
    static const char *const client = "udp sport 68 udp dport 67";
    static const char *const server = "udp sport 67 udp dport 68";
    const struct {
        const char *listing, *table, *prefix, *match, *what;
        bool returns, v4_source;
    } want[] = {
        {bridge_list, "bridge", "from_", client, "the client's discover from 0.0.0.0", false, true},
        {inet_list, "inet", "egress_", client, "the client's requests", true, false},
        {inet_list, "inet", "ingress_", server, "the server's answers", false, false},
    };
    size_t k = 0;
    why[0] = '\0';
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        char chain[64], line[512];
        snprintf(chain, sizeof(chain), "%s%s", want[i].prefix, tap);
        enum chain_find f = want[i].listing
                                ? find_rule(want[i].listing, chain, want[i].match, want[i].returns,
                                            want[i].v4_source, line, sizeof(line))
                                : CH_NO_CHAIN;
        if (f == CH_FOUND) {
            snprintf(why + k, n - k, "%s%s %s: \"%s\"", k ? "; " : "", want[i].table, chain, line);
            k = strlen(why);
            continue;
        }
        if (f == CH_NO_CHAIN)
            snprintf(why, n, "%s table %s: no chain %s, so nothing lets %s (%s) through",
                     want[i].table, want[i].listing ? "listed" : "not listed", chain, want[i].what,
                     want[i].match);
        else if (f == CH_BLOCKED)
            snprintf(why, n, "%s chain %s drops %s (%s) at \"%s\" before any rule lets it through",
                     want[i].table, chain, want[i].what, want[i].match, line);
        else
            snprintf(why, n, "%s chain %s has no rule that lets %s (%s) through", want[i].table,
                     chain, want[i].what, want[i].match);
        return NB_DR_PROBLEM;
    }
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
 * it (the agent's anti-spoofing chain), and in it and its inet
 * nubo_sg_<tag> the rules that let the guest's DHCP through whatever its
 * groups say (Neutron's base rules). */
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
    _cleanup_free_ char *bridge_list = NULL;
    for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        char fam[16], name[96];
        if (sscanf(l, "table %15s %95s", fam, name) != 2 || strncmp(name, "nubo_", 5))
            continue;
        snprintf(tables + strlen(tables), sizeof(tables) - strlen(tables), "%s%s %s",
                 tables[0] ? ", " : "", fam, name);
        if (found[0] || strcmp(fam, "bridge") || strncmp(name, "nubo_port_", 10))
            continue;
        const char *const show[] = {"nft", "list", "table", "bridge", name, NULL};
        if (nb_run(show, out, sizeof(out), 10) == 0 && strstr(out, tap)) {
            snprintf(found, sizeof(found), "bridge %s", name);
            bridge_list = strdup(out);
        }
    }
    if (!found[0]) {
        nb_dr_check(r, NB_DR_WARN, "security groups", "no nubo_port_* table names %s (tables: %s)",
                    tap, tables[0] ? tables : "none");
        nb_dr_check(r, NB_DR_SKIP, "dhcp rules", "no filter of %s to look at", tap);
        return;
    }
    nb_dr_check(r, NB_DR_OK, "security groups", "%s is filtered in table %s (tables: %s)", tap,
                found, tables);
    /* the agent's inet table has the bridge table's tag: nubo_sg_<tag> */
    char inet[160];
    snprintf(inet, sizeof(inet), "nubo_sg_%s", found + strlen("bridge nubo_port_"));
    const char *const show[] = {"nft", "list", "table", "inet", inet, NULL};
    bool listed = nb_run(show, out, sizeof(out), 10) == 0;
    char why[2048];
    enum nb_dr_verdict v = nb_dr_nft_dhcp(bridge_list, listed ? out : NULL, tap, why, sizeof(why));
    nb_dr_check(r, v, "dhcp rules", "%s", why);
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

/* Whether the port's groups let the guest reach the metadata service;
 * needs only the database, so it runs on any host. */
static void check_metadata(struct nb_dr_report *r, const json_t *port)
{
    if (!nb_json_int(port, "port_security_enabled", 1)) {
        nb_dr_check(r, NB_DR_SKIP, "metadata",
                    "port security is disabled on the port: no group filters its egress");
        return;
    }
    /* the API stores "True" or "" (Nova's instance.config_drive) */
    bool cd = nb_bool_from_string(nb_json_str(r->server, "config_drive")) == 1 ||
              nb_conf_bool("compute", "force_config_drive", false) ||
              nb_conf_bool("DEFAULT", "force_config_drive", false);
    char why[2048];
    enum nb_dr_verdict v =
        nb_dr_net_metadata(json_object_get(port, "security_groups"), cd, why, sizeof(why));
    nb_dr_check(r, v, "metadata", "%s", why);
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
    check_metadata(r, port);
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
