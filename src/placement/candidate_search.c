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
#include "common/util.h"
#include "placement/internal.h"

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
    /* output */
    json_t *areqs;
    json_t *summaries;
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

    int mv = rq->mv;
    json_t *areq;
    if (mv >= 12) {
        json_t *allocs = json_object();
        for (int j = 0; j < nm; j++) {
            const char *uuid = s->w.rp[m[j].rp].uuid;
            json_t *a = json_object_get(allocs, uuid);
            if (!a) {
                a = json_object();
                json_object_set_new(a, "resources", json_object());
                json_object_set_new(allocs, uuid, a);
            }
            json_object_set_new(json_object_get(a, "resources"), m[j].rc,
                                json_integer(m[j].amount));
        }
        areq = json_object();
        json_object_set_new(areq, "allocations", allocs);
        if (mv >= 34) {
            json_t *maps = json_object();
            for (int gi = 0; gi < rq->ngroups; gi++) {
                struct group_state *gs = &s->gs[gi];
                int width = gs->nres ? gs->nres : 1;
                json_t *lst = json_object_get(maps, gs->g->suffix);
                if (!lst) {
                    lst = json_array();
                    json_object_set_new(maps, gs->g->suffix, lst);
                }
                for (int k = 0; k < width; k++) {
                    const char *uuid = s->w.rp[gs->rps[choice[gi] * width + k]].uuid;
                    if (!plc_array_has(lst, uuid))
                        json_array_append_new(lst, json_string(uuid));
                }
            }
            json_object_set_new(areq, "mappings", maps);
        }
    } else {
        json_t *list = json_array();
        for (int j = 0; j < nm; j++) {
            const char *uuid = s->w.rp[m[j].rp].uuid;
            if (j == 0 || m[j].rp != m[j - 1].rp)
                json_array_append_new(list, json_pack("{s:{s:s}, s:{}}", "resource_provider",
                                                      "uuid", uuid, "resources"));
            json_object_set_new(
                json_object_get(json_array_get(list, json_array_size(list) - 1), "resources"),
                m[j].rc, json_integer(m[j].amount));
        }
        areq = json_pack("{s:o}", "allocations", list);
    }
    json_array_append_new(s->areqs, areq);
    s->nresults++;
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

static json_t *summary_for(struct search *s, int p)
{
    const struct plc_rp *rp = &s->w.rp[p];
    int mv = s->rq->mv;
    json_t *res = json_object();
    for (int k = 0; k < rp->ninv; k++) {
        const struct plc_inv *inv = &rp->inv[k];
        if (mv < 27 && !json_object_get(s->requested_rcs, inv->rc))
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
    json_decref(s->requested_rcs);
    json_decref(s->root_required);
    plc_world_free(&s->w);
}

json_t *plc_candidates(struct nb_ctx *ctx, struct plc_acreq *rq)
{
    struct search s = {.ctx = ctx, .rq = rq, .nested_aware = rq->mv >= 29};
    s.requested_rcs = json_object();
    s.root_required = json_array();
    size_t ri;
    json_t *rt;
    json_array_foreach (rq->root_required, ri, rt) {
        json_array_append_new(s.root_required, json_pack("[O]", rt));
    }
    json_t *out = NULL;
    if (rq->ngroups > 64) {
        nb_error(ctx, 400, PLC_ERR_DEFAULT, "Too many request groups");
        goto done;
    }
    if (plc_world_load(ctx, &s.w, PLC_W_INV) < 0 || group_state_init(&s) < 0 || index_trees(&s) < 0)
        goto done;
    s.areqs = json_array();
    for (int r = 0; r < s.w.n; r++) {
        if (s.w.rp[r].root != r)
            continue;
        if (rq->limit && s.nresults >= rq->limit)
            break;
        if (search_tree(&s, r) < 0) {
            json_decref(s.areqs);
            goto done;
        }
    }
    json_t *sums = json_object();
    for (int i = 0; i < s.w.n; i++) {
        if (!s.root_done[s.w.rp[i].root])
            continue;
        if (!s.nested_aware && s.w.has_trees && !s.used_rp[i])
            continue;
        json_object_set_new(sums, s.w.rp[i].uuid, summary_for(&s, i));
    }
    out = json_pack("{s:o, s:o}", "allocation_requests", s.areqs, "provider_summaries", sums);
done:
    search_free(&s);
    return out;
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
