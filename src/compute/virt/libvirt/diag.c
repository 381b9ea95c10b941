/* diag.c - a guest's diagnostics from libvirt, as Nova's libvirt driver
 * gets them: virDomainGetInfo (memory, vCPUs), virDomainGetVcpus (time per
 * vCPU), and the block and interface stats of the disks and NICs of the
 * domain XML. The 2.48 standard shape, or the older free-form dict
 * ("cpu0_time", "memory", "vda_read", "tap…_rx", …). */
#include "common/cleanup.h"
#include "compute/objects/states.h"
#include "compute/virt/libvirt/lv.h"

#include <libxml/parser.h>
#include <libxml/xpath.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Nova's power_state.STATE_MAP names. */
static const char *state_name(int ps)
{
    switch (ps) {
    case NB_POWER_RUNNING: return "running";
    case NB_POWER_PAUSED: return "paused";
    case NB_POWER_SHUTDOWN: return "shutdown";
    case NB_POWER_CRASHED: return "crashed";
    case NB_POWER_SUSPENDED: return "suspended";
    default: return "pending";
    }
}

/* The values of expr's nodes (attributes) in the domain XML, or NULL. */
static json_t *xml_values(xmlXPathContextPtr xc, const char *expr)
{
    json_t *out = json_array();
    xmlXPathObjectPtr o = xmlXPathEvalExpression((const xmlChar *)expr, xc);
    for (int i = 0; o && o->nodesetval && i < o->nodesetval->nodeNr; i++) {
        xmlChar *v = xmlNodeGetContent(o->nodesetval->nodeTab[i]);
        json_array_append_new(out, json_string(v ? (const char *)v : ""));
        xmlFree(v);
    }
    xmlXPathFreeObject(o);
    return out;
}

static json_t *stat_or_null(long long v)
{
    return v < 0 ? json_null() : json_integer(v);
}

static void put(json_t *d, const char *dev, const char *what, long long v)
{
    char k[128];
    snprintf(k, sizeof(k), "%s_%s", dev, what);
    json_object_set_new(d, k, json_integer(v));
}

static void add_disks(virDomainPtr dom, json_t *devs, json_t *legacy, json_t *std)
{
    size_t i;
    json_t *dev;
    json_array_foreach (devs, i, dev) {
        virDomainBlockStatsStruct st;
        const char *name = json_string_value(dev);
        if (virDomainBlockStats(dom, name, &st, sizeof(st)) < 0)
            st.rd_req = st.rd_bytes = st.wr_req = st.wr_bytes = st.errs = -1;
        if (legacy) {
            put(legacy, name, "read_req", st.rd_req);
            put(legacy, name, "read", st.rd_bytes);
            put(legacy, name, "write_req", st.wr_req);
            put(legacy, name, "write", st.wr_bytes);
            put(legacy, name, "errors", st.errs);
        } else {
            json_array_append_new(
                std, json_pack("{s:o, s:o, s:o, s:o, s:o}", "read_bytes", stat_or_null(st.rd_bytes),
                               "read_requests", stat_or_null(st.rd_req), "write_bytes",
                               stat_or_null(st.wr_bytes), "write_requests", stat_or_null(st.wr_req),
                               "errors_count", stat_or_null(st.errs)));
        }
    }
}

static void add_nics(virDomainPtr dom, json_t *devs, json_t *macs, json_t *legacy, json_t *std)
{
    size_t i;
    json_t *dev;
    json_array_foreach (devs, i, dev) {
        virDomainInterfaceStatsStruct st;
        const char *name = json_string_value(dev);
        if (virDomainInterfaceStats(dom, name, &st, sizeof(st)) < 0)
            st.rx_bytes = st.rx_packets = st.rx_errs = st.rx_drop = st.tx_bytes = st.tx_packets =
                st.tx_errs = st.tx_drop = -1;
        if (legacy) {
            put(legacy, name, "rx", st.rx_bytes);
            put(legacy, name, "rx_packets", st.rx_packets);
            put(legacy, name, "rx_errors", st.rx_errs);
            put(legacy, name, "rx_drop", st.rx_drop);
            put(legacy, name, "tx", st.tx_bytes);
            put(legacy, name, "tx_packets", st.tx_packets);
            put(legacy, name, "tx_errors", st.tx_errs);
            put(legacy, name, "tx_drop", st.tx_drop);
            continue;
        }
        const char *mac = json_string_value(json_array_get(macs, i));
        json_array_append_new(
            std,
            json_pack("{s:o, s:o, s:o, s:o, s:o, s:n, s:o, s:o, s:o, s:o, s:n}", "mac_address",
                      mac && *mac ? json_string(mac) : json_null(), "rx_octets",
                      stat_or_null(st.rx_bytes), "rx_errors", stat_or_null(st.rx_errs), "rx_drop",
                      stat_or_null(st.rx_drop), "rx_packets", stat_or_null(st.rx_packets),
                      "rx_rate", "tx_octets", stat_or_null(st.tx_bytes), "tx_errors",
                      stat_or_null(st.tx_errs), "tx_drop", stat_or_null(st.tx_drop), "tx_packets",
                      stat_or_null(st.tx_packets), "tx_rate"));
    }
}

json_t *lv_diagnostics(struct lv *lv, struct nb_ctx *ctx, const char *uuid, bool standard)
{
    virDomainPtr dom = lv_lookup(lv, ctx, uuid, true);
    if (!dom)
        return NULL;
    virDomainInfo info;
    char *xml = virDomainGetXMLDesc(dom, 0);
    xmlDocPtr doc = xml ? xmlReadMemory(xml, (int)strlen(xml), "domain.xml", NULL,
                                        XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING)
                        : NULL;
    free(xml);
    if (virDomainGetInfo(dom, &info) < 0 || !doc) {
        if (doc)
            xmlFreeDoc(doc);
        virDomainFree(dom);
        lv_error(ctx, 503, "cannot read the domain of %s", uuid);
        return NULL;
    }
    xmlXPathContextPtr xc = xmlXPathNewContext(doc);
    _cleanup_json_ json_t *disks = xml_values(xc, "/domain/devices/disk/target/@dev");
    _cleanup_json_ json_t *nics = xml_values(xc, "/domain/devices/interface/target/@dev");
    _cleanup_json_ json_t *macs = xml_values(xc, "/domain/devices/interface/mac/@address");
    _cleanup_json_ json_t *type = xml_values(xc, "/domain/@type");
    _cleanup_json_ json_t *cd = xml_values(xc, "/domain/devices/disk[@device='cdrom']/target/@dev");
    xmlXPathFreeContext(xc);
    xmlFreeDoc(doc);
    int n = info.nrVirtCpu > 0 ? info.nrVirtCpu : 0;
    virVcpuInfoPtr vc = n ? calloc((size_t)n, sizeof(*vc)) : NULL;
    int got = vc ? virDomainGetVcpus(dom, vc, n, NULL, 0) : -1;
    json_t *out;
    if (!standard) {
        out = json_object();
        for (int i = 0; i < got; i++) {
            char k[32];
            snprintf(k, sizeof(k), "cpu%d_time", vc[i].number);
            json_object_set_new(out, k, json_integer((json_int_t)vc[i].cpuTime));
        }
        json_object_set_new(out, "memory", json_integer((json_int_t)info.maxMem));
        add_disks(dom, disks, out, NULL);
        add_nics(dom, nics, macs, out, NULL);
    } else {
        json_t *cpus = json_array(), *d = json_array(), *nn = json_array();
        for (int i = 0; i < got; i++)
            json_array_append_new(cpus, json_pack("{s:i, s:I, s:n}", "id", vc[i].number, "time",
                                                  (json_int_t)vc[i].cpuTime, "utilisation"));
        add_disks(dom, disks, NULL, d);
        add_nics(dom, nics, macs, NULL, nn);
        const char *t = json_string_value(json_array_get(type, 0));
        out = json_pack("{s:s, s:s, s:s?, s:s, s:n, s:b, s:i, s:I, s:I, s:{s:I, s:I}, s:o, s:o, "
                        "s:o}",
                        "state", state_name(lv_power_state(info.state)), "driver", "libvirt",
                        "hypervisor", t, "hypervisor_os", "linux", "uptime", "config_drive",
                        json_array_size(cd) > 0, "num_cpus", n, "num_disks",
                        (json_int_t)json_array_size(disks), "num_nics",
                        (json_int_t)json_array_size(nics), "memory_details", "maximum",
                        (json_int_t)(info.maxMem / 1024), "used", (json_int_t)(info.memory / 1024),
                        "cpu_details", cpus, "disk_details", d, "nic_details", nn);
    }
    free(vc);
    virDomainFree(dom);
    return out;
}
