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
#ifndef CNVML_H
#define CNVML_H

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
#define MAX_MIG 7
#define MAX_KEYS 128
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
    int parent; /* -1: a whole GPU; else a MIG device of GPU `parent` (docs/c-nvml.md) */
    int present; /* a MIG slot the data file fills */
    entry_t entries[MAX_KEYS];
    int entry_count;
    process_t processes[MAX_PROCESSES];
    int process_count;
};

/* Shared by the source files (hidden: -fvisibility=hidden exports only EXPORT). */
const char *gpu_value(const struct nvmlDevice_st *gpu, const char *key);
/* The checks a driver makes before answering: initialised, valid handle, GPU lost, then the
 * data file's error for this function. */
nvmlReturn_t system_check(const char *function);
nvmlReturn_t device_check(nvmlDevice_t device, const char *function);
/* As device_check, for the calls a driver also answers on a MIG device handle. */
nvmlReturn_t any_check(nvmlDevice_t device, const char *function);
/* The MIG device in `slot` of GPU `index`, or NULL when the slot is empty. */
struct nvmlDevice_st *mig_device(unsigned int index, unsigned int slot);
const char *system_value(const char *key);
/* A value from the data file, or NOT_SUPPORTED when the scenario leaves it out. */
nvmlReturn_t copy_text(const char *value, char *out, unsigned int length);
nvmlReturn_t read_ull(nvmlDevice_t device, const char *key, unsigned long long *out);
nvmlReturn_t read_uint(nvmlDevice_t device, const char *key, unsigned int *out);

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

#define ANY_DEVICE(function)                                  \
    do {                                                      \
        nvmlReturn_t check_ = any_check(device, function);    \
        if (check_ != NVML_SUCCESS) return check_;            \
    } while (0)

#endif
