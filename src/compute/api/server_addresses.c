/* server_addresses.c - "addresses" from instance_info_caches.network_info
 * (the network_info model the conductor's networking step writes), shaped
 * as Nova's views/addresses.py; GET /servers/{id}/ips and the ip/ip6 list
 * filters read the same cache (server_addresses.h). */
#include "common/cleanup.h"
#include "common/json.h"
#include "compute/api/instances.h"
#include "compute/api/jsonbuf.h"
#include "compute/api/server_addresses.h"
#include "db/db.h"

#include <regex.h>
#include <stdlib.h>
#include <string.h>

/* ---- addresses ------------------------------------------------------------ */

static const char *vif_label(const json_t *vif)
{
    return nb_json_str(json_object_get(vif, "network"), "label");
}

/* One address of Nova's views/addresses.py basic(). */
static void write_address(struct nb_srv_buf *b, bool *first, const json_t *ip, const char *type,
                          const char *mac, bool extend)
{
    nb_srv_buf_raw(b, *first ? "{" : ",{", *first ? 1 : 2);
    *first = false;
    bool f = true;
    json_t *version = json_object_get(ip, "version");
    if (version)
        nb_srv_buf_put_json(b, &f, "version", version);
    else
        nb_srv_buf_put_raw(b, &f, "version", "null");
    nb_srv_buf_put_str(b, &f, "addr", nb_json_str(ip, "address"));
    if (extend) {
        nb_srv_buf_put_str(b, &f, "OS-EXT-IPS:type", type);
        nb_srv_buf_put_str(b, &f, "OS-EXT-IPS-MAC:mac_addr", mac);
    }
    nb_srv_buf_raw(b, "}", 1);
}

/* The fixed (floating false) or floating addresses of one VIF. */
static void write_vif_addresses(struct nb_srv_buf *b, bool *first, const json_t *vif, bool floating,
                                bool extend)
{
    const char *mac = nb_json_str(vif, "address");
    size_t k, m, f;
    json_t *sub, *ip, *fip;
    json_array_foreach (json_object_get(json_object_get(vif, "network"), "subnets"), k, sub) {
        json_array_foreach (json_object_get(sub, "ips"), m, ip) {
            if (!floating)
                write_address(b, first, ip, "fixed", mac, extend);
            else
                json_array_foreach (json_object_get(ip, "floating_ips"), f, fip)
                    write_address(b, first, fip, "floating", mac, extend);
        }
    }
}

/* Nova's get_networks_for_instance_from_nw_info + addresses index(): per
 * network label (in VIF order), the fixed IPs of its VIFs, then their
 * floating IPs. Written straight into b: a page of 1,000 servers has
 * 1,000 of these. */
void nb_srv_write_addresses(struct nb_srv_buf *b, const json_t *nw, bool extend)
{
    size_t n = json_array_size(nw);
    bool first_label = true;
    nb_srv_buf_raw(b, "{", 1);
    for (size_t i = 0; i < n; i++) {
        const char *label = vif_label(json_array_get(nw, i));
        bool seen = !label;
        for (size_t j = 0; j < i && !seen; j++)
            seen = vif_label(json_array_get(nw, j)) &&
                   !strcmp(vif_label(json_array_get(nw, j)), label);
        if (seen)
            continue;
        nb_srv_buf_key(b, label, &first_label);
        nb_srv_buf_raw(b, "[", 1);
        bool first = true;
        for (int floating = 0; floating < 2; floating++)
            for (size_t j = i; j < n; j++) {
                const char *l = vif_label(json_array_get(nw, j));
                if (l && !strcmp(l, label))
                    write_vif_addresses(b, &first, json_array_get(nw, j), floating, extend);
            }
        nb_srv_buf_raw(b, "]", 1);
    }
    nb_srv_buf_raw(b, "}", 1);
}

json_t *nb_srv_addresses(const json_t *network_info, bool extend)
{
    struct nb_srv_buf b;
    nb_srv_buf_init(&b);
    nb_srv_write_addresses(&b, network_info, extend);
    json_t *out = json_loadb(b.s, b.len, JSON_DECODE_ANY, NULL);
    nb_srv_buf_free(&b);
    return out ? out : json_object();
}

json_t *nb_srv_network_info(struct nb_ctx *ctx, const char *instance_uuid)
{
    json_t *row = nb_db_row(nb_srv_db(), ctx,
                            "SELECT network_info FROM instance_info_caches WHERE instance_uuid = ?",
                            "s", instance_uuid);
    if (!row && nb_ctx_failed(ctx))
        return NULL;
    json_t *nw = nb_json_parse(nb_json_str(row, "network_info"));
    json_decref(row);
    if (!json_is_array(nw)) {
        json_decref(nw);
        nw = json_array();
    }
    return nw;
}

/* Compiles a filter of Python's re syntax as POSIX extended (\d is
 * rewritten as [0-9]). 0, or -1 after 400 naming the filter. */
static int compile_ip_filter(struct nb_ctx *ctx, const char *name, const char *pattern, regex_t *re)
{
    size_t n = strlen(pattern);
    _cleanup_free_ char *ere = malloc(n * 5 / 2 + 1);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (pattern[i] == '\\' && pattern[i + 1] == 'd') {
            memcpy(ere + o, "[0-9]", 5);
            o += 5;
            i++;
        } else if (pattern[i] == '\\' && pattern[i + 1]) {
            ere[o++] = pattern[i++];
            ere[o++] = pattern[i];
        } else {
            ere[o++] = pattern[i];
        }
    }
    ere[o] = '\0';
    if (regcomp(re, ere, REG_EXTENDED) != 0)
        return nb_error(ctx, 400, NULL,
                        "Invalid filter %s: '%s' is not a valid regular expression.", name,
                        pattern);
    return 0;
}

/* Python's re.match: a match that starts at the beginning. */
static bool re_match_start(const regex_t *re, const char *s)
{
    regmatch_t m;
    return regexec(re, s, 1, &m, 0) == 0 && m.rm_so == 0;
}

/* Whether a fixed IP of network_info matches (Nova's _ip_filter). */
static bool nw_info_matches(const json_t *nw, const regex_t *re4, const regex_t *re6)
{
    size_t i, k, m;
    json_t *vif, *sub, *ip;
    json_array_foreach ((json_t *)nw, i, vif) {
        json_array_foreach (json_object_get(json_object_get(vif, "network"), "subnets"), k, sub) {
            json_array_foreach (json_object_get(sub, "ips"), m, ip) {
                const char *addr = nb_json_str(ip, "address");
                long long v = nb_json_int(ip, "version", 0);
                if (addr && ((v == 4 && re4 && re_match_start(re4, addr)) ||
                             (v == 6 && re6 && re_match_start(re6, addr))))
                    return true;
            }
        }
    }
    return false;
}

json_t *nb_srv_uuids_by_ip(struct nb_ctx *ctx, const char *ip, const char *ip6)
{
    regex_t re4, re6;
    if (ip && compile_ip_filter(ctx, "ip", ip, &re4) < 0)
        return NULL;
    if (ip6 && compile_ip_filter(ctx, "ip6", ip6, &re6) < 0) {
        if (ip)
            regfree(&re4);
        return NULL;
    }
    json_t *out = NULL;
    _cleanup_json_ json_t *rows = nb_db_rows(nb_srv_db(), ctx,
                                             "SELECT instance_uuid, network_info FROM "
                                             "instance_info_caches WHERE network_info IS NOT "
                                             "NULL AND network_info != '[]'",
                                             "");
    if (rows) {
        out = json_array();
        size_t i;
        json_t *r;
        json_array_foreach (rows, i, r) {
            _cleanup_json_ json_t *nw = nb_json_parse(nb_json_str(r, "network_info"));
            if (json_is_array(nw) && nw_info_matches(nw, ip ? &re4 : NULL, ip6 ? &re6 : NULL))
                json_array_append(out, json_object_get(r, "instance_uuid"));
        }
    }
    if (ip)
        regfree(&re4);
    if (ip6)
        regfree(&re6);
    return out;
}
