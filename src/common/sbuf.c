/* sbuf.c - growable string buffer (see sbuf.h). */
#include "common/sbuf.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void nb_sbuf_reserve(struct nb_sbuf *b, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        b->cap = (b->len + n + 1) * 2;
        b->s = realloc(b->s, b->cap);
        if (!b->s)
            abort();
    }
}

void nb_sbuf_add_grow(struct nb_sbuf *b, const char *s, size_t n)
{
    nb_sbuf_reserve(b, n);
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

void nb_sbuf_str(struct nb_sbuf *b, const char *s)
{
    nb_sbuf_add(b, s, strlen(s));
}

void nb_sbuf_quote_plus(struct nb_sbuf *b, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char tmp[4];
        if (isalnum(*p) || *p == '_' || *p == '.' || *p == '-' || *p == '~') {
            nb_sbuf_add(b, (const char *)p, 1);
        } else if (*p == ' ') {
            nb_sbuf_add(b, "+", 1);
        } else {
            snprintf(tmp, sizeof(tmp), "%%%02X", *p);
            nb_sbuf_add(b, tmp, 3);
        }
    }
}
