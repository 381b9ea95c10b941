/* api.h - the Compute API v2.1 (under /compute): registration of each
 * resource's routes, and the lookups one resource needs from another.
 *
 * Every nb_compute_*_init registers its routes with nb_http_route and keeps
 * env. Lookups return new references or NULL after nb_error() on ctx with
 * Nova's message and status. */
#ifndef NB_COMPUTE_API_H
#define NB_COMPUTE_API_H

#include "common/ctx.h"
#include "common/env.h"
#include "common/http.h"
#include <jansson.h>
#include <stdbool.h>

/* Nova's microversion range (Zed). */
#define NB_COMPUTE_MV_MIN_MAJOR 2
#define NB_COMPUTE_MV_MIN_MINOR 1
#define NB_COMPUTE_MV_MAX_MAJOR 2
#define NB_COMPUTE_MV_MAX_MINOR 93

/* The Compute API as the HTTP layer serves it (http_service.c). */
extern const struct nb_http_service nb_compute_http_service;

/* Registers the compute service and every compute route (calls all the
 * inits below). */
int nb_compute_api_init(struct nb_env *env);

int nb_compute_versions_init(struct nb_env *env);
int nb_compute_flavors_init(struct nb_env *env);
int nb_compute_keypairs_init(struct nb_env *env);
int nb_compute_availability_zones_init(struct nb_env *env);
int nb_compute_aggregates_init(struct nb_env *env);
int nb_compute_server_groups_init(struct nb_env *env);
int nb_compute_services_init(struct nb_env *env);
int nb_compute_hypervisors_init(struct nb_env *env);
int nb_compute_hosts_init(struct nb_env *env);
int nb_compute_extensions_init(struct nb_env *env);
int nb_compute_servers_init(struct nb_env *env);
int nb_compute_server_actions_init(struct nb_env *env);
int nb_compute_server_metadata_init(struct nb_env *env);
int nb_compute_instance_actions_init(struct nb_env *env);
int nb_compute_migrations_init(struct nb_env *env);
int nb_compute_quotas_init(struct nb_env *env);
int nb_compute_limits_init(struct nb_env *env);
int nb_compute_volume_attachments_init(struct nb_env *env);
int nb_compute_server_ips_init(struct nb_env *env);
int nb_compute_server_interfaces_init(struct nb_env *env);
int nb_compute_server_password_init(struct nb_env *env);
int nb_compute_quota_classes_init(struct nb_env *env);
int nb_compute_server_diagnostics_init(struct nb_env *env);
int nb_compute_server_external_events_init(struct nb_env *env);
int nb_compute_images_init(struct nb_env *env);
int nb_compute_security_groups_init(struct nb_env *env);
int nb_compute_floating_ips_init(struct nb_env *env);
int nb_compute_os_volumes_init(struct nb_env *env);
int nb_compute_simple_tenant_usage_init(struct nb_env *env);
int nb_compute_instance_usage_audit_log_init(struct nb_env *env);

/* Flavor by flavorid as a DB row object plus "extra_specs": {…}; 404
 * "Flavor <id> could not be found." when missing or not accessible to
 * ctx's project (non-public flavors need flavor_projects access or admin). */
json_t *nb_flavor_get(struct nb_ctx *ctx, const char *flavorid);
/* Keypair row of user_id by name; 404 "Keypair <name> not found for user <user>". */
json_t *nb_keypair_get(struct nb_ctx *ctx, const char *user_id, const char *name);
/* The availability zone of a compute host: the availability_zone metadata of
 * an aggregate it is in, else [DEFAULT] default_availability_zone ("nova").
 * Returns a malloc'd string. */
char *nb_host_availability_zone(struct nb_ctx *ctx, const char *host);
/* The same for each host of hosts (an array of names) in one query:
 * {host: zone}. New ref, or NULL after a database error. */
json_t *nb_hosts_availability_zones(struct nb_ctx *ctx, json_t *hosts);
/* True if zone is the default zone or named by some aggregate. */
bool nb_availability_zone_exists(struct nb_ctx *ctx, const char *zone);
/* Server group row by uuid visible to ctx ({"uuid","policy","rules",
 * "members":[uuid…]}), or NULL after 404/400. */
json_t *nb_server_group_get(struct nb_ctx *ctx, const char *group_uuid);
/* Adds an instance to a group (in the caller's transaction if any). 0/-1. */
int nb_server_group_add_member(struct nb_ctx *ctx, const char *group_uuid,
                               const char *instance_uuid);
/* Compute-style 400 for an invalid body: "Invalid input for field/attribute
 * <field>. Value: <v>. <why>" as Nova's JSON-schema validator says it. */
int nb_compute_bad_field(struct nb_ctx *ctx, const char *field, const json_t *value,
                         const char *why);

#endif
