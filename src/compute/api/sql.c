/* sql.c - statements built piece by piece with bound string arguments
 * (sql.h), run on the compute API's database. */
#include "compute/api/instances.h"
#include "compute/api/sql.h"
#include "db/db.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---- dynamic SQL ------------------------------------------------------------------ */

void nb_srv_sql_init(struct nb_srv_sql *q)
{
    memset(q, 0, sizeof(*q));
    q->cap = 512;
    q->text = malloc(q->cap);
    q->text[0] = '\0';
}

void nb_srv_sql_free(struct nb_srv_sql *q)
{
    free(q->text);
    for (int i = 0; i < q->nargs; i++)
        free(q->args[i]);
    memset(q, 0, sizeof(*q));
}

void nb_srv_sql_add(struct nb_srv_sql *q, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        abort();
    va_end(ap);
    size_t n = strlen(s);
    if (q->len + n + 1 > q->cap) {
        while (q->len + n + 1 > q->cap)
            q->cap *= 2;
        q->text = realloc(q->text, q->cap);
    }
    memcpy(q->text + q->len, s, n + 1);
    q->len += n;
    free(s);
}

void nb_srv_sql_arg(struct nb_srv_sql *q, const char *value)
{
    if (q->nargs == NB_SRV_SQL_MAX_ARGS) {
        q->overflow = true;
        return;
    }
    nb_srv_sql_add(q, "?");
    q->args[q->nargs++] = value ? strdup(value) : NULL;
}

int nb_srv_sql_id_list(struct nb_srv_sql *q, json_t *ids)
{
    int n = 0;
    size_t i;
    json_t *v;
    nb_srv_sql_add(q, "(");
    json_array_foreach (ids, i, v) {
        const char *s = json_string_value(v);
        if (!s || !*s)
            continue;
        bool ok = true;
        for (const char *p = s; *p && ok; p++)
            ok = isalnum((unsigned char)*p) || *p == '-';
        if (!ok)
            continue;
        nb_srv_sql_add(q, "%s'%s'", n ? ", " : "", s);
        n++;
    }
    if (!n)
        nb_srv_sql_add(q, "NULL");
    nb_srv_sql_add(q, ")");
    return n;
}

/* The db interface is variadic; a built statement binds its strings
 * through a call with the maximum number of arguments, of which the type
 * string names only the first nargs (the others are never read). */
#define A8(b)                                                                                      \
    q->args[b], q->args[b + 1], q->args[b + 2], q->args[b + 3], q->args[b + 4], q->args[b + 5],    \
        q->args[b + 6], q->args[b + 7]
json_t *nb_srv_sql_rows(struct nb_ctx *ctx, struct nb_srv_sql *q)
{
    _Static_assert(NB_SRV_SQL_MAX_ARGS == 64, "update the argument list below");
    if (q->overflow) {
        nb_error(ctx, 400, NULL, "Too many values in the request's filters.");
        return NULL;
    }
    char types[NB_SRV_SQL_MAX_ARGS + 1];
    memset(types, 's', (size_t)q->nargs);
    types[q->nargs] = '\0';
    return nb_db_rows(nb_srv_db(), ctx, q->text, types, A8(0), A8(8), A8(16), A8(24), A8(32),
                      A8(40), A8(48), A8(56));
}
#undef A8
