/* test_format.c - unit tests of the disk-image format inspector.
 *
 * Images are made with the real tools (qemu-img create/convert, genisoimage
 * or xorriso) in a temporary directory, and the inspector must agree with
 * `qemu-img info --output=json` on format and virtual size. Dangerous images
 * (backing file, external data file, VMDK extents and parents in host files)
 * are made the same way, or by patching a real image where QEMU offers no
 * option, and must be refused with a message naming what was found. Every
 * image is inspected three ways (path, and streamed in small and large
 * chunks) and the results must be identical. A missing tool fails the test:
 * nothing here is skipped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "image/format.h"

#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[] = "/tmp/nubo-test-format-XXXXXX";

/* Runs a shell command in the test directory; fails the test unless it exits 0. */
static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sh(const char *fmt, ...)
{
    char cmd[2048];
    int n = snprintf(cmd, sizeof(cmd), "cd '%s' && ", dir);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd + n, sizeof(cmd) - (size_t)n, fmt, ap);
    va_end(ap);
    int rc = system(cmd);
    if (rc == -1 || !WIFEXITED(rc) || WEXITSTATUS(rc) != 0)
        fail_msg("command failed (%d): %s", rc, cmd);
}

static const char *path(const char *name)
{
    static char bufs[4][PATH_MAX];
    static int i;
    char *p = bufs[i++ % 4];
    snprintf(p, PATH_MAX, "%s/%s", dir, name);
    return p;
}

/* Writes len bytes at off into the file name (to craft images). */
static void patch(const char *name, long off, const void *bytes, size_t len)
{
    int fd = open(path(name), O_WRONLY);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, bytes, len, off), (ssize_t)len);
    close(fd);
}

static void put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* qemu-img's verdict: format and virtual size. Returns the parsed JSON. */
static json_t *qemu_info(const char *name, const char **format, uint64_t *vsize)
{
    char cmd[PATH_MAX + 64], out[1 << 16];
    snprintf(cmd, sizeof(cmd), "qemu-img info -U --output=json '%s'", path(name));
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    size_t n = fread(out, 1, sizeof(out) - 1, f);
    out[n] = '\0';
    if (pclose(f) != 0)
        fail_msg("qemu-img info failed on %s: %s", name, out);
    json_error_t jerr;
    json_t *info = json_loads(out, 0, &jerr);
    assert_non_null(info);
    *format = json_string_value(json_object_get(info, "format"));
    assert_non_null(*format);
    *vsize = (uint64_t)json_integer_value(json_object_get(info, "virtual-size"));
    return info;
}

/* Streams the file through a new inspector in chunks of `chunk` bytes,
 * checking the memory bound after every feed. */
static void inspect_stream(const char *name, size_t chunk, struct nb_format_info *out)
{
    enum { READ = 1 << 20 };
    char err[256];
    uint8_t *buf = malloc(READ);
    struct nb_format_inspector *ins = nb_format_inspector_new();
    int fd = open(path(name), O_RDONLY);
    assert_non_null(buf);
    assert_non_null(ins);
    assert_true(fd >= 0);
    ssize_t n;
    while ((n = read(fd, buf, READ)) > 0) {
        for (size_t off = 0; off < (size_t)n; off += chunk) {
            size_t len = (size_t)n - off < chunk ? (size_t)n - off : chunk;
            assert_int_equal(nb_format_inspector_feed(ins, buf + off, len), 0);
            assert_true(nb_format_inspector_held(ins) <= NB_FORMAT_MAX_HELD);
        }
    }
    assert_int_equal(n, 0);
    assert_int_equal(nb_format_inspector_finish(ins, out, err, sizeof(err)), 0);
    nb_format_inspector_free(ins);
    close(fd);
    free(buf);
}

static void assert_same(const struct nb_format_info *a, const struct nb_format_info *b)
{
    assert_int_equal(a->type, b->type);
    assert_true(a->virtual_size == b->virtual_size);
    assert_true(a->file_size == b->file_size);
    assert_string_equal(a->unsafe_reason, b->unsafe_reason);
    assert_string_equal(a->backing_file, b->backing_file);
    assert_string_equal(a->create_type, b->create_type);
    assert_true(a->also_matches == b->also_matches);
}

/* Inspects name by path and by stream (7-byte and 1 MiB+3 chunks); all three
 * must agree. */
static void inspect(const char *name, struct nb_format_info *out)
{
    char err[256];
    struct nb_format_info small, big;
    if (nb_format_inspect_path(path(name), out, err, sizeof(err)) != 0)
        fail_msg("inspect %s: %s", name, err);
    inspect_stream(name, 7, &small);
    inspect_stream(name, (1 << 20) + 3, &big);
    assert_same(out, &small);
    assert_same(out, &big);
}

/* Inspects name and checks format and virtual size against qemu-img. */
static void agrees(const char *name, const char *expect, struct nb_format_info *out)
{
    const char *qfmt;
    uint64_t qsize;
    inspect(name, out);
    json_t *q = qemu_info(name, &qfmt, &qsize);
    assert_string_equal(out->format, expect);
    assert_string_equal(out->qemu_driver, qfmt);
    if (out->virtual_size != qsize)
        fail_msg("%s: virtual size %llu, qemu-img says %llu", name,
                 (unsigned long long)out->virtual_size, (unsigned long long)qsize);
    json_decref(q);
}

static void assert_safe(const struct nb_format_info *info)
{
    char why[512] = "";
    if (nb_format_check_safe(info, why, sizeof(why)) != 0)
        fail_msg("%s refused: %s", info->format, why);
}

/* The image must be refused, with a message containing `needle`. */
static void assert_unsafe(const struct nb_format_info *info, const char *needle)
{
    char why[512] = "";
    assert_int_equal(nb_format_check_safe(info, why, sizeof(why)), -1);
    if (!strstr(why, needle))
        fail_msg("refusal \"%s\" does not mention \"%s\"", why, needle);
    assert_non_null(strstr(why, "; refusing it"));
}

static void assert_declared_ok(const struct nb_format_info *info, const char *declared)
{
    char why[256] = "";
    if (nb_format_check_declared(info, declared, why, sizeof(why)) != 0)
        fail_msg("declared %s refused: %s", declared, why);
}

static void assert_declared_bad(const struct nb_format_info *info, const char *declared,
                                const char *message)
{
    char why[256] = "";
    assert_int_equal(nb_format_check_declared(info, declared, why, sizeof(why)), -1);
    assert_string_equal(why, message);
}

/* 3 MiB of non-zero, non-magic data to convert into other formats. */
static void make_data(void)
{
    sh("test -f data.raw || (yes nubo-format-test | head -c 3145728 >data.raw)");
}

/* ---- the supported formats agree with qemu-img ---------------------------- */

static void test_raw(void **state)
{
    (void)state;
    struct nb_format_info info;
    sh("qemu-img create -q -f raw empty.raw 10M");
    agrees("empty.raw", "raw", &info);
    assert_true(info.virtual_size == 10u << 20);
    assert_safe(&info);
    make_data();
    agrees("data.raw", "raw", &info);
    assert_true(info.virtual_size == 3u << 20);
    assert_safe(&info);
    assert_declared_ok(&info, "raw");
    assert_declared_bad(&info, "qcow2", "Image declared qcow2 but its content is raw");
    assert_declared_bad(&info, "vmdk", "Image declared vmdk but its content is raw");
    assert_declared_bad(&info, "iso", "Image declared iso but its content is raw");
}

static void test_qcow2_v2(void **state)
{
    (void)state;
    struct nb_format_info info;
    sh("qemu-img create -q -f qcow2 -o compat=0.10 v2.qcow2 1G");
    agrees("v2.qcow2", "qcow2", &info);
    assert_int_equal(info.version, 2);
    assert_true(info.virtual_size == 1u << 30);
    assert_safe(&info);
    make_data();
    sh("qemu-img convert -O qcow2 -o compat=0.10 data.raw v2data.qcow2");
    agrees("v2data.qcow2", "qcow2", &info);
    assert_int_equal(info.version, 2);
    assert_safe(&info);
    assert_declared_ok(&info, "qcow2");
    assert_declared_bad(&info, "raw", "Image declared raw but its content is qcow2");
}

static void test_qcow2_v3(void **state)
{
    (void)state;
    struct nb_format_info info;
    sh("qemu-img create -q -f qcow2 -o compat=1.1 v3.qcow2 20G");
    agrees("v3.qcow2", "qcow2", &info);
    assert_int_equal(info.version, 3);
    assert_int_equal(info.cluster_bits, 16);
    assert_safe(&info);
    make_data();
    sh("qemu-img convert -c -O qcow2 -o compat=1.1,lazy_refcounts=on data.raw v3data.qcow2");
    agrees("v3data.qcow2", "qcow2", &info);
    assert_safe(&info);
    /* Smallest and largest clusters: the header area is one cluster. */
    sh("qemu-img create -q -f qcow2 -o cluster_size=512 c512.qcow2 100M");
    agrees("c512.qcow2", "qcow2", &info);
    assert_safe(&info);
    sh("qemu-img convert -O qcow2 -o cluster_size=2M data.raw c2m.qcow2");
    agrees("c2m.qcow2", "qcow2", &info);
    assert_int_equal(info.cluster_bits, 21);
    assert_safe(&info);
}

static void test_vmdk_monolithic_sparse(void **state)
{
    (void)state;
    struct nb_format_info info;
    sh("qemu-img create -q -f vmdk -o subformat=monolithicSparse ms.vmdk 100M");
    agrees("ms.vmdk", "vmdk", &info);
    assert_string_equal(info.create_type, "monolithicSparse");
    assert_false(info.has_external_extent);
    assert_safe(&info);
    make_data();
    sh("qemu-img convert -O vmdk data.raw msdata.vmdk");
    agrees("msdata.vmdk", "vmdk", &info);
    assert_safe(&info);
    assert_declared_ok(&info, "vmdk");
    assert_declared_bad(&info, "qcow2", "Image declared qcow2 but its content is vmdk");
}

static void test_vmdk_stream_optimized(void **state)
{
    (void)state;
    struct nb_format_info info;
    make_data();
    sh("qemu-img convert -O vmdk -o subformat=streamOptimized data.raw so.vmdk");
    agrees("so.vmdk", "vmdk", &info);
    assert_string_equal(info.create_type, "streamOptimized");
    assert_safe(&info);
}

/* streamOptimized as VMware writes it: grain directory "at end", header
 * values in a footer. QEMU does not write these; build one from its image. */
static void test_vmdk_footer(void **state)
{
    (void)state;
    struct nb_format_info info;
    uint8_t hdr[512], sector[512], gd_end[8], bogus[8];
    make_data();
    sh("qemu-img convert -O vmdk -o subformat=streamOptimized data.raw foot.vmdk");
    sh("truncate -s %%512 foot.vmdk");
    int fd = open(path("foot.vmdk"), O_RDWR);
    assert_true(fd >= 0);
    assert_int_equal(pread(fd, hdr, sizeof(hdr), 0), 512);
    off_t end = lseek(fd, 0, SEEK_END);
    memset(sector, 0, sizeof(sector));
    sector[12] = 3; /* footer marker */
    assert_int_equal(pwrite(fd, sector, 512, end), 512);
    assert_int_equal(pwrite(fd, hdr, 512, end + 512), 512);
    memset(sector, 0, sizeof(sector)); /* end-of-stream marker */
    assert_int_equal(pwrite(fd, sector, 512, end + 1024), 512);
    close(fd);
    put_le64(gd_end, UINT64_MAX);
    put_le64(bogus, 8); /* the footer's capacity must win */
    patch("foot.vmdk", 56, gd_end, 8);
    patch("foot.vmdk", 12, bogus, 8);
    agrees("foot.vmdk", "vmdk", &info);
    assert_true(info.virtual_size == 3u << 20);
    assert_safe(&info);
    /* QEMU rounds the file up to a sector and reads zeros past its end. */
    sh("head -c -100 foot.vmdk >foot-odd.vmdk");
    agrees("foot-odd.vmdk", "vmdk", &info);
    assert_true(info.virtual_size == 3u << 20);
    /* Without a valid footer there is no size to trust. */
    sh("head -c -1536 foot.vmdk >foot-none.vmdk");
    inspect("foot-none.vmdk", &info);
    assert_unsafe(&info, "VMDK footer is missing or invalid");
}

static void test_vpc(void **state)
{
    (void)state;
    struct nb_format_info info;
    /* QEMU rounds to CHS geometry: 100M becomes 104865792 bytes. */
    sh("qemu-img create -q -f vpc dyn.vhd 100M");
    agrees("dyn.vhd", "vpc", &info);
    assert_string_equal(info.disk_format, "vhd");
    assert_safe(&info);
    assert_declared_ok(&info, "vhd");
    assert_declared_ok(&info, "vpc");
    assert_declared_bad(&info, "raw", "Image declared raw but its content is vhd");
    make_data();
    sh("qemu-img convert -O vpc -o force_size=on data.raw forced.vhd");
    agrees("forced.vhd", "vpc", &info);
    assert_true(info.virtual_size == 3u << 20);
    /* A fixed VHD has its footer only at the end: qemu-img (and Glance)
     * see raw, and so does the inspector. */
    sh("qemu-img convert -O vpc -o subformat=fixed data.raw fixed.vhd");
    agrees("fixed.vhd", "raw", &info);
}

static void test_vhdx(void **state)
{
    (void)state;
    struct nb_format_info info;
    sh("qemu-img create -q -f vhdx x.vhdx 100M");
    agrees("x.vhdx", "vhdx", &info);
    assert_false(info.has_parent);
    assert_safe(&info);
    make_data();
    sh("qemu-img convert -O vhdx -o block_size=1M data.raw xdata.vhdx");
    agrees("xdata.vhdx", "vhdx", &info);
    assert_safe(&info);
    assert_declared_ok(&info, "vhdx");
    assert_declared_bad(&info, "vhd", "Image declared vhd but its content is vhdx");
}

static void test_iso(void **state)
{
    (void)state;
    struct nb_format_info info;
    sh("mkdir -p isoroot && echo hello >isoroot/hello.txt");
    sh("if command -v genisoimage >/dev/null; then genisoimage -quiet -V config-2 -o cd.iso "
       "isoroot; else xorriso -as mkisofs -quiet -V config-2 -o cd.iso isoroot; fi");
    agrees("cd.iso", "iso", &info); /* qemu-img says raw: qemu_driver */
    assert_string_equal(info.qemu_driver, "raw");
    assert_safe(&info);
    assert_declared_ok(&info, "iso");
    assert_declared_bad(&info, "raw", "Image declared raw but its content is iso");
    assert_declared_bad(&info, "qcow2", "Image declared qcow2 but its content is iso");
}

static void test_vdi(void **state)
{
    (void)state;
    struct nb_format_info info;
    sh("qemu-img create -q -f vdi x.vdi 64M");
    agrees("x.vdi", "vdi", &info);
    assert_safe(&info);
    assert_declared_ok(&info, "vdi");
}

/* ---- unsafe images -------------------------------------------------------- */

static void test_qcow2_backing_file(void **state)
{
    (void)state;
    struct nb_format_info info;
    char why[512];
    sh("qemu-img create -q -f qcow2 -b /etc/passwd -F raw backed.qcow2");
    agrees("backed.qcow2", "qcow2", &info);
    assert_true(info.has_backing_file);
    assert_string_equal(info.backing_file, "/etc/passwd");
    assert_int_equal(nb_format_check_safe(&info, why, sizeof(why)), -1);
    assert_string_equal(why, "qcow2 image has a backing file (/etc/passwd); refusing it");
    /* Also in a v2 image, and behind a relative name. */
    sh("qemu-img create -q -f qcow2 -o compat=0.10 -b backed.qcow2 -F qcow2 chain.qcow2");
    inspect("chain.qcow2", &info);
    assert_unsafe(&info, "backing file (backed.qcow2)");
}

static void test_qcow2_data_file(void **state)
{
    (void)state;
    struct nb_format_info info;
    uint8_t incompat[8];
    sh("qemu-img create -q -f qcow2 -o data_file=%s ext.qcow2 64M", path("ext.data"));
    agrees("ext.qcow2", "qcow2", &info);
    assert_true(info.has_data_file);
    assert_string_equal(info.data_file, path("ext.data"));
    assert_unsafe(&info, "qcow2 image has an external data file");
    assert_unsafe(&info, path("ext.data"));
    /* Only the header extension, the incompatible bit cleared. */
    sh("cp ext.qcow2 ext-nobit.qcow2");
    memset(incompat, 0, sizeof(incompat));
    patch("ext-nobit.qcow2", 72, incompat, 8);
    inspect("ext-nobit.qcow2", &info);
    assert_true(info.has_data_file);
    assert_unsafe(&info, "external data file");
    /* Only the bit, no extension naming the file. */
    sh("qemu-img create -q -f qcow2 bit.qcow2 64M");
    incompat[7] = 4;
    patch("bit.qcow2", 72, incompat, 8);
    inspect("bit.qcow2", &info);
    assert_unsafe(&info, "external data file");
}

static void test_qcow2_features_and_encryption(void **state)
{
    (void)state;
    struct nb_format_info info;
    uint8_t incompat[8] = {0x80, 0, 0, 0, 0, 0, 0, 0};
    /* Glance's inspector knows incompatible bits 0-3 and refuses others. */
    sh("qemu-img create -q -f qcow2 -o extended_l2=on el2.qcow2 64M");
    agrees("el2.qcow2", "qcow2", &info);
    assert_unsafe(&info, "unsupported incompatible features (0x10)");
    sh("qemu-img create -q -f qcow2 bit63.qcow2 64M");
    patch("bit63.qcow2", 72, incompat, 8);
    inspect("bit63.qcow2", &info);
    assert_unsafe(&info, "unsupported incompatible features (0x8000000000000000)");
    /* A short key-derivation time keeps this fast; QEMU's timing of it can
     * fail ("Unable to get accurate CPU usage"), hence the retries. */
    sh("for i in 1 2 3 4 5; do qemu-img create -q -f qcow2 --object secret,id=s0,data=nubo "
       "-o encrypt.format=luks,encrypt.key-secret=s0,encrypt.iter-time=50 enc.qcow2 64M && "
       "break; done");
    inspect("enc.qcow2", &info);
    assert_true(info.encrypted);
    assert_unsafe(&info, "qcow2 image is encrypted");
}

/* A qcow2 header declaring a virtual size QEMU will not open: more than
 * its 32 MiB L1 table maps ("Image is too big"), or more than the header's
 * own L1 table maps ("L1 table is too small"). QEMU refuses both too. */
static void test_qcow2_absurd_virtual_size(void **state)
{
    (void)state;
    struct nb_format_info info;
    uint8_t huge[8] = {0x40, 0, 0, 0, 0, 0, 0, 0}; /* 2^62 bytes */
    uint8_t one_tib[8] = {0, 0, 1, 0, 0, 0, 0, 0}; /* 2^40 bytes */
    sh("qemu-img create -q -f qcow2 huge.qcow2 64M && cp huge.qcow2 l1.qcow2");
    patch("huge.qcow2", 24, huge, 8);
    sh("! qemu-img info huge.qcow2 >/dev/null 2>&1");
    inspect("huge.qcow2", &info);
    assert_unsafe(&info, "qcow2 virtual size 4611686018427387904 bytes is more than QEMU opens "
                         "with 65536-byte clusters (at most 2251799813685248 bytes)");
    patch("l1.qcow2", 24, one_tib, 8);
    sh("! qemu-img info l1.qcow2 >/dev/null 2>&1");
    inspect("l1.qcow2", &info);
    assert_unsafe(&info, "qcow2 L1 table (1 entries) is too small for virtual size "
                         "1099511627776 bytes");
    /* 1 TiB made by qemu-img is fine */
    sh("qemu-img create -q -f qcow2 tib.qcow2 1T");
    agrees("tib.qcow2", "qcow2", &info);
    char why[512];
    assert_int_equal(nb_format_check_safe(&info, why, sizeof(why)), 0);
}

static void test_vmdk_flat_extents(void **state)
{
    (void)state;
    struct nb_format_info info;
    sh("qemu-img create -q -f vmdk -o subformat=monolithicFlat mflat.vmdk 10M");
    agrees("mflat.vmdk", "vmdk", &info);
    assert_true(info.vmdk_descriptor_file);
    assert_true(info.has_external_extent);
    assert_string_equal(info.extent_file, "mflat-flat.vmdk");
    assert_string_equal(info.create_type, "monolithicFlat");
    assert_unsafe(&info, "VMDK descriptor file points at host file mflat-flat.vmdk");
    sh("qemu-img create -q -f vmdk -o subformat=twoGbMaxExtentFlat tflat.vmdk 10M");
    agrees("tflat.vmdk", "vmdk", &info);
    assert_unsafe(&info, "points at host file tflat-f001.vmdk");
    sh("qemu-img create -q -f vmdk -o subformat=twoGbMaxExtentSparse tsparse.vmdk 10M");
    agrees("tsparse.vmdk", "vmdk", &info);
    assert_unsafe(&info, "points at host file tsparse-s001.vmdk");
    /* A descriptor aimed at an absolute host path: QEMU would read it. */
    sh("printf '# Disk DescriptorFile\\nversion=1\\nCID=1\\nparentCID=ffffffff\\n"
       "createType=\"monolithicFlat\"\\nRW 2 FLAT \"/etc/passwd\" 0\\n' >passwd.vmdk");
    agrees("passwd.vmdk", "vmdk", &info);
    assert_unsafe(&info, "points at host file /etc/passwd");
}

/* A sparse VMDK naming a parent: QEMU opens it as a backing file. */
static void test_vmdk_parent(void **state)
{
    (void)state;
    struct nb_format_info info;
    char desc[10240];
    const char *fmt;
    uint64_t vsize;
    sh("qemu-img create -q -f vmdk parent.vmdk 10M");
    memset(desc, 0, sizeof(desc));
    snprintf(desc, sizeof(desc),
             "# Disk DescriptorFile\nversion=1\nCID=12345678\nparentCID=87654321\n"
             "createType=\"monolithicSparse\"\nparentFileNameHint=\"/etc/passwd\"\n\n"
             "RW 20480 SPARSE \"parent.vmdk\"\n");
    patch("parent.vmdk", 512, desc, sizeof(desc));
    json_t *q = qemu_info("parent.vmdk", &fmt, &vsize);
    assert_string_equal(json_string_value(json_object_get(q, "backing-filename")), "/etc/passwd");
    json_decref(q);
    agrees("parent.vmdk", "vmdk", &info);
    assert_true(info.has_backing_file);
    assert_unsafe(&info, "VMDK image has a parent file (/etc/passwd)");
}

/* A sparse VMDK header with capacity 0: QEMU opens its embedded descriptor
 * as a descriptor file, extents and all. */
static void test_vmdk_zero_capacity(void **state)
{
    (void)state;
    struct nb_format_info info;
    uint8_t zero[8] = {0};
    char desc[10240];
    sh("qemu-img create -q -f vmdk zcap.vmdk 10M");
    memset(desc, 0, sizeof(desc));
    snprintf(desc, sizeof(desc),
             "version=1\nCID=1\nparentCID=ffffffff\ncreateType=\"monolithicFlat\"\n"
             "RW 2 FLAT \"zcap-data\" 0\n");
    patch("zcap.vmdk", 12, zero, 8);
    patch("zcap.vmdk", 512, desc, sizeof(desc));
    sh("head -c 1024 /dev/zero >zcap-data");
    agrees("zcap.vmdk", "vmdk", &info); /* qemu-img follows the extent: 1024 bytes */
    assert_true(info.has_external_extent);
    assert_unsafe(&info, "VMDK header has no capacity");
}

static void test_vmdk_bad_descriptor(void **state)
{
    (void)state;
    struct nb_format_info info;
    char desc[10240];
    sh("qemu-img create -q -f vmdk baddesc.vmdk 10M");
    memset(desc, 0, sizeof(desc));
    snprintf(desc, sizeof(desc),
             "version=1\ncreateType=\"monolithicSparse\"\nRW 20480 SPARSE \"baddesc.vmdk\"\n"
             "something else entirely\n");
    patch("baddesc.vmdk", 512, desc, sizeof(desc));
    inspect("baddesc.vmdk", &info);
    assert_unsafe(&info, "VMDK descriptor is not valid descriptor text");
    memset(desc, 0, sizeof(desc));
    snprintf(desc, sizeof(desc), "version=1\ncreateType=\"vmfs\"\nRW 20480 SPARSE \"x.vmdk\"\n");
    patch("baddesc.vmdk", 512, desc, sizeof(desc));
    inspect("baddesc.vmdk", &info);
    assert_unsafe(&info, "VMDK create type vmfs is not allowed");
    memset(desc, 0, sizeof(desc));
    snprintf(desc, sizeof(desc),
             "version=1\ncreateType=\"monolithicSparse\"\nRW 20480 SPARSE \"../x.vmdk\"\n");
    patch("baddesc.vmdk", 512, desc, sizeof(desc));
    inspect("baddesc.vmdk", &info);
    assert_unsafe(&info, "points at a file (../x.vmdk)");
    /* What qemu-img leaves when it rewrites a shorter descriptor (about one
     * streamOptimized image in a hundred): QEMU stops at the NUL, so the
     * image is fine. Behind the NUL nothing counts, good or bad. */
    memset(desc, 0, sizeof(desc));
    int len = snprintf(desc, sizeof(desc),
                       "version=1\nCID=d6d207\ncreateType=\"monolithicSparse\"\n"
                       "RW 20480 SPARSE \"baddesc.vmdk\"\n");
    memcpy(desc + len + 1, "\nsomething else entirely\n", 26);
    patch("baddesc.vmdk", 512, desc, sizeof(desc));
    inspect("baddesc.vmdk", &info);
    assert_string_equal(info.create_type, "monolithicSparse");
    assert_safe(&info);
    /* Non-ASCII before the NUL is still refused. */
    desc[10] = (char)0xc3;
    patch("baddesc.vmdk", 512, desc, sizeof(desc));
    inspect("baddesc.vmdk", &info);
    assert_unsafe(&info, "VMDK descriptor is not valid descriptor text");
}

/* Differencing disks name a parent file; QEMU cannot make them, so mark
 * real images as such. */
static void test_differencing(void **state)
{
    (void)state;
    struct nb_format_info info;
    uint8_t type[4] = {0, 0, 0, 4};
    uint8_t has_parent = 2;
    sh("qemu-img create -q -f vpc diff.vhd 10M");
    patch("diff.vhd", 60, type, sizeof(type));
    inspect("diff.vhd", &info);
    assert_true(info.has_parent);
    assert_unsafe(&info, "VHD image is a differencing disk");
    /* qemu-img puts the VHDX metadata region at 3 MiB and the file
     * parameters item first, at +64 KiB; its flags word follows the block size. */
    sh("qemu-img create -q -f vhdx diff.vhdx 10M");
    inspect("diff.vhdx", &info);
    assert_safe(&info);
    patch("diff.vhdx", 3 * 1024 * 1024 + 65536 + 4, &has_parent, 1);
    inspect("diff.vhdx", &info);
    assert_true(info.has_parent);
    assert_unsafe(&info, "VHDX image is a differencing disk");
}

static void test_unsupported_formats(void **state)
{
    (void)state;
    struct nb_format_info info;
    sh("qemu-img create -q -f qed x.qed 64M");
    agrees("x.qed", "qed", &info);
    assert_unsafe(&info, "qed images are not supported");
    sh("qemu-img create -q -f qed -b x.qed -F qed xb.qed");
    agrees("xb.qed", "qed", &info);
    assert_unsafe(&info, "qed image has a backing file (x.qed)");
    sh("qemu-img create -q -f qcow x.qcow 64M");
    agrees("x.qcow", "qcow", &info);
    assert_unsafe(&info, "qcow images are not supported");
    sh("qemu-img create -q -f qcow -b /etc/passwd -F raw xb.qcow");
    agrees("xb.qcow", "qcow", &info);
    assert_unsafe(&info, "qcow image has a backing file (/etc/passwd)");
    assert_declared_bad(&info, "qcow2", "Image declared qcow2 but its content is qcow");
    sh("for i in 1 2 3 4 5; do qemu-img create -q -f luks --object secret,id=s0,data=nubo "
       "-o key-secret=s0,iter-time=50 x.luks 16M && break; done");
    inspect("x.luks", &info);
    assert_unsafe(&info, "luks images are not supported");
}

/* Content that is two formats at once is refused, as Glance/Nova do. */
static void test_ambiguous(void **state)
{
    (void)state;
    struct nb_format_info info;
    uint8_t pvd[8] = {1, 'C', 'D', '0', '0', '1', 1, 0};
    sh("qemu-img create -q -f qcow2 both.qcow2 64M");
    patch("both.qcow2", 32768, pvd, sizeof(pvd));
    inspect("both.qcow2", &info);
    assert_string_equal(info.format, "qcow2");
    assert_string_equal(info.also_matches, "iso");
    assert_unsafe(&info, "matches more than one format (qcow2 and iso)");
}

static void test_truncated(void **state)
{
    (void)state;
    struct nb_format_info info;
    sh("qemu-img create -q -f qcow2 t.qcow2 64M && head -c 40 t.qcow2 >t40.qcow2");
    inspect("t40.qcow2", &info);
    assert_string_equal(info.format, "qcow2");
    assert_unsafe(&info, "qcow2 header is truncated");
    sh("qemu-img create -q -f vhdx t.vhdx 64M && head -c 200000 t.vhdx >t200k.vhdx");
    inspect("t200k.vhdx", &info);
    assert_string_equal(info.format, "vhdx");
    assert_unsafe(&info, "VHDX");
    sh("head -c 2100000 t.vhdx >t2m.vhdx"); /* region tables, no metadata */
    inspect("t2m.vhdx", &info);
    assert_unsafe(&info, "VHDX metadata could not be read");
    sh("qemu-img create -q -f vmdk t.vmdk 64M && head -c 700 t.vmdk >t700.vmdk");
    inspect("t700.vmdk", &info);
    assert_string_equal(info.format, "vmdk");
    assert_unsafe(&info, "VMDK image is truncated");
}

/* ---- declared formats, streaming ----------------------------------------- */

static void test_declared(void **state)
{
    (void)state;
    struct nb_format_info info;
    char why[256];
    make_data();
    inspect("data.raw", &info);
    assert_declared_ok(&info, "ami"); /* Nova does not compare AMI formats */
    assert_declared_ok(&info, "aki");
    assert_declared_bad(&info, "ploop", "Image declared ploop but its content is raw");
    assert_int_equal(nb_format_check_declared(&info, NULL, why, sizeof(why)), -1);
    assert_int_equal(nb_format_check_declared(&info, "", why, sizeof(why)), -1);
    /* A small buffer truncates, still terminated. */
    char tiny[8];
    assert_int_equal(nb_format_check_declared(&info, "qcow2", tiny, sizeof(tiny)), -1);
    assert_string_equal(tiny, "Image d");
}

/* A large raw image streams through in bounded memory. */
static void test_stream_bounded(void **state)
{
    (void)state;
    struct nb_format_info info;
    char err[256];
    static uint8_t chunk[65536];
    struct nb_format_inspector *ins = nb_format_inspector_new();
    assert_non_null(ins);
    memset(chunk, 'n', sizeof(chunk));
    for (int i = 0; i < 1024; i++) { /* 64 MiB */
        assert_int_equal(nb_format_inspector_feed(ins, chunk, sizeof(chunk)), 0);
        assert_true(nb_format_inspector_held(ins) <= 160 * 1024);
    }
    assert_int_equal(nb_format_inspector_finish(ins, &info, err, sizeof(err)), 0);
    assert_string_equal(info.format, "raw");
    assert_true(info.virtual_size == 64u << 20);
    assert_true(info.file_size == 64u << 20);
    /* finish is once only */
    assert_int_equal(nb_format_inspector_finish(ins, &info, err, sizeof(err)), -1);
    nb_format_inspector_free(ins);
    nb_format_inspector_free(NULL);
}

static void test_empty_and_missing(void **state)
{
    (void)state;
    struct nb_format_info info;
    char err[256] = "";
    sh(": >empty.img");
    inspect("empty.img", &info);
    assert_string_equal(info.format, "raw");
    assert_true(info.virtual_size == 0);
    assert_int_equal(nb_format_inspect_path(path("no-such-file"), &info, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "no-such-file"));
}

static int setup(void **state)
{
    (void)state;
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_raw),
        cmocka_unit_test(test_qcow2_v2),
        cmocka_unit_test(test_qcow2_v3),
        cmocka_unit_test(test_vmdk_monolithic_sparse),
        cmocka_unit_test(test_vmdk_stream_optimized),
        cmocka_unit_test(test_vmdk_footer),
        cmocka_unit_test(test_vpc),
        cmocka_unit_test(test_vhdx),
        cmocka_unit_test(test_iso),
        cmocka_unit_test(test_vdi),
        cmocka_unit_test(test_qcow2_backing_file),
        cmocka_unit_test(test_qcow2_data_file),
        cmocka_unit_test(test_qcow2_features_and_encryption),
        cmocka_unit_test(test_qcow2_absurd_virtual_size),
        cmocka_unit_test(test_vmdk_flat_extents),
        cmocka_unit_test(test_vmdk_parent),
        cmocka_unit_test(test_vmdk_zero_capacity),
        cmocka_unit_test(test_vmdk_bad_descriptor),
        cmocka_unit_test(test_differencing),
        cmocka_unit_test(test_unsupported_formats),
        cmocka_unit_test(test_ambiguous),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_declared),
        cmocka_unit_test(test_stream_bounded),
        cmocka_unit_test(test_empty_and_missing),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
