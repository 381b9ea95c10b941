/* test_doctor.c - unit tests of `nubo doctor server`'s parts that need no
 * running cloud: the format verdict and exit status (pure), the diagnosis on
 * a real database and a real volume file (the PROBLEM line names both
 * formats), the fix's database transaction (exactly one row, old value kept
 * in doctor_fixes, admin metadata, all-or-nothing) and its restore, and the
 * admin token the doctor issues itself (valid, admin on project admin, only
 * its hash stored). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "cmd/doctor.h"
#include "common/json.h"
#include "common/util.h"
#include "db/db.h"
#include "identity/identity.h"
#include "identity/identity_int.h"
#include "network/network.h"
#include "volume/volume.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define INST "aaaaaaaa-0000-4000-8000-000000000001"
#define BDM "bbbbbbbb-0000-4000-8000-000000000001"
#define VOL "cccccccc-0000-4000-8000-000000000001"
#define SHARE "/srv/nubo-test-share"

static char dir[] = "/tmp/nubo-test-doctor-XXXXXX";
static struct nb_db *db;
static char volume_file[4096];

static int setup(void **state)
{
    assert_non_null(mkdtemp(dir));
    char path[600];
    snprintf(path, sizeof(path), "%s/nubo.sqlite", dir);
    db = nb_db_open(path);
    assert_non_null(db);
    assert_true(nb_db_sync(db) >= 0);
    return 0;
}

static int teardown(void **state)
{
    nb_db_close(db);
    char cmd[700];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void sql(const char *text)
{
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    assert_true(nb_db_exec(db, &ctx, text, "") >= 0);
}

static char *str_of(const char *query)
{
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    json_t *row = nb_db_row(db, &ctx, query, "");
    const char *k;
    json_t *v;
    char *out = NULL;
    json_object_foreach (row, k, v)
        if (json_is_string(v))
            out = strdup(json_string_value(v));
    json_decref(row);
    return out;
}

static void assert_sql_str(const char *query, const char *want)
{
    char *got = str_of(query);
    if (!want)
        assert_null(got);
    else
        assert_string_equal(got ? got : "(null)", want);
    free(got);
}

static long long int_of(const char *query)
{
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    return nb_db_int(db, &ctx, -1, query, "");
}

/* A volume-backed server whose mapping says declared, on a raw file. */
static void make_server(const char *declared)
{
    static const char *const tables[] = {
        "instances", "block_device_mapping", "volume_admin_metadata", "volume_attachment",
        "volumes",   "doctor_fixes"};
    for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++) {
        char del[100];
        snprintf(del, sizeof(del), "DELETE FROM %s", tables[i]);
        sql(del);
    }
    sql("INSERT INTO instances (uuid, project_id, user_id, display_name, vm_state, power_state, "
        "host, node, flavor) VALUES ('" INST "', 'p', 'u', 'vm1', 'error', 4, 'fake-1', 'fake-1', "
        "'{}')");
    char base[700], mnt[1400], text[12000];
    snprintf(base, sizeof(base), "%s/mnt", dir);
    nb_volume_mount_point(base, SHARE, mnt, sizeof(mnt));
    snprintf(volume_file, sizeof(volume_file), "%s/volume-" VOL, mnt);
    snprintf(text, sizeof(text), "mkdir -p %s && qemu-img create -q -f raw %s 1M", mnt,
             volume_file);
    assert_int_equal(system(text), 0);
    snprintf(text, sizeof(text),
             "INSERT INTO block_device_mapping (uuid, instance_uuid, source_type, "
             "destination_type, boot_index, volume_id, device_name, connection_info) VALUES "
             "('" BDM "', '" INST "', 'volume', 'volume', 0, '" VOL "', '/dev/vda', "
             "'{\"driver_volume_type\": \"nfs\", \"data\": {\"export\": \"" SHARE "\", "
             "\"name\": \"volume-" VOL "\", \"format\": \"%s\", \"options\": null}, "
             "\"mount_point_base\": \"%s\"}')",
             declared, base);
    sql(text);
    sql("INSERT INTO volumes (id, project_id, status, attach_status, size, bootable) VALUES "
        "('" VOL "', 'p', 'in-use', 'attached', 1, 1)");
    sql("INSERT INTO volume_attachment (id, volume_id, instance_uuid, attached_host, mountpoint, "
        "attach_status) VALUES ('att-1', '" VOL "', '" INST "', 'fake-1', '/dev/vda', "
        "'attached')");
    sql("INSERT INTO volume_admin_metadata (volume_id, key, value) VALUES ('" VOL "', 'format', "
        "'qcow2')");
}

static const struct nb_dr_host fake_host = {"this-host", "fake", "qemu:///system"};

/* Runs the diagnosis into a string (caller frees). */
static char *diagnose(struct nb_dr_report *r, int *rc)
{
    char *text = NULL;
    size_t len = 0;
    memset(r, 0, sizeof(*r));
    r->out = open_memstream(&text, &len);
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    *rc = nb_dr_diagnose(db, &ctx, &fake_host, INST, r);
    fclose(r->out);
    r->out = stdout;
    return text;
}

/* --- pure parts ---------------------------------------------------------- */

static void test_compare_format(void **state)
{
    bool fixable = true;
    assert_int_equal(nb_dr_compare_format("qcow2", "qcow2", &fixable), NB_DR_OK);
    assert_false(fixable);
    assert_int_equal(nb_dr_compare_format("raw", "raw", &fixable), NB_DR_OK);
    assert_int_equal(nb_dr_compare_format("qcow2", "raw", &fixable), NB_DR_PROBLEM);
    assert_true(fixable);
    assert_int_equal(nb_dr_compare_format("raw", "qcow2", &fixable), NB_DR_PROBLEM);
    assert_true(fixable);
    /* not a volume format: a problem the fix must not "correct" */
    assert_int_equal(nb_dr_compare_format("qcow2", "vmdk", &fixable), NB_DR_PROBLEM);
    assert_false(fixable);
    assert_int_equal(nb_dr_compare_format("vhd", "raw", &fixable), NB_DR_PROBLEM);
    assert_false(fixable);
}

static void test_exit_status(void **state)
{
    assert_int_equal(nb_dr_exit_status(0, false, false), NB_DR_EXIT_HEALTHY);
    assert_int_equal(nb_dr_exit_status(0, true, false), NB_DR_EXIT_HEALTHY);
    assert_int_equal(nb_dr_exit_status(2, false, false), NB_DR_EXIT_PROBLEM);
    assert_int_equal(nb_dr_exit_status(1, false, true), NB_DR_EXIT_PROBLEM);
    assert_int_equal(nb_dr_exit_status(1, true, false), NB_DR_EXIT_PROBLEM);
    assert_int_equal(nb_dr_exit_status(1, true, true), NB_DR_EXIT_FIXED);
    assert_int_equal(NB_DR_EXIT_CANNOT, 3);
    assert_int_equal(NB_DR_EXIT_USAGE, 64);
}

/* --- the diagnosis --------------------------------------------------------- */

static void test_diagnose_mismatch(void **state)
{
    make_server("qcow2");
    struct nb_dr_report r;
    int rc;
    char *text = diagnose(&r, &rc);
    assert_int_equal(rc, 0);
    char want[8192];
    snprintf(want, sizeof(want),
             "[PROBLEM] disk format: volume " VOL " connection_info.data.format=qcow2, file %s "
             "is raw",
             volume_file);
    assert_non_null(strstr(text, want));
    assert_non_null(strstr(text, "[PROBLEM] server: " INST " name=\"vm1\" status=ERROR"));
    assert_non_null(strstr(text, "[OK] boot volume: volume " VOL));
    assert_non_null(strstr(text, "[OK] boot_index 0: exactly one mapping (bdm " BDM));
    assert_non_null(strstr(text, "[SKIP] libvirt domain: [compute] driver is fake"));
    assert_non_null(strstr(text, "[OK] volume record: volume " VOL " status=in-use"));
    assert_int_equal(r.problems, 2);
    assert_int_equal(r.nfixes, 1);
    assert_int_equal(r.unfixable, 0);
    assert_string_equal(r.fixes[0].old_format, "qcow2");
    assert_string_equal(r.fixes[0].new_format, "raw");
    assert_string_equal(r.fixes[0].bdm_uuid, BDM);
    free(text);
    nb_dr_report_clear(&r);
}

/* A raw volume whose guest wrote a qcow2 header naming another volume's
 * file: a PROBLEM the fix must not "correct" to qcow2. */
static void test_diagnose_foreign_backing_not_fixable(void **state)
{
    (void)state;
    make_server("raw");
    char cmd[9000];
    snprintf(cmd, sizeof(cmd), "qemu-img create -q -f qcow2 -F raw -b volume-other -u %s 1M",
             volume_file);
    assert_int_equal(system(cmd), 0);
    struct nb_dr_report r;
    int rc;
    char *text = diagnose(&r, &rc);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(text, "refers to a file outside the volume's own chain"));
    assert_int_equal(r.nfixes, 0);
    assert_int_equal(r.unfixable, 1);
    free(text);
    nb_dr_report_clear(&r);
}

/* The causes on the doctor's lines: a fault's details (each build
 * attempt's, newlines shown as " | ") and an ERROR port's status_reason
 * (the network agent's, e.g. an address in use). */
static void test_diagnose_fault_details_and_port_reason(void **state)
{
    (void)state;
    make_server("raw");
    sql("DELETE FROM ports");
    sql("DELETE FROM networks");
    sql("DELETE FROM instance_faults");
    sql("INSERT INTO instance_faults (instance_uuid, code, message, details, host, created_at) "
        "VALUES ('" INST "', 500, 'Exceeded maximum number of retries.', 'Attempt 1: fake-1: "
        "Virtual Interface creation failed: port acp1 is ERROR: IP address 10.180.0.5 is in use\n"
        "No other host for the retry', NULL, '2026-12-02T18:00:00')");
    sql("INSERT INTO networks (id, project_id, name, created_at, updated_at) VALUES ('acnet1', "
        "'p', 'ac-net', 'now', 'now')");
    sql("INSERT INTO ports (id, project_id, network_id, mac_address, status, status_reason, "
        "device_id, device_owner, binding_host_id, binding_vif_type, created_at, updated_at) "
        "VALUES ('acp1', 'p', 'acnet1', 'fa:16:3e:ac:00:01', 'ERROR', 'IP address 10.180.0.5 "
        "is already in use on network acnet1 by MAC 02:ac:00:00:00:05 (ARP reply to a "
        "duplicate-address probe)', '" INST "', 'compute:nova', 'fake-1', 'bridge', 'now', "
        "'now')");
    struct nb_dr_report r;
    int rc;
    char *text = diagnose(&r, &rc);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(text, "[WARN] fault: code=500 created_at=2026-12-02T18:00:00 "
                                 "host=None message=\"Exceeded maximum number of retries.\" "
                                 "details=\"Attempt 1: fake-1: Virtual Interface creation "
                                 "failed: port acp1 is ERROR: IP address 10.180.0.5 is in use | "
                                 "No other host for the retry\""));
    assert_non_null(strstr(text, "status=ERROR binding:host_id=fake-1 binding:vif_type=bridge; "
                                 "the agent failed to wire it: IP address 10.180.0.5 is already "
                                 "in use on network acnet1 by MAC 02:ac:00:00:00:05 (ARP reply "
                                 "to a duplicate-address probe)"));
    assert_non_null(strstr(text, "[PROBLEM] port acp1: acp1 mac=fa:16:3e:ac:00:01"));
    /* no reason recorded: said so */
    sql("UPDATE ports SET status_reason = NULL");
    free(text);
    nb_dr_report_clear(&r);
    text = diagnose(&r, &rc);
    assert_non_null(strstr(text, "the agent failed to wire it: no reason recorded"));
    free(text);
    nb_dr_report_clear(&r);
    sql("DELETE FROM ports");
    sql("DELETE FROM networks");
    sql("DELETE FROM instance_faults");
}

static void test_diagnose_healthy_and_unknown(void **state)
{
    make_server("raw");
    sql("UPDATE instances SET vm_state = 'active', power_state = 1");
    sql("UPDATE volume_admin_metadata SET value = 'raw'");
    struct nb_dr_report r;
    int rc;
    char *text = diagnose(&r, &rc);
    assert_int_equal(rc, 0);
    assert_int_equal(r.problems, 0);
    assert_int_equal(r.nfixes, 0);
    assert_non_null(
        strstr(text, "[OK] disk format: volume " VOL " connection_info.data.format=raw, file"));
    assert_null(strstr(text, "[PROBLEM]"));
    free(text);
    nb_dr_report_clear(&r);

    /* two boot_index 0 mappings */
    sql("INSERT INTO block_device_mapping (uuid, instance_uuid, source_type, destination_type, "
        "boot_index) VALUES ('bdm-2', '" INST "', 'image', 'local', 0)");
    text = diagnose(&r, &rc);
    assert_non_null(strstr(text, "[PROBLEM] boot_index 0: 2 mappings have boot_index 0"));
    assert_int_equal(r.unfixable, 1);
    free(text);
    nb_dr_report_clear(&r);

    /* the file vanished */
    make_server("raw");
    unlink(volume_file);
    text = diagnose(&r, &rc);
    assert_non_null(strstr(text, "[PROBLEM] volume file: volume " VOL " file "));
    assert_non_null(strstr(text, "No such file or directory"));
    assert_int_equal(r.nfixes, 0);
    free(text);
    nb_dr_report_clear(&r);

    /* unknown server: the diagnosis cannot run */
    memset(&r, 0, sizeof(r));
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(nb_dr_diagnose(db, &ctx, &fake_host, "no-such-server", &r), -1);
    assert_string_equal(ctx.err_msg, "no server with id or name 'no-such-server' in the database");
    nb_dr_report_clear(&r);
}

/* --- the fix's transaction ---------------------------------------------------- */

static void test_fix_apply_and_restore(void **state)
{
    make_server("qcow2");
    struct nb_dr_report r;
    int rc;
    free(diagnose(&r, &rc));
    assert_int_equal(r.nfixes, 1);
    char *old = str_of("SELECT connection_info FROM block_device_mapping WHERE uuid = '" BDM "'");
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(nb_dr_fix_apply(db, &ctx, &r), 0);
    assert_sql_str("SELECT JSON_EXTRACT(connection_info, '$.data.format') FROM "
                   "block_device_mapping WHERE instance_uuid = '" INST "' AND deleted = 0",
                   "raw");
    /* everything else in connection_info is untouched */
    assert_sql_str("SELECT JSON_EXTRACT(connection_info, '$.data.export') FROM "
                   "block_device_mapping WHERE uuid = '" BDM "'",
                   SHARE);
    assert_sql_str("SELECT value FROM volume_admin_metadata WHERE key = 'format' AND deleted = 0",
                   "raw");
    assert_int_equal(int_of("SELECT COUNT(*) FROM doctor_fixes"), 1);
    assert_sql_str("SELECT old_connection_info FROM doctor_fixes", old);
    assert_sql_str("SELECT old_admin_format FROM doctor_fixes", "qcow2");
    assert_sql_str("SELECT outcome FROM doctor_fixes", "applied");
    assert_sql_str("SELECT instance_uuid FROM doctor_fixes", INST);
    assert_string_equal(r.fixes[0].old_connection_info, old);

    assert_int_equal(nb_dr_fix_restore(db, &ctx, &r, "guest did not come up"), 0);
    assert_sql_str("SELECT connection_info FROM block_device_mapping WHERE uuid = '" BDM "'", old);
    assert_sql_str("SELECT value FROM volume_admin_metadata WHERE key = 'format' AND deleted = 0",
                   "qcow2");
    assert_sql_str("SELECT outcome FROM doctor_fixes", "rolled_back");
    assert_sql_str("SELECT message FROM doctor_fixes", "guest did not come up");
    free(old);
    nb_dr_report_clear(&r);
}

static void test_fix_exactly_one_row(void **state)
{
    make_server("qcow2");
    struct nb_dr_report r;
    int rc;
    free(diagnose(&r, &rc));
    assert_int_equal(r.nfixes, 1);
    /* a duplicate live row with the same uuid: the update would change two */
    sql("INSERT INTO block_device_mapping (uuid, instance_uuid, source_type, destination_type, "
        "volume_id, connection_info) SELECT uuid, instance_uuid, source_type, destination_type, "
        "volume_id, connection_info FROM block_device_mapping WHERE uuid = '" BDM "'");
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(nb_dr_fix_apply(db, &ctx, &r), -1);
    assert_string_equal(ctx.err_msg,
                        "the update of mapping " BDM " changed 2 rows, not exactly one");
    /* rolled back: nothing changed, nothing recorded */
    assert_int_equal(int_of("SELECT COUNT(*) FROM block_device_mapping WHERE "
                            "JSON_EXTRACT(connection_info, '$.data.format') = 'qcow2'"),
                     2);
    assert_int_equal(int_of("SELECT COUNT(*) FROM doctor_fixes"), 0);
    assert_sql_str("SELECT value FROM volume_admin_metadata WHERE key = 'format'", "qcow2");
    nb_dr_report_clear(&r);

    /* the mapping changed between the diagnosis and the fix */
    make_server("qcow2");
    free(diagnose(&r, &rc));
    sql("UPDATE block_device_mapping SET connection_info = JSON_SET(connection_info, "
        "'$.data.format', 'raw')");
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(nb_dr_fix_apply(db, &ctx, &r), -1);
    assert_int_equal(ctx.err_status, 409);
    assert_non_null(strstr(ctx.err_msg, "changed since the diagnosis: it now says raw"));
    assert_int_equal(int_of("SELECT COUNT(*) FROM doctor_fixes"), 0);
    nb_dr_report_clear(&r);
}

static void test_restore_leaves_newer_values(void **state)
{
    make_server("qcow2");
    sql("DELETE FROM volume_admin_metadata");
    struct nb_dr_report r;
    int rc;
    free(diagnose(&r, &rc));
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(nb_dr_fix_apply(db, &ctx, &r), 0);
    assert_null(r.fixes[0].old_admin_format);
    assert_sql_str("SELECT value FROM volume_admin_metadata WHERE key = 'format' AND deleted = 0",
                   "raw");
    /* someone else rewrote the mapping after the fix: restore must not
     * clobber it */
    sql("UPDATE block_device_mapping SET connection_info = JSON_SET(connection_info, "
        "'$.data.options', 'x')");
    char *now = str_of("SELECT connection_info FROM block_device_mapping");
    assert_int_equal(nb_dr_fix_restore(db, &ctx, &r, "timeout"), -1);
    assert_sql_str("SELECT connection_info FROM block_device_mapping", now);
    assert_sql_str("SELECT outcome FROM doctor_fixes", "rollback_failed");
    free(now);
    nb_dr_report_clear(&r);

    /* restored where there was no admin metadata: the added key goes away */
    make_server("qcow2");
    sql("DELETE FROM volume_admin_metadata");
    free(diagnose(&r, &rc));
    assert_int_equal(nb_dr_fix_apply(db, &ctx, &r), 0);
    assert_int_equal(nb_dr_fix_restore(db, &ctx, &r, "timeout"), 0);
    assert_int_equal(int_of("SELECT COUNT(*) FROM volume_admin_metadata WHERE deleted = 0"), 0);
    nb_dr_report_clear(&r);
}

/* --- the doctor's admin token --------------------------------------------------- */

static void test_admin_token(void **state)
{
    static struct nb_env env;
    env.db = db;
    struct nb_ctx ctx;
    char token[65];
    nb_ctx_init_system(&ctx, NULL);
    /* before bootstrap there is no admin user */
    assert_int_equal(nb_identity_issue_admin_token(&env, &ctx, 300, token), -1);
    assert_int_equal(ctx.err_status, 404);
    assert_int_equal(nb_identity_bootstrap(&env, "secret", NULL), 0);
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(nb_identity_issue_admin_token(&env, &ctx, 0, token), -1);
    assert_int_equal(ctx.err_status, 400);
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(nb_identity_issue_admin_token(&env, &ctx, 300, token), 0);
    assert_int_equal(strlen(token), 64);
    /* only the hash is stored */
    char hash[NB_IDN_HEX_LEN], q[300];
    nb_idn_token_hash(token, hash);
    snprintf(q, sizeof(q), "SELECT COUNT(*) FROM token WHERE id_hash = '%s'", hash);
    assert_int_equal(int_of(q), 1);
    snprintf(q, sizeof(q), "SELECT COUNT(*) FROM token WHERE id_hash = '%s'", token);
    assert_int_equal(int_of(q), 0);
    snprintf(q, sizeof(q), "SELECT expires_at - issued_at FROM token WHERE id_hash = '%s'", hash);
    assert_int_equal(int_of(q), 300);
    /* it validates as admin on project admin */
    json_t *tok = nb_idn_token_load(&ctx, token, nb_time_now());
    assert_non_null(tok);
    struct nb_ctx user;
    nb_ctx_init(&user);
    nb_idn_token_to_ctx(&user, tok);
    assert_string_equal(user.user_name, "admin");
    assert_string_equal(user.project_name, "admin");
    assert_true(user.is_admin);
    json_decref(tok);
    /* and not after it expired */
    assert_null(nb_idn_token_load(&ctx, token, nb_time_now() + 301));
}

/* The verdict on a port's tap from what was seen of it. */
static void test_net_wiring(void **state)
{
    (void)state;
    char why[512];
    struct nb_dr_wiring w = {.tap = "tap9a1f3c1e-00",
                             .bridge = "brq5a1e0001-00",
                             .master = "brq5a1e0001-00",
                             .tap_exists = true,
                             .running = true,
                             .tap_mtu = 1450,
                             .bridge_mtu = 1450,
                             .net_mtu = 1450};
    assert_int_equal(nb_dr_net_wiring(&w, why, sizeof(why)), NB_DR_OK);
    assert_string_equal(why, "tap9a1f3c1e-00 on brq5a1e0001-00, mtu 1450 (network 1450)");
    w.bridge_mtu = 1500;
    assert_int_equal(nb_dr_net_wiring(&w, why, sizeof(why)), NB_DR_WARN);
    assert_non_null(strstr(why, "brq5a1e0001-00 mtu 1500, network mtu 1450: they differ"));
    strcpy(w.master, "brqother0000");
    assert_int_equal(nb_dr_net_wiring(&w, why, sizeof(why)), NB_DR_PROBLEM);
    assert_string_equal(why, "tap9a1f3c1e-00 is on brqother0000, not on the network's bridge "
                             "brq5a1e0001-00");
    w.master[0] = '\0';
    assert_int_equal(nb_dr_net_wiring(&w, why, sizeof(why)), NB_DR_PROBLEM);
    assert_non_null(strstr(why, "is on no bridge"));
    w.tap_exists = false;
    assert_int_equal(nb_dr_net_wiring(&w, why, sizeof(why)), NB_DR_PROBLEM);
    assert_string_equal(why, "no device tap9a1f3c1e-00 while the guest runs");
    w.running = false;
    assert_int_equal(nb_dr_net_wiring(&w, why, sizeof(why)), NB_DR_WARN);
}

/* A rule as the API shows it; "-" for a null field, port -1 for none. */
static json_t *rule(const char *direction, const char *eth, const char *proto, int min, int max,
                    const char *prefix, const char *group)
{
    json_t *r = json_pack("{s:s, s:s, s:s}", "id", "r-1", "direction", direction, "ethertype", eth);
    json_object_set_new(r, "protocol", strcmp(proto, "-") ? json_string(proto) : json_null());
    json_object_set_new(r, "port_range_min", min >= 0 ? json_integer(min) : json_null());
    json_object_set_new(r, "port_range_max", max >= 0 ? json_integer(max) : json_null());
    json_object_set_new(r, "remote_ip_prefix",
                        strcmp(prefix, "-") ? json_string(prefix) : json_null());
    json_object_set_new(r, "remote_group_id",
                        strcmp(group, "-") ? json_string(group) : json_null());
    return r;
}

static bool allows(json_t *r)
{
    bool b = nb_sg_rule_allows_metadata(r);
    json_decref(r);
    return b;
}

/* Which egress rules let a guest's request to 169.254.169.254:80 out. */
static void test_metadata_rule(void **state)
{
    (void)state;
    /* Neutron's default egress rules, and rules made for the metadata */
    assert_true(allows(rule("egress", "IPv4", "-", -1, -1, "-", "-")));
    assert_true(allows(rule("egress", "IPv4", "-", -1, -1, "0.0.0.0/0", "-")));
    assert_true(allows(rule("egress", "IPv4", "tcp", 80, 80, "169.254.169.254/32", "-")));
    assert_true(allows(rule("egress", "IPv4", "6", 1, 1024, "169.254.0.0/16", "-")));
    assert_true(allows(rule("egress", "IPv4", "TCP", -1, -1, "169.254.169.254", "-")));
    assert_true(allows(rule("egress", "IPv4", "0", -1, -1, "-", "-")));
    assert_true(allows(rule("egress", "IPv4", "ip", -1, -1, "-", "-")));
    /* a row as the database has it: ports as integers, protocol text */
    json_t *row = json_pack("{s:s, s:s, s:s, s:i, s:i, s:n, s:n}", "direction", "egress",
                            "ethertype", "IPv4", "protocol", "tcp", "port_range_min", 80,
                            "port_range_max", 443, "remote_ip_prefix", "remote_group_id");
    assert_true(allows(row));
    /* what does not */
    assert_false(allows(rule("ingress", "IPv4", "-", -1, -1, "-", "-")));
    assert_false(allows(rule("egress", "IPv6", "-", -1, -1, "-", "-")));
    assert_false(allows(rule("egress", "IPv4", "udp", -1, -1, "-", "-")));
    assert_false(allows(rule("egress", "IPv4", "icmp", -1, -1, "-", "-")));
    assert_false(allows(rule("egress", "IPv4", "tcp", 443, 443, "-", "-")));
    assert_false(allows(rule("egress", "IPv4", "tcp", 81, 8080, "-", "-")));
    assert_false(allows(rule("egress", "IPv4", "tcp", 22, 79, "-", "-")));
    assert_false(allows(rule("egress", "IPv4", "tcp", 80, 80, "10.190.0.0/16", "-")));
    assert_false(allows(rule("egress", "IPv4", "tcp", 80, 80, "169.254.169.253/32", "-")));
    assert_false(allows(rule("egress", "IPv4", "-", -1, -1, "::/0", "-")));
    assert_false(allows(rule("egress", "IPv4", "-", -1, -1, "-", "grp-self")));
    assert_false(allows(rule("egress", "IPv4", "-", -1, -1, "not-a-cidr", "-")));
}

/* The metadata verdict: OK naming the rule, PROBLEM without a config drive
 * naming the groups and the rule to add, WARN with one. */
static void test_net_metadata(void **state)
{
    (void)state;
    char why[2048];
    json_t *groups =
        json_pack("[{s:s, s:s, s:i, s:[o]}, {s:s, s:s, s:i, s:[]}]", "id", "sg-a", "name", "web",
                  "known", 1, "rules", rule("ingress", "IPv4", "tcp", 80, 80, "-", "-"), "id",
                  "sg-b", "name", "", "known", 0, "rules");
    assert_int_equal(nb_dr_net_metadata(groups, false, why, sizeof(why)), NB_DR_PROBLEM);
    assert_non_null(strstr(why, "no egress rule of groups web (sg-a), - (sg-b, no such group) "
                                "allows IPv4 TCP to 169.254.169.254:80 and the server has no "
                                "config drive: the guest cannot read its metadata"));
    assert_non_null(strstr(why, "openstack security group rule create --egress --protocol tcp "
                                "--dst-port 80 --remote-ip 169.254.169.254/32 sg-a"));
    assert_int_equal(nb_dr_net_metadata(groups, true, why, sizeof(why)), NB_DR_WARN);
    assert_non_null(strstr(why, "the server has a config drive"));
    json_t *r = rule("egress", "IPv4", "tcp", 80, 80, "169.254.169.254/32", "-");
    json_object_set_new(r, "id", json_string("r-md"));
    json_array_append_new(json_object_get(json_array_get(groups, 1), "rules"), r);
    json_object_set_new(json_array_get(groups, 1), "name", json_string("md"));
    assert_int_equal(nb_dr_net_metadata(groups, false, why, sizeof(why)), NB_DR_OK);
    assert_string_equal(why, "egress to 169.254.169.254:80 is allowed by rule r-md of group md "
                             "(sg-b)");
    json_decref(groups);
    groups = json_array();
    assert_int_equal(nb_dr_net_metadata(groups, false, why, sizeof(why)), NB_DR_PROBLEM);
    assert_non_null(strstr(why, "the port has no security group"));
    assert_int_equal(nb_dr_net_metadata(groups, true, why, sizeof(why)), NB_DR_WARN);
    json_decref(groups);
}

/* `nft list table` as nft 1.0 prints what sg_render.c renders. */
static const char bridge_ok[] =
    "table bridge nubo_port_x {\n"
    "\tchain from_tapabc {\n"
    "\t\tether saddr != fa:16:3e:00:00:01 counter packets 0 bytes 0 drop comment \"mac spoof\"\n"
    "\t\tip saddr 0.0.0.0 ip daddr 255.255.255.255 udp sport 68 udp dport 67 accept comment "
    "\"dhcp client\"\n"
    "\t\tip saddr != 10.190.0.5 counter packets 0 bytes 0 drop comment \"ip spoof\"\n"
    "\t\tudp sport 67 udp dport 68 counter packets 0 bytes 0 drop comment \"dhcp server\"\n"
    "\t}\n"
    "}\n";
static const char inet_ok[] =
    "table inet nubo_sg_x {\n"
    "\tchain egress_tapabc {\n"
    "\t\tmeta nfproto ipv4 udp sport 68 udp dport 67 return comment \"dhcp client\"\n"
    "\t\tct state established,related return\n"
    "\t\tcounter packets 3 bytes 180 drop comment \"no rule allows it\"\n"
    "\t}\n\n"
    "\tchain ingress_tapabc {\n"
    "\t\tct state established,related accept\n"
    "\t\tct state invalid counter packets 0 bytes 0 drop\n"
    "\t\tip daddr 10.190.0.5 udp sport 67 udp dport 68 accept comment \"dhcp\"\n"
    "\t\tcounter packets 0 bytes 0 drop comment \"no rule allows it\"\n"
    "\t}\n"
    "}\n";

static char *replaced(const char *text, const char *from, const char *to)
{
    const char *at = strstr(text, from);
    assert_non_null(at);
    size_t n = strlen(text) - strlen(from) + strlen(to) + 1;
    char *out = malloc(n);
    snprintf(out, n, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    return out;
}

/* The DHCP allowance found, quoted, and each way it can be missing. */
static void test_nft_dhcp(void **state)
{
    (void)state;
    char why[2048];
    assert_int_equal(nb_dr_nft_dhcp(bridge_ok, inet_ok, "tapabc", why, sizeof(why)), NB_DR_OK);
    assert_string_equal(
        why, "bridge from_tapabc: \"ip saddr 0.0.0.0 ip daddr 255.255.255.255 udp sport 68 udp "
             "dport 67 accept comment \"dhcp client\"\"; inet egress_tapabc: \"meta nfproto ipv4 "
             "udp sport 68 udp dport 67 return comment \"dhcp client\"\"; inet ingress_tapabc: "
             "\"ip daddr 10.190.0.5 udp sport 67 udp dport 68 accept comment \"dhcp\"\"");
    /* another tap's chains are not this one's */
    assert_int_equal(nb_dr_nft_dhcp(bridge_ok, inet_ok, "tapother", why, sizeof(why)),
                     NB_DR_PROBLEM);
    assert_non_null(strstr(why, "no chain from_tapother"));
    /* the inet table could not be listed */
    assert_int_equal(nb_dr_nft_dhcp(bridge_ok, NULL, "tapabc", why, sizeof(why)), NB_DR_PROBLEM);
    assert_non_null(strstr(why, "inet table not listed: no chain egress_tapabc"));
    /* the egress chain lacks the client's allowance */
    char *t = replaced(inet_ok,
                       "\t\tmeta nfproto ipv4 udp sport 68 udp dport 67 return comment \"dhcp "
                       "client\"\n",
                       "");
    assert_int_equal(nb_dr_nft_dhcp(bridge_ok, t, "tapabc", why, sizeof(why)), NB_DR_PROBLEM);
    assert_string_equal(why, "inet chain egress_tapabc drops the client's requests (udp sport 68 "
                             "udp dport 67) at \"counter packets 3 bytes 180 drop comment \"no "
                             "rule allows it\"\" before any rule lets it through");
    free(t);
    /* an unconditional drop before the server's answers */
    t = replaced(inet_ok, "\t\tct state invalid", "\t\tcounter drop\n\t\tct state invalid");
    assert_int_equal(nb_dr_nft_dhcp(bridge_ok, t, "tapabc", why, sizeof(why)), NB_DR_PROBLEM);
    assert_non_null(strstr(why, "inet chain ingress_tapabc drops the server's answers"));
    free(t);
    /* the source check before the discover from 0.0.0.0 */
    t = replaced(bridge_ok,
                 "\t\tip saddr 0.0.0.0 ip daddr 255.255.255.255 udp sport 68 udp dport 67 accept "
                 "comment \"dhcp client\"\n",
                 "");
    char *t2 = replaced(t, "\t\tudp sport 67",
                        "\t\tip saddr 0.0.0.0 ip daddr 255.255.255.255 udp sport 68 udp dport 67 "
                        "accept\n\t\tudp sport 67");
    assert_int_equal(nb_dr_nft_dhcp(t2, inet_ok, "tapabc", why, sizeof(why)), NB_DR_PROBLEM);
    assert_non_null(strstr(why, "bridge chain from_tapabc drops the client's discover from "
                                "0.0.0.0 (udp sport 68 udp dport 67) at \"ip saddr != "
                                "10.190.0.5 counter packets 0 bytes 0 drop"));
    free(t2);
    /* a chain with no allowance and no drop */
    assert_int_equal(nb_dr_nft_dhcp(t, inet_ok, "tapabc", why, sizeof(why)), NB_DR_PROBLEM);
    free(t);
    t = replaced(inet_ok,
                 "\t\tcounter packets 0 bytes 0 drop comment \"no rule allows it\"\n\t}\n}",
                 "\t}\n}");
    char *t3 = replaced(t,
                        "\t\tip daddr 10.190.0.5 udp sport 67 udp dport 68 accept comment "
                        "\"dhcp\"\n",
                        "");
    assert_int_equal(nb_dr_nft_dhcp(bridge_ok, t3, "tapabc", why, sizeof(why)), NB_DR_PROBLEM);
    assert_string_equal(why, "inet chain ingress_tapabc has no rule that lets the server's "
                             "answers (udp sport 67 udp dport 68) through");
    free(t3);
    free(t);
}

static void clear_network(void)
{
    static const char *const tables[] = {"securitygrouprules", "securitygroupportbindings",
                                         "securitygroups", "ports", "networks"};
    for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++) {
        char del[100];
        snprintf(del, sizeof(del), "DELETE FROM %s", tables[i]);
        sql(del);
    }
}

/* The diagnosis reads the port's groups and rules from the database: no
 * egress rule and no config drive is a PROBLEM naming the group; the rule
 * added, OK. */
static void test_diagnose_metadata(void **state)
{
    (void)state;
    make_server("raw");
    clear_network();
    sql("INSERT INTO networks (id, project_id, name, mtu, created_at, updated_at) VALUES "
        "('net-1', 'p', 'sd-net', 1450, 'now', 'now')");
    sql("INSERT INTO ports (id, project_id, network_id, mac_address, status, device_id, "
        "device_owner, binding_host_id, binding_vif_type, created_at, updated_at) VALUES "
        "('port-1', 'p', 'net-1', 'fa:16:3e:00:00:01', 'ACTIVE', '" INST "', 'compute:nova', "
        "'fake-1', 'ovs', 'now', 'now')");
    sql("INSERT INTO securitygroups (id, project_id, name) VALUES ('sg-1', 'p', 'sd-closed')");
    sql("INSERT INTO securitygroupportbindings (port_id, security_group_id) VALUES ('port-1', "
        "'sg-1')");
    sql("INSERT INTO securitygrouprules (id, project_id, security_group_id, direction, ethertype) "
        "VALUES ('r-in', 'p', 'sg-1', 'ingress', 'IPv4')");
    struct nb_dr_report r;
    int rc;
    char *out = diagnose(&r, &rc);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "[PROBLEM] metadata: no egress rule of group sd-closed (sg-1) "
                                "allows IPv4 TCP to 169.254.169.254:80 and the server has no "
                                "config drive"));
    free(out);
    nb_dr_report_clear(&r);
    sql("INSERT INTO securitygrouprules (id, project_id, security_group_id, direction, ethertype, "
        "protocol, port_range_min, port_range_max, remote_ip_prefix) VALUES ('r-md', 'p', 'sg-1', "
        "'egress', 'IPv4', 'tcp', 80, 80, '169.254.169.254/32')");
    out = diagnose(&r, &rc);
    assert_non_null(strstr(out, "[OK] metadata: egress to 169.254.169.254:80 is allowed by rule "
                                "r-md of group sd-closed (sg-1)"));
    free(out);
    nb_dr_report_clear(&r);
    clear_network();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_net_wiring),
        cmocka_unit_test(test_metadata_rule),
        cmocka_unit_test(test_net_metadata),
        cmocka_unit_test(test_nft_dhcp),
        cmocka_unit_test(test_diagnose_metadata),
        cmocka_unit_test(test_compare_format),
        cmocka_unit_test(test_exit_status),
        cmocka_unit_test(test_diagnose_mismatch),
        cmocka_unit_test(test_diagnose_foreign_backing_not_fixable),
        cmocka_unit_test(test_diagnose_fault_details_and_port_reason),
        cmocka_unit_test(test_diagnose_healthy_and_unknown),
        cmocka_unit_test(test_fix_apply_and_restore),
        cmocka_unit_test(test_fix_exactly_one_row),
        cmocka_unit_test(test_restore_leaves_newer_values),
        cmocka_unit_test(test_admin_token),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
