/* test_resources.c - unit tests of the pure logic behind the compute
 * resource APIs and the image API: Nova's keypair fingerprints, Glance's
 * JSON-patch application and image schema wording, and the Python-style
 * value rendering used in Nova's validation messages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "common/json.h"
#include "common/pyrepr.h"
#include "compute/api/resources.h"
#include "compute/api/validate.h"
#include "image/image_priv.h"

#include <stdlib.h>
#include <string.h>

/* Keys made with ssh-keygen; fingerprints from `ssh-keygen -l -E md5`. */
static const char rsa_pub[] =
    "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQDcCdEAgD9VJ8WDb5Ioke2ABJWKf9+VbhD+BdAWHqWWeNNEFwd5xUe9hW"
    "oK5Zzs+isb1h/5cmoZ6QtBJlqWqt7qeGd1nrDdnrw8uoYiDg0H5zM0/wx8hhFtT+/97NJ9z3DSoQEV6DEoOhbviSVWkP7E"
    "0NQcMCQ+OCtLNrzpCzy2Ur2ofros1Oc5fmzkw5iCqg+lTFv7miD+9mabne9Vt5mreef7Ya/"
    "rckP7jqulUhRHkaTYAn40I2b"
    "/KKdqPwFmcJ1weN7dnPc8RdlkH1DA5LPAY0p2veLTY6BWz513JaHPXrScNyYkF/"
    "JSoeLDqHdLCtf9bch4gctTKs+vQu5eutK"
    "5 test@nubo";
static const char ed_pub[] =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPoPi+7OqLCz/rYcftgl5KUP1THBgnghqlbE9+oUQxvv";
static const char ec_pub[] =
    "ecdsa-sha2-nistp256 "
    "AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBCZKux5HmCQW3WEdhvW1NWe"
    "wvkQx8BAXOzVfp/iDKBZSe5Bo5JmH+XlpHb4cqCQaVbM981h111eDSmJSYMWN8vs= x";

static void test_ssh_fingerprint(void **state)
{
    (void)state;
    char fp[48];
    assert_int_equal(nb_keypair_ssh_fingerprint(rsa_pub, fp), 0);
    assert_string_equal(fp, "9e:a7:8a:99:0e:e7:e4:0f:4e:b8:56:a0:17:fe:bb:b3");
    assert_int_equal(nb_keypair_ssh_fingerprint(ed_pub, fp), 0);
    assert_string_equal(fp, "d9:a8:7f:9a:e9:62:3a:b8:79:9b:a2:7a:a7:b0:ef:a6");
    assert_int_equal(nb_keypair_ssh_fingerprint(ec_pub, fp), 0);
    assert_string_equal(fp, "0e:f5:7f:34:35:9e:ec:73:58:d6:60:84:75:1b:08:f2");
}

static void test_ssh_fingerprint_rejects(void **state)
{
    (void)state;
    char fp[48];
    /* not a key line, unknown type, type mismatch, truncated, trailing data */
    assert_int_equal(nb_keypair_ssh_fingerprint("hello", fp), -1);
    assert_int_equal(nb_keypair_ssh_fingerprint("ssh-foo AAAAB3NzaC1yc2EAAAADAQABAAABAQDc", fp),
                     -1);
    char *swapped = strdup(ed_pub);
    memcpy(swapped, "ssh-rsa    ", 11); /* "ssh-rsa" label on an ed25519 blob */
    assert_int_equal(nb_keypair_ssh_fingerprint(swapped, fp), -1);
    free(swapped);
    char *cut = strdup(rsa_pub);
    cut[200] = '\0';
    assert_int_equal(nb_keypair_ssh_fingerprint(cut, fp), -1);
    free(cut);
    /* "AAAAC3NzaC1lZDI1NTE5AAAAIA" + 32 bytes + extra "AA" */
    assert_int_equal(
        nb_keypair_ssh_fingerprint(
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPoPi+7OqLCz/rYcftgl5KUP1THBgnghqlbE9+oUQxvvAAAA",
            fp),
        -1);
}

static const char cert_pem[] = "-----BEGIN CERTIFICATE-----\n"
                               "MIIC/zCCAeegAwIBAgIUcw5iJXNi1qpK2FuxJEzLtoZI/5swDQYJKoZIhvcNAQEL\n"
                               "BQAwDzENMAsGA1UEAwwEdGVzdDAeFw0yNjExMjkyMDQ3NDJaFw0yNjExMzAyMDQ3\n"
                               "NDJaMA8xDTALBgNVBAMMBHRlc3QwggEiMA0GCSqGSIb3DQEBAQUAA4IBDwAwggEK\n"
                               "AoIBAQC4k+Fnq2x1/oMw8funaxuUy55F6karo4jJfnF0JJWAfvH4RICZK0c3FoPX\n"
                               "A+ZG+Ec+seW90mAL9/PI05xA70LJ64ed8nrvio/LuH4286wv2TwNx6ZBTf+gbAa+\n"
                               "lvlCTYL6Q6s6kOCX4HiH1NHGRbhPLasG8i6oPJoi+EJoPIcoqAb8gYMX6FXhSYO3\n"
                               "8I7R+2vbxghUEnuoxPa30njnMGy8YgCc4Oo4tqmpG3sxdw+ldNJ8Mlyhb93ew6tk\n"
                               "Dx95BZ7QdFl6XtvDEYjN3fTdDXF3IkP1ZggYFA3BkOKRSISnuJB3uEoFW2L0Ono0\n"
                               "os05UAUlhn1Ay8zZjpUnbFmUT83vAgMBAAGjUzBRMB0GA1UdDgQWBBQICNMNDx9X\n"
                               "4Q43Iu1pjPRwYxtlpDAfBgNVHSMEGDAWgBQICNMNDx9X4Q43Iu1pjPRwYxtlpDAP\n"
                               "BgNVHRMBAf8EBTADAQH/MA0GCSqGSIb3DQEBCwUAA4IBAQCkwlKIVKiG+N1niVEI\n"
                               "1eOQ0cLPN5sFnuSQaRbqSdhVSnVlYoSdbMUrNBvyajkuw3Ku2YtAnDHCgLg4bzxY\n"
                               "hznlPesSS+MYkiCMm20SGz1dWIDJdyN+YjTlMVfyG/q2yrrBCz+kHuA94xd0Fbph\n"
                               "0Qcmj+blLz01qgs7Cp1bPVJGiltEVrs1S6RkKBpHht8d34uf2PfTR20M76QaIUCk\n"
                               "HeyW/My+BqBe7iAZzZ8e4xhlm7BZrJlPCbQGLRXlZp8MYBzfCvthH7cEHowc7nTL\n"
                               "jNCM1F/QYSfTWJVgdYbs5eP7yVxmwYsW+IKDiH/n8cXuHoBT3eocZC7fpgYiCFHU\n"
                               "HWFZ\n"
                               "-----END CERTIFICATE-----\n";

static void test_x509_fingerprint(void **state)
{
    (void)state;
    char fp[64], err[256];
    assert_int_equal(nb_keypair_x509_fingerprint(cert_pem, fp, err, sizeof(err)), 0);
    /* `openssl x509 -noout -fingerprint -sha1`, lower case */
    assert_string_equal(fp, "01:d2:ca:36:e9:34:04:b9:bb:8f:29:d5:03:9b:9b:b4:74:fb:33:4d");
    assert_int_equal(nb_keypair_x509_fingerprint("not a cert", fp, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "Unable to load certificate"));
}

static void test_pyrepr(void **state)
{
    (void)state;
    json_t *v =
        nb_json_parse("{\"name\": \"it's\", \"n\": [1, 2.5, true, null, \"x\"], \"f\": 1.0}");
    char *r = nb_pyrepr(v);
    assert_string_equal(r, "{'name': \"it's\", 'n': [1, 2.5, True, None, 'x'], 'f': 1.0}");
    free(r);
    json_decref(v);
    assert_true(nb_res_name_ok("m1.tiny"));
    assert_true(nb_res_name_ok("two words"));
    assert_false(nb_res_name_ok(" lead"));
    assert_false(nb_res_name_ok("trail "));
    assert_false(nb_res_name_ok("tab\there"));
    /* Nova Zed's valid_name_regex is built over chr(0)..chr(0xFFFE): BMP
     * symbols pass, an emoji past the BMP (U+1F600) does not, as
     * re.search(parameter_types.valid_name_regex.regex, ...) answers */
    assert_true(nb_res_name_ok("caf\xc3\xa9 \xe2\x9d\xa4 \xe2\x98\x83"));
    assert_true(nb_res_name_ok("a\xc2\xa0"
                               "b"));
    assert_false(nb_res_name_ok("\xc2\xa0"
                                "a"));
    assert_false(nb_res_name_ok("srv \xf0\x9f\x98\x80"));
    assert_false(nb_res_name_ok("a\xe2\x80\x8b"
                                "b"));
    assert_true(nb_res_name_ws_ok(" spaced "));
    assert_false(nb_res_name_ws_ok("   "));
    assert_int_equal(nb_srv_bool_from_string(" Yes", true), 1);
    assert_int_equal(nb_srv_bool_from_string("off", true), 0);
    assert_int_equal(nb_srv_bool_from_string("maybe", true), -1);
}

/* A queued image record owned by project p1. */
static json_t *record(void)
{
    return nb_json_parse(
        "{\"id\": \"6a1c4d2e-1111-4222-8333-944455556666\", \"name\": \"img\", \"status\": "
        "\"queued\", \"visibility\": \"shared\", \"protected\": false, \"os_hidden\": false, "
        "\"disk_format\": null, \"container_format\": null, \"min_disk\": 0, \"min_ram\": 0, "
        "\"owner\": \"p1\", \"properties\": {\"os_distro\": \"cirros\"}, \"tags\": [\"a\"]}");
}

/* Applies ops (JSON text) with draft 10 as a non-admin; returns the status. */
static int patch(json_t *rec, const char *ops, char *msg)
{
    json_t *o = nb_json_parse(ops);
    assert_non_null(o);
    int st = nb_image_patch_apply(rec, o, 10, false, msg, 512);
    json_decref(o);
    return st;
}

static void test_patch_apply(void **state)
{
    (void)state;
    char msg[512];
    json_t *rec = record();
    assert_int_equal(
        patch(rec,
              "[{\"op\": \"replace\", \"path\": \"/name\", \"value\": \"new\"},"
              " {\"op\": \"add\", \"path\": \"/hw_disk_bus\", \"value\": \"scsi\"},"
              " {\"op\": \"replace\", \"path\": \"/os_distro\", \"value\": \"ubuntu\"},"
              " {\"op\": \"add\", \"path\": \"/tags\", \"value\": [\"x\", \"y\", \"x\"]},"
              " {\"op\": \"replace\", \"path\": \"/min_ram\", \"value\": 512},"
              " {\"op\": \"replace\", \"path\": \"/disk_format\", \"value\": \"qcow2\"},"
              " {\"op\": \"remove\", \"path\": \"/os_distro\"}]",
              msg),
        0);
    assert_string_equal(nb_json_str(rec, "name"), "new");
    assert_string_equal(nb_json_str(rec, "disk_format"), "qcow2");
    assert_int_equal(nb_json_int(rec, "min_ram", -1), 512);
    json_t *props = json_object_get(rec, "properties");
    assert_string_equal(nb_json_str(props, "hw_disk_bus"), "scsi");
    assert_null(json_object_get(props, "os_distro"));
    json_t *tags = json_object_get(rec, "tags");
    assert_int_equal(json_array_size(tags), 2);
    assert_string_equal(json_string_value(json_array_get(tags, 1)), "y");
    json_decref(rec);
}

static void test_patch_refusals(void **state)
{
    (void)state;
    char msg[512];
    json_t *rec = record();
    assert_int_equal(
        patch(rec, "[{\"op\": \"replace\", \"path\": \"/nope\", \"value\": \"1\"}]", msg), 409);
    assert_string_equal(msg, "Property nope does not exist.");
    assert_int_equal(
        patch(rec, "[{\"op\": \"replace\", \"path\": \"/status\", \"value\": \"active\"}]", msg),
        403);
    assert_string_equal(msg, "Attribute 'status' is read-only.");
    assert_int_equal(patch(rec, "[{\"op\": \"remove\", \"path\": \"/name\"}]", msg), 403);
    assert_string_equal(msg, "Property name may not be removed.");
    assert_int_equal(
        patch(rec, "[{\"op\": \"add\", \"path\": \"/tags/-\", \"value\": \"t\"}]", msg), 400);
    assert_string_equal(msg, "Invalid JSON pointer for this resource: '/tags/-'");
    assert_int_equal(patch(rec, "[{\"op\": \"add\", \"path\": \"name\", \"value\": \"t\"}]", msg),
                     400);
    assert_string_equal(msg, "Pointer `name` does not start with \"/\".");
    assert_int_equal(
        patch(rec, "[{\"op\": \"replace\", \"path\": \"/visibility\", \"value\": \"public\"}]",
              msg),
        403);
    assert_string_equal(msg, "You are not authorized to complete publicize_image action.");
    assert_int_equal(patch(rec, "[{\"op\": \"add\", \"path\": \"/min_disk\", \"value\": -1}]", msg),
                     400);
    assert_string_equal(msg,
                        "Invalid value '-1' for parameter 'min_disk': Cannot be a negative value");
    assert_int_equal(patch(rec, "[{\"op\": \"add\", \"path\": \"/foo\", \"value\": 1}]", msg), 400);
    assert_string_equal(msg,
                        "Provided object does not match schema 'image': 1 is not of type 'string'");
    assert_int_equal(patch(rec, "[{\"op\": \"add\", \"path\": \"/foo\"}]", msg), 400);
    assert_string_equal(msg, "Operation \"add\" requires a member named \"value\".");
    assert_int_equal(patch(rec, "[{\"op\": \"move\", \"path\": \"/foo\"}]", msg), 400);
    assert_int_equal(patch(rec, "{\"op\": \"add\"}", msg), 400);
    assert_string_equal(msg, "Request body must be a JSON array of operation objects.");
    assert_int_equal(
        patch(rec, "[{\"op\": \"add\", \"path\": \"/locations/-\", \"value\": {}}]", msg), 403);
    assert_string_equal(msg, "It's not allowed to add locations if locations are invisible.");
    json_decref(rec);

    /* draft 4 refuses adding what exists; an admin may publicize */
    rec = record();
    json_t *o = nb_json_parse("[{\"add\": \"/name\", \"value\": \"x\"}]");
    assert_int_equal(nb_image_patch_apply(rec, o, 4, false, msg, sizeof(msg)), 409);
    assert_string_equal(msg, "Property name already present.");
    json_decref(o);
    o = nb_json_parse("[{\"op\": \"replace\", \"path\": \"/visibility\", \"value\": \"public\"}]");
    assert_int_equal(nb_image_patch_apply(rec, o, 10, true, msg, sizeof(msg)), 0);
    assert_string_equal(nb_json_str(rec, "visibility"), "public");
    json_decref(o);
    /* disk_format is frozen once the image is no longer queued */
    json_object_set_new(rec, "status", json_string("active"));
    o = nb_json_parse("[{\"op\": \"replace\", \"path\": \"/disk_format\", \"value\": \"raw\"}]");
    assert_int_equal(nb_image_patch_apply(rec, o, 10, true, msg, sizeof(msg)), 403);
    assert_string_equal(msg, "Attribute disk_format can be only replaced for a queued image.");
    json_decref(o);
    json_decref(rec);
}

static void test_image_schema(void **state)
{
    (void)state;
    char msg[1024];
    json_t *ok = nb_json_parse("{\"name\": \"x\", \"disk_format\": \"qcow2\", \"tags\": [\"a\"], "
                               "\"min_ram\": 1, \"k\": \"v\"}");
    assert_int_equal(nb_image_schema_check(ok, msg, sizeof(msg)), 0);
    json_decref(ok);
    json_t *bad = nb_json_parse("{\"disk_format\": \"xyz\"}");
    assert_int_equal(nb_image_schema_check(bad, msg, sizeof(msg)), -1);
    assert_string_equal(msg, "Provided object does not match schema 'image': 'xyz' is not one of "
                             "[None, 'ami', 'ari', 'aki', 'vhd', 'vhdx', 'vmdk', 'raw', 'qcow2', "
                             "'vdi', 'iso', 'ploop']");
    json_decref(bad);
    /* a type mismatch beats an enum miss at the same depth (best_match) */
    bad = nb_json_parse("{\"disk_format\": \"bad\", \"foo\": 1}");
    assert_int_equal(nb_image_schema_check(bad, msg, sizeof(msg)), -1);
    assert_string_equal(msg,
                        "Provided object does not match schema 'image': 1 is not of type 'string'");
    json_decref(bad);
    bad = nb_json_parse("{\"name\": 1}");
    assert_int_equal(nb_image_schema_check(bad, msg, sizeof(msg)), -1);
    assert_string_equal(
        msg, "Provided object does not match schema 'image': 1 is not of type 'null', 'string'");
    json_decref(bad);
    bad = nb_json_parse("{\"id\": \"abc\"}");
    assert_int_equal(nb_image_schema_check(bad, msg, sizeof(msg)), -1);
    assert_non_null(strstr(msg, "'abc' does not match '^([0-9a-fA-F]){8}-"));
    json_decref(bad);
    json_t *schema = nb_image_schema_images();
    assert_string_equal(nb_json_str(schema, "name"), "images");
    json_decref(schema);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ssh_fingerprint),  cmocka_unit_test(test_ssh_fingerprint_rejects),
        cmocka_unit_test(test_x509_fingerprint), cmocka_unit_test(test_pyrepr),
        cmocka_unit_test(test_patch_apply),      cmocka_unit_test(test_patch_refusals),
        cmocka_unit_test(test_image_schema),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
