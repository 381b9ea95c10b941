/* util.h - small helpers: UUIDs, time stamps, strings. */
#ifndef NB_UTIL_H
#define NB_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NB_UUID_LEN 37 /* 36 chars + NUL */

/* Writes a random (v4) lower-case UUID into out[NB_UUID_LEN]. */
void nb_uuid(char out[NB_UUID_LEN]);
/* True if s is a UUID, with or without dashes (as oslo.utils' uuidutils accepts). */
bool nb_is_uuid(const char *s);
/* Writes n random bytes as 2n lower-case hex chars + NUL into out. */
void nb_random_hex(char *out, size_t n);

/* Current UTC time: ISO 8601 "2026-11-29T18:00:00Z" (fmt_iso) and with
 * microseconds "2026-11-29T18:00:00.123456" (fmt_iso_us, no zone, as the
 * services' DB timestamps). buf must hold 32 bytes. Return buf. */
char *nb_now_iso(char *buf);
char *nb_now_iso_us(char *buf);
/* Formats t (seconds since epoch) as ISO 8601 with Z into buf[32]. */
char *nb_time_iso(double t, char *buf);
/* Parses ISO 8601 (with optional fraction and Z/±hh:mm). -1 on error. */
double nb_time_parse(const char *s);
/* Seconds since epoch, and monotonic seconds. */
double nb_time_now(void);
double nb_time_mono(void);

/* Copies src into dst of size n, always NUL-terminating; returns dst. */
char *nb_strlcpy(char *dst, const char *src, size_t n);
/* asprintf that aborts on OOM. Caller frees. */
char *nb_strdup_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* True if s starts with prefix. */
bool nb_startswith(const char *s, const char *prefix);
/* oslo.utils' strutils.bool_from_string(strict=True), which the OpenStack
 * services parse their boolean strings with: surrounding
 * whitespace stripped, case ignored, "1 t true on y yes" → 1, "0 f false
 * off n no" → 0, anything else (and NULL) → -1. */
int nb_bool_from_string(const char *s);
/* Creates a directory and its parents (mode 0755). 0/-1 (errno set). */
int nb_mkdir_p(const char *path);
/* Runs fn(arg) on a detached thread. 0, or -1 if none could be started
 * (fn does not run; arg is still the caller's). */
int nb_thread_detached(void *(*fn)(void *), void *arg);
/* Reads a whole file into a NUL-terminated malloc'd buffer; NULL on error. */
char *nb_read_file(const char *path, size_t *len);
/* Writes data to path atomically (temp file + rename). 0/-1. */
int nb_write_file(const char *path, const char *data, size_t len, int mode);

#endif
