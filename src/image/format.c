/* format.c - the disk-image format inspector (see format.h).
 *
 * How it works. Every image, whether read from a file or streamed during an
 * upload, goes through one streaming inspector. It keeps three things:
 *   - the head: the first bytes, as many as the format found in the first
 *     4 KiB needs for its headers (head_limit): 64 KiB by default (VHD
 *     footer, ISO volume descriptor at 32 KiB, VDI), the first cluster for
 *     qcow2 (header, extensions and backing name; at most 2 MiB), up to
 *     1 MiB for a VMDK descriptor, 320 KiB for the VHDX region tables;
 *   - captures: a few bounded regions that headers point at beyond the head
 *     (the VHDX metadata table and its items), requested while streaming as
 *     soon as the pointing header is known, filled when the stream reaches
 *     them;
 *   - the tail: the last TAIL_MAX bytes (the VMDK footer of streamOptimized
 *     images whose grain directory is "at end").
 * Parsing happens at finish, on those buffers only, through at(), which
 * returns a pointer to [off, off+len) if every byte of it is held and NULL
 * otherwise; parsers never index a buffer themselves. The fd variant feeds
 * the same inspector and skips the bytes nothing asked for.
 *
 * Detection follows qemu-img's probes (magic at offset 0, or the text of a
 * VMDK descriptor file; raw when nothing matches) plus ISO 9660 and the
 * safety rules of Glance/Nova's format_inspector; where QEMU would follow a
 * file named by the image, the image is refused.
 *
 * This file is the streaming core, detection and the verdicts; the header
 * parsers live in format_qcow2.c, format_vmdk.c and format_vhd.c, and what
 * they share with it in format_int.h. */
#include "image/format.h"
#include "image/format_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define HEAD_MAX (2 * MiB)   /* the largest head_limit */
#define HEAD_PROBE (4 * KiB) /* the bytes head_limit is decided on */
#define HEAD_MIN (64 * KiB)
#define QEMU_PROBE 512u /* bytes qemu-img's probes see (BLOCK_PROBE_BUF_SIZE) */
#define CAP_LEN_MAX (64 * KiB)

/* ---- small helpers ---------------------------------------------------- */

static void seterr(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void seterr(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* ---- what the inspector holds ------------------------------------------ */

/* Appends to c what [src_off, src_off+n) holds of the bytes c still needs. */
static void cap_fill(struct capture *c, uint64_t src_off, const uint8_t *src, size_t n)
{
    if (c->missed || c->have == c->len)
        return;
    uint64_t next = c->off + c->have;
    if (next < src_off || next - src_off >= n)
        return;
    uint64_t avail = n - (next - src_off);
    uint32_t take = c->len - c->have;
    if (avail < take)
        take = (uint32_t)avail;
    memcpy(c->data + c->have, src + (next - src_off), take);
    c->have += take;
}

/* See format_int.h. len is capped at CAP_LEN_MAX. */
void nb_fmt_want(struct nb_format_inspector *ins, uint64_t off, uint32_t len)
{
    if (len > CAP_LEN_MAX)
        len = CAP_LEN_MAX;
    if (len == 0 || off > UINT64_MAX - len || at(ins, off, len))
        return;
    for (int i = 0; i < ins->ncaps; i++)
        if (ins->caps[i].off == off && ins->caps[i].len >= len)
            return;
    if (ins->ncaps == CAP_MAX)
        return;
    struct capture *c = &ins->caps[ins->ncaps];
    *c = (struct capture){.off = off, .len = len};
    c->data = malloc(len);
    if (!c->data) {
        ins->oom = true;
        return;
    }
    ins->ncaps++;
    if (ins->head)
        cap_fill(c, 0, ins->head, ins->head_len);
    if (ins->chunk)
        cap_fill(c, ins->chunk_off, ins->chunk, ins->chunk_len);
    uint64_t end = ins->chunk ? ins->chunk_off + ins->chunk_len : ins->pos;
    if (c->have < c->len && c->off + c->have < end)
        c->missed = true;
}

/* ---- the streaming inspector ------------------------------------------- */

struct nb_format_inspector *nb_format_inspector_new(void)
{
    struct nb_format_inspector *ins = calloc(1, sizeof(*ins));
    if (ins)
        ins->head_limit = HEAD_MAX;
    return ins;
}

void nb_format_inspector_free(struct nb_format_inspector *ins)
{
    if (!ins)
        return;
    for (int i = 0; i < ins->ncaps; i++)
        free(ins->caps[i].data);
    free(ins->head);
    free(ins);
}

size_t nb_format_inspector_held(const struct nb_format_inspector *ins)
{
    size_t n = sizeof(*ins) + ins->head_cap;
    for (int i = 0; i < ins->ncaps; i++)
        n += ins->caps[i].len;
    return n;
}

/* How much of the head the format starting with p[0, HEAD_PROBE) needs. */
static size_t head_limit(const uint8_t *p)
{
    size_t need = 0;
    if (memcmp(p, "QFI\xfb", 4) == 0 && be32(p + 20) >= 9 && be32(p + 20) <= 21) {
        need = (size_t)1 << be32(p + 20);
    } else if (memcmp(p, "KDMV", 4) == 0) {
        uint64_t desc = le64(p + 36); /* descriptor sectors */
        need = 512 + (desc < (1 * MiB) / 512 ? (size_t)desc * 512 : 1 * MiB);
        need = need > 512 + 10240 ? need : 512 + 10240;
    } else if (memcmp(p, "vhdxfile", 8) == 0) {
        need = 320 * KiB;
    } else if (nb_fmt_vmdk_text_probe(p, QEMU_PROBE)) {
        need = 1 * MiB;
    }
    return need > HEAD_MIN ? need : HEAD_MIN;
}

static int head_append(struct nb_format_inspector *ins, const uint8_t *p, size_t n)
{
    if (ins->pos >= ins->head_limit)
        return 0;
    if (n > ins->head_limit - ins->pos)
        n = ins->head_limit - (size_t)ins->pos;
    if (ins->head_len + n > ins->head_cap) {
        size_t cap = ins->head_cap ? ins->head_cap : 64 * KiB;
        while (cap < ins->head_len + n)
            cap *= 2;
        if (cap > HEAD_MAX)
            cap = HEAD_MAX;
        uint8_t *h = realloc(ins->head, cap);
        if (!h)
            return -1;
        ins->head = h;
        ins->head_cap = cap;
    }
    memcpy(ins->head + ins->head_len, p, n);
    ins->head_len += n;
    if (!ins->limit_set && ins->head_len >= HEAD_PROBE) {
        ins->limit_set = true;
        ins->head_limit = head_limit(ins->head);
        if (ins->head_len > ins->head_limit)
            ins->head_len = ins->head_limit;
        uint8_t *h = ins->head_cap > ins->head_limit ? realloc(ins->head, ins->head_limit) : NULL;
        if (h) {
            ins->head = h;
            ins->head_cap = ins->head_limit;
        }
    }
    return 0;
}

static void tail_append(struct nb_format_inspector *ins, const uint8_t *p, size_t n)
{
    if (n >= TAIL_MAX) {
        memcpy(ins->tail, p + n - TAIL_MAX, TAIL_MAX);
        ins->tail_len = TAIL_MAX;
        return;
    }
    if (ins->tail_len + n > sizeof(ins->tail)) {
        size_t keep = ins->tail_len < TAIL_MAX ? ins->tail_len : TAIL_MAX;
        memmove(ins->tail, ins->tail + ins->tail_len - keep, keep);
        ins->tail_len = keep;
    }
    memcpy(ins->tail + ins->tail_len, p, n);
    ins->tail_len += n;
}

/* Grows whenever a capture is added or filled; planning stops when it stays. */
static uint64_t progress(const struct nb_format_inspector *ins)
{
    uint64_t n = (uint64_t)ins->ncaps << 32;
    for (int i = 0; i < ins->ncaps; i++)
        n += ins->caps[i].have;
    return n;
}

int nb_format_inspector_feed(struct nb_format_inspector *ins, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    if (ins->oom)
        return -1;
    if (len == 0 || ins->finished)
        return 0;
    if (head_append(ins, p, len) < 0) {
        ins->oom = true;
        return -1;
    }
    int completed = 0;
    for (int i = 0; i < ins->ncaps; i++) {
        struct capture *c = &ins->caps[i];
        uint32_t had = c->have;
        cap_fill(c, ins->pos, p, len);
        if (had < c->len && c->have == c->len)
            completed++;
    }
    ins->chunk = p;
    ins->chunk_off = ins->pos;
    ins->chunk_len = len;
    ins->pos = len > UINT64_MAX - ins->pos ? UINT64_MAX : ins->pos + len;
    tail_append(ins, p, len);
    /* New knowledge (a full head, a finished capture) may point further;
     * a capture filled at once from this chunk may point further again. */
    bool head_done = !ins->head_done && ins->pos >= ins->head_limit;
    if (head_done)
        ins->head_done = true;
    if (head_done || completed) {
        uint64_t before;
        do {
            before = progress(ins);
            nb_fmt_vhdx_plan(ins);
        } while (progress(ins) != before);
    }
    ins->chunk = NULL;
    return ins->oom ? -1 : 0;
}

/* Moves the stream forward to off without data (fd variant only; off is
 * never before a byte a capture still needs, see next_needed). */
static void skip_to(struct nb_format_inspector *ins, uint64_t off)
{
    if (off <= ins->pos)
        return;
    ins->pos = off;
    ins->tail_len = 0;
    for (int i = 0; i < ins->ncaps; i++) {
        struct capture *c = &ins->caps[i];
        if (c->have < c->len && c->off + c->have < off)
            c->missed = true;
    }
}

/* ---- detection ---------------------------------------------------------- */

static const struct {
    const char *format, *disk_format, *qemu_driver;
} NAMES[] = {
    [NB_FORMAT_RAW] = {"raw", "raw", "raw"},
    [NB_FORMAT_QCOW2] = {"qcow2", "qcow2", "qcow2"},
    [NB_FORMAT_VMDK] = {"vmdk", "vmdk", "vmdk"},
    [NB_FORMAT_VPC] = {"vpc", "vhd", "vpc"},
    [NB_FORMAT_VHDX] = {"vhdx", "vhdx", "vhdx"},
    [NB_FORMAT_ISO] = {"iso", "iso", "raw"},
    [NB_FORMAT_VDI] = {"vdi", "vdi", "vdi"},
    [NB_FORMAT_QCOW] = {"qcow", "qcow", "qcow"},
    [NB_FORMAT_QED] = {"qed", "qed", "qed"},
    [NB_FORMAT_LUKS] = {"luks", "luks", "luks"},
    [NB_FORMAT_PARALLELS] = {"parallels", "ploop", "parallels"},
    [NB_FORMAT_BOCHS] = {"bochs", "bochs", "bochs"},
    [NB_FORMAT_CLOOP] = {"cloop", "cloop", "cloop"},
};

const char *nb_format_name(enum nb_format_type type)
{
    return (unsigned)type < sizeof(NAMES) / sizeof(NAMES[0]) ? NAMES[type].format : "unknown";
}

const char *nb_format_disk_format(enum nb_format_type type)
{
    return (unsigned)type < sizeof(NAMES) / sizeof(NAMES[0]) ? NAMES[type].disk_format : "unknown";
}

static const char CLOOP_MAGIC[] = "#!/bin/sh\n#V2.0 Format\n"
                                  "modprobe cloop file=$0 && mount -r -t iso9660 /dev/cloop $1\n";

/* The non-raw formats the content matches, in qemu-img's order of
 * preference (ISO last: its marker sits at 32 KiB, in what other formats
 * may use freely). Returns how many were written to types[]. */
static int probe(const struct nb_format_inspector *ins, enum nb_format_type types[3])
{
    int n = 0;
    const uint8_t *q = at(ins, 0, 8);
    if (starts(ins, "QFI\xfb", 4))
        types[n++] = q && be32(q + 4) == 1 ? NB_FORMAT_QCOW : NB_FORMAT_QCOW2;
    else if (starts(ins, "QED\0", 4))
        types[n++] = NB_FORMAT_QED;
    else if (starts(ins, "KDMV", 4) || starts(ins, "COWD", 4) ||
             nb_fmt_vmdk_text_probe(ins->head,
                                    ins->head_len < QEMU_PROBE ? ins->head_len : QEMU_PROBE))
        types[n++] = NB_FORMAT_VMDK;
    else if (starts(ins, "conectix", 8))
        types[n++] = NB_FORMAT_VPC;
    else if (starts(ins, "vhdxfile", 8))
        types[n++] = NB_FORMAT_VHDX;
    else if (starts(ins, "LUKS\xba\xbe", 6))
        types[n++] = NB_FORMAT_LUKS;
    else if (starts(ins, "WithoutFreeSpace", 16) || starts(ins, "WithouFreSpacExt", 16))
        types[n++] = NB_FORMAT_PARALLELS;
    else if (starts(ins, "Bochs Virtual HD Image", 23))
        types[n++] = NB_FORMAT_BOCHS;
    else if (starts(ins, CLOOP_MAGIC, sizeof(CLOOP_MAGIC) - 1))
        types[n++] = NB_FORMAT_CLOOP;
    if (nb_fmt_vdi_probe(ins))
        types[n++] = NB_FORMAT_VDI;
    if (nb_fmt_iso_probe(ins))
        types[n++] = NB_FORMAT_ISO;
    return n;
}

static void detect(const struct nb_format_inspector *ins, struct nb_format_info *out)
{
    enum nb_format_type types[3];
    int n = probe(ins, types);
    memset(out, 0, sizeof(*out));
    out->type = n ? types[0] : NB_FORMAT_RAW;
    out->format = NAMES[out->type].format;
    out->disk_format = NAMES[out->type].disk_format;
    out->qemu_driver = NAMES[out->type].qemu_driver;
    out->file_size = ins->pos;
    out->also_matches = n > 1 ? NAMES[types[1]].format : NULL;
    switch (out->type) {
    case NB_FORMAT_RAW:
    case NB_FORMAT_ISO: out->virtual_size = ins->pos; break;
    case NB_FORMAT_QCOW2: nb_fmt_parse_qcow2(ins, out); break;
    case NB_FORMAT_VMDK:
        if (starts(ins, "KDMV", 4))
            nb_fmt_parse_vmdk4(ins, out);
        else if (starts(ins, "COWD", 4))
            nb_fmt_parse_vmdk3(ins, out);
        else
            nb_fmt_parse_vmdk_text(ins, out);
        break;
    case NB_FORMAT_VPC: nb_fmt_parse_vpc(ins, out); break;
    case NB_FORMAT_VHDX: nb_fmt_parse_vhdx(ins, out); break;
    case NB_FORMAT_VDI: nb_fmt_parse_vdi(ins, out); break;
    case NB_FORMAT_QCOW: nb_fmt_parse_qcow(ins, out); break;
    case NB_FORMAT_QED: nb_fmt_parse_qed(ins, out); break;
    case NB_FORMAT_LUKS:
    case NB_FORMAT_PARALLELS:
    case NB_FORMAT_BOCHS:
    case NB_FORMAT_CLOOP: unsafe(out, "%s images are not supported", out->format); break;
    }
}

int nb_format_inspector_finish(struct nb_format_inspector *ins, struct nb_format_info *out,
                               char *err, size_t errlen)
{
    if (ins->oom) {
        seterr(err, errlen, "out of memory while inspecting the image");
        return -1;
    }
    if (ins->finished) {
        seterr(err, errlen, "format inspector already finished");
        return -1;
    }
    ins->finished = true;
    detect(ins, out);
    return 0;
}

/* ---- reading a file ----------------------------------------------------- */

/* The next file offset the inspector needs, given the file size: the head,
 * then the next byte a capture waits for, then the tail. */
static uint64_t next_needed(const struct nb_format_inspector *ins, uint64_t size)
{
    if (ins->pos < ins->head_limit)
        return ins->pos;
    uint64_t next = size > TAIL_MAX ? size - TAIL_MAX : 0;
    for (int i = 0; i < ins->ncaps; i++) {
        const struct capture *c = &ins->caps[i];
        if (!c->missed && c->have < c->len && c->off + c->have < next)
            next = c->off + c->have;
    }
    return next > ins->pos ? next : ins->pos;
}

static int file_size(int fd, uint64_t *size)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -1;
    if (S_ISREG(st.st_mode)) {
        *size = (uint64_t)st.st_size;
        return 0;
    }
    off_t cur = lseek(fd, 0, SEEK_CUR), end = lseek(fd, 0, SEEK_END);
    if (cur < 0 || end < 0 || lseek(fd, cur, SEEK_SET) < 0)
        return -1;
    *size = (uint64_t)end;
    return 0;
}

int nb_format_inspect_fd(int fd, struct nb_format_info *out, char *err, size_t errlen)
{
    enum { CHUNK = 256 * 1024 };
    uint64_t size;
    int ret = -1;
    uint8_t *buf = malloc(CHUNK);
    struct nb_format_inspector *ins = nb_format_inspector_new();
    if (!buf || !ins) {
        seterr(err, errlen, "out of memory while inspecting the image");
        goto cleanup;
    }
    if (file_size(fd, &size) < 0) {
        seterr(err, errlen, "cannot size the image: %s", strerror(errno));
        goto cleanup;
    }
    while (ins->pos < size) {
        skip_to(ins, next_needed(ins, size));
        size_t want_n = size - ins->pos < CHUNK ? (size_t)(size - ins->pos) : CHUNK;
        ssize_t n = pread(fd, buf, want_n, (off_t)ins->pos);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            seterr(err, errlen, "cannot read the image: %s", strerror(errno));
            goto cleanup;
        }
        if (n == 0)
            break; /* the file shrank under us: inspect what was there */
        if (nb_format_inspector_feed(ins, buf, (size_t)n) < 0) {
            seterr(err, errlen, "out of memory while inspecting the image");
            goto cleanup;
        }
    }
    ret = nb_format_inspector_finish(ins, out, err, errlen);
cleanup:
    nb_format_inspector_free(ins);
    free(buf);
    return ret;
}

int nb_format_inspect_path(const char *path, struct nb_format_info *out, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        seterr(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    int ret = nb_format_inspect_fd(fd, out, err, errlen);
    close(fd);
    return ret;
}

/* ---- verdicts ------------------------------------------------------------ */

int nb_format_check_safe(const struct nb_format_info *info, char *why, size_t whylen)
{
    if (info->also_matches) {
        seterr(why, whylen, "image content matches more than one format (%s and %s); refusing it",
               info->format, info->also_matches);
        return -1;
    }
    if (info->unsafe_reason[0]) {
        seterr(why, whylen, "%s; refusing it", info->unsafe_reason);
        return -1;
    }
    return 0;
}

int nb_format_check_declared(const struct nb_format_info *info, const char *declared, char *why,
                             size_t whylen)
{
    if (!declared || !declared[0]) {
        seterr(why, whylen, "Image has no disk_format; its content is %s", info->disk_format);
        return -1;
    }
    /* Nova does not compare AMI-style images: they hold kernels, ramdisks
     * or raw disks under names that say nothing about the content. */
    if (!strcmp(declared, "ami") || !strcmp(declared, "aki") || !strcmp(declared, "ari"))
        return 0;
    const char *want = !strcmp(declared, "vpc") ? "vhd" : declared;
    if (strcmp(want, info->disk_format) == 0)
        return 0;
    seterr(why, whylen, "Image declared %s but its content is %s", declared, info->disk_format);
    return -1;
}
