/* The health calls (docs/health.md): ECC counts, retired pages, remapped rows, PCIe replays,
 * NVLink error counters and the Xid event set; see cnvml.h and docs/c-nvml.md.
 *
 * What a card answers is decided by gputop/core/fake/health_calls.py (health_answers) and
 * written to the data file by tests/cnvml/data.py; a key that is absent is NOT_SUPPORTED:
 *   gpu N ecc_errors CV UV CA UA          (corrected/uncorrected x volatile/aggregate)
 *   gpu N retired_pages SINGLE DOUBLE PENDING
 *   gpu N remapped_rows CORR UNC PENDING FAILED
 *   gpu N pcie_replays COUNT
 *   gpu N nvlink_crc C0 C1 ...            (CRC flit errors per link)
 *   gpu N xid_events XID:COUNT ...        (delivered by the event set, in order)
 * A test injects Xids while gputop runs by appending "GPU XID" lines to the file named by
 * GPUTOP_CNVML_XID; each event set delivers every line once, after the data file's events.
 * A line "GPU sbe" or "GPU dbe" is an ECC error (single-bit: corrected, double-bit:
 * uncorrected) on an ECC board: its counts, volatile and aggregate, rise by one, and the sets
 * registered for that type hear of it. Only boards with ecc_errors have the ECC event types:
 * registering one of them on another (GeForce) is NOT_SUPPORTED, as a registration with any
 * type the board lacks is.
 */
#include "cnvml.h"

#include <sys/select.h>

#define MAX_SETS 8

struct nvmlEventSet_st {
    int used;
    unsigned long long registered[MAX_GPUS];
    unsigned long long delivered[MAX_GPUS]; /* of the data file's xid_events, one by one */
    long injected_lines;                   /* lines of GPUTOP_CNVML_XID delivered */
};

static struct nvmlEventSet_st sets[MAX_SETS];

#define ECC_EVENTS (nvmlEventTypeSingleBitEccError | nvmlEventTypeDoubleBitEccError)

/* The ECC errors GPUTOP_CNVML_XID has injected on GPU `index`: [0] corrected, [1] not. */
static void injected_ecc(unsigned int index, unsigned long long added[2]) {
    added[0] = added[1] = 0;
    const char *path = getenv("GPUTOP_CNVML_XID");
    FILE *file = path == NULL ? NULL : fopen(path, "r");
    if (file == NULL) return;
    char line[128], word[4];
    unsigned int gpu;
    while (fgets(line, sizeof line, file) != NULL) {
        if (strchr(line, '\n') == NULL) break; /* a line still being written */
        if (sscanf(line, "%u %3s", &gpu, word) != 2 || gpu != index) continue;
        if (strcmp(word, "sbe") == 0) added[0]++;
        if (strcmp(word, "dbe") == 0) added[1]++;
    }
    fclose(file);
}

static nvmlReturn_t numbers(nvmlDevice_t device, const char *key, unsigned long long *out,
                            int count) {
    const char *value = gpu_value(device, key);
    if (value == NULL) return NVML_ERROR_NOT_SUPPORTED;
    char *end = NULL;
    for (int i = 0; i < count; i++) {
        out[i] = strtoull(value, &end, 10);
        if (end == value) return NVML_ERROR_UNKNOWN;
        value = end;
    }
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device,
                                               nvmlMemoryErrorType_t error_type,
                                               nvmlEccCounterType_t counter,
                                               unsigned long long *count) {
    DEVICE("nvmlDeviceGetTotalEccErrors");
    if (count == NULL || (unsigned)error_type > 1 || (unsigned)counter > 1)
        return NVML_ERROR_INVALID_ARGUMENT;
    unsigned long long ecc[4];
    nvmlReturn_t result = numbers(device, "ecc_errors", ecc, 4);
    if (result != NVML_SUCCESS) return result;
    unsigned long long added[2];
    injected_ecc(device->index, added);
    *count = ecc[error_type + 2 * counter] + added[error_type];
    return NVML_SUCCESS;
}

static nvmlReturn_t retired(nvmlDevice_t device, nvmlPageRetirementCause_t cause,
                            unsigned int *page_count, unsigned long long *addresses,
                            unsigned long long *timestamps) {
    unsigned long long pages[3];
    nvmlReturn_t result = numbers(device, "retired_pages", pages, 3);
    if (result != NVML_SUCCESS) return result;
    if (page_count == NULL || (unsigned)cause > 1) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned int need = (unsigned int)pages[cause];
    if (*page_count < need || (need > 0 && addresses == NULL)) {
        *page_count = need;
        return need == 0 ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (unsigned int i = 0; i < need; i++) {
        addresses[i] = 0x100000000ULL * (cause + 1) + 0x1000ULL * i;
        if (timestamps != NULL) timestamps[i] = 1767225600ULL * 1000000ULL;
    }
    *page_count = need;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t device,
                                             nvmlPageRetirementCause_t cause,
                                             unsigned int *page_count,
                                             unsigned long long *addresses) {
    DEVICE("nvmlDeviceGetRetiredPages");
    return retired(device, cause, page_count, addresses, NULL);
}

EXPORT nvmlReturn_t nvmlDeviceGetRetiredPages_v2(nvmlDevice_t device,
                                                nvmlPageRetirementCause_t cause,
                                                unsigned int *page_count,
                                                unsigned long long *addresses,
                                                unsigned long long *timestamps) {
    DEVICE("nvmlDeviceGetRetiredPages_v2");
    return retired(device, cause, page_count, addresses, timestamps);
}

EXPORT nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device,
                                                          nvmlEnableState_t *pending) {
    DEVICE("nvmlDeviceGetRetiredPagesPendingStatus");
    unsigned long long pages[3];
    nvmlReturn_t result = numbers(device, "retired_pages", pages, 3);
    if (result != NVML_SUCCESS) return result;
    if (pending == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *pending = pages[2] ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int *corr_rows,
                                             unsigned int *unc_rows, unsigned int *is_pending,
                                             unsigned int *failure_occurred) {
    DEVICE("nvmlDeviceGetRemappedRows");
    unsigned long long rows[4];
    nvmlReturn_t result = numbers(device, "remapped_rows", rows, 4);
    if (result != NVML_SUCCESS) return result;
    if (corr_rows == NULL || unc_rows == NULL || is_pending == NULL || failure_occurred == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *corr_rows = (unsigned int)rows[0];
    *unc_rows = (unsigned int)rows[1];
    *is_pending = (unsigned int)rows[2];
    *failure_occurred = (unsigned int)rows[3];
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t device, unsigned int *value) {
    DEVICE("nvmlDeviceGetPcieReplayCounter");
    return read_uint(device, "pcie_replays", value);
}

EXPORT nvmlReturn_t nvmlDeviceGetNvLinkErrorCounter(nvmlDevice_t device, unsigned int link,
                                                   nvmlNvLinkErrorCounter_t counter,
                                                   unsigned long long *value) {
    DEVICE("nvmlDeviceGetNvLinkErrorCounter");
    unsigned int links = 0;
    if (read_uint(device, "nvlink_count", &links) != NVML_SUCCESS || links == 0)
        return NVML_ERROR_NOT_SUPPORTED;
    if (link >= links || link >= 64 || value == NULL || (unsigned)counter > 4)
        return NVML_ERROR_INVALID_ARGUMENT;
    unsigned long long per_link[64];
    nvmlReturn_t result = numbers(device, "nvlink_crc", per_link, (int)link + 1);
    if (result != NVML_SUCCESS) return result;
    *value = counter == NVML_NVLINK_ERROR_DL_CRC_FLIT ? per_link[link] : 0;
    return NVML_SUCCESS;
}

/* -- the event set -------------------------------------------------------------------- */

EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set) {
    SYSTEM("nvmlEventSetCreate");
    if (set == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < MAX_SETS; i++) {
        if (!sets[i].used) {
            memset(&sets[i], 0, sizeof sets[i]);
            sets[i].used = 1;
            *set = &sets[i];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_MEMORY;
}

static int valid_set(nvmlEventSet_t set) {
    return set != NULL && set >= sets && set < sets + MAX_SETS && set->used;
}

/* The Xid on every board; the ECC errors on boards with ECC. */
static unsigned long long supported_types(nvmlDevice_t device) {
    return nvmlEventTypeXidCriticalError |
           (gpu_value(device, "ecc_errors") != NULL ? ECC_EVENTS : 0);
}

EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long types,
                                            nvmlEventSet_t set) {
    DEVICE("nvmlDeviceRegisterEvents");
    if (!valid_set(set)) return NVML_ERROR_INVALID_ARGUMENT;
    if (types == 0 || (types & ~supported_types(device)) != 0) return NVML_ERROR_NOT_SUPPORTED;
    set->registered[device->index] |= types;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device,
                                                    unsigned long long *types) {
    DEVICE("nvmlDeviceGetSupportedEventTypes");
    if (types == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *types = supported_types(device);
    return NVML_SUCCESS;
}

/* The next of the data file's Xids for GPU `index` not yet delivered to `set`, or 0. */
static unsigned long long scheduled_xid(nvmlEventSet_t set, unsigned int index) {
    nvmlDevice_t device = NULL;
    if (nvmlDeviceGetHandleByIndex_v2(index, &device) != NVML_SUCCESS) return 0;
    const char *value = gpu_value(device, "xid_events");
    if (value == NULL) return 0;
    unsigned long long seen = 0;
    const char *at = value;
    while (*at != '\0') {
        char *end = NULL;
        unsigned long long xid = strtoull(at, &end, 10);
        if (end == at || *end != ':') return 0;
        unsigned long long count = strtoull(end + 1, &end, 10);
        if (set->delivered[index] < seen + count) {
            set->delivered[index]++;
            return xid;
        }
        seen += count;
        at = end;
        while (*at == ' ') at++;
    }
    return 0;
}

static int fill(nvmlEventData_t *data, unsigned int index, unsigned long long type,
                unsigned long long xid) {
    nvmlDevice_t device = NULL;
    if (nvmlDeviceGetHandleByIndex_v2(index, &device) != NVML_SUCCESS) device = NULL;
    data->device = device;
    data->eventType = type;
    data->eventData = xid;
    data->gpuInstanceId = 0xFFFFFFFF;
    data->computeInstanceId = 0xFFFFFFFF;
    return 1;
}

/* The next line of GPUTOP_CNVML_XID this set has not had, for a registered GPU. */
static int injected(nvmlEventSet_t set, nvmlEventData_t *data) {
    const char *path = getenv("GPUTOP_CNVML_XID");
    if (path == NULL) return 0;
    FILE *file = fopen(path, "r");
    if (file == NULL) return 0;
    char line[128];
    long number = 0;
    int found = 0;
    while (!found && fgets(line, sizeof line, file) != NULL) {
        if (strchr(line, '\n') == NULL) break; /* a line still being written */
        if (number++ < set->injected_lines) continue;
        set->injected_lines = number;
        unsigned int index;
        unsigned long long xid;
        char word[4];
        if (sscanf(line, "%u %llu", &index, &xid) == 2 && index < MAX_GPUS &&
            set->registered[index] & nvmlEventTypeXidCriticalError)
            found = fill(data, index, nvmlEventTypeXidCriticalError, xid);
        else if (sscanf(line, "%u %3s", &index, word) == 2 && index < MAX_GPUS) {
            unsigned long long type = strcmp(word, "sbe") == 0   ? nvmlEventTypeSingleBitEccError
                                      : strcmp(word, "dbe") == 0 ? nvmlEventTypeDoubleBitEccError
                                                                 : 0;
            if (set->registered[index] & type) found = fill(data, index, type, 0);
        }
    }
    fclose(file);
    return found;
}

EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data,
                                       unsigned int timeout_ms) {
    SYSTEM("nvmlEventSetWait_v2");
    if (!valid_set(set) || data == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    struct timeval start, now;
    gettimeofday(&start, NULL);
    for (;;) {
        for (unsigned int i = 0; i < MAX_GPUS; i++) {
            if (!(set->registered[i] & nvmlEventTypeXidCriticalError)) continue;
            unsigned long long xid = scheduled_xid(set, i);
            if (xid != 0) {
                fill(data, i, nvmlEventTypeXidCriticalError, xid);
                return NVML_SUCCESS;
            }
        }
        if (injected(set, data)) return NVML_SUCCESS;
        gettimeofday(&now, NULL);
        long elapsed_ms =
            (now.tv_sec - start.tv_sec) * 1000L + (now.tv_usec - start.tv_usec) / 1000L;
        if (elapsed_ms >= (long)timeout_ms) return NVML_ERROR_TIMEOUT;
        struct timeval pause = {0, 10000};
        select(0, NULL, NULL, NULL, &pause);
    }
}

EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
    SYSTEM("nvmlEventSetFree");
    if (!valid_set(set)) return NVML_ERROR_INVALID_ARGUMENT;
    set->used = 0;
    return NVML_SUCCESS;
}
