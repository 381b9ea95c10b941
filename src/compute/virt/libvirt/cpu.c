/* cpu.c - the guest CPU: [libvirt] cpu_mode, cpu_models and
 * cpu_model_extra_flags, as Nova's _get_guest_cpu_model_config and
 * _check_cpu_compatibility read them.
 *
 * cpu_mode is host-model, host-passthrough, custom or none. Unset, it is
 * host-model under kvm and none (QEMU's default model) under qemu: TCG
 * emulates whatever it is given, and the smallest model is the fastest to
 * emulate. custom takes cpu_models, an ordered list: the guest gets the
 * first model libvirt's domain capabilities mark usable on this host for
 * the accelerator in question (so "SandyBridge,Nehalem" on a host that
 * cannot run SandyBridge gives Nehalem, never QEMU's qemu64). Model names
 * are case-insensitive, as in Nova; a name libvirt does not know, or a list
 * none of whose models is usable, is a configuration error named at start.
 * cpu_model_extra_flags ("+flag" require, "-flag" disable, "flag" require;
 * case-insensitive) go with every mode but none, where there is no CPU
 * element to carry them (a warning says they are ignored). */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/log.h"
#include "common/sbuf.h"
#include "common/util.h"
#include "compute/virt/libvirt/lv.h"

#include <ctype.h>
#include <libxml/parser.h>
#include <libxml/xpath.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define MAX_MODELS 16

/* Splits a comma list into trimmed, non-empty items (copied into store).
 * Returns the count, at most max. */
static int split_list(const char *list, char store[][64], int max)
{
    int n = 0;
    const char *p = list ? list : "";
    while (*p && n < max) {
        while (*p == ' ' || *p == ',' || *p == '\t')
            p++;
        const char *e = p;
        while (*e && *e != ',')
            e++;
        const char *t = e;
        while (t > p && (t[-1] == ' ' || t[-1] == '\t'))
            t--;
        if (t > p) {
            size_t len = (size_t)(t - p) < 63 ? (size_t)(t - p) : 63;
            memcpy(store[n], p, len);
            store[n++][len] = '\0';
        }
        p = e;
    }
    return n;
}

/* Finds model (case-insensitively) among domcaps' custom-mode models:
 * 1 usable (libvirt's spelling into out), 0 known but not usable, -1
 * unknown. usable_list gets the usable models (for the error message). */
static int find_model(xmlXPathContextPtr xp, const char *model, char *out, size_t n,
                      struct nb_sbuf *usable_list)
{
    xmlXPathObjectPtr r = xmlXPathEvalExpression(
        (const xmlChar *)"/domainCapabilities/cpu/mode[@name='custom']/model", xp);
    int found = -1;
    for (int i = 0; r && r->nodesetval && i < r->nodesetval->nodeNr; i++) {
        xmlNodePtr node = r->nodesetval->nodeTab[i];
        xmlChar *name = xmlNodeGetContent(node);
        xmlChar *usable = xmlGetProp(node, (const xmlChar *)"usable");
        bool ok = usable && !strcmp((const char *)usable, "yes");
        if (ok && usable_list) {
            nb_sbuf_str(usable_list, usable_list->len ? ", " : "");
            nb_sbuf_str(usable_list, (const char *)name);
        }
        if (name && found != 1 && !strcasecmp((const char *)name, model)) {
            found = ok ? 1 : 0;
            nb_strlcpy(out, (const char *)name, n);
        }
        xmlFree(name);
        xmlFree(usable);
    }
    xmlXPathFreeObject(r);
    return found;
}

/* cpu_mode = custom: the first usable model of cpu_models into out. */
static int pick_model(struct nb_ctx *ctx, const char *virt_type, const char *domcaps,
                      char models[][64], int nmodels, struct lv_cpu *out)
{
    xmlDocPtr doc = domcaps ? xmlReadMemory(domcaps, (int)strlen(domcaps), "domcaps.xml", NULL,
                                            XML_PARSE_NONET | XML_PARSE_NOERROR)
                            : NULL;
    if (!doc)
        return nb_error(ctx, 500, NULL,
                        "[libvirt] cpu_mode = custom: libvirt gave no readable domain "
                        "capabilities for virt_type %s",
                        virt_type);
    xmlXPathContextPtr xp = xmlXPathNewContext(doc);
    struct nb_sbuf usable = {0}, unusable = {0};
    int rc = -1;
    for (int i = 0; i < nmodels && rc < 0; i++) {
        struct nb_sbuf *list = i == 0 ? &usable : NULL;
        int f = find_model(xp, models[i], out->model, sizeof(out->model), list);
        if (f < 0) {
            nb_error(ctx, 500, NULL,
                     "[libvirt] cpu_models: Configured CPU model: %s is not correct, or your "
                     "host CPU arch does not support this model. Please correct your config "
                     "and try again.",
                     models[i]);
            break;
        }
        if (f == 1) {
            rc = 0;
            break;
        }
        nb_sbuf_str(&unusable, unusable.len ? ", " : "");
        nb_sbuf_str(&unusable, models[i]);
        if (i == nmodels - 1)
            nb_error(ctx, 500, NULL,
                     "[libvirt] cpu_models: no configured CPU model can run on this host under "
                     "virt_type %s (libvirt marks %s not usable); usable models: %s",
                     virt_type, unusable.s, usable.s ? usable.s : "none");
    }
    free(usable.s);
    free(unusable.s);
    xmlXPathFreeContext(xp);
    xmlFreeDoc(doc);
    return rc;
}

/* cpu_model_extra_flags into out->features. */
static int parse_flags(struct nb_ctx *ctx, const char *list, struct lv_cpu *out)
{
    char flags[LV_MAX_CPU_FEATURES][64];
    int n = split_list(list, flags, LV_MAX_CPU_FEATURES);
    out->nfeatures = 0;
    for (int i = 0; i < n; i++) {
        const char *f = flags[i];
        bool disable = *f == '-';
        if (*f == '-' || *f == '+')
            f++;
        size_t len = strlen(f);
        if (len == 0 || len >= sizeof(out->features[0].name))
            return nb_error(ctx, 500, NULL, "[libvirt] cpu_model_extra_flags: bad flag '%s'",
                            flags[i]);
        struct lv_cpu_feature *ft = &out->features[out->nfeatures++];
        for (size_t k = 0; k <= len; k++) {
            unsigned char c = (unsigned char)f[k];
            if (c && !isalnum(c) && c != '_' && c != '-' && c != '.')
                return nb_error(ctx, 500, NULL, "[libvirt] cpu_model_extra_flags: bad flag '%s'",
                                flags[i]);
            ft->name[k] = (char)tolower(c);
        }
        ft->disable = disable;
    }
    return 0;
}

int lv_cpu_config(struct nb_ctx *ctx, const char *virt_type, const char *domcaps,
                  struct lv_cpu *out)
{
    memset(out, 0, sizeof(*out));
    const char *mode = nb_conf_str("libvirt", "cpu_mode", NULL);
    if (!mode || !*mode)
        mode = !strcmp(virt_type, "kvm") ? "host-model" : "none";
    if (strcmp(mode, "none") != 0 && strcmp(mode, "host-model") != 0 &&
        strcmp(mode, "host-passthrough") != 0 && strcmp(mode, "custom") != 0)
        return nb_error(ctx, 500, NULL,
                        "[libvirt] cpu_mode must be host-model, host-passthrough, custom or "
                        "none, not '%s'",
                        mode);
    char models[MAX_MODELS][64];
    int nmodels = split_list(nb_conf_str("libvirt", "cpu_models", NULL), models, MAX_MODELS);
    bool custom = !strcmp(mode, "custom");
    if (!custom && nmodels > 0)
        return nb_error(ctx, 500, NULL,
                        "[libvirt] cpu_models is set but cpu_mode is %s: The cpu_models option "
                        "is not required when cpu_mode!=custom",
                        mode);
    if (custom && nmodels == 0)
        return nb_error(ctx, 500, NULL,
                        "[libvirt] The cpu_models option is required when cpu_mode=custom");
    const char *flags = nb_conf_str("libvirt", "cpu_model_extra_flags", NULL);
    if (!strcmp(mode, "none"))
        return 0; /* no <cpu> element; the flags are reported by lv_warn_cpu */
    nb_strlcpy(out->mode, mode, sizeof(out->mode));
    if (custom && pick_model(ctx, virt_type, domcaps, models, nmodels, out) < 0)
        return -1;
    return parse_flags(ctx, flags, out);
}

int lv_guest_cpu(struct lv *lv, struct nb_ctx *ctx, const char *virt_type, struct lv_cpu *out)
{
    _cleanup_free_ char *caps = NULL;
    if (!strcmp(nb_conf_str("libvirt", "cpu_mode", ""), "custom")) {
        virConnectPtr conn = lv_conn(lv, ctx);
        if (!conn)
            return -1;
        caps = virConnectGetDomainCapabilities(conn, NULL, "x86_64", "pc", virt_type, 0);
        if (!caps)
            return lv_error(ctx, 500, "cannot read libvirt's domain capabilities for %s",
                            virt_type);
    }
    return lv_cpu_config(ctx, virt_type, caps, out);
}

const char *lv_cpu_describe(const struct lv_cpu *cpu, char *buf, size_t n)
{
    if (!cpu->mode[0]) {
        snprintf(buf, n, "none (QEMU's default model)");
        return buf;
    }
    size_t w = (size_t)snprintf(buf, n, "%s%s%s", cpu->mode, cpu->model[0] ? " " : "", cpu->model);
    for (int i = 0; i < cpu->nfeatures && w < n; i++)
        w += (size_t)snprintf(buf + w, n - w, " %c%s", cpu->features[i].disable ? '-' : '+',
                              cpu->features[i].name);
    return buf;
}
