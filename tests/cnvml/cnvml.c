/*
 * A C NVML for tests: libnvidia-ml.so.1 as one driver generation would answer.
 *
 * Compiled at test time against NVIDIA's own nvml.h (see docs/c-nvml.md), loaded by the
 * real nvidia-ml-py, so gputop's real ctypes path runs. What it reports comes from a
 * line-based data file named by GPUTOP_CNVML_DATA, written by tests/cnvml/data.py from a
 * gputop scenario; it is read once, at the first nvmlInit.
 *
 * The generation is chosen at compile time with CNVML_GEN (460, 470, 535 or 550). A
 * function the generation lacks is not compiled at all, so the binding's symbol lookup
 * fails exactly as on that driver (FUNCTION_NOT_FOUND). Everything else is built with
 * -fvisibility=hidden: only functions marked EXPORT are visible.
 *
 *   460  v1 process calls only (16-byte nvmlProcessInfo_v1_t), no MPS client list, no
 *        nvmlDeviceGetMemoryInfo_v2
 *   470  adds the _v2 process calls (24-byte entries) and the MPS client list (v1, _v2);
 *        still no _v3, no memory v2 (R470-R505)
 *   535  adds _v3 process calls writing the 32-byte entries of 535.43-535.86 (with
 *        usedGpuCcProtectedMemory), and nvmlDeviceGetMemoryInfo_v2
 *        and nvmlDeviceGetConfComputeMemSizeInfo but no nvmlDeviceGetRunningProcessDetailList
 *        (how nvitop and others recognise these drivers)
 *   550  _v3 with 24-byte entries, nvmlDeviceGetRunningProcessDetailList,
 *        nvmlDeviceGetTemperatureV
 */
#define NVML_NO_UNVERSIONED_FUNC_DEFS
#include <nvml.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#ifndef CNVML_GEN
#error "define CNVML_GEN (460, 470, 535 or 550)"
#endif

#define EXPORT __attribute__((visibility("default")))

#define MAX_GPUS 16
#define MAX_KEYS 96
#define MAX_PROCESSES 64
#define KEY_LEN 96
#define VALUE_LEN 256

/* The process entry 535.43-535.86 drivers write from the _v3 calls: 32 bytes. */
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
    unsigned long long usedGpuCcProtectedMemory;
} cnvml_process_info_535_t;

typedef struct {
    char kind; /* 'C' compute, 'G' graphics, 'B' both, 'M' MPS client */
    unsigned int pid;
    unsigned long long used_memory; /* NVML_VALUE_NOT_AVAILABLE when unknown */
    int sm_util;                    /* < 0: no sample (idle in the last period) */
    int mem_util;
} process_t;

typedef struct {
    char key[KEY_LEN];
    char value[VALUE_LEN];
} entry_t;

struct nvmlDevice_st {
    unsigned int index;
    entry_t entries[MAX_KEYS];
    int entry_count;
    process_t processes[MAX_PROCESSES];
    int process_count;
};

static struct nvmlDevice_st gpus[MAX_GPUS];
static unsigned int gpu_count;
static entry_t system_entries[MAX_KEYS];
static int system_count;
static int init_count;
static int loaded;

/* -- the data file ------------------------------------------------------------------- */

static void put(entry_t *entries, int *count, const char *key, const char *value) {
    if (*count >= MAX_KEYS) return;
    snprintf(entries[*count].key, KEY_LEN, "%s", key);
    snprintf(entries[*count].value, VALUE_LEN, "%s", value);
    (*count)++;
}

static const char *lookup(const entry_t *entries, int count, const char *key) {
    for (int i = 0; i < count; i++)
        if (strcmp(entries[i].key, key) == 0) return entries[i].value;
    return NULL;
}

/*
 * One record a line, fields separated by one space, the last field running to the end:
 *   system KEY VALUE...
 *   gpu INDEX KEY VALUE...
 *   process INDEX KIND PID USED_BYTES|- SM|- MEM|-
 * KEY "error:FUNCTION" with VALUE CODE makes FUNCTION return CODE (system or per GPU).
 */
static int load(const char *path) {
    FILE *file = fopen(path, "r");
    if (file == NULL) {
        fprintf(stderr, "cnvml: cannot open %s\n", path);
        return 0;
    }
    char line[512];
    while (fgets(line, sizeof line, file) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        if (line[0] == '#' || line[0] == '\0') continue;
        char *rest = NULL;
        if (strncmp(line, "system ", 7) == 0) {
            char *key = line + 7;
            char *value = strchr(key, ' ');
            if (value == NULL) continue;
            *value++ = '\0';
            put(system_entries, &system_count, key, value);
        } else if (strncmp(line, "gpu ", 4) == 0) {
            unsigned long index = strtoul(line + 4, &rest, 10);
            if (index >= MAX_GPUS || rest == NULL || *rest != ' ') continue;
            char *key = rest + 1;
            char *value = strchr(key, ' ');
            if (value == NULL) continue;
            *value++ = '\0';
            struct nvmlDevice_st *gpu = &gpus[index];
            put(gpu->entries, &gpu->entry_count, key, value);
            if (index + 1 > gpu_count) gpu_count = (unsigned int)index + 1;
        } else if (strncmp(line, "process ", 8) == 0) {
            unsigned int index, pid;
            char kind, used[32], sm[16], mem[16];
            if (sscanf(line + 8, "%u %c %u %31s %15s %15s", &index, &kind, &pid, used, sm,
                       mem) != 6 || index >= MAX_GPUS)
                continue;
            struct nvmlDevice_st *gpu = &gpus[index];
            if (gpu->process_count >= MAX_PROCESSES) continue;
            process_t *p = &gpu->processes[gpu->process_count++];
            p->kind = kind;
            p->pid = pid;
            p->used_memory = strcmp(used, "-") == 0 ? (unsigned long long)NVML_VALUE_NOT_AVAILABLE
                                                     : strtoull(used, NULL, 10);
            p->sm_util = strcmp(sm, "-") == 0 ? -1 : atoi(sm);
            p->mem_util = strcmp(mem, "-") == 0 ? 0 : atoi(mem);
        }
    }
    fclose(file);
    for (unsigned int i = 0; i < MAX_GPUS; i++) gpus[i].index = i;
    return 1;
}

static const char *gpu_value(const struct nvmlDevice_st *gpu, const char *key) {
    return lookup(gpu->entries, gpu->entry_count, key);
}

static nvmlReturn_t error_for(const entry_t *entries, int count, const char *function) {
    char key[KEY_LEN];
    snprintf(key, sizeof key, "error:%s", function);
    const char *code = lookup(entries, count, key);
    return code == NULL ? NVML_SUCCESS : (nvmlReturn_t)atoi(code);
}

/* -- the checks a driver makes before answering ------------------------------------- */

static nvmlReturn_t system_check(const char *function) {
    if (init_count == 0) return NVML_ERROR_UNINITIALIZED;
    return error_for(system_entries, system_count, function);
}

static nvmlReturn_t device_check(nvmlDevice_t device, const char *function) {
    if (init_count == 0) return NVML_ERROR_UNINITIALIZED;
    if (device == NULL || device < gpus || device >= gpus + gpu_count)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (gpu_value(device, "lost") != NULL) return NVML_ERROR_GPU_IS_LOST;
    return error_for(device->entries, device->entry_count, function);
}

#define SYSTEM(function)                                      \
    do {                                                      \
        nvmlReturn_t check_ = system_check(function);         \
        if (check_ != NVML_SUCCESS) return check_;            \
    } while (0)

#define DEVICE(function)                                      \
    do {                                                      \
        nvmlReturn_t check_ = device_check(device, function); \
        if (check_ != NVML_SUCCESS) return check_;            \
    } while (0)

static nvmlReturn_t copy_text(const char *value, char *out, unsigned int length) {
    if (value == NULL) return NVML_ERROR_NOT_SUPPORTED;
    if (out == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(value) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(out, value, strlen(value) + 1);
    return NVML_SUCCESS;
}

static nvmlReturn_t read_ull(nvmlDevice_t device, const char *key, unsigned long long *out) {
    const char *value = gpu_value(device, key);
    if (value == NULL) return NVML_ERROR_NOT_SUPPORTED;
    if (out == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *out = strtoull(value, NULL, 10);
    return NVML_SUCCESS;
}

static nvmlReturn_t read_uint(nvmlDevice_t device, const char *key, unsigned int *out) {
    unsigned long long value = 0;
    nvmlReturn_t result = read_ull(device, key, &value);
    if (result == NVML_SUCCESS) *out = (unsigned int)value;
    return result;
}

/* -- init, shutdown, errors, system ------------------------------------------------- */

static nvmlReturn_t init(void) {
    if (!loaded) {
        const char *path = getenv("GPUTOP_CNVML_DATA");
        if (path == NULL || !load(path)) return NVML_ERROR_DRIVER_NOT_LOADED;
        loaded = 1;
    }
    nvmlReturn_t refused = error_for(system_entries, system_count, "nvmlInit");
    if (refused != NVML_SUCCESS) return refused;
    init_count++;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlInit(void) { return init(); }
EXPORT nvmlReturn_t nvmlInit_v2(void) { return init(); }
EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    return init();
}

EXPORT nvmlReturn_t nvmlShutdown(void) {
    if (init_count == 0) return NVML_ERROR_UNINITIALIZED;
    init_count--;
    return NVML_SUCCESS;
}

EXPORT const char *nvmlErrorString(nvmlReturn_t result) {
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_LIBRARY_NOT_FOUND: return "Library Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
    default: return "Unknown Error";
    }
}

EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    SYSTEM("nvmlSystemGetDriverVersion");
    return copy_text(lookup(system_entries, system_count, "driver_version"), version, length);
}

EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length) {
    SYSTEM("nvmlSystemGetNVMLVersion");
    return copy_text(lookup(system_entries, system_count, "nvml_version"), version, length);
}

static nvmlReturn_t cuda_version(const char *function, int *out) {
    SYSTEM(function);
    const char *value = lookup(system_entries, system_count, "cuda_driver_version");
    if (value == NULL) return NVML_ERROR_NOT_SUPPORTED;
    if (out == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *out = atoi(value);
    return NVML_SUCCESS;
}

/* v1 answers from the driver itself; v2 asks libcuda, so a data file can make it fail
 * with LIBRARY_NOT_FOUND (a container without libcuda) while v1 still answers. */
EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *out) {
    return cuda_version("nvmlSystemGetCudaDriverVersion", out);
}
EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *out) {
    return cuda_version("nvmlSystemGetCudaDriverVersion_v2", out);
}

/* -- devices ------------------------------------------------------------------------ */

static nvmlReturn_t device_count(unsigned int *count) {
    SYSTEM("nvmlDeviceGetCount");
    if (count == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *count = gpu_count;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int *count) { return device_count(count); }
EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) { return device_count(count); }

/* A GPU the caller may not open (device cgroups) is counted but its handle refused. */
static nvmlReturn_t handle_by_index(unsigned int index, nvmlDevice_t *device) {
    SYSTEM("nvmlDeviceGetHandleByIndex");
    if (index >= gpu_count || device == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t refused =
        error_for(gpus[index].entries, gpus[index].entry_count, "nvmlDeviceGetHandleByIndex");
    if (refused != NVML_SUCCESS) return refused;
    *device = &gpus[index];
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device) {
    return handle_by_index(index, device);
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    return handle_by_index(index, device);
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device) {
    SYSTEM("nvmlDeviceGetHandleByUUID");
    if (uuid == NULL || device == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned int i = 0; i < gpu_count; i++) {
        const char *value = gpu_value(&gpus[i], "uuid");
        if (value != NULL && strcmp(value, uuid) == 0) return handle_by_index(i, device);
    }
    return NVML_ERROR_NOT_FOUND;
}

EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index) {
    DEVICE("nvmlDeviceGetIndex");
    if (index == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *index = device->index;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
    DEVICE("nvmlDeviceGetName");
    return copy_text(gpu_value(device, "name"), name, length);
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
    DEVICE("nvmlDeviceGetUUID");
    return copy_text(gpu_value(device, "uuid"), uuid, length);
}

EXPORT nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char *serial, unsigned int length) {
    DEVICE("nvmlDeviceGetSerial");
    return copy_text(gpu_value(device, "serial"), serial, length);
}

static nvmlReturn_t pci_info(nvmlDevice_t device, const char *function, nvmlPciInfo_t *pci) {
    DEVICE(function);
    const char *bus_id = gpu_value(device, "pci_bus_id");
    if (bus_id == NULL) return NVML_ERROR_NOT_SUPPORTED;
    if (pci == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    memset(pci, 0, sizeof *pci);
    unsigned int domain = 0, bus = 0, dev = 0, fn = 0;
    sscanf(bus_id, "%x:%x:%x.%x", &domain, &bus, &dev, &fn);
    snprintf(pci->busId, sizeof pci->busId, "%s", bus_id);
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.%X", domain & 0xFFFF, bus,
             dev, fn);
    pci->domain = domain;
    pci->bus = bus;
    pci->device = dev;
    pci->pciDeviceId = 0x233010DE;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t *pci) {
    return pci_info(device, "nvmlDeviceGetPciInfo", pci);
}
EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t *pci) {
    return pci_info(device, "nvmlDeviceGetPciInfo_v2", pci);
}
EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci) {
    return pci_info(device, "nvmlDeviceGetPciInfo_v3", pci);
}

/* Memory: the data say total, reserved and (v2) used; v1 "used" includes reserved. */
static nvmlReturn_t memory(nvmlDevice_t device, unsigned long long *total,
                           unsigned long long *reserved, unsigned long long *used) {
    nvmlReturn_t result = read_ull(device, "memory_total", total);
    if (result != NVML_SUCCESS) return result;
    result = read_ull(device, "memory_used", used);
    if (result != NVML_SUCCESS) return result;
    if (read_ull(device, "memory_reserved", reserved) != NVML_SUCCESS) *reserved = 0;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *out) {
    DEVICE("nvmlDeviceGetMemoryInfo");
    unsigned long long total, reserved, used;
    nvmlReturn_t result = memory(device, &total, &reserved, &used);
    if (result != NVML_SUCCESS) return result;
    if (out == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    out->total = total;
    out->used = used + reserved;
    out->free = total - used - reserved;
    return NVML_SUCCESS;
}

#if CNVML_GEN >= 535
EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *out) {
    DEVICE("nvmlDeviceGetMemoryInfo_v2");
    if (out == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (out->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    unsigned long long total, reserved, used;
    nvmlReturn_t result = memory(device, &total, &reserved, &used);
    if (result != NVML_SUCCESS) return result;
    out->total = total;
    out->reserved = reserved;
    out->used = used;
    out->free = total - used - reserved;
    return NVML_SUCCESS;
}
#endif

EXPORT nvmlReturn_t nvmlDeviceGetBAR1MemoryInfo(nvmlDevice_t device, nvmlBAR1Memory_t *out) {
    DEVICE("nvmlDeviceGetBAR1MemoryInfo");
    unsigned long long total = 0, used = 0;
    nvmlReturn_t result = read_ull(device, "bar1_total", &total);
    if (result == NVML_SUCCESS) result = read_ull(device, "bar1_used", &used);
    if (result != NVML_SUCCESS) return result;
    if (out == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    out->bar1Total = total;
    out->bar1Used = used;
    out->bar1Free = total - used;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *out) {
    DEVICE("nvmlDeviceGetUtilizationRates");
    unsigned int gpu = 0, mem = 0;
    nvmlReturn_t result = read_uint(device, "utilization_gpu", &gpu);
    if (result == NVML_SUCCESS) result = read_uint(device, "utilization_memory", &mem);
    if (result != NVML_SUCCESS) return result;
    if (out == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    out->gpu = gpu;
    out->memory = mem;
    return NVML_SUCCESS;
}

static nvmlReturn_t codec(nvmlDevice_t device, const char *function, const char *key,
                         unsigned int *utilization, unsigned int *period_us) {
    DEVICE(function);
    if (utilization == NULL || period_us == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t result = read_uint(device, key, utilization);
    if (result == NVML_SUCCESS) *period_us = 167000;
    return result;
}
EXPORT nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t device, unsigned int *u,
                                                   unsigned int *p) {
    return codec(device, "nvmlDeviceGetEncoderUtilization", "encoder_util", u, p);
}
EXPORT nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t device, unsigned int *u,
                                                   unsigned int *p) {
    return codec(device, "nvmlDeviceGetDecoderUtilization", "decoder_util", u, p);
}

EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device,
                                            nvmlTemperatureSensors_t sensor, unsigned int *temp) {
    DEVICE("nvmlDeviceGetTemperature");
    if (sensor != NVML_TEMPERATURE_GPU || temp == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    return read_uint(device, "temperature_c", temp);
}

#if CNVML_GEN >= 550
EXPORT nvmlReturn_t nvmlDeviceGetTemperatureV(nvmlDevice_t device, nvmlTemperature_t *out) {
    DEVICE("nvmlDeviceGetTemperatureV");
    if (out == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (out->version != nvmlTemperature_v1) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (out->sensorType != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned int temp = 0;
    nvmlReturn_t result = read_uint(device, "temperature_c", &temp);
    if (result == NVML_SUCCESS) out->temperature = (int)temp;
    return result;
}
#endif

EXPORT nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t device, unsigned int *speed) {
    DEVICE("nvmlDeviceGetFanSpeed");
    return read_uint(device, "fan_percent", speed);
}

EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power_mw) {
    DEVICE("nvmlDeviceGetPowerUsage");
    return read_uint(device, "power_mw", power_mw);
}

EXPORT nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *limit_mw) {
    DEVICE("nvmlDeviceGetEnforcedPowerLimit");
    return read_uint(device, "power_limit_mw", limit_mw);
}

EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device,
                                                     unsigned int *limit_mw) {
    DEVICE("nvmlDeviceGetPowerManagementLimit");
    return read_uint(device, "power_limit_mw", limit_mw);
}

static const char *const clock_names[] = {"graphics", "sm", "mem", "video"};

static nvmlReturn_t clock(nvmlDevice_t device, const char *function, const char *prefix,
                          nvmlClockType_t type, unsigned int *mhz) {
    DEVICE(function);
    if ((unsigned int)type >= 4 || mhz == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    char key[KEY_LEN];
    snprintf(key, sizeof key, "%s_%s", prefix, clock_names[type]);
    return read_uint(device, key, mhz);
}
EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                          unsigned int *mhz) {
    return clock(device, "nvmlDeviceGetClockInfo", "clock", type, mhz);
}
EXPORT nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                             unsigned int *mhz) {
    return clock(device, "nvmlDeviceGetMaxClockInfo", "max_clock", type, mhz);
}

EXPORT nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t device, nvmlPstates_t *state) {
    DEVICE("nvmlDeviceGetPerformanceState");
    unsigned int value = 0;
    nvmlReturn_t result = read_uint(device, "performance_state", &value);
    if (result == NVML_SUCCESS) *state = (nvmlPstates_t)value;
    return result;
}

static nvmlReturn_t enable_state(nvmlDevice_t device, const char *function, const char *key,
                                 nvmlEnableState_t *out) {
    DEVICE(function);
    if (out == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned int value = 0;
    nvmlReturn_t result = read_uint(device, key, &value);
    if (result == NVML_SUCCESS) *out = value ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    return result;
}
EXPORT nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device, nvmlEnableState_t *mode) {
    return enable_state(device, "nvmlDeviceGetPersistenceMode", "persistence_mode", mode);
}
EXPORT nvmlReturn_t nvmlDeviceGetDisplayActive(nvmlDevice_t device, nvmlEnableState_t *active) {
    return enable_state(device, "nvmlDeviceGetDisplayActive", "display_active", active);
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t device, nvmlComputeMode_t *mode) {
    DEVICE("nvmlDeviceGetComputeMode");
    unsigned int value = 0;
    nvmlReturn_t result = read_uint(device, "compute_mode", &value);
    if (result == NVML_SUCCESS) *mode = (nvmlComputeMode_t)value;
    return result;
}

EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major,
                                                      int *minor) {
    DEVICE("nvmlDeviceGetCudaComputeCapability");
    const char *value = gpu_value(device, "compute_capability");
    if (value == NULL) return NVML_ERROR_NOT_SUPPORTED;
    if (major == NULL || minor == NULL || sscanf(value, "%d %d", major, minor) != 2)
        return NVML_ERROR_INVALID_ARGUMENT;
    return NVML_SUCCESS;
}

/* Whole-GPU attributes: the driver answers only for MIG devices, which this library has
 * none of (docs/c-nvml.md). */
EXPORT nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t device,
                                              nvmlDeviceAttributes_t *attributes) {
    DEVICE("nvmlDeviceGetAttributes_v2");
    (void)attributes;
    return NVML_ERROR_NOT_SUPPORTED;
}

EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device,
                                               nvmlMemoryErrorType_t error_type,
                                               nvmlEccCounterType_t counter,
                                               unsigned long long *count) {
    DEVICE("nvmlDeviceGetTotalEccErrors");
    if (error_type != NVML_MEMORY_ERROR_TYPE_UNCORRECTED || counter != NVML_VOLATILE_ECC)
        return NVML_ERROR_NOT_SUPPORTED;
    return read_ull(device, "ecc_uncorrected_volatile", count);
}

EXPORT nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t device,
                                               nvmlPcieUtilCounter_t counter,
                                               unsigned int *value) {
    DEVICE("nvmlDeviceGetPcieThroughput");
    if (counter == NVML_PCIE_UTIL_TX_BYTES) return read_uint(device, "pcie_tx_kbps", value);
    if (counter == NVML_PCIE_UTIL_RX_BYTES) return read_uint(device, "pcie_rx_kbps", value);
    return NVML_ERROR_INVALID_ARGUMENT;
}

/* Links past the board's count are an invalid argument, as on a driver. */
EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                            nvmlEnableState_t *active) {
    DEVICE("nvmlDeviceGetNvLinkState");
    unsigned int count = 0;
    nvmlReturn_t result = read_uint(device, "nvlink_count", &count);
    if (result != NVML_SUCCESS) return result;
    if (link >= count || active == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *active = NVML_FEATURE_ENABLED;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int count,
                                            nvmlFieldValue_t *values) {
    DEVICE("nvmlDeviceGetFieldValues");
    if (count < 0 || (count > 0 && values == NULL)) return NVML_ERROR_INVALID_ARGUMENT;
    struct timeval now;
    gettimeofday(&now, NULL);
    for (int i = 0; i < count; i++) {
        nvmlFieldValue_t *field = &values[i];
        field->timestamp = (long long)now.tv_sec * 1000000 + now.tv_usec;
        field->latencyUsec = 0;
        unsigned int value = 0;
        if (field->fieldId == NVML_FI_DEV_NVLINK_LINK_COUNT &&
            read_uint(device, "nvlink_count", &value) == NVML_SUCCESS) {
            field->valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
            field->value.uiVal = value;
            field->nvmlReturn = NVML_SUCCESS;
        } else {
            field->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        }
    }
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *current,
                                        unsigned int *pending) {
    DEVICE("nvmlDeviceGetMigMode");
    const char *value = gpu_value(device, "mig_mode");
    if (value == NULL) return NVML_ERROR_NOT_SUPPORTED;
    if (current == NULL || pending == NULL || sscanf(value, "%u %u", current, pending) != 2)
        return NVML_ERROR_INVALID_ARGUMENT;
    return NVML_SUCCESS;
}

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
