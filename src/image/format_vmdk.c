/* format_vmdk.c - the format inspector's VMDK parsers: the descriptor text
 * (Glance's line rules, QEMU's parentFileNameHint search), the sparse VMDK4
 * header with the footer of streamOptimized images, VMDK3 (refused), the
 * descriptor file (never safe) and qemu-img's text probe. Called by
 * detection at finish (format.c); see format_int.h. */
#include "image/format_int.h"

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
 * comment, ddb.*, key=value and extent lines; anything else is refused.
 * QEMU reads the descriptor as a C string, up to its first NUL, and so does
 * this: qemu-img itself leaves bytes behind that NUL when it rewrites a
 * descriptor shorter than the one it first wrote (a CID of fewer hex digits:
 * "...\"\n\0\n"), which QEMU never reads. */
static void vmdk_descriptor(const char *s, size_t n, bool sparse_file, struct vmdk_desc *d,
                            struct nb_format_info *out)
{
    const char *nul = memchr(s, '\0', n);
    if (nul)
        n = (size_t)(nul - s);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] > 0x7f)
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
void nb_fmt_parse_vmdk4(const struct nb_format_inspector *ins, struct nb_format_info *out)
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
void nb_fmt_parse_vmdk_text(const struct nb_format_inspector *ins, struct nb_format_info *out)
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
bool nb_fmt_vmdk_text_probe(const uint8_t *buf, size_t n)
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

void nb_fmt_parse_vmdk3(const struct nb_format_inspector *ins, struct nb_format_info *out)
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
