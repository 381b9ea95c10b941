/* test_metadata.c - the metadata documents (meta_data.json, user data,
 * public keys, network_data.json, the EC2 tree and Nova's listings), the
 * proxy signature, the metadata API's request handling against a real
 * database (400/403/404/405 and the documents), and the config drive as
 * isoinfo reads it back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/config.h"
#include "common/json.h"
#include "common/util.h"
#include "compute/metadata/internal.h"
#include "compute/metadata/metadata.h"
#include "db/db.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define UUID "0b3d6a58-9d2c-4d2e-8a55-3c1f0e4b7a10"
#define PROJECT "6f1c2e0a9b8d4c7e8f0a1b2c3d4e5f60"
#define KEY "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGq0 tester@nubo"
/* "#!/bin/sh\necho hi\0there\n": user data is bytes, NUL included */
#define USER_DATA_B64 "IyEvYmluL3NoCmVjaG8gaGkAdGhlcmUK"
#define USER_DATA "#!/bin/sh\necho hi\0there\n"
#define USER_DATA_LEN (sizeof(USER_DATA) - 1)
/* hmac.new(b"s3cret", UUID.encode(), hashlib.sha256).hexdigest() */
#define SIGNATURE "812d5cd07ba1493bacb887573e0341c4384ae8a3c4a1a189f9067b4ace51d60c"

static json_t *instance(bool with_user_data)
{
    json_t *inst =
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:{s:s, s:I}, s:{s:s, s:s}, s:[]}",
                  "uuid", UUID, "name", "web 1", "hostname", "web-1", "project_id", PROJECT,
                  "image_ref", "c5a7e1f2-0000-4000-8000-000000000001", "key_name", "mykey",
                  "key_data", KEY, "availability_zone", "nova", "launch_index", (json_int_t)0,
                  "flavor", "name", "m1.tiny", "memory_mb", (json_int_t)512, "metadata", "role",
                  "web", "tier", "front", "block_device_mapping");
    if (with_user_data)
        json_object_set_new(inst, "user_data", json_string(USER_DATA_B64));
    return inst;
}

static int setup(void **state)
{
    (void)state;
    nb_conf_reset();
    return 0;
}

static void test_meta_data_latest(void **state)
{
    (void)state;
    json_t *inst = instance(true);
    json_t *md = nb_md_meta_data(inst, "latest");
    assert_non_null(md);
    assert_string_equal(nb_json_str(md, "uuid"), UUID);
    assert_string_equal(nb_json_str(md, "name"), "web 1");
    assert_string_equal(nb_json_str(md, "hostname"), "web-1.novalocal"); /* [api] dhcp_domain */
    assert_string_equal(nb_json_str(md, "availability_zone"), "nova");
    assert_string_equal(nb_json_str(md, "project_id"), PROJECT);
    assert_int_equal(nb_json_int(md, "launch_index", -1), 0);
    json_t *meta = json_object_get(md, "meta");
    assert_int_equal(json_object_size(meta), 2);
    assert_string_equal(nb_json_str(meta, "role"), "web");
    assert_string_equal(nb_json_str(json_object_get(md, "public_keys"), "mykey"), KEY);
    json_t *keys = json_object_get(md, "keys");
    assert_int_equal(json_array_size(keys), 1);
    assert_string_equal(nb_json_str(json_array_get(keys, 0), "name"), "mykey");
    assert_string_equal(nb_json_str(json_array_get(keys, 0), "type"), "ssh");
    assert_string_equal(nb_json_str(json_array_get(keys, 0), "data"), KEY);
    assert_true(json_is_array(json_object_get(md, "devices")));
    assert_int_equal(json_array_size(json_object_get(md, "devices")), 0);
    assert_true(json_is_array(json_object_get(md, "dedicated_cpus")));
    /* 512 random bytes, base64 */
    assert_int_equal(strlen(nb_json_str(md, "random_seed")), 684);
    json_t *again = nb_md_meta_data(inst, "latest");
    assert_string_not_equal(nb_json_str(md, "random_seed"), nb_json_str(again, "random_seed"));
    json_decref(again);
    json_decref(md);

    /* dhcp_domain empty: the bare hostname */
    nb_conf_set("api", "dhcp_domain", "");
    md = nb_md_meta_data(inst, "2018-08-27");
    assert_string_equal(nb_json_str(md, "hostname"), "web-1");
    assert_null(json_object_get(md, "dedicated_cpus")); /* Victoria's */
    json_decref(md);
    json_decref(inst);
}

static void test_meta_data_versions(void **state)
{
    (void)state;
    json_t *inst = instance(false);
    json_object_del(inst, "key_name");
    json_object_del(inst, "key_data");
    json_object_set_new(inst, "metadata", json_object());
    json_t *md = nb_md_meta_data(inst, "2012-08-10");
    assert_non_null(md);
    assert_null(json_object_get(md, "random_seed")); /* from Grizzly */
    assert_null(json_object_get(md, "project_id"));  /* from Liberty */
    assert_null(json_object_get(md, "devices"));     /* from Newton */
    assert_null(json_object_get(md, "public_keys")); /* no key */
    assert_null(json_object_get(md, "keys"));
    assert_null(json_object_get(md, "meta")); /* Nova leaves out empty metadata */
    json_decref(md);
    md = nb_md_meta_data(inst, "2015-10-15");
    assert_string_equal(nb_json_str(md, "project_id"), PROJECT);
    assert_null(json_object_get(md, "devices"));
    json_decref(md);
    assert_null(nb_md_meta_data(inst, "2011-01-01"));
    /* a certificate keypair */
    json_object_set_new(inst, "key_name", json_string("cert"));
    json_object_set_new(inst, "key_data", json_string("-----BEGIN CERTIFICATE-----\nMIIB\n"));
    md = nb_md_meta_data(inst, "latest");
    assert_string_equal(nb_json_str(json_array_get(json_object_get(md, "keys"), 0), "type"),
                        "x509");
    json_decref(md);
    json_decref(inst);
}

static void test_user_data_decoding(void **state)
{
    (void)state;
    json_t *inst = instance(true);
    char *ud;
    size_t len;
    assert_int_equal(nb_md_user_data(inst, &ud, &len), 1);
    assert_int_equal(len, USER_DATA_LEN);
    assert_memory_equal(ud, USER_DATA, USER_DATA_LEN);
    free(ud);
    /* line breaks inside the base64 and padding are fine */
    json_object_set_new(inst, "user_data", json_string("aGVs\nbG8=\n"));
    assert_int_equal(nb_md_user_data(inst, &ud, &len), 1);
    assert_int_equal(len, 5);
    assert_memory_equal(ud, "hello", 5);
    free(ud);
    json_object_set_new(inst, "user_data", json_string("QQ=="));
    assert_int_equal(nb_md_user_data(inst, &ud, &len), 1);
    assert_int_equal(len, 1);
    assert_int_equal(ud[0], 'A');
    free(ud);
    json_object_set_new(inst, "user_data", json_string("QUJDR"));
    assert_int_equal(nb_md_user_data(inst, &ud, &len), -1);
    json_object_del(inst, "user_data");
    assert_int_equal(nb_md_user_data(inst, &ud, &len), 0);
    assert_null(ud);
    json_decref(inst);
}

static void test_network_data(void **state)
{
    (void)state;
    json_t *inst = instance(false);
    json_t *nics = json_pack("[{s:s}, {s:s}]", "mac_address", "fa:16:3e:00:00:01", "mac_address",
                             "fa:16:3e:00:00:02");
    json_t *nd = nb_md_network_data(inst, nics);
    json_t *links = json_object_get(nd, "links"), *nets = json_object_get(nd, "networks");
    assert_int_equal(json_array_size(links), 2);
    assert_int_equal(json_array_size(nets), 2);
    json_t *l0 = json_array_get(links, 0);
    const char *vif = nb_json_str(l0, "vif_id");
    assert_true(nb_is_uuid(vif));
    char tap[16];
    snprintf(tap, sizeof(tap), "tap%.11s", vif);
    assert_string_equal(nb_json_str(l0, "id"), tap);
    assert_int_equal(strlen(tap), 14);
    assert_string_equal(nb_json_str(l0, "type"), "phy");
    assert_int_equal(nb_json_int(l0, "mtu", 0), 1500);
    assert_string_equal(nb_json_str(l0, "ethernet_mac_address"), "fa:16:3e:00:00:01");
    assert_string_not_equal(nb_json_str(json_array_get(links, 1), "vif_id"), vif);
    json_t *n0 = json_array_get(nets, 0);
    assert_string_equal(nb_json_str(n0, "id"), "network0");
    assert_string_equal(nb_json_str(n0, "type"), "ipv4_dhcp");
    assert_string_equal(nb_json_str(n0, "link"), tap);
    assert_true(nb_is_uuid(nb_json_str(n0, "network_id")));
    assert_string_equal(nb_json_str(json_array_get(nets, 1), "id"), "network1");
    assert_int_equal(json_array_size(json_object_get(nd, "services")), 0);
    /* stable: the same IDs every time, other IDs for another instance */
    json_t *nd2 = nb_md_network_data(inst, nics);
    assert_true(json_equal(nd, nd2));
    json_decref(nd2);
    json_object_set_new(inst, "uuid", json_string("11111111-2222-4333-8444-555555555555"));
    nd2 = nb_md_network_data(inst, nics);
    assert_string_not_equal(nb_json_str(json_array_get(json_object_get(nd2, "links"), 0), "vif_id"),
                            vif);
    json_decref(nd2);
    json_decref(nd);
    /* no NICs: Nova's empty document */
    nd = nb_md_network_data(inst, NULL);
    assert_true(json_is_object(nd));
    assert_int_equal(json_object_size(nd), 0);
    json_decref(nd);
    json_decref(nics);
    json_decref(inst);
}

/* network_data.json from network_info, as Nova's netutils: a bridge VIF
 * with a DHCP subnet, a VIF with a static one (gateway, host route, DNS
 * shared with the first) and an IPv6 subnet, a VIF without subnets. */
static void test_network_data_from_network_info(void **state)
{
    (void)state;
    json_t *inst = instance(false);
    json_t *ni = json_pack(
        "[{s:s, s:s, s:s, s:s, s:{s:s, s:[{s:s, s:i, s:{s:s}, s:[{s:s}], s:[{s:s}], s:[], "
        "s:{s:b}}], s:{s:i}}},"
        " {s:s, s:s, s:s, s:s, s:{s:s, s:[{s:s, s:i, s:{s:s}, s:[{s:s}, {s:s}], s:[{s:s}], "
        "s:[{s:s, s:{s:s}}], s:{s:b}}, {s:s, s:i, s:{s:s}, s:[], s:[{s:s}], s:[], s:{s:b}}], "
        "s:{s:i}}},"
        " {s:s, s:s, s:s, s:{s:s, s:[]}}]",
        "id", "9a1f3c1e-0000-4000-8000-000000000001", "address", "fa:16:3e:00:00:01", "type",
        "bridge", "devname", "tap9a1f3c1e-00", "network", "id", "net-1", "subnets", "cidr",
        "10.0.0.0/24", "version", 4, "gateway", "address", "10.0.0.1", "dns", "address", "10.0.0.2",
        "ips", "address", "10.0.0.5", "routes", "meta", "dhcp_server", 1, "meta", "mtu", 1450,
        /* second */
        "id", "9a1f3c1e-0000-4000-8000-000000000002", "address", "fa:16:3e:00:00:02", "type",
        "weird", "devname", "tap9a1f3c1e-01", "network", "id", "net-2", "subnets", "cidr",
        "192.168.7.0/26", "version", 4, "gateway", "address", "192.168.7.1", "dns", "address",
        "10.0.0.2", "address", "8.8.8.8", "ips", "address", "192.168.7.10", "routes", "cidr",
        "172.16.0.0/12", "gateway", "address", "192.168.7.254", "meta", "dhcp_server", 0, "cidr",
        "fd00:1::/64", "version", 6, "gateway", "address", "fd00:1::1", "dns", "ips", "address",
        "fd00:1::10", "routes", "meta", "dhcp_server", 0, "meta", "mtu", 1500,
        /* third: no subnets */
        "id", "9a1f3c1e-0000-4000-8000-000000000003", "address", "fa:16:3e:00:00:03", "type",
        "bridge", "network", "id", "net-3", "subnets");
    json_object_set_new(inst, "network_info", ni);
    json_t *nd = nb_md_network_data(inst, NULL);
    json_t *links = json_object_get(nd, "links"), *nets = json_object_get(nd, "networks");
    assert_int_equal(json_array_size(links), 2);
    json_t *l0 = json_array_get(links, 0), *l1 = json_array_get(links, 1);
    assert_string_equal(nb_json_str(l0, "id"), "tap9a1f3c1e-00");
    assert_string_equal(nb_json_str(l0, "vif_id"), "9a1f3c1e-0000-4000-8000-000000000001");
    assert_string_equal(nb_json_str(l0, "type"), "bridge"); /* a type Nova exposes */
    assert_true(json_is_null(json_object_get(l0, "mtu")));  /* DHCP gives the MTU */
    assert_string_equal(nb_json_str(l0, "ethernet_mac_address"), "fa:16:3e:00:00:01");
    assert_string_equal(nb_json_str(l1, "type"), "phy");
    assert_int_equal(nb_json_int(l1, "mtu", 0), 1500);
    assert_int_equal(json_array_size(nets), 3);
    json_t *n0 = json_array_get(nets, 0), *n1 = json_array_get(nets, 1),
           *n2 = json_array_get(nets, 2);
    assert_string_equal(nb_json_str(n0, "id"), "network0");
    assert_string_equal(nb_json_str(n0, "type"), "ipv4_dhcp");
    assert_string_equal(nb_json_str(n0, "link"), "tap9a1f3c1e-00");
    assert_string_equal(nb_json_str(n0, "network_id"), "net-1");
    assert_null(json_object_get(n0, "ip_address"));
    assert_string_equal(nb_json_str(n1, "id"), "network1");
    assert_string_equal(nb_json_str(n1, "type"), "ipv4");
    assert_string_equal(nb_json_str(n1, "ip_address"), "192.168.7.10");
    assert_string_equal(nb_json_str(n1, "netmask"), "255.255.255.192");
    json_t *want_routes =
        json_pack("[{s:s, s:s, s:s}, {s:s, s:s, s:s}]", "network", "0.0.0.0", "netmask", "0.0.0.0",
                  "gateway", "192.168.7.1", "network", "172.16.0.0", "netmask", "255.240.0.0",
                  "gateway", "192.168.7.254");
    assert_true(json_equal(json_object_get(n1, "routes"), want_routes));
    json_decref(want_routes);
    assert_int_equal(json_array_size(json_object_get(n1, "services")), 2);
    assert_string_equal(nb_json_str(n2, "type"), "ipv6");
    assert_string_equal(nb_json_str(n2, "netmask"), "ffff:ffff:ffff:ffff::");
    assert_string_equal(nb_json_str(json_array_get(json_object_get(n2, "routes"), 0), "network"),
                        "::");
    assert_string_equal(nb_json_str(n2, "link"), "tap9a1f3c1e-01");
    /* DNS once each, in order */
    json_t *want = json_pack("[{s:s, s:s}, {s:s, s:s}]", "type", "dns", "address", "10.0.0.2",
                             "type", "dns", "address", "8.8.8.8");
    assert_true(json_equal(json_object_get(nd, "services"), want));
    json_decref(want);
    json_decref(nd);
    /* the NICs of the virt driver do not matter when there is network_info */
    json_t *nics = json_pack("[{s:s}]", "mac_address", "fa:16:3e:99:99:99");
    nd = nb_md_network_data(inst, nics);
    assert_int_equal(json_array_size(json_object_get(nd, "links")), 2);
    json_decref(nd);
    json_decref(nics);
    /* the metadata API's document is the same */
    struct nb_ctx ctx;
    nb_ctx_init(&ctx);
    struct nb_md_doc doc;
    assert_int_equal(
        nb_md_lookup(&ctx, inst, NULL, NULL, "/openstack/latest/network_data.json", &doc), 0);
    json_t *served = nb_json_parse(doc.data);
    assert_int_equal(json_array_size(json_object_get(served, "networks")), 3);
    json_decref(served);
    free(doc.data);
    json_decref(inst);
}

static void test_ec2_meta_data(void **state)
{
    (void)state;
    json_t *inst = instance(true);
    json_object_set_new(inst, "reservation_id", json_string("r-abcd1234"));
    json_object_set_new(inst, "security_groups", json_pack("[s]", "default"));
    json_t *md = nb_md_ec2_meta_data(inst, "latest", "10.0.2.15");
    assert_string_equal(nb_json_str(md, "instance-id"), "i-0b3d6a58");
    assert_string_equal(nb_json_str(md, "ami-id"), "ami-c5a7e1f2");
    assert_string_equal(nb_json_str(md, "hostname"), "web-1.novalocal");
    assert_string_equal(nb_json_str(md, "local-hostname"), "web-1.novalocal");
    assert_string_equal(nb_json_str(md, "local-ipv4"), "10.0.2.15");
    assert_string_equal(nb_json_str(md, "instance-type"), "m1.tiny");
    assert_string_equal(nb_json_str(md, "reservation-id"), "r-abcd1234");
    assert_string_equal(nb_json_str(md, "instance-action"), "none");
    assert_string_equal(nb_json_str(json_object_get(md, "placement"), "availability-zone"), "nova");
    json_t *key0 = json_object_get(json_object_get(md, "public-keys"), "0");
    assert_string_equal(nb_json_str(key0, "openssh-key"), KEY);
    assert_string_equal(nb_json_str(key0, "_name"), "0=mykey");
    /* no root device: Nova's default mappings */
    json_t *bdm = json_object_get(md, "block-device-mapping");
    assert_string_equal(nb_json_str(bdm, "ami"), "sda1");
    assert_string_equal(nb_json_str(bdm, "root"), "/dev/sda1");
    json_decref(md);
    /* 1.0 has none of the later fields */
    md = nb_md_ec2_meta_data(inst, "1.0", NULL);
    assert_null(json_object_get(md, "instance-type"));
    assert_null(json_object_get(md, "local-hostname"));
    assert_null(json_object_get(md, "placement"));
    assert_true(json_is_null(json_object_get(md, "local-ipv4")));
    json_decref(md);
    assert_null(nb_md_ec2_meta_data(inst, "2010-01-01", NULL));
    /* a boot volume, a second volume, a swap disk and an ephemeral disk */
    json_object_set_new(
        inst, "block_device_mapping",
        json_pack("[{s:s, s:s, s:s, s:i}, {s:s, s:s, s:s}, {s:s, s:s, s:s, s:s}, {s:s, s:s, s:s}]",
                  "source_type", "image", "destination_type", "volume", "device_name", "/dev/vda",
                  "boot_index", 0, "source_type", "volume", "destination_type", "volume",
                  "device_name", "/dev/vdc", "source_type", "blank", "destination_type", "local",
                  "guest_format", "swap", "device_name", "/dev/vdd", "source_type", "blank",
                  "destination_type", "local", "device_name", "/dev/vdb"));
    md = nb_md_ec2_meta_data(inst, "2009-04-04", NULL);
    bdm = json_object_get(md, "block-device-mapping");
    assert_string_equal(nb_json_str(bdm, "ami"), "vda");
    assert_string_equal(nb_json_str(bdm, "root"), "/dev/vda");
    assert_string_equal(nb_json_str(bdm, "ebs0"), "/dev/vda");
    assert_string_equal(nb_json_str(bdm, "ebs1"), "/dev/vdc");
    assert_string_equal(nb_json_str(bdm, "swap"), "/dev/vdd");
    assert_string_equal(nb_json_str(bdm, "ephemeral0"), "/dev/vdb");
    json_decref(md);
    json_decref(inst);
}

/* Looks path up; returns the body (caller frees) or NULL with *status. */
static char *lookup(const json_t *inst, const char *path, int *status, size_t *len,
                    const char **type)
{
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    struct nb_md_doc doc;
    if (nb_md_lookup(&ctx, inst, NULL, NULL, path, &doc) < 0) {
        *status = ctx.err_status;
        return NULL;
    }
    *status = 200;
    if (len)
        *len = doc.len;
    if (type)
        *type = doc.content_type;
    return doc.data;
}

static void expect(const json_t *inst, const char *path, const char *body)
{
    int status;
    char *got = lookup(inst, path, &status, NULL, NULL);
    if (!got)
        fail_msg("%s: status %d", path, status);
    assert_string_equal(got, body);
    free(got);
}

static void expect_404(const json_t *inst, const char *path)
{
    int status;
    char *got = lookup(inst, path, &status, NULL, NULL);
    if (got)
        fail_msg("%s: found %s", path, got);
    assert_int_equal(status, 404);
}

static void test_lookup_paths(void **state)
{
    (void)state;
    json_t *inst = instance(true);
    expect(inst, "/",
           "1.0\n2007-01-19\n2007-03-01\n2007-08-29\n2007-10-10\n2007-12-15\n"
           "2008-02-01\n2008-09-01\n2009-04-04\nlatest");
    expect(inst, "/openstack",
           "2012-08-10\n2013-04-04\n2013-10-17\n2015-10-15\n2016-06-30\n"
           "2016-10-06\n2017-02-22\n2018-08-27\n2020-10-14\nlatest");
    expect(inst, "/openstack/latest/",
           "meta_data.json\nuser_data\npassword\nvendor_data.json\nnetwork_data.json\n"
           "vendor_data2.json");
    expect(inst, "/openstack/2012-08-10", "meta_data.json\nuser_data");
    expect(inst, "/latest", "meta-data/\nuser-data");
    expect(inst, "/latest/meta-data/",
           "ami-id\nami-launch-index\nami-manifest-path\nblock-device-mapping/\nhostname\n"
           "instance-action\ninstance-id\ninstance-type\nlocal-hostname\nlocal-ipv4\n"
           "placement/\npublic-hostname\npublic-ipv4\npublic-keys/\nreservation-id\n"
           "security-groups");
    expect(inst, "/latest/meta-data/public-keys", "0=mykey");
    expect(inst, "/latest/meta-data/public-keys/0/", "openssh-key");
    expect(inst, "/latest/meta-data/public-keys/0/openssh-key", KEY);
    expect(inst, "/latest/meta-data/instance-id", "i-0b3d6a58");
    expect(inst, "/2009-04-04/meta-data/instance-type", "m1.tiny");
    expect(inst, "/ec2/2009-04-04/meta-data/ami-launch-index", "0");
    expect(inst, "/latest/meta-data/placement/availability-zone", "nova");
    expect(inst, "//latest/./meta-data/../meta-data/hostname", "web-1.novalocal");
    expect(inst, "/latest/meta-data/local-ipv4", "None"); /* Python's str(None) */
    expect(inst, "/openstack/latest/vendor_data.json", "{}");
    expect(inst, "/openstack/latest/vendor_data2.json", "{\"static\": {}}");
    expect(inst, "/openstack/latest/password", "");
    expect(inst, "/openstack/latest/network_data.json", "{}");

    int status;
    size_t len;
    const char *type;
    char *ud = lookup(inst, "/latest/user-data", &status, &len, &type);
    assert_non_null(ud);
    assert_int_equal(len, USER_DATA_LEN);
    assert_memory_equal(ud, USER_DATA, USER_DATA_LEN);
    free(ud);
    ud = lookup(inst, "/openstack/latest/user_data", &status, &len, &type);
    assert_int_equal(len, USER_DATA_LEN);
    assert_memory_equal(ud, USER_DATA, USER_DATA_LEN);
    free(ud);
    char *md = lookup(inst, "/openstack/latest/meta_data.json", &status, &len, &type);
    assert_string_equal(type, "application/json");
    json_t *j = nb_json_parse(md);
    assert_string_equal(nb_json_str(j, "uuid"), UUID);
    /* Python's json.dumps separators */
    assert_non_null(strstr(md, "\"uuid\": \"" UUID "\", "));
    json_decref(j);
    free(md);

    expect_404(inst, "/1.0/meta-data/instance-type"); /* from 2007-08-29 */
    expect_404(inst, "/2010-01-01/meta-data");
    expect_404(inst, "/latest/meta-data/nope");
    expect_404(inst, "/latest/meta-data/hostname/more");
    expect_404(inst, "/openstack/2011-01-01/meta_data.json");
    expect_404(inst, "/openstack/2012-08-10/password");         /* from Grizzly */
    expect_404(inst, "/openstack/2013-04-04/vendor_data.json"); /* from Havana */
    expect_404(inst, "/openstack/latest/nope");
    expect_404(inst, "/openstack/content/0000");
    json_object_del(inst, "user_data");
    expect_404(inst, "/openstack/latest/user_data");
    expect_404(inst, "/latest/user-data");
    expect(inst, "/latest", "meta-data/");
    /* the password a guest stored */
    json_object_set_new(inst, "password", json_string("Zm9v"));
    expect(inst, "/openstack/latest/password", "Zm9v");
    json_decref(inst);
}

static void test_signature(void **state)
{
    (void)state;
    char sig[65];
    nb_md_sign("s3cret", UUID, sig);
    assert_string_equal(sig, SIGNATURE);
    assert_true(nb_md_signature_ok("s3cret", UUID, SIGNATURE));
    assert_false(nb_md_signature_ok("s3cret2", UUID, SIGNATURE));
    assert_false(nb_md_signature_ok("s3cret", "11111111-2222-4333-8444-555555555555", SIGNATURE));
    char bad[65];
    strcpy(bad, SIGNATURE);
    bad[63] = bad[63] == '0' ? '1' : '0';
    assert_false(nb_md_signature_ok("s3cret", UUID, bad));
    bad[10] = '\0'; /* a prefix */
    assert_false(nb_md_signature_ok("s3cret", UUID, bad));
    assert_false(nb_md_signature_ok("s3cret", UUID, NULL));
    assert_false(nb_md_signature_ok("s3cret", UUID, ""));
    assert_false(nb_md_signature_ok(NULL, UUID, SIGNATURE));
    assert_false(nb_md_signature_ok("", UUID, SIGNATURE));
}

/* --- the API's request handling against a database ------------------- */

static struct nb_db *db;
static char db_path[64];

static int db_setup(void **state)
{
    (void)state;
    nb_conf_reset();
    nb_conf_set("neutron", "metadata_proxy_shared_secret", "s3cret");
    strcpy(db_path, "/tmp/nubo-md-test-XXXXXX");
    close(mkstemp(db_path));
    db = nb_db_open(db_path);
    if (!db || nb_db_sync(db) < 0)
        return -1;
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    const char *spec = "{\"security_groups\": [\"default\", \"web\"]}";
    if (nb_db_exec(db, &ctx,
                   "INSERT INTO instances (uuid, project_id, user_id, display_name, hostname, "
                   "vm_state, flavor, key_name, key_data, user_data, reservation_id, "
                   "availability_zone, request_spec) VALUES (?, ?, 'u1', 'web 1', 'web-1', "
                   "'active', '{\"name\": \"m1.tiny\"}', 'mykey', ?, ?, 'r-abcd1234', 'nova', ?)",
                   "sssss", UUID, PROJECT, KEY, USER_DATA_B64, spec) < 0 ||
        nb_db_exec(db, &ctx,
                   "INSERT INTO instances (uuid, project_id, user_id, vm_state, flavor, deleted) "
                   "VALUES ('22222222-2222-4222-8222-222222222222', ?, 'u1', 'deleted', '{}', 2)",
                   "s", PROJECT) < 0 ||
        nb_db_exec(db, &ctx,
                   "INSERT INTO instance_metadata (instance_uuid, key, value) VALUES (?, 'role', "
                   "'web')",
                   "s", UUID) < 0 ||
        nb_db_exec(db, &ctx,
                   "INSERT INTO instance_system_metadata (instance_uuid, key, value) VALUES "
                   "(?, 'password_1', 'def'), (?, 'password_0', 'abc')",
                   "ss", UUID, UUID) < 0)
        return -1;
    return 0;
}

static int db_teardown(void **state)
{
    (void)state;
    nb_db_close(db);
    unlink(db_path);
    nb_conf_reset();
    return 0;
}

/* Serves one request; returns the status, body in *body (caller frees). */
static int serve_body(const char *method, const char *path, const char *id, const char *tenant,
                      const char *sig, const char *in, char **body)
{
    struct nb_ctx ctx;
    nb_ctx_init(&ctx);
    struct nb_md_request rq = {.method = method,
                               .path = path,
                               .instance_id = id,
                               .tenant_id = tenant,
                               .signature = sig,
                               .forwarded_for = "10.0.2.15",
                               .body = in,
                               .body_len = in ? strlen(in) : 0};
    struct nb_md_response rs;
    nb_md_serve(db, &ctx, &rq, &rs);
    assert_non_null(rs.doc.data);
    assert_non_null(rs.doc.content_type);
    *body = rs.doc.data;
    return rs.status;
}

static int serve(const char *method, const char *path, const char *id, const char *tenant,
                 const char *sig, char **body)
{
    return serve_body(method, path, id, tenant, sig, NULL, body);
}

static void test_api_documents(void **state)
{
    (void)state;
    char *body;
    assert_int_equal(
        serve("GET", "/openstack/latest/meta_data.json", UUID, PROJECT, SIGNATURE, &body), 200);
    json_t *md = nb_json_parse(body);
    free(body);
    assert_string_equal(nb_json_str(md, "uuid"), UUID);
    assert_string_equal(nb_json_str(md, "name"), "web 1");
    assert_string_equal(nb_json_str(json_object_get(md, "meta"), "role"), "web");
    assert_string_equal(nb_json_str(json_object_get(md, "public_keys"), "mykey"), KEY);
    json_decref(md);
    assert_int_equal(
        serve("GET", "/latest/meta-data/security-groups", UUID, PROJECT, SIGNATURE, &body), 200);
    assert_string_equal(body, "default\nweb");
    free(body);
    assert_int_equal(
        serve("GET", "/latest/meta-data/reservation-id", UUID, PROJECT, SIGNATURE, &body), 200);
    assert_string_equal(body, "r-abcd1234");
    free(body);
    assert_int_equal(serve("GET", "/latest/meta-data/local-ipv4", UUID, PROJECT, SIGNATURE, &body),
                     200);
    assert_string_equal(body, "10.0.2.15");
    free(body);
    assert_int_equal(serve("GET", "/openstack/latest/password", UUID, PROJECT, SIGNATURE, &body),
                     200);
    assert_string_equal(body, "abcdef");
    free(body);
    assert_int_equal(serve("HEAD", "/latest/user-data", UUID, PROJECT, SIGNATURE, &body), 200);
    assert_memory_equal(body, USER_DATA, USER_DATA_LEN);
    free(body);
    /* "/" needs no signature */
    assert_int_equal(serve("GET", "/", NULL, NULL, NULL, &body), 200);
    assert_non_null(strstr(body, "2009-04-04\nlatest"));
    free(body);
}

static void test_api_refusals(void **state)
{
    (void)state;
    char *body;
    char bad[65];
    strcpy(bad, SIGNATURE);
    bad[0] = bad[0] == 'f' ? 'e' : 'f';
    assert_int_equal(serve("GET", "/latest/meta-data/", UUID, PROJECT, bad, &body), 403);
    assert_non_null(strstr(body, "Invalid proxy request signature."));
    free(body);
    /* a missing header is Nova's 400 */
    assert_int_equal(serve("GET", "/latest/meta-data/", UUID, PROJECT, NULL, &body), 400);
    assert_non_null(strstr(body, "X-Instance-ID-Signature header is missing"));
    free(body);
    assert_int_equal(serve("GET", "/latest/meta-data/", NULL, PROJECT, SIGNATURE, &body), 400);
    assert_non_null(strstr(body, "X-Instance-ID header is missing"));
    free(body);
    assert_int_equal(serve("GET", "/latest/meta-data/", UUID, NULL, SIGNATURE, &body), 400);
    assert_non_null(strstr(body, "X-Tenant-ID header is missing"));
    free(body);
    /* signed, but no such instance; deleted; another project's */
    const char *other = "11111111-2222-4333-8444-555555555555";
    char sig[65];
    nb_md_sign("s3cret", other, sig);
    assert_int_equal(serve("GET", "/latest/meta-data/", other, PROJECT, sig, &body), 404);
    assert_non_null(strstr(body, other));
    free(body);
    const char *gone = "22222222-2222-4222-8222-222222222222";
    nb_md_sign("s3cret", gone, sig);
    assert_int_equal(serve("GET", "/latest/meta-data/", gone, PROJECT, sig, &body), 404);
    free(body);
    assert_int_equal(serve("GET", "/latest/meta-data/", UUID, "someone-else", SIGNATURE, &body),
                     404);
    free(body);
    assert_int_equal(serve("GET", "/latest/meta-data/nope", UUID, PROJECT, SIGNATURE, &body), 404);
    free(body);
    /* POST: only the password, not before 2013-04-04 */
    assert_int_equal(
        serve("POST", "/openstack/latest/meta_data.json", UUID, PROJECT, SIGNATURE, &body), 405);
    free(body);
    assert_int_equal(
        serve("POST", "/openstack/2012-08-10/password", UUID, PROJECT, SIGNATURE, &body), 405);
    free(body);
    /* the fixture's password ("abcdef") is there: 409 until it is cleared
     * (os-server-password DELETE) */
    assert_int_equal(
        serve_body("POST", "/openstack/latest/password", UUID, PROJECT, SIGNATURE, "x", &body),
        409);
    free(body);
    struct nb_ctx c;
    nb_ctx_init(&c);
    assert_int_equal(nb_md_password_set(db, &c, UUID, "", 0), 0);
    char big[300];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_int_equal(
        serve_body("POST", "/openstack/2013-10-17/password", UUID, PROJECT, SIGNATURE, big, &body),
        400);
    free(body);
    assert_int_equal(serve_body("POST", "/openstack/2013-10-17/password", UUID, PROJECT, SIGNATURE,
                                "c2VjcmV0", &body),
                     200);
    assert_string_equal(body, "");
    free(body);
    assert_int_equal(serve("GET", "/openstack/latest/password", UUID, PROJECT, SIGNATURE, &body),
                     200);
    assert_string_equal(body, "c2VjcmV0");
    free(body);
    assert_int_equal(
        serve_body("POST", "/openstack/latest/password", UUID, PROJECT, SIGNATURE, "other", &body),
        409);
    free(body);
    /* cleared again (the fixture's password back for what follows) */
    assert_int_equal(nb_md_password_set(db, &c, UUID, "", 0), 0);
    char *pw = nb_md_password_get(db, &c, UUID);
    assert_string_equal(pw, "");
    free(pw);
    assert_int_equal(nb_md_password_set(db, &c, UUID, "abcdef", 6), 0);
    /* without a secret nothing is trusted, not even a signature made with
     * the empty key */
    nb_conf_set("neutron", "metadata_proxy_shared_secret", "");
    nb_md_sign("", UUID, sig);
    assert_int_equal(serve("GET", "/latest/meta-data/", UUID, PROJECT, sig, &body), 403);
    assert_non_null(strstr(body, "metadata_proxy_shared_secret is not configured"));
    free(body);
    nb_conf_set("neutron", "metadata_proxy_shared_secret", "s3cret");
}

/* --- the config drive ------------------------------------------------ */

/* Output of a shell command (caller frees), NULL if it failed. */
static char *run(const char *cmd, size_t *len)
{
    FILE *p = popen(cmd, "r");
    if (!p)
        return NULL;
    size_t cap = 4096, n = 0, r;
    char *buf = malloc(cap);
    while ((r = fread(buf + n, 1, cap - n - 1, p)) > 0) {
        n += r;
        if (cap - n < 2)
            buf = realloc(buf, cap *= 2);
    }
    buf[n] = '\0';
    if (len)
        *len = n;
    if (pclose(p) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

static void test_config_drive(void **state)
{
    (void)state;
    char tmp[] = "/tmp/nubo-md-iso-XXXXXX";
    assert_non_null(mkdtemp(tmp));
    char scratch[128], iso[128], cmd[512];
    snprintf(scratch, sizeof(scratch), "%s/scratch", tmp);
    snprintf(iso, sizeof(iso), "%s/disk.config", tmp);
    assert_int_equal(mkdir(scratch, 0700), 0);
    setenv("TMPDIR", scratch, 1);
    json_t *inst = instance(true);
    json_t *nics = json_pack("[{s:s}]", "mac_address", "fa:16:3e:12:34:56");
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    if (nb_configdrive_build(&ctx, inst, nics, iso) < 0)
        fail_msg("config drive: %s", ctx.err_msg);
    struct stat st;
    assert_int_equal(stat(iso, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0644);
    /* the scratch directory is gone */
    snprintf(cmd, sizeof(cmd), "ls -A %s", scratch);
    char *out = run(cmd, NULL);
    assert_string_equal(out, "");
    free(out);

    snprintf(cmd, sizeof(cmd), "isoinfo -d -i %s", iso);
    out = run(cmd, NULL);
    assert_non_null(out);
    assert_non_null(strstr(out, "Volume id: config-2"));
    free(out);
    snprintf(cmd, sizeof(cmd), "isoinfo -J -x /openstack/latest/meta_data.json -i %s", iso);
    out = run(cmd, NULL);
    json_t *md = nb_json_parse(out);
    free(out);
    assert_string_equal(nb_json_str(md, "uuid"), UUID);
    assert_string_equal(nb_json_str(json_object_get(md, "public_keys"), "mykey"), KEY);
    assert_string_equal(nb_json_str(json_object_get(md, "meta"), "tier"), "front");
    json_decref(md);
    size_t len;
    snprintf(cmd, sizeof(cmd), "isoinfo -J -x /openstack/latest/user_data -i %s", iso);
    out = run(cmd, &len);
    assert_int_equal(len, USER_DATA_LEN);
    assert_memory_equal(out, USER_DATA, USER_DATA_LEN);
    free(out);
    snprintf(cmd, sizeof(cmd), "isoinfo -J -x /openstack/latest/network_data.json -i %s", iso);
    out = run(cmd, NULL);
    json_t *nd = nb_json_parse(out);
    free(out);
    assert_string_equal(
        nb_json_str(json_array_get(json_object_get(nd, "links"), 0), "ethernet_mac_address"),
        "fa:16:3e:12:34:56");
    json_decref(nd);
    snprintf(cmd, sizeof(cmd), "isoinfo -J -x /ec2/latest/meta-data.json -i %s", iso);
    out = run(cmd, NULL);
    json_t *ec2 = nb_json_parse(out);
    free(out);
    assert_string_equal(nb_json_str(ec2, "instance-id"), "i-0b3d6a58");
    /* the "0=<name>" listing name stays out of the file, as Nova */
    json_t *key0 = json_object_get(json_object_get(ec2, "public-keys"), "0");
    assert_string_equal(nb_json_str(key0, "openssh-key"), KEY);
    assert_null(json_object_get(key0, "_name"));
    json_decref(ec2);
    /* the files Nova writes, and no EC2 version it skips */
    snprintf(cmd, sizeof(cmd), "isoinfo -J -f -i %s | sort", iso);
    out = run(cmd, NULL);
    assert_non_null(strstr(out, "/ec2/2009-04-04/meta-data.json\n"));
    assert_non_null(strstr(out, "/ec2/latest/user-data\n"));
    assert_null(strstr(out, "/ec2/2008-09-01"));
    assert_non_null(strstr(out, "/openstack/2012-08-10/meta_data.json\n"));
    assert_null(strstr(out, "/openstack/2012-08-10/vendor_data.json"));
    assert_non_null(strstr(out, "/openstack/2013-10-17/vendor_data.json\n"));
    assert_non_null(strstr(out, "/openstack/2016-10-06/vendor_data2.json\n"));
    assert_non_null(strstr(out, "/openstack/latest/vendor_data2.json\n"));
    free(out);
    unlink(iso);

    /* genisoimage missing: say which package to install */
    char *path = strdup(getenv("PATH"));
    setenv("PATH", scratch, 1);
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(nb_configdrive_build(&ctx, inst, nics, iso), -1);
    setenv("PATH", path, 1);
    free(path);
    assert_string_equal(ctx.err_msg, "genisoimage not found: install the genisoimage package");
    assert_int_equal(access(iso, F_OK), -1);
    /* genisoimage failing: its own message */
    nb_ctx_init_system(&ctx, NULL);
    snprintf(iso, sizeof(iso), "%s/no/such/dir/disk.config", tmp);
    assert_int_equal(nb_configdrive_build(&ctx, inst, nics, iso), -1);
    assert_non_null(strstr(ctx.err_msg, "genisoimage failed with exit code"));
    assert_non_null(strstr(ctx.err_msg, "no/such/dir/disk.config"));
    snprintf(cmd, sizeof(cmd), "ls -A %s", scratch);
    out = run(cmd, NULL);
    assert_string_equal(out, ""); /* cleaned up after a failure too */
    free(out);

    json_decref(nics);
    json_decref(inst);
    unsetenv("TMPDIR");
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_meta_data_latest, setup),
        cmocka_unit_test_setup(test_meta_data_versions, setup),
        cmocka_unit_test_setup(test_user_data_decoding, setup),
        cmocka_unit_test_setup(test_network_data, setup),
        cmocka_unit_test_setup(test_network_data_from_network_info, setup),
        cmocka_unit_test_setup(test_ec2_meta_data, setup),
        cmocka_unit_test_setup(test_lookup_paths, setup),
        cmocka_unit_test_setup(test_signature, setup),
        cmocka_unit_test_setup_teardown(test_api_documents, db_setup, db_teardown),
        cmocka_unit_test_setup_teardown(test_api_refusals, db_setup, db_teardown),
        cmocka_unit_test_setup(test_config_drive, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
