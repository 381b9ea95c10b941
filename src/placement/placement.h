/* placement.h - the Placement service under /placement, and its in-process
 * API for the scheduler and the compute agents.
 *
 * The in-process calls do exactly what the matching HTTP calls do (same
 * validation, generations, 409s) and share their code; they exist so that an
 * all-in-one does not pay for HTTP to itself. Resource amounts are JSON
 * objects {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}. */
#ifndef NB_PLACEMENT_H
#define NB_PLACEMENT_H

#include "common/ctx.h"
#include "common/env.h"
#include <jansson.h>

int nb_placement_init(struct nb_env *env);

/* The Placement API as the HTTP layer serves it (http_service.c); its init
 * registers it with its routes. */
struct nb_http_service;
extern const struct nb_http_service nb_placement_http_service;

/* Creates the provider if missing (by uuid), else renames it. 0/-1. */
int nb_placement_ensure_provider(struct nb_ctx *ctx, const char *rp_uuid, const char *name);
/* Replaces the provider's inventories: {"VCPU": {"total":…, "reserved":…,
 * "allocation_ratio":…, "min_unit":…, "max_unit":…, "step_size":…}, …}.
 * Generation is handled internally (retried on a concurrent change). 0/-1. */
int nb_placement_set_inventories(struct nb_ctx *ctx, const char *rp_uuid, json_t *inventories);
/* Sets the provider's traits (array of names), creating custom ones. 0/-1. */
int nb_placement_set_traits(struct nb_ctx *ctx, const char *rp_uuid, json_t *traits);

/* GET /allocation_candidates in-process. resources: amounts; required: array
 * of trait names or NULL; member_of: array of aggregate UUIDs (any of) or
 * NULL; limit 0 = no limit. Returns the 1.36+ response body (new ref):
 * {"allocation_requests": [{"allocations": {rp_uuid: {"resources": {…}}}, …}],
 *  "provider_summaries": {rp_uuid: {"resources": {rc: {"capacity", "used"}}, "traits": [...]}}},
 * or NULL on error. */
json_t *nb_placement_candidates(struct nb_ctx *ctx, json_t *resources, json_t *required,
                                json_t *member_of, int limit);

/* The same search for a scheduler: per allocation request, in order, each
 * distinct provider it takes with that provider's capacity and usage of
 * the three compute classes (0 where it has no such inventory), without
 * building the answer. *out (malloc'd, free it) gets *n entries, *nreq
 * the number of allocation requests. 0, or -1 on error. */
struct nb_placement_cand {
    int request; /* index of its allocation request */
    char rp_uuid[37];
    long long vcpu_capacity, vcpu_used, ram_capacity, ram_used, disk_capacity, disk_used;
};
int nb_placement_candidate_list(struct nb_ctx *ctx, json_t *resources, json_t *required,
                                json_t *member_of, int limit, struct nb_placement_cand **out,
                                size_t *n, size_t *nreq);

/* Why there was no candidate: for each requested resource class, the
 * largest free amount on any provider. Returns a new string such as
 * "MEMORY_MB: requested 4096, largest free 2048 (fake-1); VCPU: ok" listing
 * only the short classes ("" if none is short), or NULL on error. */
char *nb_placement_explain_shortage(struct nb_ctx *ctx, json_t *resources);

/* PUT /allocations/{consumer} for one provider, atomically checking
 * capacity. consumer_generation: -1 for a new consumer (null in the API),
 * else the expected generation. 0; -1 with 409 recorded when capacity or
 * generation does not allow it. */
int nb_placement_claim(struct nb_ctx *ctx, const char *consumer_uuid, const char *project_id,
                       const char *user_id, const char *rp_uuid, json_t *resources,
                       long long consumer_generation);
/* Removes all allocations of the consumer (and the consumer). 0/-1
 * (no allocation is not an error); redone when its transaction lost a
 * conflict (nb_db_redo). */
int nb_placement_delete_allocations(struct nb_ctx *ctx, const char *consumer_uuid);
/* Provider UUID holding the consumer's allocations, or NULL. Caller frees. */
char *nb_placement_consumer_provider(struct nb_ctx *ctx, const char *consumer_uuid);

/* The consumer's allocations as {rp_uuid: {rc: amount}} (new ref; {} when
 * it has none), or NULL after an error recorded on ctx. */
json_t *nb_placement_allocations_of(struct nb_ctx *ctx, const char *consumer_uuid);
/* Moves every allocation of consumer from to consumer to (which should
 * hold none: its allocations are replaced) in one write, keeping project
 * and user, as Nova's report client move_allocations does (POST
 * /allocations with both consumers): a move hands the instance's source
 * allocation to its migration, and a failed move hands it back. 1 moved,
 * 0 when from has no allocations (nothing written), -1 on error. */
int nb_placement_move_allocations(struct nb_ctx *ctx, const char *from, const char *to);

/* The consumers that hold allocations (what GET /allocations/{consumer}
 * answers non-empty for), as a new JSON array of their UUIDs, or NULL after
 * an error recorded on ctx. The conductor's start-up recovery asks which
 * of them are instances that are gone. */
json_t *nb_placement_list_consumers(struct nb_ctx *ctx);

/* Every consumer's allocations, for the cloud audit (`nubo doctor cloud`,
 * the conductor's audit), as `nova-manage placement audit` reads them: a new
 * object {consumer_uuid: {"project_id", "user_id", "generation",
 * "allocations": {rp_uuid: {rc: amount}}, "providers": {rp_uuid: name}}},
 * or NULL after an error recorded on ctx. */
json_t *nb_placement_audit_allocations(struct nb_ctx *ctx);

/* The consumer's generation (what a claim on an existing consumer must
 * name, as heal_allocations does), or -1 when placement has no such
 * consumer. */
long long nb_placement_consumer_generation(struct nb_ctx *ctx, const char *consumer_uuid);

/* For tools that open the database themselves (nubo doctor): the in-process
 * calls above use db, without placement's routes or start-up sync. */
struct nb_db;
void nb_placement_use_db(struct nb_db *db);

/* Calls for the compute API, which keeps Nova's view of a host in step
 * with placement. Unlike the calls above they open no transaction (not
 * even a nested one, a savepoint): each runs its statements inside the
 * caller's transaction, so that the caller's rows and placement's change
 * together, and marks placement's cache stale in it. Call them between
 * nb_db_begin and nb_db_commit on the shared database. */

/* Deletes the provider and the providers below it (children first, as
 * Nova's report client deletes a compute node's tree), each with its
 * allocations (their consumers' generations bumped, consumers left without
 * allocations deleted), inventories, traits and aggregate links. 1 if the
 * provider existed, 0 if not (or rp_uuid is no UUID), -1 on error. */
int nb_placement_delete_provider(struct nb_ctx *ctx, const char *rp_uuid);
/* Associate the aggregate agg_uuid with, or dissociate it from, the
 * providers whose UUID is rp_uuid or whose name is rp_name (either may be
 * NULL) - a compute node's provider, as Nova finds it - bumping the
 * generation of each one that changed, as PUT .../aggregates does. Returns
 * the number of providers changed (0: none, or already so), or -1. */
int nb_placement_add_provider_aggregate(struct nb_ctx *ctx, const char *rp_uuid,
                                        const char *rp_name, const char *agg_uuid);
int nb_placement_remove_provider_aggregate(struct nb_ctx *ctx, const char *rp_uuid,
                                           const char *rp_name, const char *agg_uuid);

#endif
