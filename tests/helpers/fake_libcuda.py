"""A CUDA driver library for tests: a small ``libcuda.so.1`` in C, compiled at test time.

The driver probe loads it in its real child process exactly as it would load NVIDIA's. It
is driven by environment variables the child inherits:

- ``FAKE_CUDA_DEVICES``: ``uuidhex,sms,pcibusid;...`` in the driver's FASTEST_FIRST order
  (default: four GPUs whose UUID bytes are all 0x11, 0x22, 0x33, 0x44, 108 SMs each).
- ``FAKE_CUDA_FAIL``: ``call:code`` makes that call (cuInit, cuDeviceGetCount, cuDeviceGet,
  cuDeviceGetUuid, cuDeviceGetAttribute, cuDeviceGetPCIBusId) return that CUresult.

It honours CUDA_DEVICE_ORDER=PCI_BUS_ID (sorts by bus id) and CUDA_VISIBLE_DEVICES as a
comma list of integer ordinals or ``GPU-`` UUIDs (a unique prefix will do) ("" hides every
device; the first bad entry ends the list).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

SOURCE = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ctype.h>

typedef struct { unsigned char uuid[16]; int sms; char pci[32]; } dev_t_;
static dev_t_ all[16]; static int n_all = 0;
static int visible[16]; static int count = -1;

static int fail(const char *call) {
    const char *f = getenv("FAKE_CUDA_FAIL");
    size_t n = strlen(call);
    if (f && strncmp(f, call, n) == 0 && f[n] == ':') return atoi(f + n + 1);
    return 0;
}
static void parse_devices(void) {
    const char *spec = getenv("FAKE_CUDA_DEVICES");
    char buf[2048];
    if (!spec) spec = "11111111111111111111111111111111,108,0000:10:00.0;"
                      "22222222222222222222222222222222,108,0000:20:00.0;"
                      "33333333333333333333333333333333,108,0000:30:00.0;"
                      "44444444444444444444444444444444,108,0000:40:00.0";
    strncpy(buf, spec, sizeof buf - 1); buf[sizeof buf - 1] = 0;
    char *save = NULL;
    for (char *t = strtok_r(buf, ";", &save); t && n_all < 16; t = strtok_r(NULL, ";", &save)) {
        char hex[33] = {0}; int sms = 0; char pci[32] = {0};
        if (sscanf(t, "%32[0-9a-f],%d,%31s", hex, &sms, pci) != 3) continue;
        for (int i = 0; i < 16; i++) sscanf(hex + 2 * i, "%2hhx", &all[n_all].uuid[i]);
        all[n_all].sms = sms; strcpy(all[n_all].pci, pci); n_all++;
    }
}
static int uuid_index(const char *text) {
    char want[33] = {0}; int n = 0;
    for (const char *c = text; *c && n < 32; c++) if (*c != '-') want[n++] = (char)tolower(*c);
    int found = -1;
    for (int d = 0; d < n_all; d++) {
        char hex[33];
        for (int i = 0; i < 16; i++) sprintf(hex + 2 * i, "%02x", all[d].uuid[i]);
        if (n > 0 && strncmp(hex, want, n) == 0) { if (found >= 0) return -1; found = d; }
    }
    return found;
}
static int by_pci(const void *a, const void *b) {
    return strcmp(all[*(const int *)a].pci, all[*(const int *)b].pci);
}
static void load(void) {
    int order[16];
    parse_devices();
    for (int i = 0; i < n_all; i++) order[i] = i;
    const char *o = getenv("CUDA_DEVICE_ORDER");
    if (o && strcmp(o, "PCI_BUS_ID") == 0) qsort(order, n_all, sizeof(int), by_pci);
    const char *v = getenv("CUDA_VISIBLE_DEVICES");
    count = 0;
    if (!v) { for (int i = 0; i < n_all; i++) visible[count++] = order[i]; return; }
    char buf[256]; strncpy(buf, v, 255); buf[255] = 0;
    for (char *t = strtok(buf, ","); t && count < 16; t = strtok(NULL, ",")) {
        if (strncmp(t, "GPU-", 4) == 0) { /* a UUID or a unique prefix of one */
            int found = uuid_index(t + 4);
            if (found < 0) break;
            visible[count++] = found;
            continue;
        }
        char *end; long i = strtol(t, &end, 10);
        if (end == t || i < 0 || i >= n_all) break;
        visible[count++] = order[i];
    }
}
int cuInit(unsigned flags) {
    int code = fail("cuInit"); if (code) return code;
    load(); return count ? 0 : 100;
}
int cuDeviceGetCount(int *n) {
    int code = fail("cuDeviceGetCount"); if (code) return code;
    if (count < 0) return 3;
    *n = count; return 0;
}
int cuDeviceGet(int *d, int ordinal) {
    int code = fail("cuDeviceGet"); if (code) return code;
    if (ordinal < 0 || ordinal >= count) return 101;
    *d = visible[ordinal]; return 0;
}
int cuDeviceGetUuid_v2(unsigned char *uuid, int d) {
    int code = fail("cuDeviceGetUuid"); if (code) return code;
    memcpy(uuid, all[d].uuid, 16); return 0;
}
int cuDeviceGetUuid(unsigned char *uuid, int d) { return cuDeviceGetUuid_v2(uuid, d); }
int cuDeviceGetAttribute(int *value, int attribute, int d) {
    int code = fail("cuDeviceGetAttribute"); if (code) return code;
    if (attribute != 16) return 1; /* CUDA_ERROR_INVALID_VALUE: only the SM count is known */
    *value = all[d].sms; return 0;
}
int cuDeviceGetPCIBusId(char *bus, int len, int d) {
    int code = fail("cuDeviceGetPCIBusId"); if (code) return code;
    if (len < 13) return 1;
    snprintf(bus, len, "%s", all[d].pci); return 0;
}
"""


MEMORY_SOURCE = r"""
#include <stdint.h>
int cuDevicePrimaryCtxRetain(void **ctx, int d) { *ctx = (void *)(intptr_t)(d + 1); return 0; }
int cuCtxSetCurrent(void *ctx) { return ctx ? 0 : 201; }
int cuMemAlloc_v2(uint64_t *p, size_t n) {
    int code = fail("cuMemAlloc"); if (code) return code;
    void *m = malloc(n); if (!m) return 2; *p = (uint64_t)(uintptr_t)m; return 0;
}
int cuMemsetD8_v2(uint64_t p, unsigned char v, size_t n) {
    memset((void *)(uintptr_t)p, v, n); return 0;
}
int cuMemcpyDtoD_v2(uint64_t d, uint64_t s, size_t n) {
    memcpy((void *)(uintptr_t)d, (void *)(uintptr_t)s, n); return 0;
}
int cuCtxSynchronize(void) { return 0; }
int cuDriverGetVersion(int *v) { *v = 12040; return 0; }
"""
"""Appended to SOURCE where a test needs memory: contexts, allocations (host memory, so a
test's "GPU" bytes are real bytes), copies and the driver version (tests/real/test_gpu_probe.py)."""


def build_fake_libcuda(folder: Path) -> str:
    """Compile the fake driver into ``folder/libcuda.so.1``; skip where no C compiler is."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("a C compiler (cc or gcc) is needed to build the test libcuda")
    (folder / "fake_libcuda.c").write_text(SOURCE)
    library = folder / "libcuda.so.1"
    subprocess.run(
        [compiler, "-shared", "-fPIC", "-O0", "-o", str(library), str(folder / "fake_libcuda.c")],
        check=True,
    )
    return str(library)


def devices_spec(*devices: tuple[str, int, str]) -> str:
    """``FAKE_CUDA_DEVICES`` for (GPU UUID as NVML writes it, SMs, PCI bus id), fastest first."""
    return ";".join(
        f"{uuid.split('-', 1)[1].replace('-', '').lower()},{sms},{pci}"
        for uuid, sms, pci in devices
    )
