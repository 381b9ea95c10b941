/* url.c - parses [database] connection (see url.h). */
#include "db/url.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const mariadb_schemes[] = {
    "mysql://", "mysql+pymysql://", "mysql+mysqldb://", "mariadb://", "mariadb+pymysql://",
};

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = tolower(c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Copies s[0..n) percent-decoded into out[cap]; -1 if bad or too long. */
static int decode(const char *s, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char)s[i];
        if (c == '%') {
            int hi = i + 2 < n ? hexval(s[i + 1]) : -1;
            int lo = hi >= 0 ? hexval(s[i + 2]) : -1;
            if (hi < 0 || lo < 0)
                return -1;
            c = hi * 16 + lo;
            i += 2;
        }
        if (o + 1 >= cap)
            return -1;
        out[o++] = (char)c;
    }
    out[o] = '\0';
    return 0;
}

/* host[:port] or [v6][:port] in s[0..n). */
static int parse_hostport(const char *s, size_t n, struct nb_db_url *u)
{
    const char *end = s + n, *colon = NULL;
    if (n && *s == '[') {
        const char *rb = memchr(s, ']', n);
        if (!rb)
            return -1;
        if (decode(s + 1, (size_t)(rb - s - 1), u->host, sizeof(u->host)) < 0)
            return -1;
        colon = rb + 1 < end && rb[1] == ':' ? rb + 1 : NULL;
        if (!colon && rb + 1 != end)
            return -1;
    } else {
        colon = memchr(s, ':', n);
        if (decode(s, colon ? (size_t)(colon - s) : n, u->host, sizeof(u->host)) < 0)
            return -1;
    }
    if (!colon)
        return 0;
    if (colon + 1 == end)
        return -1;
    long port = 0;
    for (const char *p = colon + 1; p < end; p++) {
        if (!isdigit((unsigned char)*p))
            return -1;
        port = port * 10 + (*p - '0');
        if (port > 65535)
            return -1;
    }
    u->port = (int)port;
    return port > 0 ? 0 : -1;
}

/* user[:password]@ in s[0..n) (the authority up to its last '@'). */
static int parse_userinfo(const char *s, size_t n, struct nb_db_url *u)
{
    const char *colon = memchr(s, ':', n);
    size_t ulen = colon ? (size_t)(colon - s) : n;
    if (decode(s, ulen, u->user, sizeof(u->user)) < 0)
        return -1;
    if (colon && decode(colon + 1, n - ulen - 1, u->password, sizeof(u->password)) < 0)
        return -1;
    return 0;
}

/* One k=v of the query string; unknown keys are counted in u->ignored. */
static int parse_param(const char *s, size_t n, struct nb_db_url *u)
{
    const char *eq = memchr(s, '=', n);
    size_t klen = eq ? (size_t)(eq - s) : n;
    const char *v = eq ? eq + 1 : s + n;
    size_t vlen = (size_t)(s + n - v);
    if (klen == strlen("unix_socket") && !strncmp(s, "unix_socket", klen))
        return decode(v, vlen, u->unix_socket, sizeof(u->unix_socket));
    if (klen == strlen("charset") && !strncmp(s, "charset", klen))
        return decode(v, vlen, u->charset, sizeof(u->charset));
    if (n)
        u->ignored++;
    return 0;
}

static int parse_query(const char *q, struct nb_db_url *u)
{
    while (*q) {
        const char *amp = strchr(q, '&');
        size_t n = amp ? (size_t)(amp - q) : strlen(q);
        if (parse_param(q, n, u) < 0)
            return -1;
        q += n + (amp ? 1 : 0);
    }
    return 0;
}

static int parse_mariadb(const char *rest, struct nb_db_url *u, char *err, size_t errlen)
{
    u->kind = NB_DB_MARIADB;
    const char *slash = strchr(rest, '/');
    const char *qmark = strchr(rest, '?');
    if (!slash || (qmark && qmark < slash))
        return fail(err, errlen, "no database name (…/DBNAME) in the MariaDB URL");
    const char *at = NULL;
    for (const char *p = rest; p < slash; p++)
        if (*p == '@')
            at = p;
    if (at && parse_userinfo(rest, (size_t)(at - rest), u) < 0)
        return fail(err, errlen, "bad user or password in the MariaDB URL");
    const char *hs = at ? at + 1 : rest;
    if (parse_hostport(hs, (size_t)(slash - hs), u) < 0)
        return fail(err, errlen, "bad host or port in the MariaDB URL");
    size_t dlen = qmark ? (size_t)(qmark - slash - 1) : strlen(slash + 1);
    if (!dlen || decode(slash + 1, dlen, u->database, sizeof(u->database)) < 0 ||
        strchr(u->database, '/'))
        return fail(err, errlen, "bad database name in the MariaDB URL");
    if (qmark && parse_query(qmark + 1, u) < 0)
        return fail(err, errlen, "bad query parameter in the MariaDB URL");
    if (u->charset[0] && strcmp(u->charset, "utf8") && strcmp(u->charset, "utf8mb4") &&
        strcmp(u->charset, "utf8mb3"))
        return fail(err, errlen, "charset=%s: nubo stores UTF-8 only (utf8, utf8mb4)", u->charset);
    return 0;
}

bool nb_db_url_is_mariadb(const char *conn)
{
    for (size_t i = 0; conn && i < sizeof(mariadb_schemes) / sizeof(mariadb_schemes[0]); i++)
        if (!strncmp(conn, mariadb_schemes[i], strlen(mariadb_schemes[i])))
            return true;
    return false;
}

const char *nb_db_url_display(const char *conn, char *buf, size_t n)
{
    snprintf(buf, n, "%s", conn ? conn : "");
    const char *auth = nb_db_url_is_mariadb(conn) ? strstr(conn, "://") : NULL;
    if (!auth)
        return buf;
    auth += 3;
    const char *end = auth + strcspn(auth, "/?");
    const char *at = NULL; /* the last '@' before the path, as the parser splits */
    for (const char *p = auth; p < end; p++)
        at = *p == '@' ? p : at;
    const char *colon = at ? memchr(auth, ':', (size_t)(at - auth)) : NULL;
    if (colon)
        snprintf(buf, n, "%.*s***%s", (int)(colon + 1 - conn), conn, at);
    return buf;
}

int nb_db_url_parse(const char *conn, const char *state_path, struct nb_db_url *u, char *err,
                    size_t errlen)
{
    memset(u, 0, sizeof(*u));
    if (err && errlen)
        err[0] = '\0';
    if (!conn || !*conn) {
        int n = snprintf(u->path, sizeof(u->path), "%s/nubo.sqlite",
                         state_path ? state_path : "/var/lib/nubo");
        return n < (int)sizeof(u->path) ? 0 : fail(err, errlen, "state_path too long");
    }
    for (size_t i = 0; i < sizeof(mariadb_schemes) / sizeof(mariadb_schemes[0]); i++)
        if (!strncmp(conn, mariadb_schemes[i], strlen(mariadb_schemes[i])))
            return parse_mariadb(conn + strlen(mariadb_schemes[i]), u, err, errlen);
    const char *path = NULL;
    if (!strncmp(conn, "sqlite:///", strlen("sqlite:///")))
        path = conn + strlen("sqlite://");
    else if (conn[0] == '/')
        path = conn;
    else
        return fail(err, errlen,
                    "%.60s: not a SQLite (sqlite:///PATH) or MariaDB "
                    "(mysql+pymysql://USER:PASSWORD@HOST/DB) URL",
                    conn);
    if (strlen(path) >= sizeof(u->path))
        return fail(err, errlen, "SQLite path too long");
    strcpy(u->path, path);
    return 0;
}
