/* The C NVML's process lists and per-process samples, in each generation's layout. */
#include "cnvml.h"

/* -- processes ---------------------------------------------------------------------- */

/*
 * The driver's two-call protocol: with too small a buffer (NULL on the first call) it
 * says INSUFFICIENT_SIZE and how many entries there are; with room it fills them.
 * `layout` is the size of one entry the generation writes (16, 24 or 32 bytes).
 */
static int in_list(const process_t *p, char kind) {
    return p->kind == kind || (kind != 'M' && p->kind == 'B');
}

static unsigned int count_in_list(nvmlDevice_t device, char kind) {
    unsigned int n = 0;
    for (int i = 0; i < device->process_count; i++) n += in_list(&device->processes[i], kind);
    return n;
}

static nvmlReturn_t running_processes(nvmlDevice_t device, const char *function, char kind,
                                      unsigned int *count, void *infos, size_t layout) {
    _Static_assert(sizeof(nvmlProcessInfo_v1_t) == 16, "v1 entries are 16 bytes");
    _Static_assert(sizeof(nvmlProcessInfo_v2_t) == 24, "v2 entries are 24 bytes");
    _Static_assert(sizeof(cnvml_process_info_535_t) == 32, "535.43-535.86 entries: 32 bytes");
    DEVICE(function);
    if (count == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned int matching = count_in_list(device, kind);
    if (*count < matching || (matching > 0 && infos == NULL)) {
        *count = matching;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    *count = matching;
    unsigned int n = 0;
    for (int i = 0; i < device->process_count; i++) {
        const process_t *p = &device->processes[i];
        if (!in_list(p, kind)) continue;
        char *slot = (char *)infos + n++ * layout;
        if (layout == sizeof(nvmlProcessInfo_v1_t)) {
            nvmlProcessInfo_v1_t *info = (nvmlProcessInfo_v1_t *)slot;
            info->pid = p->pid;
            info->usedGpuMemory = p->used_memory;
        } else if (layout == sizeof(nvmlProcessInfo_v2_t)) {
            nvmlProcessInfo_v2_t *info = (nvmlProcessInfo_v2_t *)slot;
            info->pid = p->pid;
            info->usedGpuMemory = p->used_memory;
            info->gpuInstanceId = 0xFFFFFFFF;
            info->computeInstanceId = 0xFFFFFFFF;
        } else {
            cnvml_process_info_535_t *info = (cnvml_process_info_535_t *)slot;
            info->pid = p->pid;
            info->usedGpuMemory = p->used_memory;
            info->gpuInstanceId = 0xFFFFFFFF;
            info->computeInstanceId = 0xFFFFFFFF;
            info->usedGpuCcProtectedMemory = 0;
        }
    }
    return NVML_SUCCESS;
}

/* `type` is the entry type the header declares; `layout` the entry size actually written. */
#define PROCESS_CALL(name, kind, type, layout)                                              \
    EXPORT nvmlReturn_t name(nvmlDevice_t device, unsigned int *count, type *infos) {       \
        return running_processes(device, #name, kind, count, infos, layout);               \
    }

#define V1 sizeof(nvmlProcessInfo_v1_t)
#define V2 sizeof(nvmlProcessInfo_v2_t)
PROCESS_CALL(nvmlDeviceGetComputeRunningProcesses, 'C', nvmlProcessInfo_v1_t, V1)
PROCESS_CALL(nvmlDeviceGetGraphicsRunningProcesses, 'G', nvmlProcessInfo_v1_t, V1)
#if CNVML_GEN >= 470
/* The MPS client list came with R470, in both versions. */
PROCESS_CALL(nvmlDeviceGetMPSComputeRunningProcesses, 'M', nvmlProcessInfo_v1_t, V1)
PROCESS_CALL(nvmlDeviceGetComputeRunningProcesses_v2, 'C', nvmlProcessInfo_v2_t, V2)
PROCESS_CALL(nvmlDeviceGetGraphicsRunningProcesses_v2, 'G', nvmlProcessInfo_v2_t, V2)
PROCESS_CALL(nvmlDeviceGetMPSComputeRunningProcesses_v2, 'M', nvmlProcessInfo_v2_t, V2)
#endif
#if CNVML_GEN == 535
/* 535.43-535.86: the header of the day declared a 32-byte nvmlProcessInfo_t for _v3. */
#define V3_535 sizeof(cnvml_process_info_535_t)
PROCESS_CALL(nvmlDeviceGetComputeRunningProcesses_v3, 'C', nvmlProcessInfo_t, V3_535)
PROCESS_CALL(nvmlDeviceGetGraphicsRunningProcesses_v3, 'G', nvmlProcessInfo_t, V3_535)
PROCESS_CALL(nvmlDeviceGetMPSComputeRunningProcesses_v3, 'M', nvmlProcessInfo_t, V3_535)
#elif CNVML_GEN >= 550
PROCESS_CALL(nvmlDeviceGetComputeRunningProcesses_v3, 'C', nvmlProcessInfo_t, V2)
PROCESS_CALL(nvmlDeviceGetGraphicsRunningProcesses_v3, 'G', nvmlProcessInfo_t, V2)
PROCESS_CALL(nvmlDeviceGetMPSComputeRunningProcesses_v3, 'M', nvmlProcessInfo_t, V2)
#endif

#if CNVML_GEN >= 535
/* Confidential-computing memory, new in 535. Tools tell 535.43-535.86 (32-byte _v3 entries)
 * from later drivers by this symbol being there without nvmlDeviceGetRunningProcessDetailList.
 * No board here runs in CC mode. */
EXPORT nvmlReturn_t nvmlDeviceGetConfComputeMemSizeInfo(nvmlDevice_t device,
                                                       nvmlConfComputeMemSizeInfo_t *info) {
    DEVICE("nvmlDeviceGetConfComputeMemSizeInfo");
    (void)info;
    return NVML_ERROR_NOT_SUPPORTED;
}
#endif

#if CNVML_GEN >= 550
EXPORT nvmlReturn_t nvmlDeviceGetRunningProcessDetailList(nvmlDevice_t device,
                                                         nvmlProcessDetailList_t *plist) {
    DEVICE("nvmlDeviceGetRunningProcessDetailList");
    if (plist == NULL || plist->version != nvmlProcessDetailList_v1 ||
        plist->mode > NVML_PROCESS_MODE_MPS)
        return NVML_ERROR_INVALID_ARGUMENT;
    char kind = "CGM"[plist->mode];
    unsigned int matching = count_in_list(device, kind);
    if (plist->numProcArrayEntries < matching || (matching > 0 && plist->procArray == NULL)) {
        plist->numProcArrayEntries = matching;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    plist->numProcArrayEntries = matching;
    unsigned int n = 0;
    for (int i = 0; i < device->process_count; i++) {
        const process_t *p = &device->processes[i];
        if (!in_list(p, kind)) continue;
        nvmlProcessDetail_v1_t *entry = &plist->procArray[n++];
        entry->pid = p->pid;
        entry->usedGpuMemory = p->used_memory;
        entry->gpuInstanceId = 0xFFFFFFFF;
        entry->computeInstanceId = 0xFFFFFFFF;
        entry->usedGpuCcProtectedMemory = 0;
    }
    return NVML_SUCCESS;
}
#endif

/*
 * Per-process utilisation: samples only for processes active in the last period (a
 * sample's SM % > 0), newer than lastSeenTimeStamp; NOT_FOUND when there are none. The
 * sample time is the current 100 ms step, so a caller that remembers the last timestamp
 * sees each sample once per step. A GPU with processes of which none has an SM reading in
 * the scenario does not sample processes: NOT_SUPPORTED.
 */
EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                                   nvmlProcessUtilizationSample_t *samples,
                                                   unsigned int *count,
                                                   unsigned long long last_seen_us) {
    DEVICE("nvmlDeviceGetProcessUtilization");
    if (count == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    struct timeval now;
    gettimeofday(&now, NULL);
    unsigned long long now_us = (unsigned long long)now.tv_sec * 1000000 + now.tv_usec;
    unsigned long long stamp = now_us - now_us % 100000;
    unsigned int active = 0, measured = 0;
    for (int i = 0; i < device->process_count; i++) {
        measured += device->processes[i].sm_util >= 0;
        active += device->processes[i].sm_util > 0;
    }
    /* Processes, none of them measured: this board does not sample processes. */
    if (device->process_count > 0 && measured == 0) return NVML_ERROR_NOT_SUPPORTED;
    if (active == 0 || stamp <= last_seen_us) return NVML_ERROR_NOT_FOUND;
    if (samples == NULL || *count < active) {
        *count = active;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    unsigned int n = 0;
    for (int i = 0; i < device->process_count; i++) {
        const process_t *p = &device->processes[i];
        if (p->sm_util <= 0) continue;
        samples[n].pid = p->pid;
        samples[n].timeStamp = stamp;
        samples[n].smUtil = (unsigned int)p->sm_util;
        samples[n].memUtil = (unsigned int)p->mem_util;
        samples[n].encUtil = 0;
        samples[n].decUtil = 0;
        n++;
    }
    *count = n;
    return NVML_SUCCESS;
}
