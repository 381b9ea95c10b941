/* sql.h - statements built piece by piece with bound string arguments, as
 * the server list's filters need them. Defined in sql.c; private to
 * compute/api. */
#ifndef NB_COMPUTE_API_SQL_H
#define NB_COMPUTE_API_SQL_H

#include "common/ctx.h"
#include "common/http.h"
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* ---- dynamic SQL with string arguments ---------------------------------- */

#define NB_SRV_SQL_MAX_ARGS 64

/* A statement built piece by piece. Every bound argument is a string (SQLite
 * applies the column's affinity, so integer columns compare as numbers);
 * integers that the code itself produced may be written into the text. */
struct nb_srv_sql {
    char *text;
    size_t len, cap;
    char *args[NB_SRV_SQL_MAX_ARGS];
    int nargs;
    bool overflow; /* too many arguments: the query refuses to run */
};

void nb_srv_sql_init(struct nb_srv_sql *q);
void nb_srv_sql_free(struct nb_srv_sql *q);
/* Appends printf-formatted SQL text (never user input). */
void nb_srv_sql_add(struct nb_srv_sql *q, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Appends "?" and binds a copy of value (NULL binds NULL). */
void nb_srv_sql_arg(struct nb_srv_sql *q, const char *value);
/* Runs the query; rows as nb_db_rows() returns them, or NULL on error. */
json_t *nb_srv_sql_rows(struct nb_ctx *ctx, struct nb_srv_sql *q);
/* Appends "('u1','u2',…)" for a list of IDs that are known to be UUIDs or
 * request IDs from our own rows (checked: only [0-9a-zA-Z-] allowed; others
 * are skipped). Returns the number written. */
int nb_srv_sql_id_list(struct nb_srv_sql *q, json_t *ids);

#endif
