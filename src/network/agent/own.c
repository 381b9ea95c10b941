/* own.c - the agent's ownership record (internal.h: na_own, na_disown,
 * na_owned): {"<kind>": ["<name>", ...], ...} in <state dir>/owned.json,
 * rewritten atomically on every change, so only what this agent made is
 * ever removed, even after a restart. */
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "network/agent/agent_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOG_OWN "nubo.network.agent"

/* Writes the record (lock held). 0/-1. */
static int save(struct na *a)
{
    char path[1200];
    snprintf(path, sizeof(path), "%s/owned.json", a->state_dir);
    char *text = json_dumps(a->owned, JSON_INDENT(1) | JSON_SORT_KEYS);
    int rc = text ? nb_write_file(path, text, strlen(text), 0600) : -1;
    free(text);
    if (rc < 0)
        NB_ERROR(LOG_OWN, NULL, NULL, "cannot write the ownership record %s", path);
    return rc;
}

int na_own_load(struct na *a)
{
    char path[1200];
    snprintf(path, sizeof(path), "%s/owned.json", a->state_dir);
    char *text = nb_read_file(path, NULL);
    json_t *j = text ? nb_json_parse(text) : NULL;
    free(text);
    if (text && !json_is_object(j)) {
        NB_WARN(LOG_OWN, NULL, NULL, "ownership record %s is not a JSON object; starting afresh",
                path);
        json_decref(j);
        j = NULL;
    }
    json_decref(a->owned);
    a->owned = j ? j : json_object();
    return 0;
}

static ssize_t find(const json_t *arr, const char *name)
{
    size_t i;
    json_t *v;
    json_array_foreach (arr, i, v)
        if (json_is_string(v) && !strcmp(json_string_value(v), name))
            return (ssize_t)i;
    return -1;
}

int na_own(struct na *a, const char *kind, const char *name)
{
    pthread_mutex_lock(&a->own_lock);
    json_t *arr = json_object_get(a->owned, kind);
    if (!arr) {
        arr = json_array();
        json_object_set_new(a->owned, kind, arr);
    }
    int rc = 0;
    if (find(arr, name) < 0) {
        json_array_append_new(arr, json_string(name));
        rc = save(a);
    }
    pthread_mutex_unlock(&a->own_lock);
    return rc;
}

int na_disown(struct na *a, const char *kind, const char *name)
{
    pthread_mutex_lock(&a->own_lock);
    json_t *arr = json_object_get(a->owned, kind);
    ssize_t i = arr ? find(arr, name) : -1;
    int rc = 0;
    if (i >= 0) {
        json_array_remove(arr, (size_t)i);
        rc = save(a);
    }
    pthread_mutex_unlock(&a->own_lock);
    return rc;
}

json_t *na_owned(struct na *a, const char *kind)
{
    pthread_mutex_lock(&a->own_lock);
    json_t *arr = json_object_get(a->owned, kind);
    json_t *copy = arr ? json_deep_copy(arr) : json_array();
    pthread_mutex_unlock(&a->own_lock);
    return copy;
}
