/* image_properties.c - ImagePropertiesFilter: the image's architecture
 * (hw_architecture), hypervisor type (img_hv_type) and VM mode (hw_vm_mode)
 * must appear together in one of the host's supported_instances triples,
 * and the hypervisor version must satisfy img_hv_requested_version
 * (">= 6.0, < 8.0"). Legacy names (architecture, hypervisor_type, vm_mode,
 * hypervisor_version_requires) are read as Nova's ImageMetaProps maps them.
 * Values are canonicalised as Nova's fields do (amd64 -> x86_64, …). */
#include "compute/scheduler/host_state.h"
#include "common/json.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *prop(const struct nb_sched_spec *spec, const char *name, const char *legacy)
{
    const char *v = nb_json_str(spec->image_props, name);
    return v ? v : nb_json_str(spec->image_props, legacy);
}

static void lower(char *dst, const char *src, size_t n)
{
    size_t i = 0;
    for (; src && src[i] && i + 1 < n; i++)
        dst[i] = (char)tolower((unsigned char)src[i]);
    dst[i] = '\0';
}

static void canon_arch(char *out, size_t n, const char *v)
{
    lower(out, v, n);
    if (!strcmp(out, "i386") || !strcmp(out, "i486") || !strcmp(out, "i586") ||
        !strcmp(out, "x86_32") || !strcmp(out, "x86_32p"))
        nb_strlcpy(out, "i686", n);
    else if (!strcmp(out, "amd64"))
        nb_strlcpy(out, "x86_64", n);
}

static void canon_hv(char *out, size_t n, const char *v)
{
    lower(out, v, n);
    if (!strcmp(out, "xapi"))
        nb_strlcpy(out, "xen", n);
}

static void canon_mode(char *out, size_t n, const char *v)
{
    lower(out, v, n);
    if (!strcmp(out, "pv"))
        nb_strlcpy(out, "xen", n);
    else if (!strcmp(out, "hv") || !strcmp(out, "baremetal"))
        nb_strlcpy(out, "hvm", n);
}

/* versionutils.convert_version_to_str: 7002022 -> "7.2.22". */
static void version_str(long v, char *out, size_t n)
{
    long parts[8];
    int np = 0;
    while (v != 0 && np < 8) {
        parts[np++] = v % 1000;
        v /= 1000;
    }
    out[0] = '\0';
    for (int i = np - 1; i >= 0; i--)
        snprintf(out + strlen(out), n - strlen(out), "%s%ld", i == np - 1 ? "" : ".", parts[i]);
}

/* Compares dotted versions numerically (missing parts are 0). */
static int version_cmp(const char *a, const char *b)
{
    while (*a || *b) {
        long x = strtol(a, (char **)&a, 10), y = strtol(b, (char **)&b, 10);
        if (x != y)
            return x < y ? -1 : 1;
        if (*a == '.')
            a++;
        if (*b == '.')
            b++;
        if ((*a && !isdigit((unsigned char)*a)) || (*b && !isdigit((unsigned char)*b)))
            break;
    }
    return 0;
}

/* Does version satisfy every "op ver" of the comma-separated predicate? */
static bool version_satisfies(const char *version, const char *pred)
{
    char *copy = strdup(pred), *save = NULL;
    bool ok = true;
    for (char *c = strtok_r(copy, ",", &save); c && ok; c = strtok_r(NULL, ",", &save)) {
        while (isspace((unsigned char)*c))
            c++;
        char op[3] = "";
        size_t k = 0;
        while (k < 2 && *c && strchr("<>=!", *c))
            op[k++] = *c++;
        op[k] = '\0';
        while (isspace((unsigned char)*c))
            c++;
        int r = version_cmp(version, c);
        if (!strcmp(op, ">="))
            ok = r >= 0;
        else if (!strcmp(op, ">"))
            ok = r > 0;
        else if (!strcmp(op, "<="))
            ok = r <= 0;
        else if (!strcmp(op, "<"))
            ok = r < 0;
        else if (!strcmp(op, "!="))
            ok = r != 0;
        else /* "==" or bare */
            ok = r == 0;
    }
    free(copy);
    return ok;
}

static bool triple_has(json_t *triple, const char *v)
{
    size_t i;
    json_t *e;
    json_array_foreach (triple, i, e) {
        if (json_is_string(e) && !strcmp(json_string_value(e), v))
            return true;
    }
    return false;
}

static bool image_props_passes(const struct nb_host_state *hs, const struct nb_sched_spec *spec,
                               char *why, size_t n)
{
    const char *a = prop(spec, "hw_architecture", "architecture");
    if (!a)
        a = spec->default_architecture && *spec->default_architecture ? spec->default_architecture
                                                                      : NULL;
    const char *h = prop(spec, "img_hv_type", "hypervisor_type");
    const char *m = prop(spec, "hw_vm_mode", "vm_mode");
    const char *req = prop(spec, "img_hv_requested_version", "hypervisor_version_requires");
    char arch[32] = "", hv[32] = "", mode[32] = "";
    if (a)
        canon_arch(arch, sizeof(arch), a);
    if (h)
        canon_hv(hv, sizeof(hv), h);
    if (m)
        canon_mode(mode, sizeof(mode), m);
    if (!arch[0] && !hv[0] && !mode[0])
        return true;

    char wanted[128];
    snprintf(wanted, sizeof(wanted), "%s%s%s%s%s", arch[0] ? arch : "",
             arch[0] && (hv[0] || mode[0]) ? "/" : "", hv, hv[0] && mode[0] ? "/" : "", mode);
    size_t nsup = json_array_size(hs->supported_instances);
    if (nsup == 0) {
        snprintf(why, n, "image requires %s, host advertises no supported instance types", wanted);
        return false;
    }
    char hvv[48];
    version_str(hs->hypervisor_version, hvv, sizeof(hvv));
    bool props_ok = false;
    for (size_t i = 0; i < nsup; i++) {
        json_t *t = json_array_get(hs->supported_instances, i);
        if ((arch[0] && !triple_has(t, arch)) || (hv[0] && !triple_has(t, hv)) ||
            (mode[0] && !triple_has(t, mode)))
            continue;
        props_ok = true;
        if (!req || !hs->hypervisor_version || version_satisfies(hvv, req))
            return true;
    }
    if (props_ok) {
        snprintf(why, n, "hypervisor version %s does not satisfy img_hv_requested_version %s", hvv,
                 req);
        return false;
    }
    char sup[256] = "";
    for (size_t i = 0; i < nsup && strlen(sup) < sizeof(sup) - 64; i++) {
        json_t *t = json_array_get(hs->supported_instances, i);
        char one[96] = "";
        size_t k;
        json_t *e;
        json_array_foreach (t, k, e) {
            snprintf(one + strlen(one), sizeof(one) - strlen(one), "%s%s", k ? "/" : "",
                     json_is_string(e) ? json_string_value(e) : "?");
        }
        snprintf(sup + strlen(sup), sizeof(sup) - strlen(sup), "%s%s", i ? ", " : "", one);
    }
    snprintf(why, n, "image requires %s, host supports %s", wanted, sup);
    return false;
}

const struct nb_sched_filter nb_filter_image_properties = {"ImagePropertiesFilter",
                                                           image_props_passes};
