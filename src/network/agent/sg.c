/* sg.c - the security-group phase of the network agent (na_sg_sync):
 * renders the state's filters (sg_render.c) and, when the text changed,
 * loads them in one `nft -f -` transaction that replaces this agent's two
 * tables whole (no moment without rules; a failing rule loads nothing).
 * Then, as Neutron's ip_conntrack does, deletes the conntrack entries a
 * removed rule, a removed remote-group member or a group the port left no
 * longer allows, so such a change also cuts flows already established.
 * The tables are recorded as owned ("nft_table", "<family> <name>") and
 * deleted when no port on the host needs a filter.
 *
 * The inet table sees bridged packets only through br_netfilter: with
 * /proc/sys/net/bridge/bridge-nf-call-iptables (or -ip6tables) at 0 the
 * groups are not enforced (anti-spoofing still is), and the phase fails
 * with a message naming the sysctl so the ports show why. */
#include "network/agent/sg.h"

#include "common/cleanup.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "network/agent/internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SG_LOG "nubo.network.agent.sg"
#define NFT_TIMEOUT_MS 20000
#define CT_TIMEOUT_MS 5000

/* What was last loaded, per agent (struct na is agent.c's). */
struct sg_mem {
    const struct na *a;
    char *script;
    json_t *flows;
};
static struct sg_mem mems[16];
static pthread_mutex_t mems_lock = PTHREAD_MUTEX_INITIALIZER;

static struct sg_mem *mem_of(const struct na *a)
{
    struct sg_mem *free_slot = NULL;
    for (size_t i = 0; i < sizeof(mems) / sizeof(mems[0]); i++) {
        if (mems[i].a == a)
            return &mems[i];
        if (!mems[i].a && !free_slot)
            free_slot = &mems[i];
    }
    if (free_slot)
        free_slot->a = a;
    return free_slot;
}

static char *flows_path(const struct na *a)
{
    return nb_strdup_printf("%s/sg-flows.json", na_state_dir(a));
}

/* The flows of the last load (kept across agent restarts). New ref or NULL. */
static json_t *last_flows(const struct na *a, struct sg_mem *m)
{
    if (m->flows)
        return json_incref(m->flows);
    _cleanup_free_ char *path = flows_path(a);
    json_error_t e;
    return json_load_file(path, 0, &e);
}

static void save_flows(const struct na *a, struct sg_mem *m, json_t *flows)
{
    json_decref(m->flows);
    m->flows = json_incref(flows);
    _cleanup_free_ char *path = flows_path(a);
    _cleanup_free_ char *tmp = nb_strdup_printf("%s.tmp", path);
    _cleanup_free_ char *text = nb_json_dump(flows);
    if (text && nb_write_file(tmp, text, strlen(text), 0600) == 0)
        rename(tmp, path);
}

/* 1 when both br_netfilter switches are on, 0 when one is off (*which
 * names it), -1 when the kernel has no br_netfilter. */
static int bridge_nf_on(const char **which)
{
    static const char *const paths[] = {"/proc/sys/net/bridge/bridge-nf-call-iptables",
                                        "/proc/sys/net/bridge/bridge-nf-call-ip6tables"};
    for (size_t i = 0; i < 2; i++) {
        _cleanup_free_ char *v = nb_read_file(paths[i], NULL);
        *which = paths[i];
        if (!v)
            return -1;
        if (v[0] != '1')
            return 0;
    }
    return 1;
}

static void record_tables(struct na *a, const char *tag, bool own)
{
    char bt[32], it[32], name[48];
    na_sg_table_names(tag, bt, it);
    snprintf(name, sizeof(name), "bridge %s", bt);
    own ? na_own(a, "nft_table", name) : na_disown(a, "nft_table", name);
    snprintf(name, sizeof(name), "inet %s", it);
    own ? na_own(a, "nft_table", name) : na_disown(a, "nft_table", name);
}

static bool owns_tables(struct na *a)
{
    _cleanup_json_ json_t *owned = na_owned(a, "nft_table");
    return json_array_size(owned) > 0;
}

/* Runs the conntrack deletions old -> new allows no more. Never fails the
 * phase: exit 1 is "nothing matched"; a missing tool is logged. */
static void cut_flows(struct nb_ctx *ctx, const json_t *old_flows, const json_t *new_flows)
{
    if (!old_flows)
        return;
    _cleanup_json_ json_t *cuts = na_sg_conntrack_cuts(old_flows, new_flows);
    size_t i;
    json_t *cmd;
    json_array_foreach (cuts, i, cmd) {
        const char *argv[24];
        size_t n = 0, j;
        json_t *arg;
        json_array_foreach (cmd, j, arg)
            if (n < 23)
                argv[n++] = json_string_value(arg);
        argv[n] = NULL;
        struct nb_ctx sub;
        nb_ctx_init_system(&sub, ctx->request_id);
        int rc = na_run(&sub, NULL, argv, NULL, CT_TIMEOUT_MS, NULL);
        if (rc < 0) {
            NB_WARN(SG_LOG, ctx, NULL, "conntrack could not run: established flows are kept");
            return;
        }
    }
    if (json_array_size(cuts))
        NB_INFO(SG_LOG, ctx, NULL, "%zu conntrack deletion(s) after a security group change",
                json_array_size(cuts));
}

/* Reports each filtered port as failed with ctx's message. */
static void fail_ports(struct na *a, struct nb_ctx *ctx, const json_t *ports)
{
    size_t i;
    json_t *id;
    json_array_foreach (ports, i, id)
        na_port_failed(a, json_string_value(id), nb_ctx_message(ctx));
}

/* Whether the loaded tables are still in the kernel (someone may have
 * deleted them or flushed the ruleset): one small listing per reconcile. */
static bool still_loaded(struct nb_ctx *ctx, struct na *a)
{
    char bt[32], it[32];
    na_sg_table_names(na_tag(a), bt, it);
    const char *argv[] = {"nft", "list", "chain", "inet", it, "forward", NULL};
    _cleanup_free_ char *out = NULL;
    if (na_run(ctx, NULL, argv, NULL, NFT_TIMEOUT_MS, &out) == 0)
        return true;
    NB_WARN(SG_LOG, ctx, NULL, "table inet %s is gone from the kernel: loading it again", it);
    return false;
}

/* Loads plan's script. 0/-1 after nb_error. */
static int load(struct nb_ctx *ctx, const struct na_sg_plan *plan)
{
    const char *argv[] = {"nft", "-f", "-", NULL};
    _cleanup_free_ char *out = NULL;
    int rc = na_run(ctx, NULL, argv, plan->script, NFT_TIMEOUT_MS, &out);
    if (rc != 0) {
        size_t n = out ? strlen(out) : 0;
        while (n && (out[n - 1] == '\n' || out[n - 1] == ' '))
            out[--n] = '\0';
        return nb_error(ctx, 500, NULL, "security groups not applied: nft -f: %s",
                        out && *out ? out
                        : rc < 0    ? "could not run"
                                    : "failed");
    }
    return 0;
}

int na_sg_sync(struct na *a, struct nb_ctx *ctx, const json_t *state)
{
    struct na_sg_plan plan;
    const char *err;
    if (na_sg_render(state, na_tag(a), &plan, &err) < 0)
        return nb_error(ctx, 500, NULL, "security groups not applied: %s", err);
    pthread_mutex_lock(&mems_lock);
    struct sg_mem *m = mem_of(a);
    int rc = 0;
    if (!m) {
        rc = nb_error(ctx, 500, NULL, "security groups: too many agents in one process");
    } else if (plan.empty && !m->script && !owns_tables(a)) {
        /* nothing there, nothing wanted */
    } else if (!m->script || strcmp(m->script, plan.script) != 0 ||
               (!plan.empty && !still_loaded(ctx, a))) {
        double t0 = nb_time_mono();
        rc = load(ctx, &plan);
        if (rc == 0) {
            json_t *old = last_flows(a, m);
            cut_flows(ctx, old, plan.flows);
            json_decref(old);
            save_flows(a, m, plan.flows);
            free(m->script);
            m->script = NB_STEAL(&plan.script);
            record_tables(a, na_tag(a), !plan.empty);
            NB_INFO(SG_LOG, ctx, NULL, "security groups of %zu port(s) loaded in %.0f ms",
                    json_array_size(plan.ports), (nb_time_mono() - t0) * 1000);
        }
    }
    pthread_mutex_unlock(&mems_lock);
    const char *which;
    if (rc == 0 && !plan.empty && bridge_nf_on(&which) != 1)
        rc = nb_error(ctx, 500, NULL,
                      "security groups not enforced: %s is not 1 (br_netfilter off), so bridged "
                      "traffic skips the inet filter",
                      which);
    if (rc < 0)
        fail_ports(a, ctx, plan.ports);
    na_sg_plan_free(&plan);
    return rc;
}
