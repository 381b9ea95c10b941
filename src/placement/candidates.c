/* candidates.c - GET /placement/allocation_candidates (1.10+), the
 * in-process candidate search and the shortage explanation.
 *
 * The search reads one snapshot (world.c: providers, inventories with
 * usage, traits, aggregates — four queries whatever the number of
 * providers) and then works tree by tree, as placement does:
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
 * Results come in provider-id order and stop at `limit`. Provider
 * summaries cover every provider of the trees in the result. Sharing
 * providers (MISC_SHARES_VIA_AGGREGATE) are not considered. */
#include "common/cleanup.h"
#include "common/http.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "db/db.h"
#include "placement/internal.h"
#include "placement/placement.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- query-string parsers (shared with the provider list) ---- */

int plc_parse_resources(struct nb_ctx *ctx, const char *qs, json_t **out)
{
    *out = NULL;
    const char *p = qs;
    while (*p == ' ' || *p == '\t')
        p++;
    if (!*p)
        return nb_error(ctx, 400, PLC_ERR_DEFAULT,
                        "Badly formed resources parameter. Expected resources query string "
                        "parameter in form: ?resources=VCPU:2,MEMORY_MB:1024. Got: empty "
                        "string.");
    json_t *res = json_object();
    _cleanup_free_ char *copy = nb_strdup_printf("%s", qs);
    /* strtok would merge empty items; walk commas by hand. */
    char *item = copy;
    while (item) {
        char *comma = strchr(item, ',');
        if (comma)
            *comma = '\0';
        char *colon = strchr(item, ':');
        if (!colon || strchr(colon + 1, ':')) {
            json_decref(res);
            return nb_error(ctx, 400, PLC_ERR_DEFAULT,
                            "Badly formed resources parameter. Expected resources query "
                            "string parameter in form: ?resources=VCPU:2,MEMORY_MB:1024. Got: "
                            "%s.",
                            item);
        }
        *colon = '\0';
        char *end = NULL;
        const char *num = colon + 1;
        while (*num == ' ')
            num++;
        long long amount = strtoll(num, &end, 10);
        while (end && *end == ' ')
            end++;
        if (!*num || !end || *end) {
            json_decref(res);
            return nb_error(ctx, 400, PLC_ERR_DEFAULT,
                            "Requested resource %s expected positive integer amount. Got: %s.",
                            item, colon + 1);
        }
        if (amount < 1) {
            json_decref(res);
            return nb_error(ctx, 400, PLC_ERR_DEFAULT,
                            "Requested resource %s requires amount >= 1. Got: %lld.", item, amount);
        }
        json_object_set_new(res, item, json_integer(amount));
        item = comma ? comma + 1 : NULL;
    }
    *out = res;
    return 0;
}

/* Trims spaces in place; returns s. */
static char *trim(char *s)
{
    while (*s == ' ')
        s++;
    size_t n = strlen(s);
    while (n && s[n - 1] == ' ')
        s[--n] = '\0';
    return s;
}

static bool array_has(json_t *arr, const char *s)
{
    size_t i;
    json_t *v;
    json_array_foreach (arr, i, v) {
        if (strcmp(json_string_value(v), s) == 0)
            return true;
    }
    return false;
}

/* One value of required<N>. */
static int parse_required_one(struct nb_ctx *ctx, const char *val, int mv, json_t *required,
                              json_t *forbidden)
{
    bool allow_forbidden = mv >= 22, allow_any = mv >= 39;
    _cleanup_free_ char *copy = nb_strdup_printf("%s", val);
    if (nb_startswith(val, "in:")) {
        if (!allow_any)
            return nb_error(ctx, 400, PLC_ERR_DEFAULT,
                            "Invalid query string parameters: The format "
                            "'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' only supported since "
                            "microversion 1.39. Got: %s",
                            val);
        json_t *any = json_array();
        char *item = copy + 3;
        while (item) {
            char *comma = strchr(item, ',');
            if (comma)
                *comma = '\0';
            char *t = trim(item);
            if (!*t) {
                json_decref(any);
                return nb_error(ctx, 400, PLC_ERR_DEFAULT,
                                "Invalid query string parameters: Expected 'required' "
                                "parameter value of the form: in:HW_CPU_X86_VMX,CUSTOM_MAGIC. "
                                "Got an empty trait in: %s",
                                val);
            }
            if (*t == '!') {
                json_decref(any);
                return nb_error(ctx, 400, PLC_ERR_DEFAULT,
                                "Invalid query string parameters: The format "
                                "'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' does not support forbidden "
                                "traits. Got: %s",
                                val);
            }
            if (!array_has(any, t))
                json_array_append_new(any, json_string(t));
            item = comma ? comma + 1 : NULL;
        }
        json_array_append_new(required, any);
        return 0;
    }
    char *item = copy;
    while (item) {
        char *comma = strchr(item, ',');
        if (comma)
            *comma = '\0';
        char *t = trim(item);
        bool neg = *t == '!';
        while (*t == '!')
            t++;
        if (!*t)
            return nb_error(ctx, 400, PLC_ERR_DEFAULT,
                            "Invalid query string parameters: Expected 'required' parameter "
                            "value of the form: %s. Got an empty trait in: %s",
                            allow_forbidden ? "HW_CPU_X86_VMX,!CUSTOM_MAGIC"
                                            : "HW_CPU_X86_VMX,CUSTOM_MAGIC",
                            val);
        if (neg && !allow_forbidden)
            return nb_error(ctx, 400, PLC_ERR_DEFAULT,
                            "Invalid query string parameters: Expected 'required' parameter "
                            "value of the form: HW_CPU_X86_VMX,CUSTOM_MAGIC. Got: %s",
                            val);
        if (neg) {
            if (!array_has(forbidden, t))
                json_array_append_new(forbidden, json_string(t));
        } else {
            json_array_append_new(required, json_pack("[s]", t));
        }
        item = comma ? comma + 1 : NULL;
    }
    return 0;
}

int plc_parse_required(struct nb_ctx *ctx, json_t *values, int mv, json_t **required,
                       json_t **forbidden)
{
    *required = json_array();
    *forbidden = json_array();
    size_t n = json_array_size(values);
    /* Before 1.39 only the last of repeated keys counts. */
    size_t first = mv >= 39 || n == 0 ? 0 : n - 1;
    for (size_t i = first; i < n; i++)
        if (parse_required_one(ctx, json_string_value(json_array_get(values, i)), mv, *required,
                               *forbidden) < 0)
            return -1;
    return 0;
}

int plc_parse_member_of(struct nb_ctx *ctx, json_t *values, const char *suffix, int mv,
                        json_t **member_of, json_t **forbidden)
{
    *member_of = json_array();
    *forbidden = json_array();
    if (mv < 24 && json_array_size(values) > 1)
        return nb_error(ctx, 400, PLC_ERR_DEFAULT,
                        "Multiple member_of%s parameters are not supported", suffix);
    size_t i;
    json_t *jv;
    json_array_foreach (values, i, jv) {
        const char *v = json_string_value(jv);
        if (strchr(v, ',') && !nb_startswith(v, "in:") && !nb_startswith(v, "!in:"))
            return nb_error(ctx, 400, PLC_ERR_DEFAULT,
                            "Multiple values for 'member_of' must be prefixed with the 'in:' "
                            "or '!in:' keyword using the valid microversion. Got: %s",
                            v);
        bool neg = v[0] == '!';
        const char *list = v + (neg ? 1 : 0);
        if (nb_startswith(list, "in:"))
            list += 3;
        _cleanup_free_ char *copy = nb_strdup_printf("%s", list);
        json_t *set = json_array();
        char *item = copy;
        while (item) {
            char *comma = strchr(item, ',');
            if (comma)
                *comma = '\0';
            char norm[37];
            if (!plc_uuid_normalize(item, norm)) {
                json_decref(set);
                return nb_error(ctx, 400, PLC_ERR_DEFAULT,
                                "Invalid query string parameters: Expected 'member_of' "
                                "parameter to contain valid UUID(s). Got: %s",
                                item);
            }
            if (!array_has(set, item))
                json_array_append_new(set, json_string(item));
            item = comma ? comma + 1 : NULL;
        }
        if (neg) {
            if (mv < 32) {
                json_decref(set);
                return nb_error(ctx, 400, PLC_ERR_DEFAULT,
                                "Forbidden member_of%s parameters are not supported in the "
                                "specified microversion",
                                suffix);
            }
            json_array_extend(*forbidden, set);
            json_decref(set);
        } else {
            json_array_append_new(*member_of, set);
        }
    }
    return 0;
}

int plc_check_traits_exist(struct nb_ctx *ctx, json_t *required, json_t *forbidden,
                           const char *prefix)
{
    _cleanup_json_ json_t *all = json_array();
    size_t i, j;
    json_t *any, *t;
    json_array_foreach (required, i, any) {
        json_array_foreach (any, j, t) {
            if (!array_has(all, json_string_value(t)))
                json_array_append(all, t);
        }
    }
    json_array_foreach (forbidden, i, t) {
        if (!array_has(all, json_string_value(t)))
            json_array_append(all, t);
    }
    _cleanup_free_ char *missing = plc_traits_missing(ctx, all);
    if (!missing)
        return -1;
    if (*missing)
        return nb_error(ctx, 400, PLC_ERR_DEFAULT, "%sNo such trait(s): %s.", prefix, missing);
    return 0;
}

/* ---- the search ---- */

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

struct search {
    struct nb_ctx *ctx;
    struct plc_acreq *rq;
    struct plc_world w;
    int *members; /* providers grouped by root, in id order */
    int *mstart;  /* mstart[root] .. mstart[root+1] into members */
    struct group_state *gs;
    bool nested_aware;
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

struct merged {
    int rp;
    const char *rc;
    long long amount;
};

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

/* Checks one combination (choice[g] = candidate index per group) and, if
 * it qualifies and is new, appends it to the result. */
static int emit_combo(struct search *s, int root, const int *choice, json_t *seen)
{
    struct plc_acreq *rq = s->rq;
    struct merged m[256];
    int nm = 0;
    /* group_policy=isolate: granular groups on distinct providers. */
    if (rq->isolate) {
        int provs[64], np = 0, ngran = 0;
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
            return 0;
    }
    /* same_subtree: providers of the named groups share a subtree. */
    size_t si;
    json_t *set;
    json_array_foreach (rq->same_subtree, si, set) {
        int provs[64], np = 0;
        for (int gi = 0; gi < rq->ngroups; gi++) {
            if (!array_has(set, rq->groups[gi].suffix))
                continue;
            struct group_state *gs = &s->gs[gi];
            int width = gs->nres ? gs->nres : 1;
            for (int k = 0; k < width && np < 64; k++)
                provs[np++] = gs->rps[choice[gi] * width + k];
        }
        if (!same_subtree_ok(&s->w, provs, np))
            return 0;
    }
    for (int gi = 0; gi < rq->ngroups; gi++) {
        struct group_state *gs = &s->gs[gi];
        for (int k = 0; k < gs->nres; k++) {
            int p = gs->rps[choice[gi] * gs->nres + k];
            int j;
            for (j = 0; j < nm; j++)
                if (m[j].rp == p && strcmp(m[j].rc, gs->rcs[k]) == 0)
                    break;
            if (j == nm) {
                if (nm == 256)
                    return 0;
                m[nm++] = (struct merged){p, gs->rcs[k], 0};
            }
            m[j].amount += gs->amounts[k];
        }
    }
    /* Amounts summed across groups must still fit. */
    for (int j = 0; j < nm; j++) {
        const struct plc_inv *inv = plc_rp_inv(&s->w.rp[m[j].rp], m[j].rc);
        if (inv->used + m[j].amount > plc_capacity(inv->total, inv->reserved, inv->ratio) ||
            m[j].amount > inv->max_unit)
            return 0;
    }
    qsort(m, (size_t)nm, sizeof(m[0]), merged_cmp);
    int nprov = 0;
    for (int j = 0; j < nm; j++)
        nprov += j == 0 || m[j].rp != m[j - 1].rp;
    if (!s->nested_aware && s->w.has_trees && nprov > 1)
        return 0;
    char key[4096] = "";
    for (int j = 0; j < nm; j++) {
        size_t len = strlen(key);
        snprintf(key + len, sizeof(key) - len, "%d:%s:%lld;", m[j].rp, m[j].rc, m[j].amount);
    }
    if (json_object_get(seen, key))
        return 0;
    json_object_set_new(seen, key, json_true());

    int mv = rq->mv;
    json_t *areq;
    if (mv >= 12) {
        json_t *allocs = json_object();
        for (int j = 0; j < nm; j++) {
            const char *uuid = s->w.rp[m[j].rp].uuid;
            json_t *a = json_object_get(allocs, uuid);
            if (!a) {
                a = json_pack("{s:{}}", "resources");
                json_object_set_new(allocs, uuid, a);
            }
            json_object_set_new(json_object_get(a, "resources"), m[j].rc,
                                json_integer(m[j].amount));
        }
        areq = json_pack("{s:o}", "allocations", allocs);
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
                    if (!array_has(lst, uuid))
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
    _cleanup_json_ json_t *seen = json_object();
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
        json_object_set_new(
            res, inv->rc,
            json_pack("{s:I, s:I}", "capacity",
                      (json_int_t)plc_capacity(inv->total, inv->reserved, inv->ratio), "used",
                      (json_int_t)inv->used));
    }
    json_t *sum = json_pack("{s:o}", "resources", res);
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
    }
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

/* ---- GET /allocation_candidates ---- */

/* Splits "resources12" into prefix and suffix if it is a group key at mv. */
static bool group_key(const char *key, int mv, const char **prefix, const char **suffix)
{
    static const char *const prefixes[] = {"resources", "required", "member_of", "in_tree"};
    for (size_t i = 0; i < 4; i++) {
        if (i == 3 && mv < 31)
            continue;
        size_t n = strlen(prefixes[i]);
        if (strncmp(key, prefixes[i], n) != 0)
            continue;
        const char *suf = key + n;
        size_t len = strlen(suf);
        bool ok = true;
        if (mv < 25) {
            ok = len == 0;
        } else if (mv < 33) {
            ok = len == 0 || (suf[0] >= '1' && suf[0] <= '9');
            for (size_t k = 0; ok && k < len; k++)
                ok = suf[k] >= '0' && suf[k] <= '9';
        } else {
            ok = len <= 64;
            for (size_t k = 0; ok && k < len; k++) {
                char c = suf[k];
                ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                     c == '_' || c == '-';
            }
        }
        if (ok) {
            *prefix = prefixes[i];
            *suffix = suf;
            return true;
        }
    }
    return false;
}

static int ac_check_keys(struct nb_ctx *ctx, json_t *q, int mv)
{
    const char *key;
    json_t *v;
    json_object_foreach (q, key, v) {
        const char *prefix, *suffix;
        bool ok;
        if (mv < 25) {
            ok = strcmp(key, "resources") == 0 || (mv >= 16 && strcmp(key, "limit") == 0) ||
                 (mv >= 17 && strcmp(key, "required") == 0) ||
                 (mv >= 21 && strcmp(key, "member_of") == 0);
        } else {
            ok = group_key(key, mv, &prefix, &suffix) || strcmp(key, "limit") == 0 ||
                 strcmp(key, "group_policy") == 0 ||
                 (mv >= 35 && strcmp(key, "root_required") == 0) ||
                 (mv >= 36 && strcmp(key, "same_subtree") == 0);
        }
        if (!ok)
            return nb_error(ctx, 400, PLC_ERR_DEFAULT,
                            "Invalid query string parameters: Additional properties are not "
                            "allowed ('%s' was unexpected)",
                            key);
    }
    if (mv < 25 && !json_object_get(q, "resources"))
        return nb_error(ctx, 400, PLC_ERR_DEFAULT,
                        "Invalid query string parameters: 'resources' is a required property");
    return 0;
}

static struct plc_group *group_for(struct plc_acreq *rq, const char *suffix)
{
    for (int i = 0; i < rq->ngroups; i++)
        if (strcmp(rq->groups[i].suffix, suffix) == 0)
            return &rq->groups[i];
    struct plc_group *g = &rq->groups[rq->ngroups++];
    memset(g, 0, sizeof(*g));
    nb_strlcpy(g->suffix, suffix, sizeof(g->suffix));
    g->same_provider = *suffix != '\0';
    return g;
}

static int ac_parse_groups(struct nb_ctx *ctx, json_t *q, int mv, struct plc_acreq *rq)
{
    rq->groups = calloc(json_object_size(q) + 1, sizeof(*rq->groups));
    if (!rq->groups)
        return nb_error(ctx, 500, PLC_ERR_DEFAULT, "out of memory");
    const char *key;
    json_t *vals;
    json_object_foreach (q, key, vals) {
        const char *prefix, *suffix;
        if (!group_key(key, mv, &prefix, &suffix))
            continue;
        struct plc_group *g = group_for(rq, suffix);
        const char *last = json_string_value(json_array_get(vals, json_array_size(vals) - 1));
        if (strcmp(prefix, "resources") == 0) {
            json_decref(g->resources);
            if (plc_parse_resources(ctx, last, &g->resources) < 0)
                return -1;
        } else if (strcmp(prefix, "required") == 0) {
            if (plc_parse_required(ctx, vals, mv, &g->required, &g->forbidden) < 0)
                return -1;
        } else if (strcmp(prefix, "member_of") == 0) {
            if (plc_parse_member_of(ctx, vals, suffix, mv, &g->member_of, &g->forbidden_aggs) < 0)
                return -1;
        } else if (!plc_uuid_normalize(last, g->in_tree)) {
            return nb_error(ctx, 400, PLC_ERR_DEFAULT,
                            "Invalid query string parameters: Expected 'in_tree' parameter to "
                            "be a format of uuid. Got: %s",
                            last);
        }
    }
    for (int i = 0; i < rq->ngroups; i++)
        if (!rq->groups[i].resources)
            rq->groups[i].resources = json_object();
    return 0;
}

/* lib.RequestGroup's orphan/resourceless and conflict checks. */
static int ac_check_groups(struct nb_ctx *ctx, struct plc_acreq *rq, int mv)
{
    char bad[512] = "";
    if (mv >= 36) {
        int with_res = 0;
        for (int i = 0; i < rq->ngroups; i++)
            with_res += json_object_size(rq->groups[i].resources) > 0;
        if (with_res == 0)
            return nb_error(ctx, 400, "placement.query.missing_value",
                            "There must be at least one resources or resources[$S] parameter.");
        for (int i = 0; i < rq->ngroups; i++) {
            struct plc_group *g = &rq->groups[i];
            bool in_subtree = false;
            size_t k;
            json_t *set;
            json_array_foreach (rq->same_subtree, k, set) {
                in_subtree = in_subtree || array_has(set, g->suffix);
            }
            if (json_object_size(g->resources) == 0 && !in_subtree) {
                size_t len = strlen(bad);
                snprintf(bad + len, sizeof(bad) - len, "%s'%s'", len ? ", " : "", g->suffix);
            }
        }
        if (bad[0])
            return nb_error(ctx, 400, PLC_ERR_QP_BAD,
                            "Resourceless suffixed group request should be specified in "
                            "`same_subtree` query param: bad group(s) - [%s].",
                            bad);
        size_t k, j;
        json_t *set, *suf;
        json_array_foreach (rq->same_subtree, k, set) {
            json_array_foreach (set, j, suf) {
                bool found = false;
                for (int i = 0; i < rq->ngroups; i++)
                    found = found || strcmp(rq->groups[i].suffix, json_string_value(suf)) == 0;
                if (!found)
                    return nb_error(ctx, 400, PLC_ERR_QP_BAD,
                                    "Real suffixes should be specified in `same_subtree`: ['%s'] "
                                    "not found.",
                                    json_string_value(suf));
            }
        }
    } else {
        for (int i = 0; i < rq->ngroups; i++) {
            struct plc_group *g = &rq->groups[i];
            if (json_array_size(g->required) && !json_object_size(g->resources))
                return nb_error(ctx, 400, PLC_ERR_DEFAULT,
                                "All traits parameters must be associated with resources.  "
                                "Found the following orphaned traits keys: required%s",
                                g->suffix);
            if ((json_array_size(g->member_of) || json_array_size(g->forbidden_aggs)) &&
                !json_object_size(g->resources))
                return nb_error(ctx, 400, PLC_ERR_DEFAULT,
                                "All member_of parameters must be associated with resources. "
                                "Found the following orphaned member_of keys: member_of%s",
                                g->suffix);
            if (!json_object_size(g->resources))
                return nb_error(ctx, 400, PLC_ERR_DEFAULT,
                                "All request groups must specify resources.");
        }
        if (rq->ngroups == 0)
            return nb_error(ctx, 400, PLC_ERR_DEFAULT,
                            "At least one request group (`resources` or `resources{$S}`) is "
                            "required.");
    }
    if (mv >= 22) {
        for (int i = 0; i < rq->ngroups; i++) {
            struct plc_group *g = &rq->groups[i];
            size_t k, j;
            json_t *any, *t;
            json_array_foreach (g->required, k, any) {
                bool all = json_array_size(any) > 0;
                json_array_foreach (any, j, t) {
                    all = all && array_has(g->forbidden, json_string_value(t));
                }
                if (all) {
                    char names[512] = "";
                    json_array_foreach (any, j, t) {
                        size_t len = strlen(names);
                        snprintf(names + len, sizeof(names) - len, "%s%s", len ? ", " : "",
                                 json_string_value(t));
                    }
                    return nb_error(ctx, 400, PLC_ERR_DEFAULT,
                                    "Conflicting required and forbidden traits found in the "
                                    "following traits keys: required%s: (%s)",
                                    g->suffix, names);
                }
            }
        }
    }
    return 0;
}

static int ac_request_wide(struct nb_ctx *ctx, json_t *q, int mv, struct plc_acreq *rq)
{
    json_t *limit = json_object_get(q, "limit");
    if (limit) {
        const char *l = json_string_value(json_array_get(limit, json_array_size(limit) - 1));
        bool ok = l[0] >= '1' && l[0] <= '9';
        for (const char *c = l; ok && *c; c++)
            ok = *c >= '0' && *c <= '9';
        if (!ok)
            return nb_error(ctx, 400, PLC_ERR_DEFAULT,
                            "Invalid query string parameters: '%s' does not match "
                            "'^[1-9][0-9]*$'",
                            l);
        rq->limit = (int)strtol(json_string_value(json_array_get(limit, 0)), NULL, 10);
    }
    const char *gp = plc_query_last(q, "group_policy");
    if (gp) {
        if (strcmp(gp, "none") != 0 && strcmp(gp, "isolate") != 0)
            return nb_error(ctx, 400, PLC_ERR_DEFAULT,
                            "Invalid query string parameters: '%s' is not one of ['none', "
                            "'isolate']",
                            gp);
        rq->isolate = strcmp(gp, "isolate") == 0;
    }
    json_t *rr = json_object_get(q, "root_required");
    if (rr) {
        if (json_array_size(rr) > 1)
            return nb_error(ctx, 400, PLC_ERR_QP_DUP,
                            "Query parameter 'root_required' may be specified only once.");
        _cleanup_json_ json_t *req = NULL, *forb = NULL;
        int sub = mv < 39 ? mv : 38; /* root_required has no in: form */
        if (plc_parse_required(ctx, rr, sub, &req, &forb) < 0)
            return -1;
        rq->root_required = json_array();
        size_t i;
        json_t *any;
        json_array_foreach (req, i, any) {
            json_t *t = json_array_get(any, 0);
            if (array_has(forb, json_string_value(t)))
                return nb_error(ctx, 400, PLC_ERR_QP_BAD,
                                "Conflicting required and forbidden traits found in "
                                "root_required: %s",
                                json_string_value(t));
            json_array_append(rq->root_required, t);
        }
        rq->root_forbidden = json_incref(forb);
    }
    json_t *ss = json_object_get(q, "same_subtree");
    if (ss) {
        rq->same_subtree = json_array();
        size_t i;
        json_t *v;
        json_array_foreach (ss, i, v) {
            _cleanup_free_ char *copy = nb_strdup_printf("%s", json_string_value(v));
            json_t *set = json_array();
            json_array_append_new(rq->same_subtree, set);
            char *item = copy;
            while (item) {
                char *comma = strchr(item, ',');
                if (comma)
                    *comma = '\0';
                char *t = trim(item);
                if (!*t)
                    return nb_error(ctx, 400, PLC_ERR_QP_BAD,
                                    "Empty string (unsuffixed group) can not be specified in "
                                    "`same_subtree` ");
                if (!array_has(set, t))
                    json_array_append_new(set, json_string(t));
                item = comma ? comma + 1 : NULL;
            }
        }
    }
    return 0;
}

/* Resource classes and traits named by the request must exist. */
static int ac_check_names(struct nb_ctx *ctx, struct plc_acreq *rq)
{
    for (int i = 0; i < rq->ngroups; i++) {
        struct plc_group *g = &rq->groups[i];
        const char *rc;
        json_t *v;
        json_object_foreach (g->resources, rc, v) {
            if (!plc_rc_exists(ctx, rc))
                return ctx->err_status
                           ? -1
                           : nb_error(ctx, 400, PLC_ERR_DEFAULT,
                                      "Invalid resource class in resources parameter: No such "
                                      "resource class %s.",
                                      rc);
        }
        if (plc_check_traits_exist(ctx, g->required, g->forbidden, "") < 0)
            return -1;
    }
    if (rq->root_required || rq->root_forbidden) {
        _cleanup_json_ json_t *req = json_array();
        size_t i;
        json_t *t;
        json_array_foreach (rq->root_required, i, t) {
            json_array_append_new(req, json_pack("[O]", t));
        }
        if (plc_check_traits_exist(ctx, req, rq->root_forbidden, "") < 0)
            return -1;
    }
    return 0;
}

static int ac_list(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    int mv = plc_mv(ctx);
    if (mv < 10)
        return plc_not_at_version(ctx);
    if (plc_require_admin(ctx, "placement:allocation_candidates:list") < 0)
        return -1;
    _cleanup_json_ json_t *q = plc_query(req);
    struct plc_acreq rq = {.mv = mv};
    json_t *body = NULL;
    if (ac_check_keys(ctx, q, mv) < 0 || ac_request_wide(ctx, q, mv, &rq) < 0 ||
        ac_parse_groups(ctx, q, mv, &rq) < 0 || ac_check_groups(ctx, &rq, mv) < 0)
        goto out;
    if (!rq.isolate && !plc_query_last(q, "group_policy")) {
        int granular = 0;
        for (int i = 0; i < rq.ngroups; i++)
            granular += rq.groups[i].same_provider;
        if (granular > 1) {
            nb_error(ctx, 400, PLC_ERR_DEFAULT,
                     "The \"group_policy\" parameter is required when specifying more than "
                     "one \"resources{N}\" parameter.");
            goto out;
        }
    }
    if (ac_check_names(ctx, &rq) < 0)
        goto out;
    body = plc_candidates(ctx, &rq);
out:
    plc_groups_free(&rq);
    if (!body)
        return -1;
    plc_cache_headers(ctx, resp);
    return nb_resp_json(resp, 200, body);
}

void plc_routes_candidates(void)
{
    nb_http_route("GET", "/placement/allocation_candidates", ac_list, 0);
}

/* ---- in-process ---- */

/* {rc: n} without zero amounts; 400 on a bad name or amount. */
static json_t *nonzero_resources(struct nb_ctx *ctx, json_t *resources)
{
    if (!json_is_object(resources)) {
        nb_error(ctx, 400, PLC_ERR_DEFAULT, "resources must be an object");
        return NULL;
    }
    json_t *out = json_object();
    const char *rc;
    json_t *v;
    json_object_foreach (resources, rc, v) {
        long long x;
        if (!plc_valid_rc_name(rc) || !plc_json_is_int(v, &x) || x < 0) {
            json_decref(out);
            nb_error(ctx, 400, PLC_ERR_DEFAULT, "Invalid amount for resource class %s", rc);
            return NULL;
        }
        if (x > 0)
            json_object_set_new(out, rc, json_integer(x));
    }
    return out;
}

json_t *nb_placement_candidates(struct nb_ctx *ctx, json_t *resources, json_t *required,
                                json_t *member_of, int limit)
{
    struct plc_acreq rq = {.mv = 36, .limit = limit > 0 ? limit : 0};
    rq.groups = calloc(1, sizeof(*rq.groups));
    if (!rq.groups) {
        nb_error(ctx, 500, PLC_ERR_DEFAULT, "out of memory");
        return NULL;
    }
    rq.ngroups = 1;
    struct plc_group *g = &rq.groups[0];
    g->resources = nonzero_resources(ctx, resources);
    g->required = json_array();
    g->forbidden = json_array();
    json_t *out = NULL;
    if (!g->resources)
        goto done;
    if (json_object_size(g->resources) == 0) {
        nb_error(ctx, 400, PLC_ERR_DEFAULT,
                 "At least one request group (`resources` or `resources{$S}`) is required.");
        goto done;
    }
    size_t i;
    json_t *t;
    json_array_foreach (required, i, t) {
        const char *name = json_string_value(t);
        if (!name)
            continue;
        if (name[0] == '!')
            json_array_append_new(g->forbidden, json_string(name + 1));
        else
            json_array_append_new(g->required, json_pack("[s]", name));
    }
    if (json_array_size(member_of)) {
        g->member_of = json_array();
        json_array_append(g->member_of, member_of);
    }
    if (ac_check_names(ctx, &rq) < 0)
        goto done;
    out = plc_candidates(ctx, &rq);
done:
    plc_groups_free(&rq);
    return out;
}

char *nb_placement_explain_shortage(struct nb_ctx *ctx, json_t *resources)
{
    _cleanup_json_ json_t *res = nonzero_resources(ctx, resources);
    if (!res)
        return NULL;
    struct plc_world w;
    if (plc_world_load(ctx, &w, PLC_W_INV | PLC_W_NAMES) < 0)
        return NULL;
    char *out = nb_strdup_printf("%s", "");
    const char *rc;
    json_t *v;
    json_object_foreach (res, rc, v) {
        long long want = json_integer_value(v);
        int best = -1;
        long long best_free = -1;
        bool satisfiable = false;
        for (int p = 0; p < w.n && !satisfiable; p++) {
            const struct plc_inv *inv = plc_rp_inv(&w.rp[p], rc);
            if (!inv)
                continue;
            satisfiable = plc_fit(inv, inv->used, want) == PLC_FIT_OK;
            long long free_amt = plc_free(inv);
            if (free_amt > best_free) {
                best_free = free_amt;
                best = p;
            }
        }
        if (satisfiable)
            continue;
        char part[512];
        if (best < 0) {
            snprintf(part, sizeof(part), "%s: requested %lld, no provider has %s inventory", rc,
                     want, rc);
        } else {
            const struct plc_inv *inv = plc_rp_inv(&w.rp[best], rc);
            int len = snprintf(part, sizeof(part), "%s: requested %lld, largest free %lld (%s)", rc,
                               want, best_free, w.rp[best].name);
            /* Enough room but the request breaks the inventory's units. */
            if (best_free >= want && len > 0 && (size_t)len < sizeof(part)) {
                if (want > inv->max_unit)
                    snprintf(part + len, sizeof(part) - (size_t)len, ", max_unit %lld",
                             inv->max_unit);
                else if (want < inv->min_unit)
                    snprintf(part + len, sizeof(part) - (size_t)len, ", min_unit %lld",
                             inv->min_unit);
                else
                    snprintf(part + len, sizeof(part) - (size_t)len, ", step_size %lld",
                             inv->step_size);
            }
        }
        char *more = nb_strdup_printf("%s%s%s", out, *out ? "; " : "", part);
        free(out);
        out = more;
    }
    plc_world_free(&w);
    return out;
}
