/* format_int.h - what the files of the format inspector share (not public:
 * the rest of nubo uses format.h).
 *
 * The inspector is split by concern: format.c is the streaming core (head,
 * captures, tail; feed, finish, the fd variant), detection and the verdicts;
 * format_qcow2.c parses qcow2, qcow and QED headers; format_vmdk.c the VMDK
 * descriptor, sparse header and footer; format_vhd.c VHD (vpc), VHDX, VDI
 * and the ISO 9660 probe. The parsers run at finish, on what the core holds,
 * and reach it only through at(); they record what makes an image unsafe with
 * unsafe(). Helpers are static inline here; functions shared across the files
 * carry the nb_fmt_ prefix. */
#ifndef NB_IMAGE_FORMAT_INT_H
#define NB_IMAGE_FORMAT_INT_H

#include "image/format.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define KiB 1024u
#define MiB (1024u * 1024u)
#define TAIL_MAX 2048u
#define CAP_MAX 4

struct capture {
    uint64_t off;
    uint32_t len;
    uint32_t have; /* bytes held, contiguous from off */
    bool missed;   /* bytes it needed went by before it was requested */
    uint8_t *data;
};

struct nb_format_inspector {
    uint64_t pos; /* file offset of the next byte fed */
    uint8_t *head;
    size_t head_len, head_cap;
    size_t head_limit; /* HEAD_MAX until decided on the first HEAD_PROBE bytes */
    bool limit_set, head_done;
    /* tail[0, tail_len) holds [pos - tail_len, pos), at least the last
     * TAIL_MAX bytes; twice that room makes appending amortised O(1). */
    uint8_t tail[2 * TAIL_MAX];
    size_t tail_len;
    struct capture caps[CAP_MAX];
    int ncaps;
    bool oom, finished;
    /* The chunk being fed, so that a capture requested while planning can
     * take the bytes it needs from it. */
    const uint8_t *chunk;
    uint64_t chunk_off;
    size_t chunk_len;
};

/* ---- small helpers ---------------------------------------------------- */

static inline uint16_t le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}
static inline uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t le64(const uint8_t *p)
{
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}
static inline uint16_t be16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}
static inline uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}
static inline uint64_t be64(const uint8_t *p)
{
    return (uint64_t)be32(p) << 32 | be32(p + 4);
}

/* Records why the image is unsafe; the first reason found is kept. */
static inline void unsafe(struct nb_format_info *out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static inline void unsafe(struct nb_format_info *out, const char *fmt, ...)
{
    if (out->unsafe_reason[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->unsafe_reason, sizeof(out->unsafe_reason), fmt, ap);
    va_end(ap);
}

/* Copies n untrusted bytes into dst[size] as printable text: stops at NUL,
 * replaces other non-printable bytes with '?', truncates. */
static inline void copy_name(char *dst, size_t size, const uint8_t *src, size_t n)
{
    size_t i, j = 0;
    for (i = 0; i < n && j + 1 < size && src[i]; i++)
        dst[j++] = (src[i] >= 0x20 && src[i] < 0x7f) ? (char)src[i] : '?';
    dst[j] = '\0';
}

/* ---- what the inspector holds ------------------------------------------ */

/* [a, a+n) lies inside [b, b+m)? Written so that nothing can overflow. */
static inline bool inside(uint64_t a, uint64_t n, uint64_t b, uint64_t m)
{
    return a >= b && a - b <= m && n <= m - (a - b);
}

/* Pointer to the len bytes at file offset off if all of them are held. */
static inline const uint8_t *at(const struct nb_format_inspector *ins, uint64_t off, size_t len)
{
    if (ins->head && inside(off, len, 0, ins->head_len))
        return ins->head + off;
    for (int i = 0; i < ins->ncaps; i++) {
        const struct capture *c = &ins->caps[i];
        if (inside(off, len, c->off, c->have))
            return c->data + (off - c->off);
    }
    if (inside(off, len, ins->pos - ins->tail_len, ins->tail_len))
        return ins->tail + (off - (ins->pos - ins->tail_len));
    return NULL;
}

/* The held bytes at offset 0 start with magic[0, n)? */
static inline bool starts(const struct nb_format_inspector *ins, const char *magic, size_t n)
{
    const uint8_t *p = at(ins, 0, n);
    return p && memcmp(p, magic, n) == 0;
}

/* ---- format.c: the streaming core ------------------------------------------ */

/* Asks for [off, off+len) (len capped at 64 KiB) to be kept when the stream
 * passes it; for planners, which run while the stream is fed. Bytes already
 * held, or in the chunk being fed, are taken at once; if some of them already
 * went by unkept, the capture is "missed" and at() will not find them. Out of
 * slots or memory: the request is dropped (memory failure is remembered and
 * reported by finish). */
void nb_fmt_want(struct nb_format_inspector *ins, uint64_t off, uint32_t len);

/* ---- format_qcow2.c ----------------------------------------------------------- */

/* Each parser fills out (already zeroed, with the type and names set by
 * detection) from what the inspector holds, and marks it unsafe with the
 * first reason found. */
void nb_fmt_parse_qcow2(const struct nb_format_inspector *ins, struct nb_format_info *out);
/* qcow version 1: only its size and backing file, for the refusal. */
void nb_fmt_parse_qcow(const struct nb_format_inspector *ins, struct nb_format_info *out);
/* QED: its size and backing file, for the refusal. */
void nb_fmt_parse_qed(const struct nb_format_inspector *ins, struct nb_format_info *out);

/* ---- format_vmdk.c ------------------------------------------------------------ */

/* qemu-img's VMDK text probe: comment and blank lines, then "version=N". */
bool nb_fmt_vmdk_text_probe(const uint8_t *buf, size_t n);
/* A sparse VMDK4 image ("KDMV"): header (or footer) and embedded descriptor. */
void nb_fmt_parse_vmdk4(const struct nb_format_inspector *ins, struct nb_format_info *out);
/* A VMDK3 ("COWD") image: read for its size and parent, then refused. */
void nb_fmt_parse_vmdk3(const struct nb_format_inspector *ins, struct nb_format_info *out);
/* A VMDK descriptor file (text in the head). Never safe. */
void nb_fmt_parse_vmdk_text(const struct nb_format_inspector *ins, struct nb_format_info *out);

/* ---- format_vhd.c ------------------------------------------------------------- */

/* Requests the VHDX regions the held headers point at (through nb_fmt_want);
 * called while streaming until it asks for nothing new. */
void nb_fmt_vhdx_plan(struct nb_format_inspector *ins);
void nb_fmt_parse_vpc(const struct nb_format_inspector *ins, struct nb_format_info *out);
void nb_fmt_parse_vhdx(const struct nb_format_inspector *ins, struct nb_format_info *out);
void nb_fmt_parse_vdi(const struct nb_format_inspector *ins, struct nb_format_info *out);
/* The content has an ISO 9660 (or UDF) volume descriptor at 32 KiB? */
bool nb_fmt_iso_probe(const struct nb_format_inspector *ins);
/* The content has VDI's signature at 0x40? */
bool nb_fmt_vdi_probe(const struct nb_format_inspector *ins);

#endif
