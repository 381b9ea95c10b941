/* policy.c - the policy guard and the start-up check of the route table
 * (see policy.h). The table itself is in table.c.
 *
 * Lookups compare the pattern a request matched (the HTTP layer hands it
 * over) with the table's patterns as strings; the table is small (a few
 * hundred entries) and a linear scan costs less than the token check. */
#include "policy/policy.h"

#include "common/log.h"

#include <string.h>

const struct nb_policy_entry *nb_policy_find(const char *method, const char *pattern)
{
    size_t n;
    const struct nb_policy_entry *t = nb_policy_table(&n);
    for (size_t i = 0; i < n; i++)
        if (!strcmp(t[i].method, method) && !strcmp(t[i].pattern, pattern))
            return &t[i];
    return NULL;
}

const char *nb_policy_rule_str(enum nb_policy_rule rule)
{
    switch (rule) {
    case NB_POLICY_PUBLIC: return "public";
    case NB_POLICY_ANY: return "any";
    case NB_POLICY_READER: return "reader";
    case NB_POLICY_MEMBER: return "member";
    case NB_POLICY_ADMIN: return "admin";
    }
    return "?";
}

bool nb_policy_allows(const struct nb_ctx *ctx, enum nb_policy_rule rule)
{
    if (ctx->system)
        return true;
    switch (rule) {
    case NB_POLICY_PUBLIC:
    case NB_POLICY_ANY: return true;
    case NB_POLICY_READER: return ctx->is_reader || ctx->is_member || ctx->is_admin;
    case NB_POLICY_MEMBER: return ctx->is_member || ctx->is_admin;
    case NB_POLICY_ADMIN: return ctx->is_admin;
    }
    return false;
}

/* Records the refusal of rule name in the words of the service req is for
 * (its policy_refused: each one's policy enforcer or fault wrapper), else
 * oslo.policy's as Nova and Cinder word it. Returns -1. */
static int refuse(struct nb_ctx *ctx, const struct nb_req *req, const char *name)
{
    if (req->service && req->service->policy_refused)
        return req->service->policy_refused(ctx, name);
    return nb_error(ctx, 403, NULL, "Policy doesn't allow %s to be performed.", name);
}

int nb_policy_guard(struct nb_ctx *ctx, struct nb_req *req, const char *pattern)
{
    const struct nb_policy_entry *e = nb_policy_find(req->method, pattern);
    if (!e && !strcmp(req->method, "HEAD"))
        e = nb_policy_find("GET", pattern); /* HEAD routes fall back to GET */
    if (!e)
        return nb_error(ctx, 500, NULL, "No policy rule for %s %s.", req->method, pattern);
    if (nb_policy_allows(ctx, e->rule))
        return 0;
    NB_INFO("nubo.policy", ctx, NULL, "%s %s refused: rule %s needs %s", req->method, req->path,
            e->name, nb_policy_rule_str(e->rule));
    return refuse(ctx, req, e->name);
}

struct check_state {
    int problems;
    size_t n;
    bool *seen; /* per table entry: a route has it */
};

static void check_route(void *opaque, const char *method, const char *pattern, int flags)
{
    struct check_state *st = opaque;
    size_t n;
    const struct nb_policy_entry *t = nb_policy_table(&n);
    const struct nb_policy_entry *e = nb_policy_find(method, pattern);
    if (!e) {
        NB_ERROR("nubo.policy", NULL, NULL, "route %s %s has no policy entry", method, pattern);
        st->problems++;
        return;
    }
    st->seen[e - t] = true;
    bool no_auth = flags & NB_ROUTE_NO_AUTH;
    if (no_auth != (e->rule == NB_POLICY_PUBLIC)) {
        NB_ERROR("nubo.policy", NULL, NULL, "route %s %s is %s but its policy rule is %s", method,
                 pattern, no_auth ? "unauthenticated" : "authenticated",
                 nb_policy_rule_str(e->rule));
        st->problems++;
    }
}

int nb_policy_check_routes(bool every_service)
{
    size_t n;
    const struct nb_policy_entry *t = nb_policy_table(&n);
    bool seen[n > 0 ? n : 1];
    memset(seen, 0, sizeof(seen));
    struct check_state st = {.n = n, .seen = seen};
    nb_http_routes_each(check_route, &st);
    for (size_t i = 0; every_service && i < n; i++) {
        if (seen[i])
            continue;
        NB_ERROR("nubo.policy", NULL, NULL, "policy entry %s %s has no route", t[i].method,
                 t[i].pattern);
        st.problems++;
    }
    return st.problems;
}

void nb_policy_init(void)
{
    nb_http_set_guard(nb_policy_guard);
}
