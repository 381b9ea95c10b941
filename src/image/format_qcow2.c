/* format_qcow2.c - the format inspector's QEMU-native parsers: qcow2 (header,
 * extensions, backing file, L1 bound against what QEMU opens), and qcow
 * version 1 and QED, which are only read for the refusal. Called by
 * detection at finish (format.c); see format_int.h. */
#include "image/format_int.h"

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

void nb_fmt_parse_qcow2(const struct nb_format_inspector *ins, struct nb_format_info *out)
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

/* -- qcow (version 1) and QED -- */

/* qcow version 1: only its size and backing file, for the refusal. */
void nb_fmt_parse_qcow(const struct nb_format_inspector *ins, struct nb_format_info *out)
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
void nb_fmt_parse_qed(const struct nb_format_inspector *ins, struct nb_format_info *out)
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
