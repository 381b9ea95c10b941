/* disk_format.c - disk-format truth before every domain start.
 *
 * A volume's file can change format behind nubo's back (a storage-side copy,
 * a manual qemu-img convert, a migration) while its mapping's
 * connection_info still says the old one. QEMU then refuses a raw file
 * declared qcow2 ("Image is not in qcow2 format"), and, worse, boots a
 * qcow2 file declared raw and shows the guest the qcow2 structure as its
 * disk. So before the agent starts a domain (spawn, start, hard reboot,
 * resume, the volume being attached) it reads each volume file's real
 * format with the format inspector and compares it with
 * connection_info.data.format:
 *   - file missing: the operation fails, nothing is changed;
 *   - formats differ, [compute] reconcile_disk_format = true (default): the
 *     conductor corrects the mapping and the volume's record (call
 *     reconcile_disk_format) and the agent starts the guest with the true
 *     format (it patches its copy of the mapping);
 *   - formats differ, reconcile off: a WARNING, and the guest is started as
 *     declared, so QEMU's own error reaches the fault.
 * nb_disk_check is the core (files only, no bus), for unit tests. */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "compute/agent/internal.h"
#include "compute/bdm.h"
#include "compute/rpc/conductor_api.h"
#include "image/format.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

int nb_disk_check(const json_t *bdm, struct nb_disk_check *chk, char *err, size_t n)
{
    memset(chk, 0, sizeof(*chk));
    if (!nb_bdm_is_volume(bdm))
        return NB_DISK_SKIP;
    _cleanup_json_ json_t *ci = nb_bdm_connection_info(bdm);
    if (!ci)
        return NB_DISK_SKIP; /* not attached yet: nothing to start with */
    const char *vid = nb_json_str(bdm, "volume_id");
    nb_strlcpy(chk->declared, nb_bdm_declared_format(ci), sizeof(chk->declared));
    if (nb_bdm_volume_path(ci, chk->path, sizeof(chk->path)) < 0) {
        snprintf(err, n, "Volume %s: its connection info names no file", vid ? vid : "?");
        return -1;
    }
    struct stat st;
    if (stat(chk->path, &st) < 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            return NB_DISK_MISSING;
        snprintf(err, n, "Volume %s: cannot read %s: %s", vid ? vid : "?", chk->path,
                 strerror(errno));
        return -1;
    }
    struct nb_format_info info;
    char why[256];
    if (nb_format_inspect_path(chk->path, &info, why, sizeof(why)) < 0) {
        snprintf(err, n, "Volume %s: cannot inspect %s: %s", vid ? vid : "?", chk->path, why);
        return -1;
    }
    nb_strlcpy(chk->actual, info.format, sizeof(chk->actual));
    if (!strcmp(chk->actual, chk->declared))
        return NB_DISK_OK;
    if (strcmp(chk->actual, "raw") != 0 && strcmp(chk->actual, "qcow2") != 0) {
        snprintf(err, n, "Volume %s: file %s is in format %s, which is not a volume format",
                 vid ? vid : "?", chk->path, chk->actual);
        return -1;
    }
    /* A raw disk the guest wrote a qcow2 header into must not get the host
     * to open files of the guest's choosing. */
    if (info.type == NB_FORMAT_QCOW2 &&
        (info.has_data_file ||
         (info.has_backing_file && !nb_bdm_own_chain_file(info.backing_file, vid)))) {
        snprintf(err, n,
                 "Volume %s: file %s is qcow2 on disk but declared %s, and its qcow2 header "
                 "refers to %s; refusing to use it as qcow2",
                 vid ? vid : "?", chk->path, chk->declared,
                 info.has_data_file ? "an external data file" : info.backing_file);
        return -1;
    }
    return NB_DISK_MISMATCH;
}

/* Replaces connection_info.data.format in bdm's copy with fmt. */
static void patch_format(json_t *bdm, const char *fmt)
{
    _cleanup_json_ json_t *ci = nb_bdm_connection_info(bdm);
    if (!ci)
        return;
    json_t *data = json_object_get(ci, "data");
    if (!json_is_object(data))
        json_object_set_new(ci, "data", data = json_object());
    json_object_set_new(data, "format", json_string(fmt));
    char *text = nb_json_dump(ci);
    json_object_set_new(bdm, "connection_info", json_string(text));
    free(text);
}

/* Asks the conductor to correct the mapping; on success patches bdm with
 * the corrected connection_info. 0, or -1 with the error on ctx. */
static int reconcile(struct agent *a, struct nb_ctx *ctx, const char *uuid, json_t *bdm,
                     const struct nb_disk_check *chk)
{
    const char *vid = nb_json_str(bdm, "volume_id");
    struct nb_ctx cctx;
    nb_ctx_child(&cctx, ctx);
    const struct nb_disk_reconcile req = {
        uuid, nb_json_str(bdm, "uuid"), vid, chk->path, chk->declared, chk->actual, a->host};
    _cleanup_json_ json_t *reply = nb_conductor_reconcile_disk_format(
        &cctx, &req, (int)nb_conf_int("DEFAULT", "rpc_response_timeout", 60) * 1000);
    if (!reply || !json_is_true(json_object_get(reply, "ok")))
        return nb_error(ctx, 500, NULL,
                        "Disk format of volume %s of instance %s is %s in the database but %s on "
                        "disk (%s), and it could not be corrected: %s",
                        vid ? vid : "?", uuid, chk->declared, chk->actual, chk->path,
                        reply ? (nb_json_str(reply, "message") ? nb_json_str(reply, "message")
                                                               : "no reason given")
                              : nb_ctx_message(&cctx));
    const char *text = nb_json_str(reply, "connection_info");
    if (text)
        json_object_set_new(bdm, "connection_info", json_string(text));
    else
        patch_format(bdm, chk->actual);
    NB_WARN(LOG_AGENT, ctx, uuid,
            "Disk format of volume %s of instance %s is %s in the database but %s on disk (%s); "
            "corrected",
            vid ? vid : "?", uuid, chk->declared, chk->actual, chk->path);
    return 0;
}

/* Checks (and reconciles) one mapping. 0/-1 with the error on ctx. */
static int verify_one(struct agent *a, struct nb_ctx *ctx, const char *uuid, json_t *bdm)
{
    struct nb_disk_check chk;
    char err[1024] = "";
    int v = nb_disk_check(bdm, &chk, err, sizeof(err));
    const char *vid = nb_json_str(bdm, "volume_id");
    switch (v) {
    case NB_DISK_SKIP:
    case NB_DISK_OK: return 0;
    case NB_DISK_MISSING:
        return nb_error(ctx, 500, NULL, "Volume %s of instance %s: file %s is missing on host %s",
                        vid ? vid : "?", uuid, chk.path, a->host);
    case NB_DISK_MISMATCH:
        if (nb_conf_bool("compute", "reconcile_disk_format", true))
            return reconcile(a, ctx, uuid, bdm, &chk);
        NB_WARN(LOG_AGENT, ctx, uuid,
                "Disk format of volume %s of instance %s is %s in the database but %s on disk "
                "(%s); [compute] reconcile_disk_format is off, starting it as %s",
                vid ? vid : "?", uuid, chk.declared, chk.actual, chk.path, chk.declared);
        return 0;
    default: return nb_error(ctx, 500, NULL, "%s", err);
    }
}

int nb_agent_verify_disks(struct agent *a, struct nb_ctx *ctx, json_t *inst, json_t *only)
{
    const char *uuid = nb_json_str(inst, "uuid") ? nb_json_str(inst, "uuid") : "?";
    if (only) {
        if (verify_one(a, ctx, uuid, only) < 0)
            return -1;
        /* the instance's copy of the same mapping follows */
        const char *ou = nb_json_str(only, "uuid");
        size_t i;
        json_t *b;
        json_array_foreach (json_object_get(inst, "block_device_mapping"), i, b) {
            const char *bu = nb_json_str(b, "uuid");
            json_t *ci = json_object_get(only, "connection_info");
            if (ou && bu && !strcmp(bu, ou) && ci)
                json_object_set(b, "connection_info", ci);
        }
        return 0;
    }
    size_t i;
    json_t *b;
    json_array_foreach (json_object_get(inst, "block_device_mapping"), i, b) {
        if (verify_one(a, ctx, uuid, b) < 0)
            return -1;
    }
    return 0;
}
