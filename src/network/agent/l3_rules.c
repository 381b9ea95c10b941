/* l3_rules.c - the pure part of the L3 agent (l3.h): a router of the host
 * state -> the NAT rule set of its namespace and the addresses of its
 * devices. Neutron's l3 agent does the same with iptables chains
 * (neutron-l3-agent-PREROUTING/-OUTPUT/-float-snat/-snat); here one nft
 * table per router namespace, replaced in one `nft -f` transaction. */
#include "network/agent/l3.h"

#include "common/json.h"
#include "common/sbuf.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool na_l3_ip_ok(const char *s, bool v4)
{
    unsigned char buf[16];
    return s && inet_pton(v4 ? AF_INET : AF_INET6, s, buf) == 1;
}

/* A device name of the state (tap/qr-/qg- + 11 characters of an id) safe
 * to quote in a rule. */
static bool dev_ok(const char *s)
{
    if (!s || !*s || strlen(s) > 15)
        return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '_'))
            return false;
    return true;
}

const char *na_l3_gateway_v4(const json_t *router)
{
    json_t *gw = json_object_get(router, "gateway");
    size_t i;
    json_t *f;
    json_array_foreach (json_object_get(gw, "fixed_ips"), i, f)
        if (na_l3_ip_ok(nb_json_str(f, "ip_address"), true))
            return nb_json_str(f, "ip_address");
    return NULL;
}

json_t *na_l3_valid_fips(const json_t *router)
{
    json_t *out = json_array();
    size_t i;
    json_t *f;
    json_array_foreach (json_object_get(router, "floating_ips"), i, f)
        if (na_l3_ip_ok(nb_json_str(f, "floating_ip_address"), true) &&
            na_l3_ip_ok(nb_json_str(f, "fixed_ip_address"), true))
            json_array_append(out, f);
    return out;
}

/* An id of the state (a UUID) safe to put in a rule's comment. */
static bool id_ok(const char *s)
{
    if (!s || strlen(s) > 36)
        return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'f') || (*p >= '0' && *p <= '9') || *p == '-'))
            return false;
    return true;
}

static bool port_ok(const json_t *v)
{
    return json_is_integer(v) && json_integer_value(v) >= 1 && json_integer_value(v) <= 65535;
}

static bool proto_ok(const char *p)
{
    static const char *const ok[] = {"tcp", "udp", "udplite", "sctp", "dccp", NULL};
    for (int i = 0; p && ok[i]; i++)
        if (!strcmp(p, ok[i]))
            return true;
    return false;
}

json_t *na_l3_valid_pfs(const json_t *router)
{
    json_t *out = json_array();
    size_t i;
    json_t *f;
    json_array_foreach (json_object_get(router, "port_forwardings"), i, f)
        if (na_l3_ip_ok(nb_json_str(f, "floating_ip_address"), true) &&
            na_l3_ip_ok(nb_json_str(f, "internal_ip_address"), true) &&
            proto_ok(nb_json_str(f, "protocol")) && port_ok(json_object_get(f, "external_port")) &&
            port_ok(json_object_get(f, "internal_port")))
            json_array_append(out, f);
    return out;
}

static void addf(struct nb_sbuf *b, const char *fmt, const char *a, const char *c)
{
    char line[512];
    snprintf(line, sizeof(line), fmt, a, c);
    nb_sbuf_str(b, line);
}

static void dnat_chain(struct nb_sbuf *b, const char *name, const char *hook, const char *prio,
                       const json_t *fips, const json_t *pfs)
{
    addf(b, "\tchain %s {\n", name, NULL);
    addf(b, "\t\ttype nat hook %s priority %s; policy accept;\n", hook, prio);
    size_t i;
    json_t *f;
    json_array_foreach (fips, i, f) {
        char line[256];
        snprintf(line, sizeof(line), "\t\tip daddr %s dnat to %s comment \"floatingip %.36s\"\n",
                 nb_json_str(f, "floating_ip_address"), nb_json_str(f, "fixed_ip_address"),
                 id_ok(nb_json_str(f, "id")) ? nb_json_str(f, "id") : "");
        nb_sbuf_str(b, line);
    }
    /* port forwardings before whole-address floating IPs (theirs are free) */
    json_array_foreach (pfs, i, f) {
        char line[256];
        snprintf(line, sizeof(line),
                 "\t\tip daddr %s %s dport %lld dnat to %s:%lld comment \"port_forwarding "
                 "%.36s\"\n",
                 nb_json_str(f, "floating_ip_address"), nb_json_str(f, "protocol"),
                 nb_json_int(f, "external_port", 0), nb_json_str(f, "internal_ip_address"),
                 nb_json_int(f, "internal_port", 0),
                 id_ok(nb_json_str(f, "id")) ? nb_json_str(f, "id") : "");
        nb_sbuf_str(b, line);
    }
    nb_sbuf_str(b, "\t}\n");
}

char *na_l3_ruleset(const json_t *router)
{
    struct nb_sbuf b = {0};
    nb_sbuf_str(&b, "table ip " NA_L3_TABLE "\ndelete table ip " NA_L3_TABLE
                    "\ntable ip " NA_L3_TABLE " {\n");
    json_t *gw = json_object_get(router, "gateway");
    const char *qg = nb_json_str(gw, "dev"), *gw_ip = na_l3_gateway_v4(router);
    json_t *fips = gw && dev_ok(qg) ? na_l3_valid_fips(router) : json_array();
    json_t *pfs = gw && dev_ok(qg) ? na_l3_valid_pfs(router) : json_array();
    dnat_chain(&b, "prerouting", "prerouting", "dstnat", fips, pfs);
    dnat_chain(&b, "output", "output", "-100", fips, pfs);
    nb_sbuf_str(&b, "\tchain postrouting {\n"
                    "\t\ttype nat hook postrouting priority srcnat; policy accept;\n");
    if (gw && dev_ok(qg)) {
        /* east-west traffic is routed as it is */
        addf(&b, "\t\toifname != \"%s\" ct status & dnat == 0 accept\n", qg, NULL);
        size_t i;
        json_t *f;
        json_array_foreach (fips, i, f)
            addf(&b, "\t\tip saddr %s snat to %s\n", nb_json_str(f, "fixed_ip_address"),
                 nb_json_str(f, "floating_ip_address"));
        json_t *snat = json_object_get(router, "enable_snat");
        if (gw_ip && (!snat || json_is_true(snat))) {
            addf(&b, "\t\toifname \"%s\" snat to %s\n", qg, gw_ip);
            addf(&b, "\t\tiifname != \"%s\" ct status dnat snat to %s\n", qg, gw_ip);
        }
    }
    nb_sbuf_str(&b, "\t}\n}\n");
    json_decref(fips);
    json_decref(pfs);
    return b.s;
}

static void add_host32(json_t *out, const char *ip)
{
    char a[80];
    snprintf(a, sizeof(a), "%s/32", ip);
    size_t k;
    json_t *o;
    json_array_foreach (out, k, o)
        if (!strcmp(json_string_value(o), a))
            return;
    json_array_append_new(out, json_string(a));
}

json_t *na_l3_leg_addresses(const json_t *leg, const json_t *router)
{
    json_t *out = json_array();
    size_t i;
    json_t *f;
    json_array_foreach (json_object_get(leg, "fixed_ips"), i, f) {
        const char *ip = nb_json_str(f, "ip_address");
        long long len = nb_json_int(f, "prefixlen", -1);
        bool v4 = na_l3_ip_ok(ip, true);
        if ((!v4 && !na_l3_ip_ok(ip, false)) || len < 0 || len > (v4 ? 32 : 128))
            continue;
        char a[80];
        snprintf(a, sizeof(a), "%s/%lld", ip, len);
        json_array_append_new(out, json_string(a));
    }
    if (!router)
        return out;
    json_t *fips = na_l3_valid_fips(router), *pfs = na_l3_valid_pfs(router);
    json_array_foreach (fips, i, f)
        add_host32(out, nb_json_str(f, "floating_ip_address"));
    json_array_foreach (pfs, i, f)
        add_host32(out, nb_json_str(f, "floating_ip_address"));
    json_decref(fips);
    json_decref(pfs);
    return out;
}

json_t *na_l3_legs(const json_t *router)
{
    json_t *out = json_array();
    size_t i;
    json_t *l;
    json_array_foreach (json_object_get(router, "interfaces"), i, l) {
        json_t *c = json_deep_copy(l);
        json_object_set_new(c, "gateway", json_false());
        json_array_append_new(out, c);
    }
    json_t *gw = json_object_get(router, "gateway");
    if (json_is_object(gw)) {
        json_t *c = json_deep_copy(gw);
        json_object_set_new(c, "gateway", json_true());
        json_array_append_new(out, c);
    }
    return out;
}

/* "addr/len" with a valid IPv6 address and 0 <= len <= 128. */
static bool v6_cidr_ok(const char *cidr)
{
    char a[64];
    const char *slash = cidr ? strchr(cidr, '/') : NULL;
    if (!slash || (size_t)(slash - cidr) >= sizeof(a) || !slash[1] ||
        strspn(slash + 1, "0123456789") != strlen(slash + 1) || strlen(slash + 1) > 3 ||
        atoi(slash + 1) > 128)
        return false;
    memcpy(a, cidr, (size_t)(slash - cidr));
    a[slash - cidr] = '\0';
    return na_l3_ip_ok(a, false);
}

static const char *ra_mode_of(const json_t *f)
{
    const char *m = nb_json_str(f, "ipv6_ra_mode");
    if (!m || !v6_cidr_ok(nb_json_str(f, "cidr")))
        return NULL;
    return !strcmp(m, "slaac") || !strcmp(m, "dhcpv6-stateless") || !strcmp(m, "dhcpv6-stateful")
               ? m
               : NULL;
}

/* The leg's IPv6 subnets with an RA mode, one entry per subnet. New list. */
static json_t *ra_subnets(const json_t *leg)
{
    json_t *out = json_array();
    size_t i, k;
    json_t *f, *o;
    json_array_foreach (json_object_get(leg, "fixed_ips"), i, f) {
        if (!ra_mode_of(f))
            continue;
        bool seen = false;
        json_array_foreach (out, k, o)
            seen |= !strcmp(nb_json_str(o, "cidr"), nb_json_str(f, "cidr"));
        if (!seen)
            json_array_append(out, f);
    }
    return out;
}

static bool any_mode(const json_t *subnets, const char *mode)
{
    size_t i;
    json_t *s;
    json_array_foreach (subnets, i, s)
        if (!strcmp(ra_mode_of(s), mode))
            return true;
    return false;
}

static void radvd_interface(struct nb_sbuf *b, const char *dev, const json_t *subnets,
                            long long mtu, int min_interval, int max_interval)
{
    char line[200];
    snprintf(line, sizeof(line),
             "interface %s\n{\n   AdvSendAdvert on;\n   MinRtrAdvInterval %d;\n"
             "   MaxRtrAdvInterval %d;\n",
             dev, min_interval, max_interval);
    nb_sbuf_str(b, line);
    if (mtu >= 1280) { /* IPV6_MIN_MTU */
        snprintf(line, sizeof(line), "   AdvLinkMTU %lld;\n", mtu);
        nb_sbuf_str(b, line);
    }
    if (any_mode(subnets, "dhcpv6-stateless"))
        nb_sbuf_str(b, "   AdvOtherConfigFlag on;\n");
    if (any_mode(subnets, "dhcpv6-stateful"))
        nb_sbuf_str(b, "   AdvManagedFlag on;\n");
    size_t i, k, n = 0;
    json_t *s, *d;
    json_array_foreach (subnets, i, s) {
        if (strcmp(ra_mode_of(s), "slaac"))
            continue;
        json_array_foreach (json_object_get(s, "dns_nameservers"), k, d) {
            const char *ip = json_string_value(d);
            if (n >= 3 || !na_l3_ip_ok(ip, false)) /* MAX_RDNSS_ENTRIES */
                continue;
            nb_sbuf_str(b, n++ ? " " : "   RDNSS ");
            nb_sbuf_str(b, ip);
        }
    }
    if (n)
        nb_sbuf_str(b, " {};\n");
    /* SLAAC and stateless prefixes first, then the stateful ones, as ra.py */
    for (int pass = 0; pass < 2; pass++)
        json_array_foreach (subnets, i, s) {
            bool stateful = !strcmp(ra_mode_of(s), "dhcpv6-stateful");
            if (stateful != (pass == 1))
                continue;
            snprintf(
                line, sizeof(line),
                "   prefix %s\n   {\n        AdvOnLink on;\n        AdvAutonomous %s;\n   };\n",
                nb_json_str(s, "cidr"), stateful ? "off" : "on");
            nb_sbuf_str(b, line);
        }
    nb_sbuf_str(b, "   route fe80::a9fe:a9fe/128 {\n   };\n};\n");
}

char *na_l3_radvd_conf(const json_t *router, int min_interval, int max_interval)
{
    struct nb_sbuf b = {0};
    size_t i;
    json_t *leg;
    json_array_foreach (json_object_get(router, "interfaces"), i, leg) {
        const char *dev = nb_json_str(leg, "dev");
        json_t *subnets = ra_subnets(leg);
        if (dev_ok(dev) && json_array_size(subnets))
            radvd_interface(&b, dev, subnets, nb_json_int(leg, "mtu", 0), min_interval,
                            max_interval);
        json_decref(subnets);
    }
    return b.s;
}
