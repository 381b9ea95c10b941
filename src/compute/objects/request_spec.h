/* request_spec.h - Nova's RequestSpec: what a boot asks of the scheduler,
 * in one shape from the API (which stores it in instances.request_spec)
 * through the conductor (which adds what each attempt learns: retries,
 * unreachable hosts, the server group's current members) to the scheduler
 * (select_destinations {"instance_uuid", "spec": <this JSON>}).
 *
 * JSON form (stored and on the bus alike):
 *   {"instance_uuid", "project_id", "user_id",
 *    "flavor": {"vcpus", "memory_mb", "root_gb", "ephemeral_gb", "swap",
 *               "extra_specs": {…}, …},
 *    "image": {"id", "disk_format", …, "properties": {…}} | {} (boot from
 *             volume),
 *    "availability_zone": "az" | null, "force_hosts": [host], "force_nodes":
 *    [node], "requested_destination": {"host", "node"} | null,
 *    "scheduler_hints": {…}, "group": {"uuid", "policy", "rules": {…},
 *    "members": [uuid…]} | null, "num_instances", "launch_index", "is_bfv",
 *    "security_groups": [name…], "requested_networks": "auto" | "none" |
 *    [{…}…], "injected_files": [{…}…], "ignore_hosts": [host…],
 *    "retry": {"num_attempts", "hosts": [host…], "failures": ["host: why"…]},
 *    "unreachable_hosts": [host…]}
 * Reading accepts any subset (absent members take the defaults below), so
 * every stored spec stays readable. */
#ifndef NB_COMPUTE_OBJECTS_REQUEST_SPEC_H
#define NB_COMPUTE_OBJECTS_REQUEST_SPEC_H

#include <jansson.h>
#include <stdbool.h>

/* Every pointer is owned by the spec (nb_request_spec_free); strings NULL
 * when not given. Once read, JSON members are never NULL (empty object or
 * array) except image, group and requested_networks (NULL: none, not
 * given); a spec filled by hand may
 * leave any NULL, written as its default. */
struct nb_request_spec {
    char *instance_uuid, *project_id, *user_id;
    json_t *flavor; /* object */
    json_t *image;  /* object with "properties", or NULL (boot from volume) */
    char *availability_zone;
    char *force_host, *force_node; /* first of force_hosts / force_nodes */
    char *requested_host, *requested_node;
    json_t *scheduler_hints; /* object */
    json_t *group;           /* {"uuid", "policy", "rules", "members"} or NULL */
    long long num_instances, launch_index;
    bool is_bfv;
    json_t *security_groups;    /* array */
    json_t *requested_networks; /* "auto", "none", an array; NULL: not given */
    json_t *injected_files;     /* array */
    json_t *ignore_hosts;       /* array */
    long long num_attempts;     /* retry.num_attempts */
    json_t *retry_hosts;        /* retry.hosts: hosts a failed attempt ran on */
    json_t *retry_failures;     /* retry.failures: "host: why" per failed attempt */
    json_t *unreachable_hosts;  /* hosts whose agent did not take the build */
};

/* Fills spec (all of it; free it with nb_request_spec_free) from its JSON
 * form; j may be NULL or not an object (then every member is defaulted).
 * Never fails. */
void nb_request_spec_from_json(struct nb_request_spec *spec, const json_t *j);
/* The JSON form of spec: new ref. */
json_t *nb_request_spec_to_json(const struct nb_request_spec *spec);
/* Frees what spec owns (not spec itself); idempotent. */
void nb_request_spec_free(struct nb_request_spec *spec);

/* The server group's uuid (borrowed), or NULL. */
const char *nb_request_spec_group_uuid(const struct nb_request_spec *spec);

#endif
