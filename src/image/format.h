/* format.h - the disk-image format inspector.
 *
 * Reads the headers of a disk image to tell its real format and virtual size
 * and to find what makes it unsafe to hand to QEMU: a qcow2 backing file or
 * external data file, a VMDK whose extents or parent live in host files, a
 * differencing VHD/VHDX, a format nubo does not boot. Used on image upload
 * (streamed), before every domain start, and by the doctor.
 *
 * Detection follows qemu-img's probing (a recognised magic wins; raw is the
 * fallback when nothing matches) and the rules of the format inspector that
 * Glance and Nova share: an ISO 9660 image is "iso", not raw; content that
 * matches two formats at once is refused. Every offset and size read from an
 * image is untrusted: nothing is read out of bounds, no arithmetic on them can
 * overflow, and the memory held is bounded (NB_FORMAT_MAX_HELD) whatever the
 * image says.
 *
 * Error convention: functions return 0 or -1. -1 from an inspect function
 * means the image could not be read (I/O error, out of memory) and `err`
 * says why; a malformed or dangerous image is not an error here - it is
 * inspected, and nb_format_check_safe() refuses it with the reason. */
#ifndef NB_IMAGE_FORMAT_H
#define NB_IMAGE_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Upper bound of the memory a streaming inspector holds, whatever it is fed. */
#define NB_FORMAT_MAX_HELD (2u * 1024 * 1024 + 192u * 1024)

enum nb_format_type {
    NB_FORMAT_RAW = 0,
    NB_FORMAT_QCOW2,
    NB_FORMAT_VMDK,
    NB_FORMAT_VPC, /* VHD */
    NB_FORMAT_VHDX,
    NB_FORMAT_ISO,
    NB_FORMAT_VDI,
    /* Recognised so that raw cannot hide them, never accepted: */
    NB_FORMAT_QCOW, /* qcow version 1 */
    NB_FORMAT_QED,
    NB_FORMAT_LUKS,
    NB_FORMAT_PARALLELS,
    NB_FORMAT_BOCHS,
    NB_FORMAT_CLOOP,
};

#define NB_FORMAT_NAME_MAX 256

struct nb_format_info {
    enum nb_format_type type;
    /* Static strings. format: qemu-img's name, except "iso" for ISO 9660
     * ("raw", "qcow2", "vmdk", "vpc", "vhdx", "iso", "vdi", "qcow", "qed", …).
     * disk_format: Glance's disk_format name ("vhd" for vpc).
     * qemu_driver: the driver QEMU must be given ("raw" for an ISO). */
    const char *format;
    const char *disk_format;
    const char *qemu_driver;

    uint64_t virtual_size; /* bytes the guest sees; 0 when unknown */
    uint64_t file_size;    /* bytes of the image file (bytes fed, when streamed) */
    uint32_t version;      /* qcow2 2 or 3; else the header version of the format, or 0 */

    /* qcow2 */
    bool has_backing_file;                 /* also VMDK parentFileNameHint */
    char backing_file[NB_FORMAT_NAME_MAX]; /* printable copy, '?' for other bytes */
    bool has_data_file;                    /* incompatible bit or header extension */
    char data_file[NB_FORMAT_NAME_MAX];    /* from the extension; "" if only the bit */
    uint64_t incompatible_features;
    uint32_t cluster_bits;
    bool encrypted;

    /* VMDK */
    char create_type[64];      /* createType from the descriptor, e.g. "monolithicSparse" */
    bool vmdk_descriptor_file; /* a text descriptor, data in other files */
    bool has_external_extent;  /* an extent names a file to open */
    char extent_file[NB_FORMAT_NAME_MAX]; /* the first such file */

    /* VHD / VHDX */
    bool has_parent; /* differencing disk */

    /* Another format also matched (Glance/Nova refuse such content). */
    const char *also_matches; /* static format name or NULL */

    /* Empty when safe; otherwise why the image must be refused, e.g.
     * "qcow2 image has a backing file (/etc/passwd)". First problem found. */
    char unsafe_reason[384];
};

/* Inspects the image open on fd (reads with pread, does not move the offset;
 * reads only the headers, regions they point at and the last 2 KiB).
 * Returns 0 and fills *out, or -1 with err set on a read error. */
int nb_format_inspect_fd(int fd, struct nb_format_info *out, char *err, size_t errlen);

/* nb_format_inspect_fd on a path opened read-only. */
int nb_format_inspect_path(const char *path, struct nb_format_info *out, char *err, size_t errlen);

/* Streaming inspector for uploads: feed every byte of the image in order, in
 * chunks of any size, then finish. It keeps the first 2 MiB, regions the
 * headers point at (bounded) and the last 2 KiB; never more than
 * NB_FORMAT_MAX_HELD. new returns NULL on out of memory. feed returns -1 only
 * on out of memory. finish may be called once; free accepts NULL. */
struct nb_format_inspector;
struct nb_format_inspector *nb_format_inspector_new(void);
int nb_format_inspector_feed(struct nb_format_inspector *ins, const void *buf, size_t len);
int nb_format_inspector_finish(struct nb_format_inspector *ins, struct nb_format_info *out,
                               char *err, size_t errlen);
void nb_format_inspector_free(struct nb_format_inspector *ins);
/* Bytes of memory the inspector holds right now (for tests and accounting). */
size_t nb_format_inspector_held(const struct nb_format_inspector *ins);

/* Returns 0 if the image may be used, or -1 and writes into why a message
 * such as "qcow2 image has a backing file (/etc/passwd); refusing it". */
int nb_format_check_safe(const struct nb_format_info *info, char *why, size_t whylen);

/* Compares the content with a declared Glance disk_format. Returns 0 when
 * they agree, or -1 with why, e.g. "Image declared qcow2 but its content is
 * raw". "vhd" and "vpc" name the same format; ami/aki/ari accept any content
 * (as Nova does); a disk_format nubo cannot inspect is refused. */
int nb_format_check_declared(const struct nb_format_info *info, const char *declared, char *why,
                             size_t whylen);

/* Static names of a type (see struct nb_format_info). */
const char *nb_format_name(enum nb_format_type type);
const char *nb_format_disk_format(enum nb_format_type type);

#endif
