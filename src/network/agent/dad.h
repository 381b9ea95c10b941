/* dad.h - duplicate address detection (dad.c): before a compute port is
 * reported up for the first time, the agent sends an RFC 5227 ARP probe
 * (sender IP 0.0.0.0) for each of its IPv4 fixed addresses on its
 * network's bridge and waits [agent] duplicate_address_probe_timeout; a
 * host with another MAC than the port's that answers (or announces or
 * probes the same address) fails the port with a reason naming the
 * address, the MAC and the network, so the guest never starts on an
 * address in use. The frame building and parsing here are pure (unit
 * tested); na_dad_check touches the host (AF_PACKET sockets). */
#ifndef NB_NETAGENT_DAD_H
#define NB_NETAGENT_DAD_H

#include "network/agent/internal.h"

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

/* An ARP probe's frame: Ethernet header + ARP, padded to Ethernet's
 * 60-byte minimum. */
#define NA_DAD_FRAME_LEN 60

/* Builds into buf (NA_DAD_FRAME_LEN bytes) the broadcast ARP request of
 * RFC 5227's probe for ip, from src_mac: sender IP 0.0.0.0, target
 * hardware address zero. Returns NA_DAD_FRAME_LEN. */
size_t na_dad_probe_frame(uint8_t *buf, const uint8_t src_mac[6], struct in_addr ip);

/* What a received frame says about an address being probed. */
enum na_dad_answer {
    NA_DAD_NONE,    /* not about ip, not ARP, malformed, or from an own MAC */
    NA_DAD_REPLY,   /* an ARP reply from ip: it is in use */
    NA_DAD_REQUEST, /* an ARP request from ip (e.g. gratuitous): in use */
    NA_DAD_PROBE,   /* another host's probe for ip (sender 0.0.0.0) */
};

/* Classifies frame (Ethernet, an 802.1Q tag allowed) of len bytes for the
 * probed address ip: RFC 5227 2.1.1's conflicts, unless the ARP sender
 * hardware address is one of the n_own MACs of own (the port's, the
 * bridge's: the port's own guest, our own probe). On a conflict, mac gets
 * the sender's MAC. */
enum na_dad_answer na_dad_classify(const uint8_t *frame, size_t len, struct in_addr ip,
                                   const uint8_t (*own)[6], size_t n_own, uint8_t mac[6]);

/* Parses "aa:bb:cc:dd:ee:ff" (case-insensitive). 0/-1. */
int na_dad_mac_parse(const char *text, uint8_t mac[6]);

/* The port's failure reason for a conflict on ip (text) of network_id,
 * seen as kind from mac, into buf (n bytes). */
void na_dad_reason(char *buf, size_t n, const char *ip, const char *network_id,
                   const uint8_t mac[6], enum na_dad_answer kind);

/* The probes one batch of ports needs: a new array of {"port_id",
 * "network_id", "bridge", "ip", "mac"}, one per IPv4 fixed address of each
 * port of state whose id is a key of ports (in the state's order), whose
 * network is in the state with a bridge and that has a MAC. */
json_t *na_dad_plan(const json_t *state, const json_t *ports);

/* After a device scan (agent.c): probes the compute ports of state that
 * are in up (port ids) and were not probed since their tap appeared, and
 * reports every port with a conflict still on record as failed
 * (na_port_failed). A port the control side knows as ACTIVE (its guest
 * may already use the address: the agent restarted, a hard reboot) is not
 * failed: the conflict is logged as a WARNING. Off with [agent]
 * duplicate_address_probe = false. Cannot fail (a probe that cannot be
 * sent is logged and the port is wired as without the probe). */
void na_dad_check(struct na *a, struct nb_ctx *ctx, const json_t *state, const json_t *up);

#endif
