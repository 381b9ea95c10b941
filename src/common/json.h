/* json.h - small jansson helpers used by every API module. */
#ifndef NB_JSON_H
#define NB_JSON_H

#include <jansson.h>
#include <stdbool.h>

/* Borrowed string value of obj[key], or NULL if absent or not a string. */
const char *nb_json_str(const json_t *obj, const char *key);
/* obj[key] as integer, or def if absent/not an integer. */
long long nb_json_int(const json_t *obj, const char *key, long long def);
/* Parses text (NULL -> NULL); returns a new ref or NULL. */
json_t *nb_json_parse(const char *text);
/* Compact dump, caller frees; "null" for NULL. What json_dumps(j,
 * JSON_COMPACT | JSON_ENCODE_ANY) prints, byte for byte, several times
 * faster; aborts on out-of-memory. */
char *nb_json_dump(const json_t *j);
/* The same, with its length. */
char *nb_json_dump_len(const json_t *j, size_t *len);
struct nb_sbuf;
/* Appends the JSON text of the string s (quoted, escaped as nb_json_dump
 * does) or of the integer v to b, for answers written without a tree. */
void nb_json_put_str(struct nb_sbuf *b, const char *s);
void nb_json_put_int(struct nb_sbuf *b, long long v);
/* The string values of key in the objects of rows (rows of nb_db_rows, say
 * a column), in order, as a new array; an object without a string there
 * is skipped. rows NULL gives NULL. */
json_t *nb_json_strings(const json_t *rows, const char *key);
/* Appends the string s to the array set unless it is there already. */
void nb_json_set_add(json_t *set, const char *s);
/* Builds a JSON object from printf-formatted text; aborts on bad format
 * (programming error). New reference. */
json_t *nb_json_pack_text(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
