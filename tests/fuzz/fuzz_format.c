/* fuzz_format.c - libFuzzer target for the disk-image format inspector.
 *
 * The input describes an image in one of two ways, chosen by the low bit of
 * its first byte:
 *   0: flat   - the rest of the input is the image;
 *   1: sparse - the rest is a list of segments {u32 le offset, u16 le length,
 *               bytes} written into an image of zeros up to 4 MiB long, so
 *               that the fuzzer reaches headers deep in a file (VHDX region
 *               tables at 192 KiB, metadata at MiBs, VMDK footers at the end)
 *               without megabyte inputs.
 * The image is fed through the streaming inspector in chunks of random sizes
 * (seeded by the first byte), and inspected again through a file descriptor
 * (memfd, which skips what it need not read). Beyond the sanitizers, it
 * aborts when the two disagree, when the inspector holds more than
 * NB_FORMAT_MAX_HELD, or when a verdict string is not terminated.
 *
 * Build and run: see tests/fuzz/README.md. */
#define _GNU_SOURCE
#include "image/format.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define IMAGE_MAX (4u * 1024 * 1024)
#define CHUNK_MAX (1024u * 1024)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The image: zeros up to len, overwritten by the segments in order. */
struct segment {
    size_t off, len;
    const uint8_t *bytes;
};
struct image {
    struct segment seg[512];
    int nseg;
    size_t len;
};

static void add(struct image *img, size_t off, const uint8_t *bytes, size_t n)
{
    if (img->nseg == (int)(sizeof(img->seg) / sizeof(img->seg[0])))
        return;
    img->seg[img->nseg++] = (struct segment){off, n, bytes};
    if (off + n > img->len)
        img->len = off + n;
}

/* Reads the image description of the input (see the file comment). */
static void build(const uint8_t *data, size_t size, struct image *img)
{
    img->nseg = 0;
    img->len = 0;
    if (!(data[0] & 1)) {
        add(img, 0, data + 1, size - 1);
        return;
    }
    size_t i = 1;
    while (i + 6 <= size) {
        uint32_t off = (uint32_t)data[i] | (uint32_t)data[i + 1] << 8 |
                       (uint32_t)data[i + 2] << 16 | (uint32_t)data[i + 3] << 24;
        size_t n = (size_t)data[i + 4] | (size_t)data[i + 5] << 8;
        i += 6;
        off %= IMAGE_MAX;
        if (n > size - i)
            n = size - i;
        if (n > IMAGE_MAX - off)
            n = IMAGE_MAX - off;
        add(img, off, data + i, n);
        i += n;
    }
}

/* Writes the image bytes [pos, pos+n) into buf. */
static void render(const struct image *img, size_t pos, size_t n, uint8_t *buf)
{
    memset(buf, 0, n);
    for (int i = 0; i < img->nseg; i++) {
        const struct segment *s = &img->seg[i];
        size_t a = s->off > pos ? s->off : pos;
        size_t b = s->off + s->len < pos + n ? s->off + s->len : pos + n;
        if (a < b)
            memcpy(buf + (a - pos), s->bytes + (a - s->off), b - a);
    }
}

static uint32_t next_rand(uint32_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

/* Chunk sizes of every scale; tiny ones mostly where the headers are, so
 * that an 8 MiB image does not take a million calls. */
static size_t chunk_size(uint32_t *rng, size_t pos)
{
    uint32_t r = next_rand(rng);
    if (pos > 3u * 1024 * 1024 && (r & 0xf0) != 0)
        return 64 * 1024 + (r >> 8) % (64 * 1024);
    switch (r & 3) {
    case 0: return 1 + (r >> 8) % 16;
    case 1: return 1 + (r >> 8) % 4096;
    case 2: return 1 + (r >> 8) % (300 * 1024);
    default: return 512u << ((r >> 8) % 12);
    }
}

static void check_str(const char *s, size_t cap)
{
    if (!memchr(s, '\0', cap))
        abort();
}

static void same(const struct nb_format_info *a, const struct nb_format_info *b)
{
    if (a->type != b->type || a->virtual_size != b->virtual_size || a->file_size != b->file_size ||
        a->version != b->version || a->has_backing_file != b->has_backing_file ||
        a->has_data_file != b->has_data_file || a->has_external_extent != b->has_external_extent ||
        a->has_parent != b->has_parent || a->also_matches != b->also_matches ||
        strcmp(a->unsafe_reason, b->unsafe_reason) || strcmp(a->backing_file, b->backing_file) ||
        strcmp(a->create_type, b->create_type)) {
        fprintf(stderr, "stream and fd disagree: %s/%s %llu/%llu '%s'/'%s'\n", a->format, b->format,
                (unsigned long long)a->virtual_size, (unsigned long long)b->virtual_size,
                a->unsafe_reason, b->unsafe_reason);
        abort();
    }
}

static void verdicts(const struct nb_format_info *info)
{
    static const char *const declared[] = {"raw", "qcow2", "vmdk", "vhd", "vpc",  "vhdx",
                                           "iso", "vdi",   "ami",  "",    "ploop"};
    char why[512];
    check_str(info->unsafe_reason, sizeof(info->unsafe_reason));
    check_str(info->backing_file, sizeof(info->backing_file));
    check_str(info->data_file, sizeof(info->data_file));
    check_str(info->create_type, sizeof(info->create_type));
    check_str(info->extent_file, sizeof(info->extent_file));
    nb_format_check_safe(info, why, sizeof(why));
    check_str(why, sizeof(why));
    for (size_t i = 0; i < sizeof(declared) / sizeof(declared[0]); i++) {
        nb_format_check_declared(info, declared[i], why, sizeof(why));
        check_str(why, sizeof(why));
    }
    nb_format_check_declared(info, NULL, why, sizeof(why));
}

static void inspect_stream(const struct image *img, uint32_t seed, struct nb_format_info *out)
{
    static uint8_t buf[CHUNK_MAX];
    struct nb_format_inspector *ins = nb_format_inspector_new();
    char err[256];
    if (!ins)
        abort();
    uint32_t rng = seed * 2654435761u + 1;
    for (size_t pos = 0; pos < img->len;) {
        size_t n = chunk_size(&rng, pos);
        if (n > img->len - pos)
            n = img->len - pos;
        render(img, pos, n, buf);
        if (nb_format_inspector_feed(ins, buf, n) < 0)
            abort();
        if (nb_format_inspector_held(ins) > NB_FORMAT_MAX_HELD)
            abort();
        pos += n;
    }
    if (nb_format_inspector_finish(ins, out, err, sizeof(err)) < 0)
        abort();
    nb_format_inspector_free(ins);
}

/* A sparse memfd with the segments written in order. */
static void inspect_fd(const struct image *img, struct nb_format_info *out)
{
    char err[256];
    int fd = memfd_create("fuzz-image", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)img->len) < 0)
        abort();
    for (int i = 0; i < img->nseg; i++) {
        const struct segment *s = &img->seg[i];
        if (pwrite(fd, s->bytes, s->len, (off_t)s->off) != (ssize_t)s->len)
            abort();
    }
    if (nb_format_inspect_fd(fd, out, err, sizeof(err)) < 0)
        abort();
    close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct image img;
    struct nb_format_info by_stream, by_fd;
    if (size < 1)
        return 0;
    build(data, size, &img);
    inspect_stream(&img, data[0], &by_stream);
    inspect_fd(&img, &by_fd);
    same(&by_stream, &by_fd);
    verdicts(&by_stream);
    return 0;
}
