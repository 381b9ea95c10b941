/* transport_url.c - parses oslo.messaging transport URLs (see
 * transport_url.h). Kept apart from amqp.c so it can be unit-tested without
 * a broker. */
#include "bus/transport_url.h"
#include "common/util.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Copies the n bytes at s into out (size cap), percent-decoding. 0/-1. */
static int decode(const char *s, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '%') {
            if (i + 2 >= n || !isxdigit((unsigned char)s[i + 1]) ||
                !isxdigit((unsigned char)s[i + 2]))
                return -1;
            char hex[3] = {s[i + 1], s[i + 2], '\0'};
            c = (char)strtol(hex, NULL, 16);
            i += 2;
        }
        if (o + 1 >= cap)
            return -1;
        out[o++] = c;
    }
    out[o] = '\0';
    return 0;
}

/* Parses one "[user[:pass]@]host[:port]" of length n into host slot h. */
static int parse_host(const char *s, size_t n, struct nb_bus_url *u, int h, char *err,
                      size_t errlen)
{
    const char *at = memrchr(s, '@', n);
    const char *hp = at ? at + 1 : s;
    size_t hn = n - (size_t)(hp - s);
    nb_strlcpy(u->hosts[h].user, "guest", sizeof(u->hosts[h].user));
    nb_strlcpy(u->hosts[h].pass, "guest", sizeof(u->hosts[h].pass));
    if (at) {
        const char *colon = memchr(s, ':', (size_t)(at - s));
        size_t un = colon ? (size_t)(colon - s) : (size_t)(at - s);
        if (decode(s, un, u->hosts[h].user, sizeof(u->hosts[h].user)) < 0 ||
            (colon && decode(colon + 1, (size_t)(at - colon - 1), u->hosts[h].pass,
                             sizeof(u->hosts[h].pass)) < 0)) {
            snprintf(err, errlen, "bad user or password encoding");
            return -1;
        }
    }
    const char *pc = memrchr(hp, ':', hn);
    size_t namelen = pc ? (size_t)(pc - hp) : hn;
    u->hosts[h].port = 5672;
    if (pc) {
        char port[8];
        size_t pn = hn - namelen - 1;
        char *end;
        if (pn == 0 || pn >= sizeof(port)) {
            snprintf(err, errlen, "bad port");
            return -1;
        }
        memcpy(port, pc + 1, pn);
        port[pn] = '\0';
        long p = strtol(port, &end, 10);
        if (*end || p < 1 || p > 65535) {
            snprintf(err, errlen, "bad port %s", port);
            return -1;
        }
        u->hosts[h].port = (int)p;
    }
    if (namelen == 0 || namelen >= sizeof(u->hosts[h].host)) {
        snprintf(err, errlen, "missing host");
        return -1;
    }
    memcpy(u->hosts[h].host, hp, namelen);
    u->hosts[h].host[namelen] = '\0';
    return 0;
}

/* Fills u->redacted from the parsed hosts and vhost. */
static void redact(struct nb_bus_url *u, const char *scheme)
{
    size_t n = 0, cap = sizeof(u->redacted);
    n += (size_t)snprintf(u->redacted + n, cap - n, "%s://", scheme);
    for (int h = 0; h < u->nhosts && n < cap; h++)
        n += (size_t)snprintf(u->redacted + n, cap - n, "%s%s:***@%s:%d", h ? "," : "",
                              u->hosts[h].user, u->hosts[h].host, u->hosts[h].port);
    if (n < cap)
        snprintf(u->redacted + n, cap - n, "/%s", strcmp(u->vhost, "/") ? u->vhost : "");
}

int nb_bus_url_parse(const char *url, struct nb_bus_url *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    const char *scheme = NULL;
    if (nb_startswith(url, "rabbit://"))
        scheme = "rabbit";
    else if (nb_startswith(url, "amqp://"))
        scheme = "amqp";
    else {
        snprintf(err, errlen, "unsupported transport URL scheme (expected rabbit://)");
        return -1;
    }
    const char *p = url + strlen(scheme) + 3;
    if (strchr(p, '?')) {
        snprintf(err, errlen, "transport URL query options are not supported");
        return -1;
    }
    const char *slash = strchr(p, '/');
    size_t netloc = slash ? (size_t)(slash - p) : strlen(p);
    while (netloc > 0) {
        const char *comma = memchr(p, ',', netloc);
        size_t n = comma ? (size_t)(comma - p) : netloc;
        if (out->nhosts == NB_BUS_URL_MAX_HOSTS) {
            snprintf(err, errlen, "more than %d hosts", NB_BUS_URL_MAX_HOSTS);
            return -1;
        }
        if (parse_host(p, n, out, out->nhosts, err, errlen) < 0)
            return -1;
        out->nhosts++;
        p += comma ? n + 1 : n;
        netloc -= comma ? n + 1 : n;
    }
    if (out->nhosts == 0) {
        snprintf(err, errlen, "missing host");
        return -1;
    }
    const char *vh = slash ? slash + 1 : "";
    if (decode(vh, strlen(vh), out->vhost, sizeof(out->vhost)) < 0) {
        snprintf(err, errlen, "bad virtual host encoding");
        return -1;
    }
    if (!out->vhost[0])
        nb_strlcpy(out->vhost, "/", sizeof(out->vhost));
    redact(out, scheme);
    return 0;
}
