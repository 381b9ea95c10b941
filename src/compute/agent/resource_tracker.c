/* resource_tracker.c - what a host offers and what it uses, as Nova's
 * ResourceTracker reports it.
 *
 * Registration: the nova-compute service row and the compute node row
 * (through the conductor), then the resource provider in placement (uuid =
 * compute node uuid, name = hypervisor hostname) with inventories
 *   VCPU      total vcpus, reserved [DEFAULT] reserved_host_cpus,
 *             allocation_ratio [DEFAULT] cpu_allocation_ratio (unset:
 *             initial_cpu_allocation_ratio, 4.0 as Nova Zed)
 *   MEMORY_MB total memory_mb, reserved reserved_host_memory_mb (512),
 *             ram_allocation_ratio (unset: initial 1.0)
 *   DISK_GB   total local_gb, reserved reserved_host_disk_mb / 1024
 *             rounded up, disk_allocation_ratio (unset: initial 1.0)
 * and traits: the CPU's features as HW_CPU_X86_* (libvirt names mapped as
 * Nova does) plus the COMPUTE_* capabilities of the driver.
 * Usage: summed from the flavors of the instances on the host, written to
 * the compute node row (hypervisor views read it). */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "compute/agent/internal.h"
#include "compute/agent/svc_client.h"
#include "compute/rpc/conductor_api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RPC_TIMEOUT_MS 30000

/* libvirt CPU feature name -> placement trait(s), as Nova's
 * CPU_TRAITS_MAPPING. */
static const struct {
    const char *feature;
    const char *traits[2];
} cpu_traits[] = {
    {"3dnow", {"HW_CPU_X86_3DNOW"}},
    {"abm", {"HW_CPU_X86_ABM"}},
    {"aes", {"HW_CPU_X86_AESNI"}},
    {"avx", {"HW_CPU_X86_AVX"}},
    {"avx2", {"HW_CPU_X86_AVX2"}},
    {"avx512bw", {"HW_CPU_X86_AVX512BW"}},
    {"avx512cd", {"HW_CPU_X86_AVX512CD"}},
    {"avx512dq", {"HW_CPU_X86_AVX512DQ"}},
    {"avx512er", {"HW_CPU_X86_AVX512ER"}},
    {"avx512f", {"HW_CPU_X86_AVX512F"}},
    {"avx512pf", {"HW_CPU_X86_AVX512PF"}},
    {"avx512vl", {"HW_CPU_X86_AVX512VL"}},
    {"avx512vnni", {"HW_CPU_X86_AVX512VNNI"}},
    {"avx512vbmi", {"HW_CPU_X86_AVX512VBMI"}},
    {"avx512ifma", {"HW_CPU_X86_AVX512IFMA"}},
    {"avx512vbmi2", {"HW_CPU_X86_AVX512VBMI2"}},
    {"avx512bitalg", {"HW_CPU_X86_AVX512BITALG"}},
    {"vaes", {"HW_CPU_X86_AVX512VAES"}},
    {"gfni", {"HW_CPU_X86_AVX512GFNI"}},
    {"vpclmulqdq", {"HW_CPU_X86_AVX512VPCLMULQDQ"}},
    {"avx512-vpopcntdq", {"HW_CPU_X86_AVX512VPOPCNTDQ"}},
    {"bmi1", {"HW_CPU_X86_BMI"}},
    {"bmi2", {"HW_CPU_X86_BMI2"}},
    {"pclmuldq", {"HW_CPU_X86_CLMUL"}},
    {"f16c", {"HW_CPU_X86_F16C"}},
    {"fma", {"HW_CPU_X86_FMA3"}},
    {"fma4", {"HW_CPU_X86_FMA4"}},
    {"mmx", {"HW_CPU_X86_MMX"}},
    {"mpx", {"HW_CPU_X86_MPX"}},
    {"sha-ni", {"HW_CPU_X86_SHA"}},
    {"sse", {"HW_CPU_X86_SSE"}},
    {"sse2", {"HW_CPU_X86_SSE2"}},
    {"sse3", {"HW_CPU_X86_SSE3"}},
    {"sse4.1", {"HW_CPU_X86_SSE41"}},
    {"sse4.2", {"HW_CPU_X86_SSE42"}},
    {"sse4a", {"HW_CPU_X86_SSE4A"}},
    {"ssse3", {"HW_CPU_X86_SSSE3"}},
    {"svm", {"HW_CPU_X86_SVM", "HW_CPU_X86_AMD_SVM"}},
    {"tbm", {"HW_CPU_X86_TBM"}},
    {"vmx", {"HW_CPU_X86_VMX", "HW_CPU_X86_INTEL_VMX"}},
    {"xop", {"HW_CPU_X86_XOP"}},
};

json_t *nb_rt_traits(json_t *cpu_features)
{
    json_t *traits = json_array();
    size_t i;
    json_t *f;
    json_array_foreach (cpu_features, i, f) {
        const char *name = json_string_value(f);
        for (size_t k = 0; name && k < sizeof(cpu_traits) / sizeof(cpu_traits[0]); k++) {
            if (strcmp(cpu_traits[k].feature, name))
                continue;
            for (int t = 0; t < 2 && cpu_traits[k].traits[t]; t++)
                json_array_append_new(traits, json_string(cpu_traits[k].traits[t]));
        }
    }
    /* What every nubo driver supports. */
    static const char *const caps[] = {"COMPUTE_NODE", "COMPUTE_IMAGE_TYPE_RAW",
                                       "COMPUTE_IMAGE_TYPE_QCOW2", NULL};
    for (int k = 0; caps[k]; k++)
        json_array_append_new(traits, json_string(caps[k]));
    return traits;
}

/* An allocation ratio: the option if set (> 0), else the initial_* one. */
static double ratio(const char *name, double initial)
{
    char key[64], ikey[80];
    snprintf(key, sizeof(key), "%s_allocation_ratio", name);
    snprintf(ikey, sizeof(ikey), "initial_%s_allocation_ratio", name);
    double r = nb_conf_double("DEFAULT", key, 0.0);
    return r > 0 ? r : nb_conf_double("DEFAULT", ikey, initial);
}

static json_t *inventories(const struct nb_host_info *info)
{
    long reserved_disk_mb = nb_conf_int("DEFAULT", "reserved_host_disk_mb", 0);
    return json_pack("{s:{s:i, s:i, s:i, s:i, s:i, s:f}, s:{s:I, s:I, s:i, s:I, s:i, s:f},"
                     " s:{s:I, s:I, s:i, s:I, s:i, s:f}}",
                     "VCPU", "total", info->vcpus, "reserved",
                     (int)nb_conf_int("DEFAULT", "reserved_host_cpus", 0), "min_unit", 1,
                     "max_unit", info->vcpus, "step_size", 1, "allocation_ratio", ratio("cpu", 4.0),
                     "MEMORY_MB", "total", (json_int_t)info->memory_mb, "reserved",
                     (json_int_t)nb_conf_int("DEFAULT", "reserved_host_memory_mb", 512), "min_unit",
                     1, "max_unit", (json_int_t)info->memory_mb, "step_size", 1, "allocation_ratio",
                     ratio("ram", 1.0), "DISK_GB", "total", (json_int_t)info->local_gb, "reserved",
                     (json_int_t)((reserved_disk_mb + 1023) / 1024), "min_unit", 1, "max_unit",
                     (json_int_t)info->local_gb, "step_size", 1, "allocation_ratio",
                     ratio("disk", 1.0));
}

/* The compute node record for the conductor, with usage (new ref). */
static json_t *node_record(struct agent *a, const struct nb_host_info *info, json_t *instances)
{
    long long vcpus = 0, mem = nb_conf_int("DEFAULT", "reserved_host_memory_mb", 512);
    long long disk_mb = nb_conf_int("DEFAULT", "reserved_host_disk_mb", 0), workload = 0;
    size_t i;
    json_t *r;
    json_array_foreach (instances, i, r) {
        json_t *f = json_object_get(r, "flavor");
        if (json_object_get(f, "cur"))
            f = json_object_get(f, "cur");
        if (json_object_get(f, "nova_object.data"))
            f = json_object_get(f, "nova_object.data");
        vcpus += nb_json_int(f, "vcpus", 0);
        mem += nb_json_int(f, "memory_mb", 0);
        /* a volume-backed root is no local disk (Nova's _get_usage_dict;
         * placement claims no DISK_GB for it either) */
        long long root_gb = nb_json_int(r, "is_bfv", 0) ? 0 : nb_json_int(f, "root_gb", 0);
        disk_mb += (root_gb + nb_json_int(f, "ephemeral_gb", 0)) * 1024 + nb_json_int(f, "swap", 0);
        if (nb_json_str(r, "task_state"))
            workload++;
    }
    json_t *cpu_info =
        json_pack("{s:s, s:s, s:s, s:o, s:{s:i, s:i, s:i}}", "arch", info->cpu_arch, "model",
                  info->cpu_model, "vendor", info->cpu_vendor, "features",
                  info->cpu_features ? json_incref(info->cpu_features) : json_array(), "topology",
                  "sockets", 1, "cores", info->vcpus, "threads", 1);
    /* what the ImagePropertiesFilter matches: [arch, hypervisor type, vm mode] */
    char hv[32];
    size_t k = 0;
    for (; info->hypervisor_type[k] && k + 1 < sizeof(hv); k++)
        hv[k] = (char)(info->hypervisor_type[k] >= 'A' && info->hypervisor_type[k] <= 'Z'
                           ? info->hypervisor_type[k] + 32
                           : info->hypervisor_type[k]);
    hv[k] = '\0';
    json_t *supported = json_pack("[[s, s, s]]", info->cpu_arch, hv, "hvm");
    if (!strcmp(hv, "qemu"))
        json_array_append_new(supported, json_pack("[s, s, s]", info->cpu_arch, "kvm", "hvm"));
    return json_pack(
        "{s:s, s:s, s:s, s:I, s:o, s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:s, s:f, s:f, s:f, "
        "s:o}",
        "host", a->host, "hypervisor_hostname", info->hypervisor_hostname, "hypervisor_type",
        info->hypervisor_type, "hypervisor_version", (json_int_t)info->hypervisor_version,
        "cpu_info", cpu_info, "vcpus", info->vcpus, "memory_mb", (json_int_t)info->memory_mb,
        "local_gb", (json_int_t)info->local_gb, "vcpus_used", (json_int_t)vcpus, "memory_mb_used",
        (json_int_t)mem, "local_gb_used", (json_int_t)((disk_mb + 1023) / 1024), "running_vms",
        (json_int_t)json_array_size(instances), "current_workload", (json_int_t)workload, "host_ip",
        info->host_ip, "cpu_allocation_ratio", ratio("cpu", 4.0), "ram_allocation_ratio",
        ratio("ram", 1.0), "disk_allocation_ratio", ratio("disk", 1.0), "supported_instances",
        supported);
}

/* The driver's view of the host; -1 (logged) on failure. */
static int host_info(struct agent *a, struct nb_ctx *ctx, struct nb_host_info *info)
{
    if (a->drv->ops->host_info(a->drv, ctx, a->host, info) < 0) {
        NB_ERROR(LOG_RT, ctx, NULL, "cannot read the capacity of host %s: %s", a->host,
                 nb_ctx_message(ctx));
        return -1;
    }
    return 0;
}

static json_t *instances_on_host(struct agent *a, struct nb_ctx *ctx)
{
    return nb_conductor_instances_on_host(ctx, a->host, RPC_TIMEOUT_MS);
}

/* Gives placement the provider, its inventory (when changed) and traits. */
static int report_to_placement(struct agent *a, struct nb_ctx *ctx, const struct nb_host_info *info)
{
    _cleanup_json_ json_t *inv = inventories(info);
    _cleanup_free_ char *text = nb_json_dump(inv);
    if (a->inventory_sent && !strcmp(a->inventory_sent, text))
        return 0;
    _cleanup_json_ json_t *traits = nb_rt_traits(info->cpu_features);
    if (nb_svc_placement_report(ctx, a->node_uuid, a->node, inv, traits) < 0) {
        NB_ERROR(LOG_RT, ctx, NULL, "cannot report host %s (provider %s) to placement: %s", a->host,
                 a->node_uuid, nb_ctx_message(ctx));
        return -1;
    }
    free(a->inventory_sent);
    a->inventory_sent = NB_STEAL(&text);
    NB_INFO(LOG_RT, ctx, NULL, "Inventory of provider %s (%s) reported: %s", a->node, a->node_uuid,
            a->inventory_sent);
    return 0;
}

int nb_rt_register(struct agent *a, struct nb_ctx *ctx)
{
    struct nb_host_info info;
    memset(&info, 0, sizeof(info));
    int rc = -1;
    _cleanup_json_ json_t *svc = NULL, *instances = NULL, *node = NULL;
    _cleanup_json_ json_t *empty = json_array();
    if (host_info(a, ctx, &info) < 0)
        goto out;
    svc = nb_conductor_service_update(ctx, a->host, "nova-compute", "compute", RPC_TIMEOUT_MS);
    if (!svc || nb_json_str(svc, "error")) {
        NB_WARN(LOG_RT, ctx, NULL, "cannot register the service of %s yet: %s", a->host,
                svc ? nb_json_str(svc, "error") : nb_ctx_message(ctx));
        goto out;
    }
    instances = instances_on_host(a, ctx);
    node = nb_conductor_compute_node_update(
        ctx, node_record(a, &info, instances ? instances : empty), RPC_TIMEOUT_MS);
    if (!nb_json_str(node, "uuid")) {
        NB_WARN(LOG_RT, ctx, NULL, "cannot record the compute node of %s yet: %s", a->host,
                node ? nb_json_str(node, "error") : nb_ctx_message(ctx));
        goto out;
    }
    nb_strlcpy(a->node_uuid, nb_json_str(node, "uuid"), sizeof(a->node_uuid));
    nb_strlcpy(a->node, info.hypervisor_hostname, sizeof(a->node));
    free(a->inventory_sent);
    a->inventory_sent = NULL;
    if (report_to_placement(a, ctx, &info) < 0)
        goto out;
    a->registered = true;
    NB_INFO(LOG_RT, ctx, NULL,
            "Compute host %s registered: node %s (%s), %d vCPU, %ld MB RAM, %ld GB disk, CPU %s",
            a->host, a->node, a->node_uuid, info.vcpus, info.memory_mb, info.local_gb,
            info.cpu_model);
    rc = 0;
out:
    json_decref(info.cpu_features);
    if (rc < 0)
        nb_ctx_clear_error(ctx); /* logged; the agent registers again later */
    return rc;
}

void nb_rt_update_usage(struct agent *a, struct nb_ctx *ctx)
{
    struct nb_host_info info;
    memset(&info, 0, sizeof(info));
    _cleanup_json_ json_t *instances = NULL;
    if (host_info(a, ctx, &info) < 0 || !(instances = instances_on_host(a, ctx)))
        goto out;
    nb_conductor_compute_node_report(ctx, node_record(a, &info, instances));
    report_to_placement(a, ctx, &info);
out:
    json_decref(info.cpu_features);
    nb_ctx_clear_error(ctx); /* periodic: the next update tries again */
}
