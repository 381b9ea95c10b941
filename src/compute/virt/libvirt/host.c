/* host.c - what the host really is, from libvirt: CPU model, vendor,
 * architecture and features (capabilities XML), vCPUs and memory (node
 * info), hypervisor version, and the disk of instances_path (statvfs). This
 * is what `openstack hypervisor show` reports and what the placement
 * inventory is built from. */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/util.h"
#include "compute/virt/libvirt/lv.h"

#include <libxml/parser.h>
#include <libxml/xpath.h>
#include <string.h>
#include <sys/statvfs.h>

static void xpath_str(xmlXPathContextPtr xc, const char *expr, char *out, size_t n)
{
    out[0] = '\0';
    xmlXPathObjectPtr o = xmlXPathEvalExpression((const xmlChar *)expr, xc);
    if (o && o->type == XPATH_STRING && o->stringval)
        nb_strlcpy(out, (const char *)o->stringval, n);
    xmlXPathFreeObject(o);
}

/* CPU facts from the capabilities XML. */
static int parse_caps(const char *caps, struct nb_host_info *info)
{
    xmlDocPtr doc = xmlReadMemory(caps, (int)strlen(caps), "capabilities.xml", NULL,
                                  XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
    if (!doc)
        return -1;
    xmlXPathContextPtr xc = xmlXPathNewContext(doc);
    xpath_str(xc, "string(/capabilities/host/cpu/model)", info->cpu_model, sizeof(info->cpu_model));
    xpath_str(xc, "string(/capabilities/host/cpu/vendor)", info->cpu_vendor,
              sizeof(info->cpu_vendor));
    xpath_str(xc, "string(/capabilities/host/cpu/arch)", info->cpu_arch, sizeof(info->cpu_arch));
    info->cpu_features = json_array();
    xmlXPathObjectPtr o =
        xmlXPathEvalExpression((const xmlChar *)"/capabilities/host/cpu/feature/@name", xc);
    if (o && o->nodesetval) {
        for (int i = 0; i < o->nodesetval->nodeNr; i++) {
            xmlChar *name = xmlNodeGetContent(o->nodesetval->nodeTab[i]);
            if (name)
                json_array_append_new(info->cpu_features, json_string((const char *)name));
            xmlFree(name);
        }
    }
    xmlXPathFreeObject(o);
    xmlXPathFreeContext(xc);
    xmlFreeDoc(doc);
    return 0;
}

int lv_host_info(struct lv *lv, struct nb_ctx *ctx, struct nb_host_info *info)
{
    virConnectPtr conn = lv_conn(lv, ctx);
    if (!conn)
        return -1;
    memset(info, 0, sizeof(*info));
    _cleanup_free_ char *caps = virConnectGetCapabilities(conn);
    if (!caps)
        return lv_error(ctx, 503, "cannot read the capabilities of host %s", lv->host);
    if (parse_caps(caps, info) < 0)
        return nb_error(ctx, 500, NULL, "cannot parse the capabilities XML of host %s", lv->host);
    virNodeInfo ni;
    if (virNodeGetInfo(conn, &ni) < 0) {
        json_decref(info->cpu_features);
        info->cpu_features = NULL;
        return lv_error(ctx, 503, "cannot read the node info of host %s", lv->host);
    }
    info->vcpus = (int)ni.cpus;
    info->memory_mb = (long)(ni.memory / 1024);
    unsigned long ver = 0;
    virConnectGetVersion(conn, &ver);
    info->hypervisor_version = (long)ver;
    nb_strlcpy(info->hypervisor_type, "QEMU", sizeof(info->hypervisor_type));
    _cleanup_free_ char *hostname = virConnectGetHostname(conn);
    nb_strlcpy(info->hypervisor_hostname, hostname ? hostname : lv->host,
               sizeof(info->hypervisor_hostname));
    struct statvfs vfs;
    if (statvfs(lv->instances_path, &vfs) == 0)
        info->local_gb = (long)((unsigned long long)vfs.f_blocks * vfs.f_frsize >> 30);
    nb_strlcpy(info->host_ip, nb_conf_str("DEFAULT", "my_ip", "127.0.0.1"), sizeof(info->host_ip));
    return 0;
}
