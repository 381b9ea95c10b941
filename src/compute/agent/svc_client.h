/* svc_client.h - how a compute agent reaches placement and the image
 * service.
 *
 * In an all-in-one those services run in the agent's own process and are
 * called directly (their in-process APIs do what the HTTP calls do). A
 * compute process of its own (`nubo compute`), or any process with
 * [compute] use_service_apis = http, goes through their HTTP APIs instead,
 * as nova-compute does: with a token of the service user (nova.conf's
 * [service_user] auth_url, username, password, project_name,
 * user_domain_name, project_domain_name), kept until two minutes before it
 * expires or until a 401, and endpoints from that token's catalog
 * (interface [placement]/[glance] valid_interfaces, default public; region
 * [DEFAULT] region_name) unless [placement] / [glance] endpoint_override
 * names one. Every function records its error once on ctx (nb_error) with
 * the service's own message and returns -1 / NULL. */
#ifndef NB_SVC_CLIENT_H
#define NB_SVC_CLIENT_H

#include "common/ctx.h"

#include <jansson.h>
#include <stdbool.h>

/* Chooses the path for this process: local is true when placement and the
 * image service were initialised here. [compute] use_service_apis = http
 * forces HTTP anyway (so an all-in-one tests that path). Call once, before
 * the agents start (it also initialises libcurl). */
void nb_svc_init(bool local);
/* True when the HTTP path is in use. */
bool nb_svc_remote(void);
/* Forgets the cached token (at shutdown). */
void nb_svc_shutdown(void);

/* Placement, as Nova's report client: the provider rp_uuid named name
 * (created when missing, renamed when its name differs), its inventories
 * ({"VCPU": {"total", "reserved", …}, …}) with the provider generation
 * (retried after a 409 concurrent update), then its traits (array of
 * names; custom ones created first). Borrows both JSON values. 0/-1. */
int nb_svc_placement_report(struct nb_ctx *ctx, const char *rp_uuid, const char *name,
                            json_t *inventories, json_t *traits);

/* The image service's record of an active image, new ref {"id", "name",
 * "disk_format", "container_format", "size", "virtual_size", "checksum",
 * "os_hash_algo", "os_hash_value"}; NULL after 404 "Image <id> could not be
 * found." or 409 "Image <id> is not active (status <s>).". */
json_t *nb_svc_image_show(struct nb_ctx *ctx, const char *image_id);
/* Writes the image's data into path (created 0644, truncated, fsync'd)
 * and its sha512 in hex into hex[129]; over HTTP the MD5 the service sends
 * (Content-MD5, Glance's checksum) must match what arrived. 0/-1; path
 * may be left partly written (the caller removes it). */
int nb_svc_image_download(struct nb_ctx *ctx, const char *image_id, const char *path,
                          char hex[129]);
/* Uploads the file at path as the data of image_id (a queued image), as
 * PUT /v2/images/{id}/file. 0/-1. */
int nb_svc_image_upload(struct nb_ctx *ctx, const char *image_id, const char *path);

#endif
