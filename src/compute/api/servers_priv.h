/* servers_priv.h - internals shared by the server files of the compute API
 * (servers.c, server_views.c, server_actions.c, server_metadata.c,
 * server_snapshot.c, block_devices.c, volume_attachments.c,
 * instance_actions.c, quotas.c, limits.c). Nothing here is public: other
 * modules use api.h and compute.h.
 *
 * Conventions: instance rows are the JSON objects nb_db_row() returns for
 * `SELECT * FROM instances`; functions that return json_t * return a new
 * reference (NULL after nb_error() on ctx) unless said otherwise. */
#ifndef NB_COMPUTE_API_SERVERS_PRIV_H
#define NB_COMPUTE_API_SERVERS_PRIV_H

#include "common/ctx.h"
#include "common/env.h"
#include "common/http.h"
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct nb_db;

/* The environment given to nb_compute_servers_init (set once at start). */
const struct nb_env *nb_srv_env(void);
struct nb_db *nb_srv_db(void);

/* ---- policy (Nova Zed defaults with enforce_new_defaults) -------------- */

/* Records 403 "Policy doesn't allow <rule> to be performed." unless ok.
 * Returns 0 when ok, else -1. */
int nb_srv_policy(struct nb_ctx *ctx, const char *rule, bool ok);
/* PROJECT_READER_OR_ADMIN / PROJECT_MEMBER_OR_ADMIN against a target project. */
bool nb_srv_is_reader_of(const struct nb_ctx *ctx, const char *project_id);
bool nb_srv_is_member_of(const struct nb_ctx *ctx, const char *project_id);

/* ---- dynamic SQL with string arguments ---------------------------------- */

#define NB_SRV_SQL_MAX_ARGS 64

/* A statement built piece by piece. Every bound argument is a string (SQLite
 * applies the column's affinity, so integer columns compare as numbers);
 * integers that the code itself produced may be written into the text. */
struct nb_srv_sql {
    char *text;
    size_t len, cap;
    char *args[NB_SRV_SQL_MAX_ARGS];
    int nargs;
    bool overflow; /* too many arguments: the query refuses to run */
};

void nb_srv_sql_init(struct nb_srv_sql *q);
void nb_srv_sql_free(struct nb_srv_sql *q);
/* Appends printf-formatted SQL text (never user input). */
void nb_srv_sql_add(struct nb_srv_sql *q, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Appends "?" and binds a copy of value (NULL binds NULL). */
void nb_srv_sql_arg(struct nb_srv_sql *q, const char *value);
/* Runs the query; rows as nb_db_rows() returns them, or NULL on error. */
json_t *nb_srv_sql_rows(struct nb_ctx *ctx, struct nb_srv_sql *q);
/* Appends "('u1','u2',…)" for a list of IDs that are known to be UUIDs or
 * request IDs from our own rows (checked: only [0-9a-zA-Z-] allowed; others
 * are skipped). Returns the number written. */
int nb_srv_sql_id_list(struct nb_srv_sql *q, json_t *ids);

/* ---- instances ----------------------------------------------------------- */

/* The instance row by UUID visible to ctx (own project, or any for admins);
 * with_deleted also finds soft-deleted rows. 404 "Instance <id> could not
 * be found." otherwise. */
json_t *nb_srv_instance_get(struct nb_ctx *ctx, const char *uuid, bool with_deleted);
/* 409 "Instance <id> is locked" when the instance is locked and ctx is not
 * an admin (Nova's check_instance_lock). 0 when not refused. */
int nb_srv_check_lock(struct nb_ctx *ctx, const json_t *inst);
/* 409 "Cannot '<action>' instance <id> while it is in <attr> <state>". -1. */
int nb_srv_invalid_state(struct nb_ctx *ctx, const char *action, const char *uuid, const char *attr,
                         const char *state);
/* Soft-deletes an instance row and its metadata, system metadata, block
 * device mappings, faults, tags and group membership (Nova's local delete +
 * instance.destroy), inside the caller's transaction. only_unscheduled:
 * only if the instance has no host yet. Returns instances deleted (0/1),
 * or -1. */
int nb_srv_destroy_instance(struct nb_ctx *ctx, const char *uuid, bool only_unscheduled);
/* Nova's utils.sanitize_hostname (new string, maybe ""). */
char *nb_srv_sanitize_hostname(const char *name);
/* Changes the error already recorded in ctx into another status (e.g. a
 * lookup's 404 into the 400 that server create answers), keeping its
 * message unless msg is non-NULL. Returns -1. */
int nb_srv_error_as(struct nb_ctx *ctx, int status, const char *msg);

/* ---- time formats --------------------------------------------------------- */

/* "2026-11-29T18:00:00Z" (Nova's utils.isotime) from a stored time stamp;
 * NULL stays NULL. Writes into buf[32] and returns it, or NULL. */
const char *nb_srv_isotime(const char *stored, char *buf);
/* "2026-11-29T18:00:00.123456" (a datetime as Nova's JSON serializer
 * prints it). NULL stays NULL. buf[32]. */
const char *nb_srv_dbtime(const char *stored, char *buf);
/* json string of nb_srv_isotime/nb_srv_dbtime, or json null. New ref. */
json_t *nb_srv_json_isotime(const char *stored);
json_t *nb_srv_json_dbtime(const char *stored);

/* sha224(project_id + host) in hex into out[57], "" if host is empty. */
void nb_srv_host_id(const char *project_id, const char *host, char out[57]);

/* ---- block device mappings (block_devices.c) ------------------------------- */

/* Nova's block_device.match_device: "/dev/vdb1" -> prefix "/dev/vd",
 * letters "b". 0, or -1 when device does not have that shape. */
int nb_srv_match_device(const char *device, char *prefix, size_t pn, char *letters, size_t ln);
/* The guest device of a new volume of an instance (Nova's
 * get_next_device_name): the root device's prefix ("/dev/vda" when
 * root_device_name is NULL) and the first letter no mapping of bdms uses
 * (local disks without a name take the next letters, as the driver lays
 * them out), or the requested device's letter. Writes "/dev/vdX" into out.
 * 0, or -1 after 400 "The supplied device path (<d>) is invalid." or 409
 * "The supplied device path (<d>) is in use.". */
int nb_srv_next_device_name(struct nb_ctx *ctx, const char *root_device_name, const json_t *bdms,
                            const char *requested, char *out, size_t n);
/* True when mapping b has boot_index 0. */
bool nb_srv_bdm_is_root(const json_t *b);
/* The mappings a volume-backed snapshot image defines (its properties
 * bdm_v2 and block_device_mapping, a JSON list, as nb_image_lookup shows
 * them) in the form server create stores; an empty array for an image
 * without any. NULL after 400 for a malformed or legacy list. New ref. */
json_t *nb_srv_image_bdms(struct nb_ctx *ctx, const json_t *image);
/* Nova's _check_and_transform_bdm merge for v2 requests: the request's
 * mappings (without its image root when the image defines a root) followed
 * by the image's mappings whose device name the request does not use. New
 * array. */
json_t *nb_srv_merge_bdms(const json_t *image_bdms, const json_t *request_bdms);
/* Nova's checks of a create request's mappings against the volume and
 * image services (get_bdm_image_metadata for a server without image_ref,
 * _get_volumes_for_bdms, _validate_bdm), for num instances. Fills
 * volume_size of existing volumes and of snapshot mappings without one.
 * 0, or -1 after 400 with Nova's message. */
int nb_srv_check_bdms(struct nb_ctx *ctx, json_t *bdms, const char *image_ref, long long num);
/* Reserves the existing volumes (source volume) of bdms: available ->
 * reserved. On a failure the ones already reserved are released. 0/-1. */
int nb_srv_reserve_volumes(struct nb_ctx *ctx, const json_t *bdms);
/* Releases what nb_srv_reserve_volumes reserved (errors are logged, ctx's
 * error is kept). */
void nb_srv_unreserve_volumes(struct nb_ctx *ctx, const json_t *bdms);
/* The live mapping rows of an instance that name a volume. New ref or NULL
 * after a database error. */
json_t *nb_srv_instance_volume_bdms(struct nb_ctx *ctx, const char *instance_uuid);
/* Gives back the volumes of such rows when an instance is deleted where no
 * compute can do it (Nova's _local_cleanup_bdm_volumes): reserved ->
 * available, attaching -> available, in-use -> detached, and deletes those
 * marked delete_on_termination. Errors are logged; ctx's error is kept. */
void nb_srv_release_volumes(struct nb_ctx *ctx, const json_t *rows);

/* ---- createImage (server_snapshot.c) ------------------------------------- */

/* The createImage body (Nova's create_image schema). 0/-1. */
int nb_srv_check_create_image(struct nb_ctx *ctx, json_t *args);
/* Nova's createImage of inst: an image-backed server's snapshot is cast to
 * the conductor, a volume-backed server's is made here (volume snapshots
 * and an image carrying the mappings). Answers 202 with {"image_id"} from
 * 2.45, before that with a Location header. 0/-1. */
int nb_srv_create_image(struct nb_ctx *ctx, json_t *inst, json_t *args, struct nb_resp *resp);

/* ---- views (server_views.c) ---------------------------------------------- */

/* What a detailed view shows, as the show() arguments of Nova's view
 * builder. Tri-state fields: 1 show, 0 hide, -1 decide by policy. */
struct nb_srv_view_opts {
    bool show_az, show_config_drive, show_keypair, show_srv_usg, show_sec_grp;
    bool show_extended_status, show_extended_volumes, show_server_groups;
    bool show_user_data;
    int show_extended_attr, show_host_status;
};

/* Options of GET /servers/{id} and /servers/detail at ctx's microversion. */
void nb_srv_view_opts_show(const struct nb_ctx *ctx, struct nb_srv_view_opts *o);
/* Options of PUT /servers/{id} (all attributes only from 2.75). */
void nb_srv_view_opts_update(const struct nb_ctx *ctx, struct nb_srv_view_opts *o);

/* JSON text built by hand: a page of 1,000 servers is about 1 MB, and
 * building it as jansson values and then dumping them costs several times
 * the time of writing it directly. */
struct nb_srv_buf {
    char *s;
    size_t len, cap;
};
void nb_srv_buf_init(struct nb_srv_buf *b);
void nb_srv_buf_free(struct nb_srv_buf *b);
/* Appends n bytes / a literal / a JSON string (NULL -> null) / an integer /
 * any jansson value. */
void nb_srv_buf_raw(struct nb_srv_buf *b, const char *s, size_t n);
void nb_srv_buf_lit(struct nb_srv_buf *b, const char *s);
void nb_srv_buf_str(struct nb_srv_buf *b, const char *s);
void nb_srv_buf_int(struct nb_srv_buf *b, long long v);
void nb_srv_buf_json(struct nb_srv_buf *b, const json_t *v);
/* Hands the text to resp as its (JSON) body. Returns 0. */
int nb_srv_buf_respond(struct nb_resp *resp, int status, struct nb_srv_buf *b);

/* Writes the detailed views of instance rows, comma-separated, to b,
 * loading metadata, faults, volumes, tags, group membership, host states
 * and zones for all of them at once. 0/-1. */
int nb_srv_view_write(struct nb_ctx *ctx, json_t *rows, const struct nb_srv_view_opts *o,
                      struct nb_srv_buf *b);
/* Nova's "addresses" of a network_info list (instance_info_caches):
 * {"<network label>": [{"version", "addr"[, "OS-EXT-IPS:type":
 * "fixed"|"floating", "OS-EXT-IPS-MAC:mac_addr" when extend]}…]}, fixed IPs
 * then floating ones per label, labels in VIF order. New ref. */
json_t *nb_srv_addresses(const json_t *network_info, bool extend);
/* The instance's cached network_info ([] when none). New ref, or NULL
 * after a database error. */
json_t *nb_srv_network_info(struct nb_ctx *ctx, const char *instance_uuid);
/* The UUIDs of the instances with a fixed IP that the ip (IPv4) or ip6
 * regular expression matches from its start (Nova's _ip_filter; NULL: not
 * filtered on). New array, or NULL after 400 (bad expression) or a
 * database error. */
json_t *nb_srv_uuids_by_ip(struct nb_ctx *ctx, const char *ip, const char *ip6);
/* {"id", "name", "links"} of one instance. New ref. */
json_t *nb_srv_view_basic(const json_t *inst);
/* The self and bookmark links of a compute resource ("servers", "flavors",
 * "images", …). New array. */
json_t *nb_srv_links(const char *collection, const char *id);
/* The compute base URLs: "<base>/compute/v2.1" and "<base>/compute". */
char *nb_srv_url_v21(void);
char *nb_srv_url_bookmark(void);
/* A "next" link for a collection page: the request's query with marker
 * replaced; collection like "servers/detail". New array with one link. */
json_t *nb_srv_next_link(struct nb_req *req, const char *collection, const char *marker);

/* ---- quotas (quotas.c) ----------------------------------------------------- */

enum nb_quota_res {
    NB_Q_INSTANCES,
    NB_Q_CORES,
    NB_Q_RAM,
    NB_Q_METADATA_ITEMS,
    NB_Q_INJECTED_FILES,
    NB_Q_INJECTED_FILE_CONTENT_BYTES,
    NB_Q_INJECTED_FILE_PATH_BYTES,
    NB_Q_KEY_PAIRS,
    NB_Q_SERVER_GROUPS,
    NB_Q_SERVER_GROUP_MEMBERS,
    NB_Q_FIXED_IPS,
    NB_Q_FLOATING_IPS,
    NB_Q_SECURITY_GROUPS,
    NB_Q_SECURITY_GROUP_RULES,
    NB_Q_COUNT
};

/* Resource name ("instances", …) of r. */
const char *nb_quota_name(enum nb_quota_res r);
/* Index of a resource name, or -1. */
int nb_quota_index(const char *name);
/* Default limit of r: [quota] option, else Nova's default (-1 unlimited). */
long long nb_quota_default(enum nb_quota_res r);
/* Limits of a project (user_id NULL) or of a user in it: table quotas,
 * then [quota] defaults. 0/-1. */
int nb_quota_limits(struct nb_ctx *ctx, const char *project_id, const char *user_id,
                    long long limits[NB_Q_COUNT]);
/* Usages (in_use) as Nova counts them for the quota API and limits:
 * instances/cores/ram of live instances, server groups; 0 for the rest.
 * 0/-1. */
int nb_quota_usages(struct nb_ctx *ctx, const char *project_id, const char *user_id,
                    long long in_use[NB_Q_COUNT]);
/* True if the user has own limits for instances, cores or ram. */
bool nb_quota_user_has_limits(struct nb_ctx *ctx, const char *project_id, const char *user_id);

/* Nova's check_num_instances_quota on given numbers (pure): limits and
 * usages of instances, cores, ram (index NB_Q_INSTANCES..NB_Q_RAM); returns
 * how many instances (between min_count and max_count) may be built, or -1
 * with Nova's message ("Quota exceeded for cores: Requested 2, but already
 * used 19 of 20 cores") written into msg. */
int nb_quota_instances_allowed(const long long limits[3], const long long used[3], long long vcpus,
                               long long ram, int min_count, int max_count, char *msg,
                               size_t msglen);
/* The check against the database, inside the caller's transaction: the
 * project's (and the user's, if the user has own limits) usage. Returns the
 * number allowed, or -1 after 403 on ctx. */
int nb_quota_check_instances(struct nb_ctx *ctx, const char *project_id, const char *user_id,
                             long long vcpus, long long ram, int min_count, int max_count);

/* ---- request-body checks with Nova's JSON-schema messages --------------- */

/* Python's repr of a value as jsonschema prints it ('abc', 1, None). */
char *nb_srv_py_repr(const json_t *v);
/* 400 "Invalid input for field/attribute <field>. Value: <v>. <repr> <why>". */
int nb_srv_bad(struct nb_ctx *ctx, const char *field, const json_t *value, const char *why);
/* A string of min..max characters (or null when nullable). 0/-1. */
int nb_srv_check_string(struct nb_ctx *ctx, const char *field, const json_t *v, size_t min,
                        size_t max, bool nullable);
/* parameter_types.name: 1-255 printable, no leading/trailing whitespace. */
int nb_srv_check_name(struct nb_ctx *ctx, const char *field, const json_t *v);
/* parameter_types.description: null or 0-255 printable characters. */
int nb_srv_check_description(struct nb_ctx *ctx, const char *field, const json_t *v);
/* parameter_types.boolean: true/false or one of oslo's boolean words. */
int nb_srv_check_bool(struct nb_ctx *ctx, const char *field, const json_t *v);
/* Value of a checked boolean. */
bool nb_srv_json_truthy(const json_t *v);
int nb_srv_check_uuid(struct nb_ctx *ctx, const char *field, const json_t *v);
/* Integer or digit string >= min; *out gets the value (out may be NULL). */
int nb_srv_check_int(struct nb_ctx *ctx, const char *field, const json_t *v, long long min,
                     long long *out);
/* parameter_types.metadata. */
int nb_srv_check_metadata(struct nb_ctx *ctx, const char *field, const json_t *v);
/* additionalProperties: false (allowed is NULL-terminated). */
int nb_srv_check_keys(struct nb_ctx *ctx, const char *field, const json_t *obj,
                      const char *const *allowed);
/* An IPv4 (family AF_INET), IPv6 (AF_INET6) or either (0) address string. */
int nb_srv_check_ip(struct nb_ctx *ctx, const char *field, const json_t *v, int family);
/* The request body's object under key; top_allowed (NULL-terminated, may be
 * NULL) lists the keys the body may have. Borrowed, or NULL after 400. */
json_t *nb_srv_body_object(struct nb_ctx *ctx, struct nb_req *req, const char *key,
                           const char *const *top_allowed);

/* ---- query-string helpers ------------------------------------------------- */

/* All query arguments as {"key": ["v1", "v2"], …}. New ref. */
json_t *nb_srv_query_all(struct nb_req *req);
/* Last value of key in such an object, or NULL. Borrowed. */
const char *nb_srv_query_last(json_t *q, const char *key);
/* oslo's bool_from_string: 1/0, or -1 when strict and not a boolean word. */
int nb_srv_bool_from_string(const char *s, bool strict);
/* Parses a non-negative integer query parameter; 400 as Nova's query schema
 * when malformed. Returns 0 and sets *out, or -1. */
int nb_srv_query_nonneg_int(struct nb_ctx *ctx, const char *name, const char *value,
                            long long *out);

#endif
