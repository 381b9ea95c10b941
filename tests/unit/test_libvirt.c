/* test_libvirt.c - the pure parts of the libvirt driver: the domain XML
 * generated from an instance (well-formed, escaped, named and UUID'd by
 * the instance, disks/NIC/serial as asked), the MAC address, and nb_run
 * (the subprocess helper the driver uses for qemu-img). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/cleanup.h"
#include "common/proc.h"
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
        .cpu_mode = "none",
    };
    spec.disks[spec.ndisks++] =
        (struct lv_disk){"/i/" UUID "/disk", "qcow2", "disk", "virtio", "vda", false};
    spec.disks[spec.ndisks++] =
        (struct lv_disk){"/i/" UUID "/disk.config", "raw", "cdrom", "ide", "hda", true};
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

    spec.virt_type = "kvm";
    spec.cpu_mode = "host-model";
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_domain_xml),
        cmocka_unit_test(test_mac),
        cmocka_unit_test(test_run),
        cmocka_unit_test(test_rm_rf),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
