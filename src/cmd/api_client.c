/* api_client.c - admin calls to the cloud's API from a subcommand (see
 * api_client.h). */
#include "cmd/api_client.h"

#include "common/cleanup.h"
#include "common/config.h"
#include "common/env.h"
#include "common/json.h"
#include "common/util.h"
#include "identity/identity.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Where the API answers: [api] public_url, else http://[api] listen:port
 * (a wildcard listen address is reached on loopback). */
static void api_base(char *out, size_t n)
{
    const char *pub = nb_conf_str("api", "public_url", NULL);
    if (pub && *pub) {
        nb_strlcpy(out, pub, n);
        size_t len = strlen(out);
        if (len && out[len - 1] == '/')
            out[len - 1] = '\0';
        return;
    }
    const char *listen = nb_conf_str("api", "listen", "127.0.0.1");
    if (!strcmp(listen, "0.0.0.0") || !*listen)
        listen = "127.0.0.1";
    else if (!strcmp(listen, "::"))
        listen = "::1";
    bool v6 = strchr(listen, ':') != NULL;
    snprintf(out, n, "http://%s%s%s:%ld", v6 ? "[" : "", listen, v6 ? "]" : "",
             nb_conf_int("api", "port", 8774));
}

int nb_api_client_open(struct nb_api_client *c, struct nb_db *db, struct nb_ctx *ctx, int ttl)
{
    api_base(c->base, sizeof(c->base));
    struct nb_env env = {.db = db};
    return nb_identity_issue_admin_token(&env, ctx, ttl, c->token);
}

struct body {
    char *buf;
    size_t len;
};

static size_t collect(char *data, size_t size, size_t nmemb, void *opaque)
{
    struct body *b = opaque;
    size_t n = size * nmemb;
    char *grown = realloc(b->buf, b->len + n + 1);
    if (!grown)
        return 0;
    b->buf = grown;
    memcpy(b->buf + b->len, data, n);
    b->len += n;
    b->buf[b->len] = '\0';
    return n;
}

long nb_api_call(const struct nb_api_client *c, const char *method, const char *path,
                 const char *mv, const json_t *body, json_t **out, char *err, size_t errlen)
{
    *out = NULL;
    CURL *h = curl_easy_init();
    if (!h) {
        nb_strlcpy(err, "cannot initialise libcurl", errlen);
        return 0;
    }
    _cleanup_free_ char *url = nb_strdup_printf("%s%s", c->base, path);
    _cleanup_free_ char *auth = nb_strdup_printf("X-Auth-Token: %s", c->token);
    _cleanup_free_ char *ver = mv ? nb_strdup_printf("X-OpenStack-Nova-API-Version: %s", mv) : NULL;
    _cleanup_free_ char *rid =
        c->request_id ? nb_strdup_printf("X-OpenStack-Request-ID: %s", c->request_id) : NULL;
    _cleanup_free_ char *data = body ? nb_json_dump(body) : NULL;
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
    hdr = curl_slist_append(hdr, "Accept: application/json");
    hdr = curl_slist_append(hdr, auth);
    if (ver)
        hdr = curl_slist_append(hdr, ver);
    if (rid)
        hdr = curl_slist_append(hdr, rid);
    struct body b = {0};
    char cerr[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    if (data)
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, data);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, cerr);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, c->timeout_s > 0 ? c->timeout_s : 60L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    long status = 0;
    if (curl_easy_perform(h) == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    else
        snprintf(err, errlen, "%s: %s", url, *cerr ? cerr : "no answer");
    if (status && b.buf)
        *out = nb_json_parse(b.buf);
    free(b.buf);
    curl_slist_free_all(hdr);
    curl_easy_cleanup(h);
    return status;
}

void nb_api_error_message(const json_t *body, long status, char *out, size_t n)
{
    const char *k;
    json_t *v;
    if (json_is_object(body))
        json_object_foreach ((json_t *)body, k, v) {
            const char *m = nb_json_str(v, "message");
            if (m) {
                nb_strlcpy(out, m, n);
                return;
            }
        }
    snprintf(out, n, "HTTP %ld", status);
}
