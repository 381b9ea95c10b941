/* healthcheck.h - oslo.middleware's /healthcheck, for every listener.
 *
 * As an api-paste pipeline configures it (backend disable_by_file): 200 "OK",
 * or 503 "DISABLED BY FILE" while [healthcheck] disable_by_file_path names
 * a file that exists. GET answers text/plain (default), text/html or
 * application/json ({"detailed": false, "reasons": ["OK"]}) by Accept, as
 * webob's acceptable_offers picks them; HEAD answers 204 (503) with no
 * body. No token is needed. */
#ifndef NB_HEALTHCHECK_H
#define NB_HEALTHCHECK_H

#include <stddef.h>

struct nb_healthcheck {
    int status;
    const char *content_type;
    char *body; /* malloc'd, may be "" */
    size_t len;
};

/* Fills out for a request with method and Accept header (may be NULL).
 * Returns 0, or -1 on OOM. */
int nb_healthcheck_answer(const char *method, const char *accept, struct nb_healthcheck *out);

#endif
