/* The C NVML's data file, the driver's checks, init and the system calls, device handles;
 * see cnvml.h and docs/c-nvml.md. */
#include "cnvml.h"

static struct nvmlDevice_st gpus[MAX_GPUS];
static struct nvmlDevice_st migs[MAX_GPUS][MAX_MIG];
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
 *   mig INDEX SLOT KEY VALUE...    (a MIG device of GPU INDEX)
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
        } else if (strncmp(line, "mig ", 4) == 0) {
            unsigned int index, slot;
            int used = 0;
            if (sscanf(line + 4, "%u %u %n", &index, &slot, &used) != 2 || used == 0 ||
                index >= MAX_GPUS || slot >= MAX_MIG)
                continue;
            char *key = line + 4 + used;
            char *value = strchr(key, ' ');
            if (value == NULL) continue;
            *value++ = '\0';
            struct nvmlDevice_st *mig = &migs[index][slot];
            mig->present = 1;
            put(mig->entries, &mig->entry_count, key, value);
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
    for (unsigned int i = 0; i < MAX_GPUS; i++) {
        gpus[i].index = i;
        gpus[i].parent = -1;
        for (unsigned int j = 0; j < MAX_MIG; j++) {
            migs[i][j].index = j;
            migs[i][j].parent = (int)i;
        }
    }
    return 1;
}

const char *gpu_value(const struct nvmlDevice_st *gpu, const char *key) {
    return lookup(gpu->entries, gpu->entry_count, key);
}

static nvmlReturn_t error_for(const entry_t *entries, int count, const char *function) {
    char key[KEY_LEN];
    snprintf(key, sizeof key, "error:%s", function);
    const char *code = lookup(entries, count, key);
    return code == NULL ? NVML_SUCCESS : (nvmlReturn_t)atoi(code);
}

/* -- the checks a driver makes before answering ------------------------------------- */

static int is_mig(nvmlDevice_t device) {
    const struct nvmlDevice_st *first = &migs[0][0];
    return device >= first && device < first + MAX_GPUS * MAX_MIG && device->present;
}


nvmlReturn_t system_check(const char *function) {
    if (init_count == 0) return NVML_ERROR_UNINITIALIZED;
    return error_for(system_entries, system_count, function);
}

nvmlReturn_t device_check(nvmlDevice_t device, const char *function) {
    if (init_count == 0) return NVML_ERROR_UNINITIALIZED;
    if (device != NULL && is_mig(device)) return NVML_ERROR_NOT_SUPPORTED;
    if (device == NULL || device < gpus || device >= gpus + gpu_count)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (gpu_value(device, "lost") != NULL) return NVML_ERROR_GPU_IS_LOST;
    return error_for(device->entries, device->entry_count, function);
}

/* A MIG device answers what its GPU answers for the checks: lost, the GPU's errors. */
nvmlReturn_t any_check(nvmlDevice_t device, const char *function) {
    if (init_count == 0) return NVML_ERROR_UNINITIALIZED;
    if (device != NULL && is_mig(device)) {
        nvmlReturn_t parent = device_check(&gpus[device->parent], function);
        if (parent != NVML_SUCCESS) return parent;
        return error_for(device->entries, device->entry_count, function);
    }
    return device_check(device, function);
}

struct nvmlDevice_st *mig_device(unsigned int index, unsigned int slot) {
    if (index >= MAX_GPUS || slot >= MAX_MIG || !migs[index][slot].present) return NULL;
    return &migs[index][slot];
}

const char *system_value(const char *key) { return lookup(system_entries, system_count, key); }

nvmlReturn_t copy_text(const char *value, char *out, unsigned int length) {
    if (value == NULL) return NVML_ERROR_NOT_SUPPORTED;
    if (out == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(value) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(out, value, strlen(value) + 1);
    return NVML_SUCCESS;
}

nvmlReturn_t read_ull(nvmlDevice_t device, const char *key, unsigned long long *out) {
    const char *value = gpu_value(device, key);
    if (value == NULL) return NVML_ERROR_NOT_SUPPORTED;
    if (out == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *out = strtoull(value, NULL, 10);
    return NVML_SUCCESS;
}

nvmlReturn_t read_uint(nvmlDevice_t device, const char *key, unsigned int *out) {
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

/* -- MIG devices (every generation: MIG came with R450) -------------------------------- */

EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count) {
    DEVICE("nvmlDeviceGetMaxMigDeviceCount");
    const char *mode = gpu_value(device, "mig_mode");
    if (mode == NULL) return NVML_ERROR_NOT_SUPPORTED;
    if (count == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *count = mode[0] == '1' ? MAX_MIG : 0;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
                                                       nvmlDevice_t *mig) {
    DEVICE("nvmlDeviceGetMigDeviceHandleByIndex");
    if (gpu_value(device, "mig_mode") == NULL) return NVML_ERROR_NOT_SUPPORTED;
    if (index >= MAX_MIG || mig == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    struct nvmlDevice_st *found = mig_device(device->index, index);
    if (found == NULL) return NVML_ERROR_NOT_FOUND;
    *mig = found;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *answer) {
    ANY_DEVICE("nvmlDeviceIsMigDeviceHandle");
    if (answer == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *answer = (unsigned int)is_mig(device);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t device,
                                                                nvmlDevice_t *parent) {
    ANY_DEVICE("nvmlDeviceGetDeviceHandleFromMigDeviceHandle");
    if (!is_mig(device) || parent == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *parent = &gpus[device->parent];
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id) {
    ANY_DEVICE("nvmlDeviceGetGpuInstanceId");
    if (!is_mig(device)) return NVML_ERROR_INVALID_ARGUMENT;
    return read_uint(device, "gpu_instance_id", id);
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int *id) {
    ANY_DEVICE("nvmlDeviceGetComputeInstanceId");
    if (!is_mig(device)) return NVML_ERROR_INVALID_ARGUMENT;
    return read_uint(device, "compute_instance_id", id);
}
