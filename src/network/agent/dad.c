/* dad.c - duplicate address detection of the compute ports' IPv4 fixed
 * addresses (dad.h), RFC 5227's ARP probe without its delays: when a
 * port's tap shows up on its bridge (first seen by this agent run, or a new
 * tap: its ifindex changed), one probe per address is broadcast on the
 * bridge from the bridge's MAC, a second one half-way through [agent]
 * duplicate_address_probe_timeout (a lost frame), and every ARP frame the
 * bridge receives meanwhile is read from an AF_PACKET socket bound to it.
 * All the ports of one scan are probed together: the scan waits one
 * timeout, whatever their number. A Linux host answers a probe for one of
 * its addresses with a reply to the sender's MAC, which the bridge
 * delivers to itself; over VXLAN the probe reaches the other hosts too.
 *
 * The result is kept per port (struct na's probed: port id -> {"ifindex",
 * "reason"}) for as long as the port is in the host's state, so a failed
 * port stays failed across reconciles and while its tap is gone; a new tap
 * (the next boot on that port) is probed again. */
#include "network/agent/dad.h"

#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "network/agent/agent_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/if_ether.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#define LOG_DAD "nubo.network.agent.dad"
#define ETH_HDR 14
#define ARP_LEN 28
#define VLAN_TPID 0x8100

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static uint16_t get16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

size_t na_dad_probe_frame(uint8_t *buf, const uint8_t src_mac[6], struct in_addr ip)
{
    memset(buf, 0, NA_DAD_FRAME_LEN);
    memset(buf, 0xff, 6); /* broadcast */
    memcpy(buf + 6, src_mac, 6);
    put16(buf + 12, ETHERTYPE_ARP);
    uint8_t *arp = buf + ETH_HDR;
    put16(arp, ARPHRD_ETHER);
    put16(arp + 2, ETHERTYPE_IP);
    arp[4] = 6;
    arp[5] = 4;
    put16(arp + 6, ARPOP_REQUEST);
    memcpy(arp + 8, src_mac, 6);
    /* sender IP 0.0.0.0 (arp + 14) and target MAC zero (arp + 18): RFC 5227 */
    memcpy(arp + 24, &ip.s_addr, 4);
    return NA_DAD_FRAME_LEN;
}

enum na_dad_answer na_dad_classify(const uint8_t *frame, size_t len, struct in_addr ip,
                                   const uint8_t (*own)[6], size_t n_own, uint8_t mac[6])
{
    if (len < ETH_HDR + ARP_LEN)
        return NA_DAD_NONE;
    size_t off = 12;
    if (get16(frame + off) == VLAN_TPID)
        off += 4;
    if (get16(frame + off) != ETHERTYPE_ARP || len < off + 2 + ARP_LEN)
        return NA_DAD_NONE;
    const uint8_t *arp = frame + off + 2;
    if (get16(arp) != ARPHRD_ETHER || get16(arp + 2) != ETHERTYPE_IP || arp[4] != 6 || arp[5] != 4)
        return NA_DAD_NONE;
    uint16_t op = get16(arp + 6);
    const uint8_t *sha = arp + 8, *spa = arp + 14, *tpa = arp + 24;
    for (size_t i = 0; i < n_own; i++)
        if (!memcmp(sha, own[i], 6))
            return NA_DAD_NONE;
    static const uint8_t zero[4];
    enum na_dad_answer kind = NA_DAD_NONE;
    if (!memcmp(spa, &ip.s_addr, 4))
        kind = op == ARPOP_REPLY     ? NA_DAD_REPLY
               : op == ARPOP_REQUEST ? NA_DAD_REQUEST
                                     : NA_DAD_NONE;
    else if (op == ARPOP_REQUEST && !memcmp(spa, zero, 4) && !memcmp(tpa, &ip.s_addr, 4))
        kind = NA_DAD_PROBE;
    if (kind != NA_DAD_NONE)
        memcpy(mac, sha, 6);
    return kind;
}

int na_dad_mac_parse(const char *text, uint8_t mac[6])
{
    unsigned v[6];
    char end;
    if (!text ||
        sscanf(text, "%2x:%2x:%2x:%2x:%2x:%2x%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &end) !=
            6 ||
        strlen(text) != 17)
        return -1;
    for (int i = 0; i < 6; i++)
        mac[i] = (uint8_t)v[i];
    return 0;
}

void na_dad_reason(char *buf, size_t n, const char *ip, const char *network_id,
                   const uint8_t mac[6], enum na_dad_answer kind)
{
    const char *how = kind == NA_DAD_REPLY     ? "ARP reply to a duplicate-address probe"
                      : kind == NA_DAD_REQUEST ? "ARP request sent from that address"
                                               : "another host's duplicate-address probe for it";
    snprintf(buf, n,
             "IP address %s is already in use on network %s by MAC "
             "%02x:%02x:%02x:%02x:%02x:%02x (%s)",
             ip, network_id, mac[0], mac[1], mac[2], mac[3], mac[4], mac[5], how);
}

json_t *na_dad_plan(const json_t *state, const json_t *ports)
{
    json_t *plan = json_array();
    size_t i, k;
    json_t *p, *f;
    json_array_foreach (json_object_get(state, "ports"), i, p) {
        const char *id = nb_json_str(p, "id"), *mac = nb_json_str(p, "mac");
        uint8_t m[6];
        if (!id || !json_object_get(ports, id) || na_dad_mac_parse(mac, m) < 0)
            continue;
        const json_t *net = na_state_network(state, nb_json_str(p, "network_id"));
        const char *br = nb_json_str(net, "bridge");
        if (!br)
            continue;
        json_array_foreach (json_object_get(p, "fixed_ips"), k, f) {
            const char *ip = nb_json_str(f, "ip_address");
            struct in_addr a;
            if (!ip || inet_pton(AF_INET, ip, &a) != 1)
                continue; /* IPv6: no ARP */
            json_array_append_new(plan, json_pack("{s:s, s:s, s:s, s:s, s:s}", "port_id", id,
                                                  "network_id", nb_json_str(net, "id"), "bridge",
                                                  br, "ip", ip, "mac", mac));
        }
    }
    return plan;
}

/* One probe of a batch, and what answered it. */
struct target {
    const json_t *row; /* of the plan */
    struct in_addr ip;
    uint8_t own[2][6]; /* the port's MAC, the bridge's */
    int sock;          /* index into the sockets */
    enum na_dad_answer hit;
    uint8_t mac[6];
};

struct sock {
    char bridge[IFNAMSIZ];
    int fd, ifindex;
    uint8_t mac[6];
};

/* Opens an ARP socket bound to bridge, its MAC into s. 0, or -1 after
 * nb_error. */
static int sock_open(struct nb_ctx *ctx, struct sock *s, const char *bridge)
{
    nb_strlcpy(s->bridge, bridge, sizeof(s->bridge));
    s->fd = -1;
    s->ifindex = (int)if_nametoindex(bridge);
    if (!s->ifindex)
        return nb_error(ctx, 500, NULL, "bridge %s: %s", bridge, strerror(errno));
    /* protocol 0: nothing is queued before the bind names the bridge */
    s->fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s->fd < 0)
        return nb_error(ctx, 500, NULL, "ARP socket: %s", strerror(errno));
    struct sockaddr_ll sll = {
        .sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ARP), .sll_ifindex = s->ifindex};
    struct ifreq ifr = {0};
    nb_strlcpy(ifr.ifr_name, bridge, sizeof(ifr.ifr_name));
    if (bind(s->fd, (struct sockaddr *)&sll, sizeof(sll)) < 0 ||
        ioctl(s->fd, SIOCGIFHWADDR, &ifr) < 0) {
        int e = errno;
        close(s->fd);
        s->fd = -1;
        return nb_error(ctx, 500, NULL, "ARP socket on %s: %s", bridge, strerror(e));
    }
    memcpy(s->mac, ifr.ifr_hwaddr.sa_data, 6);
    return 0;
}

static void send_probes(struct nb_ctx *ctx, struct target *t, size_t n, const struct sock *socks)
{
    for (size_t i = 0; i < n; i++) {
        const struct sock *s = &socks[t[i].sock];
        if (t[i].hit != NA_DAD_NONE || s->fd < 0)
            continue;
        uint8_t frame[NA_DAD_FRAME_LEN];
        size_t len = na_dad_probe_frame(frame, s->mac, t[i].ip);
        struct sockaddr_ll to = {.sll_family = AF_PACKET,
                                 .sll_protocol = htons(ETH_P_ARP),
                                 .sll_ifindex = s->ifindex,
                                 .sll_halen = 6};
        memset(to.sll_addr, 0xff, 6);
        if (sendto(s->fd, frame, len, 0, (struct sockaddr *)&to, sizeof(to)) < 0)
            NB_WARN(LOG_DAD, ctx, NULL, "cannot send the ARP probe for %s on %s: %s",
                    nb_json_str(t[i].row, "ip"), s->bridge, strerror(errno));
    }
}

/* Reads what socket si holds and matches it against the targets. */
static void drain(struct sock *s, int si, struct target *t, size_t n)
{
    uint8_t buf[1600];
    for (;;) {
        struct sockaddr_ll from;
        socklen_t fl = sizeof(from);
        ssize_t len = recvfrom(s->fd, buf, sizeof(buf), 0, (struct sockaddr *)&from, &fl);
        if (len < 0)
            return; /* EAGAIN: read out */
        if (from.sll_pkttype == PACKET_OUTGOING || from.sll_ifindex != s->ifindex)
            continue; /* ours (or another agent's on this bridge) */
        for (size_t i = 0; i < n; i++)
            if (t[i].sock == si && t[i].hit == NA_DAD_NONE)
                t[i].hit = na_dad_classify(buf, (size_t)len, t[i].ip, t[i].own, 2, t[i].mac);
    }
}

/* Probes every target of the plan (n rows), filling t. 0, or -1 after
 * nb_error when no socket could be opened (t[i].hit stays NONE). */
static int probe(struct nb_ctx *ctx, const json_t *plan, struct target *t, size_t n, double timeout)
{
    struct sock *socks = calloc(n, sizeof(*socks));
    size_t ns = 0, opened = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *row = json_array_get(plan, i);
        const char *br = nb_json_str(row, "bridge");
        t[i] = (struct target){.row = row, .hit = NA_DAD_NONE, .sock = -1};
        inet_pton(AF_INET, nb_json_str(row, "ip"), &t[i].ip);
        na_dad_mac_parse(nb_json_str(row, "mac"), t[i].own[0]);
        for (size_t k = 0; k < ns && t[i].sock < 0; k++)
            if (!strcmp(socks[k].bridge, br))
                t[i].sock = (int)k;
        if (t[i].sock < 0) {
            struct nb_ctx sub;
            nb_ctx_child(&sub, ctx);
            if (sock_open(&sub, &socks[ns], br) == 0)
                opened++;
            else
                nb_ctx_forward_error(ctx, &sub);
            t[i].sock = (int)ns++;
        }
        memcpy(t[i].own[1], socks[t[i].sock].mac, 6);
    }
    if (opened) {
        double t0 = nb_time_mono(), half = t0 + timeout / 2, end = t0 + timeout;
        bool resent = false;
        send_probes(ctx, t, n, socks);
        struct pollfd *pfd = calloc(ns, sizeof(*pfd));
        for (double now = t0; now < end; now = nb_time_mono()) {
            if (!resent && now >= half) {
                send_probes(ctx, t, n, socks);
                resent = true;
            }
            double until = resent ? end : half;
            for (size_t k = 0; k < ns; k++)
                pfd[k] = (struct pollfd){.fd = socks[k].fd, .events = POLLIN};
            int ms = (int)((until - now) * 1000) + 1;
            if (poll(pfd, ns, ms) < 0 && errno != EINTR)
                break;
            for (size_t k = 0; k < ns; k++)
                if (socks[k].fd >= 0 && (pfd[k].revents & POLLIN))
                    drain(&socks[k], (int)k, t, n);
        }
        free(pfd);
    }
    for (size_t k = 0; k < ns; k++)
        if (socks[k].fd >= 0)
            close(socks[k].fd);
    free(socks);
    return opened ? 0 : -1;
}

/* The tap's ifindex, or 0 if it is gone. */
static long tap_ifindex(const char *tap)
{
    char path[300], buf[32] = "";
    if (!tap || strchr(tap, '/'))
        return 0;
    snprintf(path, sizeof(path), "/sys/class/net/%s/ifindex", tap);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    long v = fgets(buf, sizeof(buf), f) ? atol(buf) : 0;
    fclose(f);
    return v;
}

/* Forgets the records of ports no longer in state. */
static void forget_gone(struct na *a, const json_t *state)
{
    json_t *keep = json_object();
    size_t i;
    json_t *p;
    json_array_foreach (json_object_get(state, "ports"), i, p) {
        const char *id = nb_json_str(p, "id");
        json_t *rec = id ? json_object_get(a->probed, id) : NULL;
        if (rec)
            json_object_set(keep, id, rec);
    }
    json_decref(a->probed);
    a->probed = keep;
}

/* Records the batch's results (plan rows / targets t) for each port of
 * batch (port id -> its tap's ifindex). */
static void record(struct na *a, struct nb_ctx *ctx, const json_t *batch, const struct target *t,
                   size_t n)
{
    const char *id;
    json_t *ifx;
    json_object_foreach ((json_t *)batch, id, ifx) {
        char reason[512] = "";
        for (size_t i = 0; i < n && !*reason; i++)
            if (t[i].hit != NA_DAD_NONE && !strcmp(nb_json_str(t[i].row, "port_id"), id))
                na_dad_reason(reason, sizeof(reason), nb_json_str(t[i].row, "ip"),
                              nb_json_str(t[i].row, "network_id"), t[i].mac, t[i].hit);
        bool active = json_is_true(json_object_get(a->reported, id));
        if (*reason && active)
            NB_WARN(LOG_DAD, ctx, NULL,
                    "Port %s: %s; the port is ACTIVE (its guest may already use the address): "
                    "not failed",
                    id, reason);
        else if (*reason)
            NB_ERROR(LOG_DAD, ctx, NULL, "Port %s failed: %s", id, reason);
        json_object_set_new(
            a->probed, id,
            json_pack("{s:O, s:s?}", "ifindex", ifx, "reason", *reason && !active ? reason : NULL));
    }
}

void na_dad_check(struct na *a, struct nb_ctx *ctx, const json_t *state, const json_t *up)
{
    if (!a->probed)
        a->probed = json_object();
    forget_gone(a, state);
    bool on = nb_conf_bool("agent", "duplicate_address_probe", true);
    json_t *batch = json_object(); /* port id -> ifindex, to be probed */
    size_t i;
    json_t *p, *v;
    json_array_foreach (json_object_get(state, "ports"), i, p) {
        const char *id = nb_json_str(p, "id");
        if (!id)
            continue;
        json_t *rec = json_object_get(a->probed, id);
        long ifx = tap_ifindex(nb_json_str(p, "tap"));
        bool is_up = false;
        size_t k;
        json_array_foreach (up, k, v)
            is_up = is_up || !strcmp(json_string_value(v) ? json_string_value(v) : "", id);
        if (on && is_up && ifx && (!rec || nb_json_int(rec, "ifindex", 0) != ifx)) {
            json_object_set_new(batch, id, json_integer(ifx));
            continue;
        }
        if (rec && nb_json_str(rec, "reason"))
            na_port_failed(a, id, nb_json_str(rec, "reason"));
    }
    if (!json_object_size(batch)) {
        json_decref(batch);
        return;
    }
    json_t *plan = na_dad_plan(state, batch);
    size_t n = json_array_size(plan);
    struct target *t = calloc(n ? n : 1, sizeof(*t));
    double timeout = nb_conf_double("agent", "duplicate_address_probe_timeout", 0.3);
    if (timeout <= 0 || timeout > 10)
        timeout = 0.3;
    double t0 = nb_time_mono();
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    if (n && probe(&sub, plan, t, n, timeout) < 0)
        NB_WARN(LOG_DAD, ctx, NULL,
                "duplicate-address probes not sent (%s); the ports are wired without them",
                nb_ctx_message(&sub));
    else if (n)
        NB_DEBUG(LOG_DAD, ctx, NULL, "probed %zu IPv4 address(es) of %zu port(s) in %.3f s", n,
                 json_object_size(batch), nb_time_mono() - t0);
    record(a, ctx, batch, t, n);
    const char *id;
    json_object_foreach (batch, id, v) {
        const char *why = nb_json_str(json_object_get(a->probed, id), "reason");
        if (why)
            na_port_failed(a, id, why);
    }
    free(t);
    json_decref(plan);
    json_decref(batch);
}
