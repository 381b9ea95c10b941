/* candidates.c - GET /placement/allocation_candidates (1.10+): the
 * query-string parsers (shared with the provider list), the request's
 * checks in placement's order and messages, the in-process candidates and
 * the shortage explanation. The search itself is candidate_search.c. */
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

bool plc_array_has(json_t *arr, const char *s)
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
            if (!plc_array_has(any, t))
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
            if (!plc_array_has(forbidden, t))
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
            if (!plc_array_has(set, item))
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
            if (!plc_array_has(all, json_string_value(t)))
                json_array_append(all, t);
        }
    }
    json_array_foreach (forbidden, i, t) {
        if (!plc_array_has(all, json_string_value(t)))
            json_array_append(all, t);
    }
    _cleanup_free_ char *missing = plc_traits_missing(ctx, all);
    if (!missing)
        return -1;
    if (*missing)
        return nb_error(ctx, 400, PLC_ERR_DEFAULT, "%sNo such trait(s): %s.", prefix, missing);
    return 0;
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

/* From 1.36: some group has resources, every resourceless group is in a
 * same_subtree, every same_subtree suffix is a group. 0, or -1 after the
 * 400. */
static int check_groups_v136(struct nb_ctx *ctx, struct plc_acreq *rq)
{
    char bad[512] = "";
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
            in_subtree = in_subtree || plc_array_has(set, g->suffix);
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
    return 0;
}

/* Before 1.36: every group has resources (no orphaned traits or
 * member_of), and there is at least one group. 0, or -1 after the 400. */
static int check_groups_old(struct nb_ctx *ctx, struct plc_acreq *rq)
{
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
    return 0;
}

/* 0 unless one of g's any-of required trait sets is wholly forbidden,
 * then -1 after the 400 naming it. */
static int check_trait_conflicts(struct nb_ctx *ctx, const struct plc_group *g)
{
    size_t k, j;
    json_t *any, *t;
    json_array_foreach (g->required, k, any) {
        bool all = json_array_size(any) > 0;
        json_array_foreach (any, j, t) {
            all = all && plc_array_has(g->forbidden, json_string_value(t));
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
    return 0;
}

/* lib.RequestGroup's orphan/resourceless and conflict checks. */
static int ac_check_groups(struct nb_ctx *ctx, struct plc_acreq *rq, int mv)
{
    if ((mv >= 36 ? check_groups_v136(ctx, rq) : check_groups_old(ctx, rq)) < 0)
        return -1;
    if (mv >= 22) {
        for (int i = 0; i < rq->ngroups; i++)
            if (check_trait_conflicts(ctx, &rq->groups[i]) < 0)
                return -1;
    }
    return 0;
}

static int ac_request_wide(struct nb_ctx *ctx, json_t *q, int mv, struct plc_acreq *rq)
{
    /* Placement uses the first limit but its schema sees only the last
     * (webob's dict(req.GET)), so limit=x&limit=5 is a 500 there: every
     * value is checked here, and the first is used. */
    json_t *limit = json_object_get(q, "limit");
    size_t li;
    json_t *lv;
    json_array_foreach (limit, li, lv) {
        const char *l = json_string_value(lv);
        bool ok = l && l[0] >= '1' && l[0] <= '9';
        for (const char *c = l; ok && *c; c++)
            ok = *c >= '0' && *c <= '9';
        if (!ok)
            return nb_error(ctx, 400, PLC_ERR_DEFAULT,
                            "Invalid query string parameters: '%s' does not match "
                            "'^[1-9][0-9]*$'",
                            l ? l : "");
    }
    if (json_array_size(limit)) {
        long long first = strtoll(json_string_value(json_array_get(limit, 0)), NULL, 10);
        rq->limit = first > PLC_MAX_INT ? (int)PLC_MAX_INT : (int)first;
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
            if (plc_array_has(forb, json_string_value(t)))
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
                if (!plc_array_has(set, t))
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
                return nb_ctx_failed(ctx)
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
    char *body = NULL;
    size_t len = 0;
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
    /* written as text from the search: the answer over a thousand
     * providers is some 30,000 values as a JSON tree */
    body = plc_candidates_text(ctx, &rq, &len);
out:
    plc_groups_free(&rq);
    if (!body)
        return -1;
    plc_cache_headers(ctx, resp);
    resp->status = 200;
    resp->raw = body;
    resp->raw_len = len;
    resp->content_type = "application/json";
    return 0;
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

/* The one-group request of the in-process calls into rq (plc_groups_free
 * frees it). 0, or -1 after an error. */
static int inproc_request(struct nb_ctx *ctx, struct plc_acreq *rq, json_t *resources,
                          json_t *required, json_t *member_of, int limit)
{
    *rq = (struct plc_acreq){.mv = 36, .limit = limit > 0 ? limit : 0};
    rq->groups = calloc(1, sizeof(*rq->groups));
    if (!rq->groups)
        return nb_error(ctx, 500, PLC_ERR_DEFAULT, "out of memory");
    rq->ngroups = 1;
    struct plc_group *g = &rq->groups[0];
    g->resources = nonzero_resources(ctx, resources);
    g->required = json_array();
    g->forbidden = json_array();
    if (!g->resources)
        return -1;
    if (json_object_size(g->resources) == 0)
        return nb_error(ctx, 400, PLC_ERR_DEFAULT,
                        "At least one request group (`resources` or `resources{$S}`) is "
                        "required.");
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
    return ac_check_names(ctx, rq);
}

json_t *nb_placement_candidates(struct nb_ctx *ctx, json_t *resources, json_t *required,
                                json_t *member_of, int limit)
{
    struct plc_acreq rq;
    json_t *out = NULL;
    if (inproc_request(ctx, &rq, resources, required, member_of, limit) == 0)
        out = plc_candidates(ctx, &rq);
    plc_groups_free(&rq);
    return out;
}

int nb_placement_candidate_list(struct nb_ctx *ctx, json_t *resources, json_t *required,
                                json_t *member_of, int limit, struct nb_placement_cand **out,
                                size_t *n, size_t *nreq)
{
    struct plc_acreq rq;
    int rc = inproc_request(ctx, &rq, resources, required, member_of, limit);
    if (rc == 0)
        rc = plc_candidates_list(ctx, &rq, out, n, nreq);
    else
        *out = NULL, *n = *nreq = 0;
    plc_groups_free(&rq);
    return rc;
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
