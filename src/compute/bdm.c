/* bdm.c - reading block_device_mapping rows on the compute side. */
#include "compute/bdm.h"

#include "common/json.h"
#include "common/util.h"
#include "volume/volume.h"

#include <stdio.h>
#include <string.h>

json_t *nb_bdm_connection_info(const json_t *bdm)
{
    const char *text = nb_json_str(bdm, "connection_info");
    if (!text || !*text)
        return NULL;
    json_t *ci = nb_json_parse(text);
    if (ci && !json_is_object(ci)) {
        json_decref(ci);
        return NULL;
    }
    return ci;
}

int nb_bdm_volume_path(const json_t *conn_info, char *out, size_t n)
{
    const json_t *data = json_object_get(conn_info, "data");
    const char *export = nb_json_str(data, "export");
    const char *name = nb_json_str(data, "name");
    const char *base = nb_json_str(conn_info, "mount_point_base");
    if (!export || !name || !base || !*name || strchr(name, '/'))
        return -1;
    char dir[4096];
    nb_volume_mount_point(base, export, dir, sizeof(dir));
    int len = snprintf(out, n, "%s/%s", dir, name);
    return len < 0 || (size_t)len >= n ? -1 : 0;
}

const char *nb_bdm_declared_format(const json_t *conn_info)
{
    const char *f = nb_json_str(json_object_get(conn_info, "data"), "format");
    return f && *f ? f : "raw";
}

bool nb_bdm_is_volume(const json_t *bdm)
{
    const char *dst = nb_json_str(bdm, "destination_type");
    return dst && !strcmp(dst, "volume") && nb_json_int(bdm, "deleted", 0) == 0;
}

bool nb_bdm_is_boot(const json_t *bdm)
{
    json_t *bi = json_object_get(bdm, "boot_index");
    return json_is_integer(bi) && json_integer_value(bi) == 0;
}

const json_t *nb_bdm_boot_volume(const json_t *instance)
{
    size_t i;
    json_t *b;
    json_array_foreach (json_object_get(instance, "block_device_mapping"), i, b) {
        if (nb_bdm_is_volume(b) && nb_bdm_is_boot(b))
            return b;
    }
    return NULL;
}

void nb_bdm_target(const json_t *bdm, char *out, size_t n)
{
    const char *dev = nb_json_str(bdm, "device_name");
    if (!dev)
        dev = "";
    if (!strncmp(dev, "/dev/", 5))
        dev += 5;
    nb_strlcpy(out, dev, n);
}

bool nb_bdm_own_chain_file(const char *name, const char *volume_id)
{
    if (!name || !volume_id || strncmp(name, "volume-", 7) != 0 || strchr(name, '/'))
        return false;
    size_t n = strlen(volume_id);
    return !strncmp(name + 7, volume_id, n) && (name[7 + n] == '\0' || name[7 + n] == '.');
}
