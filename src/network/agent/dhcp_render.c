/* dhcp_render.c - dhcp.h: a network's dnsmasq files and command line, as
 * Neutron's dnsmasq driver writes them (hosts file, addn_hosts, options
 * file with subnet tags "subnet-<id>", static ranges). Pure: no I/O. */
#include "common/json.h"
#include "common/sbuf.h"
#include "network/agent/dhcp.h"

#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define METADATA_CIDR "169.254.169.254/32"

static void addf(struct nb_sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void addf(struct nb_sbuf *b, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof(buf)) {
        char *big = malloc((size_t)n + 1);
        va_start(ap, fmt);
        vsnprintf(big, (size_t)n + 1, fmt, ap);
        va_end(ap);
        nb_sbuf_str(b, big);
        free(big);
    } else if (n > 0) {
        nb_sbuf_add(b, buf, (size_t)n);
    }
}

static char *done(struct nb_sbuf *b)
{
    if (!b->s)
        nb_sbuf_str(b, "");
    return b->s;
}

static const char *str_or(const json_t *o, const char *key, const char *def)
{
    const char *s = nb_json_str(o, key);
    return s ? s : def;
}

/* The subnet of net with id, or NULL. */
static const json_t *subnet_of(const json_t *net, const char *id)
{
    size_t i;
    json_t *s;
    json_array_foreach (json_object_get(net, "subnets"), i, s)
        if (id && !strcmp(str_or(s, "id", ""), id))
            return s;
    return NULL;
}

static bool is_v6(const json_t *subnet)
{
    return nb_json_int(subnet, "ip_version", 4) == 6;
}

static bool dhcp_on(const json_t *subnet)
{
    return json_is_true(json_object_get(subnet, "enable_dhcp"));
}

/* Whether the address mode is one where the guest takes no address by
 * DHCP (SLAAC, DHCPv6-stateless). */
static bool no_dhcp_address(const json_t *subnet)
{
    const char *m = nb_json_str(subnet, "ipv6_address_mode");
    return is_v6(subnet) && m && (!strcmp(m, "slaac") || !strcmp(m, "dhcpv6-stateless"));
}

/* Each fixed IP of the network's ports that needs a host entry: calls fn
 * with the host, its subnet and the fqdn. */
typedef void (*host_fn)(struct nb_sbuf *b, const json_t *host, const json_t *subnet,
                        const char *name, const char *fqdn);

static void each_host(struct nb_sbuf *b, const json_t *net, const struct na_dhcp_conf *conf,
                      host_fn fn)
{
    size_t i;
    json_t *h;
    json_array_foreach (json_object_get(net, "dhcp_hosts"), i, h) {
        const json_t *subnet = subnet_of(net, nb_json_str(h, "subnet_id"));
        const char *ip = nb_json_str(h, "ip_address"), *mac = nb_json_str(h, "mac");
        if (!subnet || !ip || !mac)
            continue;
        char name[128], fqdn[300];
        const char *hn = nb_json_str(h, "hostname");
        if (hn && *hn) {
            snprintf(name, sizeof(name), "%s", hn);
        } else {
            snprintf(name, sizeof(name), "host-%s", ip);
            for (char *p = name; *p; p++)
                if (*p == '.' || *p == ':')
                    *p = '-';
        }
        if (conf->domain && *conf->domain)
            snprintf(fqdn, sizeof(fqdn), "%s.%s", name, conf->domain);
        else
            snprintf(fqdn, sizeof(fqdn), "%s", name);
        fn(b, h, subnet, name, fqdn);
    }
}

static void host_line(struct nb_sbuf *b, const json_t *h, const json_t *subnet, const char *name,
                      const char *fqdn)
{
    (void)name;
    if (!dhcp_on(subnet) || no_dhcp_address(subnet))
        return;
    const char *ip = nb_json_str(h, "ip_address"), *mac = nb_json_str(h, "mac");
    if (is_v6(subnet))
        addf(b, "%s,tag:dhcpv6,%s,[%s]\n", mac, fqdn, ip);
    else
        addf(b, "%s,%s,%s\n", mac, fqdn, ip);
}

char *na_dhcp_hostsfile(const json_t *net, const struct na_dhcp_conf *conf)
{
    struct nb_sbuf b = {0};
    each_host(&b, net, conf, host_line);
    return done(&b);
}

static void addn_line(struct nb_sbuf *b, const json_t *h, const json_t *subnet, const char *name,
                      const char *fqdn)
{
    (void)subnet;
    addf(b, "%s\t%s %s\n", nb_json_str(h, "ip_address"), fqdn, name);
}

char *na_dhcp_addn_hosts(const json_t *net, const struct na_dhcp_conf *conf)
{
    struct nb_sbuf b = {0};
    each_host(&b, net, conf, addn_line);
    return done(&b);
}

/* The DHCP port's address on subnet, or NULL. */
static const char *dhcp_ip_on(const json_t *net, const char *subnet_id)
{
    size_t i;
    json_t *ip;
    json_array_foreach (json_object_get(json_object_get(net, "dhcp"), "fixed_ips"), i, ip)
        if (!strcmp(str_or(ip, "subnet_id", ""), subnet_id))
            return nb_json_str(ip, "ip_address");
    return NULL;
}

/* Neutron's get_isolated_subnets: a subnet is not isolated when a router
 * leg holds its gateway address. */
static bool isolated(const json_t *subnet, const json_t *routers)
{
    const char *gw = nb_json_str(subnet, "gateway_ip"), *id = str_or(subnet, "id", "");
    if (!gw)
        return true;
    size_t i, k, m;
    json_t *r, *leg, *ip;
    json_array_foreach (routers, i, r)
        json_array_foreach (json_object_get(r, "interfaces"), k, leg)
            json_array_foreach (json_object_get(leg, "fixed_ips"), m, ip)
                if (!strcmp(str_or(ip, "subnet_id", ""), id) &&
                    !strcmp(str_or(ip, "ip_address", ""), gw))
                    return false;
    return true;
}

/* The nexthop of the metadata route for subnet: the DHCP port (isolated
 * metadata, or forced), the gateway (a router answers), or NULL. */
static const char *metadata_hop(const json_t *net, const json_t *subnet, const json_t *routers,
                                const struct na_dhcp_conf *conf, const char *gateway)
{
    bool iso = isolated(subnet, routers);
    if (conf->force_metadata || (iso && conf->isolated_metadata))
        return dhcp_ip_on(net, str_or(subnet, "id", ""));
    if (!iso && gateway)
        return gateway;
    return NULL;
}

bool na_dhcp_serves_metadata(const json_t *net, const json_t *routers,
                             const struct na_dhcp_conf *conf)
{
    size_t i;
    json_t *s;
    json_array_foreach (json_object_get(net, "subnets"), i, s) {
        if (is_v6(s) || !dhcp_on(s))
            continue;
        const char *hop = metadata_hop(net, s, routers, conf, nb_json_str(s, "gateway_ip"));
        const char *mine = dhcp_ip_on(net, str_or(s, "id", ""));
        if (hop && mine && !strcmp(hop, mine))
            return true;
    }
    return false;
}

/* "tag:subnet-<id>,option:<name>" (option6: for IPv6; a number as is). */
static void opt_head(struct nb_sbuf *b, const json_t *subnet, const char *option)
{
    bool digits = strspn(option, "0123456789") == strlen(option);
    addf(b, "tag:subnet-%s,%s%s", str_or(subnet, "id", ""),
         is_v6(subnet) ? "option6:"
         : digits      ? ""
                       : "option:",
         option);
}

static void dns_servers(struct nb_sbuf *b, const json_t *subnet)
{
    const json_t *dns = json_object_get(subnet, "dns_nameservers");
    if (!json_array_size(dns))
        return;
    opt_head(b, subnet, "dns-server");
    size_t i;
    json_t *d;
    bool any = true;
    json_array_foreach (dns, i, d) {
        const char *a = json_string_value(d);
        if (a && strcmp(a, "0.0.0.0") && strcmp(a, "::"))
            any = false;
    }
    if (!any)
        json_array_foreach (dns, i, d)
            addf(b, is_v6(subnet) ? ",[%s]" : ",%s", json_string_value(d));
    nb_sbuf_str(b, "\n");
}

/* The IPv4 options of subnet: classless routes (121 and 249) and router. */
static void v4_routes(struct nb_sbuf *b, const json_t *net, const json_t *subnet,
                      const json_t *routers, const struct na_dhcp_conf *conf)
{
    const char *gw = nb_json_str(subnet, "gateway_ip");
    struct nb_sbuf r = {0};
    size_t i;
    json_t *x;
    /* the network's other IPv4 subnets are on link */
    json_array_foreach (json_object_get(net, "subnets"), i, x)
        if (!is_v6(x) && strcmp(str_or(x, "cidr", ""), str_or(subnet, "cidr", "")))
            addf(&r, "%s%s,0.0.0.0", r.len ? "," : "", str_or(x, "cidr", ""));
    json_array_foreach (json_object_get(subnet, "host_routes"), i, x) {
        const char *dst = str_or(x, "destination", ""), *hop = nb_json_str(x, "nexthop");
        if (!strcmp(dst, "0.0.0.0/0")) {
            if (!gw)
                gw = hop;
        } else if (hop) {
            addf(&r, "%s%s,%s", r.len ? "," : "", dst, hop);
        }
    }
    const char *md = metadata_hop(net, subnet, routers, conf, gw);
    if (md)
        addf(&r, "%s" METADATA_CIDR ",%s", r.len ? "," : "", md);
    if (r.len) {
        /* RFC 3442: with option 121 the client ignores option 3 */
        if (gw)
            addf(&r, ",0.0.0.0/0,%s", gw);
        opt_head(b, subnet, "classless-static-route");
        addf(b, ",%s\n", r.s);
        opt_head(b, subnet, "249");
        addf(b, ",%s\n", r.s);
    }
    free(r.s);
    opt_head(b, subnet, "router");
    if (gw)
        addf(b, ",%s", gw);
    nb_sbuf_str(b, "\n");
}

char *na_dhcp_optsfile(const json_t *net, const json_t *routers, const struct na_dhcp_conf *conf)
{
    struct nb_sbuf b = {0};
    size_t i;
    json_t *s;
    json_array_foreach (json_object_get(net, "subnets"), i, s) {
        const char *mode = nb_json_str(s, "ipv6_address_mode");
        if (!dhcp_on(s) || (is_v6(s) && mode && !strcmp(mode, "slaac")))
            continue;
        dns_servers(&b, s);
        if (is_v6(s) && conf->domain && *conf->domain) {
            opt_head(&b, s, "domain-search");
            addf(&b, ",%s\n", conf->domain);
        }
        if (!is_v6(s))
            v4_routes(&b, net, s, routers, conf);
    }
    return done(&b);
}

/* The network address and netmask (IPv4) or prefix length (IPv6) of cidr.
 * 0/-1. */
static int split_cidr(const char *cidr, char *addr, size_t n, char *mask, size_t mn, int *plen,
                      bool *v6)
{
    char buf[64];
    snprintf(buf, sizeof(buf), "%s", cidr ? cidr : "");
    char *slash = strchr(buf, '/');
    if (!slash)
        return -1;
    *slash = '\0';
    *plen = atoi(slash + 1);
    unsigned char a[16];
    *v6 = strchr(buf, ':') != NULL;
    if (inet_pton(*v6 ? AF_INET6 : AF_INET, buf, a) != 1 || *plen < 0 || *plen > (*v6 ? 128 : 32))
        return -1;
    int bytes = *v6 ? 16 : 4;
    unsigned char m[16] = {0};
    for (int i = 0; i < bytes; i++) {
        int bits = *plen - i * 8;
        m[i] = bits >= 8 ? 0xff : bits <= 0 ? 0 : (unsigned char)(0xff << (8 - bits));
        a[i] &= m[i];
    }
    inet_ntop(*v6 ? AF_INET6 : AF_INET, a, addr, (socklen_t)n);
    inet_ntop(AF_INET, m, mask, (socklen_t)mn);
    return 0;
}

static void push(json_t *argv, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void push(json_t *argv, const char *fmt, ...)
{
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    json_array_append_new(argv, json_string(buf));
}

json_t *na_dhcp_argv(const json_t *net, const char *dir, const struct na_dhcp_conf *conf)
{
    json_t *argv = json_array();
    push(argv, "dnsmasq");
    push(argv, "--no-hosts");
    push(argv, "--no-resolv");
    push(argv, "--pid-file=%s/pid", dir);
    push(argv, "--dhcp-hostsfile=%s/host", dir);
    push(argv, "--addn-hosts=%s/addn_hosts", dir);
    push(argv, "--dhcp-optsfile=%s/opts", dir);
    push(argv, "--dhcp-leasefile=%s/leases", dir);
    push(argv, "--dhcp-match=set:ipxe,175");
    push(argv, "--dhcp-userclass=set:ipxe6,iPXE");
    push(argv, "--local-service");
    push(argv, "--bind-dynamic");
    char lease[32];
    if (conf->lease_seconds < 0)
        snprintf(lease, sizeof(lease), "infinite");
    else
        snprintf(lease, sizeof(lease), "%lds", conf->lease_seconds);
    double possible = 0;
    size_t i;
    json_t *s;
    json_array_foreach (json_object_get(net, "subnets"), i, s) {
        if (!dhcp_on(s))
            continue;
        char addr[64], mask[32];
        int plen;
        bool v6;
        if (split_cidr(nb_json_str(s, "cidr"), addr, sizeof(addr), mask, sizeof(mask), &plen, &v6) <
            0)
            continue;
        const char *am = nb_json_str(s, "ipv6_address_mode"), *ra = nb_json_str(s, "ipv6_ra_mode");
        if (!v6) {
            push(argv, "--dhcp-range=set:subnet-%s,%s,static,%s,%s", str_or(s, "id", ""), addr,
                 mask, lease);
        } else if ((am && (!strcmp(am, "dhcpv6-stateful") || !strcmp(am, "dhcpv6-stateless"))) ||
                   (!am && !ra)) {
            if (plen < 64)
                continue; /* as Neutron: ignored */
            push(argv, "--dhcp-range=set:subnet-%s,%s,static,%d,%s", str_or(s, "id", ""), addr,
                 plen, lease);
        } else {
            continue; /* SLAAC: no range */
        }
        int host_bits = (v6 ? 128 : 32) - plen;
        possible += host_bits >= 30 ? (double)(1 << 30) : (double)(1L << host_bits);
    }
    long long mtu = nb_json_int(net, "mtu", 0);
    if (mtu > 0)
        push(argv, "--dhcp-option-force=option:mtu,%lld", mtu);
    long long max = 1LL << 24; /* dnsmasq_lease_max */
    push(argv, "--dhcp-lease-max=%lld", possible < (double)max ? (long long)possible : max);
    push(argv, "--conf-file=/dev/null");
    if (conf->domain && *conf->domain)
        push(argv, "--domain=%s", conf->domain);
    push(argv, "--log-dhcp");
    push(argv, "--log-facility=%s/dnsmasq.log", dir);
    push(argv, "--user=root");
    push(argv, "--group=root");
    return argv;
}
