/* xml.c - the domain XML of an instance, generated from its database state
 * every time the domain is (re)defined: spawn, start, hard reboot. Nothing
 * is read back from an old definition, so what the database says is what
 * QEMU gets.
 *
 * The layout follows Nova's libvirt driver for machine type pc: the domain
 * is named and UUID'd by the instance UUID, Nova's <nova:instance> metadata
 * (runbooks and tools read it with `virsh dumpxml`), SMBIOS system entries
 * "OpenStack Foundation"/"OpenStack Nova", virtio disks (volumes with their
 * volume ID as <serial>), the config drive as an IDE cdrom, a virtio NIC,
 * the serial console appended to a file, the guest CPU as [libvirt]
 * cpu_mode/cpu_models/cpu_model_extra_flags make it (Nova's
 * LibvirtConfigGuestCPU). lv_disk_xml gives attach/detach the same <disk>
 * element; lv_guest_spec gives real guests and the virt_type probe the same
 * everything else. */
#include "common/sbuf.h"
#include "common/json.h"
#include "common/util.h"
#include "compute/virt/libvirt/lv.h"

#include <openssl/sha.h>
#include <stdarg.h>
#include <ctype.h>
#include <stdio.h>
#include <string.h>

static void add_escaped(struct nb_sbuf *b, const char *s)
{
    for (const char *p = s ? s : ""; *p; p++) {
        switch (*p) {
        case '<': nb_sbuf_str(b, "&lt;"); break;
        case '>': nb_sbuf_str(b, "&gt;"); break;
        case '&': nb_sbuf_str(b, "&amp;"); break;
        case '\'': nb_sbuf_str(b, "&apos;"); break;
        case '"': nb_sbuf_str(b, "&quot;"); break;
        default:
            /* control characters are not allowed in XML 1.0 */
            if ((unsigned char)*p < 0x20 && *p != '\t' && *p != '\n')
                nb_sbuf_str(b, "?");
            else
                nb_sbuf_add(b, p, 1);
        }
    }
}

/* Appends fmt where every %s argument is XML-escaped (only %s, %d, %lld). */
static void addf(struct nb_sbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    for (const char *p = fmt; *p; p++) {
        if (*p != '%') {
            const char *q = strchr(p, '%');
            size_t n = q ? (size_t)(q - p) : strlen(p);
            nb_sbuf_add(b, p, n);
            p += n - 1;
            continue;
        }
        char num[32];
        if (p[1] == 's') {
            add_escaped(b, va_arg(ap, const char *));
            p++;
        } else if (p[1] == 'd') {
            snprintf(num, sizeof(num), "%d", va_arg(ap, int));
            nb_sbuf_str(b, num);
            p++;
        } else if (!strncmp(p + 1, "lld", 3)) {
            snprintf(num, sizeof(num), "%lld", va_arg(ap, long long));
            nb_sbuf_str(b, num);
            p += 3;
        } else {
            nb_sbuf_add(b, p, 1);
        }
    }
    va_end(ap);
}

/* One <disk> element, each line prefixed by indent. The domain XML and
 * the hot-plug XML of attach/detach both come from here, so libvirt is
 * given the same device either way. */
static void add_disk(struct nb_sbuf *b, const struct lv_disk *d, const char *cache_mode,
                     const char *indent)
{
    nb_sbuf_str(b, indent);
    addf(b, "<disk type='file' device='%s'>\n", d->device);
    nb_sbuf_str(b, indent);
    addf(b, "  <driver name='qemu' type='%s' cache='%s'/>\n", d->format, cache_mode);
    nb_sbuf_str(b, indent);
    addf(b, "  <source file='%s'/>\n", d->path);
    nb_sbuf_str(b, indent);
    addf(b, "  <target dev='%s' bus='%s'/>\n", d->target, d->bus);
    if (d->readonly) {
        nb_sbuf_str(b, indent);
        addf(b, "  <readonly/>\n");
    }
    if (d->serial && *d->serial) {
        nb_sbuf_str(b, indent);
        addf(b, "  <serial>%s</serial>\n", d->serial);
    }
    nb_sbuf_str(b, indent);
    addf(b, "</disk>\n");
}

char *lv_disk_xml(const struct lv_disk *disk, const char *cache_mode)
{
    struct nb_sbuf b = {0};
    add_disk(&b, disk, cache_mode, "");
    return b.s;
}

/* The <cpu> element (none for mode ""): Nova's layout, <model> for custom
 * (match exact), a <feature> per extra flag. */
static void add_cpu(struct nb_sbuf *b, const struct lv_cpu *cpu)
{
    if (!cpu || !cpu->mode[0])
        return;
    bool custom = !strcmp(cpu->mode, "custom");
    if (!custom && cpu->nfeatures == 0) {
        addf(b, "  <cpu mode='%s'/>\n", cpu->mode);
        return;
    }
    addf(b, custom ? "  <cpu mode='%s' match='exact'>\n" : "  <cpu mode='%s'>\n", cpu->mode);
    if (custom)
        addf(b, "    <model>%s</model>\n", cpu->model);
    for (int i = 0; i < cpu->nfeatures; i++)
        addf(b, "    <feature policy='%s' name='%s'/>\n",
             cpu->features[i].disable ? "disable" : "require", cpu->features[i].name);
    addf(b, "  </cpu>\n");
}

void lv_guest_spec(const struct lv *lv, const char *virt_type, const struct lv_cpu *cpu,
                   const char *console_path, const char *mac_address, struct lv_domain_spec *spec)
{
    *spec = (struct lv_domain_spec){
        .virt_type = virt_type,
        .cache_mode = lv->cache_mode,
        .console_path = console_path,
        .mac_address = mac_address,
        .cpu = cpu,
    };
}

void lv_mac_for(const char *uuid, char out[18])
{
    unsigned char md[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)uuid, strlen(uuid), md);
    snprintf(out, 18, "fa:16:3e:%02x:%02x:%02x", md[0], md[1], md[2]);
}

/* Whether s is safe inside an XML attribute as is (the names and MACs of
 * network_info are; anything else is left out rather than escaped). */
static bool attr_ok(const char *s)
{
    if (!s || !*s)
        return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && !strchr(":-_.", *s))
            return false;
    return true;
}

/* One <interface type='bridge'> per "bridge" VIF of network_info (os-vif's
 * linux bridge plug: libvirt makes the tap tap<port[:11]> and puts it on
 * the network's bridge). Returns whether a VIF of another type (or none
 * at all) asks for the user-mode NIC every guest had before. */
static bool add_bridge_vifs(struct nb_sbuf *b, const json_t *network_info)
{
    size_t i, bridged = 0, others = 0;
    json_t *vif;
    json_array_foreach (network_info, i, vif) {
        const json_t *net = json_object_get(vif, "network");
        const char *type = nb_json_str(vif, "type"), *mac = nb_json_str(vif, "address");
        const char *br = nb_json_str(net, "bridge"), *dev = nb_json_str(vif, "devname");
        if (!type || strcmp(type, "bridge") || !attr_ok(mac) || !attr_ok(br) || !attr_ok(dev)) {
            others++;
            continue;
        }
        bridged++;
        addf(b,
             "    <interface type='bridge'>\n      <mac address='%s'/>\n"
             "      <source bridge='%s'/>\n      <target dev='%s'/>\n"
             "      <model type='virtio'/>\n",
             mac, br, dev);
        long long mtu = nb_json_int(json_object_get(net, "meta"), "mtu", 0);
        if (mtu > 0)
            addf(b, "      <mtu size='%lld'/>\n", mtu);
        addf(b, "    </interface>\n");
    }
    return others > 0 || bridged == 0;
}

char *lv_domain_xml(const json_t *inst, const struct lv_domain_spec *spec)
{
    const char *uuid = nb_json_str(inst, "uuid");
    const json_t *flavor = json_object_get(inst, "flavor");
    long long mem = nb_json_int(flavor, "memory_mb", 512);
    long long vcpus = nb_json_int(flavor, "vcpus", 1);
    char now[32];
    struct nb_sbuf b = {0};

    addf(&b, "<domain type='%s' xmlns:nova='http://openstack.org/xmlns/libvirt/nova/1.1'>\n",
         spec->virt_type);
    addf(&b, "  <name>%s</name>\n  <uuid>%s</uuid>\n", spec->name ? spec->name : uuid, uuid);
    addf(&b, "  <metadata>\n    <nova:instance>\n      <nova:package version='nubo'/>\n");
    addf(&b, "      <nova:name>%s</nova:name>\n", nb_json_str(inst, "name"));
    addf(&b, "      <nova:creationTime>%s</nova:creationTime>\n", nb_now_iso(now));
    addf(&b, "      <nova:flavor name='%s'>\n", nb_json_str(flavor, "name"));
    addf(&b,
         "        <nova:memory>%lld</nova:memory>\n        <nova:disk>%lld</nova:disk>\n"
         "        <nova:swap>%lld</nova:swap>\n        <nova:ephemeral>%lld</nova:ephemeral>\n"
         "        <nova:vcpus>%lld</nova:vcpus>\n      </nova:flavor>\n",
         mem, nb_json_int(flavor, "root_gb", 0), nb_json_int(flavor, "swap", 0),
         nb_json_int(flavor, "ephemeral_gb", 0), vcpus);
    addf(&b,
         "      <nova:owner>\n        <nova:user uuid='%s'/>\n"
         "        <nova:project uuid='%s'/>\n      </nova:owner>\n",
         nb_json_str(inst, "user_id"), nb_json_str(inst, "project_id"));
    if (nb_json_str(inst, "image_ref") && *nb_json_str(inst, "image_ref"))
        addf(&b, "      <nova:root type='image' uuid='%s'/>\n", nb_json_str(inst, "image_ref"));
    addf(&b, "    </nova:instance>\n  </metadata>\n");
    addf(&b,
         "  <memory unit='MiB'>%lld</memory>\n  <currentMemory unit='MiB'>%lld</currentMemory>\n",
         mem, mem);
    addf(&b, "  <vcpu placement='static'>%lld</vcpu>\n", vcpus);
    addf(&b,
         "  <sysinfo type='smbios'>\n    <system>\n"
         "      <entry name='manufacturer'>OpenStack Foundation</entry>\n"
         "      <entry name='product'>OpenStack Nova</entry>\n"
         "      <entry name='version'>nubo</entry>\n"
         "      <entry name='serial'>%s</entry>\n      <entry name='uuid'>%s</entry>\n"
         "      <entry name='family'>Virtual Machine</entry>\n    </system>\n  </sysinfo>\n",
         uuid, uuid);
    addf(&b, "  <os>\n    <type arch='x86_64' machine='pc'>hvm</type>\n    <boot dev='hd'/>\n"
             "    <smbios mode='sysinfo'/>\n  </os>\n");
    addf(&b, "  <features>\n    <acpi/>\n    <apic/>\n  </features>\n");
    add_cpu(&b, spec->cpu);
    addf(&b, "  <clock offset='utc'/>\n  <on_poweroff>destroy</on_poweroff>\n"
             "  <on_reboot>restart</on_reboot>\n  <on_crash>destroy</on_crash>\n");
    addf(&b, "  <devices>\n");
    for (int i = 0; i < spec->ndisks; i++)
        add_disk(&b, &spec->disks[i], spec->cache_mode, "    ");
    if (add_bridge_vifs(&b, json_object_get(inst, "network_info")) && spec->mac_address)
        addf(&b,
             "    <interface type='user'>\n      <mac address='%s'/>\n"
             "      <model type='virtio'/>\n    </interface>\n",
             spec->mac_address);
    addf(&b,
         "    <serial type='file'>\n      <source path='%s' append='on'/>\n"
         "      <target port='0'/>\n    </serial>\n",
         spec->console_path);
    addf(&b, "    <memballoon model='virtio'>\n      <stats period='10'/>\n    </memballoon>\n");
    addf(&b, "  </devices>\n</domain>\n");
    return b.s;
}
