/* aio.h - the files `nubo aio` keeps in its state directory besides the
 * database: DIR/clouds.yaml (written and read back, so that a restart keeps
 * the passwords it holds) and in-place updates of DIR/nubo.conf (so that a
 * restart records its --set options without losing the operator's edits).
 * Internal to src/cmd/. */
#ifndef NB_CMD_AIO_H
#define NB_CMD_AIO_H

#include <stddef.h>

/* Writes DIR/clouds.yaml (mode 0600) with the clouds `nubo` (admin on
 * project admin) and `nubo-demo` (demo, member of project demo) at
 * url/identity/v3. Passwords are YAML double-quoted with escapes. 0/-1
 * (errno set). */
int nb_aio_clouds_write(const char *dir, const char *url, const char *admin_pw,
                        const char *demo_pw);

/* What nb_aio_clouds_write wrote. Strings owned by the struct. */
struct nb_aio_clouds {
    char *admin_pw, *demo_pw, *auth_url;
};
/* Reads DIR/clouds.yaml back: 1 with *out filled (free with
 * nb_aio_clouds_free), 0 when the file does not exist, -1 when it exists
 * but the auth_url and both passwords of the clouds `nubo` and `nubo-demo`
 * cannot be found in it (a message on stderr). */
int nb_aio_clouds_read(const char *dir, struct nb_aio_clouds *out);
void nb_aio_clouds_free(struct nb_aio_clouds *c);

/* One option to record in nubo.conf. */
struct nb_aio_opt {
    const char *section, *key, *value;
};
/* Sets the n options in the INI file at path in place: a `key = value`
 * line of the section is replaced, a missing key is added after the
 * section's last option, a missing section is appended; comments and every
 * other line are kept. Written atomically, mode 0600. 0/-1 (errno set). */
int nb_aio_conf_update(const char *path, const struct nb_aio_opt *opts, size_t n);

#endif
