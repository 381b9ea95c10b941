/* candidate_search.c - the allocation candidate search behind GET
 * /placement/allocation_candidates and the in-process candidates
 * (candidates.c parses the requests).
 *
 * It reads one snapshot (world.c: providers, inventories with usage,
 * traits, aggregates — four queries whatever the number of providers) and
 * then works tree by tree, as placement does:
 *  - the unsuffixed group may take each resource class from any provider
 *    of the tree that has room for it (all combinations), provided the
 *    providers used together carry the required traits and none carries
 *    a forbidden one; member_of matches the provider or its root;
 *  - a suffixed (granular, 1.25+) group must be satisfied by one provider,
 *    and a resourceless one (1.36, same_subtree) just names a provider;
 *  - per tree, one candidate of every group is combined, group_policy
 *    "isolate" keeps granular groups on distinct providers, same_subtree
 *    is checked, amounts on the same provider and class are summed and
 *    rechecked against capacity and max_unit, duplicates are dropped.
 *    The buffers for one combination are sized from the request, so no
 *    combination is dropped for its width.
 * Results come in provider-id order and stop at `limit`. Provider
 * summaries cover every provider of the trees in the result. Sharing
 * providers (MISC_SHARES_VIA_AGGREGATE) are not considered. */
#include "common/cleanup.h"
#include "common/json.h"
#include "common/sbuf.h"
#include "common/util.h"
#include "placement/internal.h"
#include "placement/placement.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct group_state {
    const struct plc_group *g;
    int nres;
    const char **rcs;
    long long *amounts;
    int tree; /* in_tree's root index, -1 for any tree, -2 for none */
    /* candidates in the current tree: ncand rows of max(nres, 1) rps */
    int *rps;
    int ncand, capcand;
};

/* One (provider, class) of a combination and the amount summed over
 * its groups. */
struct merged {
    int rp;
    const char *rc;
    long long amount;
};

/* One allocation request found: its amounts mpool[m_off .. m_off + nm)
 * and, per group, the providers it took mappool[map_off ..) (each group's
 * width in turn). */
struct result {
    int m_off, nm, map_off;
};

struct search {
    struct nb_ctx *ctx;
    struct plc_acreq *rq;
    struct plc_world w;
    int *members; /* providers grouped by root, in id order */
    int *mstart;  /* mstart[root] .. mstart[root+1] into members */
    struct group_state *gs;
    bool nested_aware;
    /* scratch for one combination, sized for the widest (every group's
     * providers and (provider, class) amounts): none is ever cut short */
    int width;
    struct merged *merged;
    int *provs;
    /* output: the results, written out as JSON values or as text after
     * the search (an answer over thousands of providers is otherwise tens
     * of thousands of values built and freed) */
    struct result *res;
    int capres;
    struct merged *mpool; /* every result's merged amounts */
    int nmpool, capmpool;
    int *mappool; /* every result's providers per group (width ints) */
    int nmappool, capmappool;
    int nresults;
    bool *used_rp;   /* providers appearing in a result (non-nested-aware) */
    bool *root_done; /* trees with a result */
    json_t *requested_rcs;
    json_t *root_required; /* rq->root_required as [[t], …] */
};

static int add_cand(struct nb_ctx *ctx, struct group_state *gs, const int *rps)
{
    int width = gs->nres ? gs->nres : 1;
    if (gs->ncand == gs->capcand) {
        int cap = gs->capcand ? gs->capcand * 2 : 8;
        int *p = realloc(gs->rps, (size_t)cap * (size_t)width * sizeof(int));
        if (!p)
            return nb_error(ctx, 500, PLC_ERR_DEFAULT, "out of memory");
        gs->rps = p;
        gs->capcand = cap;
    }
    memcpy(&gs->rps[gs->ncand * width], rps, (size_t)width * sizeof(int));
    gs->ncand++;
    return 0;
}

static bool aggs_ok_for(const struct plc_world *w, const struct plc_rp *rp,
                        const struct plc_group *g, bool or_root)
{
    if (!g->member_of && !g->forbidden_aggs)
        return true;
    const struct plc_rp *root = &w->rp[rp->root];
    if (json_array_size(g->forbidden_aggs)) {
        if (!plc_rp_aggs_match(rp, NULL, g->forbidden_aggs))
            return false;
        if (or_root && !plc_rp_aggs_match(root, NULL, g->forbidden_aggs))
            return false;
    }
    if (json_array_size(g->member_of)) {
        if (plc_rp_aggs_match(rp, g->member_of, NULL))
            return true;
        return or_root && plc_rp_aggs_match(root, g->member_of, NULL);
    }
    return true;
}

/* Granular (or resourceless) group: single providers of the tree. */
static int cands_same_provider(struct search *s, struct group_state *gs, int root)
{
    const struct plc_group *g = gs->g;
    for (int m = s->mstart[root]; m < s->mstart[root + 1]; m++) {
        int p = s->members[m];
        const struct plc_rp *rp = &s->w.rp[p];
        bool ok =
            plc_rp_traits_match(rp, g->required, g->forbidden) && aggs_ok_for(&s->w, rp, g, false);
        for (int k = 0; ok && k < gs->nres; k++) {
            const struct plc_inv *inv = plc_rp_inv(rp, gs->rcs[k]);
            ok = inv && plc_fit(inv, inv->used, gs->amounts[k]) == PLC_FIT_OK;
        }
        if (!ok)
            continue;
        int rps[64];
        for (int k = 0; k < (gs->nres ? gs->nres : 1); k++)
            rps[k] = p;
        if (add_cand(s->ctx, gs, rps) < 0)
            return -1;
    }
    return 0;
}

/* Collective trait check of the providers chosen for the unsuffixed group. */
static bool combo_traits_ok(const struct plc_world *w, const struct plc_group *g, const int *rps,
                            int n)
{
    size_t i, j;
    json_t *t, *any;
    for (int k = 0; k < n; k++)
        json_array_foreach (g->forbidden, i, t) {
            if (plc_rp_has_trait(&w->rp[rps[k]], json_string_value(t)))
                return false;
        }
    json_array_foreach (g->required, i, any) {
        bool hit = false;
        json_array_foreach (any, j, t) {
            for (int k = 0; k < n && !hit; k++)
                hit = plc_rp_has_trait(&w->rp[rps[k]], json_string_value(t));
            if (hit)
                break;
        }
        if (!hit)
            return false;
    }
    return true;
}

/* Unsuffixed group: every combination of providers in the tree, one per
 * class. */
static int cands_tree(struct search *s, struct group_state *gs, int root)
{
    int nres = gs->nres;
    int **lists = calloc((size_t)nres, sizeof(int *));
    int *nlist = calloc((size_t)nres, sizeof(int));
    int rc = 0;
    if (!lists || !nlist) {
        rc = nb_error(s->ctx, 500, PLC_ERR_DEFAULT, "out of memory");
        goto out;
    }
    int tree_n = s->mstart[root + 1] - s->mstart[root];
    for (int k = 0; k < nres; k++) {
        lists[k] = malloc((size_t)tree_n * sizeof(int));
        if (!lists[k]) {
            rc = nb_error(s->ctx, 500, PLC_ERR_DEFAULT, "out of memory");
            goto out;
        }
        for (int m = s->mstart[root]; m < s->mstart[root + 1]; m++) {
            const struct plc_rp *rp = &s->w.rp[s->members[m]];
            const struct plc_inv *inv = plc_rp_inv(rp, gs->rcs[k]);
            if (!inv || plc_fit(inv, inv->used, gs->amounts[k]) != PLC_FIT_OK)
                continue;
            if (!aggs_ok_for(&s->w, rp, gs->g, true))
                continue;
            lists[k][nlist[k]++] = s->members[m];
        }
        if (nlist[k] == 0)
            goto out;
    }
    int idx[64] = {0}, rps[64];
    for (;;) {
        for (int k = 0; k < nres; k++)
            rps[k] = lists[k][idx[k]];
        if (combo_traits_ok(&s->w, gs->g, rps, nres) && add_cand(s->ctx, gs, rps) < 0) {
            rc = -1;
            goto out;
        }
        int k = nres - 1;
        while (k >= 0 && ++idx[k] == nlist[k])
            idx[k--] = 0;
        if (k < 0)
            break;
    }
out:
    for (int k = 0; lists && k < nres; k++)
        free(lists[k]);
    free(lists);
    free(nlist);
    return rc;
}

static int merged_cmp(const void *a, const void *b)
{
    const struct merged *x = a, *y = b;
    if (x->rp != y->rp)
        return x->rp < y->rp ? -1 : 1;
    return strcmp(x->rc, y->rc);
}

/* Is every provider of `set` within the subtree of one of them? */
static bool same_subtree_ok(const struct plc_world *w, const int *rps, int n)
{
    for (int a = 0; a < n; a++) {
        bool all = true;
        for (int b = 0; b < n && all; b++) {
            int cur = rps[b];
            while (cur >= 0 && cur != rps[a])
                cur = w->rp[cur].parent;
            all = cur == rps[a];
        }
        if (all)
            return true;
    }
    return n == 0;
}

/* Whether the combination keeps group_policy=isolate (granular groups on
 * distinct providers) and every same_subtree set. */
static bool combo_policies_ok(struct search *s, const int *choice)
{
    struct plc_acreq *rq = s->rq;
    int *provs = s->provs;
    if (rq->isolate) {
        int np = 0, ngran = 0;
        for (int gi = 0; gi < rq->ngroups; gi++) {
            if (!rq->groups[gi].same_provider)
                continue;
            ngran++;
            int p = s->gs[gi].rps[choice[gi] * (s->gs[gi].nres ? s->gs[gi].nres : 1)];
            bool dup = false;
            for (int k = 0; k < np; k++)
                dup = dup || provs[k] == p;
            if (!dup)
                provs[np++] = p;
        }
        if (np != ngran)
            return false;
    }
    size_t si;
    json_t *set;
    json_array_foreach (rq->same_subtree, si, set) {
        int np = 0;
        for (int gi = 0; gi < rq->ngroups; gi++) {
            if (!plc_array_has(set, rq->groups[gi].suffix))
                continue;
            struct group_state *gs = &s->gs[gi];
            int width = gs->nres ? gs->nres : 1;
            for (int k = 0; k < width; k++)
                provs[np++] = gs->rps[choice[gi] * width + k];
        }
        if (!same_subtree_ok(&s->w, provs, np))
            return false;
    }
    return true;
}

/* Sums the combination's amounts per (provider, class) into s->merged,
 * sorted. Returns their number, or -1 if a sum no longer fits. */
static int merge_combo(struct search *s, const int *choice)
{
    struct merged *m = s->merged;
    int nm = 0;
    for (int gi = 0; gi < s->rq->ngroups; gi++) {
        struct group_state *gs = &s->gs[gi];
        for (int k = 0; k < gs->nres; k++) {
            int p = gs->rps[choice[gi] * gs->nres + k];
            int j;
            for (j = 0; j < nm; j++)
                if (m[j].rp == p && strcmp(m[j].rc, gs->rcs[k]) == 0)
                    break;
            if (j == nm)
                m[nm++] = (struct merged){p, gs->rcs[k], 0};
            m[j].amount += gs->amounts[k];
        }
    }
    for (int j = 0; j < nm; j++) {
        const struct plc_inv *inv = plc_rp_inv(&s->w.rp[m[j].rp], m[j].rc);
        if (inv->used + m[j].amount > plc_capacity(inv->total, inv->reserved, inv->ratio) ||
            m[j].amount > inv->max_unit)
            return -1;
    }
    qsort(m, (size_t)nm, sizeof(m[0]), merged_cmp);
    return nm;
}

/* Whether the merged combination was already emitted for this tree (it
 * is remembered if not). -1 when out of memory. */
static int combo_seen(const struct merged *m, int nm, json_t *seen)
{
    _cleanup_free_ char *key = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&key, &len);
    if (!f)
        return -1;
    for (int j = 0; j < nm; j++)
        fprintf(f, "%d:%s:%lld;", m[j].rp, m[j].rc, m[j].amount);
    if (fclose(f) != 0)
        return -1;
    if (json_object_get(seen, key))
        return 1;
    json_object_set_new(seen, key, json_true());
    return 0;
}

/* Grows *p (of *cap items of size) to hold need items. 0/-1. */
static int grow(void **p, int *cap, int need, size_t size)
{
    if (need <= *cap)
        return 0;
    int c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, (size_t)c * size);
    if (!q)
        return -1;
    *p = q;
    *cap = c;
    return 0;
}

/* Keeps the combination (its merged amounts and each group's providers)
 * as the next result. 0/-1 (out of memory). */
static int store_result(struct search *s, const int *choice, const struct merged *m, int nm)
{
    if (grow((void **)&s->res, &s->capres, s->nresults + 1, sizeof(*s->res)) < 0 ||
        grow((void **)&s->mpool, &s->capmpool, s->nmpool + nm, sizeof(*s->mpool)) < 0 ||
        grow((void **)&s->mappool, &s->capmappool, s->nmappool + s->width, sizeof(int)) < 0)
        return -1;
    struct result *r = &s->res[s->nresults];
    r->m_off = s->nmpool;
    r->nm = nm;
    r->map_off = s->nmappool;
    memcpy(&s->mpool[s->nmpool], m, (size_t)nm * sizeof(*m));
    s->nmpool += nm;
    for (int gi = 0; gi < s->rq->ngroups; gi++) {
        const struct group_state *gs = &s->gs[gi];
        int width = gs->nres ? gs->nres : 1;
        memcpy(&s->mappool[s->nmappool], &gs->rps[choice[gi] * width], (size_t)width * sizeof(int));
        s->nmappool += width;
    }
    s->nresults++;
    return 0;
}

/* Checks one combination (choice[g] = candidate index per group) and, if
 * it qualifies and is new, appends it to the result. */
static int emit_combo(struct search *s, int root, const int *choice, json_t *seen)
{
    struct plc_acreq *rq = s->rq;
    if (!combo_policies_ok(s, choice))
        return 0;
    int nm = merge_combo(s, choice);
    if (nm < 0)
        return 0;
    const struct merged *m = s->merged;
    int nprov = 0;
    for (int j = 0; j < nm; j++)
        nprov += j == 0 || m[j].rp != m[j - 1].rp;
    if (!s->nested_aware && s->w.has_trees && nprov > 1)
        return 0;
    int dup = seen ? combo_seen(m, nm, seen) : 0;
    if (dup < 0)
        return nb_error(s->ctx, 500, PLC_ERR_DEFAULT, "out of memory");
    if (dup)
        return 0;

    if (store_result(s, choice, m, nm) < 0)
        return nb_error(s->ctx, 500, PLC_ERR_DEFAULT, "out of memory");
    s->root_done[root] = true;
    for (int j = 0; j < nm; j++)
        s->used_rp[m[j].rp] = true;
    for (int gi = 0; gi < rq->ngroups; gi++)
        if (s->gs[gi].nres == 0)
            s->used_rp[s->gs[gi].rps[choice[gi]]] = true;
    return 0;
}

/* All combinations of one candidate per group within the tree. */
static int merge_tree(struct search *s, int root)
{
    int ng = s->rq->ngroups;
    int choice[64] = {0};
    /* One group with resources: its candidates are distinct (provider,
     * class) assignments, so their combinations cannot repeat. */
    bool may_repeat = ng != 1 || s->gs[0].nres == 0;
    _cleanup_json_ json_t *seen = may_repeat ? json_object() : NULL;
    for (;;) {
        if (s->rq->limit && s->nresults >= s->rq->limit)
            return 0;
        if (emit_combo(s, root, choice, seen) < 0)
            return -1;
        int gi = ng - 1;
        while (gi >= 0 && ++choice[gi] == s->gs[gi].ncand)
            choice[gi--] = 0;
        if (gi < 0)
            return 0;
    }
}

static bool root_anchor_ok(struct search *s, int root)
{
    if (!s->rq->root_required && !s->rq->root_forbidden)
        return true;
    return plc_rp_traits_match(&s->w.rp[root], s->root_required, s->rq->root_forbidden);
}

static int search_tree(struct search *s, int root)
{
    if (!root_anchor_ok(s, root))
        return 0;
    for (int gi = 0; gi < s->rq->ngroups; gi++) {
        struct group_state *gs = &s->gs[gi];
        gs->ncand = 0;
        if (gs->tree != -1 && gs->tree != root)
            return 0;
        int rc = gs->g->same_provider || gs->nres == 0 ? cands_same_provider(s, gs, root)
                                                       : cands_tree(s, gs, root);
        if (rc < 0)
            return -1;
        if (gs->ncand == 0)
            return 0;
    }
    return merge_tree(s, root);
}

/* ---- the answer: JSON values (in-process callers) or text (the HTTP
 * answer), the same document; keys in the order placement prints them ---- */

/* Whether the summary of provider p is part of the answer. */
static bool in_summaries(const struct search *s, int p)
{
    if (!s->root_done[s->w.rp[p].root])
        return false;
    return s->nested_aware || !s->w.has_trees || s->used_rp[p];
}

/* Whether inventory k of rp is in its summary (before 1.27 only the
 * requested classes are). */
static bool summary_has(const struct search *s, const struct plc_inv *inv)
{
    return s->rq->mv >= 27 || json_object_get(s->requested_rcs, inv->rc);
}

/* Calls fn(arg, suffix, uuid) for each distinct provider each group of
 * result r took, group by group (the 1.34 mappings). */
static void each_mapping(const struct search *s, const struct result *r,
                         void (*fn)(void *, int gi, const char *uuid), void *arg)
{
    const int *rps = &s->mappool[r->map_off];
    for (int gi = 0; gi < s->rq->ngroups; gi++) {
        int width = s->gs[gi].nres ? s->gs[gi].nres : 1;
        for (int k = 0; k < width; k++) {
            bool dup = false;
            for (int j = 0; j < k && !dup; j++)
                dup = rps[j] == rps[k];
            if (!dup)
                fn(arg, gi, s->w.rp[rps[k]].uuid);
        }
        rps += width;
    }
}

static void mapping_json(void *arg, int gi, const char *uuid)
{
    json_t **lists = arg;
    json_array_append_new(lists[gi], json_string(uuid));
}

static json_t *areq_json(const struct search *s, const struct result *r)
{
    const struct merged *m = &s->mpool[r->m_off];
    int nm = r->nm;
    if (s->rq->mv < 12) {
        json_t *list = json_array(), *res = NULL;
        for (int j = 0; j < nm; j++) {
            if (j == 0 || m[j].rp != m[j - 1].rp) {
                res = json_object();
                json_array_append_new(list, json_pack("{s:{s:s}, s:o}", "resource_provider", "uuid",
                                                      s->w.rp[m[j].rp].uuid, "resources", res));
            }
            json_object_set_new(res, m[j].rc, json_integer(m[j].amount));
        }
        return json_pack("{s:o}", "allocations", list);
    }
    json_t *allocs = json_object(), *res = NULL;
    for (int j = 0; j < nm; j++) {
        if (j == 0 || m[j].rp != m[j - 1].rp) {
            json_t *a = json_object();
            res = json_object();
            json_object_set_new(a, "resources", res);
            json_object_set_new(allocs, s->w.rp[m[j].rp].uuid, a);
        }
        json_object_set_new(res, m[j].rc, json_integer(m[j].amount));
    }
    json_t *areq = json_object();
    json_object_set_new(areq, "allocations", allocs);
    if (s->rq->mv >= 34) {
        json_t *maps = json_object();
        json_t *lists[64];
        for (int gi = 0; gi < s->rq->ngroups; gi++) {
            lists[gi] = json_array();
            json_object_set_new(maps, s->gs[gi].g->suffix, lists[gi]);
        }
        each_mapping(s, r, mapping_json, lists);
        json_object_set_new(areq, "mappings", maps);
    }
    return areq;
}

static json_t *summary_json(const struct search *s, int p)
{
    const struct plc_rp *rp = &s->w.rp[p];
    int mv = s->rq->mv;
    json_t *res = json_object();
    for (int k = 0; k < rp->ninv; k++) {
        const struct plc_inv *inv = &rp->inv[k];
        if (!summary_has(s, inv))
            continue;
        json_t *r = json_object();
        json_object_set_new(
            r, "capacity",
            json_integer((json_int_t)plc_capacity(inv->total, inv->reserved, inv->ratio)));
        json_object_set_new(r, "used", json_integer((json_int_t)inv->used));
        json_object_set_new(res, inv->rc, r);
    }
    json_t *sum = json_object();
    json_object_set_new(sum, "resources", res);
    if (mv >= 17) {
        json_t *traits = json_array();
        for (int k = 0; k < rp->ntraits; k++)
            json_array_append_new(traits, json_string(rp->traits[k]));
        json_object_set_new(sum, "traits", traits);
    }
    if (mv >= 29) {
        json_object_set_new(sum, "parent_provider_uuid",
                            rp->parent >= 0 ? json_string(s->w.rp[rp->parent].uuid) : json_null());
        json_object_set_new(sum, "root_provider_uuid", json_string(s->w.rp[rp->root].uuid));
    }
    return sum;
}

static json_t *answer_json(const struct search *s)
{
    json_t *areqs = json_array();
    for (int i = 0; i < s->nresults; i++)
        json_array_append_new(areqs, areq_json(s, &s->res[i]));
    json_t *sums = json_object();
    for (int i = 0; i < s->w.n; i++)
        if (in_summaries(s, i))
            json_object_set_new(sums, s->w.rp[i].uuid, summary_json(s, i));
    return json_pack("{s:o, s:o}", "allocation_requests", areqs, "provider_summaries", sums);
}

static void put_lit(struct nb_sbuf *b, const char *lit)
{
    nb_sbuf_add(b, lit, strlen(lit));
}

/* "key": (with the comma before it unless first) */
static void put_key(struct nb_sbuf *b, const char *key, bool *first)
{
    if (!*first)
        nb_sbuf_add(b, ",", 1);
    *first = false;
    nb_json_put_str(b, key);
    nb_sbuf_add(b, ":", 1);
}

struct map_text {
    struct nb_sbuf *b;
    int gi;
    bool first_group, first_uuid;
};

static void mapping_text(void *arg, int gi, const char *uuid)
{
    struct map_text *t = arg;
    if (gi != t->gi)
        return;
    if (!t->first_uuid)
        nb_sbuf_add(t->b, ",", 1);
    t->first_uuid = false;
    nb_json_put_str(t->b, uuid);
}

/* The allocations of r: before 1.12 a list of {resource_provider, resources},
 * from 1.12 an object keyed by provider uuid. */
static void allocations_text(const struct search *s, const struct result *r, struct nb_sbuf *b)
{
    const struct merged *m = &s->mpool[r->m_off];
    int nm = r->nm;
    bool as_list = s->rq->mv < 12;
    put_lit(b, as_list ? "{\"allocations\":[" : "{\"allocations\":{");
    for (int j = 0; j < nm; j++) {
        if (j && m[j].rp == m[j - 1].rp) {
            nb_sbuf_add(b, ",", 1);
        } else {
            if (j)
                put_lit(b, "}},");
            if (as_list)
                put_lit(b, "{\"resource_provider\":{\"uuid\":");
            nb_json_put_str(b, s->w.rp[m[j].rp].uuid);
            put_lit(b, as_list ? "},\"resources\":{" : ":{\"resources\":{");
        }
        nb_json_put_str(b, m[j].rc);
        nb_sbuf_add(b, ":", 1);
        nb_json_put_int(b, m[j].amount);
    }
    if (nm)
        put_lit(b, "}}");
    nb_sbuf_add(b, as_list ? "]" : "}", 1);
}

static void areq_text(const struct search *s, const struct result *r, struct nb_sbuf *b)
{
    allocations_text(s, r, b);
    if (s->rq->mv < 12) {
        nb_sbuf_add(b, "}", 1);
        return;
    }
    if (s->rq->mv >= 34) {
        put_lit(b, ",\"mappings\":{");
        for (int gi = 0; gi < s->rq->ngroups; gi++) {
            if (gi)
                nb_sbuf_add(b, ",", 1);
            nb_json_put_str(b, s->gs[gi].g->suffix);
            put_lit(b, ":[");
            struct map_text t = {.b = b, .gi = gi, .first_uuid = true};
            each_mapping(s, r, mapping_text, &t);
            nb_sbuf_add(b, "]", 1);
        }
        nb_sbuf_add(b, "}", 1);
    }
    nb_sbuf_add(b, "}", 1);
}

static void summary_text(const struct search *s, int p, struct nb_sbuf *b)
{
    const struct plc_rp *rp = &s->w.rp[p];
    int mv = s->rq->mv;
    put_lit(b, "{\"resources\":{");
    bool first = true;
    for (int k = 0; k < rp->ninv; k++) {
        const struct plc_inv *inv = &rp->inv[k];
        if (!summary_has(s, inv))
            continue;
        put_key(b, inv->rc, &first);
        put_lit(b, "{\"capacity\":");
        nb_json_put_int(b, plc_capacity(inv->total, inv->reserved, inv->ratio));
        put_lit(b, ",\"used\":");
        nb_json_put_int(b, inv->used);
        nb_sbuf_add(b, "}", 1);
    }
    nb_sbuf_add(b, "}", 1);
    if (mv >= 17) {
        put_lit(b, ",\"traits\":[");
        for (int k = 0; k < rp->ntraits; k++) {
            if (k)
                nb_sbuf_add(b, ",", 1);
            nb_json_put_str(b, rp->traits[k]);
        }
        nb_sbuf_add(b, "]", 1);
    }
    if (mv >= 29) {
        put_lit(b, ",\"parent_provider_uuid\":");
        if (rp->parent >= 0)
            nb_json_put_str(b, s->w.rp[rp->parent].uuid);
        else
            put_lit(b, "null");
        put_lit(b, ",\"root_provider_uuid\":");
        nb_json_put_str(b, s->w.rp[rp->root].uuid);
    }
    nb_sbuf_add(b, "}", 1);
}

static char *answer_text(const struct search *s, size_t *len)
{
    struct nb_sbuf b = {0};
    /* about 300 bytes a result: one allocation for the usual answer */
    b.cap = (size_t)s->nresults * 320 + 64;
    b.s = malloc(b.cap);
    if (!b.s)
        abort();
    b.s[0] = '\0';
    put_lit(&b, "{\"allocation_requests\":[");
    for (int i = 0; i < s->nresults; i++) {
        if (i)
            nb_sbuf_add(&b, ",", 1);
        areq_text(s, &s->res[i], &b);
    }
    put_lit(&b, "],\"provider_summaries\":{");
    bool first = true;
    for (int i = 0; i < s->w.n; i++) {
        if (!in_summaries(s, i))
            continue;
        put_key(&b, s->w.rp[i].uuid, &first);
        summary_text(s, i, &b);
    }
    put_lit(&b, "}}");
    *len = b.len;
    return b.s;
}

static int group_state_init(struct search *s)
{
    struct plc_acreq *rq = s->rq;
    s->gs = calloc((size_t)rq->ngroups, sizeof(*s->gs));
    if (!s->gs)
        return nb_error(s->ctx, 500, PLC_ERR_DEFAULT, "out of memory");
    for (int gi = 0; gi < rq->ngroups; gi++) {
        struct group_state *gs = &s->gs[gi];
        gs->g = &rq->groups[gi];
        gs->nres = (int)json_object_size(gs->g->resources);
        if (gs->nres > 64)
            return nb_error(s->ctx, 400, PLC_ERR_DEFAULT, "Too many resource classes");
        gs->rcs = calloc((size_t)gs->nres + 1, sizeof(*gs->rcs));
        gs->amounts = calloc((size_t)gs->nres + 1, sizeof(*gs->amounts));
        if (!gs->rcs || !gs->amounts)
            return nb_error(s->ctx, 500, PLC_ERR_DEFAULT, "out of memory");
        gs->tree = -1;
        if (gs->g->in_tree[0]) {
            int t = plc_world_index_uuid(&s->w, gs->g->in_tree);
            gs->tree = t >= 0 ? s->w.rp[t].root : -2;
        }
        int k = 0;
        const char *rc;
        json_t *v;
        json_object_foreach (gs->g->resources, rc, v) {
            gs->rcs[k] = rc;
            gs->amounts[k++] = json_integer_value(v);
            json_object_set_new(s->requested_rcs, rc, json_true());
        }
        s->width += gs->nres ? gs->nres : 1;
    }
    s->merged = calloc((size_t)s->width + 1, sizeof(*s->merged));
    s->provs = calloc((size_t)s->width + 1, sizeof(*s->provs));
    if (!s->merged || !s->provs)
        return nb_error(s->ctx, 500, PLC_ERR_DEFAULT, "out of memory");
    return 0;
}

/* Groups providers by tree: members[mstart[r]..mstart[r+1]) for root r. */
static int index_trees(struct search *s)
{
    int n = s->w.n;
    s->members = malloc((size_t)(n ? n : 1) * sizeof(int));
    s->mstart = calloc((size_t)n + 2, sizeof(int));
    s->used_rp = calloc((size_t)n + 1, sizeof(bool));
    s->root_done = calloc((size_t)n + 1, sizeof(bool));
    if (!s->members || !s->mstart || !s->used_rp || !s->root_done)
        return nb_error(s->ctx, 500, PLC_ERR_DEFAULT, "out of memory");
    for (int i = 0; i < n; i++)
        s->mstart[s->w.rp[i].root + 1]++;
    for (int r = 0; r < n; r++)
        s->mstart[r + 1] += s->mstart[r];
    _cleanup_free_ int *fill = malloc((size_t)(n ? n : 1) * sizeof(int));
    if (!fill)
        return nb_error(s->ctx, 500, PLC_ERR_DEFAULT, "out of memory");
    memcpy(fill, s->mstart, (size_t)n * sizeof(int));
    for (int i = 0; i < n; i++)
        s->members[fill[s->w.rp[i].root]++] = i;
    return 0;
}

static void search_free(struct search *s)
{
    for (int gi = 0; s->gs && gi < s->rq->ngroups; gi++) {
        free(s->gs[gi].rcs);
        free(s->gs[gi].amounts);
        free(s->gs[gi].rps);
    }
    free(s->gs);
    free(s->merged);
    free(s->provs);
    free(s->members);
    free(s->mstart);
    free(s->used_rp);
    free(s->root_done);
    free(s->res);
    free(s->mpool);
    free(s->mappool);
    json_decref(s->requested_rcs);
    json_decref(s->root_required);
    plc_world_free(&s->w);
}

/* Runs the search of rq into s (search_free frees it). 0/-1. */
static int run_search(struct search *s, struct nb_ctx *ctx, struct plc_acreq *rq)
{
    memset(s, 0, sizeof(*s));
    s->ctx = ctx;
    s->rq = rq;
    s->nested_aware = rq->mv >= 29;
    s->requested_rcs = json_object();
    s->root_required = json_array();
    size_t ri;
    json_t *rt;
    json_array_foreach (rq->root_required, ri, rt) {
        json_array_append_new(s->root_required, json_pack("[O]", rt));
    }
    if (rq->ngroups > 64)
        return nb_error(ctx, 400, PLC_ERR_DEFAULT, "Too many request groups");
    if (plc_world_load(ctx, &s->w, PLC_W_INV) < 0 || group_state_init(s) < 0 || index_trees(s) < 0)
        return -1;
    for (int r = 0; r < s->w.n; r++) {
        if (s->w.rp[r].root != r)
            continue;
        if (rq->limit && s->nresults >= rq->limit)
            break;
        if (search_tree(s, r) < 0)
            return -1;
    }
    return 0;
}

json_t *plc_candidates(struct nb_ctx *ctx, struct plc_acreq *rq)
{
    struct search s;
    json_t *out = run_search(&s, ctx, rq) == 0 ? answer_json(&s) : NULL;
    search_free(&s);
    return out;
}

char *plc_candidates_text(struct nb_ctx *ctx, struct plc_acreq *rq, size_t *len)
{
    struct search s;
    char *out = run_search(&s, ctx, rq) == 0 ? answer_text(&s, len) : NULL;
    search_free(&s);
    return out;
}

/* Capacity and usage of class rc at rp, 0 and 0 without that inventory. */
static void usage_of(const struct plc_rp *rp, const char *rc, long long *cap, long long *used)
{
    const struct plc_inv *inv = plc_rp_inv(rp, rc);
    *cap = inv ? plc_capacity(inv->total, inv->reserved, inv->ratio) : 0;
    *used = inv ? inv->used : 0;
}

int plc_candidates_list(struct nb_ctx *ctx, struct plc_acreq *rq, struct nb_placement_cand **out,
                        size_t *n, size_t *nreq)
{
    struct search s;
    *out = NULL;
    *n = *nreq = 0;
    int rc = run_search(&s, ctx, rq);
    if (rc == 0) {
        *out = calloc((size_t)s.nmpool + 1, sizeof(**out));
        if (!*out)
            abort();
        for (int i = 0; i < s.nresults; i++) {
            const struct merged *m = &s.mpool[s.res[i].m_off];
            for (int j = 0; j < s.res[i].nm; j++) {
                if (j && m[j].rp == m[j - 1].rp)
                    continue;
                const struct plc_rp *rp = &s.w.rp[m[j].rp];
                struct nb_placement_cand *c = &(*out)[(*n)++];
                c->request = i;
                nb_strlcpy(c->rp_uuid, rp->uuid, sizeof(c->rp_uuid));
                usage_of(rp, "VCPU", &c->vcpu_capacity, &c->vcpu_used);
                usage_of(rp, "MEMORY_MB", &c->ram_capacity, &c->ram_used);
                usage_of(rp, "DISK_GB", &c->disk_capacity, &c->disk_used);
            }
        }
        *nreq = (size_t)s.nresults;
    }
    search_free(&s);
    return rc;
}

void plc_groups_free(struct plc_acreq *rq)
{
    for (int i = 0; rq->groups && i < rq->ngroups; i++) {
        struct plc_group *g = &rq->groups[i];
        json_decref(g->resources);
        json_decref(g->required);
        json_decref(g->forbidden);
        json_decref(g->member_of);
        json_decref(g->forbidden_aggs);
    }
    free(rq->groups);
    json_decref(rq->root_required);
    json_decref(rq->root_forbidden);
    json_decref(rq->same_subtree);
    memset(rq, 0, sizeof(*rq));
}
