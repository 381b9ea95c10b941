/* request_spec.c - Nova's RequestSpec to and from its JSON form (see
 * request_spec.h). */
#include "compute/objects/request_spec.h"

#include "common/json.h"

#include <stdlib.h>
#include <string.h>

static char *dup_str(const json_t *v)
{
    return json_is_string(v) ? strdup(json_string_value(v)) : NULL;
}

/* A copy of j's member key when it has type is_type, else def (new ref). */
static json_t *member(const json_t *j, const char *key, int (*is_type)(const json_t *), json_t *def)
{
    json_t *v = json_object_get(j, key);
    if (v && is_type(v)) {
        json_decref(def);
        return json_deep_copy(v);
    }
    return def;
}

static int is_object(const json_t *v)
{
    return json_is_object(v);
}

static int is_array(const json_t *v)
{
    return json_is_array(v);
}

void nb_request_spec_from_json(struct nb_request_spec *spec, const json_t *j)
{
    memset(spec, 0, sizeof(*spec));
    if (!json_is_object(j))
        j = NULL;
    spec->instance_uuid = dup_str(json_object_get(j, "instance_uuid"));
    spec->project_id = dup_str(json_object_get(j, "project_id"));
    spec->user_id = dup_str(json_object_get(j, "user_id"));
    spec->flavor = member(j, "flavor", is_object, json_object());
    json_t *image = json_object_get(j, "image");
    spec->image =
        json_is_object(json_object_get(image, "properties")) ? json_deep_copy(image) : NULL;
    spec->availability_zone = dup_str(json_object_get(j, "availability_zone"));
    spec->force_host = dup_str(json_array_get(json_object_get(j, "force_hosts"), 0));
    spec->force_node = dup_str(json_array_get(json_object_get(j, "force_nodes"), 0));
    json_t *dest = json_object_get(j, "requested_destination");
    spec->requested_host = dup_str(json_object_get(dest, "host"));
    spec->requested_node = dup_str(json_object_get(dest, "node"));
    spec->scheduler_hints = member(j, "scheduler_hints", is_object, json_object());
    json_t *group = json_object_get(j, "group");
    spec->group = json_is_string(json_object_get(group, "uuid")) ? json_deep_copy(group) : NULL;
    spec->num_instances = nb_json_int(j, "num_instances", 1);
    spec->launch_index = nb_json_int(j, "launch_index", 0);
    spec->is_bfv = json_is_true(json_object_get(j, "is_bfv"));
    spec->security_groups = member(j, "security_groups", is_array, json_array());
    json_t *nets = json_object_get(j, "requested_networks");
    spec->requested_networks =
        json_is_array(nets) || json_is_string(nets) ? json_deep_copy(nets) : NULL;
    spec->injected_files = member(j, "injected_files", is_array, json_array());
    spec->ignore_hosts = member(j, "ignore_hosts", is_array, json_array());
    json_t *retry = json_object_get(j, "retry");
    spec->num_attempts = nb_json_int(retry, "num_attempts", 0);
    spec->retry_hosts = member(retry, "hosts", is_array, json_array());
    spec->retry_failures = member(retry, "failures", is_array, json_array());
    spec->unreachable_hosts = member(j, "unreachable_hosts", is_array, json_array());
}

/* s as a JSON string, or null. New ref. */
static json_t *str_or_null(const char *s)
{
    return s ? json_string(s) : json_null();
}

/* A one-element array of s, or an empty one. */
static json_t *list_of(const char *s)
{
    return s ? json_pack("[s]", s) : json_array();
}

/* v (a new reference to it), or def when v is NULL. */
static json_t *or_default(json_t *v, json_t *def)
{
    if (!v)
        return def;
    json_decref(def);
    return json_incref(v);
}

json_t *nb_request_spec_to_json(const struct nb_request_spec *spec)
{
    json_t *j = json_object();
    json_object_set_new(j, "instance_uuid", str_or_null(spec->instance_uuid));
    json_object_set_new(j, "project_id", str_or_null(spec->project_id));
    json_object_set_new(j, "user_id", str_or_null(spec->user_id));
    json_object_set_new(j, "flavor", or_default(spec->flavor, json_object()));
    json_object_set_new(j, "image", or_default(spec->image, json_object()));
    json_object_set_new(j, "availability_zone", str_or_null(spec->availability_zone));
    json_object_set_new(j, "force_hosts", list_of(spec->force_host));
    json_object_set_new(j, "force_nodes", list_of(spec->force_node));
    json_object_set_new(
        j, "requested_destination",
        spec->requested_host || spec->requested_node
            ? json_pack("{s:s?, s:s?}", "host", spec->requested_host, "node", spec->requested_node)
            : json_null());
    json_object_set_new(j, "scheduler_hints", or_default(spec->scheduler_hints, json_object()));
    json_object_set_new(j, "group", or_default(spec->group, json_null()));
    json_object_set_new(j, "num_instances", json_integer(spec->num_instances));
    json_object_set_new(j, "launch_index", json_integer(spec->launch_index));
    json_object_set_new(j, "is_bfv", json_boolean(spec->is_bfv));
    json_object_set_new(j, "security_groups", or_default(spec->security_groups, json_array()));
    json_object_set_new(j, "requested_networks", or_default(spec->requested_networks, json_null()));
    json_object_set_new(j, "injected_files", or_default(spec->injected_files, json_array()));
    json_object_set_new(j, "ignore_hosts", or_default(spec->ignore_hosts, json_array()));
    json_object_set_new(j, "retry",
                        json_pack("{s:I, s:o, s:o}", "num_attempts", (json_int_t)spec->num_attempts,
                                  "hosts", or_default(spec->retry_hosts, json_array()), "failures",
                                  or_default(spec->retry_failures, json_array())));
    json_object_set_new(j, "unreachable_hosts", or_default(spec->unreachable_hosts, json_array()));
    return j;
}

void nb_request_spec_free(struct nb_request_spec *spec)
{
    char **strs[] = {&spec->instance_uuid,     &spec->project_id,    &spec->user_id,
                     &spec->availability_zone, &spec->force_host,    &spec->force_node,
                     &spec->requested_host,    &spec->requested_node};
    for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
        free(*strs[i]);
        *strs[i] = NULL;
    }
    json_t **js[] = {&spec->flavor,           &spec->image,
                     &spec->scheduler_hints,  &spec->group,
                     &spec->security_groups,  &spec->requested_networks,
                     &spec->injected_files,   &spec->ignore_hosts,
                     &spec->retry_hosts,      &spec->retry_failures,
                     &spec->unreachable_hosts};
    for (size_t i = 0; i < sizeof(js) / sizeof(js[0]); i++) {
        json_decref(*js[i]);
        *js[i] = NULL;
    }
}

const char *nb_request_spec_group_uuid(const struct nb_request_spec *spec)
{
    return nb_json_str(spec->group, "uuid");
}
