/* password.c - the password a guest posts to the metadata service, as
 * Nova's nova/api/metadata/password.py keeps it: in the instance's system
 * metadata, split into password_0..password_3 of at most 255 characters
 * (a password of at most 256 bytes). The os-server-password API reads and
 * clears it (clearing sets the chunks to ""). */
#include "compute/metadata/metadata.h"

#include "common/cleanup.h"
#include "common/json.h"
#include "common/sbuf.h"
#include "db/db.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHUNKS 4
#define CHUNK_LEN 255

char *nb_md_password_get(struct nb_db *db, struct nb_ctx *ctx, const char *uuid)
{
    _cleanup_json_ json_t *rows =
        nb_db_rows(db, ctx,
                   "SELECT value FROM instance_system_metadata WHERE instance_uuid = ? AND "
                   "deleted = 0 AND \"key\" LIKE 'password!_%' ESCAPE '!' ORDER BY \"key\"",
                   "s", uuid);
    if (!rows)
        return NULL;
    struct nb_sbuf pw = {0};
    nb_sbuf_str(&pw, "");
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r)
        if (nb_json_str(r, "value"))
            nb_sbuf_str(&pw, nb_json_str(r, "value"));
    return pw.s;
}

int nb_md_password_set(struct nb_db *db, struct nb_ctx *ctx, const char *uuid, const char *pw,
                       size_t len)
{
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    for (int i = 0; i < CHUNKS; i++) {
        char key[16];
        snprintf(key, sizeof(key), "password_%d", i);
        size_t off = (size_t)i * CHUNK_LEN;
        size_t n = off < len ? (len - off < CHUNK_LEN ? len - off : CHUNK_LEN) : 0;
        _cleanup_free_ char *chunk = strndup(off < len ? pw + off : "", n);
        if (nb_db_exec(db, ctx,
                       "UPDATE instance_system_metadata SET deleted = id WHERE instance_uuid = ? "
                       "AND \"key\" = ? AND deleted = 0",
                       "ss", uuid, key) < 0 ||
            nb_db_exec(
                db, ctx,
                "INSERT INTO instance_system_metadata (instance_uuid, \"key\", value) VALUES "
                "(?, ?, ?)",
                "sss", uuid, key, chunk) < 0) {
            nb_db_rollback(db);
            return -1;
        }
    }
    return nb_db_commit(db, ctx);
}
