/* procrec.c - process records (procrec.h): one flock'ed JSON file per
 * running nubo process under <state_path>/run/. */
#include "cmd/procrec.h"
#include "common/json.h"
#include "common/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

struct nb_procrec {
    int fd;
    char path[1200];
    json_t *info;
};

/* Replaces the file's content with rec->info. 0/-1. */
static int rewrite(struct nb_procrec *rec)
{
    char *text = json_dumps(rec->info, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    if (!text)
        return -1;
    size_t n = strlen(text);
    int rc = ftruncate(rec->fd, 0) == 0 && pwrite(rec->fd, text, n, 0) == (ssize_t)n &&
                     pwrite(rec->fd, "\n", 1, (off_t)n) == 1
                 ? 0
                 : -1;
    free(text);
    return rc;
}

/* Tells, on stderr, who holds the record at path. */
static void report_holder(const char *path)
{
    char *text = nb_read_file(path, NULL);
    json_t *j = text ? nb_json_parse(text) : NULL;
    fprintf(stderr,
            "nubo: %s is held by a running nubo process (pid %lld, %s since %s, roles %s): it "
            "already runs these roles for this host on this state path; stop it first\n",
            path, nb_json_int(j, "pid", 0),
            nb_json_str(j, "command") ? nb_json_str(j, "command") : "?",
            nb_json_str(j, "started_at") ? nb_json_str(j, "started_at") : "?",
            nb_json_str(j, "roles") ? nb_json_str(j, "roles") : "?");
    json_decref(j);
    free(text);
}

struct nb_procrec *nb_procrec_acquire(const char *run_dir, const char *kind, const char *host,
                                      const json_t *info)
{
    if (nb_mkdir_p(run_dir) < 0) {
        fprintf(stderr, "nubo: cannot create %s: %s\n", run_dir, strerror(errno));
        return NULL;
    }
    struct nb_procrec *rec = calloc(1, sizeof(*rec));
    snprintf(rec->path, sizeof(rec->path), "%s/nubo-%s.%s.pid", run_dir, kind, host);
    rec->fd = open(rec->path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (rec->fd < 0) {
        fprintf(stderr, "nubo: cannot open %s: %s\n", rec->path, strerror(errno));
        free(rec);
        return NULL;
    }
    /* `nubo status` takes a shared lock for an instant to test liveness */
    int locked = -1;
    for (int attempt = 0; attempt < 10 && locked < 0; attempt++)
        if ((locked = flock(rec->fd, LOCK_EX | LOCK_NB)) < 0 && errno == EWOULDBLOCK)
            usleep(20000);
    if (locked < 0) {
        if (errno == EWOULDBLOCK)
            report_holder(rec->path);
        else
            fprintf(stderr, "nubo: cannot lock %s: %s\n", rec->path, strerror(errno));
        close(rec->fd);
        free(rec);
        return NULL;
    }
    char now[32];
    rec->info = json_deep_copy(info);
    json_object_set_new(rec->info, "pid", json_integer(getpid()));
    json_object_set_new(rec->info, "started_at", json_string(nb_now_iso(now)));
    json_object_set_new(rec->info, "ready_at", json_null());
    if (rewrite(rec) < 0)
        fprintf(stderr, "nubo: cannot write %s: %s\n", rec->path, strerror(errno));
    return rec;
}

void nb_procrec_ready(struct nb_procrec *rec)
{
    if (!rec)
        return;
    char now[32];
    json_object_set_new(rec->info, "ready_at", json_string(nb_now_iso(now)));
    rewrite(rec);
}

void nb_procrec_release(struct nb_procrec *rec)
{
    if (!rec)
        return;
    char now[32];
    json_object_set_new(rec->info, "stopped_at", json_string(nb_now_iso(now)));
    rewrite(rec);
    close(rec->fd);
    json_decref(rec->info);
    free(rec);
}

/* The record at path with "alive" and "path", or NULL if unreadable. */
static json_t *read_record(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    bool alive = flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK;
    if (!alive)
        flock(fd, LOCK_UN);
    json_t *j = NULL;
    /* the owner may be rewriting it (truncate, write): read again once */
    for (int attempt = 0; attempt < 2 && !j; attempt++) {
        char *text = nb_read_file(path, NULL);
        j = text ? nb_json_parse(text) : NULL;
        free(text);
        if (!j && attempt == 0)
            usleep(50000);
    }
    close(fd);
    if (!json_is_object(j)) {
        json_decref(j);
        return NULL;
    }
    json_object_set_new(j, "alive", json_boolean(alive));
    json_object_set_new(j, "path", json_string(path));
    return j;
}

json_t *nb_procrec_list(const char *run_dir)
{
    json_t *out = json_array();
    DIR *d = opendir(run_dir);
    if (!d)
        return out;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (strncmp(e->d_name, "nubo-", 5) || n < 5 || strcmp(e->d_name + n - 4, ".pid"))
            continue;
        char path[1200];
        snprintf(path, sizeof(path), "%s/%s", run_dir, e->d_name);
        json_t *j = read_record(path);
        if (j)
            json_array_append_new(out, j);
    }
    closedir(d);
    return out;
}
