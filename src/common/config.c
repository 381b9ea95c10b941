/* config.c - the process-wide option table, loaded with inih (see config.h).
 *
 * A small array of section/key/value strings: configs have tens of options,
 * so a linear scan is simpler and fast enough. Values replaced by a later set
 * are kept alive until nb_conf_reset because lookups hand out borrowed
 * pointers; replacing only happens at start-up. */
#include "common/config.h"
#include "common/util.h"

#include <ini.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct opt {
    char *section;
    char *key;
    char *value;
};

static struct opt *opts;
static size_t nopts, capopts;
static char **retired; /* replaced values, kept alive for borrowers */
static size_t nretired;
static pthread_rwlock_t conf_lock = PTHREAD_RWLOCK_INITIALIZER;

static struct opt *find(const char *section, const char *key)
{
    for (size_t i = 0; i < nopts; i++)
        if (strcasecmp(opts[i].section, section) == 0 && strcmp(opts[i].key, key) == 0)
            return &opts[i];
    return NULL;
}

void nb_conf_set(const char *section, const char *key, const char *value)
{
    pthread_rwlock_wrlock(&conf_lock);
    struct opt *o = find(section, key);
    if (o) {
        /* the old value may still be borrowed: keep it until nb_conf_reset */
        retired = realloc(retired, (nretired + 1) * sizeof(*retired));
        retired[nretired++] = o->value;
        o->value = strdup(value);
    } else {
        if (nopts == capopts) {
            capopts = capopts ? capopts * 2 : 64;
            opts = realloc(opts, capopts * sizeof(*opts));
        }
        opts[nopts++] = (struct opt){strdup(section), strdup(key), strdup(value)};
    }
    pthread_rwlock_unlock(&conf_lock);
}

static int ini_cb(void *user, const char *section, const char *name, const char *value)
{
    (void)user;
    nb_conf_set(section && *section ? section : "DEFAULT", name, value ? value : "");
    return 1;
}

int nb_conf_load(const char *path)
{
    int rc = ini_parse(path, ini_cb, NULL);
    if (rc < 0) {
        fprintf(stderr, "nubo: cannot read config file %s\n", path);
        return -1;
    }
    if (rc > 0) {
        fprintf(stderr, "nubo: %s: parse error on line %d\n", path, rc);
        return -1;
    }
    return 0;
}

int nb_conf_set_arg(const char *arg)
{
    const char *dot = strchr(arg, '.');
    const char *eq = strchr(arg, '=');
    if (!dot || !eq || dot > eq || dot == arg || eq == dot + 1)
        return -1;
    char section[128], key[128];
    if ((size_t)(dot - arg) >= sizeof(section) || (size_t)(eq - dot - 1) >= sizeof(key))
        return -1;
    memcpy(section, arg, dot - arg);
    section[dot - arg] = '\0';
    memcpy(key, dot + 1, eq - dot - 1);
    key[eq - dot - 1] = '\0';
    nb_conf_set(section, key, eq + 1);
    return 0;
}

const char *nb_conf_str(const char *section, const char *key, const char *def)
{
    pthread_rwlock_rdlock(&conf_lock);
    struct opt *o = find(section, key);
    const char *v = o ? o->value : def;
    pthread_rwlock_unlock(&conf_lock);
    return v;
}

long nb_conf_int(const char *section, const char *key, long def)
{
    const char *v = nb_conf_str(section, key, NULL);
    if (!v || !*v)
        return def;
    char *end;
    long r = strtol(v, &end, 10);
    return *end ? def : r;
}

double nb_conf_double(const char *section, const char *key, double def)
{
    const char *v = nb_conf_str(section, key, NULL);
    if (!v || !*v)
        return def;
    char *end;
    double r = strtod(v, &end);
    return *end ? def : r;
}

bool nb_conf_bool(const char *section, const char *key, bool def)
{
    const char *v = nb_conf_str(section, key, NULL);
    if (!v || !*v)
        return def;
    if (!strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcasecmp(v, "1") ||
        !strcasecmp(v, "on"))
        return true;
    if (!strcasecmp(v, "false") || !strcasecmp(v, "no") || !strcasecmp(v, "0") ||
        !strcasecmp(v, "off"))
        return false;
    return def;
}

int nb_conf_keys(const char *section, const char **keys, int max)
{
    int n = 0;
    pthread_rwlock_rdlock(&conf_lock);
    for (size_t i = 0; i < nopts && n < max; i++)
        if (strcasecmp(opts[i].section, section) == 0)
            keys[n++] = opts[i].key;
    pthread_rwlock_unlock(&conf_lock);
    return n;
}

int nb_conf_write(const char *path)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return -1;
    pthread_rwlock_rdlock(&conf_lock);
    /* One block per section, in first-seen order, DEFAULT first. */
    const char **sections = calloc(nopts + 1, sizeof(char *));
    size_t nsec = 0;
    sections[nsec++] = "DEFAULT";
    for (size_t i = 0; i < nopts; i++) {
        bool seen = false;
        for (size_t s = 0; s < nsec && !seen; s++)
            seen = !strcasecmp(sections[s], opts[i].section);
        if (!seen)
            sections[nsec++] = opts[i].section;
    }
    for (size_t s = 0; s < nsec; s++) {
        fprintf(f, "%s[%s]\n", s ? "\n" : "", sections[s]);
        for (size_t i = 0; i < nopts; i++)
            if (!strcasecmp(opts[i].section, sections[s]))
                fprintf(f, "%s = %s\n", opts[i].key, opts[i].value);
    }
    pthread_rwlock_unlock(&conf_lock);
    free(sections);
    fclose(f);
    int rc = nb_write_file(path, buf, len, 0600);
    free(buf);
    return rc;
}

void nb_conf_reset(void)
{
    pthread_rwlock_wrlock(&conf_lock);
    for (size_t i = 0; i < nopts; i++) {
        free(opts[i].section);
        free(opts[i].key);
        free(opts[i].value);
    }
    for (size_t i = 0; i < nretired; i++)
        free(retired[i]);
    free(retired);
    retired = NULL;
    nretired = 0;
    nopts = 0;
    pthread_rwlock_unlock(&conf_lock);
}
