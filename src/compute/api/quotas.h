/* quotas.h - Nova's quota limits, usages and the instance-count check of
 * server create. Defined in quotas.c; private to compute/api. */
#ifndef NB_COMPUTE_API_QUOTAS_H
#define NB_COMPUTE_API_QUOTAS_H

#include "common/ctx.h"
#include "common/http.h"
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* ---- quotas (quotas.c) ----------------------------------------------------- */

enum nb_quota_res {
    NB_Q_INSTANCES,
    NB_Q_CORES,
    NB_Q_RAM,
    NB_Q_METADATA_ITEMS,
    NB_Q_INJECTED_FILES,
    NB_Q_INJECTED_FILE_CONTENT_BYTES,
    NB_Q_INJECTED_FILE_PATH_BYTES,
    NB_Q_KEY_PAIRS,
    NB_Q_SERVER_GROUPS,
    NB_Q_SERVER_GROUP_MEMBERS,
    NB_Q_FIXED_IPS,
    NB_Q_FLOATING_IPS,
    NB_Q_SECURITY_GROUPS,
    NB_Q_SECURITY_GROUP_RULES,
    NB_Q_COUNT
};

/* Resource name ("instances", …) of r. */
const char *nb_quota_name(enum nb_quota_res r);
/* Index of a resource name, or -1. */
int nb_quota_index(const char *name);
/* Default limit of r: [quota] option, else Nova's default (-1 unlimited). */
long long nb_quota_default(enum nb_quota_res r);
/* Limits of quota class class_name as Nova's get_class_quotas: its rows of
 * table quota_classes, else the [quota] defaults (class "default": the
 * defaults of every project, DbQuotaDriver.get_defaults). 0/-1. */
int nb_quota_class_limits(struct nb_ctx *ctx, const char *class_name, long long limits[NB_Q_COUNT]);
/* One limit of an update body (os-quota-sets, os-quota-class-sets):
 * integer or "^-?[0-9]+$", -1..2^31-1. 0 with *out, or -1 after the 400. */
int nb_quota_value(struct nb_ctx *ctx, const char *key, json_t *v, long long *out);
/* Limits of a project (user_id NULL) or of a user in it: table quotas,
 * then the defaults (class "default", then [quota]). 0/-1. */
int nb_quota_limits(struct nb_ctx *ctx, const char *project_id, const char *user_id,
                    long long limits[NB_Q_COUNT]);
/* Usages (in_use) as Nova counts them for the quota API and limits:
 * instances/cores/ram of live instances, server groups; 0 for the rest.
 * 0/-1. */
int nb_quota_usages(struct nb_ctx *ctx, const char *project_id, const char *user_id,
                    long long in_use[NB_Q_COUNT]);
/* True if the user has own limits for instances, cores or ram. */
bool nb_quota_user_has_limits(struct nb_ctx *ctx, const char *project_id, const char *user_id);

/* Nova's check_num_instances_quota on given numbers (pure): limits and
 * usages of instances, cores, ram (index NB_Q_INSTANCES..NB_Q_RAM); returns
 * how many instances (between min_count and max_count) may be built, or -1
 * with Nova's message ("Quota exceeded for cores: Requested 2, but already
 * used 19 of 20 cores") written into msg. */
int nb_quota_instances_allowed(const long long limits[3], const long long used[3], long long vcpus,
                               long long ram, int min_count, int max_count, char *msg,
                               size_t msglen);
/* The check against the database, inside the caller's transaction: the
 * project's (and the user's, if the user has own limits) usage. Returns the
 * number allowed, or -1 after 403 on ctx. */
int nb_quota_check_instances(struct nb_ctx *ctx, const char *project_id, const char *user_id,
                             long long vcpus, long long ram, int min_count, int max_count);

#endif
