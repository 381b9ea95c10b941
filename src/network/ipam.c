/* ipam.c - IP address management math: addresses, CIDRs, allocation pools.
 *
 * Addresses are 16-byte big-endian numbers (v4 uses the first 4 bytes), so
 * one set of functions serves both families. The rules are Neutron's
 * (neutron/ipam/utils.py generate_pools, ipam_backend_mixin's pool and
 * gateway checks): a v4 subnet's pools exclude the network and broadcast
 * addresses, a v6 subnet's the subnet-router anycast (first) address, and
 * neither may hold the gateway. Which address a port gets is decided here
 * (first free in pool order), or, on an IPv6 subnet whose addresses are
 * automatic (SLAAC, DHCPv6-stateless), computed from the port's MAC
 * (EUI-64, as neutron_lib's get_ipv6_addr_by_EUI64); that no two ports get
 * it is the database's unique index (ports.c). Nothing here touches the
 * database. */
#include "common/cleanup.h"
#include "common/json.h"
#include "common/pyrepr.h"
#include "common/util.h"
#include "network/network_int.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int ip_len(const struct nb_ip *ip)
{
    return ip->version == 4 ? 4 : 16;
}

int nb_ip_parse(const char *s, struct nb_ip *ip)
{
    memset(ip, 0, sizeof(*ip));
    if (!s)
        return -1;
    if (strchr(s, ':')) {
        ip->version = 6;
        return inet_pton(AF_INET6, s, ip->bytes) == 1 ? 0 : -1;
    }
    ip->version = 4;
    /* inet_pton rejects leading zeros and short forms, as netaddr does by default */
    return inet_pton(AF_INET, s, ip->bytes) == 1 ? 0 : -1;
}

char *nb_ip_format(const struct nb_ip *ip, char *out)
{
    if (!inet_ntop(ip->version == 4 ? AF_INET : AF_INET6, ip->bytes, out, 64))
        out[0] = '\0';
    return out;
}

/* Sets bits after prefix to 0 (net) or 1 (last) in ip. */
static void fill_host_bits(struct nb_ip *ip, int prefix, int bit)
{
    int bits = ip_len(ip) * 8;
    for (int b = prefix; b < bits; b++) {
        unsigned char mask = (unsigned char)(0x80 >> (b % 8));
        if (bit)
            ip->bytes[b / 8] |= mask;
        else
            ip->bytes[b / 8] &= (unsigned char)~mask;
    }
}

int nb_cidr_parse(const char *s, struct nb_ip *net, int *prefix, bool strict)
{
    if (!s)
        return -1;
    const char *slash = strchr(s, '/');
    if (!slash || slash == s || strlen(s) > 63)
        return -1;
    char addr[64];
    memcpy(addr, s, (size_t)(slash - s));
    addr[slash - s] = '\0';
    if (nb_ip_parse(addr, net) < 0)
        return -1;
    const char *p = slash + 1;
    if (!*p || strspn(p, "0123456789") != strlen(p) || strlen(p) > 3)
        return -1;
    int len = atoi(p);
    if (len > ip_len(net) * 8)
        return -1;
    struct nb_ip masked = *net;
    fill_host_bits(&masked, len, 0);
    if (strict && nb_ip_cmp(&masked, net) != 0)
        return -1;
    *net = masked;
    *prefix = len;
    return 0;
}

int nb_ip_cmp(const struct nb_ip *a, const struct nb_ip *b)
{
    if (a->version != b->version)
        return a->version < b->version ? -1 : 1;
    int c = memcmp(a->bytes, b->bytes, (size_t)ip_len(a));
    return c < 0 ? -1 : c > 0;
}

void nb_ip_add(struct nb_ip *a, long long n)
{
    int len = ip_len(a);
    if (n >= 0) {
        unsigned long long carry = (unsigned long long)n;
        for (int i = len - 1; i >= 0 && carry; i--) {
            unsigned long long v = a->bytes[i] + (carry & 0xff);
            carry >>= 8;
            a->bytes[i] = (unsigned char)v;
            carry += v >> 8;
        }
    } else {
        unsigned long long borrow = (unsigned long long)(-n);
        for (int i = len - 1; i >= 0 && borrow; i--) {
            long long v = (long long)a->bytes[i] - (long long)(borrow & 0xff);
            borrow >>= 8;
            if (v < 0) {
                v += 256;
                borrow += 1;
            }
            a->bytes[i] = (unsigned char)v;
        }
    }
}

bool nb_ip_in_cidr(const struct nb_ip *ip, const struct nb_ip *net, int prefix)
{
    if (ip->version != net->version)
        return false;
    struct nb_ip m = *ip;
    fill_host_bits(&m, prefix, 0);
    return nb_ip_cmp(&m, net) == 0;
}

void nb_cidr_bounds(const struct nb_ip *net, int prefix, struct nb_ip *first, struct nb_ip *last)
{
    *first = *net;
    fill_host_bits(first, prefix, 0);
    *last = *net;
    fill_host_bits(last, prefix, 1);
}

static json_t *pool_json(const struct nb_ip *a, const struct nb_ip *b)
{
    char sa[64], sb[64];
    return json_pack("{s:s, s:s}", "start", nb_ip_format(a, sa), "end", nb_ip_format(b, sb));
}

json_t *nb_ipam_default_pools(const char *cidr, const char *gateway)
{
    struct nb_ip net, first, last, gw;
    int prefix;
    if (nb_cidr_parse(cidr, &net, &prefix, false) < 0)
        return NULL;
    nb_cidr_bounds(&net, prefix, &first, &last);
    json_t *pools = json_array();
    if (nb_ip_cmp(&first, &last) == 0) {
        json_array_append_new(pools, pool_json(&first, &last));
        return pools;
    }
    nb_ip_add(&first, 1);
    if (net.version == 4)
        nb_ip_add(&last, -1);
    if (nb_ip_cmp(&first, &last) >= 0)
        return pools;
    bool has_gw = gateway && nb_ip_parse(gateway, &gw) == 0 && gw.version == net.version &&
                  nb_ip_cmp(&gw, &first) >= 0 && nb_ip_cmp(&gw, &last) <= 0;
    if (!has_gw) {
        json_array_append_new(pools, pool_json(&first, &last));
        return pools;
    }
    if (nb_ip_cmp(&gw, &first) > 0) {
        struct nb_ip before = gw;
        nb_ip_add(&before, -1);
        json_array_append_new(pools, pool_json(&first, &before));
    }
    if (nb_ip_cmp(&gw, &last) < 0) {
        struct nb_ip after = gw;
        nb_ip_add(&after, 1);
        json_array_append_new(pools, pool_json(&after, &last));
    }
    return pools;
}

/* "start-end" as netaddr prints an IPRange. */
static void range_text(const json_t *pool, char *out, size_t n)
{
    snprintf(out, n, "%s-%s", nb_json_str(pool, "start"), nb_json_str(pool, "end"));
}

/* Parses one pool; -1 after nb_error (InvalidAllocationPool). */
static int parse_pool(struct nb_ctx *ctx, const json_t *pool, int version, struct nb_ip *a,
                      struct nb_ip *b)
{
    const char *s = nb_json_str(pool, "start"), *e = nb_json_str(pool, "end");
    if (!json_is_object(pool) || !s || !e || nb_ip_parse(s, a) < 0 || nb_ip_parse(e, b) < 0 ||
        nb_ip_cmp(a, b) > 0 || a->version != version || b->version != version) {
        _cleanup_free_ char *r = nb_pyrepr(pool);
        return nb_error(ctx, 400, "InvalidAllocationPool", "The allocation pool %s is not valid.",
                        r);
    }
    return 0;
}

int nb_ipam_check_pools(struct nb_ctx *ctx, const char *cidr, const char *gateway,
                        const json_t *pools)
{
    struct nb_ip net, lo, hi;
    int prefix;
    if (nb_cidr_parse(cidr, &net, &prefix, false) < 0)
        return nb_error(ctx, 400, "InvalidInput",
                        "Invalid input for operation: '%s' is not a "
                        "valid IP subnet.",
                        cidr);
    nb_cidr_bounds(&net, prefix, &lo, &hi);
    if (net.version == 6 || prefix <= 30)
        nb_ip_add(&lo, 1);
    if (net.version == 4 && prefix <= 30)
        nb_ip_add(&hi, -1);
    size_t n = json_array_size(pools);
    struct nb_ip *starts = calloc(n ? n : 1, sizeof(*starts)),
                 *ends = calloc(n ? n : 1, sizeof(*ends));
    int rc = 0;
    char r1[160], r2[160];
    for (size_t i = 0; i < n && rc == 0; i++) {
        const json_t *p = json_array_get(pools, i);
        if ((rc = parse_pool(ctx, p, net.version, &starts[i], &ends[i])) < 0)
            break;
        if (nb_ip_cmp(&starts[i], &lo) < 0 || nb_ip_cmp(&ends[i], &hi) > 0) {
            range_text(p, r1, sizeof(r1));
            rc = nb_error(ctx, 400, "OutOfBoundsAllocationPool",
                          "The allocation pool %s spans beyond the subnet cidr %s.", r1, cidr);
        }
    }
    for (size_t i = 0; i < n && rc == 0; i++)
        for (size_t j = i + 1; j < n && rc == 0; j++)
            if (nb_ip_cmp(&starts[i], &ends[j]) <= 0 && nb_ip_cmp(&starts[j], &ends[i]) <= 0) {
                range_text(json_array_get(pools, i), r1, sizeof(r1));
                range_text(json_array_get(pools, j), r2, sizeof(r2));
                rc = nb_error(ctx, 409, "OverlappingAllocationPools",
                              "Found overlapping allocation pools: %s %s for subnet %s.", r1, r2,
                              cidr);
            }
    struct nb_ip gw;
    if (rc == 0 && gateway && nb_ip_parse(gateway, &gw) == 0)
        for (size_t i = 0; i < n && rc == 0; i++)
            if (nb_ip_cmp(&gw, &starts[i]) >= 0 && nb_ip_cmp(&gw, &ends[i]) <= 0) {
                range_text(json_array_get(pools, i), r1, sizeof(r1));
                rc = nb_error(ctx, 409, "GatewayConflictWithAllocationPools",
                              "Gateway ip %s conflicts with allocation pool %s.", gateway, r1);
            }
    free(starts);
    free(ends);
    return rc;
}

static bool in_used(const json_t *used, const char *addr)
{
    size_t i;
    json_t *u;
    json_array_foreach (used, i, u)
        if (json_is_string(u) && !strcmp(json_string_value(u), addr))
            return true;
    return false;
}

int nb_ipam_first_free(const json_t *pools, const json_t *used, char *out)
{
    size_t i;
    json_t *p;
    json_array_foreach (pools, i, p) {
        struct nb_ip a, b;
        if (nb_ip_parse(nb_json_str(p, "start"), &a) < 0 ||
            nb_ip_parse(nb_json_str(p, "end"), &b) < 0)
            continue;
        /* used holds at most as many entries as the pools have addresses
         * taken, so this walk ends after at most |used|+1 steps per pool */
        for (size_t steps = 0; nb_ip_cmp(&a, &b) <= 0 && steps <= json_array_size(used); steps++) {
            nb_ip_format(&a, out);
            if (!in_used(used, out))
                return 0;
            struct nb_ip prev = a;
            nb_ip_add(&a, 1);
            if (nb_ip_cmp(&a, &prev) <= 0)
                break; /* wrapped at the end of the family */
        }
    }
    return -1;
}

bool nb_ipam_in_pools(const json_t *pools, const char *addr)
{
    struct nb_ip x;
    if (nb_ip_parse(addr, &x) < 0)
        return false;
    size_t i;
    json_t *p;
    json_array_foreach (pools, i, p) {
        struct nb_ip a, b;
        if (nb_ip_parse(nb_json_str(p, "start"), &a) == 0 &&
            nb_ip_parse(nb_json_str(p, "end"), &b) == 0 && nb_ip_cmp(&x, &a) >= 0 &&
            nb_ip_cmp(&x, &b) <= 0)
            return true;
    }
    return false;
}

bool nb_ipam_auto_address(const char *ra_mode, const char *address_mode)
{
    const char *m[2] = {ra_mode, address_mode};
    for (int i = 0; i < 2; i++)
        if (m[i] && (!strcmp(m[i], "slaac") || !strcmp(m[i], "dhcpv6-stateless")))
            return true;
    return false;
}

int nb_ipam_eui64(const char *cidr, const char *mac, char *out)
{
    struct nb_ip net;
    int prefix;
    unsigned int b[6];
    char tail;
    if (nb_cidr_parse(cidr, &net, &prefix, false) < 0 || net.version != 6 || !mac ||
        sscanf(mac, "%2x%*1[:-]%2x%*1[:-]%2x%*1[:-]%2x%*1[:-]%2x%*1[:-]%2x%c", &b[0], &b[1], &b[2],
               &b[3], &b[4], &b[5], &tail) != 6 ||
        strlen(mac) != 17)
        return -1;
    /* netaddr's int(EUI(mac).eui64()) added to the prefix's first address,
     * then the universal/local bit (1 << 57) flipped: on a /64 the
     * interface id replaces the host half, with the U/L bit inverted */
    unsigned char id[8] = {
        (unsigned char)b[0], (unsigned char)b[1], (unsigned char)b[2], 0xff, 0xfe,
        (unsigned char)b[3], (unsigned char)b[4], (unsigned char)b[5]};
    unsigned int carry = 0;
    for (int i = 7; i >= 0; i--) {
        unsigned int v = net.bytes[8 + i] + id[i] + carry;
        net.bytes[8 + i] = (unsigned char)v;
        carry = v >> 8;
    }
    for (int i = 7; i >= 0 && carry; i--) {
        unsigned int v = net.bytes[i] + carry;
        net.bytes[i] = (unsigned char)v;
        carry = v >> 8;
    }
    net.bytes[8] ^= 0x02;
    nb_ip_format(&net, out);
    return 0;
}
