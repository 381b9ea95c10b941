/* sg_render.c - host state -> the nft script of this agent's security
 * groups (sg.h says what the two tables do). Pure: no I/O. Every name,
 * address and MAC taken from the state is checked or re-formatted before
 * it goes into the script, so a state cannot inject nft syntax.
 *
 * What Neutron's iptables firewall always does is kept (fixed rules in
 * neutron/agent/linux/iptables_firewall.py, the provider rules of
 * neutron/db/securitygroups_rpc_base.py): from a VM, DHCP discover from
 * 0.0.0.0 and DAD/MLD from ::, then the (IP, MAC) pairs of its fixed IPs and
 * allowed address pairs (plus each MAC's EUI-64 link-local address), DHCP
 * client renewals, all ICMPv6 but router advertisements, no DHCP server
 * answers; to a VM, DHCP answers, MLD query, neighbour solicitation and
 * advertisement, router advertisements when it has an IPv6 address. Then
 * the groups' rules, established/related first, invalid dropped, and the
 * rest dropped. A port whose groups are all stateless gets no conntrack
 * shortcut: its rules must allow both directions. */
#include "network/agent/sg.h"

#include "common/cleanup.h"
#include "common/json.h"
#include "common/sbuf.h"
#include "network/network_int.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PORTS 32767 /* 15 bits: bit 31 of the mark is the egress verdict */
#define EGRESS_OK "0x80000000"

struct port {
    const json_t *j;
    const char *id, *tap, *bridge, *network_id;
    char mac[18];
    int idx, zone;
    bool stateful;
};

struct render {
    struct nb_sbuf b;
    const json_t *groups; /* {id: group} */
    json_t *used_sets;    /* {set name: [elements]} */
    json_t *used_groups;  /* {group id: true}: the groups whose chains are rendered */
    struct port *ports;
    size_t nports;
};

static void addf(struct nb_sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void addf(struct nb_sbuf *b, const char *fmt, ...)
{
    char small[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof(small), fmt, ap);
    va_end(ap);
    if (n < (int)sizeof(small)) {
        nb_sbuf_add(b, small, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (!big)
        abort();
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    nb_sbuf_add(b, big, (size_t)n);
    free(big);
}

/* --- names and values from the state --------------------------------------- */

/* A device or object name safe in the script: [A-Za-z0-9_.-], 1-63 chars. */
static bool safe_name(const char *s)
{
    if (!s || !*s || strlen(s) > 63)
        return false;
    for (const char *p = s; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_' && *p != '.')
            return false;
    return true;
}

/* An identifier made of id: letters, digits, '_' ("-" becomes "_"). */
static void ident(char *out, size_t n, const char *prefix, const char *id)
{
    size_t k = (size_t)snprintf(out, n, "%s", prefix);
    for (const char *p = id; *p && k + 1 < n; p++)
        out[k++] = isalnum((unsigned char)*p) ? (char)tolower((unsigned char)*p) : '_';
    out[k] = '\0';
}

/* Parses a MAC into lower-case aa:bb:cc:dd:ee:ff. 0/-1. */
static int mac_norm(const char *s, char out[18], unsigned char bytes[6])
{
    unsigned int v[6];
    char tail;
    if (!s || sscanf(s, "%2x:%2x:%2x:%2x:%2x:%2x%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                     &tail) != 6)
        return -1;
    for (int i = 0; i < 6; i++)
        bytes[i] = (unsigned char)v[i];
    snprintf(out, 18, "%02x:%02x:%02x:%02x:%02x:%02x", v[0], v[1], v[2], v[3], v[4], v[5]);
    return 0;
}

/* An address or CIDR, re-formatted (a CIDR masked; /32, /128 as the
 * address). *version gets 4 or 6. 0/-1. */
static int addr_norm(const char *s, char *out, size_t n, int *version)
{
    struct nb_ip ip;
    int len;
    char a[64];
    if (s && strchr(s, '/')) {
        if (nb_cidr_parse(s, &ip, &len, false) < 0)
            return -1;
        *version = ip.version;
        if (len == (ip.version == 4 ? 32 : 128))
            snprintf(out, n, "%s", nb_ip_format(&ip, a));
        else
            snprintf(out, n, "%s/%d", nb_ip_format(&ip, a), len);
        return 0;
    }
    if (nb_ip_parse(s, &ip) < 0)
        return -1;
    *version = ip.version;
    snprintf(out, n, "%s", nb_ip_format(&ip, a));
    return 0;
}

/* fe80::/64 + EUI-64 of mac. */
static void lla_of(const unsigned char m[6], char out[64])
{
    struct nb_ip ip = {.version = 6};
    ip.bytes[0] = 0xfe;
    ip.bytes[1] = 0x80;
    ip.bytes[8] = m[0] ^ 0x02;
    ip.bytes[9] = m[1];
    ip.bytes[10] = m[2];
    ip.bytes[11] = 0xff;
    ip.bytes[12] = 0xfe;
    ip.bytes[13] = m[3];
    ip.bytes[14] = m[4];
    ip.bytes[15] = m[5];
    nb_ip_format(&ip, out);
}

int na_sg_zone(const char *tag, const char *network_id)
{
    unsigned int h = 2166136261u; /* FNV-1a */
    for (const char *p = tag ? tag : ""; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    for (const char *p = network_id ? network_id : ""; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    return 1 + (int)(h % 65535u);
}

void na_sg_table_names(const char *tag, char *bridge_table, char *inet_table)
{
    snprintf(bridge_table, 32, "nubo_port_%.16s", tag);
    snprintf(inet_table, 32, "nubo_sg_%.16s", tag);
}

/* Neutron's protocol value -> its number, -1 for any (null, "0", "ip"). */
static int proto_num(const json_t *v)
{
    static const struct {
        const char *name;
        int num;
    } map[] = {{"tcp", 6},         {"udp", 17},       {"icmp", 1},        {"ipv6-icmp", 58},
               {"icmpv6", 58},     {"sctp", 132},     {"dccp", 33},       {"udplite", 136},
               {"ah", 51},         {"egp", 8},        {"esp", 50},        {"gre", 47},
               {"igmp", 2},        {"ipip", 4},       {"ospf", 89},       {"pgm", 113},
               {"rsvp", 46},       {"vrrp", 112},     {"ipv6-encap", 41}, {"ipv6-frag", 44},
               {"ipv6-nonxt", 59}, {"ipv6-opts", 60}, {"ipv6-route", 43}, {"hopopt", 0},
               {"ip", 0}};
    int n = -1;
    if (json_is_integer(v)) {
        n = (int)json_integer_value(v);
    } else if (json_is_string(v)) {
        const char *s = json_string_value(v);
        if (*s && strspn(s, "0123456789") == strlen(s))
            n = atoi(s);
        else
            for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
                if (!strcasecmp(map[i].name, s))
                    n = map[i].num;
    }
    return n <= 0 || n > 255 ? -1 : n;
}

static const char *l4_name(int num)
{
    switch (num) {
    case 6: return "tcp";
    case 17: return "udp";
    case 132: return "sctp";
    case 33: return "dccp";
    case 136: return "udplite";
    default: return NULL;
    }
}

/* --- the state's ports ---------------------------------------------------- */

static bool port_secured(const json_t *p)
{
    const json_t *v = json_object_get(p, "port_security_enabled");
    return !v || json_is_true(v);
}

static int cmp_port(const void *a, const void *b)
{
    return strcmp(((const struct port *)a)->tap, ((const struct port *)b)->tap);
}

/* Whether all of the port's groups are stateful (Neutron: one stateless
 * group among them makes the port stateless; none: stateful). */
static bool port_stateful(const struct render *r, const json_t *p)
{
    size_t i;
    json_t *g;
    json_array_foreach (json_object_get(p, "security_groups"), i, g) {
        const json_t *grp = json_object_get(r->groups, json_string_value(g));
        const json_t *st = json_object_get(grp, "stateful");
        if (st && json_is_false(st))
            return false;
    }
    return true;
}

static int collect_ports(struct render *r, const json_t *state, const char *tag, const char **err)
{
    json_t *nets = json_object();
    size_t i;
    json_t *n, *p;
    json_array_foreach (json_object_get(state, "networks"), i, n)
        if (nb_json_str(n, "id"))
            json_object_set(nets, nb_json_str(n, "id"), n);
    const json_t *ports = json_object_get(state, "ports");
    r->ports = calloc(json_array_size(ports) + 1, sizeof(*r->ports));
    if (!r->ports)
        abort();
    json_array_foreach (ports, i, p) {
        if (!port_secured(p))
            continue;
        struct port *x = &r->ports[r->nports];
        unsigned char mb[6];
        x->j = p;
        x->id = nb_json_str(p, "id");
        x->tap = nb_json_str(p, "tap");
        x->network_id = nb_json_str(p, "network_id");
        const json_t *net = json_object_get(nets, x->network_id ? x->network_id : "");
        x->bridge = nb_json_str(net, "bridge");
        if (!safe_name(x->id) || !safe_name(x->tap) || !safe_name(x->bridge) ||
            mac_norm(nb_json_str(p, "mac"), x->mac, mb) < 0) {
            json_decref(nets);
            *err = "a port of the state has no valid id, tap, mac or network bridge";
            return -1;
        }
        x->zone = na_sg_zone(tag, x->network_id);
        x->stateful = port_stateful(r, p);
        if (++r->nports == MAX_PORTS)
            break;
    }
    json_decref(nets);
    qsort(r->ports, r->nports, sizeof(*r->ports), cmp_port);
    for (size_t k = 0; k < r->nports; k++)
        r->ports[k].idx = (int)k + 1;
    return 0;
}

/* --- the bridge table: anti-spoofing and marks ------------------------------ */

/* Appends "v" for one element, "{ v, w }" for more (an anonymous set costs
 * the kernel a set object per rule: one value is a plain compare). */
static void value_or_set(struct nb_sbuf *b, const json_t *elems)
{
    size_t i;
    json_t *e;
    bool set = json_array_size(elems) != 1;
    nb_sbuf_str(b, set ? "{ " : "");
    json_array_foreach (elems, i, e)
        addf(b, "%s%s", i ? ", " : "", json_string_value(e));
    nb_sbuf_str(b, set ? " }" : "");
}

/* The port's allowed (address, MAC) pairs of one version: its fixed IPs
 * with its MAC, its allowed address pairs with theirs, with v6 also each
 * MAC's link-local. macs: the MACs the port may send from. New arrays
 * of "a . m" and of "a". */
static void spoof_pairs(const struct port *x, int version, json_t *macs, json_t **pairs,
                        json_t **addrs)
{
    *pairs = json_array();
    *addrs = json_array();
    size_t i;
    json_t *f;
    char a[80], key[128];
    int v;
    nb_json_set_add(macs, x->mac);
    json_array_foreach (json_object_get(x->j, "fixed_ips"), i, f) {
        if (addr_norm(nb_json_str(f, "ip_address"), a, sizeof(a), &v) < 0 || v != version)
            continue;
        snprintf(key, sizeof(key), "%s . %s", a, x->mac);
        nb_json_set_add(*pairs, key);
        nb_json_set_add(*addrs, a);
    }
    json_array_foreach (json_object_get(x->j, "allowed_address_pairs"), i, f) {
        unsigned char mb[6];
        char m[18];
        if (mac_norm(nb_json_str(f, "mac_address"), m, mb) < 0)
            snprintf(m, sizeof(m), "%s", x->mac);
        nb_json_set_add(macs, m);
        if (addr_norm(nb_json_str(f, "ip_address"), a, sizeof(a), &v) < 0 || v != version)
            continue;
        snprintf(key, sizeof(key), "%s . %s", a, m);
        nb_json_set_add(*pairs, key);
        nb_json_set_add(*addrs, a);
    }
    if (version == 6) {
        json_t *m;
        json_array_foreach (macs, i, m) {
            unsigned char mb[6];
            char norm[18], lla[64];
            mac_norm(json_string_value(m), norm, mb);
            lla_of(mb, lla);
            snprintf(key, sizeof(key), "%s . %s", lla, norm);
            nb_json_set_add(*pairs, key);
            nb_json_set_add(*addrs, lla);
        }
    }
}

/* The port's addresses of one version (fixed IPs, with pairs: and the
 * allowed address pairs' prefixes). New array. */
static json_t *port_addr_list(const struct port *x, int version, bool pairs)
{
    json_t *seen = json_array();
    const char *keys[] = {"fixed_ips", "allowed_address_pairs"};
    for (int j = 0; j < (pairs ? 2 : 1); j++) {
        size_t i;
        json_t *f;
        json_array_foreach (json_object_get(x->j, keys[j]), i, f) {
            char a[80];
            int v;
            if (addr_norm(nb_json_str(f, "ip_address"), a, sizeof(a), &v) == 0 && v == version)
                nb_json_set_add(seen, a);
        }
    }
    return seen;
}

/* The source check of one IP version: by address alone when the port sends
 * from one MAC only (the MAC rule already holds it), else by (address,
 * MAC) pair. Nothing to allow: drop the version (a port without any fixed
 * IP or pair may, as in Neutron, send from any address of its MAC). */
static void source_check(struct nb_sbuf *b, const struct port *x, int version, bool any)
{
    json_t *macs = json_array(), *pairs, *addrs;
    spoof_pairs(x, version, macs, &pairs, &addrs);
    const char *fam = version == 4 ? "ip" : "ip6";
    if (json_array_size(addrs) && json_array_size(macs) == 1) {
        addf(b, "    %s saddr != ", fam);
        value_or_set(b, addrs);
    } else if (json_array_size(addrs)) {
        addf(b, "    %s saddr . ether saddr != { ", fam);
        size_t i;
        json_t *e;
        json_array_foreach (pairs, i, e)
            addf(b, "%s%s", i ? ", " : "", json_string_value(e));
        nb_sbuf_str(b, " }");
    } else if (!any) {
        addf(b, "    meta protocol %s", fam);
    }
    if (json_array_size(addrs) || !any)
        addf(b, " counter drop comment \"%s spoof\"\n", version == 4 ? "ip" : "ipv6");
    json_decref(macs);
    json_decref(pairs);
    json_decref(addrs);
}

static void render_from_chain(struct render *r, const struct port *x)
{
    struct nb_sbuf *b = &r->b;
    bool any = json_array_size(json_object_get(x->j, "fixed_ips")) == 0 &&
               json_array_size(json_object_get(x->j, "allowed_address_pairs")) == 0;
    json_t *macs = json_array(), *pairs, *addrs;
    spoof_pairs(x, 4, macs, &pairs, &addrs);
    addf(b, "  chain from_%s {\n", x->tap);
    addf(b, "    meta mark set meta mark and 0x0000ffff or 0x%08x\n", (unsigned)x->idx << 16);
    nb_sbuf_str(b, "    ether saddr != ");
    value_or_set(b, macs);
    nb_sbuf_str(b, " counter drop comment \"mac spoof\"\n"
                   "    ether type @tagged_types counter drop comment \"vlan tagged\"\n");
    json_t *arp = port_addr_list(x, 4, true);
    nb_sbuf_str(b, "    arp saddr ip != 0.0.0.0");
    if (json_array_size(arp)) {
        nb_sbuf_str(b, " arp saddr ip != ");
        value_or_set(b, arp);
    }
    nb_sbuf_str(b, " counter drop comment \"arp spoof\"\n");
    json_decref(arp);
    json_decref(macs);
    json_decref(pairs);
    json_decref(addrs);
    nb_sbuf_str(b, "    ip saddr 0.0.0.0 ip daddr 255.255.255.255 udp sport 68 udp dport 67 "
                   "accept comment \"dhcp client\"\n");
    source_check(b, x, 4, any);
    nb_sbuf_str(b, "    ip6 saddr :: ip6 daddr ff02::/16 icmpv6 type @dad_types accept comment "
                   "\"ipv6 dad\"\n");
    source_check(b, x, 6, false);
    nb_sbuf_str(b, "    udp sport 67 udp dport 68 counter drop comment \"dhcp server\"\n");
    nb_sbuf_str(b, "    udp sport 547 udp dport 546 counter drop comment \"dhcpv6 server\"\n");
    nb_sbuf_str(b, "    icmpv6 type nd-router-advert counter drop comment "
                   "\"router advertisement\"\n");
    nb_sbuf_str(b, "  }\n");
}

static void render_bridge(struct render *r, const char *table)
{
    struct nb_sbuf *b = &r->b;
    addf(b, "table bridge %s\ndelete table bridge %s\ntable bridge %s {\n", table, table, table);
    nb_sbuf_str(
        b, "  set tagged_types {\n    type ether_type;\n    elements = { 8021q, 8021ad }\n  }\n"
           "  set dad_types {\n    type icmpv6_type;\n    elements = { 131, 135, 143 }\n  }\n");
    nb_sbuf_str(b, "  chain forward {\n    type filter hook forward priority -200; policy "
                   "accept;\n    oifname vmap {");
    for (size_t k = 0; k < r->nports; k++)
        addf(b, "%s \"%s\" : jump to_%s", k ? "," : "", r->ports[k].tap, r->ports[k].tap);
    nb_sbuf_str(b, " }\n    iifname vmap {");
    for (size_t k = 0; k < r->nports; k++)
        addf(b, "%s \"%s\" : jump from_%s", k ? "," : "", r->ports[k].tap, r->ports[k].tap);
    nb_sbuf_str(b, " }\n  }\n");
    for (size_t k = 0; k < r->nports; k++) {
        const struct port *x = &r->ports[k];
        addf(b, "  chain to_%s {\n    meta mark set 0x%08x\n  }\n", x->tap, (unsigned)x->idx);
        render_from_chain(r, x);
    }
    nb_sbuf_str(b, "}\n");
}

/* --- the inet table: stateful per-port chains ------------------------------ */

/* The name of the set of group gid's members of version, registering the
 * set; NULL when the group is unknown or has no member of that version
 * (Neutron: no ipset, no rule). */
static const char *group_set(struct render *r, const char *gid, int version, char *name, size_t n)
{
    const json_t *g = json_object_get(r->groups, gid);
    if (!g)
        return NULL;
    ident(name, n, "rg_", gid);
    snprintf(name + strlen(name), n - strlen(name), "_v%d", version);
    json_t *have = json_object_get(r->used_sets, name);
    if (have)
        return json_array_size(have) ? name : NULL;
    json_t *elems = json_array();
    size_t i;
    json_t *m;
    json_array_foreach (json_object_get(g, "members"), i, m) {
        char a[80];
        int v;
        if (addr_norm(json_string_value(m), a, sizeof(a), &v) == 0 && v == version)
            nb_json_set_add(elems, a);
    }
    json_object_set_new(r->used_sets, name, elems);
    return json_array_size(elems) ? name : NULL;
}

/* The match of a rule's protocol and ports/ICMP type into b. */
static void rule_proto(struct nb_sbuf *b, const json_t *rule, int version)
{
    int proto = proto_num(json_object_get(rule, "protocol"));
    const json_t *jmin = json_object_get(rule, "port_range_min");
    const json_t *jmax = json_object_get(rule, "port_range_max");
    bool has_min = json_is_integer(jmin), has_max = json_is_integer(jmax);
    long long pmin = json_integer_value(jmin), pmax = json_integer_value(jmax);
    if (proto == 1 && version == 6)
        proto = 58; /* Neutron's canonical ICMP of IPv6 */
    if (proto < 0)
        return;
    const char *l4 = l4_name(proto);
    if (l4 && has_min) {
        if (!has_max || pmax == pmin)
            addf(b, " %s dport %lld", l4, pmin);
        else
            addf(b, " %s dport %lld-%lld", l4, pmin, pmax);
    } else if ((proto == 1 || proto == 58) && has_min) {
        const char *kw = proto == 1 ? "icmp" : "icmpv6";
        addf(b, " %s type %lld", kw, pmin);
        if (has_max)
            addf(b, " %s code %lld", kw, pmax);
    } else {
        addf(b, " meta l4proto %d", proto);
    }
}

/* One group rule as an nft rule with verdict, or nothing when it cannot
 * match (an empty remote group, a prefix of the other version). */
static void render_rule(struct render *r, const json_t *rule, const char *verdict)
{
    struct nb_sbuf *b = &r->b;
    const char *eth = nb_json_str(rule, "ethertype");
    int version = eth && !strcmp(eth, "IPv6") ? 6 : 4;
    const char *fam = version == 4 ? "ip" : "ip6";
    bool ingress = !strcmp(nb_json_str(rule, "direction") ?: "", "ingress");
    const char *dir = ingress ? "saddr" : "daddr";
    const char *prefix = nb_json_str(rule, "remote_ip_prefix");
    const char *rgid = nb_json_str(rule, "remote_group_id");
    struct nb_sbuf m = {0};
    if (prefix) {
        char a[80];
        int v;
        if (addr_norm(prefix, a, sizeof(a), &v) < 0 || v != version)
            return;
        if (!strcmp(a, "0.0.0.0/0") || !strcmp(a, "::/0"))
            addf(&m, " meta nfproto ipv%d", version);
        else
            addf(&m, " %s %s %s", fam, dir, a);
    } else if (rgid) {
        char set[96];
        if (!group_set(r, rgid, version, set, sizeof(set)))
            return;
        addf(&m, " %s %s @%s", fam, dir, set);
    } else {
        addf(&m, " meta nfproto ipv%d", version);
    }
    rule_proto(&m, rule, version);
    const char *id = nb_json_str(rule, "id");
    addf(b, "   %s %s", m.s, verdict);
    if (safe_name(id))
        addf(b, " comment \"rule %s\"", id);
    nb_sbuf_str(b, "\n");
    free(m.s);
}

/* Jumps to the chains of the port's groups in direction (each group's
 * rules are in one chain shared by its ports; a group unknown to the state
 * has no chain and allows nothing). */
static void render_group_jumps(struct render *r, const struct port *x, const char *direction)
{
    size_t i;
    json_t *g;
    json_array_foreach (json_object_get(x->j, "security_groups"), i, g) {
        const char *gid = json_string_value(g);
        if (!gid || !json_object_get(r->groups, gid) || !safe_name(gid))
            continue;
        char name[96];
        ident(name, sizeof(name), direction[0] == 'i' ? "sg_in_" : "sg_out_", gid);
        addf(&r->b, "    jump %s\n", name);
        json_object_set_new(r->used_groups, gid, json_true());
    }
}

/* The chains of the groups the ports use: ingress rules accept; egress
 * rules set the mark's bit 31 and return, so the sender's chain lets the
 * packet on to the receiver's ingress chain. */
static void render_group_chains(struct render *r)
{
    const char *gid;
    json_t *unused;
    json_object_foreach (r->used_groups, gid, unused) {
        const json_t *grp = json_object_get(r->groups, gid);
        for (int d = 0; d < 2; d++) {
            char name[96];
            ident(name, sizeof(name), d ? "sg_out_" : "sg_in_", gid);
            addf(&r->b, "  chain %s {\n", name);
            size_t j;
            json_t *rule;
            json_array_foreach (json_object_get(grp, "rules"), j, rule)
                if (!strcmp(nb_json_str(rule, "direction") ?: "", d ? "egress" : "ingress"))
                    render_rule(r, rule,
                                d ? "meta mark set meta mark or " EGRESS_OK " return" : "accept");
            nb_sbuf_str(&r->b, "  }\n");
        }
    }
}

static void render_ingress(struct render *r, const struct port *x)
{
    struct nb_sbuf *b = &r->b;
    json_t *v4 = port_addr_list(x, 4, false), *v6 = port_addr_list(x, 6, false);
    size_t i;
    json_t *a;
    addf(b, "  chain ingress_%s {\n", x->tap);
    if (x->stateful)
        nb_sbuf_str(b, "    ct state established,related accept\n"
                       "    ct state invalid counter drop\n");
    json_array_append_new(v4, json_string("255.255.255.255"));
    json_array_foreach (v4, i, a)
        addf(b, "    ip daddr %s udp sport 67 udp dport 68 accept comment \"dhcp\"\n",
             json_string_value(a));
    json_array_append_new(v6, json_string("fe80::/64"));
    json_array_foreach (v6, i, a)
        addf(b, "    ip6 daddr %s udp sport 547 udp dport 546 accept comment \"dhcpv6\"\n",
             json_string_value(a));
    nb_sbuf_str(b, "    icmpv6 type @nd_in_types accept\n");
    if (json_array_size(v6) > 1)
        nb_sbuf_str(b, "    icmpv6 type nd-router-advert accept\n");
    json_decref(v4);
    json_decref(v6);
    render_group_jumps(r, x, "ingress");
    nb_sbuf_str(b, "    counter drop comment \"no rule allows it\"\n  }\n");
}

static void render_egress(struct render *r, const struct port *x)
{
    struct nb_sbuf *b = &r->b;
    addf(b, "  chain egress_%s {\n", x->tap);
    nb_sbuf_str(b, "    meta nfproto ipv4 udp sport 68 udp dport 67 return comment "
                   "\"dhcp client\"\n"
                   "    meta l4proto ipv6-icmp return\n"
                   "    meta nfproto ipv6 udp sport 546 udp dport 547 return comment "
                   "\"dhcpv6 client\"\n");
    if (x->stateful)
        nb_sbuf_str(b, "    ct state established,related return\n"
                       "    ct state invalid counter drop\n");
    render_group_jumps(r, x, "egress");
    nb_sbuf_str(b, "    meta mark and " EGRESS_OK " == " EGRESS_OK " return\n");
    nb_sbuf_str(b, "    counter drop comment \"no rule allows it\"\n  }\n");
}

static void render_sets(struct render *r, struct nb_sbuf *out)
{
    const char *name;
    json_t *elems;
    json_object_foreach (r->used_sets, name, elems) {
        if (!json_array_size(elems))
            continue;
        addf(out, "  set %s {\n    type %s; flags interval; auto-merge;\n    elements = { ", name,
             name[strlen(name) - 1] == '4' ? "ipv4_addr" : "ipv6_addr");
        size_t i;
        json_t *e;
        json_array_foreach (elems, i, e)
            addf(out, "%s%s", i ? ", " : "", json_string_value(e));
        nb_sbuf_str(out, " }\n  }\n");
    }
}

static void render_inet(struct render *r, const char *table)
{
    /* the port chains first (they register the sets), then the head */
    struct nb_sbuf head = r->b;
    r->b = (struct nb_sbuf){0};
    for (size_t k = 0; k < r->nports; k++) {
        render_ingress(r, &r->ports[k]);
        render_egress(r, &r->ports[k]);
    }
    render_group_chains(r);
    struct nb_sbuf chains = r->b;
    r->b = head;
    struct nb_sbuf *b = &r->b;
    addf(b, "table inet %s\ndelete table inet %s\ntable inet %s {\n", table, table, table);
    json_t *bridges = json_object();
    for (size_t k = 0; k < r->nports; k++) {
        char z[16];
        snprintf(z, sizeof(z), "%d", r->ports[k].zone);
        json_object_set_new(bridges, r->ports[k].bridge, json_string(z));
    }
    const char *br;
    json_t *z;
    int n = 0;
    nb_sbuf_str(b, "  set bridges {\n    type ifname;\n    elements = {");
    json_object_foreach (bridges, br, z)
        addf(b, "%s \"%s\"", n++ ? "," : "", br);
    nb_sbuf_str(b, " }\n  }\n");
    nb_sbuf_str(b,
                "  set nd_in_types {\n    type icmpv6_type;\n    elements = { mld-listener-query, "
                "nd-neighbor-solicit, nd-neighbor-advert }\n  }\n");
    render_sets(r, b);
    nb_sbuf_str(b, "  chain prerouting {\n    type filter hook prerouting priority raw; policy "
                   "accept;\n    iifname @bridges ct zone set iifname map {");
    n = 0;
    json_object_foreach (bridges, br, z)
        addf(b, "%s \"%s\" : %s", n++ ? "," : "", br, json_string_value(z));
    nb_sbuf_str(b, " }\n  }\n");
    json_decref(bridges);
    nb_sbuf_str(b, "  chain forward {\n    type filter hook forward priority filter; policy "
                   "accept;\n    iifname != @bridges accept\n    meta mark and 0xffff0000 vmap {");
    for (size_t k = 0; k < r->nports; k++)
        addf(b, "%s 0x%08x : jump egress_%s", k ? "," : "", (unsigned)r->ports[k].idx << 16,
             r->ports[k].tap);
    nb_sbuf_str(b, " }\n    meta mark and 0x0000ffff vmap {");
    for (size_t k = 0; k < r->nports; k++)
        addf(b, "%s 0x%08x : jump ingress_%s", k ? "," : "", (unsigned)r->ports[k].idx,
             r->ports[k].tap);
    nb_sbuf_str(b, " }\n  }\n");
    if (chains.s)
        nb_sbuf_str(b, chains.s);
    free(chains.s);
    nb_sbuf_str(b, "}\n");
}

/* --- what the filters allow (for conntrack cleanup) ----------------------- */

static void rule_key(const json_t *rule, char *out, size_t n)
{
    json_t *k =
        json_pack("[s?,s?,O?,O?,O?,s?,s?]", nb_json_str(rule, "direction"),
                  nb_json_str(rule, "ethertype"), json_object_get(rule, "protocol"),
                  json_object_get(rule, "port_range_min"), json_object_get(rule, "port_range_max"),
                  nb_json_str(rule, "remote_ip_prefix"), nb_json_str(rule, "remote_group_id"));
    char *s = k ? nb_json_dump(k) : NULL;
    snprintf(out, n, "%s", s ? s : "");
    free(s);
    json_decref(k);
}

static json_t *port_flows(const struct render *r, const struct port *x)
{
    json_t *ips = json_array(), *rules = json_object(), *remotes = json_array();
    size_t i, j;
    json_t *f, *g, *rule;
    json_array_foreach (json_object_get(x->j, "fixed_ips"), i, f) {
        char a[80];
        int v;
        if (addr_norm(nb_json_str(f, "ip_address"), a, sizeof(a), &v) == 0)
            json_array_append_new(ips, json_string(a));
    }
    json_array_foreach (json_object_get(x->j, "security_groups"), i, g) {
        const json_t *grp = json_object_get(r->groups, json_string_value(g));
        json_array_foreach (json_object_get(grp, "rules"), j, rule) {
            char key[512];
            rule_key(rule, key, sizeof(key));
            int proto = proto_num(json_object_get(rule, "protocol"));
            json_object_set_new(rules, key,
                                json_pack("{s:s?,s:s?,s:i}", "direction",
                                          nb_json_str(rule, "direction"), "ethertype",
                                          nb_json_str(rule, "ethertype"), "protocol", proto));
            if (nb_json_str(rule, "remote_group_id"))
                json_array_append_new(remotes, json_string(nb_json_str(rule, "remote_group_id")));
        }
    }
    json_t *groups = json_object_get(x->j, "security_groups");
    return json_pack("{s:i,s:o,s:o,s:o,s:o}", "zone", x->zone, "ips", ips, "groups",
                     groups ? json_incref(groups) : json_array(), "rules", rules, "remote_groups",
                     remotes);
}

static json_t *render_flows(const struct render *r)
{
    json_t *ports = json_object(), *members = json_object();
    for (size_t k = 0; k < r->nports; k++)
        json_object_set_new(ports, r->ports[k].id, port_flows(r, &r->ports[k]));
    const char *gid;
    json_t *g;
    json_object_foreach ((json_t *)r->groups, gid, g) {
        json_t *v4 = json_array(), *v6 = json_array();
        size_t i;
        json_t *m;
        json_array_foreach (json_object_get(g, "members"), i, m) {
            char a[80];
            int v;
            if (addr_norm(json_string_value(m), a, sizeof(a), &v) == 0)
                json_array_append_new(v == 4 ? v4 : v6, json_string(a));
        }
        json_object_set_new(members, gid, json_pack("{s:o,s:o}", "IPv4", v4, "IPv6", v6));
    }
    return json_pack("{s:o,s:o}", "ports", ports, "members", members);
}

/* --- entry points ----------------------------------------------------------- */

void na_sg_plan_free(struct na_sg_plan *p)
{
    if (!p)
        return;
    free(p->script);
    json_decref(p->ports);
    json_decref(p->flows);
    memset(p, 0, sizeof(*p));
}

int na_sg_render(const json_t *state, const char *tag, struct na_sg_plan *out, const char **err)
{
    memset(out, 0, sizeof(*out));
    *err = NULL;
    if (!safe_name(tag) || !json_is_object(state)) {
        *err = "no state or no valid agent tag";
        return -1;
    }
    struct render r = {
        .groups = json_object(), .used_sets = json_object(), .used_groups = json_object()};
    size_t i;
    json_t *g;
    json_array_foreach (json_object_get(state, "security_groups"), i, g)
        if (nb_json_str(g, "id"))
            json_object_set((json_t *)r.groups, nb_json_str(g, "id"), g);
    char bt[32], it[32];
    na_sg_table_names(tag, bt, it);
    int rc = collect_ports(&r, state, tag, err);
    if (rc == 0 && r.nports == 0) {
        addf(&r.b, "table bridge %s\ndelete table bridge %s\ntable inet %s\ndelete table inet %s\n",
             bt, bt, it, it);
        out->empty = true;
    } else if (rc == 0) {
        render_bridge(&r, bt);
        render_inet(&r, it);
    }
    if (rc == 0) {
        out->script = NB_STEAL(&r.b.s);
        out->ports = json_array();
        for (size_t k = 0; k < r.nports; k++)
            json_array_append_new(out->ports, json_string(r.ports[k].id));
        out->flows = render_flows(&r);
    }
    free(r.b.s);
    free(r.ports);
    json_decref((json_t *)r.groups);
    json_decref(r.used_sets);
    json_decref(r.used_groups);
    return rc;
}

/* --- conntrack cuts -------------------------------------------------------- */

static const char *ct_proto(int num, const char *ethertype)
{
    switch (num) {
    case 1: return ethertype && !strcmp(ethertype, "IPv6") ? "icmpv6" : "icmp";
    case 58: return "icmpv6";
    case 6: return "tcp";
    case 17: return "udp";
    case 132: return "sctp";
    case 33: return "dccp";
    case 136: return "udplite";
    case 47: return "gre";
    default: return NULL;
    }
}

static int ip_version_of(const char *ip)
{
    return ip && strchr(ip, ':') ? 6 : 4;
}

/* Adds `conntrack -D [-p p] -f fam <-d|-s> ip -w zone [<-s|-d> remote]`. */
static void extend(json_t *a, json_t *b)
{
    json_array_extend(a, b);
    json_decref(b);
}

static void add_cut(json_t *cuts, const char *proto, const char *ethertype, bool ingress,
                    const char *ip, int zone, const char *remote)
{
    json_t *cmd = json_pack("[s,s]", "conntrack", "-D");
    if (proto)
        extend(cmd, json_pack("[s,s]", "-p", proto));
    char z[16];
    snprintf(z, sizeof(z), "%d", zone);
    extend(cmd, json_pack("[s,s,s,s,s,s]", "-f",
                          ethertype && !strcmp(ethertype, "IPv6") ? "ipv6" : "ipv4",
                          ingress ? "-d" : "-s", ip, "-w", z));
    if (remote)
        extend(cmd, json_pack("[s,s]", ingress ? "-s" : "-d", remote));
    char *key = nb_json_dump(cmd);
    json_object_set_new(cuts, key, cmd);
    free(key);
}

static bool in_array(const json_t *a, const char *s)
{
    size_t i;
    json_t *v;
    json_array_foreach (a, i, v)
        if (json_is_string(v) && !strcmp(json_string_value(v), s))
            return true;
    return false;
}

/* For a port kept across the change: its removed rules, the groups it left,
 * the members gone from the groups its rules name. */
static void port_cuts(json_t *cuts, const json_t *op, const json_t *np, const json_t *omem,
                      const json_t *nmem)
{
    int zone = (int)nb_json_int(np, "zone", 0);
    const json_t *ips = json_object_get(np, "ips");
    size_t i, j;
    json_t *ip, *g;
    const char *key;
    json_t *rule;
    bool left = false;
    json_array_foreach (json_object_get(op, "groups"), i, g)
        if (!in_array(json_object_get(np, "groups"), json_string_value(g)))
            left = true;
    json_array_foreach (ips, i, ip) {
        const char *a = json_string_value(ip);
        const char *eth = ip_version_of(a) == 6 ? "IPv6" : "IPv4";
        if (left) {
            add_cut(cuts, NULL, eth, true, a, zone, NULL);
            add_cut(cuts, NULL, eth, false, a, zone, NULL);
        }
        json_object_foreach ((json_t *)json_object_get(op, "rules"), key, rule) {
            if (json_object_get(json_object_get(np, "rules"), key))
                continue;
            const char *reth = nb_json_str(rule, "ethertype");
            if (!reth || strcmp(reth, eth))
                continue;
            add_cut(cuts, ct_proto((int)nb_json_int(rule, "protocol", -1), reth), reth,
                    !strcmp(nb_json_str(rule, "direction") ?: "", "ingress"), a, zone, NULL);
        }
        json_array_foreach (json_object_get(np, "remote_groups"), j, g) {
            const char *gid = json_string_value(g);
            json_t *was = json_object_get(json_object_get(omem, gid), eth);
            json_t *now = json_object_get(json_object_get(nmem, gid), eth);
            size_t k;
            json_t *m;
            json_array_foreach (was, k, m) {
                if (in_array(now, json_string_value(m)))
                    continue;
                add_cut(cuts, NULL, eth, true, a, zone, json_string_value(m));
                add_cut(cuts, NULL, eth, false, a, zone, json_string_value(m));
            }
        }
    }
}

json_t *na_sg_conntrack_cuts(const json_t *old_flows, const json_t *new_flows)
{
    json_t *cuts = json_object();
    const json_t *oports = json_object_get(old_flows, "ports");
    const json_t *nports = json_object_get(new_flows, "ports");
    const char *id;
    json_t *np;
    json_object_foreach ((json_t *)nports, id, np) {
        const json_t *op = json_object_get(oports, id);
        if (op)
            port_cuts(cuts, op, np, json_object_get(old_flows, "members"),
                      json_object_get(new_flows, "members"));
    }
    json_t *out = json_array();
    json_t *cmd;
    const char *k;
    json_object_foreach (cuts, k, cmd)
        json_array_append(out, cmd);
    json_decref(cuts);
    return out;
}
