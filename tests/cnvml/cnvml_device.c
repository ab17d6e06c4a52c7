/* The C NVML's per-GPU readings: one function per NVML call, reading the data file. */
#include "cnvml.h"

EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
    ANY_DEVICE("nvmlDeviceGetName");
    return copy_text(gpu_value(device, "name"), name, length);
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
    ANY_DEVICE("nvmlDeviceGetUUID");
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
    ANY_DEVICE("nvmlDeviceGetMemoryInfo");
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
    ANY_DEVICE("nvmlDeviceGetMemoryInfo_v2");
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

EXPORT nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device,
                                                       unsigned long long *energy_mj) {
    DEVICE("nvmlDeviceGetTotalEnergyConsumption");
    return read_ull(device, "energy_mj", energy_mj);
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

/* Attributes: the driver answers only for MIG devices (NOT_SUPPORTED on a whole GPU,
 * docs/c-nvml.md). */
EXPORT nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t device,
                                              nvmlDeviceAttributes_t *attributes) {
    ANY_DEVICE("nvmlDeviceGetAttributes_v2");
    if (device->parent < 0) return NVML_ERROR_NOT_SUPPORTED;
    if (attributes == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    memset(attributes, 0, sizeof *attributes);
    unsigned long long memory_total = 0;
    read_uint(device, "multiprocessor_count", &attributes->multiprocessorCount);
    read_uint(device, "slices", &attributes->gpuInstanceSliceCount);
    attributes->computeInstanceSliceCount = attributes->gpuInstanceSliceCount;
    if (read_ull(device, "memory_total", &memory_total) == NVML_SUCCESS)
        attributes->memorySizeMB = memory_total / (1024 * 1024);
    return NVML_SUCCESS;
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
