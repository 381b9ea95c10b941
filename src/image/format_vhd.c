/* format_vhd.c - the format inspector's parsers for the virtual-hard-disk
 * family and ISO: VHD (vpc) footer, VHDX region and metadata tables (with the
 * planner that asks the streaming core to capture them), VDI header, and the
 * ISO 9660 / UDF volume descriptor probe. See format_int.h. */
#include "image/format_int.h"

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
void nb_fmt_vhdx_plan(struct nb_format_inspector *ins)
{
    uint64_t meta, off;
    uint32_t len;
    if (ins->head_len < 8 || memcmp(ins->head, "vhdxfile", 8) != 0)
        return;
    if (vhdx_meta_region(ins, &meta) < 0)
        return;
    nb_fmt_want(ins, meta, VHDX_TABLE_LEN);
    if (vhdx_meta_item(ins, meta, GUID_VIRTUAL_DISK_SIZE, &off, &len) == 1)
        nb_fmt_want(ins, off, 8);
    if (vhdx_meta_item(ins, meta, GUID_FILE_PARAMETERS, &off, &len) == 1)
        nb_fmt_want(ins, off, 8);
}

/* -- VHD (vpc) -- */

#define VHD_MAX_GEOMETRY (65535ull * 16 * 255)
#define VHD_MAX_SECTORS 0xff000000ull
#define VHD_FIXED 2
#define VHD_DYNAMIC 3
#define VHD_DIFFERENCING 4

void nb_fmt_parse_vpc(const struct nb_format_inspector *ins, struct nb_format_info *out)
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

void nb_fmt_parse_vhdx(const struct nb_format_inspector *ins, struct nb_format_info *out)
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

/* -- ISO 9660 / UDF, VDI -- */

#define ISO_DESC 32768u

bool nb_fmt_iso_probe(const struct nb_format_inspector *ins)
{
    /* Glance/Nova want the whole system area and first descriptor. */
    const uint8_t *d = at(ins, ISO_DESC, 2048);
    return d && (memcmp(d + 1, "CD001", 5) == 0 || memcmp(d + 1, "NSR02", 5) == 0 ||
                 memcmp(d + 1, "NSR03", 5) == 0);
}

bool nb_fmt_vdi_probe(const struct nb_format_inspector *ins)
{
    const uint8_t *h = at(ins, 0x40, 4);
    return h && le32(h) == 0xbeda107fu;
}

void nb_fmt_parse_vdi(const struct nb_format_inspector *ins, struct nb_format_info *out)
{
    const uint8_t *h = at(ins, 0, 0x178);
    if (!h) {
        unsafe(out, "VDI header is truncated");
        return;
    }
    out->version = le32(h + 0x44);
    out->virtual_size = le64(h + 0x170);
}
