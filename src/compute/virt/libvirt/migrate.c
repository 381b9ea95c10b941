/* migrate.c - live migration, the host's side of the prechecks and of
 * the steps around the move (the move itself: migrate_run.c), as Nova's
 * libvirt driver does them.
 *
 * migration_info tells peers how to reach this host's hypervisor for a
 * migration ([libvirt] live_migration_scheme tcp|tls and
 * live_migration_inbound_addr, or the deprecated live_migration_uri with
 * its %s), the address for the migration data and the MTU of the
 * interface holding it, the QEMU and libvirt versions, the CPU models the
 * hypervisor offers (domain capabilities) and the CPU this host gives its
 * guests, and, with TLS, which certificates are missing. check_cpu is the
 * destination's CPU test; the storage probe is Nova's test file in the
 * root of the instances path; check_migration_target is the source's
 * test that the destination's libvirtd answers at its URI (a TCP connect
 * bounded by a timeout first, so an unreachable host costs seconds, never
 * a hang). pre_live_migration prepares the destination: the instance's
 * directory and, when its disks are not shared, empty target disks of the
 * same virtual sizes on their base images from the image cache, and a
 * config drive built again from the instance (libvirt copies no read-only
 * disk). After the move the destination keeps the domain persistent and
 * the source forgets it (its local files too, unless shared); after a
 * failure the destination removes what it made. */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/proc.h"
#include "common/sbuf.h"
#include "common/util.h"
#include "compute/metadata/metadata.h"
#include "compute/virt/libvirt/lv.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <libxml/parser.h>
#include <libxml/xpath.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------ migration_info */

/* The address peers send migration data to: [libvirt]
 * live_migration_inbound_addr, else [DEFAULT] my_ip, else the host name. */
static const char *inbound_addr(const struct lv *lv)
{
    const char *a = nb_conf_str("libvirt", "live_migration_inbound_addr", NULL);
    if (a && *a)
        return a;
    a = nb_conf_str("DEFAULT", "my_ip", NULL);
    return a && *a ? a : lv->host;
}

int lv_migration_uri(const struct lv *lv, struct nb_ctx *ctx, char *out, size_t n)
{
    const char *addr = inbound_addr(lv);
    const char *legacy = nb_conf_str("libvirt", "live_migration_uri", NULL);
    if (legacy && *legacy) {
        const char *pct = strstr(legacy, "%s");
        if (!pct || strchr(pct + 2, '%'))
            return nb_error(ctx, 500, NULL,
                            "[libvirt] live_migration_uri = %s must hold one %%s (the "
                            "destination's address)",
                            legacy);
        snprintf(out, n, "%.*s%s%s", (int)(pct - legacy), legacy, addr, pct + 2);
        return 0;
    }
    const char *scheme = nb_conf_str("libvirt", "live_migration_scheme", "tcp");
    if (strcmp(scheme, "tcp") != 0 && strcmp(scheme, "tls") != 0 && strcmp(scheme, "ssh") != 0)
        return nb_error(ctx, 500, NULL,
                        "[libvirt] live_migration_scheme must be tcp, tls or ssh, not '%s'",
                        scheme);
    bool v6 = strchr(addr, ':') != NULL;
    snprintf(out, n, "qemu+%s://%s%s%s/system", scheme, v6 ? "[" : "", addr, v6 ? "]" : "");
    return 0;
}

/* The MTU of the interface that holds addr (0 when none does). */
static int addr_mtu(const char *addr)
{
    struct ifaddrs *ifs = NULL, *i;
    unsigned char want[16];
    int fam = inet_pton(AF_INET, addr, want) == 1    ? AF_INET
              : inet_pton(AF_INET6, addr, want) == 1 ? AF_INET6
                                                     : 0;
    if (!fam || getifaddrs(&ifs) < 0)
        return 0;
    int mtu = 0;
    for (i = ifs; i && !mtu; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != fam)
            continue;
        const void *have = fam == AF_INET
                               ? (const void *)&((struct sockaddr_in *)i->ifa_addr)->sin_addr
                               : (const void *)&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr;
        if (memcmp(have, want, fam == AF_INET ? 4 : 16) != 0)
            continue;
        int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        struct ifreq ifr = {0};
        nb_strlcpy(ifr.ifr_name, i->ifa_name, sizeof(ifr.ifr_name));
        if (s >= 0 && ioctl(s, SIOCGIFMTU, &ifr) == 0)
            mtu = ifr.ifr_mtu;
        if (s >= 0)
            close(s);
    }
    freeifaddrs(ifs);
    return mtu;
}

/* The certificates a TLS migration needs on this host (libvirt's client
 * and server certificates; QEMU's with native TLS) that are missing. */
static json_t *tls_missing(bool libvirt_tls, bool native_tls)
{
    static const char *const lv_files[] = {
        "/etc/pki/CA/cacert.pem",
        "/etc/pki/libvirt/clientcert.pem",
        "/etc/pki/libvirt/private/clientkey.pem",
        "/etc/pki/libvirt/servercert.pem",
        "/etc/pki/libvirt/private/serverkey.pem",
    };
    static const char *const qemu_files[] = {
        "ca-cert.pem", "server-cert.pem", "server-key.pem", "client-cert.pem", "client-key.pem",
    };
    json_t *out = json_array();
    for (size_t i = 0; libvirt_tls && i < sizeof(lv_files) / sizeof(lv_files[0]); i++)
        if (access(lv_files[i], R_OK) != 0)
            json_array_append_new(out, json_string(lv_files[i]));
    const char *dir = "/etc/pki/qemu"; /* qemu.conf's default_tls_x509_cert_dir */
    for (size_t i = 0; native_tls && i < sizeof(qemu_files) / sizeof(qemu_files[0]); i++) {
        char p[LV_PATH_MAX];
        snprintf(p, sizeof(p), "%s/%s", dir, qemu_files[i]);
        if (access(p, R_OK) != 0)
            json_array_append_new(out, json_string(p));
    }
    return out;
}

/* The usable custom-mode CPU models of domain capabilities XML caps. */
static json_t *usable_models(const char *caps)
{
    json_t *out = json_array();
    xmlDocPtr doc = caps ? xmlReadMemory(caps, (int)strlen(caps), "domcaps.xml", NULL,
                                         XML_PARSE_NONET | XML_PARSE_NOERROR)
                         : NULL;
    if (!doc)
        return out;
    xmlXPathContextPtr xp = xmlXPathNewContext(doc);
    xmlXPathObjectPtr r = xmlXPathEvalExpression(
        (const xmlChar *)"/domainCapabilities/cpu/mode[@name='custom']/model[@usable='yes']", xp);
    for (int i = 0; r && r->nodesetval && i < r->nodesetval->nodeNr; i++) {
        xmlChar *name = xmlNodeGetContent(r->nodesetval->nodeTab[i]);
        if (name)
            json_array_append_new(out, json_string((const char *)name));
        xmlFree(name);
    }
    xmlXPathFreeObject(r);
    xmlXPathFreeContext(xp);
    xmlFreeDoc(doc);
    return out;
}

/* The guest CPU as migration_info gives it: {"mode", "model", "features"}
 * ("+f"/"-f"); host-model and host-passthrough guests get this host's CPU
 * model and features, which is what a destination must offer them. */
static json_t *guest_cpu_json(struct lv *lv, struct nb_ctx *ctx, const char *virt_type,
                              const struct lv_cpu *cpu)
{
    json_t *features = json_array();
    const char *mode = cpu->mode[0] ? cpu->mode : "none";
    char model[64];
    nb_strlcpy(model, cpu->model, sizeof(model));
    if (!strcmp(mode, "host-model") || !strcmp(mode, "host-passthrough")) {
        struct nb_host_info hi;
        if (lv_host_info(lv, ctx, &hi) == 0) {
            nb_strlcpy(model, hi.cpu_model, sizeof(model));
            size_t i;
            json_t *f;
            json_array_foreach (hi.cpu_features, i, f) {
                char *s = nb_strdup_printf("+%s", json_string_value(f));
                json_array_append_new(features, json_string(s));
                free(s);
            }
            json_decref(hi.cpu_features);
        } else {
            nb_ctx_clear_error(ctx);
        }
    }
    for (int i = 0; i < cpu->nfeatures; i++) {
        char *s =
            nb_strdup_printf("%c%s", cpu->features[i].disable ? '-' : '+', cpu->features[i].name);
        json_array_append_new(features, json_string(s));
        free(s);
    }
    return json_pack("{s:s, s:s?, s:o, s:s}", "mode", mode, "model", model[0] ? model : NULL,
                     "features", features, "virt_type", virt_type);
}

/* lv_conn failed on ctx: the error again, naming where peers would send
 * their migrations (the URI, its host and port). NULL. */
static json_t *hypervisor_down(struct lv *lv, struct nb_ctx *ctx, const char *uri)
{
    char why[1024], host[256] = "?", port[16] = "?";
    nb_strlcpy(why, nb_ctx_message(ctx), sizeof(why));
    lv_uri_host_port(uri, host, sizeof(host), port, sizeof(port));
    nb_ctx_clear_error(ctx);
    nb_error(ctx, 503, NULL,
             "Live migration URI %s (host %s, port %s) of host %s cannot take live migrations: "
             "its hypervisor does not answer: %s",
             uri, host, port, lv->host, why);
    return NULL;
}

json_t *lv_migration_info(struct lv *lv, struct nb_ctx *ctx)
{
    char uri[512], virt_type[16];
    if (lv_migration_uri(lv, ctx, uri, sizeof(uri)) < 0)
        return NULL;
    virConnectPtr conn = lv_conn(lv, ctx);
    if (!conn)
        return hypervisor_down(lv, ctx, uri);
    struct lv_cpu cpu;
    if (lv_current_virt(lv, ctx, virt_type, &cpu) < 0)
        return NULL;
    unsigned long ver = 0, lver = 0;
    if (virConnectGetVersion(conn, &ver) < 0 || virConnectGetLibVersion(conn, &lver) < 0) {
        lv_error(ctx, 503, "cannot read the hypervisor version of host %s", lv->host);
        return NULL;
    }
    _cleanup_free_ char *caps =
        virConnectGetDomainCapabilities(conn, NULL, "x86_64", "pc", virt_type, 0);
    if (!caps) {
        lv_error(ctx, 503, "cannot read the domain capabilities of host %s", lv->host);
        return NULL;
    }
    bool native = nb_conf_bool("libvirt", "live_migration_with_native_tls", false);
    bool tls = native || !strncmp(uri, "qemu+tls:", 9);
    const char *addr = inbound_addr(lv);
    /* the VXLAN underlay: the network agent's [vxlan] local_ip */
    const char *tun = nb_conf_str("vxlan", "local_ip", NULL);
    if (!tun || !*tun)
        tun = nb_conf_str("DEFAULT", "my_ip", NULL);
    if (!tun || !*tun)
        tun = addr;
    return json_pack("{s:s, s:I, s:I, s:s, s:s, s:i, s:o, s:o, s:s, s:s, s:b, s:b, s:o, "
                     "s:{s:s, s:i}}",
                     "hypervisor_type", "QEMU", "hypervisor_version", (json_int_t)ver,
                     "libvirt_version", (json_int_t)lver, "uri", uri, "addr", addr, "mtu",
                     addr_mtu(addr), "cpu_models", usable_models(caps), "guest_cpu",
                     guest_cpu_json(lv, ctx, virt_type, &cpu), "instances_path", lv->instances_path,
                     "virt_type", virt_type, "tls", tls, "native_tls", native, "tls_missing",
                     tls_missing(!strncmp(uri, "qemu+tls:", 9), native), "tunnel", "addr", tun,
                     "mtu", addr_mtu(tun));
}

/* ------------------------------------------------------------ check_cpu */

/* guest_cpu as a libvirt <cpu> element for the CPU comparison. */
static char *cpu_xml(const char *model, const json_t *features)
{
    struct nb_sbuf b = {0};
    nb_sbuf_str(&b, "<cpu mode='custom' match='exact'><model fallback='forbid'>");
    nb_sbuf_str(&b, model);
    nb_sbuf_str(&b, "</model>");
    size_t i;
    json_t *f;
    json_array_foreach (features, i, f) {
        const char *s = json_string_value(f);
        if (!s || !*s)
            continue;
        bool off = *s == '-';
        nb_sbuf_str(&b,
                    off ? "<feature policy='disable' name='" : "<feature policy='require' name='");
        nb_sbuf_str(&b, *s == '-' || *s == '+' ? s + 1 : s);
        nb_sbuf_str(&b, "'/>");
    }
    nb_sbuf_str(&b, "</cpu>");
    return b.s;
}

/* True when model (case-insensitively) is in the JSON array names. */
static bool in_list(const json_t *names, const char *model)
{
    size_t i;
    json_t *v;
    json_array_foreach (names, i, v)
        if (json_string_value(v) && !strcasecmp(json_string_value(v), model))
            return true;
    return false;
}

int lv_check_cpu(struct lv *lv, struct nb_ctx *ctx, const json_t *guest_cpu)
{
    const char *mode = nb_json_str(guest_cpu, "mode");
    const char *model = nb_json_str(guest_cpu, "model");
    if (!mode || !strcmp(mode, "none") || !model || !*model)
        return 0; /* QEMU's default model: every QEMU has it */
    virConnectPtr conn = lv_conn(lv, ctx);
    if (!conn)
        return -1;
    char virt_type[16];
    struct lv_cpu cpu;
    if (lv_current_virt(lv, ctx, virt_type, &cpu) < 0)
        return -1;
    const json_t *features = json_object_get(guest_cpu, "features");
    _cleanup_free_ char *xml = cpu_xml(model, features);
    if (!strcmp(virt_type, "qemu")) {
        /* TCG emulates what QEMU knows: the model must be one the domain
         * capabilities list as usable here (Nova skips the check) */
        _cleanup_free_ char *caps =
            virConnectGetDomainCapabilities(conn, NULL, "x86_64", "pc", virt_type, 0);
        _cleanup_json_ json_t *models = caps ? usable_models(caps) : NULL;
        if (!models)
            return lv_error(ctx, 503, "cannot read the domain capabilities of host %s", lv->host);
        if (!in_list(models, model))
            return nb_error(ctx, 409, NULL,
                            "The guest CPU model %s (cpu_mode %s) is not available on host %s "
                            "under virt_type qemu: its domain capabilities do not list %s as "
                            "a usable model",
                            model, mode, lv->host, model);
        if (json_array_size(features) == 0)
            return 0;
    }
    int r = virConnectCompareHypervisorCPU(conn, NULL, "x86_64", "pc", virt_type, xml,
                                           VIR_CONNECT_COMPARE_CPU_FAIL_INCOMPATIBLE);
    if (r == VIR_CPU_COMPARE_IDENTICAL || r == VIR_CPU_COMPARE_SUPERSET)
        return 0;
    return nb_error(ctx, 409, NULL,
                    "The guest CPU (cpu_mode %s, model %s) is incompatible with host %s under "
                    "virt_type %s: %s",
                    mode, model, lv->host, virt_type,
                    virGetLastErrorMessage() ? virGetLastErrorMessage() : "libvirt gave no reason");
}

/* -------------------------------------------------------- storage probe */

int lv_probe_create(struct lv *lv, struct nb_ctx *ctx, char name[64])
{
    char path[LV_PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/tmpXXXXXX", lv->instances_path);
    int fd = mkstemp(path);
    if (fd < 0)
        return nb_error(ctx, 500, NULL, "cannot create a test file in %s: %s", lv->instances_path,
                        strerror(errno));
    close(fd);
    nb_strlcpy(name, strrchr(path, '/') + 1, 64);
    NB_DEBUG(LV_LOG, ctx, NULL,
             "Creating tmpfile %s to notify to other compute nodes that they should mount the "
             "same storage.",
             path);
    return 0;
}

/* A probe name is a plain file name in the instances path. */
static int probe_path(struct lv *lv, struct nb_ctx *ctx, const char *name, char *out, size_t n)
{
    if (!name || !*name || strchr(name, '/') || name[0] == '.' || strlen(name) > 63)
        return nb_error(ctx, 400, NULL, "bad shared storage test file name '%s'", name ? name : "");
    snprintf(out, n, "%s/%s", lv->instances_path, name);
    return 0;
}

int lv_probe_exists(struct lv *lv, struct nb_ctx *ctx, const char *name, bool *exists)
{
    char path[LV_PATH_MAX + 80];
    if (probe_path(lv, ctx, name, path, sizeof(path)) < 0)
        return -1;
    utimensat(AT_FDCWD, lv->instances_path, NULL, 0); /* NFS clients refresh the directory */
    *exists = access(path, F_OK) == 0;
    NB_DEBUG(LV_LOG, ctx, NULL,
             "Check if temp file %s exists to indicate shared storage is being used for "
             "migration. Exists? %s",
             path, *exists ? "True" : "False");
    return 0;
}

int lv_probe_remove(struct lv *lv, struct nb_ctx *ctx, const char *name)
{
    char path[LV_PATH_MAX + 80];
    if (probe_path(lv, ctx, name, path, sizeof(path)) < 0)
        return -1;
    if (unlink(path) < 0 && errno != ENOENT)
        return nb_error(ctx, 500, NULL, "cannot remove %s: %s", path, strerror(errno));
    return 0;
}

/* ----------------------------------------------- check_migration_target */

int lv_uri_host_port(const char *uri, char *host, size_t hn, char *port, size_t pn)
{
    const char *sep = uri ? strstr(uri, "://") : NULL;
    if (!sep || sep[3] == '/' || sep[3] == '\0')
        return -1;
    const char *plus = memchr(uri, '+', (size_t)(sep - uri));
    char transport[16] = "tls"; /* libvirt's default for a remote host */
    if (plus)
        snprintf(transport, sizeof(transport), "%.*s", (int)(sep - plus - 1), plus + 1);
    const char *h = sep + 3, *e;
    const char *at = strchr(h, '@'), *slash = h + strcspn(h, "/?");
    if (at && at < slash)
        h = at + 1; /* user@host */
    if (*h == '[') {
        e = strchr(h, ']');
        if (!e)
            return -1;
        snprintf(host, hn, "%.*s", (int)(e - h - 1), h + 1);
        e++;
    } else {
        e = h + strcspn(h, ":/?");
        snprintf(host, hn, "%.*s", (int)(e - h), h);
    }
    if (*e == ':')
        snprintf(port, pn, "%.*s", (int)strcspn(e + 1, "/?"), e + 1);
    else
        snprintf(port, pn, "%s",
                 !strcmp(transport, "tcp")   ? "16509"
                 : !strcmp(transport, "ssh") ? "22"
                 : !strcmp(transport, "tls") ? "16514"
                                             : "");
    return *host && *port ? 0 : -1;
}

/* A TCP connection to host:port within timeout_ms: 0, or -1 with the
 * reason in why. */
static int tcp_probe(const char *host, const char *port, int timeout_ms, char *why, size_t wn)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    int g = getaddrinfo(host, port, &hints, &res);
    if (g != 0) {
        snprintf(why, wn, "%s", gai_strerror(g));
        return -1;
    }
    int rc = -1;
    snprintf(why, wn, "no address");
    for (struct addrinfo *a = res; a && rc < 0; a = a->ai_next) {
        int s = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (s < 0)
            continue;
        int c = connect(s, a->ai_addr, a->ai_addrlen);
        if (c < 0 && errno == EINPROGRESS) {
            struct pollfd p = {.fd = s, .events = POLLOUT};
            int n = poll(&p, 1, timeout_ms);
            int err = 0;
            socklen_t len = sizeof(err);
            if (n == 0)
                err = ETIMEDOUT;
            else if (n < 0 || getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
                err = errno;
            c = err ? -1 : 0;
            errno = err;
        }
        if (c == 0)
            rc = 0;
        else
            snprintf(why, wn, "%s", errno == ETIMEDOUT ? "Connection timed out" : strerror(errno));
        close(s);
    }
    freeaddrinfo(res);
    return rc;
}

/* The host UUID in a capabilities XML into out (empty when absent). */
static void caps_uuid(const char *caps, char out[64])
{
    out[0] = '\0';
    const char *a = caps ? strstr(caps, "<uuid>") : NULL;
    const char *b = a ? strstr(a, "</uuid>") : NULL;
    if (a && b && b - a - 6 < 64)
        snprintf(out, 64, "%.*s", (int)(b - a - 6), a + 6);
}

int lv_check_migration_target(struct lv *lv, struct nb_ctx *ctx, const char *dest_uri,
                              int timeout_ms)
{
    char host[256] = "", port[16] = "", why[256];
    if (!dest_uri || !*dest_uri)
        return nb_error(ctx, 400, NULL, "the destination has no migration URI");
    double t0 = nb_time_mono();
    if (lv_uri_host_port(dest_uri, host, sizeof(host), port, sizeof(port)) == 0 &&
        tcp_probe(host, port, timeout_ms, why, sizeof(why)) < 0)
        return nb_error(ctx, 409, NULL,
                        "Live migration URI %s is unreachable from host %s: cannot connect to "
                        "host %s port %s: %s (after %.1f s, timeout %.1f s; is libvirtd on the "
                        "destination running and listening, libvirtd --listen with listen_tcp "
                        "or listen_tls?)",
                        dest_uri, lv->host, host, port, why, nb_time_mono() - t0,
                        timeout_ms / 1000.0);
    virConnectPtr dst = virConnectOpen(dest_uri);
    if (!dst)
        return lv_error(ctx, 409, "Live migration URI %s (host %s, port %s) refused host %s",
                        dest_uri, host, port, lv->host);
    _cleanup_free_ char *dcaps = virConnectGetCapabilities(dst);
    virConnectClose(dst);
    virConnectPtr conn = lv_conn(lv, ctx);
    if (!conn)
        return -1;
    _cleanup_free_ char *scaps = virConnectGetCapabilities(conn);
    char su[64], du[64];
    caps_uuid(scaps, su);
    caps_uuid(dcaps, du);
    if (*su && !strcmp(su, du))
        return nb_error(ctx, 409, NULL,
                        "Live migration URI %s leads to a hypervisor with the same host UUID "
                        "as host %s (%s): libvirt refuses it (\"Attempt to migrate guest to the "
                        "same host\"); give each host its own host_uuid in libvirtd.conf",
                        dest_uri, lv->host, su);
    NB_DEBUG(LV_LOG, ctx, NULL, "Live migration URI %s reached from host %s in %.3f s", dest_uri,
             lv->host, nb_time_mono() - t0);
    return 0;
}
