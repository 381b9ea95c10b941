/* keypairs.c - /os-keypairs, as Nova's keypairs.py and KeypairAPI.
 *
 * A keypair belongs to a user and is named uniquely per user. Importing
 * checks the key the way Nova does through pyca/cryptography (an OpenSSH
 * one-line key of a known type, or a PEM X.509 certificate for type x509)
 * and stores Nova's fingerprint: the MD5 of the decoded key blob, or the
 * SHA-1 of the certificate, as colon hex. Without a public key (allowed up
 * to 2.91) the server generates one with OpenSSL: an RSA 2048 key for ssh
 * (returned as a PEM private key, like paramiko writes it), or a self-signed
 * client certificate and a PKCS#12 bundle for x509, and returns the private
 * part once. Rows are deleted for good, as in Nova's API database. */
#include "compute/api/api.h"
#include "compute/api/links.h"
#include "compute/api/resources.h"
#include "compute/api/validate.h"
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/pyrepr.h"
#include "common/util.h"
#include "db/db.h"

#include <limits.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/obj_mac.h>
#include <openssl/pem.h>
#include <openssl/pkcs12.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static struct nb_env *env;

/* --- the SSH wire format ----------------------------------------------------------- */

struct blob {
    const unsigned char *p;
    size_t n;
};

static int get_u32(struct blob *b, unsigned long *out)
{
    if (b->n < 4)
        return -1;
    *out = ((unsigned long)b->p[0] << 24) | ((unsigned long)b->p[1] << 16) |
           ((unsigned long)b->p[2] << 8) | b->p[3];
    b->p += 4, b->n -= 4;
    return 0;
}

static int get_u64(struct blob *b)
{
    if (b->n < 8)
        return -1;
    b->p += 8, b->n -= 8;
    return 0;
}

static int get_str(struct blob *b, struct blob *out)
{
    unsigned long len;
    if (get_u32(b, &len) < 0 || len > b->n)
        return -1;
    out->p = b->p, out->n = len;
    b->p += len, b->n -= len;
    return 0;
}

/* An mpint as a (new) BIGNUM; negative values are refused as cryptography
 * does. */
static BIGNUM *get_mpint(struct blob *b)
{
    struct blob s;
    if (get_str(b, &s) < 0 || (s.n && s.p[0] > 0x7F))
        return NULL;
    return BN_bin2bn(s.p, (int)s.n, NULL);
}

static bool blob_is(const struct blob *b, const char *s)
{
    return b->n == strlen(s) && memcmp(b->p, s, b->n) == 0;
}

/* Lenient base64 decoding as binascii.a2b_base64: characters outside the
 * alphabet are skipped, decoding stops at padding. Returns a malloc'd buffer
 * and its length, or NULL on bad padding. */
static unsigned char *b64_decode(const char *s, size_t len, size_t *outlen)
{
    unsigned char *out = malloc(len / 4 * 3 + 4);
    if (!out)
        abort();
    unsigned long acc = 0;
    int bits = 0, nchars = 0;
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        int v;
        if (c >= 'A' && c <= 'Z')
            v = c - 'A';
        else if (c >= 'a' && c <= 'z')
            v = c - 'a' + 26;
        else if (c >= '0' && c <= '9')
            v = c - '0' + 52;
        else if (c == '+')
            v = 62;
        else if (c == '/')
            v = 63;
        else if (c == '=')
            break;
        else
            continue;
        nchars++;
        acc = (acc << 6) | (unsigned long)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (unsigned char)((acc >> bits) & 0xFF);
        }
    }
    if (nchars % 4 == 1) {
        free(out);
        return NULL;
    }
    *outlen = o;
    return out;
}

static int check_rsa(struct blob *b)
{
    BIGNUM *e = get_mpint(b), *n = e ? get_mpint(b) : NULL;
    int ok = e && n && BN_num_bits(n) >= 2 && BN_is_odd(e) && BN_get_word(e) != 1 &&
             BN_cmp(e, n) < 0 && BN_cmp(n, BN_value_one()) > 0 && !BN_is_word(n, 2);
    BN_free(e);
    BN_free(n);
    return ok ? 0 : -1;
}

static int check_dsa(struct blob *b)
{
    BIGNUM *v[4] = {0};
    int ok = 1;
    for (int i = 0; i < 4 && ok; i++)
        ok = (v[i] = get_mpint(b)) != NULL;
    if (ok)
        ok = BN_num_bits(v[0]) == 1024 &&
             (BN_num_bits(v[1]) == 160 || BN_num_bits(v[1]) == 224 || BN_num_bits(v[1]) == 256) &&
             BN_cmp(v[2], BN_value_one()) > 0 && BN_cmp(v[2], v[0]) < 0;
    for (int i = 0; i < 4; i++)
        BN_free(v[i]);
    return ok ? 0 : -1;
}

static int check_ecdsa(struct blob *b, const char *curve_name, int nid)
{
    struct blob curve, point;
    if (get_str(b, &curve) < 0 || get_str(b, &point) < 0 || !blob_is(&curve, curve_name) ||
        point.n == 0 || point.p[0] != 4)
        return -1;
    EC_GROUP *g = EC_GROUP_new_by_curve_name(nid);
    EC_POINT *pt = g ? EC_POINT_new(g) : NULL;
    int ok = pt && EC_POINT_oct2point(g, pt, point.p, point.n, NULL) == 1 &&
             EC_POINT_is_on_curve(g, pt, NULL) == 1;
    EC_POINT_free(pt);
    EC_GROUP_free(g);
    return ok ? 0 : -1;
}

static int check_ed25519(struct blob *b)
{
    struct blob point;
    return get_str(b, &point) == 0 && point.n == 32 ? 0 : -1;
}

/* Checks the key fields of a blob of type ktype (certificate suffix
 * removed). 0/-1. */
static int check_key_fields(const char *ktype, struct blob *b)
{
    if (strcmp(ktype, "ssh-rsa") == 0)
        return check_rsa(b);
    if (strcmp(ktype, "ssh-dss") == 0)
        return check_dsa(b);
    if (strcmp(ktype, "ssh-ed25519") == 0)
        return check_ed25519(b);
    if (strcmp(ktype, "ecdsa-sha2-nistp256") == 0)
        return check_ecdsa(b, "nistp256", NID_X9_62_prime256v1);
    if (strcmp(ktype, "ecdsa-sha2-nistp384") == 0)
        return check_ecdsa(b, "nistp384", NID_secp384r1);
    if (strcmp(ktype, "ecdsa-sha2-nistp521") == 0)
        return check_ecdsa(b, "nistp521", NID_secp521r1);
    return -1;
}

/* cryptography's load_ssh_public_key checks, minus building the key. */
static int validate_ssh_key(const char *key)
{
    static const char cert_suffix[] = "-cert-v01@openssh.com";
    const char *p = key;
    size_t tlen = strcspn(p, " \t\n\r\f\v");
    if (!tlen || (p[tlen] != ' ' && p[tlen] != '\t'))
        return -1;
    const char *body = p + tlen;
    while (*body == ' ' || *body == '\t')
        body++;
    size_t blen = strcspn(body, " \t\n\r\f\v");
    if (!blen)
        return -1;
    char ktype[128];
    if (tlen >= sizeof(ktype))
        return -1;
    memcpy(ktype, p, tlen);
    ktype[tlen] = '\0';
    bool cert = tlen > sizeof(cert_suffix) - 1 &&
                strcmp(ktype + tlen - (sizeof(cert_suffix) - 1), cert_suffix) == 0;
    char base[128];
    nb_strlcpy(base, ktype, sizeof(base));
    if (cert)
        base[tlen - (sizeof(cert_suffix) - 1)] = '\0';
    size_t n;
    _cleanup_free_ unsigned char *raw = b64_decode(body, blen, &n);
    if (!raw)
        return -1;
    struct blob b = {raw, n}, inner, skip;
    if (get_str(&b, &inner) < 0 || !blob_is(&inner, ktype))
        return -1;
    if (cert && get_str(&b, &skip) < 0)
        return -1;
    if (check_key_fields(base, &b) < 0)
        return -1;
    if (cert) {
        unsigned long u32;
        if (get_u64(&b) < 0 || get_u32(&b, &u32) < 0 || get_str(&b, &skip) < 0 ||
            get_str(&b, &skip) < 0 || get_u64(&b) < 0 || get_u64(&b) < 0)
            return -1;
        for (int i = 0; i < 5; i++)
            if (get_str(&b, &skip) < 0)
                return -1;
    }
    return b.n == 0 ? 0 : -1;
}

static void colon_hex(const unsigned char *d, unsigned n, char *out)
{
    for (unsigned i = 0; i < n; i++)
        sprintf(out + 3 * i, "%02x%s", d[i], i + 1 < n ? ":" : "");
}

int nb_keypair_ssh_fingerprint(const char *public_key, char out[48])
{
    if (!public_key || validate_ssh_key(public_key) < 0)
        return -1;
    /* Nova hashes public_key.split(' ')[1], base64-decoded. */
    const char *sp = strchr(public_key, ' ');
    if (!sp)
        return -1;
    const char *f = sp + 1;
    size_t flen = strcspn(f, " ");
    size_t n;
    _cleanup_free_ unsigned char *raw = b64_decode(f, flen, &n);
    if (!raw)
        return -1;
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0;
    if (!EVP_Digest(raw, n, md, &mdlen, EVP_md5(), NULL) || mdlen != 16)
        return -1;
    colon_hex(md, mdlen, out);
    return 0;
}

int nb_keypair_x509_fingerprint(const char *pem, char out[64], char *err, size_t errlen)
{
    BIO *bio = BIO_new_mem_buf(pem, -1);
    X509 *cert = bio ? PEM_read_bio_X509(bio, NULL, NULL, NULL) : NULL;
    BIO_free(bio);
    if (!cert) {
        snprintf(err, errlen,
                 "Unable to load certificate. See https://cryptography.io/en/latest/faq/"
                 "#why-can-t-i-import-my-pem-file for more details.");
        return -1;
    }
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0;
    int ok = X509_digest(cert, EVP_sha1(), md, &mdlen);
    X509_free(cert);
    if (!ok || mdlen != 20) {
        snprintf(err, errlen, "cannot compute the certificate digest");
        return -1;
    }
    colon_hex(md, mdlen, out);
    return 0;
}

/* --- generation ---------------------------------------------------------------- */

static void put_str(BIO *b, const unsigned char *d, size_t n)
{
    unsigned char len[4] = {(unsigned char)(n >> 24), (unsigned char)(n >> 16),
                            (unsigned char)(n >> 8), (unsigned char)n};
    BIO_write(b, len, 4);
    BIO_write(b, d, (int)n);
}

static void put_mpint(BIO *b, const BIGNUM *bn)
{
    int n = BN_num_bytes(bn);
    unsigned char *buf = calloc(1, (size_t)n + 1);
    if (!buf)
        abort();
    BN_bn2bin(bn, buf + 1);
    bool pad = n > 0 && (buf[1] & 0x80);
    put_str(b, pad ? buf : buf + 1, (size_t)n + (pad ? 1 : 0));
    free(buf);
}

/* Base64 of data on one line (malloc'd). */
static char *b64_encode(const unsigned char *data, size_t n)
{
    char *out = malloc(4 * ((n + 2) / 3) + 1);
    if (!out)
        abort();
    EVP_EncodeBlock((unsigned char *)out, data, (int)n);
    return out;
}

static char *bio_text(BIO *b)
{
    char *p;
    long n = BIO_get_mem_data(b, &p);
    char *s = malloc((size_t)n + 1);
    if (!s)
        abort();
    memcpy(s, p, (size_t)n);
    s[n] = '\0';
    return s;
}

/* crypto.generate_key_pair: RSA 2048; private key in PEM ("RSA PRIVATE
 * KEY"), public key "ssh-rsa <b64> Generated-by-Nova". 0/-1. */
static int generate_ssh(char **priv, char **pub, char fp[48])
{
    EVP_PKEY *pkey = EVP_RSA_gen(2048);
    BIGNUM *n = NULL, *e = NULL;
    BIO *mem = NULL, *wire = NULL;
    _cleanup_free_ char *b64 = NULL;
    int rc = -1;
    if (!pkey || !EVP_PKEY_get_bn_param(pkey, OSSL_PKEY_PARAM_RSA_N, &n) ||
        !EVP_PKEY_get_bn_param(pkey, OSSL_PKEY_PARAM_RSA_E, &e))
        goto out;
    mem = BIO_new(BIO_s_mem());
    if (!PEM_write_bio_PrivateKey_traditional(mem, pkey, NULL, NULL, 0, NULL, NULL))
        goto out;
    wire = BIO_new(BIO_s_mem());
    put_str(wire, (const unsigned char *)"ssh-rsa", 7);
    put_mpint(wire, e);
    put_mpint(wire, n);
    unsigned char *w;
    long wl = BIO_get_mem_data(wire, &w);
    b64 = b64_encode(w, (size_t)wl);
    *pub = nb_strdup_printf("ssh-rsa %s Generated-by-Nova", b64);
    *priv = bio_text(mem);
    if (nb_keypair_ssh_fingerprint(*pub, fp) < 0) {
        free(*pub), free(*priv);
        *pub = *priv = NULL;
        goto out;
    }
    rc = 0;
out:
    BIO_free(mem);
    BIO_free(wire);
    BN_free(n);
    BN_free(e);
    EVP_PKEY_free(pkey);
    return rc;
}

static int add_ext(X509 *cert, int nid, const char *value)
{
    X509V3_CTX v3;
    X509V3_set_ctx_nodb(&v3);
    X509V3_set_ctx(&v3, cert, cert, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &v3, nid, value);
    if (!ext)
        return -1;
    int ok = X509_add_ext(cert, ext, -1);
    X509_EXTENSION_free(ext);
    return ok ? 0 : -1;
}

/* crypto.generate_winrm_x509_cert: a self-signed client certificate for
 * CN=<user> (10 years) and the PKCS#12 of key and certificate with an empty
 * password, base64 encoded, as the private key. 0/-1. */
static int generate_x509(const char *user_id, char **priv, char **pub, char fp[64])
{
    EVP_PKEY *pkey = EVP_RSA_gen(2048);
    X509 *cert = X509_new();
    PKCS12 *p12 = NULL;
    BIO *mem = NULL;
    _cleanup_free_ char *san =
        nb_strdup_printf("otherName:1.3.6.1.4.1.311.20.2.3;UTF8:%s@localhost", user_id);
    int rc = -1;
    if (!pkey || !cert)
        goto out;
    unsigned char serial[8];
    RAND_bytes(serial, sizeof(serial));
    serial[0] &= 0x7F;
    BIGNUM *sbn = BN_bin2bn(serial, sizeof(serial), NULL);
    BN_to_ASN1_INTEGER(sbn, X509_get_serialNumber(cert));
    BN_free(sbn);
    X509_set_version(cert, 2);
    X509_gmtime_adj(X509_getm_notBefore(cert), 0);
    X509_gmtime_adj(X509_getm_notAfter(cert), 3650L * 24 * 3600);
    X509_NAME *name = X509_get_subject_name(cert);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)user_id, -1, -1,
                               0);
    X509_set_issuer_name(cert, name);
    X509_set_pubkey(cert, pkey);
    if (add_ext(cert, NID_ext_key_usage, "clientAuth") < 0 ||
        add_ext(cert, NID_subject_alt_name, san) < 0 || !X509_sign(cert, pkey, EVP_sha256()))
        goto out;
    mem = BIO_new(BIO_s_mem());
    if (!PEM_write_bio_X509(mem, cert))
        goto out;
    p12 = PKCS12_create("", NULL, pkey, cert, NULL, 0, 0, 0, 0, 0);
    if (!p12)
        goto out;
    unsigned char *der = NULL;
    int dlen = i2d_PKCS12(p12, &der);
    if (dlen <= 0)
        goto out;
    *priv = b64_encode(der, (size_t)dlen);
    OPENSSL_free(der);
    *pub = bio_text(mem);
    char err[256];
    if (nb_keypair_x509_fingerprint(*pub, fp, err, sizeof(err)) < 0) {
        free(*priv), free(*pub);
        *priv = *pub = NULL;
        goto out;
    }
    rc = 0;
out:
    PKCS12_free(p12);
    BIO_free(mem);
    X509_free(cert);
    EVP_PKEY_free(pkey);
    return rc;
}

/* --- database ------------------------------------------------------------------- */

json_t *nb_keypair_get(struct nb_ctx *ctx, const char *user_id, const char *name)
{
    json_t *row = nb_db_row(
        env->db, ctx, "SELECT * FROM key_pairs WHERE user_id = ? AND name = ? AND deleted = 0",
        "ss", user_id, name);
    if (!row && !nb_ctx_failed(ctx))
        nb_error(ctx, 404, NULL, "Keypair %s not found for user %s", name, user_id);
    return row;
}

/* The key_pairs quota of a user: a user or project override in quotas,
 * else [quota] key_pairs (100). -1 is unlimited. */
static long long keypair_quota(struct nb_ctx *ctx, const char *user_id)
{
    long long q = nb_db_int(env->db, ctx, -2,
                            "SELECT hard_limit FROM quotas WHERE resource = 'key_pairs' AND "
                            "project_id = ? AND (user_id = ? OR user_id IS NULL) "
                            "ORDER BY user_id IS NULL LIMIT 1",
                            "ss", ctx->project_id, user_id);
    return q == -2 ? nb_conf_int("quota", "key_pairs", 100) : q;
}

/* --- views ------------------------------------------------------------------------- */

static json_t *keypair_view(const struct nb_ctx *ctx, const json_t *row, bool show)
{
    json_t *k =
        json_pack("{s:s, s:s, s:s}", "name", nb_json_str(row, "name"), "public_key",
                  nb_json_str(row, "public_key"), "fingerprint", nb_json_str(row, "fingerprint"));
    if (nb_ctx_mv_ge(ctx, 2, 2))
        json_object_set_new(k, "type", nb_res_row_copy(row, "type"));
    if (show) {
        json_object_set_new(k, "user_id", nb_res_row_copy(row, "user_id"));
        json_object_set_new(k, "created_at", nb_res_row_copy(row, "created_at"));
        json_object_set_new(k, "deleted", json_false());
        json_object_set_new(k, "deleted_at", json_null());
        json_object_set_new(k, "id", json_integer(nb_json_int(row, "id", 0)));
        json_object_set_new(k, "updated_at", json_null());
    }
    return k;
}

/* The user a request acts for: ?user_id= from 2.10, else the caller; the
 * keypairs policy lets only admins act for someone else. */
static const char *target_user(struct nb_ctx *ctx, struct nb_req *req, const char *action)
{
    const char *u = nb_ctx_mv_ge(ctx, 2, 10) ? nb_req_query(req, "user_id") : NULL;
    if (!u || !*u)
        u = ctx->user_id;
    if (!ctx->is_admin && strcmp(u, ctx->user_id) != 0) {
        _cleanup_free_ char *rule = nb_strdup_printf("os_compute_api:os-keypairs:%s", action);
        nb_res_deny(ctx, rule);
        return NULL;
    }
    return u;
}

static int check_query(struct nb_ctx *ctx, struct nb_req *req, bool paging)
{
    static const char *const show_keys[] = {"user_id", NULL};
    static const char *const index_keys[] = {"user_id", "limit", "marker", NULL};
    if (!nb_ctx_mv_ge(ctx, 2, 75))
        return 0;
    return nb_res_query_only(ctx, req, paging ? index_keys : show_keys);
}

/* --- handlers ------------------------------------------------------------------------ */

static int keypairs_index(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    bool paging = nb_ctx_mv_ge(ctx, 2, 35);
    if (check_query(ctx, req, paging) < 0)
        return -1;
    const char *user = target_user(ctx, req, "index");
    if (!user)
        return -1;
    long long limit = -1;
    const char *marker = NULL;
    if (paging && nb_res_limit_marker(ctx, req, &limit, &marker) < 0)
        return -1;
    if (marker) {
        _cleanup_json_ json_t *m = nb_db_row(
            env->db, ctx, "SELECT id FROM key_pairs WHERE user_id = ? AND name = ? AND deleted = 0",
            "ss", user, marker);
        if (!m)
            return nb_ctx_failed(ctx)
                       ? -1
                       : nb_error(ctx, 400, NULL, "Marker %s could not be found.", marker);
    }
    _cleanup_json_ json_t *rows =
        nb_db_rows(env->db, ctx,
                   "SELECT * FROM key_pairs WHERE user_id = ? AND deleted = 0 AND "
                   "(? IS NULL OR name > ?) ORDER BY name LIMIT ?",
                   "sssi", user, marker, marker, limit < 0 ? LLONG_MAX : limit);
    if (!rows)
        return -1;
    json_t *list = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        json_array_append_new(list, json_pack("{s:o}", "keypair", keypair_view(ctx, r, false)));
    }
    json_t *body = json_pack("{s:o}", "keypairs", list);
    size_t n = json_array_size(rows);
    if (paging)
        nb_res_next_link(body, "keypairs_links", req, "os-keypairs", n,
                         n ? nb_json_str(json_array_get(rows, n - 1), "name") : NULL);
    return nb_resp_json(resp, 200, body);
}

static int keypairs_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (check_query(ctx, req, false) < 0)
        return -1;
    const char *user = target_user(ctx, req, "show");
    if (!user)
        return -1;
    _cleanup_json_ json_t *row = nb_keypair_get(ctx, user, nb_req_param(req, "keypair_name"));
    if (!row)
        return -1;
    return nb_resp_json(resp, 200, json_pack("{s:o}", "keypair", keypair_view(ctx, row, true)));
}

static int keypairs_delete(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (check_query(ctx, req, false) < 0)
        return -1;
    const char *user = target_user(ctx, req, "delete");
    if (!user)
        return -1;
    const char *name = nb_req_param(req, "keypair_name");
    int n = nb_db_exec(env->db, ctx, "DELETE FROM key_pairs WHERE user_id = ? AND name = ?", "ss",
                       user, name);
    if (n < 0)
        return -1;
    if (n == 0)
        return nb_error(ctx, 404, NULL, "Keypair %s not found for user %s", name, user);
    return nb_resp_empty(resp, nb_ctx_mv_ge(ctx, 2, 2) ? 204 : 202);
}

/* The keypair name formats: keypair_name_20 (letters, digits, "_- ") and
 * from 2.92 keypair_name_292 (adds "@."). */
static int check_keypair_name(struct nb_ctx *ctx, const json_t *v)
{
    if (nb_srv_check_name(ctx, "name", v) < 0)
        return -1;
    bool v292 = nb_ctx_mv_ge(ctx, 2, 92);
    const char *safe = v292 ? "@._- 0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                            : "_- 0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    const char *s = json_string_value(v);
    if (strspn(s, safe) != strlen(s))
        return nb_error(ctx, 400, NULL,
                        "An invalid 'name' value was provided. The name must be: Only expected "
                        "characters: [%s]",
                        safe);
    return 0;
}

struct keypair_in {
    const char *name, *type, *public_key, *user_id;
};

static int parse_create(struct nb_ctx *ctx, struct nb_req *req, struct keypair_in *in)
{
    static const char *const k21[] = {"name", "public_key", NULL};
    static const char *const k22[] = {"name", "type", "public_key", NULL};
    static const char *const k210[] = {"name", "type", "public_key", "user_id", NULL};
    const char *const *allowed =
        nb_ctx_mv_ge(ctx, 2, 10) ? k210 : (nb_ctx_mv_ge(ctx, 2, 2) ? k22 : k21);
    json_t *k = nb_res_body_object(ctx, req, "keypair", NULL);
    if (!k)
        return -1;
    json_t *v;
    *in = (struct keypair_in){.type = "ssh"};
    if ((v = json_object_get(k, "name")) && check_keypair_name(ctx, v) < 0)
        return -1;
    if (nb_ctx_mv_ge(ctx, 2, 2) && (v = json_object_get(k, "type"))) {
        const char *t = json_string_value(v);
        if (!json_is_string(v)) {
            _cleanup_free_ char *r = nb_pyrepr(v);
            _cleanup_free_ char *why = nb_strdup_printf("%s is not of type 'string'", r);
            return nb_res_bad_field(ctx, "type", v, why);
        }
        if (strcmp(t, "ssh") != 0 && strcmp(t, "x509") != 0) {
            _cleanup_free_ char *r = nb_pyrepr(v);
            _cleanup_free_ char *why = nb_strdup_printf("%s is not one of ['ssh', 'x509']", r);
            return nb_res_bad_field(ctx, "type", v, why);
        }
        in->type = t;
    }
    if ((v = json_object_get(k, "public_key"))) {
        if (nb_srv_check_string(ctx, "public_key", v, 0, SIZE_MAX, false) < 0)
            return -1;
        in->public_key = json_string_value(v);
    }
    if (nb_ctx_mv_ge(ctx, 2, 10) && (v = json_object_get(k, "user_id"))) {
        if (nb_srv_check_string(ctx, "user_id", v, 0, SIZE_MAX, false) < 0)
            return -1;
        in->user_id = json_string_value(v);
    }
    if (!nb_res_required(ctx, "keypair", k, "name") ||
        (nb_ctx_mv_ge(ctx, 2, 92) && !nb_res_required(ctx, "keypair", k, "public_key")) ||
        nb_res_only_keys(ctx, "keypair", k, allowed) < 0)
        return -1;
    in->name = json_string_value(json_object_get(k, "name"));
    return 0;
}

static int keypairs_create(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    struct keypair_in in;
    if (parse_create(ctx, req, &in) < 0)
        return -1;
    /* common.normalize_name; the name format forbids edge whitespace anyway */
    const char *user = in.user_id && *in.user_id ? in.user_id : ctx->user_id;
    if (!ctx->is_admin && strcmp(user, ctx->user_id) != 0)
        return nb_res_deny(ctx, "os_compute_api:os-keypairs:create");

    long long quota = keypair_quota(ctx, user);
    long long used =
        nb_db_int(env->db, ctx, 0,
                  "SELECT COUNT(*) FROM key_pairs WHERE user_id = ? AND deleted = 0", "s", user);
    if (nb_ctx_failed(ctx))
        return -1;
    if (quota >= 0 && used + 1 > quota)
        return nb_error(ctx, 403, NULL, "Quota exceeded, too many key pairs.");

    _cleanup_free_ char *priv = NULL, *gen_pub = NULL;
    char fp[64];
    const char *pub = in.public_key;
    bool x509 = strcmp(in.type, "x509") == 0;
    if (pub) {
        char err[256];
        if (x509 && nb_keypair_x509_fingerprint(pub, fp, err, sizeof(err)) < 0)
            return nb_error(ctx, 400, NULL,
                            "Keypair data is invalid: failed to generate X509 fingerprint. Error "
                            "message: %s",
                            err);
        if (!x509 && nb_keypair_ssh_fingerprint(pub, fp) < 0)
            return nb_error(ctx, 400, NULL,
                            "Keypair data is invalid: failed to generate fingerprint");
    } else {
        int rc =
            x509 ? generate_x509(user, &priv, &gen_pub, fp) : generate_ssh(&priv, &gen_pub, fp);
        if (rc < 0)
            return nb_error(ctx, 500, NULL, "Unexpected error while generating a key pair.");
        pub = gen_pub;
    }
    if (nb_db_int(env->db, ctx, 0,
                  "SELECT COUNT(*) FROM key_pairs WHERE user_id = ? AND name = ? AND deleted = 0",
                  "ss", user, in.name) > 0)
        return nb_error(ctx, 409, NULL, "Key pair '%s' already exists.", in.name);
    char now[32];
    if (nb_db_exec(env->db, ctx,
                   "INSERT INTO key_pairs (name, user_id, fingerprint, public_key, type, "
                   "created_at) VALUES (?, ?, ?, ?, ?, ?)",
                   "ssssss", in.name, user, fp, pub, in.type, nb_now_iso_us(now)) < 0) {
        if (nb_ctx_status(ctx) == 409) {
            nb_ctx_clear_error(ctx); /* a concurrent create of the same name */
            return nb_error(ctx, 409, NULL, "Key pair '%s' already exists.", in.name);
        }
        return -1;
    }
    json_t *k = json_pack("{s:s, s:s, s:s, s:s}", "name", in.name, "public_key", pub, "fingerprint",
                          fp, "user_id", user);
    if (nb_ctx_mv_ge(ctx, 2, 2))
        json_object_set_new(k, "type", json_string(in.type));
    if (priv)
        json_object_set_new(k, "private_key", json_string(priv));
    return nb_resp_json(resp, nb_ctx_mv_ge(ctx, 2, 2) ? 201 : 200,
                        json_pack("{s:o}", "keypair", k));
}

int nb_compute_keypairs_init(struct nb_env *e)
{
    env = e;
    nb_http_route("GET", "/compute/v2.1/os-keypairs", keypairs_index, 0);
    nb_http_route("POST", "/compute/v2.1/os-keypairs", keypairs_create, 0);
    nb_http_route("GET", "/compute/v2.1/os-keypairs/{keypair_name}", keypairs_show, 0);
    nb_http_route("DELETE", "/compute/v2.1/os-keypairs/{keypair_name}", keypairs_delete, 0);
    return 0;
}
