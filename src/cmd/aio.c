/* aio.c - `nubo aio`: generates DIR/nubo.conf and DIR/clouds.yaml for an
 * all-in-one cloud, then runs every role in the foreground. */
#include "cmd/cmd.h"
#include "common/config.h"
#include "common/util.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
        {NULL, 0, NULL, 0},
    };
    const char *dir = "/var/lib/nubo", *port = "8774", *driver = "fake", *listen = "127.0.0.1";
    const char *admin_pw = getenv("NUBO_ADMIN_PASSWORD");
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
    if (nb_mkdir_p(dir) < 0 || !realpath(dir, abs_dir)) {
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
    for (int i = 0; i < nsets; i++) {
        if (nb_conf_set_arg(sets[i]) < 0) {
            fprintf(stderr, "nubo aio: --set wants SECTION.KEY=VALUE, not '%s'\n", sets[i]);
            return 2;
        }
    }
    snprintf(buf, sizeof(buf), "%s/nubo.conf", abs_dir);
    if (nb_conf_write(buf) < 0) {
        perror("nubo aio: writing nubo.conf");
        return 1;
    }
    char url[300];
    const char *pub = nb_conf_str("api", "public_url", NULL);
    if (pub)
        nb_strlcpy(url, pub, sizeof(url));
    else
        snprintf(url, sizeof(url), "http://%s:%s", listen, nb_conf_str("api", "port", port));
    if (write_clouds_yaml(abs_dir, url, admin_pw, demo_pw) < 0) {
        perror("nubo aio: writing clouds.yaml");
        return 1;
    }
    printf("nubo: config %s, clouds.yaml %s/clouds.yaml (clouds: nubo, nubo-demo)\n", buf, abs_dir);
    fflush(stdout);
    return nb_run_roles(true, admin_pw, demo_pw);
}
