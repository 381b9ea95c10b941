/* schema.c - Glance's image and member JSON schemas: the documents served
 * under /v2/schemas/ and the subset of JSON-schema validation Glance's
 * requests go through.
 *
 * The documents are Glance Zed's (glance.api.v2.images.get_schema and
 * image_members.get_schema, without a schema-image.json of custom
 * properties), with the disk and container format lists taken from
 * [image_format] disk_formats / container_formats when set. Validation
 * interprets the image document itself (type, enum, maxLength, pattern,
 * items; extra properties must be strings, as Glance's permissive schema
 * says) and picks the reported error as jsonschema's best_match does: the
 * least nested error, preferring type mismatches, then the first found. */
#include "common/pyrepr.h"
#include "image/image_priv.h"
#include "common/cleanup.h"
#include "common/config.h"
#include "common/util.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char image_schema_text[] =
    "{\"name\":\"image\",\"properties\":{\"id\":{\"type\":\"string\",\"description\":\"An "
    "identifier for the"
    " image\",\"pattern\":\"^([0-9a-fA-F]){8}-([0-9a-fA-F]){4}-([0-9a-fA-F]){4}-([0-9a-fA-F]){4}-"
    "([0-9a-fA-F]){12}$\"},\"name\":{\"type\":[\"null\",\"string\"],\"description\":\"Descriptive "
    "name fo"
    "r the "
    "image\",\"maxLength\":255},\"status\":{\"type\":\"string\",\"readOnly\":true,\"description\":"
    "\"S"
    "tatus of the "
    "image\",\"enum\":[\"queued\",\"saving\",\"active\",\"killed\",\"deleted\",\"uploading\",\"i"
    "mporting\",\"pending_delete\",\"deactivated\"]},\"visibility\":{\"type\":\"string\","
    "\"description\":\""
    "Scope of image "
    "accessibility\",\"enum\":[\"community\",\"public\",\"private\",\"shared\"]},\"protect"
    "ed\":{\"type\":\"boolean\",\"description\":\"If true, image will not be "
    "deletable.\"},\"os_hidden\""
    ":{\"type\":\"boolean\",\"description\":\"If true, image will not appear in default image list "
    "r"
    "esponse.\"},\"checksum\":{\"type\":[\"null\",\"string\"],\"readOnly\":true,\"description\":"
    "\"md5 hash "
    "of image "
    "contents.\",\"maxLength\":32},\"os_hash_algo\":{\"type\":[\"null\",\"string\"],\"readOnly\":"
    "true,\"description\":\"Algorithm to calculate the "
    "os_hash_value\",\"maxLength\":64},\"os_hash_v"
    "alue\":{\"type\":[\"null\",\"string\"],\"readOnly\":true,\"description\":\"Hexdigest of the "
    "image co"
    "ntents using the algorithm specified by the os_hash_algo\",\"maxLength\":128},\"owner\":{\"typ"
    "e\":[\"null\",\"string\"],\"description\":\"Owner of the "
    "image\",\"maxLength\":255},\"size\":{\"type\":"
    "[\"null\",\"integer\"],\"readOnly\":true,\"description\":\"Size of image file in "
    "bytes\"},\"virtual"
    "_size\":{\"type\":[\"null\",\"integer\"],\"readOnly\":true,\"description\":\"Virtual size of "
    "image i"
    "n bytes\"},\"container_format\":{\"type\":[\"null\",\"string\"],\"description\":\"Format of "
    "the cont"
    "ainer\",\"enum\":[null,\"ami\",\"ari\",\"aki\",\"bare\",\"ovf\",\"ova\",\"docker\","
    "\"compressed\"]},\"disk_f"
    "ormat\":{\"type\":[\"null\",\"string\"],\"description\":\"Format of the "
    "disk\",\"enum\":[null,\"ami\",\""
    "ari\",\"aki\",\"vhd\",\"vhdx\",\"vmdk\",\"raw\",\"qcow2\",\"vdi\",\"iso\",\"ploop\"]},"
    "\"created_at\":{\"type\":"
    "\"string\",\"readOnly\":true,\"description\":\"Date and time of image "
    "registration\"},\"updated_a"
    "t\":{\"type\":\"string\",\"readOnly\":true,\"description\":\"Date and time of the last image "
    "modif"
    "ication\"},\"tags\":{\"type\":\"array\",\"description\":\"List of strings related to the "
    "image\",\"i"
    "tems\":{\"type\":\"string\",\"maxLength\":255}},\"direct_url\":{\"type\":\"string\","
    "\"readOnly\":true,\""
    "description\":\"URL to access the image file kept in external "
    "store\"},\"min_ram\":{\"type\":\"i"
    "nteger\",\"description\":\"Amount of ram (in MB) required to boot "
    "image.\"},\"min_disk\":{\"type"
    "\":\"integer\",\"description\":\"Amount of disk space (in GB) required to boot "
    "image.\"},\"self\""
    ":{\"type\":\"string\",\"readOnly\":true,\"description\":\"An image self "
    "url\"},\"file\":{\"type\":\"str"
    "ing\",\"readOnly\":true,\"description\":\"An image file "
    "url\"},\"stores\":{\"type\":\"string\",\"readO"
    "nly\":true,\"description\":\"Store in which image data resides.  Only present when the opera"
    "tor has enabled multiple stores.  May be a comma-separated list of store identifiers.\"},"
    "\"schema\":{\"type\":\"string\",\"readOnly\":true,\"description\":\"An image schema "
    "url\"},\"location"
    "s\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{\"url\":{\"type\":"
    "\"string\",\"maxLen"
    "gth\":255},\"metadata\":{\"type\":\"object\"},\"validation_data\":{\"description\":\"Values "
    "to be us"
    "ed to populate the corresponding image properties. If the image status is not 'queued', "
    "values must exactly match those already contained in the image properties.\",\"type\":\"obje"
    "ct\",\"writeOnly\":true,\"additionalProperties\":false,\"properties\":{\"checksum\":{\"type\":"
    "\"stri"
    "ng\",\"minLength\":32,\"maxLength\":32},\"os_hash_algo\":{\"type\":\"string\",\"maxLength\":"
    "64},\"os_h"
    "ash_value\":{\"type\":\"string\",\"maxLength\":128}},\"required\":[\"os_hash_algo\",\"os_hash_"
    "value\""
    "]}},\"required\":[\"url\",\"metadata\"]},\"description\":\"A set of URLs to access the image "
    "file"
    " kept in external "
    "store\"}},\"additionalProperties\":{\"type\":\"string\"},\"links\":[{\"rel\":\"sel"
    "f\",\"href\":\"{self}\"},{\"rel\":\"enclosure\",\"href\":\"{file}\"},{\"rel\":\"describedby\","
    "\"href\":\"{sc"
    "hema}\"}]}";

static const char member_schema_text[] =
    "{\"name\":\"member\",\"properties\":{\"member_id\":{\"type\":\"string\",\"description\":\"An "
    "identifier"
    " for the image member (tenantId)\"},\"image_id\":{\"type\":\"string\",\"description\":\"An "
    "identif"
    "ier for the image\",\"pattern\":\"^([0-9a-fA-F]){8}-([0-9a-fA-F]){4}-([0-9a-fA-F]){4}-([0-9a"
    "-fA-F]){4}-([0-9a-fA-F]){12}$\"},\"created_at\":{\"type\":\"string\",\"description\":\"Date "
    "and ti"
    "me of image member creation\"},\"updated_at\":{\"type\":\"string\",\"description\":\"Date and "
    "time"
    " of last modification of image "
    "member\"},\"status\":{\"type\":\"string\",\"description\":\"The sta"
    "tus of this image "
    "member\",\"enum\":[\"pending\",\"accepted\",\"rejected\"]},\"schema\":{\"readOnly\""
    ":true,\"type\":\"string\"}},\"additionalProperties\":false}";

static json_t *image_schema, *member_schema;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* Splits a comma-separated config list into a JSON array led by null. */
static json_t *format_enum(const char *list)
{
    json_t *e = json_array();
    json_array_append_new(e, json_null());
    _cleanup_free_ char *copy = strdup(list);
    char *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        while (*t == ' ')
            t++;
        size_t n = strlen(t);
        while (n && t[n - 1] == ' ')
            t[--n] = '\0';
        if (*t)
            json_array_append_new(e, json_string(t));
    }
    return e;
}

static void load_schemas(void)
{
    image_schema = json_loads(image_schema_text, 0, NULL);
    member_schema = json_loads(member_schema_text, 0, NULL);
    if (!image_schema || !member_schema)
        abort(); /* the literals above are fixed text: a parse error is a bug */
    json_t *props = json_object_get(image_schema, "properties");
    const char *df = nb_conf_str("image_format", "disk_formats", NULL);
    const char *cf = nb_conf_str("image_format", "container_formats", NULL);
    if (df)
        json_object_set_new(json_object_get(props, "disk_format"), "enum", format_enum(df));
    if (cf)
        json_object_set_new(json_object_get(props, "container_format"), "enum", format_enum(cf));
}

static const json_t *image_props(void)
{
    pthread_once(&once, load_schemas);
    return json_object_get(image_schema, "properties");
}

bool nb_image_is_base_property(const char *key)
{
    return json_object_get(image_props(), key) != NULL;
}

/* CollectionSchema(name, item).raw(). */
static json_t *collection(const char *name, json_t *item)
{
    return json_pack(
        "{s:s, s:{s:{s:s, s:o}, s:{s:s}, s:{s:s}, s:{s:s}}, s:[{s:s, s:s}, {s:s, s:s}, "
        "{s:s, s:s}]}",
        "name", name, "properties", name, "type", "array", "items", item, "first", "type", "string",
        "next", "type", "string", "schema", "type", "string", "links", "rel", "first", "href",
        "{first}", "rel", "next", "href", "{next}", "rel", "describedby", "href", "{schema}");
}

json_t *nb_image_schema_image(void)
{
    image_props();
    return json_deep_copy(image_schema);
}

json_t *nb_image_schema_images(void)
{
    return collection("images", nb_image_schema_image());
}

json_t *nb_image_schema_member(void)
{
    image_props();
    return json_deep_copy(member_schema);
}

json_t *nb_image_schema_members(void)
{
    return collection("members", nb_image_schema_member());
}

/* --- Python repr ------------------------------------------------------------------ */

char *nb_image_pyrepr(const json_t *v)
{
    return nb_pyrepr(v);
}

/* --- validation --------------------------------------------------------------------- */

struct verr {
    int depth;     /* 0 = none yet */
    bool mismatch; /* the instance is not of the schema's type */
    char why[768];
};

static bool is_type(const json_t *v, const char *t)
{
    if (strcmp(t, "null") == 0)
        return json_is_null(v);
    if (strcmp(t, "string") == 0)
        return json_is_string(v);
    if (strcmp(t, "boolean") == 0)
        return json_is_boolean(v);
    if (strcmp(t, "array") == 0)
        return json_is_array(v);
    if (strcmp(t, "object") == 0)
        return json_is_object(v);
    if (strcmp(t, "number") == 0)
        return json_is_number(v);
    if (strcmp(t, "integer") == 0)
        return json_is_integer(v) ||
               (json_is_real(v) && json_real_value(v) == (double)(long long)json_real_value(v));
    return false;
}

/* Records an error when it beats the one already kept (best_match). */
static void keep(struct verr *e, int depth, bool mismatch, const char *fmt, const json_t *v,
                 const char *extra)
{
    bool better = !e->depth || depth < e->depth || (depth == e->depth && mismatch && !e->mismatch);
    if (!better)
        return;
    _cleanup_free_ char *r = nb_image_pyrepr(v);
    e->depth = depth;
    e->mismatch = mismatch;
    snprintf(e->why, sizeof(e->why), fmt, r, extra ? extra : "");
}

static bool uuid_like(const char *s)
{
    static const int groups[] = {8, 4, 4, 4, 12};
    for (int g = 0; g < 5; g++) {
        for (int i = 0; i < groups[g]; i++, s++)
            if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f') || (*s >= 'A' && *s <= 'F')))
                return false;
        if (g < 4 && *s++ != '-')
            return false;
    }
    return *s == '\0';
}

static long utf8_len(const char *s)
{
    long n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if ((*p & 0xC0) != 0x80)
            n++;
    return n;
}

/* Checks v against one property schema at depth. */
static void check_value(const json_t *schema, const json_t *v, int depth, struct verr *e)
{
    json_t *type = json_object_get(schema, "type");
    if (type) {
        bool ok = false;
        char names[128] = "";
        if (json_is_string(type)) {
            ok = is_type(v, json_string_value(type));
            snprintf(names, sizeof(names), "'%s'", json_string_value(type));
        } else {
            size_t i;
            json_t *t;
            json_array_foreach (type, i, t) {
                ok |= is_type(v, json_string_value(t));
                size_t n = strlen(names);
                snprintf(names + n, sizeof(names) - n, "%s'%s'", i ? ", " : "",
                         json_string_value(t));
            }
        }
        if (!ok)
            keep(e, depth, true, "%s is not of type %s", v, names);
    }
    json_t *en = json_object_get(schema, "enum");
    if (en) {
        bool found = false;
        size_t i;
        json_t *x;
        json_array_foreach (en, i, x) {
            found |= json_equal(x, (json_t *)v);
        }
        if (!found) {
            _cleanup_free_ char *list = nb_image_pyrepr(en);
            keep(e, depth, false, "%s is not one of %s", v, list);
        }
    }
    json_t *maxlen = json_object_get(schema, "maxLength");
    if (maxlen && json_is_string(v) && utf8_len(json_string_value(v)) > json_integer_value(maxlen))
        keep(e, depth, false, "%s is too long", v, NULL);
    json_t *pattern = json_object_get(schema, "pattern");
    if (pattern && json_is_string(v) && !uuid_like(json_string_value(v))) {
        _cleanup_free_ char *p = nb_image_pyrepr(pattern);
        keep(e, depth, false, "%s does not match %s", v, p);
    }
    json_t *items = json_object_get(schema, "items");
    if (items && json_is_array(v)) {
        size_t i;
        json_t *x;
        json_array_foreach (v, i, x) {
            check_value(items, x, depth + 1, e);
        }
    }
}

int nb_image_schema_check(const json_t *obj, char *msg, size_t msglen)
{
    const json_t *props = image_props();
    struct verr e = {0};
    const char *k;
    json_t *ps, *v;
    json_object_foreach ((json_t *)props, k, ps) {
        if ((v = json_object_get(obj, k)))
            check_value(ps, v, 1, &e);
    }
    json_object_foreach ((json_t *)obj, k, v) {
        if (!json_object_get(props, k) && !json_is_string(v))
            keep(&e, 1, true, "%s is not of type 'string'", v, NULL);
    }
    if (!e.depth)
        return 0;
    snprintf(msg, msglen, "Provided object does not match schema 'image': %s", e.why);
    return -1;
}
