/* metadata.h - what a guest learns about itself: the OpenStack and
 * EC2-style metadata documents, served two ways as Nova does: on a config
 * drive (an ISO 9660 image labelled config-2) and by the metadata API (role
 * "metadata", its own port), which trusts a request only when its
 * X-Instance-ID-Signature is the HMAC-SHA256 of X-Instance-ID under the
 * shared secret ([neutron] metadata_proxy_shared_secret). */
#ifndef NB_METADATA_H
#define NB_METADATA_H

#include "common/ctx.h"
#include "common/env.h"
#include <jansson.h>
#include <stdbool.h>

/* Starts the metadata API on [metadata] listen / port (default
 * 127.0.0.1:8775). 0/-1. */
int nb_metadata_start(struct nb_env *env);
void nb_metadata_stop(void);

/* Writes the config drive for inst (nb_instance_agent_view's shape) to
 * iso_path. nics: array of {"mac_address": "fa:16:3e:…"} of the guest's
 * NICs (for network_data.json), may be NULL. 0/-1 after nb_error with the
 * tool's own message. */
int nb_configdrive_build(struct nb_ctx *ctx, const json_t *inst, const json_t *nics,
                         const char *iso_path);

/* Hex HMAC-SHA256 of id under secret, as the Neutron metadata proxy signs
 * X-Instance-ID. out[65]. */
void nb_md_sign(const char *secret, const char *id, char out[65]);
/* True when signature is the signature of id under secret (constant time;
 * false for NULL/empty secret or signature). */
bool nb_md_signature_ok(const char *secret, const char *id, const char *signature);

/* The password the guest posted (password.c): the joined password_0..3 of
 * its system metadata ("" when none), a new string, or NULL after nb_error;
 * _set replaces it with len bytes of pw (at most 1020; "" clears it). */
struct nb_db;
char *nb_md_password_get(struct nb_db *db, struct nb_ctx *ctx, const char *uuid);
int nb_md_password_set(struct nb_db *db, struct nb_ctx *ctx, const char *uuid, const char *pw,
                       size_t len);

#endif
