/* http_reqresp.c - what handlers call on a request and its response (see
 * http.h): path parameters, headers and query arguments (from
 * libmicrohttpd's connection, or the arrays of an in-process dispatch),
 * and the response setters. */
#include "common/http.h"
#include "common/util.h"

#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

const char *nb_req_param(const struct nb_req *req, const char *name)
{
    size_t n = strlen(name);
    for (int i = 0; i < req->nparams; i++)
        if (strncmp(req->param_names[i], name, n) == 0 && req->param_names[i][n] == '}')
            return req->param_values[i];
    return NULL;
}

const char *nb_req_header(const struct nb_req *req, const char *name)
{
    if (req->conn)
        return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
    for (const char *const *h = req->dispatch_headers; h && h[0]; h += 2)
        if (strcasecmp(h[0], name) == 0)
            return h[1];
    return NULL;
}

const char *nb_req_query(const struct nb_req *req, const char *name)
{
    if (req->conn)
        return MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, name);
    for (int i = 0; i < req->nquery; i++)
        if (strcmp(req->query_keys[i], name) == 0)
            return req->query_values[i];
    return NULL;
}

struct each_ctx {
    void (*fn)(void *, const char *, const char *);
    void *opaque;
};

static enum MHD_Result each_cb(void *cls, enum MHD_ValueKind kind, const char *key,
                               const char *value)
{
    (void)kind;
    struct each_ctx *e = cls;
    e->fn(e->opaque, key, value ? value : "");
    return MHD_YES;
}

void nb_req_query_each(const struct nb_req *req,
                       void (*fn)(void *opaque, const char *key, const char *value), void *opaque)
{
    if (req->conn) {
        struct each_ctx e = {fn, opaque};
        MHD_get_connection_values(req->conn, MHD_GET_ARGUMENT_KIND, each_cb, &e);
        return;
    }
    for (int i = 0; i < req->nquery; i++)
        fn(opaque, req->query_keys[i], req->query_values[i]);
}

int nb_resp_json(struct nb_resp *resp, int status, json_t *body)
{
    resp->status = status;
    json_decref(resp->body);
    resp->body = body;
    return 0;
}

int nb_resp_empty(struct nb_resp *resp, int status)
{
    resp->status = status;
    json_decref(resp->body);
    resp->body = NULL;
    return 0;
}

int nb_resp_header(struct nb_resp *resp, const char *name, const char *value)
{
    if (resp->nheaders == resp->headers_cap) {
        int cap = resp->headers_cap ? 2 * resp->headers_cap : 8;
        char **names = realloc(resp->header_names, (size_t)cap * sizeof(*names));
        if (!names)
            goto oom;
        resp->header_names = names;
        char **values = realloc(resp->header_values, (size_t)cap * sizeof(*values));
        if (!values)
            goto oom;
        resp->header_values = values;
        resp->headers_cap = cap;
    }
    char *n = strdup(name), *v = strdup(value);
    if (!n || !v) {
        free(n);
        free(v);
        goto oom;
    }
    resp->header_names[resp->nheaders] = n;
    resp->header_values[resp->nheaders++] = v;
    return 0;
oom:
    resp->oom = true;
    return -1;
}

int nb_resp_file(struct nb_resp *resp, int status, int fd, uint64_t size, const char *content_type)
{
    resp->status = status;
    json_decref(resp->body);
    resp->body = NULL;
    free(resp->raw);
    resp->raw = NULL;
    if (resp->has_file)
        close(resp->file_fd);
    resp->has_file = true;
    resp->file_fd = fd;
    resp->file_size = size;
    resp->content_type = content_type;
    return 0;
}

json_t *nb_req_json_object(struct nb_ctx *ctx, struct nb_req *req)
{
    if (!req->json) {
        if (req->body_len == 0)
            nb_error(ctx, 400, NULL, "The request body is empty; a JSON object is required.");
        else
            nb_error(ctx, 400, NULL, "Malformed request body");
        return NULL;
    }
    if (!json_is_object(req->json)) {
        nb_error(ctx, 400, NULL, "The request body must be a JSON object.");
        return NULL;
    }
    return req->json;
}
