/* documents.c - what a guest learns about itself, as Nova's
 * nova/api/metadata/base.py InstanceMetadata builds it: the OpenStack tree
 * (meta_data.json, user_data, password, vendor_data*.json,
 * network_data.json under every dated version and "latest") and the EC2
 * tree (meta-data/…, user-data under the EC2 dates and "latest").
 *
 * Every document is built from the instance alone (nb_instance_agent_view's
 * shape, see internal.h) and the configuration, so the config drive and the
 * metadata API serve the same bytes, random_seed aside (fresh each time, as
 * Nova's). Paths resolve as Nova's lookup(): directories print as Nova's
 * ec2_md_print, one entry a line, sub-directories with a trailing "/".
 *
 * Where Nova reads something nubo does not have (EC2 integer IDs, Neutron
 * ports), the comment at that place says what stands in for it. */
#include "compute/metadata/internal.h"

#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/sbuf.h"
#include "common/util.h"

#include <ctype.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Nova's VERSIONS (EC2) and OPENSTACK_VERSIONS; "latest" is the last. */
static const char *const ec2_versions[] = {
    "1.0",        "2007-01-19", "2007-03-01", "2007-08-29", "2007-10-10",
    "2007-12-15", "2008-02-01", "2008-09-01", "2009-04-04",
};
#define N_EC2 (sizeof(ec2_versions) / sizeof(ec2_versions[0]))

static const char *const os_versions[] = {
    "2012-08-10", /* FOLSOM */
    "2013-04-04", /* GRIZZLY */
    "2013-10-17", /* HAVANA */
    "2015-10-15", /* LIBERTY */
    "2016-06-30", /* NEWTON_ONE */
    "2016-10-06", /* NEWTON_TWO */
    "2017-02-22", /* OCATA */
    "2018-08-27", /* ROCKY */
    "2020-10-14", /* VICTORIA */
};
#define N_OS (sizeof(os_versions) / sizeof(os_versions[0]))
enum { GRIZZLY = 1, HAVANA = 2, LIBERTY = 3, NEWTON_ONE = 4, NEWTON_TWO = 5, VICTORIA = 8 };

/* EC2 versions, by their index in ec2_versions. */
enum {
    EC2_2007_01_19 = 1,
    EC2_2007_08_29 = 3,
    EC2_2007_12_15 = 5,
    EC2_2008_02_01 = 6,
    EC2_2008_09_01 = 7,
};

#define TEXT_PLAIN "text/plain"
#define APP_JSON "application/json"
#define MAX_TOKENS 32

/* Index of version in list ("latest" is the newest), -1 if unknown. */
static int version_index(const char *const *list, size_t n, const char *version)
{
    if (!strcmp(version, "latest"))
        return (int)n - 1;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(list[i], version))
            return (int)i;
    return -1;
}

/* Nova's _get_hostname: the instance's hostname, with [api] dhcp_domain
 * (default "novalocal") appended when set. New string or NULL. */
static char *md_hostname(const json_t *inst)
{
    const char *host = nb_json_str(inst, "hostname");
    const char *domain = nb_conf_str("api", "dhcp_domain", "novalocal");
    if (!host)
        return NULL;
    if (!domain || !*domain)
        return strdup(host);
    return nb_strdup_printf("%s.%s", host, domain);
}

/* Nova keeps EC2 IDs as "i-%08x" of an integer it allocates per instance
 * UUID (instance_id_mappings). nubo has no such table and the agent view no
 * integer ID, so the 8 hex digits are derived from the UUID itself: its
 * first 8 hex digits, which makes the EC2 ID stable across restarts, the
 * same on the config drive and the metadata API, and recognisable next to
 * the UUID. */
static void ec2_id(const char *prefix, const char *uuid, char *out, size_t n)
{
    char hex[9] = "00000000";
    for (int i = 0, j = 0; uuid && uuid[j] && i < 8; j++) {
        if (isxdigit((unsigned char)uuid[j]))
            hex[i++] = (char)tolower((unsigned char)uuid[j]);
        else if (uuid[j] != '-')
            break;
    }
    snprintf(out, n, "%s-%s", prefix, hex);
}

/* Nova's keypair type: "x509" for a certificate, else "ssh". */
static const char *key_type(const char *key_data)
{
    return nb_startswith(key_data, "-----BEGIN CERTIFICATE-----") ? "x509" : "ssh";
}

int nb_md_user_data(const json_t *inst, char **out, size_t *len)
{
    const char *b64 = nb_json_str(inst, "user_data");
    *out = NULL;
    *len = 0;
    if (!b64)
        return 0;
    /* Python's b64decode without validate: characters outside the
     * alphabet (newlines, padding) are skipped. The API has already
     * refused anything that is not base64. */
    size_t n = strlen(b64);
    char *buf = malloc(n / 4 * 3 + 4);
    if (!buf)
        return -1;
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    unsigned acc = 0;
    int bits = 0;
    size_t o = 0, sextets = 0;
    for (size_t i = 0; i < n; i++) {
        const char *p = strchr(alphabet, b64[i]);
        if (!p)
            continue;
        acc = ((acc << 6) | (unsigned)(p - alphabet)) & 0xffffu;
        bits += 6;
        sextets++;
        if (bits >= 8) {
            bits -= 8;
            buf[o++] = (char)((acc >> bits) & 0xff);
        }
    }
    if (sextets % 4 == 1) { /* one lone sextet cannot be base64 */
        free(buf);
        return -1;
    }
    buf[o] = '\0';
    *out = buf;
    *len = o;
    return 1;
}

/* 512 random bytes in base64, as Nova's random_seed. New ref. */
static json_t *random_seed(void)
{
    unsigned char raw[512];
    char b64[4 * (sizeof(raw) + 2) / 3 + 1];
    if (RAND_bytes(raw, sizeof(raw)) != 1)
        abort(); /* no entropy: nothing sane to hand a guest */
    EVP_EncodeBlock((unsigned char *)b64, raw, (int)sizeof(raw));
    return json_string(b64);
}

json_t *nb_md_meta_data(const json_t *inst, const char *version)
{
    int v = version_index(os_versions, N_OS, version);
    if (v < 0)
        return NULL;
    json_t *md = json_pack("{s:s?}", "uuid", nb_json_str(inst, "uuid"));
    const json_t *meta = json_object_get(inst, "metadata");
    if (json_is_object(meta) && json_object_size(meta))
        json_object_set_new(md, "meta", json_deep_copy(meta));
    const char *key_name = nb_json_str(inst, "key_name");
    const char *key_data = nb_json_str(inst, "key_data");
    /* Nova shows the keypair only when it still finds it */
    if (key_name && key_data) {
        json_object_set_new(md, "public_keys", json_pack("{s:s}", key_name, key_data));
        json_object_set_new(md, "keys",
                            json_pack("[{s:s, s:s, s:s}]", "name", key_name, "type",
                                      key_type(key_data), "data", key_data));
    }
    char *host = md_hostname(inst);
    json_object_set_new(md, "hostname", host ? json_string(host) : json_null());
    free(host);
    json_object_set_new(md, "name", json_pack("s?", nb_json_str(inst, "name")));
    json_object_set_new(md, "launch_index", json_integer(nb_json_int(inst, "launch_index", 0)));
    json_object_set_new(md, "availability_zone",
                        json_pack("s?", nb_json_str(inst, "availability_zone")));
    if (v >= GRIZZLY)
        json_object_set_new(md, "random_seed", random_seed());
    if (v >= LIBERTY)
        json_object_set_new(md, "project_id", json_pack("s?", nb_json_str(inst, "project_id")));
    /* Device tags need the guest's bus addresses, which only the virt
     * driver knows; nothing reports them yet. */
    if (v >= NEWTON_ONE)
        json_object_set_new(md, "devices", json_array());
    /* No NUMA topology, hence no dedicated CPUs. */
    if (v >= VICTORIA)
        json_object_set_new(md, "dedicated_cpus", json_array());
    return md;
}

/* "/dev/vda" -> "vda", as Nova's strip_dev. */
static const char *strip_dev(const char *dev)
{
    return dev && nb_startswith(dev, "/dev/") ? dev + 5 : dev;
}

static int cmp_dev(const void *a, const void *b)
{
    const char *x = *(const char *const *)a, *y = *(const char *const *)b;
    if (!x || !y) /* None first, as Nova sorts */
        return (x != NULL) - (y != NULL);
    return strcmp(x, y);
}

/* The root device: the instance's root_device_name, else the device of its
 * boot disk (what Nova's compute manager would have stored), else NULL. */
static const char *root_device(const json_t *inst)
{
    if (nb_json_str(inst, "root_device_name"))
        return nb_json_str(inst, "root_device_name");
    size_t i;
    json_t *b;
    json_array_foreach (json_object_get(inst, "block_device_mapping"), i, b)
        if (json_is_integer(json_object_get(b, "boot_index")) &&
            nb_json_int(b, "boot_index", -1) == 0)
            return nb_json_str(b, "device_name");
    return NULL;
}

/* Nova's block_device.instance_block_mapping. New ref. */
static json_t *block_device_mapping(const json_t *inst)
{
    const char *root = root_device(inst);
    if (!root)
        return json_pack("{s:s, s:s, s:s, s:s}", "ami", "sda1", "ephemeral0", "sda2", "root",
                         "/dev/sda1", "swap", "sda3");
    json_t *m = json_pack("{s:s, s:s}", "ami", strip_dev(root), "root", root);
    const json_t *bdms = json_object_get(inst, "block_device_mapping");
    size_t n = json_array_size(bdms), nebs = 0, i;
    const char **ebs = calloc(n + 1, sizeof(*ebs));
    const char *swap = NULL;
    bool have_swap = false;
    json_t *b, *ephemerals = json_array();
    json_array_foreach ((json_t *)bdms, i, b) {
        const char *dst = nb_json_str(b, "destination_type");
        const char *src = nb_json_str(b, "source_type");
        const char *fmt = nb_json_str(b, "guest_format");
        if (dst && !strcmp(dst, "volume")) {
            ebs[nebs++] = nb_json_str(b, "device_name");
        } else if (src && !strcmp(src, "blank")) {
            if (fmt && !strcmp(fmt, "swap")) {
                swap = nb_json_str(b, "device_name"); /* the last one wins */
                have_swap = true;
            } else {
                json_array_append_new(ephemerals, json_pack("s?", nb_json_str(b, "device_name")));
            }
        }
    }
    qsort(ebs, nebs, sizeof(*ebs), cmp_dev);
    char key[32];
    for (i = 0; i < nebs; i++) {
        snprintf(key, sizeof(key), "ebs%zu", i);
        json_object_set_new(m, key, json_pack("s?", ebs[i]));
    }
    if (have_swap)
        json_object_set_new(m, "swap", json_pack("s?", swap));
    json_t *e;
    json_array_foreach (ephemerals, i, e) {
        snprintf(key, sizeof(key), "ephemeral%zu", i);
        json_object_set(m, key, e);
    }
    json_decref(ephemerals);
    free(ebs);
    return m;
}

/* The instance's first floating IP (Nova's ec2 public-ipv4), "" if none:
 * from its network_info, the floating_ips of its fixed IPs. */
static const char *first_floating_ip(const json_t *inst)
{
    size_t i, j, k, l;
    json_t *vif, *sub, *ip, *f;
    json_array_foreach (json_object_get(inst, "network_info"), i, vif)
        json_array_foreach (json_object_get(json_object_get(vif, "network"), "subnets"), j, sub)
            json_array_foreach (json_object_get(sub, "ips"), k, ip)
                json_array_foreach (json_object_get(ip, "floating_ips"), l, f)
                    if (nb_json_str(f, "address"))
                        return nb_json_str(f, "address");
    return "";
}

json_t *nb_md_ec2_meta_data(const json_t *inst, const char *version, const char *address)
{
    int v = version_index(ec2_versions, N_EC2, version);
    if (v < 0)
        return NULL;
    char inst_id[32], ami_id[32];
    ec2_id("i", nb_json_str(inst, "uuid"), inst_id, sizeof(inst_id));
    const char *image = nb_json_str(inst, "image_ref");
    ec2_id("ami", image, ami_id, sizeof(ami_id));
    _cleanup_free_ char *host = md_hostname(inst);
    const json_t *sgs = json_object_get(inst, "security_groups");
    json_t *md = json_pack("{s:s?, s:I, s:s, s:s, s:s?, s:s?, s:s?, s:o}", "ami-id",
                           image && *image ? ami_id : NULL, "ami-launch-index",
                           (json_int_t)nb_json_int(inst, "launch_index", 0), "ami-manifest-path",
                           "FIXME", "instance-id", inst_id, "hostname", host, "local-ipv4", address,
                           "reservation-id", nb_json_str(inst, "reservation_id"), "security-groups",
                           json_is_array(sgs) ? json_deep_copy(sgs) : json_array());
    const char *key_name = nb_json_str(inst, "key_name");
    if (key_name) {
        /* public-keys/ lists "0=<name>"; public-keys/0/ holds openssh-key */
        char *name = nb_strdup_printf("0=%s", key_name);
        json_object_set_new(md, "public-keys",
                            json_pack("{s:{s:s, s:s?}}", "0", "_name", name, "openssh-key",
                                      nb_json_str(inst, "key_data")));
        free(name);
    }
    if (v >= EC2_2007_01_19) {
        json_object_set_new(md, "local-hostname", json_pack("s?", host));
        json_object_set_new(md, "public-hostname", json_pack("s?", host));
        json_object_set_new(md, "public-ipv4", json_string(first_floating_ip(inst)));
    }
    if (v >= EC2_2007_08_29)
        json_object_set_new(md, "instance-type",
                            json_pack("s?", nb_json_str(json_object_get(inst, "flavor"), "name")));
    if (v >= EC2_2007_12_15)
        json_object_set_new(md, "block-device-mapping", block_device_mapping(inst));
    if (v >= EC2_2008_02_01)
        json_object_set_new(
            md, "placement",
            json_pack("{s:s?}", "availability-zone", nb_json_str(inst, "availability_zone")));
    if (v >= EC2_2008_09_01)
        json_object_set_new(md, "instance-action", json_string("none"));
    return md;
}

/* {"meta-data": …, "user-data": <bytes>}, as Nova's get_ec2_metadata. The
 * user data is a jansson string holding the raw bytes (never dumped as
 * JSON). NULL after nb_error. */
static json_t *ec2_tree(struct nb_ctx *ctx, const json_t *inst, const char *version,
                        const char *address)
{
    json_t *md = nb_md_ec2_meta_data(inst, version, address);
    if (!md) {
        nb_error(ctx, 404, NULL, "Unknown EC2 metadata version %s.", version);
        return NULL;
    }
    json_t *tree = json_pack("{s:o}", "meta-data", md);
    _cleanup_free_ char *ud = NULL;
    size_t len;
    int rc = nb_md_user_data(inst, &ud, &len);
    if (rc < 0) {
        json_decref(tree);
        nb_error(ctx, 500, NULL, "The user data of instance %s is not base64.",
                 nb_json_str(inst, "uuid"));
        return NULL;
    }
    if (rc > 0)
        json_object_set_new(tree, "user-data", json_stringn_nocheck(ud, len));
    return tree;
}

/* The StaticJSON vendor data: [api] vendordata_jsonfile_path's JSON, {}
 * when unset. NULL after nb_error 500 when the file cannot be read or
 * parsed (Nova fails every request the same way). New ref. */
static json_t *vendor_data(struct nb_ctx *ctx)
{
    const char *path = nb_conf_str("api", "vendordata_jsonfile_path", NULL);
    if (!path || !*path)
        return json_object();
    json_error_t err;
    json_t *j = json_load_file(path, JSON_DECODE_ANY, &err);
    if (!j)
        nb_error(ctx, 500, NULL, "vendordata_jsonfile_path[%s]: %s", path, err.text);
    return j;
}

/* doc = the JSON text of j (consumed), as Python's json.dumps writes it. */
static int doc_json(struct nb_md_doc *doc, json_t *j, const char *type)
{
    doc->data = json_dumps(j, JSON_ENSURE_ASCII | JSON_ENCODE_ANY);
    json_decref(j);
    if (!doc->data)
        abort(); /* out of memory */
    doc->len = strlen(doc->data);
    doc->content_type = type;
    return 0;
}

static int doc_bytes(struct nb_md_doc *doc, const char *data, size_t len)
{
    doc->data = malloc(len + 1);
    if (!doc->data)
        abort();
    memcpy(doc->data, data, len);
    doc->data[len] = '\0';
    doc->len = len;
    doc->content_type = TEXT_PLAIN;
    return 0;
}

static int cmp_key(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Appends a scalar as Python's str() prints it. */
static void print_scalar(struct nb_sbuf *b, const json_t *v)
{
    char num[64];
    switch (json_typeof(v)) {
    case JSON_STRING: nb_sbuf_add(b, json_string_value(v), json_string_length(v)); return;
    case JSON_INTEGER:
        snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        break;
    case JSON_REAL: snprintf(num, sizeof(num), "%.17g", json_real_value(v)); break;
    case JSON_TRUE: nb_strlcpy(num, "True", sizeof(num)); break;
    case JSON_FALSE: nb_strlcpy(num, "False", sizeof(num)); break;
    default: nb_strlcpy(num, "None", sizeof(num)); break;
    }
    nb_sbuf_str(b, num);
}

/* Nova's ec2_md_print: a directory is its sorted entries one a line (a
 * sub-directory as "name/", or its "_name" when it has one), a list its
 * items one a line, anything else its value. */
static int doc_print(struct nb_md_doc *doc, const json_t *data)
{
    struct nb_sbuf b = {0};
    nb_sbuf_add(&b, "", 0);
    if (json_is_object(data)) {
        size_t n = 0;
        const char **keys = calloc(json_object_size(data) + 1, sizeof(*keys));
        const char *key;
        json_t *v;
        json_object_foreach ((json_t *)data, key, v)
            keys[n++] = key;
        qsort(keys, n, sizeof(*keys), cmp_key);
        bool first = true;
        for (size_t i = 0; i < n; i++) {
            if (!strcmp(keys[i], "_name"))
                continue;
            if (!first)
                nb_sbuf_add(&b, "\n", 1);
            first = false;
            v = json_object_get(data, keys[i]);
            if (json_is_object(v) && nb_json_str(v, "_name")) {
                nb_sbuf_str(&b, nb_json_str(v, "_name"));
            } else {
                nb_sbuf_str(&b, keys[i]);
                if (json_is_object(v))
                    nb_sbuf_add(&b, "/", 1);
            }
        }
        free(keys);
    } else if (json_is_array(data)) {
        size_t i;
        json_t *v;
        json_array_foreach ((json_t *)data, i, v) {
            if (i)
                nb_sbuf_add(&b, "\n", 1);
            print_scalar(&b, v);
        }
    } else {
        print_scalar(&b, data);
    }
    doc->data = b.s;
    doc->len = b.len;
    doc->content_type = TEXT_PLAIN;
    return 0;
}

static int not_found(struct nb_ctx *ctx, const char *path)
{
    return nb_error(ctx, 404, NULL, "The resource could not be found: %s", path);
}

/* The OpenStack versions Nova lists: those not in the future, then
 * "latest". New ref. */
static json_t *os_version_list(void)
{
    char today[16];
    time_t now = time(NULL);
    struct tm tm;
    strftime(today, sizeof(today), "%Y-%m-%d", gmtime_r(&now, &tm));
    json_t *list = json_array();
    for (size_t i = 0; i < N_OS; i++)
        if (strcmp(os_versions[i], today) <= 0)
            json_array_append_new(list, json_string(os_versions[i]));
    json_array_append_new(list, json_string("latest"));
    return list;
}

static json_t *ec2_version_list(void)
{
    json_t *list = json_array();
    for (size_t i = 0; i < N_EC2; i++)
        json_array_append_new(list, json_string(ec2_versions[i]));
    json_array_append_new(list, json_string("latest"));
    return list;
}

/* /openstack/<version>: what that version holds, as Nova's _handle_version. */
static json_t *os_listing(const json_t *inst, int v)
{
    json_t *l = json_pack("[s]", "meta_data.json");
    if (nb_json_str(inst, "user_data"))
        json_array_append_new(l, json_string("user_data"));
    if (v >= GRIZZLY)
        json_array_append_new(l, json_string("password"));
    if (v >= HAVANA)
        json_array_append_new(l, json_string("vendor_data.json"));
    if (v >= LIBERTY)
        json_array_append_new(l, json_string("network_data.json"));
    if (v >= NEWTON_TWO)
        json_array_append_new(l, json_string("vendor_data2.json"));
    return l;
}

/* /openstack/<version>/<name>, as Nova's RouteConfiguration. */
static int os_item(struct nb_ctx *ctx, const json_t *inst, const json_t *nics, const char **t,
                   int n, const char *path, struct nb_md_doc *doc)
{
    int v = version_index(os_versions, N_OS, t[0]);
    if (v < 0) /* also "content": nubo injects no files */
        return not_found(ctx, path);
    struct nb_sbuf name = {0};
    nb_sbuf_str(&name, n == 1 ? "version" : t[1]);
    for (int i = 2; i < n; i++) {
        nb_sbuf_add(&name, "/", 1);
        nb_sbuf_str(&name, t[i]);
    }
    _cleanup_free_ char *item = name.s;
    if (!strcmp(item, "version")) {
        _cleanup_json_ json_t *l = os_listing(inst, v);
        return doc_print(doc, l);
    }
    if (!strcmp(item, "meta_data.json"))
        return doc_json(doc, nb_md_meta_data(inst, t[0]), APP_JSON);
    if (!strcmp(item, "network_data.json")) /* Nova leaves it text/plain */
        return doc_json(doc, nb_md_network_data(inst, nics), TEXT_PLAIN);
    if (!strcmp(item, "user_data")) {
        _cleanup_free_ char *ud = NULL;
        size_t len;
        int rc = nb_md_user_data(inst, &ud, &len);
        if (rc < 0)
            return nb_error(ctx, 500, NULL, "The user data of instance %s is not base64.",
                            nb_json_str(inst, "uuid"));
        return rc ? doc_bytes(doc, ud, len) : not_found(ctx, path);
    }
    if (!strcmp(item, "password") && v >= GRIZZLY) {
        const char *pw = nb_json_str(inst, "password");
        return doc_bytes(doc, pw ? pw : "", pw ? strlen(pw) : 0);
    }
    bool vd = !strcmp(item, "vendor_data.json") && v >= HAVANA;
    bool vd2 = !strcmp(item, "vendor_data2.json") && v >= NEWTON_TWO;
    if (vd || vd2) {
        json_t *data = vendor_data(ctx);
        if (!data)
            return -1;
        return doc_json(doc, vd ? data : json_pack("{s:o}", "static", data), APP_JSON);
    }
    return not_found(ctx, path);
}

/* /<ec2 version>/…: the node at that path of the EC2 tree. */
static int ec2_item(struct nb_ctx *ctx, const json_t *inst, const char *address, const char **t,
                    int n, const char *path, struct nb_md_doc *doc)
{
    if (version_index(ec2_versions, N_EC2, t[0]) < 0)
        return not_found(ctx, path);
    _cleanup_json_ json_t *tree = ec2_tree(ctx, inst, t[0], address);
    if (!tree)
        return -1;
    const json_t *node = tree;
    for (int i = 1; i < n && node; i++)
        node = json_is_object(node) ? json_object_get(node, t[i]) : NULL;
    return node ? doc_print(doc, node) : not_found(ctx, path);
}

/* Splits path into its components as posixpath.normpath leaves them ("."
 * and empty ones dropped, ".." climbing). Returns the count, -1 if more
 * than max. */
static int split_path(char *buf, const char **tok, int max)
{
    int n = 0;
    char *save = NULL;
    for (char *c = strtok_r(buf, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
        if (!strcmp(c, "."))
            continue;
        if (!strcmp(c, "..")) {
            if (n)
                n--;
            continue;
        }
        if (n == max)
            return -1;
        tok[n++] = c;
    }
    return n;
}

int nb_md_lookup(struct nb_ctx *ctx, const json_t *inst, const json_t *nics, const char *address,
                 const char *path, struct nb_md_doc *doc)
{
    memset(doc, 0, sizeof(*doc));
    _cleanup_free_ char *buf = strdup(path);
    const char *tok[MAX_TOKENS + 1];
    const char **t = tok + 1; /* room to put "ec2" in front */
    int n = buf ? split_path(buf, t, MAX_TOKENS) : -1;
    if (n < 0)
        return not_found(ctx, path);
    if (n == 0 || (strcmp(t[0], "ec2") && strcmp(t[0], "openstack"))) {
        *--t = "ec2";
        n++;
    }
    if (n == 1) {
        _cleanup_json_ json_t *l =
            !strcmp(t[0], "openstack") ? os_version_list() : ec2_version_list();
        return doc_print(doc, l);
    }
    if (!strcmp(t[0], "openstack"))
        return os_item(ctx, inst, nics, t + 1, n - 1, path, doc);
    return ec2_item(ctx, inst, address, t + 1, n - 1, path, doc);
}

/* True when version is in the space-separated skip list. */
static bool skipped(const char *list, const char *version)
{
    size_t vl = strlen(version);
    for (const char *p = list; (p = strstr(p, version)); p += vl)
        if ((p == list || p[-1] == ' ') && (p[vl] == ' ' || p[vl] == '\0'))
            return true;
    return false;
}

/* ec2/<version>/meta-data.json and user-data of the config drive. */
static int ec2_files(struct nb_ctx *ctx, const json_t *inst, const char *version, nb_md_file_fn fn,
                     void *opaque)
{
    _cleanup_json_ json_t *tree = ec2_tree(ctx, inst, version, NULL);
    if (!tree)
        return -1;
    char path[128];
    const json_t *ud = json_object_get(tree, "user-data");
    snprintf(path, sizeof(path), "ec2/%s/user-data", version);
    if (ud && fn(opaque, ctx, path, json_string_value(ud), json_string_length(ud)) < 0)
        return -1;
    json_t *md = json_object_get(tree, "meta-data");
    json_object_del(json_object_get(json_object_get(md, "public-keys"), "0"), "_name");
    struct nb_md_doc doc;
    doc_json(&doc, json_incref(md), APP_JSON);
    snprintf(path, sizeof(path), "ec2/%s/meta-data.json", version);
    int rc = fn(opaque, ctx, path, doc.data, doc.len);
    free(doc.data);
    return rc;
}

int nb_md_files(struct nb_ctx *ctx, const json_t *inst, const json_t *nics, nb_md_file_fn fn,
                void *opaque)
{
    const char *skip = nb_conf_str("api", "config_drive_skip_versions",
                                   "1.0 2007-01-19 2007-03-01 2007-08-29 2007-10-10 "
                                   "2007-12-15 2008-02-01 2008-09-01");
    for (size_t i = 0; i <= N_EC2; i++) {
        const char *v = i < N_EC2 ? ec2_versions[i] : "latest";
        if (!skipped(skip, v) && ec2_files(ctx, inst, v, fn, opaque) < 0)
            return -1;
    }
    static const char *const names[] = {"meta_data.json", "user_data", "vendor_data.json",
                                        "network_data.json", "vendor_data2.json"};
    static const int since[] = {0, 0, HAVANA, LIBERTY, NEWTON_TWO};
    bool has_ud = nb_json_str(inst, "user_data") != NULL;
    for (size_t i = 0; i <= N_OS; i++) {
        const char *v = i < N_OS ? os_versions[i] : "latest";
        int vi = version_index(os_versions, N_OS, v);
        for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
            if (vi < since[k] || (k == 1 && !has_ud))
                continue;
            char path[128];
            snprintf(path, sizeof(path), "openstack/%s/%s", v, names[k]);
            struct nb_md_doc doc;
            if (nb_md_lookup(ctx, inst, nics, NULL, path, &doc) < 0)
                return -1;
            int rc = fn(opaque, ctx, path, doc.data, doc.len);
            free(doc.data);
            if (rc < 0)
                return -1;
        }
    }
    return 0;
}
