/* sbuf.h - a growable, always NUL-terminated string buffer. */
#ifndef NB_SBUF_H
#define NB_SBUF_H

#include <stddef.h>

struct nb_sbuf {
    char *s; /* malloc'd, owned by the caller once built; NULL until the first add */
    size_t len, cap;
};

/* Appends n bytes of s (aborts on out-of-memory). */
void nb_sbuf_add(struct nb_sbuf *b, const char *s, size_t n);
/* Appends the NUL-terminated s. */
void nb_sbuf_str(struct nb_sbuf *b, const char *s);
/* Appends s URL-encoded as Python's urllib.parse.quote_plus does. */
void nb_sbuf_quote_plus(struct nb_sbuf *b, const char *s);

#endif
