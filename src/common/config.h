/* config.h - oslo.config-style INI configuration (parsed with inih).
 *
 * One process-wide table of section.key = value strings. Lookups take the
 * default to use when the option is unset, so every option's default lives
 * next to its use. Values set later (nb_conf_set, e.g. from --set) override
 * the file. Reads are thread-safe after start-up; sets are for start-up only. */
#ifndef NB_CONFIG_H
#define NB_CONFIG_H

#include <stdbool.h>

/* Loads an INI file, merging into the table. 0, or -1 with a message on stderr. */
int nb_conf_load(const char *path);
/* Sets section.key (copies both). */
void nb_conf_set(const char *section, const char *key, const char *value);
/* Parses "section.key=value" (as given to --set). 0/-1. */
int nb_conf_set_arg(const char *arg);
/* Returns the value (borrowed, valid until the next set of that key) or def. */
const char *nb_conf_str(const char *section, const char *key, const char *def);
long nb_conf_int(const char *section, const char *key, long def);
double nb_conf_double(const char *section, const char *key, double def);
bool nb_conf_bool(const char *section, const char *key, bool def);
/* The keys set in section, in the order they were first set, into keys
 * (borrowed: valid until nb_conf_reset), at most max. Returns how many. */
int nb_conf_keys(const char *section, const char **keys, int max);
/* Writes the table as an INI file. 0/-1. */
int nb_conf_write(const char *path);
/* Clears the table (tests). */
void nb_conf_reset(void);

#endif
