/* sbuf.h - a growable, always NUL-terminated string buffer. */
#ifndef NB_SBUF_H
#define NB_SBUF_H

#include <stddef.h>
#include <string.h>

struct nb_sbuf {
    char *s; /* malloc'd, owned by the caller once built; NULL until the first add */
    size_t len, cap;
};

/* Makes room for n more bytes and the NUL (aborts on out-of-memory). */
void nb_sbuf_reserve(struct nb_sbuf *b, size_t n);
/* Appends n bytes of s, growing the buffer (aborts on out-of-memory). */
void nb_sbuf_add_grow(struct nb_sbuf *b, const char *s, size_t n);
/* Appends n bytes of s (aborts on out-of-memory); inline while it fits,
 * as answers of tens of thousands of small pieces are written with it. */
static inline void nb_sbuf_add(struct nb_sbuf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        nb_sbuf_add_grow(b, s, n);
        return;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}
/* Appends the NUL-terminated s. */
void nb_sbuf_str(struct nb_sbuf *b, const char *s);
/* Appends s URL-encoded as Python's urllib.parse.quote_plus does. */
void nb_sbuf_quote_plus(struct nb_sbuf *b, const char *s);

#endif
