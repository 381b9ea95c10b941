/* patch.c - Glance's image PATCH (application/openstack-images-v2.1-json-patch
 * and the older v2.0 draft-4 form) applied to an image record in memory.
 *
 * Two phases, as in Glance: the RequestDeserializer parses every operation
 * (op, JSON pointer, value), refuses read-only and reserved attributes (403)
 * and validates the new value against the image schema (400); then the
 * controller applies the operations in order. Only single-level paths are
 * accepted ("/name", "/tags", "/<property>"); "/locations" ops are refused
 * because this cloud does not show locations (show_multiple_locations is
 * False in Glance's defaults). */
#include "image/image_priv.h"
#include "common/cleanup.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const readonly_props[] = {
    "created_at", "updated_at", "status", "checksum", "size",         "virtual_size",  "direct_url",
    "self",       "file",       "schema", "id",       "os_hash_algo", "os_hash_value", NULL};
static const char *const reserved_props[] = {"location", "deleted", "deleted_at", NULL};

/* Attributes of Glance's domain Image a patch can set (hasattr(image, …)). */
static const char *const settable[] = {
    "name",  "visibility",  "protected",        "os_hidden", "min_disk", "min_ram",
    "owner", "disk_format", "container_format", "tags",      NULL};

static bool in_list(const char *const *list, const char *s)
{
    for (; *list; list++)
        if (strcmp(*list, s) == 0)
            return true;
    return false;
}

static int fail(char *msg, size_t n, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(char *msg, size_t n, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, n, fmt, ap);
    va_end(ap);
    return status;
}

struct change {
    const char *op; /* "add", "remove", "replace" */
    char *path[3];  /* decoded pointer tokens */
    int depth;
    const json_t *value; /* borrowed from the body; NULL for remove */
    int draft;
};

static void change_free(struct change *c)
{
    for (int i = 0; i < c->depth; i++)
        free(c->path[i]);
}

/* Glance's _validate_json_pointer and _decode_json_pointer. */
static int decode_pointer(const char *ptr, struct change *c, char *msg, size_t n)
{
    if (ptr[0] != '/')
        return fail(msg, n, 400, "Pointer `%s` does not start with \"/\".", ptr);
    /* adjacent "/" (possibly with blanks between) after the first char */
    for (const char *p = ptr + 1; *p; p++) {
        if (*p != '/')
            continue;
        const char *q = p + 1;
        while (*q == ' ' || *q == '\t')
            q++;
        if (*q == '/')
            return fail(msg, n, 400, "Pointer `%s` contains adjacent \"/\".", ptr);
    }
    size_t len = strlen(ptr);
    if (len > 1 && ptr[len - 1] == '/')
        return fail(msg, n, 400, "Pointer `%s` end with \"/\".", ptr);
    for (const char *p = ptr; *p; p++)
        if (*p == '~' && p[1] != '0' && p[1] != '1')
            return fail(msg, n, 400,
                        "Pointer `%s` contains \"~\" not part of a recognized escape sequence.",
                        ptr);
    const char *s = ptr;
    while (*s == '/')
        s++;
    c->depth = 0;
    while (1) {
        size_t l = strcspn(s, "/");
        if (c->depth == 3)
            return fail(msg, n, 400, "Invalid JSON pointer for this resource: '%s'", ptr);
        char *tok = malloc(l + 1), *o = tok;
        if (!tok)
            abort();
        for (size_t i = 0; i < l; i++) {
            if (s[i] == '~' && s[i + 1] == '1')
                *o++ = '/', i++;
            else if (s[i] == '~' && s[i + 1] == '0')
                *o++ = '~', i++;
            else
                *o++ = s[i];
        }
        *o = '\0';
        /* .strip() */
        char *b = tok;
        while (*b == ' ' || *b == '\t' || *b == '\n')
            b++;
        memmove(tok, b, strlen(b) + 1);
        for (size_t e = strlen(tok); e && (tok[e - 1] == ' ' || tok[e - 1] == '\t'); e--)
            tok[e - 1] = '\0';
        c->path[c->depth++] = tok;
        if (!s[l])
            break;
        s += l + 1;
    }
    return 0;
}

/* Parses and validates one raw operation (deserializer phase). */
static int parse_change(const json_t *raw, int draft, struct change *c, char *msg, size_t n)
{
    static const char *const ops[] = {"add", "remove", "replace", NULL};
    memset(c, 0, sizeof(*c));
    c->draft = draft;
    if (!json_is_object(raw))
        return fail(msg, n, 400, "Operations must be JSON objects.");
    const char *ptr = NULL;
    if (draft == 10) {
        json_t *op = json_object_get(raw, "op");
        if (!op)
            return fail(msg, n, 400,
                        "Unable to find `op` in JSON Schema change. It must be one of the "
                        "following: add, remove, replace.");
        if (!json_is_string(op) || !in_list(ops, json_string_value(op))) {
            _cleanup_free_ char *r =
                json_is_string(op) ? strdup(json_string_value(op)) : nb_image_pyrepr(op);
            return fail(msg, n, 400,
                        "Invalid operation: `%s`. It must be one of the following: add, remove, "
                        "replace.",
                        r);
        }
        c->op = json_string_value(op);
        json_t *p = json_object_get(raw, "path");
        if (!p)
            return fail(msg, n, 400, "Unable to find 'path' in JSON Schema change");
        if (!json_is_string(p))
            return fail(msg, n, 400, "Pointer `%s` does not start with \"/\".", "");
        ptr = json_string_value(p);
    } else {
        for (int i = 0; ops[i]; i++) {
            if (!json_object_get(raw, ops[i]))
                continue;
            if (c->op)
                return fail(msg, n, 400,
                            "Operation objects must contain only one member named \"add\", "
                            "\"remove\", or \"replace\".");
            c->op = ops[i];
        }
        if (!c->op)
            return fail(msg, n, 400,
                        "Operation objects must contain exactly one member named \"add\", "
                        "\"remove\", or \"replace\".");
        json_t *p = json_object_get(raw, c->op);
        if (!json_is_string(p))
            return fail(msg, n, 400, "Pointer `%s` does not start with \"/\".", "");
        ptr = json_string_value(p);
    }
    int st = decode_pointer(ptr, c, msg, n);
    if (st)
        return st;
    const char *root = c->path[0];
    /* _validate_path: locations may be two deep for add/remove, else one */
    int want = 1;
    if (strcmp(root, "locations") == 0 && strcmp(c->op, "replace") != 0)
        want = 2;
    if (c->depth != want) {
        char joined[512] = "";
        for (int i = 0; i < c->depth; i++) {
            size_t l = strlen(joined);
            snprintf(joined + l, sizeof(joined) - l, "%s%s", i ? "/" : "", c->path[i]);
        }
        return fail(msg, n, 400, "Invalid JSON pointer for this resource: '/%s'", joined);
    }
    if (strcmp(c->op, "remove") != 0) {
        c->value = json_object_get(raw, "value");
        if (!c->value)
            return fail(msg, n, 400, "Operation \"%s\" requires a member named \"value\".", c->op);
    }
    /* _validate_change */
    if (in_list(readonly_props, root))
        return fail(msg, n, 403, "Attribute '%s' is read-only.", root);
    if (in_list(reserved_props, root) || strncmp(root, "os_glance", 9) == 0)
        return fail(msg, n, 403, "Attribute '%s' is reserved.", root);
    if (strcmp(c->op, "remove") == 0)
        return 0;
    _cleanup_json_ json_t *partial = json_object();
    if (c->depth == 1)
        json_object_set(partial, root, (json_t *)c->value);
    else
        json_object_set_new(partial, root, json_pack("[O]", c->value));
    return nb_image_schema_check(partial, msg, n) < 0 ? 400 : 0;
}

/* Sets a base attribute of rec as the domain Image's setters do. */
static int set_attr(json_t *rec, const char *attr, const json_t *value, char *msg, size_t n)
{
    if (strcmp(attr, "disk_format") == 0 || strcmp(attr, "container_format") == 0) {
        const char *status = json_string_value(json_object_get(rec, "status"));
        if (status && strcmp(status, "queued") != 0 && strcmp(status, "importing") != 0)
            return fail(msg, n, 403, "Attribute %s can be only replaced for a queued image.", attr);
    }
    if (strcmp(attr, "min_disk") == 0 || strcmp(attr, "min_ram") == 0) {
        long long v = json_is_integer(value) ? json_integer_value(value)
                                             : (long long)json_number_value(value);
        if (v < 0)
            return fail(msg, n, 400,
                        "Invalid value '%lld' for parameter '%s': Cannot be a negative value", v,
                        attr);
        json_object_set_new(rec, attr, json_integer(v));
        return 0;
    }
    if (strcmp(attr, "tags") == 0) {
        json_t *tags = json_array();
        size_t i, j;
        json_t *t, *u;
        json_array_foreach (value, i, t) {
            bool dup = false;
            json_array_foreach (tags, j, u) {
                dup |= json_equal(t, u);
            }
            if (!dup)
                json_array_append(tags, t);
        }
        json_object_set_new(rec, "tags", tags);
        return 0;
    }
    json_object_set(rec, attr, (json_t *)value);
    return 0;
}

/* Glance's policy for visibility and owner changes. */
static int check_policy(const struct change *c, bool is_admin, char *msg, size_t n)
{
    const char *root = c->path[0];
    if (strcmp(root, "visibility") == 0 && c->value && json_is_string(c->value) &&
        strcmp(json_string_value(c->value), "public") == 0 && !is_admin)
        return fail(msg, n, 403, "You are not authorized to complete publicize_image action.");
    if (strcmp(root, "owner") == 0 && strcmp(c->op, "remove") != 0 && !is_admin)
        return fail(msg, n, 403, "Owner can't be updated by non admin.");
    return 0;
}

static int apply_change(json_t *rec, const struct change *c, bool is_admin, char *msg, size_t n)
{
    const char *root = c->path[0];
    json_t *props = json_object_get(rec, "properties");
    if (strcmp(root, "locations") == 0)
        return fail(msg, n, 403, "It's not allowed to %s locations if locations are invisible.",
                    strcmp(c->op, "replace") == 0 ? "update" : c->op);
    int st = check_policy(c, is_admin, msg, n);
    if (st)
        return st;
    bool attr = in_list(settable, root);
    if (strcmp(c->op, "replace") == 0) {
        if (attr)
            return set_attr(rec, root, c->value, msg, n);
        if (json_object_get(props, root)) {
            json_object_set(props, root, (json_t *)c->value);
            return 0;
        }
        return fail(msg, n, 409, "Property %s does not exist.", root);
    }
    if (strcmp(c->op, "add") == 0) {
        if (c->draft == 4 && (attr || json_object_get(props, root)))
            return fail(msg, n, 409, "Property %s already present.", root);
        if (attr)
            return set_attr(rec, root, c->value, msg, n);
        json_object_set(props, root, (json_t *)c->value);
        return 0;
    }
    if (attr)
        return fail(msg, n, 403, "Property %s may not be removed.", root);
    if (json_object_get(props, root)) {
        json_object_del(props, root);
        return 0;
    }
    return fail(msg, n, 409, "Property %s does not exist.", root);
}

/* Parses every operation (the deserializer phase); with rec non-NULL also
 * applies them. */
static int run(json_t *rec, const json_t *ops, int draft, bool is_admin, char *msg, size_t msglen)
{
    if (draft != 4 && draft != 10)
        return fail(msg, msglen, 400, "Unrecognized JSON Schema draft version");
    if (!json_is_array(ops))
        return fail(msg, msglen, 400, "Request body must be a JSON array of operation objects.");
    if (rec && !json_object_get(rec, "properties"))
        json_object_set_new(rec, "properties", json_object());
    size_t n = json_array_size(ops);
    struct change *changes = calloc(n ? n : 1, sizeof(*changes));
    if (!changes)
        abort();
    int st = 0;
    size_t parsed = 0;
    for (; parsed < n && !st; parsed++)
        st = parse_change(json_array_get(ops, parsed), draft, &changes[parsed], msg, msglen);
    for (size_t i = 0; rec && i < n && !st; i++)
        st = apply_change(rec, &changes[i], is_admin, msg, msglen);
    for (size_t i = 0; i < parsed; i++)
        change_free(&changes[i]);
    free(changes);
    return st;
}

int nb_image_patch_check(const json_t *ops, int draft, char *msg, size_t msglen)
{
    return run(NULL, ops, draft, false, msg, msglen);
}

int nb_image_patch_apply(json_t *rec, const json_t *ops, int draft, bool is_admin, char *msg,
                         size_t msglen)
{
    return run(rec, ops, draft, is_admin, msg, msglen);
}
