/* internal.h - what the metadata files share: the documents (documents.c),
 * which both the config drive (configdrive.c) and the metadata API
 * (server.c) serve, and the API's request handling without the socket.
 *
 * The instance given to every function here is nb_instance_agent_view's
 * shape. The metadata API adds what only the database row has, which the
 * documents use when present: "reservation_id", "root_device_name",
 * "security_groups" ([name], from the request spec) and "password" (the
 * password a guest posted, from system metadata). */
#ifndef NB_METADATA_INTERNAL_H
#define NB_METADATA_INTERNAL_H

#include "common/ctx.h"
#include "compute/metadata/metadata.h"
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct nb_db;

#define MD_LOG "nubo.metadata.handler"

/* One document: data[len] (malloc'd, NUL-terminated past len for
 * convenience; may hold NUL bytes: user data is the guest's bytes) and its
 * Content-Type (static string). */
struct nb_md_doc {
    char *data;
    size_t len;
    const char *content_type;
};

/* Resolves path as Nova's InstanceMetadata.lookup does: "/" and "/ec2"
 * list the EC2 versions, "/openstack" the OpenStack ones, and anything not
 * under /ec2 or /openstack is an EC2 path ("/latest/meta-data/hostname").
 * Directories are newline-separated listings, as Nova's ec2_md_print.
 * nics: as for nb_configdrive_build (may be NULL); address: the guest's
 * address (X-Forwarded-For) for local-ipv4, or NULL. Returns 0 with *doc
 * filled (caller frees doc->data), or -1 after nb_error (404 for a path
 * that does not exist, 500 when vendor data cannot be read). */
int nb_md_lookup(struct nb_ctx *ctx, const json_t *inst, const json_t *nics, const char *address,
                 const char *path, struct nb_md_doc *doc);

/* Calls fn for every file of the config drive, as Nova's
 * metadata_for_config_drive: ec2/<version>/meta-data.json (and user-data)
 * for the EC2 versions not in [api] config_drive_skip_versions, then
 * openstack/<version>/… for every OpenStack version and "latest". path is
 * relative ("openstack/latest/meta_data.json"). Stops at the first fn
 * failure. 0, or -1 after nb_error (by fn or here). */
typedef int (*nb_md_file_fn)(void *opaque, struct nb_ctx *ctx, const char *path, const char *data,
                             size_t len);
int nb_md_files(struct nb_ctx *ctx, const json_t *inst, const json_t *nics, nb_md_file_fn fn,
                void *opaque);

/* The documents themselves, for the tests. version: an OpenStack version
 * (meta_data) or an EC2 one (ec2), "latest" included; NULL when the version
 * is unknown. New refs. */
json_t *nb_md_meta_data(const json_t *inst, const char *version);
json_t *nb_md_network_data(const json_t *inst, const json_t *nics);
json_t *nb_md_ec2_meta_data(const json_t *inst, const char *version, const char *address);

/* The user data decoded from base64 (as Nova's base64.decode_as_bytes):
 * 1 with *out (malloc'd, caller frees) and *len, 0 when the instance has
 * none, -1 when it is not base64. */
int nb_md_user_data(const json_t *inst, char **out, size_t *len);

/* nb_md_sign, nb_md_signature_ok: metadata.h (the network agent's proxy
 * signs with the same function). */

/* A metadata API request and its answer, without the socket. Header values
 * may be NULL (absent). */
struct nb_md_request {
    const char *method;
    const char *path;
    const char *instance_id; /* X-Instance-ID */
    const char *tenant_id;   /* X-Tenant-ID */
    const char *signature;   /* X-Instance-ID-Signature */
    const char *forwarded_for;
    const char *body; /* a POST's body (len bytes), else NULL */
    size_t body_len;
};
struct nb_md_response {
    int status;
    struct nb_md_doc doc; /* the body; an error's is plain text saying why */
    char instance[64];    /* the instance the request was for, "" if unknown */
};

/* Answers rq (see server.c for the rules). Never fails: errors become a
 * status and a text body. Caller frees rs->doc.data. */
void nb_md_serve(struct nb_db *db, struct nb_ctx *ctx, const struct nb_md_request *rq,
                 struct nb_md_response *rs);

#endif
