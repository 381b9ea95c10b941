/* jsonbuf.h - JSON text written directly into a growing buffer, for the
 * server views of large pages. Defined in jsonbuf.c; private to
 * compute/api. */
#ifndef NB_COMPUTE_API_JSONBUF_H
#define NB_COMPUTE_API_JSONBUF_H

#include "common/ctx.h"
#include "common/http.h"
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* JSON text built by hand: a page of 1,000 servers is about 1 MB, and
 * building it as jansson values and then dumping them costs several times
 * the time of writing it directly. */
struct nb_srv_buf {
    char *s;
    size_t len, cap;
};
void nb_srv_buf_init(struct nb_srv_buf *b);
void nb_srv_buf_free(struct nb_srv_buf *b);
/* Appends n bytes / a literal / a JSON string (NULL -> null) / an integer /
 * any jansson value. */
void nb_srv_buf_raw(struct nb_srv_buf *b, const char *s, size_t n);
void nb_srv_buf_lit(struct nb_srv_buf *b, const char *s);
void nb_srv_buf_str(struct nb_srv_buf *b, const char *s);
void nb_srv_buf_int(struct nb_srv_buf *b, long long v);
void nb_srv_buf_json(struct nb_srv_buf *b, const json_t *v);
/* Appends "key": (after a comma unless *first, which it clears). */
void nb_srv_buf_key(struct nb_srv_buf *b, const char *key, bool *first);
/* nb_srv_buf_key then a JSON string / literal JSON text / integer / value. */
void nb_srv_buf_put_str(struct nb_srv_buf *b, bool *first, const char *key, const char *v);
void nb_srv_buf_put_raw(struct nb_srv_buf *b, bool *first, const char *key, const char *json_text);
void nb_srv_buf_put_int(struct nb_srv_buf *b, bool *first, const char *key, long long v);
void nb_srv_buf_put_json(struct nb_srv_buf *b, bool *first, const char *key, const json_t *v);
/* Hands the text to resp as its (JSON) body. Returns 0. */
int nb_srv_buf_respond(struct nb_resp *resp, int status, struct nb_srv_buf *b);

#endif
