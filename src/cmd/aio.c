/* aio.c - `nubo aio`: an all-in-one cloud in a state directory DIR, every
 * role in the foreground.
 *
 * The first start makes the cloud: DIR/nubo.conf (options, generated
 * secrets: the service user's password, the metadata proxy secret), the
 * identities (admin with the given or a generated password, demo with a
 * generated one), the seeds (flavors, network, demo image), then
 * DIR/clouds.yaml once those exist. A DIR that holds nubo.conf and
 * clouds.yaml is a cloud, and a later start runs it as it is: nothing is
 * regenerated or reseeded (an operator's deleted flavor stays deleted), the
 * passwords in clouds.yaml stay valid. Options given on the command line
 * (--port, --listen, --driver, --fake-hosts, --demo-image, --set) are
 * applied on top and recorded in nubo.conf in place, so the next start
 * keeps them; options not given keep their recorded values. An admin
 * password given again must be the one in clouds.yaml, else the start is
 * refused, unless --reset-admin-password asks to set it (the identity
 * bootstrap runs again, as keystone-manage bootstrap, and clouds.yaml is
 * rewritten). A demo image given again is imported if `cirros` has no data
 * (or was deleted).
 *
 * DIR is created 0755 (QEMU, which the libvirt driver runs as another user,
 * opens instance disks under it); what holds secrets is 0600: nubo.conf,
 * clouds.yaml and the database, which is created here before SQLite would
 * create it with the umask's mode.
 *
 * nubo.conf's [service_user] (user nova, admin on project service) uses
 * nova.conf's keystoneauth option names: what a `nubo compute` process
 * started with this configuration authenticates as to placement and the
 * image service. */
#include "cmd/aio.h"
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

/* The absolute path of the demo image file demo, which must be readable,
 * into abs[PATH_MAX]. 0, or -1 after a message. */
static int resolve_demo_image(const char *demo, char *abs)
{
    if (!realpath(demo, abs) || access(abs, R_OK) < 0) {
        fprintf(stderr, "nubo aio: demo image %s: %s\n", demo, strerror(errno));
        return -1;
    }
    return 0;
}

/* The command line. NULL/0: not given. */
struct aio_args {
    const char *dir, *port, *driver, *listen, *demo_image, *fake_hosts;
    const char *sets[64];
    int nsets;
    char *admin_pw;      /* owned */
    const char *pw_from; /* where admin_pw came from, for messages */
    bool reset_admin;
};

/* What this start changed in the configuration (owned copies), recorded
 * in nubo.conf in place when the cloud already exists. */
struct changes {
    struct nb_aio_opt v[96];
    size_t n;
};

/* Sets section.key to value unless it already has that value; remembers
 * the change. */
static void put(struct changes *ch, const char *section, const char *key, const char *value)
{
    const char *cur = nb_conf_str(section, key, NULL);
    if (cur && !strcmp(cur, value))
        return;
    nb_conf_set(section, key, value);
    if (ch->n == sizeof(ch->v) / sizeof(ch->v[0]))
        return;
    for (size_t i = 0; i < ch->n; i++)
        if (!strcasecmp(ch->v[i].section, section) && !strcmp(ch->v[i].key, key)) {
            free((char *)ch->v[i].value);
            ch->v[i].value = strdup(value);
            return;
        }
    ch->v[ch->n++] = (struct nb_aio_opt){strdup(section), strdup(key), strdup(value)};
}

static void changes_free(struct changes *ch)
{
    for (size_t i = 0; i < ch->n; i++) {
        free((char *)ch->v[i].section);
        free((char *)ch->v[i].key);
        free((char *)ch->v[i].value);
    }
    ch->n = 0;
}

static void usage(FILE *f)
{
    fputs("usage: nubo aio [--state-dir DIR] [--port PORT] [--listen ADDR]\n"
          "                [--driver fake|libvirt] [--fake-hosts N] [--demo-image FILE]\n"
          "                [--set SECTION.KEY=VALUE ...] [--admin-password-file FILE]\n"
          "                [--reset-admin-password]\n"
          "An all-in-one cloud in DIR (default /var/lib/nubo), every role in this process.\n"
          "The first start creates DIR/nubo.conf, the identities, flavors, network and the\n"
          "image `cirros`, then DIR/clouds.yaml (clouds nubo = admin, nubo-demo = demo).\n"
          "A later start runs that cloud as it is (config, secrets, passwords, database);\n"
          "the options given are applied and recorded in DIR/nubo.conf.\n"
          "  --port PORT, --listen ADDR  the API (default 8774 on 127.0.0.1; metadata PORT+1)\n"
          "  --driver fake|libvirt       virt driver (default fake); --fake-hosts N (3)\n"
          "  --demo-image FILE           data of the image `cirros` (also NUBO_DEMO_IMAGE);\n"
          "                              required for a bootable `cirros` with libvirt\n"
          "  --set SECTION.KEY=VALUE     any nubo.conf option, recorded for later starts\n"
          "Admin password (first start; later, it must match clouds.yaml): from the\n"
          "environment NUBO_ADMIN_PASSWORD or --admin-password-file FILE (first line);\n"
          "else generated and printed. --admin-password P works too, but every user of\n"
          "the machine sees it in `ps`: prefer the environment or the file.\n"
          "  --reset-admin-password      set the admin password of an existing cloud to\n"
          "                              the given (or a generated) one; clouds.yaml follows\n",
          f);
}

/* The first line of path (the password file), or NULL after a message. */
static char *read_password_file(const char *path)
{
    char *text = nb_read_file(path, NULL);
    if (!text) {
        fprintf(stderr, "nubo aio: --admin-password-file %s: %s\n", path, strerror(errno));
        return NULL;
    }
    text[strcspn(text, "\r\n")] = '\0';
    return text;
}

/* Takes the password out of argv, so that `ps` shows it only until here. */
static char *take_argv_password(char *arg)
{
    char *pw = strdup(arg);
    memset(arg, 'x', strlen(arg));
    fprintf(stderr, "nubo aio: note: --admin-password is visible to other users in `ps`; "
                    "prefer NUBO_ADMIN_PASSWORD or --admin-password-file FILE\n");
    return pw;
}

/* Parses argv into a. 0, 1 after --help, or 2 after a usage message. */
static int parse_args(int argc, char **argv, struct aio_args *a)
{
    static const struct option opts[] = {
        {"state-dir", required_argument, NULL, 'd'},
        {"port", required_argument, NULL, 'p'},
        {"driver", required_argument, NULL, 'D'},
        {"fake-hosts", required_argument, NULL, 'n'},
        {"set", required_argument, NULL, 's'},
        {"admin-password", required_argument, NULL, 'a'},
        {"admin-password-file", required_argument, NULL, 'f'},
        {"reset-admin-password", no_argument, NULL, 'r'},
        {"listen", required_argument, NULL, 'l'},
        {"demo-image", required_argument, NULL, 'i'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    a->dir = "/var/lib/nubo";
    optind = 0;
    /* getopt wants argv[0] to be the program; our argv starts at options. */
    char **av = calloc((size_t)argc + 2, sizeof(char *));
    av[0] = "nubo aio";
    for (int i = 0; i < argc; i++)
        av[i + 1] = argv[i];
    int c, rc = 0;
    while (rc == 0 && (c = getopt_long(argc + 1, av, "", opts, NULL)) != -1) {
        switch (c) {
        case 'd': a->dir = optarg; break;
        case 'p': a->port = optarg; break;
        case 'D': a->driver = optarg; break;
        case 'n': a->fake_hosts = optarg; break;
        case 'l': a->listen = optarg; break;
        case 'i': a->demo_image = optarg; break;
        case 'r': a->reset_admin = true; break;
        case 'a':
            free(a->admin_pw);
            a->admin_pw = take_argv_password(optarg);
            a->pw_from = "--admin-password";
            break;
        case 'f':
            free(a->admin_pw);
            if (!(a->admin_pw = read_password_file(optarg)))
                rc = 2;
            a->pw_from = "--admin-password-file";
            break;
        case 's':
            if (a->nsets < 64)
                a->sets[a->nsets++] = optarg;
            break;
        case 'h':
            usage(stdout);
            rc = 1;
            break;
        default:
            usage(stderr);
            rc = 2;
            break;
        }
    }
    free(av);
    const char *env_pw = getenv("NUBO_ADMIN_PASSWORD");
    if (!a->admin_pw && env_pw && *env_pw) {
        a->admin_pw = strdup(env_pw);
        a->pw_from = "NUBO_ADMIN_PASSWORD";
    }
    if (a->admin_pw && !*a->admin_pw) {
        free(a->admin_pw);
        a->admin_pw = NULL;
    }
    const char *env_demo = getenv("NUBO_DEMO_IMAGE");
    if (!a->demo_image && env_demo && *env_demo)
        a->demo_image = env_demo;
    return rc;
}

/* Checks the values given. 0, or 2 after a message. */
static int check_args(const struct aio_args *a)
{
    if (a->driver && strcmp(a->driver, "fake") && strcmp(a->driver, "libvirt")) {
        fprintf(stderr, "nubo aio: --driver must be fake or libvirt, not '%s'\n", a->driver);
        return 2;
    }
    char *end;
    long n = a->fake_hosts ? strtol(a->fake_hosts, &end, 10) : 1;
    if (a->fake_hosts && (*end || n < 1 || n > 10000)) {
        fprintf(stderr, "nubo aio: --fake-hosts must be between 1 and 10000\n");
        return 2;
    }
    n = a->port ? strtol(a->port, &end, 10) : 1;
    if (a->port && (*end || n < 1 || n > 65534)) {
        fprintf(stderr, "nubo aio: --port must be a port number below 65535, not '%s'\n", a->port);
        return 2;
    }
    for (int i = 0; i < a->nsets; i++) {
        const char *dot = strchr(a->sets[i], '.'), *eq = strchr(a->sets[i], '=');
        if (!dot || !eq || dot > eq || dot == a->sets[i] || eq == dot + 1) {
            fprintf(stderr, "nubo aio: --set wants SECTION.KEY=VALUE, not '%s'\n", a->sets[i]);
            return 2;
        }
    }
    return 0;
}

/* The URL clients use: [api] public_url, else http://listen:port. */
static void api_url(char *buf, size_t n)
{
    const char *pub = nb_conf_str("api", "public_url", NULL);
    if (pub)
        nb_strlcpy(buf, pub, n);
    else
        snprintf(buf, n, "http://%s:%s", nb_conf_str("api", "listen", "127.0.0.1"),
                 nb_conf_str("api", "port", "8774"));
}

/* The configuration of a new cloud in abs_dir: paths, endpoints defaults
 * and generated secrets (the command line comes on top). */
static void new_cloud_config(struct changes *ch, const char *abs_dir)
{
    char buf[PATH_MAX + 32];
    put(ch, "DEFAULT", "state_path", abs_dir);
    snprintf(buf, sizeof(buf), "%s/log", abs_dir);
    put(ch, "DEFAULT", "log_dir", buf);
    put(ch, "DEFAULT", "region_name", "RegionOne");
    snprintf(buf, sizeof(buf), "sqlite:///%s/nubo.sqlite", abs_dir);
    put(ch, "database", "connection", buf);
    put(ch, "api", "listen", "127.0.0.1");
    put(ch, "api", "port", "8774");
    put(ch, "compute", "driver", "fake");
    put(ch, "fake", "hosts", "fake-1,fake-2,fake-3");
    /* the metadata API next to the API, and the secret its proxy signs with */
    char secret[65];
    nb_random_hex(secret, 32);
    put(ch, "neutron", "metadata_proxy_shared_secret", secret);
    put(ch, "metadata", "listen", "127.0.0.1");
    put(ch, "metadata", "port", "8775");
    char service_pw[33];
    nb_random_hex(service_pw, 16);
    put(ch, "service_user", "auth_type", "password");
    put(ch, "service_user", "username", "nova");
    put(ch, "service_user", "password", service_pw);
    put(ch, "service_user", "project_name", "service");
    put(ch, "service_user", "user_domain_name", "Default");
    put(ch, "service_user", "project_domain_name", "Default");
}

/* True if a --set option names section.key. */
static bool set_given(const struct aio_args *a, const char *section, const char *key)
{
    for (int i = 0; i < a->nsets; i++) {
        const char *s = a->sets[i], *dot = strchr(s, '.'), *eq = strchr(s, '=');
        if ((size_t)(dot - s) == strlen(section) && !strncasecmp(s, section, dot - s) &&
            (size_t)(eq - dot - 1) == strlen(key) && !strncmp(dot + 1, key, eq - dot - 1))
            return true;
    }
    return false;
}

/* True if this start names a demo image (--demo-image, NUBO_DEMO_IMAGE,
 * --set aio.demo_image). */
static bool demo_given(const struct aio_args *a)
{
    return a->demo_image || set_given(a, "aio", "demo_image");
}

/* Applies the options given on the command line, and what follows from
 * them: the metadata API stays next to the API, the service user's
 * auth_url follows the API URL (unless they were set otherwise). 0, or 2
 * after a message. */
static int apply_args(struct changes *ch, const struct aio_args *a)
{
    char old_url[300], old_meta[32], url[300], buf[2048];
    api_url(old_url, sizeof(old_url));
    snprintf(old_meta, sizeof(old_meta), "%ld", nb_conf_int("api", "port", 8774) + 1);
    bool meta_next =
        !strcmp(nb_conf_str("metadata", "port", ""), old_meta) &&
        !strcmp(nb_conf_str("metadata", "listen", ""), nb_conf_str("api", "listen", "127.0.0.1"));
    snprintf(buf, sizeof(buf), "%s/identity/v3", old_url);
    const char *auth = nb_conf_str("service_user", "auth_url", NULL);
    bool auth_follows = !auth || !strcmp(auth, buf);
    if (a->port)
        put(ch, "api", "port", a->port);
    if (a->listen)
        put(ch, "api", "listen", a->listen);
    if (a->driver)
        put(ch, "compute", "driver", a->driver);
    if (a->fake_hosts) {
        long n = strtol(a->fake_hosts, NULL, 10);
        char *hosts = calloc((size_t)n, 16);
        for (long i = 1; i <= n; i++)
            sprintf(hosts + strlen(hosts), "%sfake-%ld", i > 1 ? "," : "", i);
        put(ch, "fake", "hosts", hosts);
        free(hosts);
    }
    for (int i = 0; i < a->nsets; i++) {
        const char *s = a->sets[i], *dot = strchr(s, '.'), *eq = strchr(s, '=');
        char section[128], key[128];
        snprintf(section, sizeof(section), "%.*s", (int)(dot - s), s);
        snprintf(key, sizeof(key), "%.*s", (int)(eq - dot - 1), dot + 1);
        put(ch, section, key, eq + 1);
    }
    const char *demo = a->demo_image ? a->demo_image : nb_conf_str("aio", "demo_image", "");
    char abs[PATH_MAX];
    if (demo_given(a) && *demo) {
        if (resolve_demo_image(demo, abs) < 0)
            return 2;
        put(ch, "aio", "demo_image", abs);
    }
    if (meta_next && !set_given(a, "metadata", "port") && !set_given(a, "metadata", "listen")) {
        put(ch, "metadata", "listen", nb_conf_str("api", "listen", "127.0.0.1"));
        snprintf(buf, sizeof(buf), "%ld", nb_conf_int("api", "port", 8774) + 1);
        put(ch, "metadata", "port", buf);
    }
    api_url(url, sizeof(url));
    if (auth_follows && !set_given(a, "service_user", "auth_url")) {
        snprintf(buf, sizeof(buf), "%s/identity/v3", url);
        put(ch, "service_user", "auth_url", buf);
    }
    return 0;
}

/* One start of the all-in-one, for after_bootstrap. */
struct aio_start {
    char dir[PATH_MAX];
    char conf[PATH_MAX + 16];
    bool existing; /* DIR/nubo.conf was there */
    struct changes ch;
    bool write_clouds;
    char url[300];
    const char *admin_pw, *demo_pw;
    char generated_demo_pw[33];
    char note[1024];
};

/* After the identities exist: nubo.conf (whole for a new cloud, the
 * changes in place for an existing one), then clouds.yaml if it is new or
 * its URL or admin password changed. 0/-1 after a message. */
static int after_bootstrap(void *arg)
{
    struct aio_start *st = arg;
    int rc = st->existing ? (st->ch.n ? nb_aio_conf_update(st->conf, st->ch.v, st->ch.n) : 0)
                          : nb_conf_write(st->conf);
    if (rc < 0) {
        fprintf(stderr, "nubo aio: writing %s: %s\n", st->conf, strerror(errno));
        return -1;
    }
    if (st->write_clouds && nb_aio_clouds_write(st->dir, st->url, st->admin_pw, st->demo_pw) < 0) {
        fprintf(stderr, "nubo aio: writing %s/clouds.yaml: %s\n", st->dir, strerror(errno));
        return -1;
    }
    return 0;
}

/* Loads the existing DIR/nubo.conf, which must belong to DIR. 0, or 2
 * after a message. */
static int load_existing(const struct aio_start *st)
{
    if (nb_conf_load(st->conf) < 0)
        return 2;
    const char *sp = nb_conf_str("DEFAULT", "state_path", st->dir);
    char abs[PATH_MAX];
    if (!realpath(sp, abs) || strcmp(abs, st->dir)) {
        fprintf(stderr,
                "nubo aio: %s belongs to the cloud at %s ([DEFAULT] state_path), not %s; start "
                "it there, or correct state_path and the paths under it\n",
                st->conf, sp, st->dir);
        return 2;
    }
    return 0;
}

/* The keys of st->ch, comma-separated, into st->note after prefix (values
 * are left out: they may be secrets). */
static void note_changes(struct aio_start *st, const char *prefix)
{
    size_t n = (size_t)snprintf(st->note, sizeof(st->note), "%s", prefix);
    for (size_t i = 0; i < st->ch.n && n < sizeof(st->note); i++)
        n += (size_t)snprintf(st->note + n, sizeof(st->note) - n, "%s%s.%s", i ? ", " : "",
                              st->ch.v[i].section, st->ch.v[i].key);
}

/* Decides the passwords and what to bootstrap for an existing or a new
 * cloud (o and st). clouds holds clouds.yaml's content when have > 0.
 * 0, or the exit status after a message. */
static int plan_identities(struct aio_start *st, struct aio_args *a, struct nb_aio_clouds *clouds,
                           int have, struct nb_run_opts *o, char generated[33])
{
    char want[320];
    snprintf(want, sizeof(want), "%s/identity/v3", st->url);
    if (have > 0) {
        if (a->admin_pw && strcmp(a->admin_pw, clouds->admin_pw) && !a->reset_admin) {
            fprintf(stderr,
                    "nubo aio: %s already holds a cloud, and the admin password given (%s) is "
                    "not the one in its clouds.yaml. Start it without one to keep the current "
                    "password, or add --reset-admin-password to set this one (clouds.yaml is "
                    "rewritten).\n",
                    st->dir, a->pw_from);
            return 2;
        }
        st->demo_pw = clouds->demo_pw;
        st->admin_pw = clouds->admin_pw;
        st->write_clouds = strcmp(clouds->auth_url, want) != 0;
        if (a->reset_admin) {
            if (!a->admin_pw) {
                nb_random_hex(generated, 16);
                printf("nubo: generated admin password: %s\n", generated);
            }
            st->admin_pw = a->admin_pw ? a->admin_pw : generated;
            o->reset_identity = st->write_clouds = true;
            printf("nubo: resetting the admin password (identity bootstrap again)\n");
        }
        o->seed_demo_image = demo_given(a);
    } else {
        if (!a->admin_pw) {
            nb_random_hex(generated, 16);
            printf("nubo: generated admin password: %s\n", generated);
        }
        st->admin_pw = a->admin_pw ? a->admin_pw : generated;
        nb_random_hex(st->generated_demo_pw, 16);
        st->demo_pw = st->generated_demo_pw;
        st->write_clouds = o->bootstrap = true;
    }
    o->admin_password = st->admin_pw;
    o->demo_password = st->demo_pw;
    return 0;
}

/* What the start found and does, for stdout and the log. */
static void describe(struct aio_start *st, int have)
{
    char db[PATH_MAX + 16];
    snprintf(db, sizeof(db), "%s/nubo.sqlite", st->dir);
    if (have > 0 && !st->ch.n)
        snprintf(st->note, sizeof(st->note), "the existing cloud's, kept as it is");
    else if (have > 0)
        note_changes(st, "the existing cloud's, with these options given now and recorded: ");
    else if (st->existing)
        snprintf(st->note, sizeof(st->note),
                 "kept, but there is no clouds.yaml: identities bootstrapped again (new admin "
                 "and demo passwords)");
    else if (access(db, F_OK) == 0)
        snprintf(st->note, sizeof(st->note),
                 "new (there was none next to the existing database): identities bootstrapped "
                 "again, new secrets");
    else
        snprintf(st->note, sizeof(st->note), "new cloud");
    printf("nubo: config %s (%s), clouds.yaml %s/clouds.yaml (clouds: nubo, nubo-demo)\n", st->conf,
           st->note, st->dir);
    fflush(stdout);
}

int nb_cmd_aio(int argc, char **argv)
{
    struct aio_args a = {0};
    int rc = parse_args(argc, argv, &a);
    if (rc || (rc = check_args(&a))) {
        free(a.admin_pw);
        return rc == 1 ? 0 : rc;
    }
    struct aio_start st = {0};
    if (make_state_dir(a.dir) < 0 || !realpath(a.dir, st.dir)) {
        perror("nubo aio: state dir");
        free(a.admin_pw);
        return 1;
    }
    snprintf(st.conf, sizeof(st.conf), "%s/nubo.conf", st.dir);
    st.existing = access(st.conf, F_OK) == 0;
    if (st.existing ? (rc = load_existing(&st)) != 0 : (new_cloud_config(&st.ch, st.dir), 0))
        goto out;
    if ((rc = apply_args(&st.ch, &a)) != 0)
        goto out;
    if (!strcmp(nb_conf_str("compute", "driver", "fake"), "libvirt"))
        check_traversable(st.dir);
    api_url(st.url, sizeof(st.url));
    struct nb_aio_clouds clouds = {0};
    int have = st.existing ? nb_aio_clouds_read(st.dir, &clouds) : 0;
    char generated[33];
    struct nb_run_opts o = {.command = "aio", .config_path = st.conf};
    if (have < 0) {
        rc = 2;
        goto out;
    }
    if ((rc = plan_identities(&st, &a, &clouds, have, &o, generated)) != 0)
        goto out_clouds;
    describe(&st, have);
    if (precreate_db() < 0) {
        perror("nubo aio: creating the database");
        rc = 1;
        goto out_clouds;
    }
    o.config_note = st.note;
    o.bootstrapped = after_bootstrap;
    o.arg = &st;
    rc = nb_run_roles(&o);
out_clouds:
    nb_aio_clouds_free(&clouds);
out:
    changes_free(&st.ch);
    free(a.admin_pw);
    return rc;
}
