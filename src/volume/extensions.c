/* extensions.c - GET /volume/v3/{project_id}/extensions and
 * /extensions/{alias}: the Cinder API extensions whose requests or
 * attributes this service answers, described as Cinder's extension
 * descriptors describe themselves (name, alias, docstring, updated). Those
 * it does not offer (os-hosts, backups, volume types, transfers, qos-specs,
 * services, consistency groups, manage/unmanage, ...) are not listed, so a
 * client that looks for one finds it missing. */
#include "common/json.h"
#include "volume/volume_int.h"

#include <string.h>

static const struct {
    const char *name, *alias, *description, *updated;
} extensions[] = {
    {"AdminActions", "os-admin-actions", "Enable admin actions.", "2012-08-25T00:00:00+00:00"},
    {"AvailabilityZones", "os-availability-zone", "Describe Availability Zones.",
     "2013-06-27T00:00:00+00:00"},
    {"ExtendedSnapshotAttributes", "os-extended-snapshot-attributes",
     "Extended SnapshotAttributes support.", "2012-06-19T00:00:00+00:00"},
    {"Quotas", "os-quota-sets", "Quota management support.", "2011-08-08T00:00:00+00:00"},
    {"UsedLimits", "os-used-limits", "Provide data on limited resources that are being used.",
     "2013-10-03T00:00:00+00:00"},
    {"VolumeActions", "os-volume-actions", "Enable volume actions.", "2012-05-31T00:00:00+00:00"},
    {"VolumeHostAttribute", "os-vol-host-attr", "Expose host as an attribute of a volume.",
     "2011-11-03T00:00:00+00:00"},
    {"VolumeImageMetadata", "os-vol-image-meta", "Show image metadata associated with the volume.",
     "2012-12-07T00:00:00+00:00"},
    {"VolumeMigStatusAttribute", "os-vol-mig-status-attr",
     "Expose migration_status as an attribute of a volume.", "2013-08-08T00:00:00+00:00"},
    {"VolumeTenantAttribute", "os-vol-tenant-attr",
     "Expose the internal project_id as an attribute of a volume.", "2011-11-03T00:00:00+00:00"},
};

#define N_EXTENSIONS (sizeof(extensions) / sizeof(extensions[0]))

static json_t *extension_view(size_t i)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:[]}", "name", extensions[i].name, "alias",
                     extensions[i].alias, "description", extensions[i].description, "updated",
                     extensions[i].updated, "links");
}

static int extensions_index(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_vol_begin(ctx, req, resp) < 0)
        return -1;
    json_t *list = json_array();
    for (size_t i = 0; i < N_EXTENSIONS; i++)
        json_array_append_new(list, extension_view(i));
    return nb_resp_json(resp, 200, json_pack("{s:o}", "extensions", list));
}

static int extensions_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_vol_begin(ctx, req, resp) < 0)
        return -1;
    const char *alias = nb_req_param(req, "alias");
    for (size_t i = 0; i < N_EXTENSIONS; i++)
        if (strcmp(extensions[i].alias, alias) == 0)
            return nb_resp_json(resp, 200, json_pack("{s:o}", "extension", extension_view(i)));
    return nb_error(ctx, 404, NULL, "The resource could not be found.");
}

void nb_vol_extensions_routes(void)
{
    nb_http_route("GET", "/volume/v3/{project_id}/extensions", extensions_index, 0);
    nb_http_route("GET", "/volume/v3/{project_id}/extensions/{alias}", extensions_show, 0);
}
