/* api_client.h - a subcommand talking to the cloud's own API as an admin,
 * the way `nubo doctor --fix` does: it issues itself a short-lived admin
 * token in the database (nb_identity_issue_admin_token; whoever can write
 * the database needs no password) and calls the API where [api]
 * public_url or listen:port says it answers. HTTP through libcurl;
 * bodies are JSON. */
#ifndef NB_CMD_API_CLIENT_H
#define NB_CMD_API_CLIENT_H

#include "common/ctx.h"
#include <jansson.h>
#include <stddef.h>

struct nb_db;

struct nb_api_client {
    char base[512]; /* "http://127.0.0.1:8774", no trailing slash */
    char token[65];
    long timeout_s;         /* per call; 0: 60 s */
    const char *request_id; /* sent as X-OpenStack-Request-ID (NULL: none) */
};

/* Finds the API and issues an admin token valid for ttl seconds (at most
 * 3600); timeout_s and request_id are left as the caller set them. 0, or -1 with the error
 * recorded on ctx. */
int nb_api_client_open(struct nb_api_client *c, struct nb_db *db, struct nb_ctx *ctx, int ttl);

/* method path (under base, e.g. "/compute/v2.1/os-services") with compute
 * microversion mv (NULL: none) and body (NULL: none). Returns the HTTP
 * status, or 0 when no answer came (err holds curl's reason); *out gets the
 * parsed JSON answer (new ref, NULL when empty or not JSON). */
long nb_api_call(const struct nb_api_client *c, const char *method, const char *path,
                 const char *mv, const json_t *body, json_t **out, char *err, size_t errlen);

/* The message of an OpenStack error body ({"<name>": {"message": …}}),
 * else a generic "HTTP <status>". Into out. */
void nb_api_error_message(const json_t *body, long status, char *out, size_t n);

#endif
