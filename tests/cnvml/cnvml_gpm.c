/* The C NVML's GPM (GPU Performance Monitoring), clock event reasons and the R550 process
 * utilisation call; see docs/c-nvml.md and docs/activity.md.
 *
 * GPM came with R520: the R460 and R470 generations do not export it (FUNCTION_NOT_FOUND).
 * A GPU supports it when the data file says "gpm 1" (compute capability 9.0 or newer); a
 * metric's value is the data file's "gpm_<metric id>", per GPU or per MIG device (its GPU
 * instance), and a metric without one answers NOT_SUPPORTED in its own nvmlReturn. Only
 * numMetrics entries are written, as a driver must: the struct's length differs between
 * headers and bindings. "system gpm_overrun 1" makes it write one entry more, so the tests
 * can see gputop catch a driver that does. */
#include "cnvml.h"

#if CNVML_GEN >= 535

#define SAMPLE_MAGIC 0x47504D53u

struct nvmlGpmSample_st {
    unsigned int magic;
    int taken;
    unsigned int gpu;
    int gpu_instance_id; /* -1: the whole GPU */
};

static int gpm_supported(nvmlDevice_t gpu) {
    const char *value = gpu_value(gpu, "gpm");
    return value != NULL && value[0] == '1';
}

EXPORT nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t device, nvmlGpmSupport_t *support) {
    DEVICE("nvmlGpmQueryDeviceSupport");
    if (support == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (support->version != NVML_GPM_SUPPORT_VERSION) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    support->isSupportedDevice = (unsigned int)gpm_supported(device);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t *sample) {
    SYSTEM("nvmlGpmSampleAlloc");
    if (sample == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    struct nvmlGpmSample_st *made = calloc(1, sizeof *made);
    if (made == NULL) return NVML_ERROR_MEMORY;
    made->magic = SAMPLE_MAGIC;
    *sample = made;
    return NVML_SUCCESS;
}

static int valid_sample(nvmlGpmSample_t sample) {
    return sample != NULL && sample->magic == SAMPLE_MAGIC;
}

EXPORT nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t sample) {
    SYSTEM("nvmlGpmSampleFree");
    if (!valid_sample(sample)) return NVML_ERROR_INVALID_ARGUMENT;
    sample->magic = 0;
    free(sample);
    return NVML_SUCCESS;
}

static int instance_id(nvmlDevice_t mig) {
    unsigned int id = 0;
    return read_uint(mig, "gpu_instance_id", &id) == NVML_SUCCESS ? (int)id : -1;
}

/* A whole GPU, or (a MIG device handle) the GPU instance it belongs to. */
EXPORT nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t device, nvmlGpmSample_t sample) {
    ANY_DEVICE("nvmlGpmSampleGet");
    if (!valid_sample(sample)) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned int gpu = device->parent < 0 ? device->index : (unsigned int)device->parent;
    struct nvmlDevice_st *owner = device;
    if (device->parent >= 0) {
        nvmlDevice_t parent = NULL;
        if (nvmlDeviceGetHandleByIndex_v2(gpu, &parent) != NVML_SUCCESS)
            return NVML_ERROR_UNKNOWN;
        owner = parent;
    }
    if (!gpm_supported(owner)) return NVML_ERROR_NOT_SUPPORTED;
    sample->gpu = gpu;
    sample->gpu_instance_id = device->parent < 0 ? -1 : instance_id(device);
    sample->taken = 1;
    return NVML_SUCCESS;
}

static struct nvmlDevice_st *instance_device(unsigned int gpu, int gpu_instance_id) {
    for (unsigned int slot = 0; slot < MAX_MIG; slot++) {
        struct nvmlDevice_st *mig = mig_device(gpu, slot);
        if (mig != NULL && instance_id(mig) == gpu_instance_id) return mig;
    }
    return NULL;
}

EXPORT nvmlReturn_t nvmlGpmMigSampleGet(nvmlDevice_t device, unsigned int gpuInstanceId,
                                       nvmlGpmSample_t sample) {
    DEVICE("nvmlGpmMigSampleGet");
    if (!valid_sample(sample)) return NVML_ERROR_INVALID_ARGUMENT;
    if (!gpm_supported(device)) return NVML_ERROR_NOT_SUPPORTED;
    const char *mode = gpu_value(device, "mig_mode");
    if (mode == NULL || mode[0] != '1') return NVML_ERROR_INVALID_ARGUMENT;
    if (instance_device(device->index, (int)gpuInstanceId) == NULL) return NVML_ERROR_NOT_FOUND;
    sample->gpu = device->index;
    sample->gpu_instance_id = (int)gpuInstanceId;
    sample->taken = 1;
    return NVML_SUCCESS;
}

static const char *metric_name(unsigned int id) {
    switch (id) {
    case NVML_GPM_METRIC_GRAPHICS_UTIL: return "GR_ENGINE_ACTIVE";
    case NVML_GPM_METRIC_SM_UTIL: return "SM_ACTIVE";
    case NVML_GPM_METRIC_SM_OCCUPANCY: return "SM_OCCUPANCY";
    case NVML_GPM_METRIC_ANY_TENSOR_UTIL: return "TENSOR_ACTIVE";
    case NVML_GPM_METRIC_DRAM_BW_UTIL: return "DRAM_ACTIVE";
    default: return NULL;
    }
}

EXPORT nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t *request) {
    SYSTEM("nvmlGpmMetricsGet");
    if (request == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (request->version != NVML_GPM_METRICS_GET_VERSION)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (request->numMetrics > NVML_GPM_METRIC_MAX) return NVML_ERROR_INVALID_ARGUMENT;
    nvmlGpmSample_t first = request->sample1, second = request->sample2;
    if (!valid_sample(first) || !valid_sample(second) || !first->taken || !second->taken ||
        first->gpu != second->gpu || first->gpu_instance_id != second->gpu_instance_id)
        return NVML_ERROR_INVALID_ARGUMENT;
    nvmlDevice_t gpu = NULL;
    if (nvmlDeviceGetHandleByIndex_v2(second->gpu, &gpu) != NVML_SUCCESS)
        return NVML_ERROR_GPU_IS_LOST;
    const struct nvmlDevice_st *source = gpu;
    if (second->gpu_instance_id >= 0) {
        source = instance_device(second->gpu, second->gpu_instance_id);
        if (source == NULL) return NVML_ERROR_NOT_FOUND;
    }
    const char *overrun = system_value("gpm_overrun");
    unsigned int count = request->numMetrics;
    if (overrun != NULL && overrun[0] == '1') count++; /* the fault the tests must catch */
    for (unsigned int i = 0; i < count; i++) {
        nvmlGpmMetric_t *metric = &request->metrics[i];
        char key[32];
        snprintf(key, sizeof key, "gpm_%u", metric->metricId);
        const char *value = gpu_value(source, key);
        metric->metricInfo.shortName = (char *)metric_name(metric->metricId);
        metric->metricInfo.longName = NULL;
        metric->metricInfo.unit = NULL;
        if (value == NULL) {
            metric->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
            metric->value = 0.0;
        } else {
            metric->nvmlReturn = NVML_SUCCESS;
            metric->value = strtod(value, NULL);
        }
    }
    return NVML_SUCCESS;
}

/* nvml.h 12.535 renamed the throttle reasons "clock event reasons"; both names answer. */
EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device,
                                                          unsigned long long *reasons) {
    DEVICE("nvmlDeviceGetCurrentClocksEventReasons");
    return read_ull(device, "clock_event_reasons", reasons);
}
#endif

EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device,
                                                             unsigned long long *reasons) {
    DEVICE("nvmlDeviceGetCurrentClocksThrottleReasons");
    return read_ull(device, "clock_event_reasons", reasons);
}

#if CNVML_GEN >= 550
/*
 * The R550 per-process call: every measured process has a sample (SM 0 when idle) newer than
 * lastSeenTimeStamp; a process without an SM reading in the scenario has none, which gputop
 * must read as unknown. No process measured at all: NOT_FOUND.
 */
EXPORT nvmlReturn_t nvmlDeviceGetProcessesUtilizationInfo(nvmlDevice_t device,
                                                         nvmlProcessesUtilizationInfo_t *info) {
    DEVICE("nvmlDeviceGetProcessesUtilizationInfo");
    if (info == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (info->version != nvmlProcessesUtilizationInfo_v1)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    struct timeval now;
    gettimeofday(&now, NULL);
    unsigned long long now_us = (unsigned long long)now.tv_sec * 1000000 + now.tv_usec;
    unsigned long long stamp = now_us - now_us % 100000;
    unsigned int measured = 0;
    for (int i = 0; i < device->process_count; i++) measured += device->processes[i].sm_util >= 0;
    if (measured == 0 || stamp <= info->lastSeenTimeStamp) return NVML_ERROR_NOT_FOUND;
    if (info->procUtilArray == NULL || info->processSamplesCount < measured) {
        info->processSamplesCount = measured;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    unsigned int n = 0;
    for (int i = 0; i < device->process_count; i++) {
        const process_t *p = &device->processes[i];
        if (p->sm_util < 0) continue;
        nvmlProcessUtilizationInfo_v1_t *sample = &info->procUtilArray[n++];
        memset(sample, 0, sizeof *sample);
        sample->pid = p->pid;
        sample->timeStamp = stamp;
        sample->smUtil = (unsigned int)p->sm_util;
        sample->memUtil = (unsigned int)p->mem_util;
    }
    info->processSamplesCount = n;
    return NVML_SUCCESS;
}
#endif
