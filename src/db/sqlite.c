/* sqlite.c - db.h on SQLite.
 *
 * One connection in WAL mode (synchronous=NORMAL: a commit survives a
 * process crash; an OS crash may lose the last transactions but never
 * corrupts). A recursive mutex serializes access: nb_db_begin takes it and
 * holds it until commit/rollback, so one thread's transaction is isolated
 * from the others. A begin of the thread that already holds a transaction
 * opens a savepoint (the mutex is taken once more and released by the
 * matching commit/rollback). Prepared statements are cached by SQL text in a small
 * hash table and reset after use. */
#include "db/db.h"
#include "common/json.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/util.h"
#include "db/mariadb.h"
#include "db/migrations.h"
#include "db/url.h"

#include <assert.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CACHE_SIZE 1024

struct cached {
    char *sql;
    sqlite3_stmt *st;
};

struct nb_db {
    struct nb_maria *maria; /* MariaDB (mariadb.h) instead of SQLite when set */
    sqlite3 *conn;
    pthread_mutex_t lock;
    pthread_t tx_owner;
    int tx_depth; /* 0: none; 1: the BEGIN; n > 1: savepoints sp_2 .. sp_n */
    double tx_t0; /* when the outermost transaction began (nb_time_mono) */
    struct cached cache[CACHE_SIZE];
};

static void db_lock(struct nb_db *db)
{
    pthread_mutex_lock(&db->lock);
}
static void db_unlock(struct nb_db *db)
{
    pthread_mutex_unlock(&db->lock);
}

/* A MariaDB URL (db/url.h) instead of a path: the MariaDB backend. */
static struct nb_db *open_mariadb(const char *url)
{
    struct nb_db_url u;
    char err[256];
    if (nb_db_url_parse(url, NULL, &u, err, sizeof(err)) < 0) {
        NB_ERROR("nubo.db", NULL, NULL, "[database] connection: %s", err);
        return NULL;
    }
    struct nb_db *db = calloc(1, sizeof(*db));
    if (db && !(db->maria = nb_maria_open(&u))) {
        free(db);
        db = NULL;
    }
    return db;
}

struct nb_db *nb_db_open(const char *path)
{
    if (nb_db_url_is_mariadb(path))
        return open_mariadb(path);
    struct nb_db *db = calloc(1, sizeof(*db));
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&db->lock, &attr);
    pthread_mutexattr_destroy(&attr);
    if (sqlite3_open_v2(path, &db->conn,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                        NULL) != SQLITE_OK) {
        NB_ERROR("nubo.db", NULL, NULL, "cannot open database %s: %s", path,
                 db->conn ? sqlite3_errmsg(db->conn) : "out of memory");
        sqlite3_close(db->conn);
        free(db);
        return NULL;
    }
    sqlite3_busy_timeout(db->conn, 10000);
    sqlite3_exec(db->conn,
                 "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;"
                 "PRAGMA temp_store=MEMORY; PRAGMA cache_size=-65536;",
                 NULL, NULL, NULL);
    return db;
}

void nb_db_close(struct nb_db *db)
{
    if (!db)
        return;
    if (db->maria) {
        nb_maria_close(db->maria);
        free(db);
        return;
    }
    for (int i = 0; i < CACHE_SIZE; i++) {
        sqlite3_finalize(db->cache[i].st);
        free(db->cache[i].sql);
    }
    sqlite3_close(db->conn);
    pthread_mutex_destroy(&db->lock);
    free(db);
}

static unsigned hash_sql(const char *s)
{
    unsigned h = 5381;
    while (*s)
        h = h * 33 + (unsigned char)*s++;
    return h;
}

/* Returns a reset, cached statement for sql (lock held), or NULL. */
static sqlite3_stmt *prepare(struct nb_db *db, struct nb_ctx *ctx, const char *sql)
{
    unsigned h = hash_sql(sql) % CACHE_SIZE;
    for (unsigned probe = 0; probe < 8; probe++) {
        struct cached *c = &db->cache[(h + probe) % CACHE_SIZE];
        if (c->sql && strcmp(c->sql, sql) == 0) {
            sqlite3_reset(c->st);
            sqlite3_clear_bindings(c->st);
            return c->st;
        }
        if (!c->sql) {
            if (sqlite3_prepare_v3(db->conn, sql, -1, SQLITE_PREPARE_PERSISTENT, &c->st, NULL) !=
                SQLITE_OK) {
                NB_ERROR("nubo.db", ctx, NULL, "SQL prepare failed: %s: %s",
                         sqlite3_errmsg(db->conn), sql);
                nb_error(ctx, 500, NULL, "Database error.");
                c->st = NULL;
                return NULL;
            }
            c->sql = strdup(sql);
            return c->st;
        }
    }
    /* Cache neighbourhood full: evict the home slot. */
    struct cached *c = &db->cache[h];
    sqlite3_finalize(c->st);
    free(c->sql);
    c->sql = NULL;
    if (sqlite3_prepare_v3(db->conn, sql, -1, SQLITE_PREPARE_PERSISTENT, &c->st, NULL) !=
        SQLITE_OK) {
        NB_ERROR("nubo.db", ctx, NULL, "SQL prepare failed: %s: %s", sqlite3_errmsg(db->conn), sql);
        nb_error(ctx, 500, NULL, "Database error.");
        c->st = NULL;
        return NULL;
    }
    c->sql = strdup(sql);
    return c->st;
}

static int bind_args(struct nb_db *db, struct nb_ctx *ctx, sqlite3_stmt *st, const char *types,
                     va_list ap)
{
    int n = types ? (int)strlen(types) : 0;
    if (n != sqlite3_bind_parameter_count(st)) {
        NB_ERROR("nubo.db", ctx, NULL, "SQL has %d parameters but %d were given: %s",
                 sqlite3_bind_parameter_count(st), n, sqlite3_sql(st));
        return nb_error(ctx, 500, NULL, "Database error.");
    }
    for (int i = 0; i < n; i++) {
        int rc = SQLITE_OK;
        switch (types[i]) {
        case 's': {
            const char *s = va_arg(ap, const char *);
            rc = s ? sqlite3_bind_text(st, i + 1, s, -1, SQLITE_TRANSIENT)
                   : sqlite3_bind_null(st, i + 1);
            break;
        }
        case 'i': rc = sqlite3_bind_int64(st, i + 1, va_arg(ap, long long)); break;
        case 'd': rc = sqlite3_bind_double(st, i + 1, va_arg(ap, double)); break;
        case 'b': rc = sqlite3_bind_int(st, i + 1, va_arg(ap, int) ? 1 : 0); break;
        case 'j': {
            json_t *j = va_arg(ap, json_t *);
            if (!j) {
                rc = sqlite3_bind_null(st, i + 1);
            } else {
                char *s = nb_json_dump(j);
                rc = sqlite3_bind_text(st, i + 1, s, -1, free);
            }
            break;
        }
        default: assert(!"bad type character in db call");
        }
        if (rc != SQLITE_OK) {
            NB_ERROR("nubo.db", ctx, NULL, "bind failed: %s", sqlite3_errmsg(db->conn));
            return nb_error(ctx, 500, NULL, "Database error.");
        }
    }
    return 0;
}

static json_t *row_object(sqlite3_stmt *st)
{
    json_t *o = json_object();
    int nc = sqlite3_column_count(st);
    for (int c = 0; c < nc; c++) {
        const char *name = sqlite3_column_name(st, c);
        json_t *v;
        switch (sqlite3_column_type(st, c)) {
        case SQLITE_INTEGER: v = json_integer(sqlite3_column_int64(st, c)); break;
        case SQLITE_FLOAT: v = json_real(sqlite3_column_double(st, c)); break;
        case SQLITE_NULL: v = json_null(); break;
        default:
            v = json_stringn((const char *)sqlite3_column_text(st, c),
                             (size_t)sqlite3_column_bytes(st, c));
            if (!v) /* invalid UTF-8 stored by someone else */
                v = json_string("");
        }
        json_object_set_new(o, name, v);
    }
    return o;
}

static int step_error(struct nb_db *db, struct nb_ctx *ctx, sqlite3_stmt *st, int rc)
{
    int ext = sqlite3_extended_errcode(db->conn);
    NB_ERROR("nubo.db", ctx, NULL, "SQL failed (%d): %s: %s", ext, sqlite3_errmsg(db->conn),
             sqlite3_sql(st));
    if ((rc & 0xff) == SQLITE_CONSTRAINT)
        return nb_error(ctx, 409, NULL, "Conflict: %s", sqlite3_errmsg(db->conn));
    return nb_error(ctx, 500, NULL, "Database error.");
}

/* Runs sql; when rows is non-NULL appends each row (up to max_rows, 0 = all). */
static int run(struct nb_db *db, struct nb_ctx *ctx, json_t *rows, int max_rows, const char *sql,
               const char *types, va_list ap)
{
    if (db->maria)
        return nb_maria_run(db->maria, ctx, rows, max_rows, sql, types, ap);
    db_lock(db);
    int ret = -1;
    sqlite3_stmt *st = prepare(db, ctx, sql);
    if (!st || bind_args(db, ctx, st, types, ap) < 0)
        goto cleanup;
    for (;;) {
        int rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            if (rows && (max_rows == 0 || (int)json_array_size(rows) < max_rows))
                json_array_append_new(rows, row_object(st));
            if (max_rows && rows && (int)json_array_size(rows) >= max_rows)
                break;
            continue;
        }
        if (rc == SQLITE_DONE)
            break;
        step_error(db, ctx, st, rc);
        goto cleanup;
    }
    ret = sqlite3_changes(db->conn);
cleanup:
    if (st)
        sqlite3_reset(st);
    db_unlock(db);
    return ret;
}

int nb_db_exec(struct nb_db *db, struct nb_ctx *ctx, const char *sql, const char *types, ...)
{
    va_list ap;
    va_start(ap, types);
    int rc = run(db, ctx, NULL, 0, sql, types, ap);
    va_end(ap);
    return rc;
}

json_t *nb_db_rows(struct nb_db *db, struct nb_ctx *ctx, const char *sql, const char *types, ...)
{
    json_t *rows = json_array();
    va_list ap;
    va_start(ap, types);
    int rc = run(db, ctx, rows, 0, sql, types, ap);
    va_end(ap);
    if (rc < 0) {
        json_decref(rows);
        return NULL;
    }
    return rows;
}

json_t *nb_db_row(struct nb_db *db, struct nb_ctx *ctx, const char *sql, const char *types, ...)
{
    json_t *rows = json_array();
    va_list ap;
    va_start(ap, types);
    int rc = run(db, ctx, rows, 1, sql, types, ap);
    va_end(ap);
    json_t *row = rc < 0 ? NULL : json_incref(json_array_get(rows, 0));
    json_decref(rows);
    return row;
}

long long nb_db_int(struct nb_db *db, struct nb_ctx *ctx, long long def, const char *sql,
                    const char *types, ...)
{
    json_t *rows = json_array();
    va_list ap;
    va_start(ap, types);
    int rc = run(db, ctx, rows, 1, sql, types, ap);
    va_end(ap);
    long long v = def;
    if (rc < 0) {
        v = -1;
    } else if (json_array_size(rows)) {
        json_t *row = json_array_get(rows, 0);
        const char *k;
        json_t *val;
        json_object_foreach (row, k, val) {
            if (json_is_integer(val))
                v = json_integer_value(val);
            else if (json_is_real(val))
                v = (long long)json_real_value(val);
            break;
        }
    }
    json_decref(rows);
    return v;
}

long long nb_db_last_id(struct nb_db *db)
{
    if (db->maria)
        return nb_maria_last_id(db->maria);
    db_lock(db);
    long long id = sqlite3_last_insert_rowid(db->conn);
    db_unlock(db);
    return id;
}

/* Runs one transaction-control statement; 0, or -1 after logging. */
static int tx_exec(struct nb_db *db, struct nb_ctx *ctx, const char *sql)
{
    char *err = NULL;
    if (sqlite3_exec(db->conn, sql, NULL, NULL, &err) == SQLITE_OK)
        return 0;
    NB_ERROR("nubo.db", ctx, NULL, "%s failed: %s", sql, err ? err : "?");
    sqlite3_free(err);
    return -1;
}

int nb_db_begin(struct nb_db *db, struct nb_ctx *ctx)
{
    if (db->maria)
        return nb_maria_begin(db->maria, ctx);
    db_lock(db);
    /* holding the mutex, a transaction still open is this thread's own */
    assert(!db->tx_depth || pthread_equal(db->tx_owner, pthread_self()));
    char sql[48] = "BEGIN IMMEDIATE";
    if (db->tx_depth)
        snprintf(sql, sizeof(sql), "SAVEPOINT sp_%d", db->tx_depth + 1);
    if (tx_exec(db, ctx, sql) < 0) {
        db_unlock(db);
        return nb_error(ctx, 500, NULL, "Database error.");
    }
    if (!db->tx_depth++) {
        db->tx_owner = pthread_self();
        db->tx_t0 = nb_time_mono();
    }
    return 0;
}

int nb_db_commit(struct nb_db *db, struct nb_ctx *ctx)
{
    if (db->maria)
        return nb_maria_commit(db->maria, ctx);
    assert(db->tx_depth > 0);
    char sql[96];
    int rc;
    if (db->tx_depth > 1) {
        snprintf(sql, sizeof(sql), "RELEASE sp_%d", db->tx_depth);
        rc = tx_exec(db, ctx, sql);
        if (rc < 0) {
            snprintf(sql, sizeof(sql), "ROLLBACK TO sp_%d; RELEASE sp_%d", db->tx_depth,
                     db->tx_depth);
            sqlite3_exec(db->conn, sql, NULL, NULL, NULL);
        }
    } else {
        rc = tx_exec(db, ctx, "COMMIT");
        if (rc < 0)
            sqlite3_exec(db->conn, "ROLLBACK", NULL, NULL, NULL);
        nb_metrics_observe(NB_M_DB_TRANSACTION_SECONDS, nb_time_mono() - db->tx_t0,
                           (const char *const[]){rc == 0 ? "commit" : "failed_commit"});
    }
    db->tx_depth--;
    db_unlock(db);
    return rc == 0 ? 0 : nb_error(ctx, 500, NULL, "Database error.");
}

void nb_db_rollback(struct nb_db *db)
{
    if (db->maria) {
        nb_maria_rollback(db->maria);
        return;
    }
    /* Callers also roll back after a failed begin or commit, which already
     * ended (or never opened) the transaction: then this thread holds no
     * transaction and there is nothing to undo. The mutex is recursive, so
     * the trylock succeeds for the thread that holds it. */
    if (pthread_mutex_trylock(&db->lock) != 0)
        return;
    bool mine = db->tx_depth > 0 && pthread_equal(db->tx_owner, pthread_self());
    db_unlock(db);
    if (!mine)
        return;
    char sql[64] = "ROLLBACK";
    if (db->tx_depth > 1)
        snprintf(sql, sizeof(sql), "ROLLBACK TO sp_%d; RELEASE sp_%d", db->tx_depth, db->tx_depth);
    sqlite3_exec(db->conn, sql, NULL, NULL, NULL);
    if (db->tx_depth == 1)
        nb_metrics_observe(NB_M_DB_TRANSACTION_SECONDS, nb_time_mono() - db->tx_t0,
                           (const char *const[]){"rollback"});
    db->tx_depth--;
    db_unlock(db);
}

bool nb_db_conflict(const struct nb_db *db)
{
    return db && db->maria && nb_maria_conflict();
}

bool nb_db_redo(struct nb_db *db, struct nb_ctx *ctx, int tries)
{
    if (!nb_db_conflict(db) || nb_ctx_status(ctx) != 500)
        return false;
    if (tries >= NB_DB_REDO_TRIES) {
        NB_WARN("nubo.db", ctx, NULL, "transaction still conflicting after %d tries", tries);
        return false;
    }
    NB_INFO("nubo.db", ctx, NULL,
            "transaction conflicted with a concurrent one, redoing it (try %d of %d)", tries + 1,
            NB_DB_REDO_TRIES);
    nb_ctx_clear_error(ctx);
    char jitter[3];
    nb_random_hex(jitter, 1);
    long ms = (10L << tries) + strtol(jitter, NULL, 16) % 20;
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    return true;
}

bool nb_db_unreachable(const struct nb_db *db)
{
    return db && db->maria && nb_maria_unreachable();
}

bool nb_db_redo_or_wait(struct nb_db *db, struct nb_ctx *ctx, int tries)
{
    if (!nb_db_unreachable(db) || nb_ctx_status(ctx) != 500)
        return nb_db_redo(db, ctx, tries);
    if (tries >= NB_DB_OUTAGE_TRIES) {
        NB_ERROR("nubo.db", ctx, NULL, "database still unreachable after %d tries, giving up",
                 tries);
        return false;
    }
    if (tries == 1 || tries % 10 == 0)
        NB_WARN("nubo.db", ctx, NULL,
                "database unreachable, trying again every second (try %d of %d)", tries + 1,
                NB_DB_OUTAGE_TRIES);
    nb_ctx_clear_error(ctx);
    struct timespec ts = {1, 0};
    nanosleep(&ts, NULL);
    return true;
}

int nb_db_version(struct nb_db *db)
{
    if (db->maria)
        return nb_maria_version(db->maria);
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    if (nb_db_exec(db, &ctx,
                   "CREATE TABLE IF NOT EXISTS nubo_migrations (version INTEGER PRIMARY KEY, "
                   "name TEXT NOT NULL, applied_at TEXT NOT NULL DEFAULT (datetime('now')))",
                   "") < 0)
        return -1;
    return (int)nb_db_int(db, &ctx, 0, "SELECT COALESCE(MAX(version), 0) FROM nubo_migrations", "");
}

int nb_db_sync(struct nb_db *db)
{
    if (db->maria)
        return nb_maria_sync(db->maria);
    int cur = nb_db_version(db);
    if (cur < 0)
        return -1;
    int applied = 0;
    for (const struct nb_migration *m = nb_migrations; m->name; m++) {
        struct nb_ctx ctx;
        nb_ctx_init_system(&ctx, NULL);
        /* Checked inside the (immediate) transaction: processes that open
         * a new database together (the split roles' units) apply each
         * migration once, the others then see it applied. */
        if (nb_db_begin(db, &ctx) < 0)
            return -1;
        long long done =
            nb_db_int(db, &ctx, -1, "SELECT COUNT(*) FROM nubo_migrations WHERE version = ?", "i",
                      (long long)m->version);
        if (done != 0) {
            nb_db_rollback(db);
            if (done < 0)
                return -1;
            continue;
        }
        char *err = NULL;
        if (sqlite3_exec(db->conn, m->sql, NULL, NULL, &err) != SQLITE_OK) {
            NB_ERROR("nubo.db", &ctx, NULL, "migration %s failed: %s", m->name, err);
            sqlite3_free(err);
            nb_db_rollback(db);
            return -1;
        }
        if (nb_db_exec(db, &ctx, "INSERT INTO nubo_migrations (version, name) VALUES (?, ?)", "is",
                       (long long)m->version, m->name) < 0 ||
            nb_db_commit(db, &ctx) < 0) {
            if (db->tx_depth)
                nb_db_rollback(db);
            return -1;
        }
        NB_INFO("nubo.db", &ctx, NULL, "applied migration %s", m->name);
        applied++;
    }
    return applied;
}

/* Dialect fragments (db.h). */
int nb_db_is_mariadb(const struct nb_db *db)
{
    return db && db->maria != NULL;
}

int nb_db_prune_commit_markers(struct nb_db *db, struct nb_ctx *ctx, int max_age_s)
{
    return db && db->maria ? nb_maria_prune_commit_markers(db->maria, ctx, max_age_s) : 0;
}

int nb_db_insert_ignore(struct nb_db *db, struct nb_ctx *ctx, const char *into, const char *types,
                        ...)
{
    char sql[2048];
    int len =
        snprintf(sql, sizeof(sql), "%s %s", db->maria ? "INSERT IGNORE" : "INSERT OR IGNORE", into);
    if (len < 0 || (size_t)len >= sizeof(sql))
        return nb_error(ctx, 500, NULL, "SQL statement too long");
    va_list ap;
    va_start(ap, types);
    int rc = run(db, ctx, NULL, 0, sql, types, ap);
    va_end(ap);
    return rc;
}

const char *nb_db_json_value(const struct nb_db *db)
{
    return nb_db_is_mariadb(db) ? "JSON_VALUE" : "json_extract";
}

const char *nb_db_for_update(const struct nb_db *db)
{
    return nb_db_is_mariadb(db) ? " FOR UPDATE" : "";
}

const char *nb_db_json_each(const struct nb_db *db)
{
    return nb_db_is_mariadb(db)
               ? "JSON_TABLE(?, '$[*]' COLUMNS (value VARCHAR(255) PATH '$')) AS json_each"
               : "json_each(?)";
}

const char *nb_db_upsert(const struct nb_db *db, char *buf, size_t n, const char *insert,
                         const char *keys, const char *cols, const char *extra)
{
    int maria = nb_db_is_mariadb(db);
    size_t len = (size_t)snprintf(
        buf, n, maria ? "%s ON DUPLICATE KEY UPDATE " : "%s ON CONFLICT (%s) DO UPDATE SET ",
        insert, keys);
    for (const char *c = cols; *c && len < n;) {
        size_t w = strcspn(c, ",");
        len += (size_t)snprintf(buf + len, n - len,
                                maria ? "%s%.*s = VALUES(%.*s)" : "%s%.*s = excluded.%.*s",
                                c == cols ? "" : ", ", (int)w, c, (int)w, c);
        c += w;
        c += strspn(c, ", ");
    }
    if (extra && len < n)
        snprintf(buf + len, n - len, ", %s", extra);
    return buf;
}
