/* aio.c - `nubo aio`: generates DIR/nubo.conf and DIR/clouds.yaml for an
 * all-in-one cloud, then runs every role in the foreground.
 *
 * DIR is created 0755 (QEMU, which the libvirt driver runs as another user,
 * opens instance disks under it); what holds secrets is 0600: nubo.conf,
 * clouds.yaml and the database, which is created here before SQLite would
 * create it with the umask's mode. --demo-image FILE ([aio] demo_image,
 * NUBO_DEMO_IMAGE) gives the seeded `cirros` image real data (seed.c).
 *
 * nubo.conf also gets a [service_user] (user nova, admin on project
 * service, a generated password; bootstrap creates it) with nova.conf's
 * keystoneauth option names: what a `nubo compute` process started with
 * this configuration authenticates as to placement and the image service. */
#include "cmd/cmd.h"
#include "common/config.h"
#include "common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int write_clouds_yaml(const char *dir, const char *url, const char *admin_pw,
                             const char *demo_pw)
{
    char path[1100];
    snprintf(path, sizeof(path), "%s/clouds.yaml", dir);
    char *text = nb_strdup_printf("clouds:\n"
                                  "  nubo:\n"
                                  "    auth:\n"
                                  "      auth_url: %s/identity/v3\n"
                                  "      username: admin\n"
                                  "      password: \"%s\"\n"
                                  "      project_name: admin\n"
                                  "      user_domain_id: default\n"
                                  "      project_domain_id: default\n"
                                  "    region_name: RegionOne\n"
                                  "    identity_api_version: 3\n"
                                  "    interface: public\n"
                                  "  nubo-demo:\n"
                                  "    auth:\n"
                                  "      auth_url: %s/identity/v3\n"
                                  "      username: demo\n"
                                  "      password: \"%s\"\n"
                                  "      project_name: demo\n"
                                  "      user_domain_id: default\n"
                                  "      project_domain_id: default\n"
                                  "    region_name: RegionOne\n"
                                  "    identity_api_version: 3\n"
                                  "    interface: public\n",
                                  url, admin_pw, url, demo_pw);
    int rc = nb_write_file(path, text, strlen(text), 0600);
    free(text);
    return rc;
}

/* mkdir -p dir, every directory it creates 0755 whatever the umask. 0/-1. */
static int make_state_dir(const char *dir)
{
    char buf[PATH_MAX];
    if (strlen(dir) >= sizeof(buf)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    strcpy(buf, dir);
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p)
            continue;
        char c = *p;
        *p = '\0';
        if (mkdir(buf, 0755) == 0) {
            if (chmod(buf, 0755) < 0)
                return -1;
        } else if (errno != EEXIST) {
            return -1;
        }
        if (!c)
            return 0;
        *p = c;
    }
}

/* Warns about each directory from dir up to / that other users cannot
 * traverse: QEMU (user libvirt-qemu) could not open the disks below it. */
static void check_traversable(const char *dir)
{
    char buf[PATH_MAX];
    nb_strlcpy(buf, dir, sizeof(buf));
    for (;;) {
        const char *d = buf[0] ? buf : "/";
        struct stat sb;
        if (stat(d, &sb) == 0 && !(sb.st_mode & S_IXOTH))
            fprintf(stderr,
                    "nubo aio: warning: %s (mode %04o) cannot be traversed by other users; "
                    "QEMU, running as libvirt-qemu, will not open the disks under %s\n",
                    d, (unsigned)(sb.st_mode & 07777), dir);
        char *slash = strrchr(buf, '/');
        if (!buf[0] || !slash)
            return;
        *slash = '\0';
    }
}

/* Creates the SQLite file of [database] connection 0600 unless it exists. */
static int precreate_db(void)
{
    const char *conn = nb_conf_str("database", "connection", NULL);
    if (!conn || !nb_startswith(conn, "sqlite:///"))
        return 0;
    int fd = open(conn + strlen("sqlite://"), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return errno == EEXIST ? 0 : -1;
    return close(fd);
}

/* Sets [aio] demo_image to the absolute path of its file, which must be
 * readable. 0, or -1 after a message. */
static int resolve_demo_image(void)
{
    const char *demo = nb_conf_str("aio", "demo_image", NULL);
    if (!demo || !*demo)
        return 0;
    char abs[PATH_MAX];
    if (!realpath(demo, abs) || access(abs, R_OK) < 0) {
        fprintf(stderr, "nubo aio: demo image %s: %s\n", demo, strerror(errno));
        return -1;
    }
    nb_conf_set("aio", "demo_image", abs);
    return 0;
}

int nb_cmd_aio(int argc, char **argv)
{
    static const struct option opts[] = {
        {"state-dir", required_argument, NULL, 'd'},
        {"port", required_argument, NULL, 'p'},
        {"driver", required_argument, NULL, 'D'},
        {"fake-hosts", required_argument, NULL, 'n'},
        {"set", required_argument, NULL, 's'},
        {"admin-password", required_argument, NULL, 'a'},
        {"listen", required_argument, NULL, 'l'},
        {"demo-image", required_argument, NULL, 'i'},
        {NULL, 0, NULL, 0},
    };
    const char *dir = "/var/lib/nubo", *port = "8774", *driver = "fake", *listen = "127.0.0.1";
    const char *admin_pw = getenv("NUBO_ADMIN_PASSWORD");
    const char *demo_image = NULL;
    long fake_hosts = 3;
    char *sets[64];
    int nsets = 0;
    optind = 0;
    int c;
    /* getopt wants argv[0] to be the program; our argv starts at options. */
    char **av = calloc((size_t)argc + 2, sizeof(char *));
    av[0] = "nubo aio";
    for (int i = 0; i < argc; i++)
        av[i + 1] = argv[i];
    while ((c = getopt_long(argc + 1, av, "", opts, NULL)) != -1) {
        switch (c) {
        case 'd': dir = optarg; break;
        case 'p': port = optarg; break;
        case 'D': driver = optarg; break;
        case 'n': fake_hosts = strtol(optarg, NULL, 10); break;
        case 'a': admin_pw = optarg; break;
        case 'l': listen = optarg; break;
        case 'i': demo_image = optarg; break;
        case 's':
            if (nsets < 64)
                sets[nsets++] = optarg;
            break;
        default: free(av); return 2;
        }
    }
    free(av);
    if (strcmp(driver, "fake") && strcmp(driver, "libvirt")) {
        fprintf(stderr, "nubo aio: --driver must be fake or libvirt, not '%s'\n", driver);
        return 2;
    }
    if (fake_hosts < 1 || fake_hosts > 10000) {
        fprintf(stderr, "nubo aio: --fake-hosts must be between 1 and 10000\n");
        return 2;
    }
    char abs_dir[1024];
    if (make_state_dir(dir) < 0 || !realpath(dir, abs_dir)) {
        perror("nubo aio: state dir");
        return 1;
    }
    char generated[33];
    if (!admin_pw || !*admin_pw) {
        nb_random_hex(generated, 16);
        admin_pw = generated;
        printf("nubo: generated admin password: %s\n", admin_pw);
    }
    char demo_pw[33];
    nb_random_hex(demo_pw, 16);

    char buf[2048];
    nb_conf_set("DEFAULT", "state_path", abs_dir);
    snprintf(buf, sizeof(buf), "%s/log", abs_dir);
    nb_conf_set("DEFAULT", "log_dir", buf);
    nb_conf_set("DEFAULT", "region_name", "RegionOne");
    snprintf(buf, sizeof(buf), "sqlite:///%s/nubo.sqlite", abs_dir);
    nb_conf_set("database", "connection", buf);
    nb_conf_set("api", "listen", listen);
    nb_conf_set("api", "port", port);
    nb_conf_set("compute", "driver", driver);
    char *hosts = calloc((size_t)fake_hosts, 16);
    for (long i = 1; i <= fake_hosts; i++)
        sprintf(hosts + strlen(hosts), "%sfake-%ld", i > 1 ? "," : "", i);
    nb_conf_set("fake", "hosts", hosts);
    free(hosts);
    /* the metadata API next to the API, and the secret its proxy signs with */
    char secret[65];
    nb_random_hex(secret, 32);
    nb_conf_set("neutron", "metadata_proxy_shared_secret", secret);
    nb_conf_set("metadata", "listen", listen);
    snprintf(buf, sizeof(buf), "%ld", strtol(port, NULL, 10) + 1);
    nb_conf_set("metadata", "port", buf);
    char service_pw[33];
    nb_random_hex(service_pw, 16);
    nb_conf_set("service_user", "auth_type", "password");
    nb_conf_set("service_user", "username", "nova");
    nb_conf_set("service_user", "password", service_pw);
    nb_conf_set("service_user", "project_name", "service");
    nb_conf_set("service_user", "user_domain_name", "Default");
    nb_conf_set("service_user", "project_domain_name", "Default");
    const char *demo_env = getenv("NUBO_DEMO_IMAGE");
    if (demo_env && *demo_env)
        nb_conf_set("aio", "demo_image", demo_env);
    for (int i = 0; i < nsets; i++) {
        if (nb_conf_set_arg(sets[i]) < 0) {
            fprintf(stderr, "nubo aio: --set wants SECTION.KEY=VALUE, not '%s'\n", sets[i]);
            return 2;
        }
    }
    if (demo_image)
        nb_conf_set("aio", "demo_image", demo_image);
    if (resolve_demo_image() < 0)
        return 2;
    if (!strcmp(nb_conf_str("compute", "driver", driver), "libvirt"))
        check_traversable(abs_dir);
    char url[300];
    const char *pub = nb_conf_str("api", "public_url", NULL);
    if (pub)
        nb_strlcpy(url, pub, sizeof(url));
    else
        snprintf(url, sizeof(url), "http://%s:%s", listen, nb_conf_str("api", "port", port));
    if (!nb_conf_str("service_user", "auth_url", NULL)) {
        snprintf(buf, sizeof(buf), "%s/identity/v3", url);
        nb_conf_set("service_user", "auth_url", buf);
    }
    snprintf(buf, sizeof(buf), "%s/nubo.conf", abs_dir);
    if (nb_conf_write(buf) < 0) {
        perror("nubo aio: writing nubo.conf");
        return 1;
    }
    if (write_clouds_yaml(abs_dir, url, admin_pw, demo_pw) < 0) {
        perror("nubo aio: writing clouds.yaml");
        return 1;
    }
    if (precreate_db() < 0) {
        perror("nubo aio: creating the database");
        return 1;
    }
    printf("nubo: config %s, clouds.yaml %s/clouds.yaml (clouds: nubo, nubo-demo)\n", buf, abs_dir);
    fflush(stdout);
    return nb_run_roles(true, admin_pw, demo_pw);
}
