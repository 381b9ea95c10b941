/* dhcp_leases.c - dhcp.h: a network's dnsmasq leases file without the
 * leases its hosts file no longer allows, as Neutron's DHCP agent releases
 * them (dhcp_release, dhcp_release6) when a port goes or its address
 * changes: dnsmasq would otherwise refuse the address to its new owner
 * (another MAC, another DUID) until the lease ran out. dnsmasq's file has
 * "expiry mac ip host client-id" per IPv4 lease, one "duid <server duid>"
 * line, then "expiry [T]iaid ip6 host client-duid" per IPv6 lease. Pure:
 * no I/O. */
#include "common/sbuf.h"
#include "network/agent/dhcp.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Whether a and b are the same address (IPv6 in any spelling). */
static bool same_addr(const char *a, const char *b)
{
    unsigned char x[16], y[16];
    if (strchr(a, ':') && strchr(b, ':') && inet_pton(AF_INET6, a, x) == 1 &&
        inet_pton(AF_INET6, b, y) == 1)
        return !memcmp(x, y, sizeof(x));
    return !strcmp(a, b);
}

#define FIELD 64 /* a MAC or an address, NUL included */

/* Copies the n bytes of s into out (FIELD bytes). false when too long. */
static bool field(char *out, const char *s, size_t n)
{
    if (n >= FIELD)
        return false;
    memcpy(out, s, n);
    out[n] = '\0';
    return true;
}

/* The MAC (first field) and address (last field, "[v6]" unwrapped) of the
 * hosts file line of n bytes. false when it has no such fields. */
static bool host_fields(const char *line, size_t n, char *mac, char *ip)
{
    const char *first = memchr(line, ',', n), *last = first;
    if (!first)
        return false;
    for (const char *p = first; p < line + n; p++)
        if (*p == ',')
            last = p;
    const char *a = last + 1, *end = line + n;
    if (a < end && *a == '[') {
        a++;
        const char *close = memchr(a, ']', (size_t)(end - a));
        end = close ? close : end;
    }
    return field(mac, line, (size_t)(first - line)) && field(ip, a, (size_t)(end - a));
}

/* Calls fn(mac, ip, arg) for each line of the hosts file text until it
 * returns true; returns whether one did. */
static bool each_host(const char *hosts, bool (*fn)(const char *, const char *, const void *),
                      const void *arg)
{
    for (const char *line = hosts; line && *line;
         line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        char mac[FIELD], ip[FIELD];
        if (host_fields(line, strcspn(line, "\n"), mac, ip) && fn(mac, ip, arg))
            return true;
    }
    return false;
}

struct pair {
    const char *mac, *ip;
};

static bool is_pair(const char *mac, const char *ip, const void *arg)
{
    const struct pair *p = arg;
    return (!p->mac || !strcasecmp(mac, p->mac)) && same_addr(ip, p->ip);
}

/* Whether the hosts file has (mac, ip); any MAC when mac is NULL. */
static bool hosts_have(const char *hosts, const char *mac, const char *ip)
{
    struct pair p = {mac, ip};
    return each_host(hosts, is_pair, &p);
}

struct moved {
    const char *hosts, *ip;
};

static bool is_moved(const char *mac, const char *ip, const void *arg)
{
    const struct moved *m = arg;
    return same_addr(ip, m->ip) && !hosts_have(m->hosts, mac, ip);
}

/* Whether an IPv6 lease of ip is stale: the address has no line, or a MAC
 * that old_hosts gave it has none (its port went; the lease, keyed by
 * IAID and DUID, cannot say whose MAC it is). */
static bool v6_stale(const char *old_hosts, const char *hosts, const char *ip)
{
    struct moved m = {hosts, ip};
    return !hosts_have(hosts, NULL, ip) || each_host(old_hosts, is_moved, &m);
}

char *na_dhcp_prune_leases(const char *leases, const char *old_hosts, const char *hosts,
                           int *dropped)
{
    struct nb_sbuf keep = {0};
    *dropped = 0;
    for (const char *line = leases; line && *line;
         line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        size_t n = strcspn(line, "\n");
        char buf[1024], exp[32], id[64], ip[64];
        snprintf(buf, sizeof(buf), "%.*s", (int)(n < sizeof(buf) ? n : sizeof(buf) - 1), line);
        if (n < sizeof(buf) && sscanf(buf, "%31s %63s %63s", exp, id, ip) == 3 &&
            strcmp(exp, "duid") &&
            (strchr(ip, ':') ? v6_stale(old_hosts, hosts, ip) : !hosts_have(hosts, id, ip))) {
            ++*dropped;
            continue;
        }
        if (n) {
            nb_sbuf_add(&keep, line, n);
            nb_sbuf_str(&keep, "\n");
        }
    }
    if (!keep.s)
        nb_sbuf_str(&keep, "");
    return keep.s;
}
