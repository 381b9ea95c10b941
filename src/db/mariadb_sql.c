/* mariadb_sql.c - the pure parts of the MariaDB backend: parameter
 * interpolation and error classes (mariadb.h). */
#include "db/mariadb.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

bool nb_maria_retryable(unsigned err, const char *msg)
{
    if (err == 1213 || err == 1205) /* ER_LOCK_DEADLOCK, ER_LOCK_WAIT_TIMEOUT */
        return true;
    /* ER_UNKNOWN_COM_ERROR "WSREP has not yet prepared node for application
     * use", ER_ERROR_DURING_COMMIT with a certification failure */
    return (err == 1047 || err == 1180) && msg && strstr(msg, "WSREP");
}

bool nb_maria_conn_lost(unsigned err)
{
    switch (err) {
    case 1927: /* ER_CONNECTION_KILLED */
    case 2006: /* CR_SERVER_GONE_ERROR */
    case 2013: /* CR_SERVER_LOST */
    case 2055: /* CR_SERVER_LOST_EXTENDED */
    case 4031: /* ER_CLIENT_INTERACTION_TIMEOUT (idle past wait_timeout) */ return true;
    default: return false;
    }
}

bool nb_maria_resend_safe(unsigned err, const char *sql)
{
    /* CR_SERVER_GONE_ERROR: libmariadb could not send it (the connection was
     * closed before, or the write failed); ER_CLIENT_INTERACTION_TIMEOUT:
     * the server's goodbye to an idle connection, read as the answer */
    if (err == 2006 || err == 4031)
        return true;
    if (!nb_maria_conn_lost(err) || !sql)
        return false;
    /* sent, the answer lost (2013, 2055) or the session killed (1927): it may
     * have run; a read runs again, a write must not be applied twice */
    return nb_maria_is_read(sql);
}

bool nb_maria_is_read(const char *sql)
{
    while (*sql == ' ' || *sql == '\t' || *sql == '\n' || *sql == '(')
        sql++;
    static const char *const reads[] = {"SELECT", "SHOW", "EXPLAIN", "DESCRIBE"};
    for (size_t i = 0; i < sizeof(reads) / sizeof(reads[0]); i++) {
        size_t n = strlen(reads[i]);
        if (!strncasecmp(sql, reads[i], n) &&
            (sql[n] == ' ' || sql[n] == '\t' || sql[n] == '\n' || sql[n] == '\0'))
            return true;
    }
    return false;
}

bool nb_maria_constraint(unsigned err)
{
    switch (err) {
    case 1022: /* ER_DUP_KEY */
    case 1048: /* ER_BAD_NULL_ERROR */
    case 1062: /* ER_DUP_ENTRY */
    case 1169: /* ER_DUP_UNIQUE */
    case 1216: /* ER_NO_REFERENCED_ROW */
    case 1217: /* ER_ROW_IS_REFERENCED */
    case 1451: /* ER_ROW_IS_REFERENCED_2 */
    case 1452: /* ER_NO_REFERENCED_ROW_2 */
    case 1557: /* ER_FOREIGN_DUPLICATE_KEY */
    case 1586: /* ER_DUP_ENTRY_WITH_KEY_NAME */
    case 3819: /* ER_CHECK_CONSTRAINT_VIOLATED (MySQL) */
    case 4025: /* ER_CONSTRAINT_FAILED (MariaDB CHECK) */ return true;
    default: return false;
    }
}

/* The parameter a `?` at *pp stands for, 0-based, moving *pp past its digits:
 * SQLite's rules, `?NNN` is parameter NNN and a bare `?` the one after the
 * highest so far (*max, the count the SQL needs). */
static int param(const char **pp, int *max)
{
    const char *p = *pp;
    int idx;
    if (p[1] >= '0' && p[1] <= '9') {
        idx = 0;
        while (p[1] >= '0' && p[1] <= '9' && idx < 100000)
            idx = idx * 10 + (*++p - '0');
        idx--;
    } else {
        idx = *max;
    }
    *pp = p;
    if (idx + 1 > *max)
        *max = idx + 1;
    return idx;
}

/* Sessions run with NO_BACKSLASH_ESCAPES (SQLite's literals): a quote ends
 * at the next same quote. Length of sql once the `?`s are replaced; the
 * number of parameters it needs into *found (-1 for a `?0`). */
static size_t measure(const char *sql, char *const *lits, int n, int *found)
{
    size_t len = 0;
    char quote = 0;
    *found = 0;
    for (const char *p = sql; *p; p++) {
        if (quote) {
            if (*p == quote) /* '' inside '...' toggles twice */
                quote = 0;
        } else if (*p == '\'' || *p == '"' || *p == '`') {
            quote = *p;
        } else if (*p == '?') {
            int idx = param(&p, found);
            if (idx < 0) {
                *found = -1;
                return 0;
            }
            if (idx < n)
                len += strlen(lits[idx]);
            continue;
        }
        len++;
    }
    return len;
}

char *nb_maria_interpolate(const char *sql, char *const *lits, int n, int *found)
{
    size_t len = measure(sql, lits, n, found);
    if (*found != n)
        return NULL;
    char *out = malloc(len + 1), *o = out;
    if (!out)
        return NULL;
    char quote = 0;
    int max = 0;
    for (const char *p = sql; *p; p++) {
        if (quote) {
            if (*p == quote)
                quote = 0;
        } else if (*p == '\'' || *p == '"' || *p == '`') {
            quote = *p;
        } else if (*p == '?') {
            int idx = param(&p, &max);
            size_t l = strlen(lits[idx]);
            memcpy(o, lits[idx], l);
            o += l;
            continue;
        }
        *o++ = *p;
    }
    *o = '\0';
    return out;
}
