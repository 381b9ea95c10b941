/* amqp_link.h - one AMQP 0-9-1 connection with its channel 1, for the AMQP
 * bus backend (amqp.c).
 *
 * librabbitmq-c connections are not thread-safe, so a link is used by one
 * thread at a time: a listener thread owns its link, callers borrow one from
 * amqp.c's pool. Every failure is described once in link->reason (oslo-style
 * wording, no password) and the link is then closed; the owner reopens it. */
#ifndef NB_BUS_AMQP_LINK_H
#define NB_BUS_AMQP_LINK_H

#include "bus/transport_url.h"

#include <amqp.h>
#include <stdbool.h>
#include <stdint.h>

struct nb_amqp_link {
    amqp_connection_state_t st; /* NULL when closed */
    int host;                   /* index in the URL of the connected host */
    int local_port;             /* our side of the TCP connection, for logs */
    uint64_t next_tag;          /* publisher-confirm tag of the next publish */
    char reason[512];           /* why the last operation failed */
};

/* Connects to the first URL host that answers, logs in, opens channel 1.
 * heartbeat is in seconds (0 = none; TCP keepalive is always on). 0, or -1
 * with link->reason set and the link closed. Bounded by connect/handshake
 * timeouts: never hangs on a dead host. */
int nb_amqp_link_open(struct nb_amqp_link *l, const struct nb_bus_url *url, int heartbeat);

/* Closes the link (politely when it still works). Safe on a closed link. */
void nb_amqp_link_close(struct nb_amqp_link *l);

/* Checks the reply of the last synchronous method (what names it for the
 * reason). true if it succeeded; else false, link->reason set, link closed. */
bool nb_amqp_link_ok(struct nb_amqp_link *l, const char *what);

/* Describes a failed amqp_rpc_reply_t into link->reason. */
void nb_amqp_link_fail(struct nb_amqp_link *l, const char *what, amqp_rpc_reply_t r);

/* Puts channel 1 in publisher-confirm mode (confirm.select). 0/-1. */
int nb_amqp_link_confirm_select(struct nb_amqp_link *l);

#endif
