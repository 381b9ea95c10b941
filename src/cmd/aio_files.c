/* aio_files.c - DIR/clouds.yaml and in-place nubo.conf updates for
 * `nubo aio` (aio.h).
 *
 * clouds.yaml is written in one fixed shape and read back by the same
 * shape: a cloud is a two-space-indented `name:` line, its auth_url and
 * password are the `auth_url:` and `password:` lines under it. That is all
 * a restart needs from it (the passwords it must keep), and an operator who
 * rewrote the file beyond that is told so rather than guessed at.
 *
 * nubo.conf is edited line by line rather than rewritten from the
 * configuration table, so comments and layout an operator added survive
 * the options a restart records. */
#include "cmd/aio.h"
#include "common/util.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* value as a YAML double-quoted scalar (with the quotes). New string. */
static char *yaml_quote(const char *value)
{
    size_t n = strlen(value);
    char *out = malloc(n * 4 + 3), *p = out;
    *p++ = '"';
    for (const unsigned char *s = (const unsigned char *)value; *s; s++) {
        if (*s == '"' || *s == '\\') {
            *p++ = '\\';
            *p++ = (char)*s;
        } else if (*s < 0x20 || *s == 0x7f) {
            p += sprintf(p, "\\x%02x", *s);
        } else {
            *p++ = (char)*s;
        }
    }
    *p++ = '"';
    *p = '\0';
    return out;
}

/* The scalar at s (double-quoted with escapes, single-quoted, or plain up
 * to the end of the line). New string, or NULL if a quote is not closed. */
static char *yaml_scalar(const char *s)
{
    while (*s == ' ')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\r'))
        n--;
    char *out = calloc(n + 1, 1), *p = out;
    if (s[0] != '"' && s[0] != '\'') {
        memcpy(out, s, n);
        return out;
    }
    char q = s[0];
    size_t i = 1;
    for (; i < n && s[i] != q; i++) {
        if (q == '"' && s[i] == '\\' && i + 1 < n) {
            char e = s[++i];
            unsigned v;
            if (e == 'x' && i + 2 < n && sscanf(s + i + 1, "%2x", &v) == 1) {
                *p++ = (char)v;
                i += 2;
            } else {
                *p++ = e == 'n' ? '\n' : e == 't' ? '\t' : e;
            }
        } else if (q == '\'' && s[i] == '\'' && i + 1 < n && s[i + 1] == '\'') {
            *p++ = s[i++];
        } else {
            *p++ = s[i];
        }
    }
    if (i >= n) {
        free(out);
        return NULL;
    }
    return out;
}

int nb_aio_clouds_write(const char *dir, const char *url, const char *admin_pw, const char *demo_pw)
{
    char path[1100];
    snprintf(path, sizeof(path), "%s/clouds.yaml", dir);
    char *a = yaml_quote(admin_pw), *d = yaml_quote(demo_pw);
    static const char cloud[] = "  %s:\n"
                                "    auth:\n"
                                "      auth_url: %s/identity/v3\n"
                                "      username: %s\n"
                                "      password: %s\n"
                                "      project_name: %s\n"
                                "      user_domain_id: default\n"
                                "      project_domain_id: default\n"
                                "    region_name: RegionOne\n"
                                "    identity_api_version: 3\n"
                                "    interface: public\n";
    char *admin = nb_strdup_printf(cloud, "nubo", url, "admin", a, "admin");
    char *demo = nb_strdup_printf(cloud, "nubo-demo", url, "demo", d, "demo");
    char *text = nb_strdup_printf("clouds:\n%s%s", admin, demo);
    int rc = nb_write_file(path, text, strlen(text), 0600);
    free(a);
    free(d);
    free(admin);
    free(demo);
    free(text);
    return rc;
}

void nb_aio_clouds_free(struct nb_aio_clouds *c)
{
    free(c->admin_pw);
    free(c->demo_pw);
    free(c->auth_url);
    memset(c, 0, sizeof(*c));
}

/* Takes `key: value` from line into *dst (first one wins). */
static void take(const char *line, const char *key, char **dst)
{
    size_t k = strlen(key);
    if (*dst || strncmp(line, key, k) || line[k] != ':')
        return;
    *dst = yaml_scalar(line + k + 1);
}

int nb_aio_clouds_read(const char *dir, struct nb_aio_clouds *out)
{
    char path[1100];
    snprintf(path, sizeof(path), "%s/clouds.yaml", dir);
    memset(out, 0, sizeof(*out));
    size_t len;
    char *text = nb_read_file(path, &len);
    if (!text)
        return errno == ENOENT ? 0 : (perror(path), -1);
    char cloud[64] = "";
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        size_t indent = strspn(line, " ");
        char *s = line + indent;
        size_t n = strlen(s);
        if (indent == 2 && n > 1 && s[n - 1] == ':') {
            snprintf(cloud, sizeof(cloud), "%.*s", (int)(n - 1), s);
            continue;
        }
        if (indent <= 2)
            continue;
        if (!strcmp(cloud, "nubo")) {
            take(s, "password", &out->admin_pw);
            take(s, "auth_url", &out->auth_url);
        } else if (!strcmp(cloud, "nubo-demo")) {
            take(s, "password", &out->demo_pw);
        }
    }
    free(text);
    if (out->admin_pw && out->demo_pw && out->auth_url)
        return 1;
    fprintf(stderr,
            "nubo aio: %s does not hold the auth_url and the passwords of the clouds nubo and "
            "nubo-demo as nubo aio writes them; put them back, or move the file away to "
            "bootstrap the identities again (new admin and demo passwords)\n",
            path);
    nb_aio_clouds_free(out);
    return -1;
}

/* ---- nubo.conf ---------------------------------------------------------- */

struct lines {
    char **v;
    size_t n;
};

static void lines_insert(struct lines *l, size_t at, char *line)
{
    l->v = realloc(l->v, (l->n + 1) * sizeof(char *));
    memmove(l->v + at + 1, l->v + at, (l->n - at) * sizeof(char *));
    l->v[at] = line;
    l->n++;
}

/* The section name if line is a `[section]` header, into buf; else NULL. */
static const char *header(const char *line, char *buf, size_t n)
{
    line += strspn(line, " \t");
    const char *end = strchr(line, ']');
    if (line[0] != '[' || !end)
        return NULL;
    snprintf(buf, n, "%.*s", (int)(end - line - 1), line + 1);
    return buf;
}

/* True if line is `key = ...` (whitespace around the key allowed). */
static bool is_key(const char *line, const char *key)
{
    line += strspn(line, " \t");
    size_t k = strlen(key);
    if (strncmp(line, key, k))
        return false;
    line += k;
    line += strspn(line, " \t");
    return *line == '=' || *line == ':';
}

static bool is_option(const char *line)
{
    line += strspn(line, " \t");
    return *line && *line != '#' && *line != ';' && *line != '[';
}

static void set_option(struct lines *l, const struct nb_aio_opt *o)
{
    char sec[128];
    size_t hs = l->n;
    for (size_t i = 0; i < l->n && hs == l->n; i++)
        if (header(l->v[i], sec, sizeof(sec)) && !strcasecmp(sec, o->section))
            hs = i;
    char *line = nb_strdup_printf("%s = %s", o->key, o->value);
    if (hs == l->n) {
        if (l->n && *l->v[l->n - 1])
            lines_insert(l, l->n, strdup(""));
        lines_insert(l, l->n, nb_strdup_printf("[%s]", o->section));
        lines_insert(l, l->n, line);
        return;
    }
    size_t last = hs + 1; /* a new key goes after the section's last option */
    for (size_t i = hs + 1; i < l->n && !header(l->v[i], sec, sizeof(sec)); i++) {
        if (is_key(l->v[i], o->key)) {
            free(l->v[i]);
            l->v[i] = line;
            return;
        }
        if (is_option(l->v[i]))
            last = i + 1;
    }
    lines_insert(l, last, line);
}

int nb_aio_conf_update(const char *path, const struct nb_aio_opt *opts, size_t n)
{
    size_t len;
    char *text = nb_read_file(path, &len);
    if (!text)
        return -1;
    struct lines l = {0};
    for (char *p = text; *p || p == text;) {
        char *nl = strchr(p, '\n');
        size_t k = nl ? (size_t)(nl - p) : strlen(p);
        if (!nl && !k)
            break;
        char *line = strndup(p, k);
        lines_insert(&l, l.n, line);
        if (!nl)
            break;
        p = nl + 1;
    }
    free(text);
    for (size_t i = 0; i < n; i++)
        set_option(&l, &opts[i]);
    size_t total = 0;
    for (size_t i = 0; i < l.n; i++)
        total += strlen(l.v[i]) + 1;
    char *out = malloc(total + 1), *p = out;
    for (size_t i = 0; i < l.n; i++) {
        p = stpcpy(p, l.v[i]);
        *p++ = '\n';
        free(l.v[i]);
    }
    free(l.v);
    int rc = nb_write_file(path, out, (size_t)(p - out), 0600);
    free(out);
    return rc;
}
