/* test_libvirt.c - the pure parts of the libvirt driver: the domain XML
 * generated from an instance (well-formed, escaped, named and UUID'd by
 * the instance, disks/NIC/serial as asked), the MAC address, nb_run
 * (the subprocess helper the driver uses for qemu-img), and volumes as
 * disks: which mappings become which disks with which format, and the
 * errors for missing files and clashing devices; the guest CPU from
 * [libvirt] cpu_mode/cpu_models/cpu_model_extra_flags, the virt_type probe
 * (its XML is a real guest's but for disk and memory), what counts as a
 * KVM-level start failure. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/cleanup.h"
#include "common/config.h"
#include "common/proc.h"
#include "common/util.h"
#include "compute/bdm.h"
#include "compute/virt/libvirt/lv.h"

#include <libxml/parser.h>
#include <libxml/xpath.h>
#include <libxml/xpathInternals.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define UUID "0b9b1b7e-2f43-4a8e-9d59-4f2ad1d3c001"

static char *xpath(xmlDocPtr doc, const char *expr)
{
    xmlXPathContextPtr xc = xmlXPathNewContext(doc);
    xmlXPathRegisterNs(xc, (const xmlChar *)"nova",
                       (const xmlChar *)"http://openstack.org/xmlns/libvirt/nova/1.1");
    xmlXPathObjectPtr o = xmlXPathEvalExpression((const xmlChar *)expr, xc);
    char *out = strdup(o && o->stringval ? (const char *)o->stringval : "");
    xmlXPathFreeObject(o);
    xmlXPathFreeContext(xc);
    return out;
}

static void assert_xpath(xmlDocPtr doc, const char *expr, const char *want)
{
    char *got = xpath(doc, expr);
    if (strcmp(got, want) != 0)
        fail_msg("%s: got '%s', want '%s'", expr, got, want);
    free(got);
}

static void test_domain_xml(void **state)
{
    (void)state;
    json_t *inst =
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:{s:s, s:i, s:i, s:i}}", "uuid", UUID, "name",
                  "web <1> & 'co'", "user_id", "u1", "project_id", "p1", "image_ref", "img-1",
                  "flavor", "name", "m1.tiny", "memory_mb", 512, "vcpus", 2, "root_gb", 1);
    struct lv_domain_spec spec = {
        .virt_type = "qemu",
        .cache_mode = "none",
        .console_path = "/var/lib/nubo/instances/" UUID "/console.log",
        .mac_address = "fa:16:3e:01:02:03",
    };
    spec.disks[spec.ndisks++] =
        (struct lv_disk){"/i/" UUID "/disk", "qcow2", "disk", "virtio", "vda", false, NULL};
    spec.disks[spec.ndisks++] =
        (struct lv_disk){"/i/" UUID "/disk.config", "raw", "cdrom", "ide", "hda", true, NULL};
    char *xml = lv_domain_xml(inst, &spec);
    xmlDocPtr doc = xmlReadMemory(xml, (int)strlen(xml), "d.xml", NULL, XML_PARSE_NONET);
    if (!doc)
        fail_msg("not well-formed XML:\n%s", xml);
    assert_xpath(doc, "string(/domain/@type)", "qemu");
    assert_xpath(doc, "string(/domain/name)", UUID);
    assert_xpath(doc, "string(/domain/uuid)", UUID);
    assert_xpath(doc, "string(/domain/metadata/nova:instance/nova:name)", "web <1> & 'co'");
    assert_xpath(doc, "string(/domain/metadata/nova:instance/nova:flavor/@name)", "m1.tiny");
    assert_xpath(doc, "string(/domain/memory)", "512");
    assert_xpath(doc, "string(/domain/memory/@unit)", "MiB");
    assert_xpath(doc, "string(/domain/vcpu)", "2");
    assert_xpath(doc, "string(/domain/os/type/@machine)", "pc");
    assert_xpath(doc, "string(/domain/sysinfo/system/entry[@name='product'])", "OpenStack Nova");
    assert_xpath(doc, "string(/domain/devices/disk[1]/driver/@type)", "qcow2");
    assert_xpath(doc, "string(/domain/devices/disk[1]/driver/@cache)", "none");
    assert_xpath(doc, "string(/domain/devices/disk[1]/target/@bus)", "virtio");
    assert_xpath(doc, "string(/domain/devices/disk[2]/@device)", "cdrom");
    assert_xpath(doc, "string(count(/domain/devices/disk[2]/readonly))", "1");
    assert_xpath(doc, "string(/domain/devices/interface/mac/@address)", "fa:16:3e:01:02:03");
    assert_xpath(doc, "string(/domain/devices/interface/model/@type)", "virtio");
    assert_xpath(doc, "string(/domain/devices/serial/source/@path)",
                 "/var/lib/nubo/instances/" UUID "/console.log");
    assert_xpath(doc, "string(/domain/devices/serial/source/@append)", "on");
    assert_xpath(doc, "string(/domain/cpu/@mode)", "");
    xmlFreeDoc(doc);
    free(xml);

    struct lv_cpu host_model = {.mode = "host-model"};
    spec.virt_type = "kvm";
    spec.cpu = &host_model;
    spec.ndisks = 1;
    spec.mac_address = NULL;
    xml = lv_domain_xml(inst, &spec);
    doc = xmlReadMemory(xml, (int)strlen(xml), "d.xml", NULL, XML_PARSE_NONET);
    assert_non_null(doc);
    assert_xpath(doc, "string(/domain/@type)", "kvm");
    assert_xpath(doc, "string(/domain/cpu/@mode)", "host-model");
    assert_xpath(doc, "string(count(/domain/devices/disk))", "1");
    assert_xpath(doc, "string(count(/domain/devices/interface))", "0");
    xmlFreeDoc(doc);
    free(xml);
    json_decref(inst);
}

/* A "bridge" VIF of network_info becomes <interface type='bridge'> (mac,
 * bridge, tap name, virtio, MTU); a VIF of another type keeps the user
 * NIC; a VIF with a name unsafe in XML is not used as is. */
static void test_domain_xml_bridge_vifs(void **state)
{
    (void)state;
    json_t *inst =
        json_pack("{s:s, s:s, s:{s:s, s:i, s:i}, s:[{s:s, s:s, s:s, s:s, s:{s:s, s:s, s:{s:i}}}]}",
                  "uuid", UUID, "name", "vm", "flavor", "name", "m1", "memory_mb", 128, "vcpus", 1,
                  "network_info", "id", "0a1b2c3d-4e5f-4000-8000-000000000001", "type", "bridge",
                  "address", "fa:16:3e:00:00:11", "devname", "tap0a1b2c3d-4e", "network", "id",
                  "n1", "bridge", "brq5a1e0001-00", "meta", "mtu", 1450);
    struct lv_domain_spec spec = {
        .virt_type = "qemu",
        .cache_mode = "none",
        .console_path = "/c.log",
        .mac_address = "fa:16:3e:01:02:03",
    };
    char *xml = lv_domain_xml(inst, &spec);
    xmlDocPtr doc = xmlReadMemory(xml, (int)strlen(xml), "d.xml", NULL, XML_PARSE_NONET);
    if (!doc)
        fail_msg("not well-formed XML:\n%s", xml);
    assert_xpath(doc, "string(count(/domain/devices/interface))", "1");
    assert_xpath(doc, "string(/domain/devices/interface/@type)", "bridge");
    assert_xpath(doc, "string(/domain/devices/interface/mac/@address)", "fa:16:3e:00:00:11");
    assert_xpath(doc, "string(/domain/devices/interface/source/@bridge)", "brq5a1e0001-00");
    assert_xpath(doc, "string(/domain/devices/interface/target/@dev)", "tap0a1b2c3d-4e");
    assert_xpath(doc, "string(/domain/devices/interface/model/@type)", "virtio");
    assert_xpath(doc, "string(/domain/devices/interface/mtu/@size)", "1450");
    xmlFreeDoc(doc);
    free(xml);

    json_t *vif = json_array_get(json_object_get(inst, "network_info"), 0);
    json_object_set_new(vif, "type", json_string("ovs"));
    xml = lv_domain_xml(inst, &spec);
    doc = xmlReadMemory(xml, (int)strlen(xml), "d.xml", NULL, XML_PARSE_NONET);
    assert_xpath(doc, "string(count(/domain/devices/interface))", "1");
    assert_xpath(doc, "string(/domain/devices/interface/@type)", "user");
    assert_xpath(doc, "string(/domain/devices/interface/mac/@address)", "fa:16:3e:01:02:03");
    xmlFreeDoc(doc);
    free(xml);

    json_object_set_new(vif, "type", json_string("bridge"));
    json_object_set_new(vif, "devname", json_string("tap'/><x"));
    xml = lv_domain_xml(inst, &spec);
    doc = xmlReadMemory(xml, (int)strlen(xml), "d.xml", NULL, XML_PARSE_NONET);
    assert_non_null(doc);
    assert_xpath(doc, "string(count(/domain/devices/interface[@type='bridge']))", "0");
    xmlFreeDoc(doc);
    free(xml);
    json_decref(inst);
}

static void test_mac(void **state)
{
    (void)state;
    char a[18], b[18], c[18];
    lv_mac_for(UUID, a);
    lv_mac_for(UUID, b);
    lv_mac_for("0b9b1b7e-2f43-4a8e-9d59-4f2ad1d3c002", c);
    assert_string_equal(a, b);
    assert_int_equal(strlen(a), 17);
    assert_true(!strncmp(a, "fa:16:3e:", 9));
    assert_string_not_equal(a, c);
}

static void test_run(void **state)
{
    (void)state;
    char out[64];
    const char *ok[] = {"sh", "-c", "echo hello; echo err >&2", NULL};
    assert_int_equal(nb_run(ok, out, sizeof(out), 10), 0);
    assert_string_equal(out, "hello\nerr\n");
    const char *bad[] = {"sh", "-c", "exit 3", NULL};
    assert_int_equal(nb_run(bad, out, sizeof(out), 10), 3);
    const char *missing[] = {"/nonexistent/tool", NULL};
    assert_int_equal(nb_run(missing, out, sizeof(out), 10), 127);
    assert_non_null(strstr(out, "/nonexistent/tool"));
    /* only the tail is kept */
    const char *big[] = {"sh", "-c", "seq 1 10000", NULL};
    assert_int_equal(nb_run(big, out, sizeof(out), 10), 0);
    assert_non_null(strstr(out, "9999\n10000\n"));
    assert_int_equal(strlen(out), sizeof(out) - 1);
    /* the time limit kills */
    const char *slow[] = {"sleep", "30", NULL};
    assert_int_equal(nb_run(slow, out, sizeof(out), 0.3), 128 + 9);
    assert_non_null(strstr(out, "killed"));
}

static void test_rm_rf(void **state)
{
    (void)state;
    char dir[] = "/tmp/nubo-rmrf-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char p[256];
    snprintf(p, sizeof(p), "mkdir -p %s/a/b && touch %s/a/b/f %s/g && ln -s /etc %s/l", dir, dir,
             dir, dir);
    assert_int_equal(system(p), 0);
    assert_int_equal(nb_rm_rf(dir), 0);
    assert_int_equal(access(dir, F_OK), -1);
    assert_int_equal(access("/etc/passwd", F_OK), 0); /* the symlink was not followed */
    assert_int_equal(nb_rm_rf(dir), 0);               /* missing is fine */
}

/* A volume mapping row whose connection_info points at <base>/<md5 of
 * share>/volume-<id>, as the NFS backend writes it. */
static json_t *vol_bdm(const char *base, const char *id, const char *dev, int boot_index,
                       const char *format)
{
    char name[128];
    snprintf(name, sizeof(name), "volume-%s", id);
    json_t *ci =
        json_pack("{s:s, s:{s:s, s:s, s:s}, s:s}", "driver_volume_type", "nfs", "data", "export",
                  "127.0.0.1:/srv/share", "name", name, "format", format, "mount_point_base", base);
    char *text = json_dumps(ci, JSON_COMPACT);
    json_t *b = json_pack("{s:s, s:s, s:s, s:s, s:i, s:i, s:s}", "volume_id", id, "device_name",
                          dev, "source_type", "volume", "destination_type", "volume", "boot_index",
                          boot_index, "deleted", 0, "connection_info", text);
    if (boot_index < 0)
        json_object_set_new(b, "boot_index", json_null());
    free(text);
    json_decref(ci);
    return b;
}

/* Creates the file a mapping points at; returns its path (static). */
static const char *touch_volume(const json_t *bdm)
{
    static char path[1024];
    json_t *ci = nb_bdm_connection_info(bdm);
    assert_int_equal(nb_bdm_volume_path(ci, path, sizeof(path)), 0);
    json_decref(ci);
    char cmd[2200];
    snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\" && : > '%s'", path, path);
    assert_int_equal(system(cmd), 0);
    return path;
}

#define VBOOT "aaaaaaaa-1111-4111-8111-000000000001"
#define VDATA "aaaaaaaa-1111-4111-8111-000000000002"
#define VPEND "aaaaaaaa-1111-4111-8111-000000000003"

/* A volume-backed instance: the boot volume is vda with the format its
 * mapping declares (whatever the file is), data volumes follow at their
 * device names with the volume ID as serial, a mapping still without
 * connection_info (attach in progress) is left out. */
static void test_volume_disks(void **state)
{
    (void)state;
    char base[] = "/tmp/nubo-lvvol-XXXXXX";
    assert_non_null(mkdtemp(base));
    struct lv lv = {.host = "cmp-1"};
    json_t *boot = vol_bdm(base, VBOOT, "/dev/vda", 0, "qcow2");
    json_t *data = vol_bdm(base, VDATA, "/dev/vdc", -1, "raw");
    json_t *pending =
        json_pack("{s:s, s:s, s:s, s:n, s:i}", "volume_id", VPEND, "device_name", "/dev/vdd",
                  "destination_type", "volume", "boot_index", "deleted", 0);
    char boot_path[1024], data_path[1024];
    snprintf(boot_path, sizeof(boot_path), "%s", touch_volume(boot)); /* empty: "raw" on disk */
    snprintf(data_path, sizeof(data_path), "%s", touch_volume(data));
    assert_non_null(strstr(boot_path, "/volume-" VBOOT));
    /* the rows in any order: the boot volume comes first */
    json_t *inst = json_pack("{s:s, s:s, s:{s:s, s:i, s:i}, s:[O, O, O]}", "uuid", UUID, "name",
                             "bfv", "flavor", "name", "m1.tiny", "memory_mb", 256, "vcpus", 1,
                             "block_device_mapping", data, pending, boot);
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    struct lv_volumes vols;
    assert_int_equal(lv_volumes_collect(&lv, &ctx, inst, &vols), 0);
    assert_int_equal(vols.n, 2);
    assert_true(vols.v[0].boot);
    assert_string_equal(vols.v[0].target, "vda");
    assert_string_equal(vols.v[0].format, "qcow2");
    assert_string_equal(vols.v[0].path, boot_path);
    assert_string_equal(vols.v[1].target, "vdc");
    assert_string_equal(vols.v[1].format, "raw");

    struct lv_domain_spec spec = {
        .virt_type = "qemu", .cache_mode = "writeback", .console_path = "/i/console.log"};
    for (int i = 0; i < vols.n; i++)
        spec.disks[spec.ndisks++] = lv_volume_disk(&vols.v[i]);
    char *xml = lv_domain_xml(inst, &spec);
    xmlDocPtr doc = xmlReadMemory(xml, (int)strlen(xml), "d.xml", NULL, XML_PARSE_NONET);
    if (!doc)
        fail_msg("not well-formed XML:\n%s", xml);
    assert_xpath(doc, "string(count(/domain/devices/disk))", "2");
    assert_xpath(doc, "string(/domain/devices/disk[1]/target/@dev)", "vda");
    assert_xpath(doc, "string(/domain/devices/disk[1]/target/@bus)", "virtio");
    assert_xpath(doc, "string(/domain/devices/disk[1]/driver/@type)", "qcow2");
    assert_xpath(doc, "string(/domain/devices/disk[1]/driver/@cache)", "writeback");
    assert_xpath(doc, "string(/domain/devices/disk[1]/source/@file)", boot_path);
    assert_xpath(doc, "string(/domain/devices/disk[1]/serial)", VBOOT);
    assert_xpath(doc, "string(/domain/devices/disk[2]/target/@dev)", "vdc");
    assert_xpath(doc, "string(/domain/devices/disk[2]/driver/@type)", "raw");
    assert_xpath(doc, "string(/domain/devices/disk[2]/source/@file)", data_path);
    assert_xpath(doc, "string(/domain/devices/disk[2]/serial)", VDATA);
    assert_xpath(doc, "string(count(/domain/devices/disk[serial='" VPEND "']))", "0");
    xmlFreeDoc(doc);
    free(xml);

    /* the hot-plug XML is the same element */
    struct lv_disk d = lv_volume_disk(&vols.v[1]);
    xml = lv_disk_xml(&d, "none");
    doc = xmlReadMemory(xml, (int)strlen(xml), "disk.xml", NULL, XML_PARSE_NONET);
    assert_non_null(doc);
    assert_xpath(doc, "string(/disk/@type)", "file");
    assert_xpath(doc, "string(/disk/@device)", "disk");
    assert_xpath(doc, "string(/disk/target/@dev)", "vdc");
    assert_xpath(doc, "string(/disk/driver/@cache)", "none");
    assert_xpath(doc, "string(/disk/source/@file)", data_path);
    assert_xpath(doc, "string(/disk/serial)", VDATA);
    xmlFreeDoc(doc);
    free(xml);

    /* a volume file that vanished: named, with the volume and the host */
    assert_int_equal(unlink(data_path), 0);
    assert_int_equal(lv_volumes_collect(&lv, &ctx, inst, &vols), -1);
    assert_int_equal(ctx.err_status, 500);
    char want[2048];
    snprintf(want, sizeof(want), "Volume %s of instance %s: file %s is missing on host cmp-1",
             VDATA, UUID, data_path);
    assert_string_equal(ctx.err_msg, want);

    /* a boot volume without connection_info cannot be started */
    nb_ctx_init_system(&ctx, NULL);
    json_object_del(boot, "connection_info");
    assert_int_equal(lv_volumes_collect(&lv, &ctx, inst, &vols), -1);
    assert_non_null(
        strstr(ctx.err_msg, "Volume " VBOOT " of instance " UUID " has no connection_info"));
    json_decref(inst);
    json_decref(boot);
    json_decref(data);
    json_decref(pending);
    assert_int_equal(nb_rm_rf(base), 0);
}

/* An image-backed instance keeps vda for its local disk: volumes go
 * elsewhere, two mappings on one device are refused, formats other than
 * raw/qcow2 and mappings without a device name are refused. */
static void test_volume_clashes(void **state)
{
    (void)state;
    char base[] = "/tmp/nubo-lvvol-XXXXXX";
    assert_non_null(mkdtemp(base));
    struct lv lv = {.host = "cmp-2"};
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    struct lv_volumes vols;
    json_t *a = vol_bdm(base, VDATA, "vdb", -1, "qcow2");
    json_t *b = vol_bdm(base, VPEND, "/dev/vdb", -1, "raw");
    touch_volume(a);
    touch_volume(b);
    json_t *inst =
        json_pack("{s:s, s:s, s:[O]}", "uuid", UUID, "image_ref", "img", "block_device_mapping", a);
    assert_int_equal(lv_volumes_collect(&lv, &ctx, inst, &vols), 0);
    assert_int_equal(vols.n, 1);
    assert_false(vols.v[0].boot);
    assert_string_equal(vols.v[0].target, "vdb");
    json_array_append(json_object_get(inst, "block_device_mapping"), b);
    assert_int_equal(lv_volumes_collect(&lv, &ctx, inst, &vols), -1);
    assert_non_null(strstr(ctx.err_msg, "device vdb is already used"));
    nb_ctx_init_system(&ctx, NULL);
    json_array_remove(json_object_get(inst, "block_device_mapping"), 1);
    json_object_set_new(a, "device_name", json_string("/dev/vda"));
    assert_int_equal(lv_volumes_collect(&lv, &ctx, inst, &vols), -1);
    assert_non_null(strstr(ctx.err_msg, "device vda is already used"));
    nb_ctx_init_system(&ctx, NULL);
    json_object_set_new(a, "device_name", json_string(""));
    assert_int_equal(lv_volumes_collect(&lv, &ctx, inst, &vols), -1);
    assert_int_equal(ctx.err_status, 400);
    nb_ctx_init_system(&ctx, NULL);
    json_t *c = vol_bdm(base, VBOOT, "vde", -1, "vmdk");
    touch_volume(c);
    json_array_clear(json_object_get(inst, "block_device_mapping"));
    json_array_append(json_object_get(inst, "block_device_mapping"), c);
    assert_int_equal(lv_volumes_collect(&lv, &ctx, inst, &vols), -1);
    assert_non_null(strstr(ctx.err_msg, "format 'vmdk' in connection_info is not supported"));
    /* deleted rows and non-volume rows are not disks */
    nb_ctx_init_system(&ctx, NULL);
    json_object_set_new(c, "deleted", json_integer(7));
    json_array_append_new(json_object_get(inst, "block_device_mapping"),
                          json_pack("{s:s, s:s, s:i}", "source_type", "image", "destination_type",
                                    "local", "boot_index", 0));
    assert_int_equal(lv_volumes_collect(&lv, &ctx, inst, &vols), 0);
    assert_int_equal(vols.n, 0);
    json_decref(inst);
    json_decref(a);
    json_decref(b);
    json_decref(c);
    assert_int_equal(nb_rm_rf(base), 0);
}

/* libvirt's domain capabilities, cut down to the CPU models (the shape
 * `virsh domcapabilities` prints). */
static const char DOMCAPS[] =
    "<domainCapabilities><domain>qemu</domain><cpu>"
    "<mode name='host-passthrough' supported='yes'/>"
    "<mode name='host-model' supported='yes'><model fallback='forbid'>EPYC</model></mode>"
    "<mode name='custom' supported='yes'>"
    "<model usable='yes' vendor='unknown'>qemu64</model>"
    "<model usable='no' vendor='Intel'>SandyBridge</model>"
    "<model usable='yes' vendor='Intel'>Nehalem</model>"
    "<model usable='yes' vendor='Intel'>Westmere</model>"
    "</mode></cpu></domainCapabilities>";

/* cpu_mode = custom takes the first usable model of cpu_models (case
 * insensitive, libvirt's spelling), with the extra flags; the errors name
 * the option; the defaults are host-model under kvm, none under qemu. */
static void test_cpu_config(void **state)
{
    (void)state;
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    struct lv_cpu cpu;
    nb_conf_reset();
    assert_int_equal(lv_cpu_config(&ctx, "kvm", NULL, &cpu), 0);
    assert_string_equal(cpu.mode, "host-model");
    assert_int_equal(lv_cpu_config(&ctx, "qemu", NULL, &cpu), 0);
    assert_string_equal(cpu.mode, "");

    nb_conf_set("libvirt", "cpu_mode", "custom");
    nb_conf_set("libvirt", "cpu_models", "sandybridge, NEHALEM ,Westmere");
    nb_conf_set("libvirt", "cpu_model_extra_flags", "+PCID, -hle,mtrr");
    assert_int_equal(lv_cpu_config(&ctx, "qemu", DOMCAPS, &cpu), 0);
    assert_string_equal(cpu.mode, "custom");
    assert_string_equal(cpu.model, "Nehalem");
    assert_int_equal(cpu.nfeatures, 3);
    assert_string_equal(cpu.features[0].name, "pcid");
    assert_false(cpu.features[0].disable);
    assert_string_equal(cpu.features[1].name, "hle");
    assert_true(cpu.features[1].disable);
    assert_string_equal(cpu.features[2].name, "mtrr");
    assert_false(cpu.features[2].disable);

    json_t *inst = json_pack("{s:s, s:s, s:{s:s, s:i, s:i}}", "uuid", UUID, "name", "c", "flavor",
                             "name", "m1.tiny", "memory_mb", 512, "vcpus", 1);
    struct lv_domain_spec spec = {
        .virt_type = "qemu", .cache_mode = "none", .console_path = "/c.log", .cpu = &cpu};
    char *xml = lv_domain_xml(inst, &spec);
    xmlDocPtr doc = xmlReadMemory(xml, (int)strlen(xml), "d.xml", NULL, XML_PARSE_NONET);
    assert_non_null(doc);
    assert_xpath(doc, "string(/domain/cpu/@mode)", "custom");
    assert_xpath(doc, "string(/domain/cpu/@match)", "exact");
    assert_xpath(doc, "string(/domain/cpu/model)", "Nehalem");
    assert_xpath(doc, "string(/domain/cpu/feature[@name='pcid']/@policy)", "require");
    assert_xpath(doc, "string(/domain/cpu/feature[@name='hle']/@policy)", "disable");
    assert_xpath(doc, "string(/domain/cpu/feature[@name='mtrr']/@policy)", "require");
    xmlFreeDoc(doc);
    free(xml);
    /* host-model with flags: the features, no model */
    nb_conf_set("libvirt", "cpu_mode", "host-model");
    nb_conf_set("libvirt", "cpu_models", "");
    nb_conf_set("libvirt", "cpu_model_extra_flags", "-svm");
    assert_int_equal(lv_cpu_config(&ctx, "kvm", NULL, &cpu), 0);
    xml = lv_domain_xml(inst, &spec);
    doc = xmlReadMemory(xml, (int)strlen(xml), "d.xml", NULL, XML_PARSE_NONET);
    assert_non_null(doc);
    assert_xpath(doc, "string(/domain/cpu/@mode)", "host-model");
    assert_xpath(doc, "string(count(/domain/cpu/model))", "0");
    assert_xpath(doc, "string(/domain/cpu/feature[@name='svm']/@policy)", "disable");
    xmlFreeDoc(doc);
    free(xml);
    json_decref(inst);

    /* the errors */
    struct {
        const char *mode, *models, *flags, *want;
    } bad[] = {
        {"custom", "SandyBridge", "",
         "no configured CPU model can run on this host under "
         "virt_type qemu (libvirt marks SandyBridge not usable); "
         "usable models: qemu64, Nehalem, Westmere"},
        {"custom", "Nehalem2", "", "Configured CPU model: Nehalem2 is not correct"},
        {"custom", "", "", "The cpu_models option is required when cpu_mode=custom"},
        {"host-model", "Nehalem", "",
         "The cpu_models option is not required when cpu_mode!=custom"},
        {"host-modle", "", "",
         "cpu_mode must be host-model, host-passthrough, custom or none, "
         "not 'host-modle'"},
        {"custom", "Nehalem", "+pc id", "cpu_model_extra_flags: bad flag '+pc id'"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        nb_conf_set("libvirt", "cpu_mode", bad[i].mode);
        nb_conf_set("libvirt", "cpu_models", bad[i].models);
        nb_conf_set("libvirt", "cpu_model_extra_flags", bad[i].flags);
        nb_ctx_init_system(&ctx, NULL);
        assert_int_equal(lv_cpu_config(&ctx, "qemu", DOMCAPS, &cpu), -1);
        assert_int_equal(ctx.err_status, 500);
        if (!strstr(ctx.err_msg, bad[i].want))
            fail_msg("case %zu: '%s' lacks '%s'", i, ctx.err_msg, bad[i].want);
    }
    nb_conf_reset();
}

/* Removes the nodes expr selects. */
static void strip(xmlDocPtr doc, const char *expr)
{
    xmlXPathContextPtr xc = xmlXPathNewContext(doc);
    xmlXPathRegisterNs(xc, (const xmlChar *)"nova",
                       (const xmlChar *)"http://openstack.org/xmlns/libvirt/nova/1.1");
    xmlXPathObjectPtr o = xmlXPathEvalExpression((const xmlChar *)expr, xc);
    for (int i = 0; o && o->nodesetval && i < o->nodesetval->nodeNr; i++) {
        xmlNodePtr n = o->nodesetval->nodeTab[i];
        if (n->type == XML_ATTRIBUTE_NODE) {
            xmlRemoveProp((xmlAttrPtr)n);
        } else {
            xmlUnlinkNode(n);
            xmlFreeNode(n);
        }
        o->nodesetval->nodeTab[i] = NULL;
    }
    xmlXPathFreeObject(o);
    xmlXPathFreeContext(xc);
}

/* A domain XML without what may differ between the probe and a guest:
 * identity (name, UUID, metadata, SMBIOS serial/uuid, MAC, console file),
 * disks and memory. New string. */
static char *comparable(const char *xml)
{
    xmlDocPtr doc =
        xmlReadMemory(xml, (int)strlen(xml), "d.xml", NULL, XML_PARSE_NONET | XML_PARSE_NOBLANKS);
    if (!doc)
        fail_msg("not well-formed XML:\n%s", xml);
    const char *drop[] = {
        "/domain/name",
        "/domain/uuid",
        "/domain/metadata",
        "/domain/memory",
        "/domain/currentMemory",
        "/domain/sysinfo/system/entry[@name='serial' or @name='uuid']",
        "/domain/devices/disk",
        "/domain/devices/interface/mac/@address",
        "/domain/devices/serial/source/@path",
    };
    for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++)
        strip(doc, drop[i]);
    xmlChar *out = NULL;
    int len = 0;
    xmlDocDumpFormatMemory(doc, &out, &len, 1);
    char *s = strdup((const char *)out);
    xmlFree(out);
    xmlFreeDoc(doc);
    return s;
}

/* The virt_type probe is a real guest but for its disk and memory: machine
 * type, firmware, CPU (mode, model, features), vCPUs, features, devices. A
 * probe that boots less than guests boot proves nothing (nested KVM runs a
 * guest without <cpu> and kills one with host-model). */
static void test_probe_is_a_real_guest(void **state)
{
    (void)state;
    char base[] = "/tmp/nubo-lvprobe-XXXXXX";
    assert_non_null(mkdtemp(base));
    struct lv lv = {.host = "cmp-1", .cache_mode = "none"};
    snprintf(lv.instances_path, sizeof(lv.instances_path), "%s", base);
    char dir[200], cmd[1000];
    snprintf(dir, sizeof(dir), "%s/%s", base, UUID);
    snprintf(cmd, sizeof(cmd),
             "mkdir -p %s && : > %s/disk && : > %s/disk.config && "
             "echo '{\"disk_format\": \"qcow2\"}' > %s/disk.info",
             dir, dir, dir, dir);
    assert_int_equal(system(cmd), 0);
    json_t *inst =
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:{s:s, s:i, s:i, s:i}}", "uuid", UUID, "name", "web",
                  "user_id", "u1", "project_id", "p1", "image_ref", "img-1", "flavor", "name",
                  "m1.small", "memory_mb", 2048, "vcpus", 2, "root_gb", 20);
    struct lv_cpu cpus[] = {
        {.mode = "host-model"},
        {.mode = ""},
        {.mode = "custom",
         .model = "Nehalem",
         .features = {{"pcid", false}, {"hle", true}},
         .nfeatures = 2},
    };
    const char *types[] = {"kvm", "qemu", "kvm"};
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    struct lv_volumes vols = {.n = 0};
    for (size_t i = 0; i < sizeof(cpus) / sizeof(cpus[0]); i++) {
        char *guest = lv_instance_xml(&lv, &ctx, inst, &vols, types[i], &cpus[i]);
        assert_non_null(guest);
        char *probe = lv_probe_xml(&lv, types[i], &cpus[i], "/p", 2);
        char *g = comparable(guest), *p = comparable(probe);
        if (strcmp(g, p) != 0)
            fail_msg("case %zu: the probe differs from the guest\nguest:\n%s\nprobe:\n%s", i, g, p);
        /* what is compared is the real thing */
        xmlDocPtr doc = xmlReadMemory(probe, (int)strlen(probe), "p.xml", NULL, XML_PARSE_NONET);
        assert_non_null(doc);
        assert_xpath(doc, "string(/domain/@type)", types[i]);
        assert_xpath(doc, "string(/domain/cpu/@mode)", cpus[i].mode);
        assert_xpath(doc, "string(/domain/cpu/model)", cpus[i].model);
        assert_xpath(doc, "string(/domain/os/type/@machine)", "pc");
        assert_xpath(doc, "string(/domain/vcpu)", "2");
        assert_xpath(doc, "string(/domain/devices/disk/source/@file)", "/p/boot.img");
        assert_xpath(doc, "string(/domain/devices/serial/source/@path)", "/p/serial.log");
        assert_xpath(doc, "string(/domain/memory)", "32");
        /* not named by a UUID: the driver's listing and events skip it */
        char *name = xpath(doc, "string(/domain/name)");
        assert_false(nb_is_uuid(name));
        free(name);
        xmlFreeDoc(doc);
        free(g);
        free(p);
        free(guest);
        free(probe);
    }
    json_decref(inst);
    assert_int_equal(nb_rm_rf(base), 0);
}

/* QEMU dying of KVM (the monitor closed, KVM's assertion, an MSR) is told
 * from QEMU dying of something else (a disk in the wrong format). */
static void test_kvm_failure(void **state)
{
    (void)state;
    assert_true(lv_is_kvm_failure(
        "internal error: qemu unexpectedly closed the monitor: 2026-11-30T10:00:00.000000Z "
        "qemu-system-x86_64: error: failed to set MSR 0x10a to 0x69\nqemu-system-x86_64: "
        "../../target/i386/kvm/kvm.c:3183: kvm_buf_set_msrs: Assertion `ret == "
        "cpu->kvm_msr_buf->nmsrs' failed."));
    assert_true(lv_is_kvm_failure(
        "internal error: process exited while connecting to monitor: qemu-system-x86_64: "
        "error: failed to set MSR 0x10a to 0x69"));
    assert_false(lv_is_kvm_failure(
        "internal error: qemu unexpectedly closed the monitor: qemu-system-x86_64: -blockdev "
        "{\"driver\":\"qcow2\"}: Image is not in qcow2 format"));
    assert_false(lv_is_kvm_failure("Requested operation is not valid: domain is already running"));
    assert_false(lv_is_kvm_failure(NULL));
}

/* nb_conf_keys: what the driver's ignored-options warning walks. */
static void test_conf_keys(void **state)
{
    (void)state;
    nb_conf_reset();
    nb_conf_set("libvirt", "virt_type", "qemu");
    nb_conf_set("DEFAULT", "host", "h");
    nb_conf_set("libvirt", "live_migration_bandwidth", "0");
    nb_conf_set("libvirt", "virt_type", "kvm");
    const char *keys[8];
    assert_int_equal(nb_conf_keys("libvirt", keys, 8), 2);
    assert_string_equal(keys[0], "virt_type");
    assert_string_equal(keys[1], "live_migration_bandwidth");
    assert_int_equal(nb_conf_keys("libvirt", keys, 1), 1);
    assert_int_equal(nb_conf_keys("nothing", keys, 8), 0);
    nb_conf_reset();
}

/* Migration URIs: where peers reach this host, and the host and port a
 * URI names (what the target check connects to). */
static void test_migration_uri(void **state)
{
    (void)state;
    struct lv lv = {.host = "cmp1"};
    struct nb_ctx ctx;
    char uri[256], host[64], port[16];
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(lv_migration_uri(&lv, &ctx, uri, sizeof(uri)), 0);
    assert_string_equal(uri, "qemu+tcp://cmp1/system"); /* no my_ip: the host name */
    nb_conf_set("DEFAULT", "my_ip", "198.51.100.7");
    nb_conf_set("libvirt", "live_migration_scheme", "tls");
    assert_int_equal(lv_migration_uri(&lv, &ctx, uri, sizeof(uri)), 0);
    assert_string_equal(uri, "qemu+tls://198.51.100.7/system");
    nb_conf_set("libvirt", "live_migration_inbound_addr", "fd00::7");
    assert_int_equal(lv_migration_uri(&lv, &ctx, uri, sizeof(uri)), 0);
    assert_string_equal(uri, "qemu+tls://[fd00::7]/system");
    nb_conf_set("libvirt", "live_migration_uri", "qemu+ssh://nova@%s/system?no_verify=1");
    assert_int_equal(lv_migration_uri(&lv, &ctx, uri, sizeof(uri)), 0);
    assert_string_equal(uri, "qemu+ssh://nova@fd00::7/system?no_verify=1");
    nb_conf_set("libvirt", "live_migration_uri", "qemu+tcp://host/system");
    assert_int_equal(lv_migration_uri(&lv, &ctx, uri, sizeof(uri)), -1);
    assert_non_null(strstr(nb_ctx_message(&ctx), "must hold one %s"));
    nb_ctx_clear_error(&ctx);
    nb_conf_set("libvirt", "live_migration_uri", "");
    nb_conf_set("libvirt", "live_migration_scheme", "rdma");
    assert_int_equal(lv_migration_uri(&lv, &ctx, uri, sizeof(uri)), -1);
    assert_non_null(strstr(nb_ctx_message(&ctx), "live_migration_scheme must be"));
    nb_conf_set("libvirt", "live_migration_scheme", "tcp");
    nb_conf_set("libvirt", "live_migration_inbound_addr", "");
    nb_conf_set("DEFAULT", "my_ip", "");

    assert_int_equal(
        lv_uri_host_port("qemu+tcp://198.51.100.2/system", host, sizeof(host), port, sizeof(port)),
        0);
    assert_string_equal(host, "198.51.100.2");
    assert_string_equal(port, "16509");
    assert_int_equal(
        lv_uri_host_port("qemu+tls://[fd00::2]/system", host, sizeof(host), port, sizeof(port)), 0);
    assert_string_equal(host, "fd00::2");
    assert_string_equal(port, "16514");
    assert_int_equal(lv_uri_host_port("qemu+ssh://nova@cmp2:2222/system?x=1", host, sizeof(host),
                                      port, sizeof(port)),
                     0);
    assert_string_equal(host, "cmp2");
    assert_string_equal(port, "2222");
    assert_int_equal(lv_uri_host_port("qemu://cmp3/system", host, sizeof(host), port, sizeof(port)),
                     0);
    assert_string_equal(port, "16514"); /* libvirt's default transport is tls */
    assert_int_equal(lv_uri_host_port("qemu:///system", host, sizeof(host), port, sizeof(port)),
                     -1);
    assert_int_equal(lv_uri_host_port(NULL, host, sizeof(host), port, sizeof(port)), -1);
}

/* Nova's downtime_steps docstring: 10 steps, 30 s delay, 3 GiB, 400 ms. */
static void test_downtime_steps(void **state)
{
    (void)state;
    nb_conf_set("libvirt", "live_migration_downtime", "400");
    nb_conf_set("libvirt", "live_migration_downtime_steps", "10");
    nb_conf_set("libvirt", "live_migration_downtime_delay", "30");
    struct lv_downtime d;
    lv_downtime_steps(3, &d);
    assert_int_equal(d.n, 11);
    const long long at[] = {0, 90, 180, 270, 360, 450, 540, 630, 720, 810, 900};
    const long long ms[] = {40, 76, 112, 148, 184, 220, 256, 292, 328, 364, 400};
    for (int i = 0; i < 11; i++) {
        assert_int_equal(d.at_s[i], at[i]);
        assert_int_equal(d.ms[i], ms[i]);
    }
    nb_conf_set("libvirt", "live_migration_downtime", "500");
    nb_conf_set("libvirt", "live_migration_downtime_steps", "10");
    nb_conf_set("libvirt", "live_migration_downtime_delay", "75");
}

/* Nova's _live_migration_data_gb and completion timeout: RAM at least 2
 * GiB; a block migration adds each writable local disk's file size, at
 * least 2 GiB; the timeout is seconds per GiB, truncated, 0 = none; the
 * action fires past it, never in post-copy. */
static void test_completion_timeout(void **state)
{
    (void)state;
    char dir[] = "/tmp/nubo-unit-lmgb-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char big[64], small[64], ro[64], vol[64];
    snprintf(big, sizeof(big), "%s/disk", dir);
    snprintf(small, sizeof(small), "%s/disk.eph0", dir);
    snprintf(ro, sizeof(ro), "%s/disk.config", dir);
    snprintf(vol, sizeof(vol), "%s/gone", dir);
    FILE *f = fopen(big, "w");
    assert_int_equal(ftruncate(fileno(f), 3LL << 30 | 1LL << 29), 0); /* 3.5 GiB, sparse */
    fclose(f);
    f = fopen(small, "w");
    fputs("x", f);
    fclose(f);
    json_t *disks =
        json_pack("[{s:s, s:b, s:b}, {s:s, s:b, s:b}, {s:s, s:b, s:b}, {s:s, s:b, "
                  "s:b}, {s:s, s:b, s:b}]",
                  "path", big, "local", 1, "readonly", 0, "path", small, "local", 1, "readonly", 0,
                  "path", ro, "local", 1, "readonly", 1, "path", "/nfs/volume-1", "local", 0,
                  "readonly", 0, "path", vol, "local", 1, "readonly", 0);
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    /* not a block migration: the RAM alone, at least 2 GiB */
    assert_true(lv_migration_data_gb(&ctx, UUID, 512, disks, false) == 2.0);
    assert_true(lv_migration_data_gb(&ctx, UUID, 3072, disks, false) == 3.0);
    assert_true(lv_migration_data_gb(&ctx, UUID, 3072, NULL, true) == 3.0);
    /* block: 2 (RAM) + 3.5 + 2 (1 byte, at least 2); the read-only config
     * drive, the volume and the file that is not there count nothing */
    assert_true(lv_migration_data_gb(&ctx, UUID, 128, disks, true) == 7.5);
    json_decref(disks);
    unlink(big);
    unlink(small);
    rmdir(dir);

    nb_conf_reset();
    assert_int_equal(lv_completion_timeout_s(2), 1600); /* Nova's default 800 s/GiB */
    nb_conf_set("libvirt", "live_migration_completion_timeout", "3");
    assert_int_equal(lv_completion_timeout_s(7.5), 22); /* int(22.5) */
    nb_conf_set("libvirt", "live_migration_completion_timeout", "0");
    assert_int_equal(lv_completion_timeout_s(7.5), 0);
    nb_conf_set("libvirt", "live_migration_completion_timeout", "-5");
    assert_int_equal(lv_completion_timeout_s(7.5), 0);
    assert_false(lv_timeout_due(0, 1e6, false)); /* 0: no timeout */
    assert_false(lv_timeout_due(4, 4.0, false)); /* elapsed must exceed it */
    assert_true(lv_timeout_due(4, 4.5, false));
    assert_false(lv_timeout_due(4, 4.5, true)); /* post-copy runs to its end */

    assert_int_equal(lv_timeout_action(), LV_TIMEOUT_ABORT); /* the default */
    nb_conf_set("libvirt", "live_migration_timeout_action", "force_complete");
    assert_int_equal(lv_timeout_action(), LV_TIMEOUT_FORCE_COMPLETE);
    nb_conf_set("libvirt", "live_migration_timeout_action", "abort");
    assert_int_equal(lv_timeout_action(), LV_TIMEOUT_ABORT);
    nb_conf_set("libvirt", "live_migration_timeout_action", "pause");
    assert_int_equal(lv_timeout_action(), -1);
    nb_conf_reset();
}

/* The likely cause named when QEMU refuses post-copy: the sysctl as read
 * from its file, and QEMU's user. */
static void test_post_copy_cause(void **state)
{
    (void)state;
    char dir[] = "/tmp/nubo-unit-uffd-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[64], cause[256];
    snprintf(path, sizeof(path), "%s/unprivileged_userfaultfd", dir);
    assert_int_equal(lv_read_unprivileged_userfaultfd(path), -1); /* no such file */
    FILE *f = fopen(path, "w");
    fputs("0\n", f);
    fclose(f);
    assert_int_equal(lv_read_unprivileged_userfaultfd(path), 0);
    f = fopen(path, "w");
    fputs("1\n", f);
    fclose(f);
    assert_int_equal(lv_read_unprivileged_userfaultfd(path), 1);
    f = fopen(path, "w");
    fclose(f);
    assert_int_equal(lv_read_unprivileged_userfaultfd(path), -1); /* empty */
    unlink(path);
    rmdir(dir);

    lv_post_copy_cause(cause, sizeof(cause), 0, 64055);
    assert_string_equal(cause, "vm.unprivileged_userfaultfd = 0 and QEMU does not run as root "
                               "(uid 64055)");
    lv_post_copy_cause(cause, sizeof(cause), 0, 0);
    assert_non_null(strstr(cause, "vm.unprivileged_userfaultfd = 0 and QEMU runs as root but "
                                  "without CAP_SYS_PTRACE"));
    lv_post_copy_cause(cause, sizeof(cause), 0, -1);
    assert_non_null(strstr(cause, "vm.unprivileged_userfaultfd = 0 and QEMU lacks CAP_SYS_PTRACE"));
    lv_post_copy_cause(cause, sizeof(cause), 1, 64055);
    assert_non_null(strstr(cause, "unknown: vm.unprivileged_userfaultfd = 1 on this host"));
    lv_post_copy_cause(cause, sizeof(cause), -1, 64055);
    assert_non_null(strstr(cause, "no vm.unprivileged_userfaultfd on this host"));
    lv_post_copy_cause(cause, 16, 0, 64055); /* truncated, terminated */
    assert_string_equal(cause, "vm.unprivileged");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_domain_xml_bridge_vifs),
        cmocka_unit_test(test_domain_xml),
        cmocka_unit_test(test_mac),
        cmocka_unit_test(test_run),
        cmocka_unit_test(test_rm_rf),
        cmocka_unit_test(test_volume_disks),
        cmocka_unit_test(test_volume_clashes),
        cmocka_unit_test(test_cpu_config),
        cmocka_unit_test(test_probe_is_a_real_guest),
        cmocka_unit_test(test_kvm_failure),
        cmocka_unit_test(test_conf_keys),
        cmocka_unit_test(test_migration_uri),
        cmocka_unit_test(test_downtime_steps),
        cmocka_unit_test(test_completion_timeout),
        cmocka_unit_test(test_post_copy_cause),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
