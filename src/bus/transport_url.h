/* transport_url.h - oslo.messaging's transport URL for the AMQP bus.
 *
 *   rabbit://user:pass@host:port[,user:pass@host2:port2...]/vhost
 *
 * ("amqp://" is accepted too). Port defaults to 5672, user and password to
 * guest, an empty path to the vhost "/"; user, password and vhost may be
 * percent-encoded ("%2F" for "/"). Several hosts are tried in order, like
 * oslo's failover. Query options (?ssl=...) are not supported and rejected. */
#ifndef NB_BUS_TRANSPORT_URL_H
#define NB_BUS_TRANSPORT_URL_H

#include <stddef.h>

#define NB_BUS_URL_MAX_HOSTS 4

struct nb_bus_url {
    int nhosts;
    struct {
        char user[128];
        char pass[128];
        char host[256];
        int port;
    } hosts[NB_BUS_URL_MAX_HOSTS];
    char vhost[128];
    char redacted[512]; /* the URL with passwords replaced by "***", for logs */
};

/* Parses url into out. 0, or -1 with a message naming the problem in err. */
int nb_bus_url_parse(const char *url, struct nb_bus_url *out, char *err, size_t errlen);

#endif
