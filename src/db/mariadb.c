/* mariadb.c - db.h's contract on MariaDB: the pool, statements, results and
 * transactions (mariadb.h). */
#include "db/mariadb.h"
#include "db/db.h"
#include "common/json.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/util.h"

#include <assert.h>
#include <mysql.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SQL_MODE                                                                                   \
    "SET SESSION sql_mode = 'ANSI_QUOTES,PIPES_AS_CONCAT,NO_BACKSLASH_ESCAPES,"                    \
    "STRICT_TRANS_TABLES,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_AUTO_VALUE_ON_ZERO', "         \
    "time_zone = '+00:00'"
/* READ COMMITTED, not InnoDB's REPEATABLE READ: a read that locks (FOR
 * UPDATE) takes no gap locks, and two control planes' concurrent builds
 * stopped deadlocking on each other's inserts */
#define ISOLATION "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"
#define RETRIES 5

struct conn {
    MYSQL *m; /* NULL: lost (or never opened); reopened by the next acquire */
    bool busy;
    bool aborted;    /* the server ended this transaction: all fails until rollback */
    pthread_t owner; /* with depth > 0 */
    int depth;       /* 0: none; 1: the transaction; n > 1: savepoints sp_2 .. sp_n */
    double t0;       /* when the outermost transaction began (nb_time_mono) */
    bool wrote;      /* the transaction ran a statement other than a read */
};

struct nb_maria {
    struct nb_db_url url;
    char token[17]; /* this pool's, in its connections' nubo_commits slots */
    pthread_mutex_t lock;
    pthread_cond_t idle;
    int n;
    struct conn conns[NB_MARIA_POOL];
};

static _Thread_local long long last_id;
static _Thread_local bool conflict; /* nb_maria_conflict() */
/* deadlocks, lock waits and Galera aborts met inside transactions, ever
 * (db.h nb_db_retryable_failures: a caller compares it around its work) */
static _Thread_local unsigned retryable_failures;

unsigned nb_db_retryable_failures(void)
{
    return retryable_failures;
}
static _Thread_local bool unreachable;       /* nb_maria_unreachable() */
static _Thread_local int lose_commit_answer; /* nb_maria_test_lose_commit_answer() */

void nb_maria_test_lose_commit_answer(bool applied)
{
    lose_commit_answer = applied ? 1 : 2;
}

static MYSQL *connect_one(const struct nb_db_url *u)
{
    MYSQL *m = mysql_init(NULL);
    if (!m)
        return NULL;
    mysql_options(m, MYSQL_SET_CHARSET_NAME, "utf8mb4");
    unsigned timeout = 10;
    mysql_options(m, MYSQL_OPT_CONNECT_TIMEOUT, &timeout);
    const char *host = u->unix_socket[0] ? "localhost" : u->host[0] ? u->host : "localhost";
    if (!mysql_real_connect(m, host, u->user, u->password, u->database, (unsigned)u->port,
                            u->unix_socket[0] ? u->unix_socket : NULL, CLIENT_FOUND_ROWS) ||
        mysql_query(m, SQL_MODE) || mysql_query(m, ISOLATION)) {
        NB_ERROR("nubo.db", NULL, NULL, "cannot connect to MariaDB database %s on %s: %s",
                 u->database, u->unix_socket[0] ? u->unix_socket : host, mysql_error(m));
        mysql_close(m);
        return NULL;
    }
    return m;
}

struct nb_maria *nb_maria_open(const struct nb_db_url *u)
{
    struct nb_maria *db = calloc(1, sizeof(*db));
    if (!db)
        return NULL;
    db->url = *u;
    nb_random_hex(db->token, 8);
    pthread_mutex_init(&db->lock, NULL);
    pthread_cond_init(&db->idle, NULL);
    /* one connection now, so a wrong URL fails at open */
    if (!(db->conns[0].m = connect_one(u))) {
        nb_maria_close(db);
        return NULL;
    }
    db->n = 1;
    return db;
}

void nb_maria_close(struct nb_maria *db)
{
    if (!db)
        return;
    for (int i = 0; i < db->n; i++)
        if (db->conns[i].m)
            mysql_close(db->conns[i].m);
    pthread_cond_destroy(&db->idle);
    pthread_mutex_destroy(&db->lock);
    free(db);
}

/* This thread's pinned connection (lock held), or NULL. */
static struct conn *pinned(struct nb_maria *db)
{
    for (int i = 0; i < db->n; i++)
        if (db->conns[i].depth && pthread_equal(db->conns[i].owner, pthread_self()))
            return &db->conns[i];
    return NULL;
}

/* Whether the server closed idle connection m meanwhile (restarted, killed,
 * failed over behind a front, wait_timeout): an idle connection has nothing
 * to read, so a readable socket is an EOF, a reset or the server's goodbye.
 * No round trip, unlike a ping. */
static bool closed_by_server(MYSQL *m)
{
    struct pollfd p = {.fd = (int)mysql_get_socket(m), .events = POLLIN};
    return p.fd < 0 || poll(&p, 1, 0) != 0;
}

/* The thread's pinned connection, else an idle one marked busy (a new
 * slot while the pool has room, else waiting). A lost or new slot, or an
 * idle connection the server closed, is (re)connected outside the lock.
 * NULL if connecting failed. */
static struct conn *acquire(struct nb_maria *db)
{
    pthread_mutex_lock(&db->lock);
    struct conn *c = pinned(db);
    while (!c) {
        for (int i = 0; i < db->n && !c; i++)
            if (!db->conns[i].busy && db->conns[i].m)
                c = &db->conns[i];
        for (int i = 0; i < db->n && !c; i++)
            if (!db->conns[i].busy)
                c = &db->conns[i];
        if (c)
            break;
        if (db->n < NB_MARIA_POOL) {
            c = &db->conns[db->n++];
            c->m = NULL;
            break;
        }
        pthread_cond_wait(&db->idle, &db->lock);
    }
    c->busy = true;
    pthread_mutex_unlock(&db->lock);
    if (c->m && !c->depth && closed_by_server(c->m)) {
        NB_INFO("nubo.db", NULL, NULL, "a pooled connection was closed by the server; reopening");
        mysql_close(c->m);
        c->m = NULL;
    }
    if (!c->m && !c->depth && !(c->m = connect_one(&db->url))) {
        pthread_mutex_lock(&db->lock);
        c->busy = false; /* a slot to retry later */
        pthread_cond_signal(&db->idle);
        pthread_mutex_unlock(&db->lock);
        unreachable = true;
        return NULL;
    }
    return c;
}

/* Closes c's lost connection; the next acquire of the slot reopens it. */
static void drop(struct conn *c)
{
    mysql_close(c->m);
    c->m = NULL;
    unreachable = true;
}

/* Gives c back unless a transaction pins it. */
static void release(struct nb_maria *db, struct conn *c)
{
    pthread_mutex_lock(&db->lock);
    if (!c->depth) {
        c->busy = false;
        pthread_cond_signal(&db->idle);
    }
    pthread_mutex_unlock(&db->lock);
}

/* The escaped, quoted literal of one argument (a new string). */
static char *literal(MYSQL *m, char type, va_list *ap)
{
    char *out = NULL;
    const char *s = NULL;
    char *dumped = NULL;
    switch (type) {
    case 's': s = va_arg(*ap, const char *); break;
    case 'i': return asprintf(&out, "%lld", va_arg(*ap, long long)) < 0 ? NULL : out;
    case 'd': return asprintf(&out, "%.17g", va_arg(*ap, double)) < 0 ? NULL : out;
    case 'b': return strdup(va_arg(*ap, int) ? "1" : "0");
    case 'j': {
        json_t *j = va_arg(*ap, json_t *);
        s = dumped = j ? nb_json_dump(j) : NULL;
        break;
    }
    default: assert(!"bad type character in db call");
    }
    if (!s)
        return strdup("NULL");
    size_t len = strlen(s);
    out = malloc(len * 2 + 3);
    if (out) {
        out[0] = '\'';
        unsigned long n = mysql_real_escape_string(m, out + 1, s, (unsigned long)len);
        out[n + 1] = '\'';
        out[n + 2] = '\0';
    }
    free(dumped);
    return out;
}

/* sql with the arguments in; NULL after setting ctx. */
static char *build(MYSQL *m, struct nb_ctx *ctx, const char *sql, const char *types, va_list ap)
{
    int n = types ? (int)strlen(types) : 0, found = 0;
    char **lits = calloc((size_t)n + 1, sizeof(*lits));
    va_list cp;
    va_copy(cp, ap);
    bool ok = lits != NULL;
    for (int i = 0; ok && i < n; i++)
        ok = (lits[i] = literal(m, types[i], &cp)) != NULL;
    va_end(cp);
    char *q = ok ? nb_maria_interpolate(sql, lits, n, &found) : NULL;
    for (int i = 0; lits && i < n; i++)
        free(lits[i]);
    free(lits);
    if (!q) {
        NB_ERROR("nubo.db", ctx, NULL, "SQL has %d parameters but %d were given: %s", found, n,
                 sql);
        nb_error(ctx, 500, NULL, "Database error.");
    }
    return q;
}

static json_t *cell(const MYSQL_FIELD *f, const char *v, unsigned long len)
{
    if (!v)
        return json_null();
    switch (f->type) {
    case MYSQL_TYPE_TINY:
    case MYSQL_TYPE_SHORT:
    case MYSQL_TYPE_INT24:
    case MYSQL_TYPE_LONG:
    case MYSQL_TYPE_LONGLONG:
    case MYSQL_TYPE_YEAR: return json_integer(strtoll(v, NULL, 10));
    case MYSQL_TYPE_DECIMAL:
    case MYSQL_TYPE_NEWDECIMAL:
        if (f->decimals == 0)
            return json_integer(strtoll(v, NULL, 10));
        return json_real(strtod(v, NULL));
    case MYSQL_TYPE_FLOAT:
    case MYSQL_TYPE_DOUBLE: return json_real(strtod(v, NULL));
    default: {
        json_t *s = json_stringn(v, len);
        return s ? s : json_string("");
    }
    }
}

/* Appends the result's rows (up to max_rows, 0 = all) to rows. */
static void fetch(MYSQL_RES *res, json_t *rows, int max_rows)
{
    unsigned nf = mysql_num_fields(res);
    MYSQL_FIELD *fields = mysql_fetch_fields(res);
    MYSQL_ROW r;
    while ((r = mysql_fetch_row(res)) && (max_rows == 0 || (int)json_array_size(rows) < max_rows)) {
        unsigned long *lens = mysql_fetch_lengths(res);
        json_t *o = json_object();
        for (unsigned i = 0; i < nf; i++)
            json_object_set_new(o, fields[i].name, cell(&fields[i], r[i], lens[i]));
        json_array_append_new(rows, o);
    }
}

/* One try of q on c: changed rows, or -1 with *err set. */
static int run_once(struct conn *c, json_t *rows, int max_rows, const char *q, size_t qlen,
                    unsigned *err)
{
    if (mysql_real_query(c->m, q, (unsigned long)qlen)) {
        *err = mysql_errno(c->m);
        return -1;
    }
    MYSQL_RES *res = mysql_store_result(c->m);
    if (res) {
        if (rows)
            fetch(res, rows, max_rows);
        mysql_free_result(res);
        return 0;
    }
    if (mysql_field_count(c->m)) {
        *err = mysql_errno(c->m);
        return -1;
    }
    last_id = (long long)mysql_insert_id(c->m);
    return (int)mysql_affected_rows(c->m);
}

static void backoff(int attempt)
{
    long ms = 100L << attempt;
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Logs the SQL text without the values (they may be secrets), as sqlite.c. */
static int fail(struct conn *c, struct nb_ctx *ctx, unsigned err, const char *sql)
{
    const char *msg = mysql_error(c->m);
    if (c->depth && nb_maria_retryable(err, msg))
        NB_ERROR("nubo.db", ctx, NULL,
                 "SQL failed (%u) inside a transaction, not retried (db.h cannot redo the "
                 "caller's transaction): %s: %s",
                 err, msg, sql);
    else if (c->depth && nb_maria_conn_lost(err))
        NB_ERROR("nubo.db", ctx, NULL,
                 "SQL failed (%u) inside a transaction: connection lost, the transaction is "
                 "gone: %s: %s",
                 err, msg, sql);
    else if (nb_maria_conn_lost(err))
        NB_ERROR("nubo.db", ctx, NULL,
                 "SQL failed (%u): connection lost with the statement sent; not retried, it may "
                 "have been applied: %s: %s",
                 err, msg, sql);
    else
        NB_ERROR("nubo.db", ctx, NULL, "SQL failed (%u): %s: %s", err, msg, sql);
    if (nb_maria_constraint(err))
        return nb_error(ctx, 409, NULL, "Conflict: %s", msg);
    return nb_error(ctx, 500, NULL, "Database error.");
}

/* Marks what err did to c's transaction (inside one): a conflict the caller
 * may redo; a deadlock, Galera abort or lost connection ended it. */
static void tx_failed(struct conn *c, unsigned err, const char *msg)
{
    if (nb_maria_retryable(err, msg)) {
        conflict = true;
        retryable_failures++;
    }
    if (err != 1205 && (nb_maria_retryable(err, msg) || nb_maria_conn_lost(err)))
        c->aborted = true;
}

/* An outermost statement or begin starts the thread's flags afresh. */
static void reset_flags(struct nb_maria *db)
{
    pthread_mutex_lock(&db->lock);
    if (!pinned(db))
        conflict = unreachable = false;
    pthread_mutex_unlock(&db->lock);
}

int nb_maria_run(struct nb_maria *db, struct nb_ctx *ctx, json_t *rows, int max_rows,
                 const char *sql, const char *types, va_list ap)
{
    reset_flags(db);
    struct conn *c = acquire(db);
    if (!c)
        return nb_error(ctx, 500, NULL, "Database error.");
    if (c->aborted || !c->m) {
        NB_ERROR("nubo.db", ctx, NULL, "SQL not run: the server already ended this transaction: %s",
                 sql);
        release(db, c);
        return nb_error(ctx, 500, NULL, "Database error.");
    }
    char *q = build(c->m, ctx, sql, types, ap);
    if (c->depth && !nb_maria_is_read(sql))
        c->wrote = true;
    int ret = -1;
    bool reconnected = false;
    size_t base = rows ? json_array_size(rows) : 0;
    for (int attempt = 0; q; attempt++) {
        unsigned err = 0;
        ret = run_once(c, rows, max_rows, q, strlen(q), &err);
        if (ret >= 0)
            break;
        while (rows && json_array_size(rows) > base)
            json_array_remove(rows, json_array_size(rows) - 1);
        const char *msg = mysql_error(c->m);
        if (!c->depth && nb_maria_resend_safe(err, q) && !reconnected) {
            NB_WARN("nubo.db", ctx, NULL,
                    "SQL failed (%u): %s; connection lost, reconnecting and retrying once", err,
                    msg);
            drop(c);
            reconnected = true;
            if ((c->m = connect_one(&db->url))) {
                unreachable = false;
                continue;
            }
            ret = nb_error(ctx, 500, NULL, "Database error.");
            break;
        }
        if (c->depth || attempt + 1 >= RETRIES || !nb_maria_retryable(err, msg)) {
            if (c->depth)
                tx_failed(c, err, msg);
            ret = fail(c, ctx, err, sql);
            if (nb_maria_conn_lost(err))
                drop(c);
            break;
        }
        NB_WARN("nubo.db", ctx, NULL, "SQL failed (%u), retrying (%d of %d): %s", err, attempt + 1,
                RETRIES - 1, msg);
        backoff(attempt);
    }
    free(q);
    release(db, c);
    return ret;
}

int nb_maria_script(struct nb_maria *db, struct nb_ctx *ctx, const char *sql)
{
    struct conn *c = acquire(db);
    if (!c)
        return nb_error(ctx, 500, NULL, "Database error.");
    if (!c->m) { /* a transaction's lost connection */
        release(db, c);
        return nb_error(ctx, 500, NULL, "Database error.");
    }
    int rc = 0;
    mysql_set_server_option(c->m, MYSQL_OPTION_MULTI_STATEMENTS_ON);
    int status = mysql_query(c->m, sql);
    for (;;) {
        if (status) {
            NB_ERROR("nubo.db", ctx, NULL, "SQL script failed (%u): %s", mysql_errno(c->m),
                     mysql_error(c->m));
            rc = nb_error(ctx, 500, NULL, "Database error.");
            break;
        }
        MYSQL_RES *res = mysql_store_result(c->m);
        mysql_free_result(res);
        if ((status = mysql_next_result(c->m)) < 0) /* -1: no more results */
            break;
    }
    while (rc < 0 && mysql_next_result(c->m) == 0)
        mysql_free_result(mysql_store_result(c->m));
    mysql_set_server_option(c->m, MYSQL_OPTION_MULTI_STATEMENTS_OFF);
    release(db, c);
    return rc;
}

long long nb_maria_last_id(struct nb_maria *db)
{
    (void)db;
    return last_id;
}

/* Runs a transaction-control statement on c; 0, or -1 after logging (and
 * marking what the error did to c's transaction, dropping a lost connection). */
static void tx_exec_failed(struct conn *c, struct nb_ctx *ctx, const char *sql)
{
    unsigned err = mysql_errno(c->m);
    const char *msg = mysql_error(c->m);
    NB_ERROR("nubo.db", ctx, NULL, "%s failed (%u): %s%s", sql, err, msg,
             nb_maria_retryable(err, msg) ? " (transaction not retried)"
             : nb_maria_conn_lost(err)    ? " (connection lost)"
                                          : "");
    tx_failed(c, err, msg);
    if (nb_maria_conn_lost(err))
        drop(c);
}

static int tx_exec(struct conn *c, struct nb_ctx *ctx, const char *sql)
{
    if (!mysql_query(c->m, sql))
        return 0;
    tx_exec_failed(c, ctx, sql);
    return -1;
}

int nb_maria_begin(struct nb_maria *db, struct nb_ctx *ctx)
{
    reset_flags(db);
    struct conn *c = acquire(db);
    if (!c)
        return nb_error(ctx, 500, NULL, "Database error.");
    int rc = -1;
    if (c->aborted || !c->m) {
        NB_ERROR("nubo.db", ctx, NULL,
                 "SAVEPOINT not run: the server already ended this transaction");
    } else if (c->depth) {
        char sql[48];
        snprintf(sql, sizeof(sql), "SAVEPOINT sp_%d", c->depth + 1);
        rc = tx_exec(c, ctx, sql);
        if (rc < 0 && !c->m) /* the transaction went with the connection */
            c->aborted = true;
    } else if (!mysql_query(c->m, "START TRANSACTION")) {
        rc = 0;
    } else if (nb_maria_conn_lost(mysql_errno(c->m))) {
        /* nothing is lost yet: a connection the server closed since its last
         * use (a restart, wait_timeout) is reopened and the begin tried once more */
        NB_WARN("nubo.db", ctx, NULL,
                "START TRANSACTION failed (%u): %s; connection lost, reconnecting",
                mysql_errno(c->m), mysql_error(c->m));
        drop(c);
        if ((c->m = connect_one(&db->url))) {
            unreachable = false;
            rc = tx_exec(c, ctx, "START TRANSACTION");
        }
    } else {
        NB_ERROR("nubo.db", ctx, NULL, "START TRANSACTION failed (%u): %s", mysql_errno(c->m),
                 mysql_error(c->m));
    }
    if (rc < 0) {
        release(db, c);
        return nb_error(ctx, 500, NULL, "Database error.");
    }
    pthread_mutex_lock(&db->lock);
    if (!c->depth++) {
        c->owner = pthread_self();
        c->t0 = nb_time_mono();
        c->wrote = false;
    }
    pthread_mutex_unlock(&db->lock);
    return 0;
}

/* Ends one level of c's transaction; releases c after the outermost. */
static void pop(struct nb_maria *db, struct conn *c)
{
    pthread_mutex_lock(&db->lock);
    if (!--c->depth)
        c->aborted = false;
    pthread_mutex_unlock(&db->lock);
    release(db, c);
}

/* Whether the transaction that wrote token into slot's nubo_commits row was
 * applied, asked on a connection of its own (up to 10 s while none can be
 * opened) after every write the node received is applied (Galera's
 * wsrep_sync_wait: the writer may have been another node): 1, 0, or -1 when
 * the database could not be asked. */
static int commit_applied(struct nb_maria *db, const char *slot, const char *token)
{
    for (int i = 0; i < 20; i++) {
        if (i)
            nanosleep(&(struct timespec){0, 500000000L}, NULL);
        MYSQL *m = connect_one(&db->url);
        if (!m)
            continue;
        mysql_query(m, "SET SESSION wsrep_sync_wait = 1"); /* not Galera: fails, harmless */
        char sql[160];
        snprintf(sql, sizeof(sql), "SELECT marker FROM nubo_commits WHERE slot = '%s'", slot);
        int found = -1;
        if (!mysql_query(m, sql)) {
            MYSQL_RES *res = mysql_store_result(m);
            MYSQL_ROW r = res ? mysql_fetch_row(res) : NULL;
            found = res ? (r && r[0] && !strcmp(r[0], token)) : -1;
            mysql_free_result(res);
        }
        mysql_close(m);
        if (found >= 0)
            return found;
    }
    return -1;
}

/* The outermost COMMIT of c. A transaction that wrote first records a new
 * token in c's nubo_commits row (093_commit_markers.sql), so that when the
 * COMMIT was sent and its answer lost, whether it was applied can be read
 * back: a committed transaction is then reported committed (not redone by
 * its caller, which would find its own work and take it for a concurrent
 * one's), one that was not is reported failed with the database
 * unreachable (safe to redo). 0 when committed; -1 logged. */
static int commit_outermost(struct nb_maria *db, struct conn *c, struct nb_ctx *ctx)
{
    char token[17] = "", slot[48];
    snprintf(slot, sizeof(slot), "%s-%d", db->token, (int)(c - db->conns));
    if (c->wrote) {
        nb_random_hex(token, 8);
        char sql[192];
        snprintf(sql, sizeof(sql),
                 "INSERT INTO nubo_commits (slot, marker) VALUES ('%s', '%s') "
                 "ON DUPLICATE KEY UPDATE marker = VALUES(marker)",
                 slot, token);
        if (mysql_query(c->m, sql) && mysql_errno(c->m) == 1146) {
            token[0] = '\0'; /* ER_NO_SUCH_TABLE: a database before migration 093 */
        } else if (mysql_errno(c->m)) {
            tx_exec_failed(c, ctx, "INSERT INTO nubo_commits");
            if (c->m)
                mysql_query(c->m, "ROLLBACK");
            return -1;
        }
    }
    int lose = lose_commit_answer;
    lose_commit_answer = 0;
    if (lose == 2) /* the server never ran it: as if it died before the COMMIT */
        mysql_query(c->m, "ROLLBACK");
    if (!lose && !mysql_query(c->m, "COMMIT"))
        return 0;
    if (lose == 1 && mysql_query(c->m, "COMMIT"))
        lose = 0; /* a real failure: reported as such */
    unsigned err = lose ? 2013 : mysql_errno(c->m);
    if (!token[0] || !nb_maria_conn_lost(err) || nb_maria_resend_safe(err, NULL)) {
        tx_exec_failed(c, ctx, "COMMIT");
        if (c->m)
            mysql_query(c->m, "ROLLBACK");
        return -1;
    }
    NB_WARN("nubo.db", ctx, NULL,
            "COMMIT failed (%u): %s; the connection was lost with the COMMIT sent: asking the "
            "database whether it was applied",
            err, lose ? "answer dropped by the test" : mysql_error(c->m));
    drop(c);
    int applied = commit_applied(db, slot, token);
    if (applied == 1) {
        NB_WARN("nubo.db", ctx, NULL, "the COMMIT whose answer was lost was applied");
        unreachable = false;
        return 0;
    }
    if (applied == 0)
        NB_WARN("nubo.db", ctx, NULL, "the COMMIT whose answer was lost was not applied");
    else
        NB_ERROR("nubo.db", ctx, NULL,
                 "whether the COMMIT whose answer was lost was applied is unknown: the database "
                 "is unreachable");
    c->aborted = true;
    unreachable = true;
    return -1;
}

static int run_sql(struct nb_maria *db, struct nb_ctx *ctx, const char *sql, const char *types, ...)
{
    va_list ap;
    va_start(ap, types);
    int rc = nb_maria_run(db, ctx, NULL, 0, sql, types, ap);
    va_end(ap);
    return rc;
}

int nb_maria_prune_commit_markers(struct nb_maria *db, struct nb_ctx *ctx, int max_age_s)
{
    if (max_age_s < NB_MARIA_MARKER_MIN_AGE_S)
        max_age_s = NB_MARIA_MARKER_MIN_AGE_S;
    return run_sql(db, ctx, "DELETE FROM nubo_commits WHERE updated_at < NOW() - INTERVAL ? SECOND",
                   "i", (long long)max_age_s);
}

int nb_maria_commit(struct nb_maria *db, struct nb_ctx *ctx)
{
    pthread_mutex_lock(&db->lock);
    struct conn *c = pinned(db);
    pthread_mutex_unlock(&db->lock);
    assert(c);
    char sql[96];
    int rc = -1;
    if (c->aborted || !c->m) {
        NB_ERROR("nubo.db", ctx, NULL, "%s not run: the server already ended this transaction",
                 c->depth > 1 ? "RELEASE SAVEPOINT" : "COMMIT");
    } else if (c->depth > 1) {
        snprintf(sql, sizeof(sql), "RELEASE SAVEPOINT sp_%d", c->depth);
        if ((rc = tx_exec(c, ctx, sql)) < 0 && c->m && !c->aborted) {
            snprintf(sql, sizeof(sql), "ROLLBACK TO SAVEPOINT sp_%d", c->depth);
            mysql_query(c->m, sql);
        }
    } else {
        rc = commit_outermost(db, c, ctx);
    }
    if (c->depth == 1)
        nb_metrics_observe(NB_M_DB_TRANSACTION_SECONDS, nb_time_mono() - c->t0,
                           (const char *const[]){rc == 0 ? "commit" : "failed_commit"});
    pop(db, c);
    return rc == 0 ? 0 : nb_error(ctx, 500, NULL, "Database error.");
}

void nb_maria_rollback(struct nb_maria *db)
{
    pthread_mutex_lock(&db->lock);
    struct conn *c = pinned(db);
    pthread_mutex_unlock(&db->lock);
    if (!c)
        return;
    char sql[64];
    if (!c->m) {
        /* lost with its connection: nothing to undo */
    } else if (c->depth > 1) {
        if (!c->aborted) { /* else its savepoints went with the transaction */
            snprintf(sql, sizeof(sql), "ROLLBACK TO SAVEPOINT sp_%d", c->depth);
            mysql_query(c->m, sql);
            snprintf(sql, sizeof(sql), "RELEASE SAVEPOINT sp_%d", c->depth);
            mysql_query(c->m, sql);
        }
    } else if (mysql_query(c->m, "ROLLBACK") && nb_maria_conn_lost(mysql_errno(c->m))) {
        drop(c);
    }
    if (c->depth == 1)
        nb_metrics_observe(NB_M_DB_TRANSACTION_SECONDS, nb_time_mono() - c->t0,
                           (const char *const[]){"rollback"});
    pop(db, c);
}

bool nb_maria_conflict(void)
{
    return conflict;
}

bool nb_maria_unreachable(void)
{
    return unreachable;
}
