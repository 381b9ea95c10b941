/* internal.h - what the files of the placement module share.
 *
 * Not a public interface: only the files of src/placement and the unit tests include
 * it. The module keeps the environment it was started with (the database)
 * and every handler and in-process call goes through the same "core"
 * functions, which take the microversion as a plain minor number `mv` (the
 * major is always 1) so that in-process callers, whose context carries no
 * placement microversion, can ask for the newest behaviour explicitly.
 *
 * Conventions: functions named *_locked run inside a transaction the
 * caller opened with nb_db_begin(); they never begin or commit. Errors are
 * recorded on ctx with nb_error() where detected and the function returns
 * -1 (or NULL). */
#ifndef NB_PLACEMENT_INTERNAL_H
#define NB_PLACEMENT_INTERNAL_H

#include "common/ctx.h"
#include "common/http.h"
#include "placement/request.h"
#include <jansson.h>
#include <stdbool.h>

struct nb_db;

/* Newest microversion this module implements (1.PLC_MV_MAX). */
#define PLC_MV_MAX 39
/* 0x7FFFFFFF, placement's db_const.MAX_INT. */
#define PLC_MAX_INT 2147483647LL
/* placement's db_const.SQL_SP_FLOAT_MAX. */
#define PLC_FLOAT_MAX 3.40282e+38

/* Error codes placement puts in the "code" member of error bodies (1.23+). */
#define PLC_ERR_DEFAULT "placement.undefined_code"
#define PLC_ERR_CONCURRENT "placement.concurrent_update"
#define PLC_ERR_INUSE "placement.inventory.inuse"
#define PLC_ERR_DUPLICATE "placement.duplicate_name"
#define PLC_ERR_RP_INUSE "placement.resource_provider.inuse"
#define PLC_ERR_RP_PARENT "placement.resource_provider.cannot_delete_parent"
#define PLC_ERR_QP_DUP "placement.query.duplicate_key"
#define PLC_ERR_QP_BAD "placement.query.bad_value"

/* Consumer identity used when an allocation comes without project/user
 * (microversions before 1.8), as placement's [placement]
 * incomplete_consumer_project_id / _user_id defaults. */
#define PLC_INCOMPLETE_PROJECT "00000000-0000-0000-0000-000000000000"
#define PLC_INCOMPLETE_USER "00000000-0000-0000-0000-000000000000"

/* ---- providers.c ---- */

/* Provider row {id, uuid, name, generation, parent_provider_id,
 * root_provider_id, parent_provider_uuid, root_provider_uuid, created_at,
 * updated_at} by UUID (new ref), or NULL (no error recorded if absent). */
json_t *plc_rp_get(struct nb_ctx *ctx, const char *uuid);
/* Same, recording 404 "No resource provider with uuid %s found" if absent. */
json_t *plc_rp_get_404(struct nb_ctx *ctx, const char *uuid);
/* Increments the provider's generation if it still is `expected` (pass -1
 * to increment unconditionally); 409 concurrent_update otherwise.
 * Returns the new generation or -1. */
long long plc_rp_bump(struct nb_ctx *ctx, long long rp_id, long long expected);
/* The provider view (links, parent/root from 1.14) for mv. New ref. */
json_t *plc_rp_view(json_t *row, int mv);
/* Creates or renames a provider (in-process ensure). *_locked. */
int plc_rp_ensure_locked(struct nb_ctx *ctx, const char *uuid, const char *name);
void plc_routes_providers(void);

/* ---- inventories.c ---- */

struct plc_invrec {
    char rc[256];
    long long total, reserved, min_unit, max_unit, step_size;
    double ratio;
};
/* Parses one inventory record (defaults applied) from obj, accepting the
 * keys in allowed (NULL-terminated) and requiring those in required. */
int plc_inv_parse(struct nb_ctx *ctx, json_t *obj, const char *const *allowed,
                  const char *const *required, struct plc_invrec *out);
/* The capacity rule for mv on recs[0..n): 400 "Unable to <verb> inventory
 * for resource provider <uuid>: Invalid inventory for …". */
int plc_inv_check_capacity(struct nb_ctx *ctx, const char *rp_uuid, const char *verb,
                           struct plc_invrec *recs, int n, int mv);
/* Replaces the provider's inventories with recs[0..n): checks that classes
 * exist and that removed classes are not in use (409 inventory.inuse, the
 * message prefixed with inuse_prefix), then bumps the generation (which
 * must still be expected_gen unless that is < 0). When nothing changed,
 * the generation is bumped only if bump_unchanged (the HTTP API always
 * bumps, as placement; the in-process call does not). *_locked. */
int plc_inv_set_locked(struct nb_ctx *ctx, json_t *rp, struct plc_invrec *recs, int n,
                       long long expected_gen, const char *inuse_prefix, bool bump_unchanged);
/* Adds or updates recs without deleting anything and bumps the
 * generation (the reshaper's first phase). *_locked. */
int plc_inv_upsert_locked(struct nb_ctx *ctx, json_t *rp, struct plc_invrec *recs, int n);
void plc_routes_inventories(void);

/* ---- classes.c ---- */

extern const char *const plc_standard_rcs[];    /* NULL-terminated */
extern const char *const plc_standard_traits[]; /* NULL-terminated */
/* Inserts missing standard resource classes and traits. 0/-1. */
int plc_sync_standard(struct nb_ctx *ctx);
/* True if name is one of plc_standard_rcs. */
bool plc_rc_is_standard(const char *name);
/* True if the resource class exists (false + error on db failure). */
bool plc_rc_exists(struct nb_ctx *ctx, const char *name);
void plc_routes_classes(void);

/* ---- traits.c ---- */

/* Trait id by name, 0 if absent, -1 on db error. */
long long plc_trait_id(struct nb_ctx *ctx, const char *name);
/* Names not present in the traits table, joined ", " (malloc'd; "" if
 * all exist), NULL on db error. */
char *plc_traits_missing(struct nb_ctx *ctx, json_t *names);
/* Replaces the provider's traits (array of existing names); bumps the
 * generation only if something changed. *_locked. */
int plc_rp_set_traits_locked(struct nb_ctx *ctx, json_t *rp, json_t *names);
/* The provider's trait names (new ref array). */
json_t *plc_rp_traits(struct nb_ctx *ctx, long long rp_id);
void plc_routes_traits(void);

/* ---- aggregates.c, usages.c ---- */
void plc_routes_aggregates(void);
void plc_routes_usages(void);

/* ---- allocations.c ---- */

struct plc_consumer_write {
    const char *uuid;       /* normalized consumer UUID */
    const char *project_id; /* NULL -> incomplete consumer */
    const char *user_id;
    const char *consumer_type; /* NULL -> keep / none */
    bool check_generation;     /* 1.28+ semantics */
    bool generation_null;      /* the caller expects a new consumer */
    long long generation;
    json_t *allocations; /* {rp_uuid: {rc: amount}}; {} = remove all */
};
enum plc_write_mode { PLC_WRITE_PUT, PLC_WRITE_POST };
/* Replaces the allocations of every consumer in w[0..n) atomically: checks
 * consumer generations, that providers exist, and capacity (409 naming the
 * provider and class), then writes and bumps generations. *_locked. */
int plc_alloc_write_locked(struct nb_ctx *ctx, struct plc_consumer_write *w, int n,
                           enum plc_write_mode mode);
/* Parses one consumer's body (dict form, 1.12+) for mv into *w; borrows
 * from body. */
int plc_alloc_parse_consumer(struct nb_ctx *ctx, json_t *body, int mv, bool post,
                             struct plc_consumer_write *w);
void plc_routes_allocations(void);
void plc_routes_reshaper(void);

/* ---- world.c: a read snapshot for candidates, filters, explanations ---- */

struct plc_inv {
    const char *rc;
    long long total, reserved, min_unit, max_unit, step_size, used;
    double ratio;
};

struct plc_rp {
    long long id;
    const char *uuid;
    const char *name;     /* the UUID unless loaded with PLC_W_NAMES */
    long long generation; /* current only with PLC_W_NAMES */
    int parent;           /* index, -1 for a root */
    int root;             /* index */
    struct plc_inv *inv;
    int ninv;
    const char **traits;
    int ntraits;
    const char **aggs;
    int naggs;
};

enum {
    PLC_W_INV = 1 << 0,   /* current usage in inv[].used */
    PLC_W_NAMES = 1 << 1, /* names and current generations */
};

struct plc_snapshot;

struct plc_world {
    int n;
    struct plc_rp *rp; /* sorted by id; this request's copy */
    bool has_trees;    /* some provider has a parent */
    struct plc_inv *inv_store;
    struct plc_snapshot *snap; /* shared, read-only: strings live there */
    json_t *names;
    char *usage;
};

/* Loads the world: providers with their trees, inventories, traits and
 * aggregates come from a shared snapshot rebuilt only when placement's
 * version moved; usage (PLC_W_INV) and names (PLC_W_NAMES) are read
 * fresh, all inside one transaction. 0/-1. */
int plc_world_load(struct nb_ctx *ctx, struct plc_world *w, unsigned flags);
void plc_world_free(struct plc_world *w);
/* Marks providers/inventories/traits/aggregates as changed; call inside
 * every write transaction that touches them. 0/-1. */
int plc_world_changed(struct nb_ctx *ctx);
int plc_world_index(const struct plc_world *w, long long id);
int plc_world_index_uuid(const struct plc_world *w, const char *uuid);
const struct plc_inv *plc_rp_inv(const struct plc_rp *rp, const char *rc);
bool plc_rp_has_trait(const struct plc_rp *rp, const char *name);
bool plc_rp_in_agg(const struct plc_rp *rp, const char *agg);
/* Trait expression: required is [[any-of…], …], forbidden [names]. */
bool plc_rp_traits_match(const struct plc_rp *rp, json_t *required, json_t *forbidden);
/* Aggregate expression: member_of [[any-of…], …], forbidden [uuids]. */
bool plc_rp_aggs_match(const struct plc_rp *rp, json_t *member_of, json_t *forbidden);

/* ---- capacity.c: the arithmetic, shared by writes, candidates, tests ---- */

enum plc_fit {
    PLC_FIT_OK = 0,
    PLC_FIT_CONSTRAINT, /* min_unit / max_unit / step_size violated */
    PLC_FIT_CAPACITY,   /* used + amount > capacity */
};
/* int((total - reserved) * ratio), as placement reports it. */
long long plc_capacity(long long total, long long reserved, double ratio);
/* Can `amount` more be allocated from an inventory with `used` in use? */
enum plc_fit plc_fit(const struct plc_inv *inv, long long used, long long amount);
/* Free amount (capacity - used, never below 0). */
long long plc_free(const struct plc_inv *inv);
/* Inventory capacity rule: from 1.26 reserved may equal total. */
bool plc_inv_capacity_ok(long long total, long long reserved, double ratio, int mv);

/* ---- candidates.c ---- */

struct plc_group {
    char suffix[72];
    bool same_provider;     /* suffixed (granular) group */
    json_t *resources;      /* {rc: amount} */
    json_t *required;       /* [[trait, …], …] */
    json_t *forbidden;      /* [trait, …] */
    json_t *member_of;      /* [[agg, …], …] */
    json_t *forbidden_aggs; /* [agg, …] */
    char in_tree[37];       /* "" = any tree */
};

struct plc_acreq {
    struct plc_group *groups;
    int ngroups;
    int limit;              /* 0 = unlimited */
    bool isolate;           /* group_policy=isolate */
    json_t *root_required;  /* [trait, …] or NULL */
    json_t *root_forbidden; /* [trait, …] or NULL */
    json_t *same_subtree;   /* [[suffix, …], …] or NULL */
    int mv;
};

/* Query-string parsers shared with the provider list. Each records 400
 * with placement's message on bad input.
 * resources "VCPU:1,MEMORY_MB:512" -> {rc: amount} (new ref). */
int plc_parse_resources(struct nb_ctx *ctx, const char *qs, json_t **out);
/* Values of required<suffix> -> [[any-of…]…] and [forbidden…] (new refs). */
int plc_parse_required(struct nb_ctx *ctx, json_t *values, int mv, json_t **required,
                       json_t **forbidden);
/* Values of member_of<suffix> -> [[any-of…]…] and [forbidden…] (new refs). */
int plc_parse_member_of(struct nb_ctx *ctx, json_t *values, const char *suffix, int mv,
                        json_t **member_of, json_t **forbidden);
/* 400 "<prefix>No such trait(s): A, B." unless all traits exist. */
int plc_check_traits_exist(struct nb_ctx *ctx, json_t *required, json_t *forbidden,
                           const char *prefix);

/* Whether the JSON array of strings holds s. */
bool plc_array_has(json_t *arr, const char *s);
/* Computes the GET /allocation_candidates body for mv. New ref or NULL. */
json_t *plc_candidates(struct nb_ctx *ctx, struct plc_acreq *rq);
/* The same body as text (what nb_json_dump prints of it), written straight
 * from the search, *len its length. Malloc'd, or NULL. */
char *plc_candidates_text(struct nb_ctx *ctx, struct plc_acreq *rq, size_t *len);
/* The same as nb_placement_candidate_list's entries. 0/-1. */
struct nb_placement_cand;
int plc_candidates_list(struct nb_ctx *ctx, struct plc_acreq *rq, struct nb_placement_cand **out,
                        size_t *n, size_t *nreq);
void plc_groups_free(struct plc_acreq *rq);
void plc_routes_candidates(void);

#endif
