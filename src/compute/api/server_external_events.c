/* server_external_events.c - POST /os-server-external-events, as Nova's
 * server_external_events.py: what other services tell compute about its
 * servers (Neutron's network-vif-plugged when a port goes ACTIVE, Cinder's
 * volume-extended, ...). Admin only (os_compute_api:os-server-external-
 * events:create). Each event answers with its own code: 200 taken (cast to
 * the server's host, whose agent logs it and wakes what waits for it),
 * 404 no such server, 422 the server has no host yet; the response is 200
 * when every event was taken, 207 when some were, 404 when none was.
 * The names allowed grow with the microversion as Nova's schema. */
#include "common/cleanup.h"
#include "common/json.h"
#include "common/log.h"
#include "compute/api/api.h"
#include "compute/api/instances.h"
#include "compute/api/validate.h"
#include "compute/rpc/compute_api.h"

#include <stdio.h>
#include <string.h>

#define LOG_EE "nova.api.openstack.compute.server_external_events"

static const struct {
    const char *name;
    int minor; /* the 2.x microversion that added it */
} names[] = {
    {"network-changed", 0},
    {"network-vif-plugged", 0},
    {"network-vif-unplugged", 0},
    {"network-vif-deleted", 0},
    {"volume-extended", 51},
    {"power-update", 76},
    {"accelerator-request-bound", 82},
    {"volume-reimaged", 93},
};

static bool name_ok(const struct nb_ctx *ctx, const char *name, char *allowed, size_t n)
{
    bool ok = false;
    size_t len = 0;
    allowed[len++] = '[';
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (!nb_ctx_mv_ge(ctx, 2, names[i].minor))
            continue;
        if (name && !strcmp(name, names[i].name))
            ok = true;
        len += (size_t)snprintf(allowed + len, len < n ? n - len : 0, "%s'%s'", len > 1 ? ", " : "",
                                names[i].name);
    }
    if (len < n - 1)
        snprintf(allowed + len, n - len, "]");
    return ok;
}

/* Checks one event against Nova's schema; 0/-1 after a 400. */
static int check_event(struct nb_ctx *ctx, size_t i, const json_t *ev)
{
    char field[64];
    snprintf(field, sizeof(field), "events/%zu", i);
    if (!json_is_object(ev))
        return nb_srv_bad(ctx, field, ev, "is not of type 'object'");
    static const char *const keys[] = {"name", "server_uuid", "status", "tag", NULL};
    if (nb_res_only_keys(ctx, field, ev, keys) < 0)
        return -1;
    const json_t *name = nb_res_required(ctx, field, ev, "name");
    const json_t *uuid = name ? nb_res_required(ctx, field, ev, "server_uuid") : NULL;
    if (!uuid)
        return -1;
    char f[96], allowed[300];
    snprintf(f, sizeof(f), "%s/name", field);
    if (!json_is_string(name))
        return nb_srv_bad(ctx, f, name, "is not of type 'string'");
    if (!name_ok(ctx, json_string_value(name), allowed, sizeof(allowed))) {
        char why[320];
        snprintf(why, sizeof(why), "is not one of %s", allowed);
        return nb_srv_bad(ctx, f, name, why);
    }
    snprintf(f, sizeof(f), "%s/server_uuid", field);
    if (nb_srv_check_uuid(ctx, f, uuid) < 0)
        return -1;
    const json_t *status = json_object_get(ev, "status");
    snprintf(f, sizeof(f), "%s/status", field);
    if (status && (!json_is_string(status) || (strcmp(json_string_value(status), "failed") &&
                                               strcmp(json_string_value(status), "completed") &&
                                               strcmp(json_string_value(status), "in-progress"))))
        return nb_srv_bad(ctx, f, status, "is not one of ['failed', 'completed', 'in-progress']");
    const json_t *tag = json_object_get(ev, "tag");
    snprintf(f, sizeof(f), "%s/tag", field);
    if (tag && nb_srv_check_string(ctx, f, tag, 0, 255, false) < 0)
        return -1;
    return 0;
}

/* The event as answered: name, server_uuid, status, tag when given, code.
 * New ref. */
static json_t *answer(const json_t *ev, const char *status, int code)
{
    json_t *a = json_pack("{s:s, s:s, s:s, s:i}", "name", nb_json_str(ev, "name"), "server_uuid",
                          nb_json_str(ev, "server_uuid"), "status", status, "code", code);
    if (json_object_get(ev, "tag"))
        json_object_set(a, "tag", json_object_get(ev, "tag"));
    return a;
}

static int h_create(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_res_admin(ctx, "os_compute_api:os-server-external-events:create") < 0)
        return -1;
    json_t *body = nb_req_json_object(ctx, req);
    if (!body)
        return -1;
    static const char *const top[] = {"events", NULL};
    const json_t *events = nb_res_required(ctx, NULL, body, "events");
    if (!events || nb_res_only_keys(ctx, NULL, body, top) < 0)
        return -1;
    if (!json_is_array(events))
        return nb_srv_bad(ctx, "events", events, "is not of type 'array'");
    if (json_array_size(events) == 0)
        return nb_srv_bad(ctx, "events", events, "is too short");
    size_t i;
    json_t *ev;
    json_array_foreach (events, i, ev)
        if (check_event(ctx, i, ev) < 0)
            return -1;
    _cleanup_json_ json_t *out = json_array();
    _cleanup_json_ json_t *by_host = json_object(); /* host: [events to cast] */
    size_t taken = 0;
    json_array_foreach (events, i, ev) {
        const char *uuid = nb_json_str(ev, "server_uuid");
        const char *status = nb_json_str(ev, "status") ? nb_json_str(ev, "status") : "completed";
        struct nb_ctx lctx;
        nb_ctx_child(&lctx, ctx);
        _cleanup_json_ json_t *inst = nb_srv_instance_get(&lctx, uuid, false);
        const char *host = inst ? nb_json_str(inst, "host") : NULL;
        if (!inst) {
            NB_DEBUG(LOG_EE, ctx, uuid, "Dropping event %s:%s for unknown instance",
                     nb_json_str(ev, "name"), nb_json_str(ev, "tag"));
            json_array_append_new(out, answer(ev, "failed", 404));
            continue;
        }
        if (!host || !*host) {
            NB_DEBUG(LOG_EE, ctx, uuid, "Unable to find a host for instance %s. Dropping event %s",
                     uuid, nb_json_str(ev, "name"));
            json_array_append_new(out, answer(ev, "failed", 422));
            continue;
        }
        NB_INFO(LOG_EE, ctx, uuid, "Creating event %s:%s for instance %s on %s",
                nb_json_str(ev, "name"), nb_json_str(ev, "tag") ? nb_json_str(ev, "tag") : "None",
                uuid, host);
        json_t *list = json_object_get(by_host, host);
        if (!list) {
            list = json_array();
            json_object_set_new(by_host, host, list);
        }
        json_t *cast = answer(ev, status, 200);
        json_object_del(cast, "code");
        json_array_append_new(list, cast);
        json_array_append_new(out, answer(ev, status, 200));
        taken++;
    }
    if (!taken)
        return nb_error(ctx, 404, NULL, "No instances found for any event");
    const char *host;
    json_t *list;
    json_object_foreach (by_host, host, list) {
        struct nb_ctx cctx;
        nb_ctx_child(&cctx, ctx);
        if (nb_compute_external_instance_event(&cctx, host, json_incref(list)) < 0)
            NB_WARN(LOG_EE, ctx, NULL, "cannot send %zu event(s) to host %s: %s",
                    json_array_size(list), host, nb_ctx_message(&cctx));
    }
    return nb_resp_json(resp, taken == json_array_size(events) ? 200 : 207,
                        json_pack("{s:O}", "events", out));
}

int nb_compute_server_external_events_init(struct nb_env *env)
{
    (void)env;
    nb_http_route("POST", "/compute/v2.1/os-server-external-events", h_create, 0);
    return 0;
}
