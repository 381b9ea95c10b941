/* util.c - UUIDs, time stamps, string and file helpers (see util.h). */
#include "common/util.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/rand.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uuid/uuid.h>

void nb_uuid(char out[NB_UUID_LEN])
{
    uuid_t u;
    uuid_generate_random(u);
    uuid_unparse_lower(u, out);
}

bool nb_is_uuid(const char *s)
{
    if (!s)
        return false;
    size_t n = strlen(s);
    if (n == 36) {
        for (size_t i = 0; i < 36; i++) {
            if (i == 8 || i == 13 || i == 18 || i == 23) {
                if (s[i] != '-')
                    return false;
            } else if (!isxdigit((unsigned char)s[i])) {
                return false;
            }
        }
        return true;
    }
    if (n == 32) {
        for (size_t i = 0; i < 32; i++)
            if (!isxdigit((unsigned char)s[i]))
                return false;
        return true;
    }
    return false;
}

void nb_random_hex(char *out, size_t n)
{
    unsigned char buf[256];
    static const char hex[] = "0123456789abcdef";
    size_t done = 0;
    while (done < n) {
        size_t chunk = n - done > sizeof(buf) ? sizeof(buf) : n - done;
        if (RAND_bytes(buf, (int)chunk) != 1)
            abort(); /* no safe fallback for token material */
        for (size_t i = 0; i < chunk; i++) {
            out[2 * (done + i)] = hex[buf[i] >> 4];
            out[2 * (done + i) + 1] = hex[buf[i] & 15];
        }
        done += chunk;
    }
    out[2 * n] = '\0';
}

double nb_time_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

double nb_time_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

char *nb_time_iso(double t, char *buf)
{
    time_t secs = (time_t)t;
    struct tm tm;
    gmtime_r(&secs, &tm);
    strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

char *nb_now_iso(char *buf)
{
    return nb_time_iso(nb_time_now(), buf);
}

char *nb_now_iso_us(char *buf)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(buf, 32, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + n, 32 - n, ".%06d", (int)(ts.tv_nsec / 1000) % 1000000);
    return buf;
}

double nb_time_parse(const char *s)
{
    if (!s)
        return -1;
    struct tm tm = {0};
    const char *p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
    if (!p)
        p = strptime(s, "%Y-%m-%d %H:%M:%S", &tm);
    if (!p) {
        memset(&tm, 0, sizeof(tm));
        p = strptime(s, "%Y-%m-%d", &tm);
        if (!p || *p)
            return -1;
    }
    double frac = 0;
    if (*p == '.') {
        char *end;
        frac = strtod(p, &end);
        p = end;
    }
    double t = (double)timegm(&tm) + frac;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int sign = *p == '-' ? -1 : 1;
        int hh = 0, mm = 0;
        if (sscanf(p + 1, "%2d:%2d", &hh, &mm) < 1 && sscanf(p + 1, "%2d%2d", &hh, &mm) < 1)
            return -1;
        t -= sign * (hh * 3600 + mm * 60);
        p += strlen(p);
    }
    return *p ? -1 : t;
}

char *nb_strlcpy(char *dst, const char *src, size_t n)
{
    if (n == 0)
        return dst;
    size_t len = src ? strlen(src) : 0;
    if (len >= n)
        len = n - 1;
    if (len)
        memcpy(dst, src, len);
    dst[len] = '\0';
    return dst;
}

char *nb_strdup_printf(const char *fmt, ...)
{
    va_list ap;
    char *s = NULL;
    va_start(ap, fmt);
    int r = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (r < 0)
        abort();
    return s;
}

int nb_bool_from_string(const char *s)
{
    static const char *const yes[] = {"1", "t", "true", "on", "y", "yes"};
    static const char *const no[] = {"0", "f", "false", "off", "n", "no"};
    if (!s)
        return -1;
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (strlen(yes[i]) == n && strncasecmp(s, yes[i], n) == 0)
            return 1;
        if (strlen(no[i]) == n && strncasecmp(s, no[i], n) == 0)
            return 0;
    }
    return -1;
}

bool nb_startswith(const char *s, const char *prefix)
{
    return s && strncmp(s, prefix, strlen(prefix)) == 0;
}

int nb_mkdir_p(const char *path)
{
    char buf[4096];
    nb_strlcpy(buf, path, sizeof(buf));
    for (char *p = buf + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, 0755) < 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    }
    if (mkdir(buf, 0755) < 0 && errno != EEXIST)
        return -1;
    return 0;
}

char *nb_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (n + 1 >= cap) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
        size_t r = fread(buf + n, 1, cap - n - 1, f);
        if (r == 0)
            break;
        n += r;
    }
    fclose(f);
    buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}

int nb_write_file(const char *path, const char *data, size_t len, int mode)
{
    char tmp[4096];
    snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, mode);
    if (fd < 0)
        return -1;
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, data + off, len - off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            close(fd);
            unlink(tmp);
            return -1;
        }
        off += (size_t)w;
    }
    if (fsync(fd) < 0 || close(fd) < 0) {
        unlink(tmp);
        return -1;
    }
    return rename(tmp, path);
}

int nb_thread_detached(void *(*fn)(void *), void *arg)
{
    pthread_t t;
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) != 0)
        return -1;
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &attr, fn, arg);
    pthread_attr_destroy(&attr);
    return rc == 0 ? 0 : -1;
}
