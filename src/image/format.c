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
 * file named by the image, the image is refused. */
#include "image/format.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define KiB 1024u
#define MiB (1024u * 1024u)
#define HEAD_MAX (2 * MiB)   /* the largest head_limit */
#define HEAD_PROBE (4 * KiB) /* the bytes head_limit is decided on */
#define HEAD_MIN (64 * KiB)
#define QEMU_PROBE 512u /* bytes qemu-img's probes see (BLOCK_PROBE_BUF_SIZE) */
#define TAIL_MAX 2048u
#define CAP_MAX 4
#define CAP_LEN_MAX (64 * KiB)

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

static uint16_t le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}
static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t le64(const uint8_t *p)
{
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}
static uint16_t be16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}
static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}
static uint64_t be64(const uint8_t *p)
{
    return (uint64_t)be32(p) << 32 | be32(p + 4);
}

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

/* Records why the image is unsafe; the first reason found is kept. */
static void unsafe(struct nb_format_info *out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void unsafe(struct nb_format_info *out, const char *fmt, ...)
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
static void copy_name(char *dst, size_t size, const uint8_t *src, size_t n)
{
    size_t i, j = 0;
    for (i = 0; i < n && j + 1 < size && src[i]; i++)
        dst[j++] = (src[i] >= 0x20 && src[i] < 0x7f) ? (char)src[i] : '?';
    dst[j] = '\0';
}

/* ---- what the inspector holds ------------------------------------------ */

/* [a, a+n) lies inside [b, b+m)? Written so that nothing can overflow. */
static bool inside(uint64_t a, uint64_t n, uint64_t b, uint64_t m)
{
    return a >= b && a - b <= m && n <= m - (a - b);
}

/* Pointer to the len bytes at file offset off if all of them are held. */
static const uint8_t *at(const struct nb_format_inspector *ins, uint64_t off, size_t len)
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

/* Asks for [off, off+len) (len capped at CAP_LEN_MAX) to be kept when the
 * stream passes it. Bytes already held, or in the chunk being fed, are taken
 * at once; if some of them already went by unkept, the capture is "missed"
 * and at() will not find them. Out of slots or memory: the request is
 * dropped (memory failure is remembered and reported by finish). */
static void want(struct nb_format_inspector *ins, uint64_t off, uint32_t len)
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

/* ---- VHDX layout (shared by planning and parsing) ---------------------- */

#define VHDX_REGION_TABLE 0x30000u /* 192 KiB; the backup copy follows at 256 KiB */
#define VHDX_TABLE_LEN (64 * KiB)  /* region table and metadata table size */
#define VHDX_MAX_ENTRIES 2047u

/* GUIDs as stored on disk (first three fields little-endian). */
static const uint8_t GUID_METADATA_REGION[16] = {0x06, 0xa2, 0x7c, 0x8b, 0x90, 0x47, 0x9a, 0x4b,
                                                 0xb8, 0xfe, 0x57, 0x5f, 0x05, 0x0f, 0x88, 0x6e};
static const uint8_t GUID_FILE_PARAMETERS[16] = {0x37, 0x67, 0xa1, 0xca, 0x36, 0xfa, 0x43, 0x4d,
                                                 0xb3, 0xb6, 0x33, 0xf0, 0xaa, 0x44, 0xe7, 0x6b};
static const uint8_t GUID_VIRTUAL_DISK_SIZE[16] = {0x24, 0x42, 0xa5, 0x2f, 0x1b, 0xcd, 0x76, 0x48,
                                                   0xb2, 0x11, 0x5d, 0xbe, 0xd8, 0x3b, 0xf4, 0xb8};
static const uint8_t GUID_PARENT_LOCATOR[16] = {0x2d, 0x5f, 0xd3, 0xa8, 0x0b, 0xb3, 0x4d, 0x45,
                                                0xab, 0xf7, 0xd3, 0xd8, 0x48, 0x34, 0xab, 0x0c};

/* Finds the metadata region in the region table (or its backup). Returns 0
 * with *off set, -1 if the table is not held, malformed or lacks it. */
static int vhdx_meta_region(const struct nb_format_inspector *ins, uint64_t *off)
{
    for (uint32_t copy = 0; copy < 2; copy++) {
        uint64_t base = VHDX_REGION_TABLE + copy * VHDX_TABLE_LEN;
        const uint8_t *h = at(ins, base, 16);
        if (!h || memcmp(h, "regi", 4) != 0)
            continue;
        uint32_t count = le32(h + 8);
        const uint8_t *e = count <= VHDX_MAX_ENTRIES ? at(ins, base + 16, count * 32u) : NULL;
        if (!e)
            continue;
        for (uint32_t i = 0; i < count; i++, e += 32) {
            if (memcmp(e, GUID_METADATA_REGION, 16) == 0) {
                *off = le64(e + 16);
                return 0;
            }
        }
    }
    return -1;
}

/* Looks an item up in the metadata table at meta. Returns 1 and sets its file
 * offset and length, 0 if absent, -1 if the table is not held or malformed. */
static int vhdx_meta_item(const struct nb_format_inspector *ins, uint64_t meta,
                          const uint8_t guid[16], uint64_t *off, uint32_t *len)
{
    const uint8_t *h = meta <= UINT64_MAX - VHDX_TABLE_LEN ? at(ins, meta, 32) : NULL;
    if (!h || memcmp(h, "metadata", 8) != 0)
        return -1;
    uint32_t count = le16(h + 10);
    const uint8_t *e = count <= VHDX_MAX_ENTRIES ? at(ins, meta + 32, count * 32u) : NULL;
    if (!e)
        return -1;
    for (uint32_t i = 0; i < count; i++, e += 32) {
        if (memcmp(e, guid, 16) != 0)
            continue;
        uint32_t rel = le32(e + 16);
        if (meta > UINT64_MAX - rel)
            return -1;
        *off = meta + rel;
        *len = le32(e + 20);
        return 1;
    }
    return 0;
}

/* Requests the VHDX regions the held headers point at. */
static void vhdx_plan(struct nb_format_inspector *ins)
{
    uint64_t meta, off;
    uint32_t len;
    if (ins->head_len < 8 || memcmp(ins->head, "vhdxfile", 8) != 0)
        return;
    if (vhdx_meta_region(ins, &meta) < 0)
        return;
    want(ins, meta, VHDX_TABLE_LEN);
    if (vhdx_meta_item(ins, meta, GUID_VIRTUAL_DISK_SIZE, &off, &len) == 1)
        want(ins, off, 8);
    if (vhdx_meta_item(ins, meta, GUID_FILE_PARAMETERS, &off, &len) == 1)
        want(ins, off, 8);
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

static bool vmdk_text_probe(const uint8_t *buf, size_t n);

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
    } else if (vmdk_text_probe(p, QEMU_PROBE)) {
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
            vhdx_plan(ins);
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

/* ---- format parsers ----------------------------------------------------- */

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

/* -- qcow2 -- */

#define QCOW2_INCOMPAT_CORRUPT (1u << 1)
#define QCOW2_INCOMPAT_DATA_FILE (1u << 2)
/* Dirty, corrupt, data file, compression type: the bits Glance knows. It
 * counts anything above (extended L2 included) as unknown and unsafe. */
#define QCOW2_INCOMPAT_KNOWN 0xfu
#define QCOW2_EXT_DATA_FILE 0x44415441u

static void qcow2_extensions(const struct nb_format_inspector *ins, struct nb_format_info *out,
                             uint64_t start, uint64_t end)
{
    uint64_t off = start;
    while (off <= end && end - off >= 8) {
        const uint8_t *p = at(ins, off, 8);
        if (!p) {
            unsafe(out, "qcow2 header extensions are truncated");
            return;
        }
        uint32_t magic = be32(p), len = be32(p + 4);
        off += 8;
        if (magic == 0)
            return;
        if (len > end - off) {
            unsafe(out, "qcow2 header extension 0x%08x is too large", magic);
            return;
        }
        if (magic == QCOW2_EXT_DATA_FILE) {
            const uint8_t *name = at(ins, off, len);
            out->has_data_file = true;
            if (name)
                copy_name(out->data_file, sizeof(out->data_file), name, len);
        }
        off += ((uint64_t)len + 7) & ~(uint64_t)7;
    }
}

static void qcow2_backing(const struct nb_format_inspector *ins, struct nb_format_info *out,
                          uint64_t bfo, uint32_t bfs, uint64_t cs)
{
    const uint8_t *name = NULL;
    out->has_backing_file = true;
    if (bfo <= cs && bfs <= 1023 && bfs <= cs - bfo)
        name = at(ins, bfo, bfs);
    if (name)
        copy_name(out->backing_file, sizeof(out->backing_file), name, bfs);
    else
        snprintf(out->backing_file, sizeof(out->backing_file), "unreadable name");
    unsafe(out, "qcow2 image has a backing file (%s)", out->backing_file);
}

/* QEMU's bound on a qcow2 L1 table (QCOW_MAX_L1_SIZE, bytes of 8-byte
 * entries): with clusters of 2^cb bytes an L1 entry maps 2^(2cb-3) bytes,
 * so QEMU opens nothing larger than 2^22 such entries map (128 GiB with
 * 512-byte clusters, 2 PiB with the default 64 KiB, 2 EiB with 2 MiB). */
#define QCOW2_MAX_L1_ENTRIES ((32u * MiB) / 8u)

/* The virtual size against what QEMU opens: at most QCOW2_MAX_L1_ENTRIES
 * L1 entries ("Image is too big") and an L1 table that covers the size
 * ("L1 table is too small"). 0, or -1 with out marked unsafe. */
static int qcow2_size_check(struct nb_format_info *out, uint32_t l1_size, uint32_t cb)
{
    unsigned shift = 2 * cb - 3;
    uint64_t per_entry = (uint64_t)1 << shift;
    uint64_t needed = (out->virtual_size >> shift) + ((out->virtual_size & (per_entry - 1)) != 0);
    if (needed > QCOW2_MAX_L1_ENTRIES) {
        unsafe(out,
               "qcow2 virtual size %llu bytes is more than QEMU opens with %llu-byte clusters "
               "(at most %llu bytes)",
               (unsigned long long)out->virtual_size, (unsigned long long)1 << cb,
               (unsigned long long)QCOW2_MAX_L1_ENTRIES << shift);
        return -1;
    }
    if (l1_size < needed) {
        unsafe(out, "qcow2 L1 table (%u entries) is too small for virtual size %llu bytes", l1_size,
               (unsigned long long)out->virtual_size);
        return -1;
    }
    return 0;
}

static void parse_qcow2(const struct nb_format_inspector *ins, struct nb_format_info *out)
{
    const uint8_t *h = at(ins, 0, 72);
    if (!h) {
        unsafe(out, "qcow2 header is truncated");
        return;
    }
    uint32_t version = be32(h + 4), cb = be32(h + 20);
    uint64_t bfo = be64(h + 8);
    uint32_t bfs = be32(h + 16);
    out->version = version;
    out->virtual_size = be64(h + 24);
    out->cluster_bits = cb;
    out->encrypted = be32(h + 32) != 0;
    uint64_t header_len = 72;
    if (version == 3) {
        const uint8_t *h3 = at(ins, 0, 104);
        if (!h3) {
            unsafe(out, "qcow2 version 3 header is truncated");
            return;
        }
        out->incompatible_features = be64(h3 + 72);
        header_len = be32(h3 + 100);
    }
    if (version != 2 && version != 3) {
        unsafe(out, "qcow2 version %u is not supported", version);
        return;
    }
    if (cb < 9 || cb > 21) {
        unsafe(out, "qcow2 cluster size 2^%u is invalid", cb);
        return;
    }
    uint64_t cs = (uint64_t)1 << cb;
    if (qcow2_size_check(out, be32(h + 36), cb) < 0)
        return;
    if (bfo != 0)
        qcow2_backing(ins, out, bfo, bfs, cs);
    if (out->incompatible_features & QCOW2_INCOMPAT_DATA_FILE)
        out->has_data_file = true;
    if (version == 3 && (header_len < 104 || header_len > cs))
        unsafe(out, "qcow2 header length %llu is invalid", (unsigned long long)header_len);
    else
        qcow2_extensions(ins, out, header_len, bfo && bfo < cs ? bfo : cs);
    if (out->has_data_file)
        unsafe(out, "qcow2 image has an external data file (%s)",
               out->data_file[0] ? out->data_file : "name not recorded in the image");
    if (out->incompatible_features & ~(uint64_t)QCOW2_INCOMPAT_KNOWN)
        unsafe(out, "qcow2 image has unsupported incompatible features (0x%llx)",
               (unsigned long long)(out->incompatible_features & ~(uint64_t)QCOW2_INCOMPAT_KNOWN));
    if (out->incompatible_features & QCOW2_INCOMPAT_CORRUPT)
        unsafe(out, "qcow2 image is marked corrupt");
    if (out->encrypted)
        unsafe(out, "qcow2 image is encrypted");
}

/* -- VMDK -- */

#define VMDK_DESC_MAX ((1u << 20) - 1) /* QEMU reads at most this much descriptor */
#define VMDK_PARENT_WINDOW 10240u      /* QEMU looks for parentFileNameHint here */
#define VMDK4_GD_AT_END UINT64_MAX

struct vmdk_desc {
    int extents;
    bool external; /* an extent QEMU would open as a file */
    bool bad_line; /* a line Glance's parser refuses */
    bool not_text; /* NUL or non-ASCII inside */
    bool has_create_type;
    uint64_t rw_sectors; /* what QEMU sums for a descriptor file */
};

static bool lower_eq(const char *s, size_t n, const char *word)
{
    size_t i;
    for (i = 0; i < n && word[i]; i++) {
        char c = s[i];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        if (c != word[i])
            return false;
    }
    return i == n && word[i] == '\0';
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/* Next whitespace-separated token of [*p, end). */
static size_t token(const char **p, const char *end, const char **tok)
{
    while (*p < end && is_space(**p))
        (*p)++;
    *tok = *p;
    while (*p < end && !is_space(**p))
        (*p)++;
    return (size_t)(*p - *tok);
}

/* An extent line: ACCESS SECTORS TYPE "FILE" [OFFSET]. sparse_file: the
 * descriptor is embedded in a sparse image, where QEMU ignores the extent
 * lines; only SPARSE extents naming no path are accepted there. */
static void vmdk_extent(const char *s, const char *end, bool sparse_file, struct vmdk_desc *d,
                        struct nb_format_info *out)
{
    const char *acc, *num, *type, *p = s;
    size_t acc_n = token(&p, end, &acc), num_n = token(&p, end, &num);
    size_t type_n = token(&p, end, &type);
    while (p < end && is_space(*p))
        p++;
    const char *name = p < end && *p == '"' ? p + 1 : NULL;
    const char *name_end = name ? memchr(name, '"', (size_t)(end - name)) : NULL;
    uint64_t sectors = 0;
    bool num_ok = num_n > 0 && num_n <= 19;
    for (size_t i = 0; i < num_n && num_ok; i++) {
        num_ok = num[i] >= '0' && num[i] <= '9';
        if (num_ok)
            sectors = sectors * 10 + (uint64_t)(num[i] - '0');
    }
    d->extents++;
    bool sparse = lower_eq(type, type_n, "sparse");
    if (!name_end) {
        d->bad_line = true;
        return;
    }
    /* extent_file names the first external extent, else the first extent. */
    bool external = !sparse_file || !sparse || memchr(s, '/', (size_t)(end - s));
    if (!out->extent_file[0] || (external && !d->external))
        copy_name(out->extent_file, sizeof(out->extent_file), (const uint8_t *)name,
                  (size_t)(name_end - name));
    if (external)
        d->external = true;
    if (lower_eq(acc, acc_n, "rw") && num_ok && sectors > 0 && d->rw_sectors <= UINT64_MAX / 512 &&
        sectors <= UINT64_MAX / 512 - d->rw_sectors)
        d->rw_sectors += sectors;
}

/* A "key = value" line; records createType. (parentFileNameHint is looked
 * for the way QEMU does, in vmdk_parent_hint.) */
static void vmdk_field(const char *s, const char *eq, const char *end, struct vmdk_desc *d,
                       struct nb_format_info *out)
{
    const char *k = s, *ke = eq, *v = eq + 1, *ve = end;
    while (ke > k && is_space(ke[-1]))
        ke--;
    while (v < ve && is_space(*v))
        v++;
    while (ve > v && is_space(ve[-1]))
        ve--;
    if (ve - v >= 2 && *v == '"' && ve[-1] == '"') {
        v++;
        ve--;
    }
    if (lower_eq(k, (size_t)(ke - k), "createtype")) {
        d->has_create_type = true;
        copy_name(out->create_type, sizeof(out->create_type), (const uint8_t *)v, (size_t)(ve - v));
    }
}

/* Parses descriptor text [s, s+n) line by line with Glance's rules: blank,
 * comment, ddb.*, key=value and extent lines; anything else is refused. */
static void vmdk_descriptor(const char *s, size_t n, bool sparse_file, struct vmdk_desc *d,
                            struct nb_format_info *out)
{
    while (n > 0 && s[n - 1] == '\0')
        n--;
    for (size_t i = 0; i < n; i++)
        if (s[i] == '\0' || (unsigned char)s[i] > 0x7f)
            d->not_text = true;
    const char *p = s, *end = s + n;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end, *ls = p;
        p = nl ? nl + 1 : end;
        while (ls < le && (is_space(*ls)))
            ls++;
        while (le > ls && is_space(le[-1]))
            le--;
        if (ls == le || *ls == '#')
            continue;
        const char *eq = memchr(ls, '=', (size_t)(le - ls));
        const char *sp = memchr(ls, ' ', (size_t)(le - ls));
        const char *tok;
        const char *q = ls;
        size_t tn = token(&q, le, &tok);
        if (le - ls >= 3 && lower_eq(ls, 3, "ddb"))
            continue;
        if (eq && (!sp || sp > eq))
            vmdk_field(ls, eq, le, d, out);
        else if (lower_eq(tok, tn, "rw") || lower_eq(tok, tn, "rdonly") ||
                 lower_eq(tok, tn, "noaccess"))
            vmdk_extent(ls, le, sparse_file, d, out);
        else
            d->bad_line = true;
    }
}

/* QEMU opens the file named by parentFileNameHint wherever the string shows
 * up in the descriptor window (it uses strstr), so look the same way. */
static void vmdk_parent_hint(const uint8_t *w, size_t n, struct nb_format_info *out)
{
    static const char key[] = "parentFileNameHint";
    const size_t kl = sizeof(key) - 1;
    const uint8_t *hit = NULL;
    for (size_t i = 0; i + kl <= n && !hit; i++) {
        if (w[i] == '\0')
            break; /* QEMU's strstr stops at the first NUL */
        if (memcmp(w + i, key, kl) == 0)
            hit = w + i;
    }
    if (!hit)
        return;
    out->has_backing_file = true;
    const uint8_t *v = hit + kl, *e = w + n;
    while (v < e && (*v == '=' || *v == '"' || *v == ' '))
        v++;
    const uint8_t *q = memchr(v, '"', (size_t)(e - v));
    copy_name(out->backing_file, sizeof(out->backing_file), v,
              q ? (size_t)(q - v) : (size_t)(e - v));
    unsafe(out, "VMDK image has a parent file (%s)", out->backing_file);
}

/* Reads the footer that streamOptimized images with the grain directory at
 * the end carry: a footer marker, the header, an end-of-stream marker, in
 * the last three sectors (QEMU rounds the size up to a sector and reads
 * zeros past the end). Copies them into buf; returns the header in it, or
 * NULL when absent or invalid. */
static const uint8_t *vmdk_footer(const struct nb_format_inspector *ins, uint8_t buf[1536])
{
    uint64_t end = (ins->pos + 511) & ~(uint64_t)511, held = 1536 - (end - ins->pos);
    if (ins->pos < 1536 + 512)
        return NULL;
    const uint8_t *f = at(ins, end - 1536, (size_t)held);
    if (!f)
        return NULL;
    memset(buf, 0, 1536);
    memcpy(buf, f, (size_t)held);
    if (le32(buf + 8) != 0 || le32(buf + 12) != 3 || memcmp(buf + 512, "KDMV", 4) != 0 ||
        le64(buf + 1024) != 0 || le32(buf + 1032) != 0 || le32(buf + 1036) != 0)
        return NULL;
    return buf + 512;
}

/* Checks a VMDK4 header (or its footer). Returns -1 when nothing more can
 * be read; sets *as_file when QEMU would open the descriptor as a file. */
static int vmdk4_header(const struct nb_format_inspector *ins, struct nb_format_info *out,
                        uint64_t *desc_num, bool *as_file)
{
    uint8_t footer[1536];
    const uint8_t *h = at(ins, 0, 80);
    if (!h) {
        unsafe(out, "VMDK header is truncated");
        return -1;
    }
    uint64_t capacity = le64(h + 12), desc_sec = le64(h + 28), grain_off = le64(h + 64);
    *desc_num = le64(h + 36);
    if (grain_off > ins->pos / 512)
        unsafe(out, "VMDK image is truncated");
    /* QEMU checks this before reading any footer. */
    *as_file = capacity == 0 && desc_sec != 0;
    if (*as_file)
        unsafe(out, "VMDK header has no capacity, so QEMU would open its descriptor's extents");
    if (desc_sec != 1)
        unsafe(out, "VMDK descriptor is not at sector 1");
    if (le64(h + 56) == VMDK4_GD_AT_END) {
        h = vmdk_footer(ins, footer);
        if (!h) {
            unsafe(out, "VMDK footer is missing or invalid");
            return -1;
        }
        capacity = le64(h + 12);
    }
    out->version = le32(h + 4);
    if (out->version < 1 || out->version > 3)
        unsafe(out, "VMDK version %u is not supported", out->version);
    if (capacity > UINT64_MAX / 512)
        unsafe(out, "VMDK capacity %llu is invalid", (unsigned long long)capacity);
    else
        out->virtual_size = capacity * 512;
    return 0;
}

/* A sparse VMDK4 image: the header, then the descriptor embedded at sector 1,
 * which must be a monolithicSparse/streamOptimized one with internal extents
 * only and no parent. */
static void parse_vmdk4(const struct nb_format_inspector *ins, struct nb_format_info *out)
{
    uint64_t desc_num;
    bool as_file;
    if (vmdk4_header(ins, out, &desc_num, &as_file) < 0)
        return;
    uint64_t avail = ins->pos > 512 ? ins->pos - 512 : 0;
    uint64_t dlen = desc_num < VMDK_DESC_MAX / 512 ? desc_num * 512 : VMDK_DESC_MAX;
    uint64_t wlen = dlen > VMDK_PARENT_WINDOW ? dlen : VMDK_PARENT_WINDOW;
    if (dlen > avail)
        unsafe(out, "VMDK descriptor is truncated");
    dlen = dlen < avail ? dlen : avail;
    wlen = wlen < avail ? wlen : avail;
    const uint8_t *win = at(ins, 512, (size_t)wlen);
    if (!win) {
        unsafe(out, "VMDK descriptor is truncated");
        return;
    }
    vmdk_parent_hint(win, (size_t)wlen, out);
    struct vmdk_desc d = {0};
    vmdk_descriptor((const char *)win, (size_t)dlen, !as_file, &d, out);
    out->has_external_extent = d.external;
    if (as_file)
        out->virtual_size = d.rw_sectors * 512;
    if (d.not_text || d.bad_line)
        unsafe(out, "VMDK descriptor is not valid descriptor text");
    if (d.external)
        unsafe(out, "VMDK descriptor has an extent that points at a file (%s)", out->extent_file);
    if (d.extents == 0)
        unsafe(out, "VMDK descriptor lists no extents");
    if (!d.has_create_type)
        unsafe(out, "VMDK descriptor has no createType");
    else if (strcmp(out->create_type, "monolithicSparse") != 0 &&
             strcmp(out->create_type, "streamOptimized") != 0)
        unsafe(out, "VMDK create type %s is not allowed", out->create_type);
}

/* A VMDK descriptor file: text only, the data lives in the files its extents
 * name, which QEMU opens relative to the descriptor. Never safe. */
static void parse_vmdk_text(const struct nb_format_inspector *ins, struct nb_format_info *out)
{
    size_t n = ins->head_len < VMDK_DESC_MAX ? ins->head_len : VMDK_DESC_MAX;
    const char *text = (const char *)ins->head;
    const char *nul = memchr(text, '\0', n);
    if (nul)
        n = (size_t)(nul - text);
    struct vmdk_desc d = {0};
    out->vmdk_descriptor_file = true;
    vmdk_descriptor(text, n, false, &d, out);
    vmdk_parent_hint((const uint8_t *)text, n, out);
    out->has_external_extent = d.extents > 0;
    out->virtual_size = d.rw_sectors * 512;
    if (d.extents > 0)
        unsafe(out, "VMDK descriptor file points at host file %s (createType %s)", out->extent_file,
               out->create_type[0] ? out->create_type : "unknown");
    else
        unsafe(out, "VMDK descriptor file lists no extents");
}

/* qemu-img's VMDK text probe: comment and blank lines, then "version=N". */
static bool vmdk_text_probe(const uint8_t *buf, size_t n)
{
    if (n == 0)
        return false;
    const char *p = (const char *)buf, *end = p + n;
    while (p < end) {
        if (*p == '#') {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            if (!nl)
                return false;
            p = nl + 1;
            continue;
        }
        if (*p == ' ') {
            while (p < end && *p == ' ')
                p++;
            if (p < end && *p == '\r')
                p++;
            if (p == end || *p != '\n')
                return false;
            p++;
            continue;
        }
        for (char v = '1'; v <= '3'; v++) {
            char lf[] = {'v', 'e', 'r', 's', 'i', 'o', 'n', '=', v, '\n'};
            char crlf[] = {'v', 'e', 'r', 's', 'i', 'o', 'n', '=', v, '\r', '\n'};
            if ((size_t)(end - p) >= sizeof(lf) && memcmp(p, lf, sizeof(lf)) == 0)
                return true;
            if ((size_t)(end - p) >= sizeof(crlf) && memcmp(p, crlf, sizeof(crlf)) == 0)
                return true;
        }
        return false;
    }
    return false;
}

static void parse_vmdk3(const struct nb_format_inspector *ins, struct nb_format_info *out)
{
    const uint8_t *h = at(ins, 0, 16);
    if (h) {
        out->version = le32(h + 4);
        out->virtual_size = (uint64_t)le32(h + 12) * 512;
    }
    const uint8_t *win = at(ins, 512, VMDK_PARENT_WINDOW);
    if (win)
        vmdk_parent_hint(win, VMDK_PARENT_WINDOW, out);
    unsafe(out, "VMDK3 (COWD) images are not supported");
}

/* -- VHD (vpc) -- */

#define VHD_MAX_GEOMETRY (65535ull * 16 * 255)
#define VHD_MAX_SECTORS 0xff000000ull
#define VHD_FIXED 2
#define VHD_DYNAMIC 3
#define VHD_DIFFERENCING 4

static void parse_vpc(const struct nb_format_inspector *ins, struct nb_format_info *out)
{
    const uint8_t *f = at(ins, 0, 512);
    if (!f) {
        unsafe(out, "VHD footer is truncated");
        return;
    }
    uint64_t sectors = (uint64_t)be16(f + 56) * f[58] * f[59];
    const uint8_t *app = f + 28;
    /* QEMU trusts the CHS geometry unless a creator known to use the size
     * field wrote the image, or the geometry is the maximum. */
    bool use_chs = memcmp(app, "win ", 4) && memcmp(app, "qem2", 4) && memcmp(app, "d2v ", 4) &&
                   memcmp(app, "CTXS", 4) && memcmp(app, "tap\0", 4);
    if (!use_chs || sectors == VHD_MAX_GEOMETRY)
        sectors = be64(f + 48) / 512;
    uint32_t type = be32(f + 60);
    out->version = be32(f + 12);
    if (sectors > VHD_MAX_SECTORS)
        unsafe(out, "VHD size exceeds 2040 GiB");
    out->virtual_size = sectors * 512;
    if (type == VHD_DIFFERENCING) {
        out->has_parent = true;
        unsafe(out, "VHD image is a differencing disk with a parent file");
    } else if (type != VHD_FIXED && type != VHD_DYNAMIC) {
        unsafe(out, "VHD disk type %u is not supported", type);
    }
}

/* -- VHDX -- */

static void parse_vhdx(const struct nb_format_inspector *ins, struct nb_format_info *out)
{
    const uint8_t *hd = at(ins, 64 * KiB, 68);
    if (hd && memcmp(hd, "head", 4) == 0)
        out->version = le16(hd + 66);
    uint64_t meta, off;
    uint32_t len;
    if (vhdx_meta_region(ins, &meta) < 0) {
        unsafe(out, "VHDX region table is missing or has no metadata region");
        return;
    }
    int r = vhdx_meta_item(ins, meta, GUID_VIRTUAL_DISK_SIZE, &off, &len);
    const uint8_t *v = r == 1 && len >= 8 ? at(ins, off, 8) : NULL;
    if (r < 0 || !v) {
        unsafe(out, "VHDX metadata could not be read");
        return;
    }
    out->virtual_size = le64(v);
    if (vhdx_meta_item(ins, meta, GUID_PARENT_LOCATOR, &off, &len) == 1)
        out->has_parent = true;
    r = vhdx_meta_item(ins, meta, GUID_FILE_PARAMETERS, &off, &len);
    const uint8_t *fp = r == 1 && len >= 8 ? at(ins, off, 8) : NULL;
    if (fp && (le32(fp + 4) & 2))
        out->has_parent = true;
    else if (!fp)
        unsafe(out, "VHDX file parameters could not be read");
    if (out->has_parent)
        unsafe(out, "VHDX image is a differencing disk with a parent file");
}

/* -- ISO 9660 / UDF, VDI, and the formats only recognised -- */

#define ISO_DESC 32768u

static bool iso_probe(const struct nb_format_inspector *ins)
{
    /* Glance/Nova want the whole system area and first descriptor. */
    const uint8_t *d = at(ins, ISO_DESC, 2048);
    return d && (memcmp(d + 1, "CD001", 5) == 0 || memcmp(d + 1, "NSR02", 5) == 0 ||
                 memcmp(d + 1, "NSR03", 5) == 0);
}

static bool vdi_probe(const struct nb_format_inspector *ins)
{
    const uint8_t *h = at(ins, 0x40, 4);
    return h && le32(h) == 0xbeda107fu;
}

static void parse_vdi(const struct nb_format_inspector *ins, struct nb_format_info *out)
{
    const uint8_t *h = at(ins, 0, 0x178);
    if (!h) {
        unsafe(out, "VDI header is truncated");
        return;
    }
    out->version = le32(h + 0x44);
    out->virtual_size = le64(h + 0x170);
}

/* qcow version 1: only its size and backing file, for the refusal. */
static void parse_qcow(const struct nb_format_inspector *ins, struct nb_format_info *out)
{
    const uint8_t *h = at(ins, 0, 32);
    if (h) {
        uint64_t bfo = be64(h + 8);
        uint32_t bfs = be32(h + 16);
        const uint8_t *name = bfs < NB_FORMAT_NAME_MAX ? at(ins, bfo, bfs) : NULL;
        out->version = 1;
        out->virtual_size = be64(h + 24);
        out->has_backing_file = bfo != 0;
        if (bfo && name)
            copy_name(out->backing_file, sizeof(out->backing_file), name, bfs);
        if (bfo)
            unsafe(out, "qcow image has a backing file (%s)", name ? out->backing_file : "?");
    }
    unsafe(out, "qcow images are not supported");
}

/* QED: its size and backing file, for the refusal. */
static void parse_qed(const struct nb_format_inspector *ins, struct nb_format_info *out)
{
    const uint8_t *h = at(ins, 0, 64);
    if (h) {
        uint32_t bfo = le32(h + 56), bfs = le32(h + 60);
        const uint8_t *name = bfs < NB_FORMAT_NAME_MAX ? at(ins, bfo, bfs) : NULL;
        out->virtual_size = le64(h + 48);
        out->has_backing_file = (le64(h + 16) & 1) != 0; /* QED_F_BACKING_FILE */
        if (out->has_backing_file && name)
            copy_name(out->backing_file, sizeof(out->backing_file), name, bfs);
        if (out->has_backing_file)
            unsafe(out, "qed image has a backing file (%s)", name ? out->backing_file : "?");
    }
    unsafe(out, "qed images are not supported");
}

static bool starts(const struct nb_format_inspector *ins, const char *magic, size_t n)
{
    const uint8_t *p = at(ins, 0, n);
    return p && memcmp(p, magic, n) == 0;
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
             vmdk_text_probe(ins->head, ins->head_len < QEMU_PROBE ? ins->head_len : QEMU_PROBE))
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
    if (vdi_probe(ins))
        types[n++] = NB_FORMAT_VDI;
    if (iso_probe(ins))
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
    case NB_FORMAT_QCOW2: parse_qcow2(ins, out); break;
    case NB_FORMAT_VMDK:
        if (starts(ins, "KDMV", 4))
            parse_vmdk4(ins, out);
        else if (starts(ins, "COWD", 4))
            parse_vmdk3(ins, out);
        else
            parse_vmdk_text(ins, out);
        break;
    case NB_FORMAT_VPC: parse_vpc(ins, out); break;
    case NB_FORMAT_VHDX: parse_vhdx(ins, out); break;
    case NB_FORMAT_VDI: parse_vdi(ins, out); break;
    case NB_FORMAT_QCOW: parse_qcow(ins, out); break;
    case NB_FORMAT_QED: parse_qed(ins, out); break;
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
