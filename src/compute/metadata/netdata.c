/* netdata.c - network_data.json, as Nova's nova/virt/netutils.py
 * get_network_metadata builds it from the instance's network_info (the
 * instance view's "network_info", Nova's model as the network service
 * describes the ports): a link per VIF with a subnet ("id" = the tap's name,
 * "vif_id" = the port, "type" = the VIF type when it is one Nova exposes
 * (bridge, ovs, tap, ...) else "phy", "mtu" = the network's, null when a
 * subnet has a DHCP server), a network per VIF for its first IPv4 and
 * first IPv6 subnet ("network0", ...: "ipv4_dhcp"/"ipv6_dhcp" when the
 * subnet has DHCP, else the address, netmask, default route via the
 * gateway, the subnet's host routes and DNS), and the DNS servers of all
 * of them once under "services". An instance without network_info but
 * with NICs the virt driver names (QEMU user-mode networking) gets a DHCP
 * link per NIC; nothing at all is Nova's empty document. */
#include "compute/metadata/internal.h"

#include "common/json.h"
#include "common/util.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uuid/uuid.h>

/* A name-based (v5) UUID for name in the instance's namespace: stands in
 * for the Neutron port and network IDs nubo does not have (the NIC is QEMU
 * user-mode networking), stable for the instance's life. out[37]. */
static void derived_uuid(const char *inst_uuid, const char *name, char out[37])
{
    uuid_t ns, id;
    if (!inst_uuid || uuid_parse(inst_uuid, ns) < 0)
        uuid_clear(ns);
    uuid_generate_sha1(id, ns, name, strlen(name));
    uuid_unparse_lower(id, out);
}

/* Without network_info: one DHCP link per NIC the virt driver names (QEMU
 * user-mode networking). */
static json_t *nics_network_data(const json_t *inst, const json_t *nics)
{
    const char *uuid = nb_json_str(inst, "uuid");
    json_t *links = json_array(), *nets = json_array();
    size_t i;
    json_t *nic;
    json_array_foreach ((json_t *)nics, i, nic) {
        const char *mac = nb_json_str(nic, "mac_address");
        char vif[37], net[37], name[64];
        if (nb_json_str(nic, "id"))
            nb_strlcpy(vif, nb_json_str(nic, "id"), sizeof(vif));
        else {
            snprintf(name, sizeof(name), "port/%s", mac ? mac : "");
            derived_uuid(uuid, name, vif);
        }
        if (nb_json_str(nic, "network_id"))
            nb_strlcpy(net, nb_json_str(nic, "network_id"), sizeof(net));
        else
            derived_uuid(uuid, "network", net);
        /* Nova names the link after the tap device, "tap" + port_id[:11] */
        char link_id[16];
        snprintf(link_id, sizeof(link_id), "tap%.11s", vif);
        /* QEMU user-mode networking: a 1500-byte link, addressed by its
         * built-in DHCP server */
        json_array_append_new(links, json_pack("{s:s, s:s, s:s, s:I, s:s?}", "id", link_id,
                                               "vif_id", vif, "type", "phy", "mtu",
                                               (json_int_t)nb_json_int(nic, "mtu", 1500),
                                               "ethernet_mac_address", mac));
        char net_id[32];
        snprintf(net_id, sizeof(net_id), "network%zu", i);
        json_array_append_new(nets, json_pack("{s:s, s:s, s:s, s:s}", "id", net_id, "type",
                                              "ipv4_dhcp", "link", link_id, "network_id", net));
    }
    return json_pack("{s:o, s:o, s:[]}", "links", links, "networks", nets, "services");
}

/* Nova's LEGACY_EXPOSED_VIF_TYPES: shown as they are; anything else "phy". */
static const char *link_type(const char *vif_type)
{
    static const char *const exposed[] = {
        "bridge", "dvs",       "hw_veb", "hyperv",  "ovs",
        "tap",    "vhostuser", "vif",    "vrouter", "hostdev_physical"};
    for (size_t i = 0; vif_type && i < sizeof(exposed) / sizeof(exposed[0]); i++)
        if (!strcmp(vif_type, exposed[i]))
            return vif_type;
    return "phy";
}

/* Nova's subnet.get_meta('dhcp_server') is not None: the network service
 * says true (or Nova's address of the DHCP port). */
static bool has_dhcp(const json_t *subnet)
{
    const json_t *d = json_object_get(json_object_get(subnet, "meta"), "dhcp_server");
    return json_is_true(d) || json_is_string(d);
}

/* The netmask of prefix len for version as Python's str(netaddr) prints
 * it: "255.255.255.0", "ffff:ffff:ffff:ffff::". */
static void netmask(int version, int len, char *out, size_t n)
{
    unsigned char b[16] = {0};
    int bytes = version == 6 ? 16 : 4;
    for (int i = 0; i < bytes * 8 && i < len; i++)
        b[i / 8] |= (unsigned char)(0x80 >> (i % 8));
    if (!inet_ntop(version == 6 ? AF_INET6 : AF_INET, b, out, (socklen_t)n))
        nb_strlcpy(out, "", n);
}

/* "10.0.0.0/24" -> its network address and netmask. */
static void split_cidr(const char *cidr, int version, char *addr, size_t an, char *mask, size_t mn)
{
    const char *slash = cidr ? strchr(cidr, '/') : NULL;
    int len = slash ? atoi(slash + 1) : (version == 6 ? 128 : 32);
    snprintf(addr, an, "%.*s", slash ? (int)(slash - cidr) : (int)strlen(cidr ? cidr : ""),
             cidr ? cidr : "");
    netmask(version, len, mask, mn);
}

static const json_t *first_subnet(const json_t *net, int version)
{
    size_t i;
    json_t *s;
    json_array_foreach (json_object_get(net, "subnets"), i, s)
        if (nb_json_int(s, "version", 4) == version)
            return s;
    return NULL;
}

static json_t *dns_services(const json_t *subnet)
{
    json_t *out = json_array();
    size_t i;
    json_t *d;
    json_array_foreach (json_object_get(subnet, "dns"), i, d)
        json_array_append_new(
            out, json_pack("{s:s, s:s?}", "type", "dns", "address", nb_json_str(d, "address")));
    return out;
}

/* Nova's _get_nets. New ref. */
static json_t *net_entry(const json_t *vif, const json_t *subnet, int version, int num,
                         const char *link)
{
    char id[32];
    snprintf(id, sizeof(id), "network%d", num);
    const char *net_id = nb_json_str(json_object_get(vif, "network"), "id");
    const char *mode = nb_json_str(json_object_get(subnet, "meta"), "ipv6_address_mode");
    if (!mode && has_dhcp(subnet)) {
        char type[16];
        snprintf(type, sizeof(type), "ipv%d_dhcp", version);
        return json_pack("{s:s, s:s, s:s, s:s?}", "id", id, "type", type, "link", link,
                         "network_id", net_id);
    }
    char type[48], addr[64], mask[64];
    snprintf(type, sizeof(type), "ipv%d%s%s", version, mode ? "_" : "", mode ? mode : "");
    const json_t *ip = json_array_get(json_object_get(subnet, "ips"), 0);
    split_cidr(nb_json_str(subnet, "cidr"), version, addr, sizeof(addr), mask, sizeof(mask));
    if (version == 4 && nb_json_str(json_object_get(ip, "meta"), "netmask"))
        nb_strlcpy(mask, nb_json_str(json_object_get(ip, "meta"), "netmask"), sizeof(mask));
    json_t *routes = json_array();
    const char *gw = nb_json_str(json_object_get(subnet, "gateway"), "address");
    if (gw && *gw)
        json_array_append_new(routes, json_pack("{s:s, s:s, s:s}", "network",
                                                version == 6 ? "::" : "0.0.0.0", "netmask",
                                                version == 6 ? "::" : "0.0.0.0", "gateway", gw));
    size_t i;
    json_t *r;
    json_array_foreach (json_object_get(subnet, "routes"), i, r) {
        char ra[64], rm[64];
        split_cidr(nb_json_str(r, "cidr"), version, ra, sizeof(ra), rm, sizeof(rm));
        json_array_append_new(routes,
                              json_pack("{s:s, s:s, s:s?}", "network", ra, "netmask", rm, "gateway",
                                        nb_json_str(json_object_get(r, "gateway"), "address")));
    }
    return json_pack("{s:s, s:s, s:s, s:s?, s:s, s:o, s:s?, s:o}", "id", id, "type", type, "link",
                     link, "ip_address", nb_json_str(ip, "address"), "netmask", mask, "routes",
                     routes, "network_id", net_id, "services", dns_services(subnet));
}

/* Appends the DNS entries of subnet not yet in services. */
static void add_services(json_t *services, const json_t *subnet)
{
    json_t *dns = dns_services(subnet), *d;
    size_t i, k;
    json_array_foreach (dns, i, d) {
        bool seen = false;
        json_t *s;
        json_array_foreach (services, k, s)
            seen |= json_equal(s, d);
        if (!seen)
            json_array_append(services, d);
    }
    json_decref(dns);
}

/* Nova's _get_eth_link. New ref. */
static json_t *link_entry(const json_t *vif, int num)
{
    char id[32];
    if (nb_json_str(vif, "devname"))
        nb_strlcpy(id, nb_json_str(vif, "devname"), sizeof(id));
    else
        snprintf(id, sizeof(id), "interface%d", num);
    const json_t *net = json_object_get(vif, "network");
    json_t *mtu = json_incref(json_object_get(json_object_get(net, "meta"), "mtu"));
    size_t i;
    json_t *s;
    json_array_foreach (json_object_get(net, "subnets"), i, s)
        if (has_dhcp(s)) {
            json_decref(mtu);
            mtu = NULL;
            break;
        }
    return json_pack("{s:s, s:s?, s:s, s:o, s:s?}", "id", id, "vif_id", nb_json_str(vif, "id"),
                     "type", link_type(nb_json_str(vif, "type")), "mtu", mtu ? mtu : json_null(),
                     "ethernet_mac_address", nb_json_str(vif, "address"));
}

json_t *nb_md_network_data(const json_t *inst, const json_t *nics)
{
    const json_t *ni = json_object_get(inst, "network_info");
    if (!json_is_array(ni) || !json_array_size(ni)) {
        /* Nova: no network info, an empty document */
        if (!json_is_array(nics) || !json_array_size(nics))
            return json_object();
        return nics_network_data(inst, nics);
    }
    json_t *links = json_array(), *nets = json_array(), *services = json_array();
    int ifc = -1, netn = -1;
    size_t i;
    json_t *vif;
    json_array_foreach ((json_t *)ni, i, vif) {
        const json_t *net = json_object_get(vif, "network");
        if (!json_array_size(json_object_get(net, "subnets")))
            continue;
        const json_t *v4 = first_subnet(net, 4), *v6 = first_subnet(net, 6);
        ifc++;
        if (!v4 && !v6)
            continue;
        json_t *link = link_entry(vif, ifc);
        json_array_append_new(links, link);
        const json_t *subs[2] = {v4, v6};
        for (int k = 0; k < 2; k++) {
            if (!subs[k] || !json_array_size(json_object_get(subs[k], "ips")))
                continue;
            json_array_append_new(
                nets, net_entry(vif, subs[k], k ? 6 : 4, ++netn, nb_json_str(link, "id")));
            add_services(services, subs[k]);
        }
    }
    return json_pack("{s:o, s:o, s:o}", "links", links, "networks", nets, "services", services);
}
