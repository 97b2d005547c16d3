/*
 * A fake NVIDIA Management Library for the tests: built by the test suite into a
 * temporary libnvidia-ml.so.1 that the real pynvml (nvidia-ml-py, the version pinned
 * in pyproject.toml) loads through LD_LIBRARY_PATH.
 *
 * It exports the entry points the gpu probe reaches through pynvml, with the struct
 * layouts pynvml declares (checked against nvidia-ml-py 13.615.71: c_nvmlMemory_t,
 * c_nvmlMemory_v2_t, c_nvmlProcessInfo_v3_t, nvmlPciInfo_t, c_nvmlUtilization_t,
 * c_nvmlEventData_t, c_nvmlDeviceAddressingMode_t) and the return codes of nvml.h.
 *
 * Answers come from a scenario file named by $FAKE_NVML_SCENARIO: `key=value` lines.
 * A device key handle=err:N makes its handle fail (err:15 is GPU_IS_LOST).
 * Global keys: init (return code of nvmlInitWithFlags), driver, cuda, nvml, devices,
 * block (a function name that sleeps block_s seconds before answering, as a driver
 * whose GPU fell off the bus does). Device keys are prefixed dN.: name, uuid, pci,
 * memory (total,used | unsupported | err:N), memory_v2 (same; defaults to memory),
 * reserved, util (gpu,mem), sm, sm_max, power_mw, temp, reasons, throttle_reasons,
 * addressing,
 * compute and graphics (pid:bytes|na,...), events (unsupported to refuse Xid
 * registration), xid (Xid numbers delivered once each by nvmlEventSetWait).
 * A missing device key answers NVML_ERROR_NOT_SUPPORTED, as a driver does for a
 * field the board lacks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int nvmlReturn_t;
typedef unsigned long long ull;

enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
};

#define NVML_MEMORY_V2 0x02000028u
#define NOT_AVAILABLE 0xFFFFFFFFFFFFFFFFull
#define MAXDEV 8
#define MAXKEYS 256
#define MAXXID 16

typedef struct { ull total, free, used; } nvmlMemory_t;
typedef struct { unsigned int version; ull total, reserved, free, used; } nvmlMemory_v2_t;
typedef struct { unsigned int pid; ull usedGpuMemory; unsigned int gpuInstanceId, computeInstanceId; } nvmlProcessInfo_t;
typedef struct { char busIdLegacy[16]; unsigned int domain, bus, device, pciDeviceId, pciSubSystemId; char busId[32]; } nvmlPciInfo_t;
typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;
typedef struct fake_device { int index; int registered; int xid[MAXXID]; int nxid, next_xid; } fake_device;
typedef struct { fake_device *device; ull eventType, eventData; unsigned int gpuInstanceId, computeInstanceId; } nvmlEventData_t;
typedef struct { unsigned int version, value; } nvmlDeviceAddressingMode_t;

static char keys[MAXKEYS][64];
static char vals[MAXKEYS][512];
static int nkeys, loaded;
static fake_device devices[MAXDEV];
static int event_set_token;

static void load(void) {
    if (loaded) return;
    loaded = 1;
    for (int i = 0; i < MAXDEV; i++) devices[i].index = i;
    const char *path = getenv("FAKE_NVML_SCENARIO");
    FILE *f = path ? fopen(path, "r") : NULL;
    if (!f) return;
    char line[600];
    while (fgets(line, sizeof line, f) && nkeys < MAXKEYS) {
        line[strcspn(line, "\r\n")] = 0;
        char *eq = strchr(line, '=');
        if (line[0] == '#' || !eq) continue;
        *eq = 0;
        snprintf(keys[nkeys], sizeof keys[0], "%.63s", line);
        snprintf(vals[nkeys], sizeof vals[0], "%.511s", eq + 1);
        nkeys++;
    }
    fclose(f);
}

static const char *get(const char *key) {
    load();
    for (int i = 0; i < nkeys; i++)
        if (!strcmp(keys[i], key)) return vals[i];
    return NULL;
}

static const char *dget(const fake_device *d, const char *key) {
    char k[64];
    snprintf(k, sizeof k, "d%d.%s", d->index, key);
    return get(k);
}

/* A value's return code: unsupported and missing -> NOT_SUPPORTED, err:N -> N. */
static nvmlReturn_t status_of(const char *v) {
    if (!v || !strcmp(v, "unsupported")) return NVML_ERROR_NOT_SUPPORTED;
    if (!strncmp(v, "err:", 4)) return atoi(v + 4);
    return NVML_SUCCESS;
}

static void maybe_block(const char *fn) {
    const char *b = get("block");
    if (b && !strcmp(b, fn)) {
        const char *s = get("block_s");
        sleep(s ? (unsigned)atoi(s) : 3600);
    }
}

static int device_count(void) {
    const char *v = get("devices");
    int n = v ? atoi(v) : 0;
    return n > MAXDEV ? MAXDEV : n;
}

static nvmlReturn_t copy_string(const char *v, char *buf, unsigned int len) {
    nvmlReturn_t r = status_of(v);
    if (r) return r;
    if (strlen(v) + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(buf, v, strlen(v) + 1);
    return NVML_SUCCESS;
}

static nvmlReturn_t device_uint(fake_device *d, const char *key, const char *fn, unsigned int *out) {
    maybe_block(fn);
    const char *v = dget(d, key);
    nvmlReturn_t r = status_of(v);
    if (!r) *out = (unsigned int)strtoul(v, NULL, 10);
    return r;
}

nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    maybe_block("nvmlInit");
    const char *v = get("init");
    if (v) return atoi(v);
    for (int i = 0; i < MAXDEV; i++) {
        const char *x = dget(&devices[i], "xid");
        devices[i].nxid = 0;
        for (const char *p = x; p && *p && devices[i].nxid < MAXXID; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
            devices[i].xid[devices[i].nxid++] = atoi(p);
    }
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }
nvmlReturn_t nvmlShutdown(void) { return NVML_SUCCESS; }

const char *nvmlErrorString(nvmlReturn_t r) {
    switch (r) {
    case 0: return "Success";
    case 1: return "Uninitialized";
    case 2: return "Invalid Argument";
    case 3: return "Not Supported";
    case 4: return "Insufficient Permissions";
    case 7: return "Insufficient Size";
    case 9: return "Driver Not Loaded";
    case 10: return "Timeout";
    case 12: return "NVML Shared Library Not Found";
    case 13: return "Function Not Found";
    case 15: return "GPU is lost";
    case 18: return "RM has detected an NVML/RM version mismatch.";
    case 25: return "Argument version mismatch";
    default: return "Unknown Error";
    }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *buf, unsigned int len) {
    maybe_block("nvmlSystemGetDriverVersion");
    return copy_string(get("driver"), buf, len);
}

nvmlReturn_t nvmlSystemGetNVMLVersion(char *buf, unsigned int len) { return copy_string(get("nvml"), buf, len); }

nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *version) {
    const char *v = get("cuda");
    nvmlReturn_t r = status_of(v);
    if (!r) *version = atoi(v);
    return r;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    maybe_block("nvmlDeviceGetCount");
    *count = (unsigned int)device_count();
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, fake_device **device) {
    if ((int)index >= device_count()) return NVML_ERROR_INVALID_ARGUMENT;
    const char *h = dget(&devices[index], "handle"); /* err:15 = GPU_IS_LOST */
    if (h && status_of(h)) return status_of(h);
    *device = &devices[index];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(fake_device *d, char *buf, unsigned int len) {
    maybe_block("nvmlDeviceGetName");
    return copy_string(dget(d, "name"), buf, len);
}

nvmlReturn_t nvmlDeviceGetUUID(fake_device *d, char *buf, unsigned int len) { return copy_string(dget(d, "uuid"), buf, len); }

nvmlReturn_t nvmlDeviceGetPciInfo_v3(fake_device *d, nvmlPciInfo_t *pci) {
    const char *v = dget(d, "pci");
    nvmlReturn_t r = status_of(v);
    if (r) return r;
    memset(pci, 0, sizeof *pci);
    snprintf(pci->busId, sizeof pci->busId, "%s", v);
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%s", v);
    return NVML_SUCCESS;
}

static nvmlReturn_t memory(fake_device *d, const char *key, ull *total, ull *used) {
    const char *v = dget(d, key);
    if (!v && strcmp(key, "memory")) v = dget(d, "memory");
    nvmlReturn_t r = status_of(v);
    if (!r && sscanf(v, "%llu,%llu", total, used) != 2) r = NVML_ERROR_INVALID_ARGUMENT;
    return r;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(fake_device *d, nvmlMemory_t *m) {
    maybe_block("nvmlDeviceGetMemoryInfo");
    nvmlReturn_t r = memory(d, "memory", &m->total, &m->used);
    if (!r) m->free = m->total - m->used;
    return r;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(fake_device *d, nvmlMemory_v2_t *m) {
    maybe_block("nvmlDeviceGetMemoryInfo");
    if (m->version != NVML_MEMORY_V2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    nvmlReturn_t r = memory(d, "memory_v2", &m->total, &m->used);
    if (r) return r;
    const char *reserved = dget(d, "reserved");
    m->reserved = reserved ? strtoull(reserved, NULL, 10) : 0;
    m->free = m->total - m->used - m->reserved;
    return NVML_SUCCESS;
}

/* pynvml asks with *count = 0 and NULL first, then with an array of the size returned. */
static nvmlReturn_t processes(fake_device *d, const char *key, unsigned int *count, nvmlProcessInfo_t *out) {
    maybe_block("nvmlDeviceGetComputeRunningProcesses");
    const char *v = dget(d, key);
    if (!v) v = "";
    nvmlReturn_t r = status_of(*v ? v : "0");
    if (r) return r;
    nvmlProcessInfo_t found[64];
    unsigned int n = 0;
    for (const char *p = v; p && *p && n < 64; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
        const char *colon = strchr(p, ':');
        found[n].pid = (unsigned int)strtoul(p, NULL, 10);
        found[n].usedGpuMemory = (colon && strncmp(colon + 1, "na", 2)) ? strtoull(colon + 1, NULL, 10) : NOT_AVAILABLE;
        found[n].gpuInstanceId = found[n].computeInstanceId = 0xFFFFFFFFu;
        n++;
    }
    if (n == 0) {
        *count = 0;
        return NVML_SUCCESS;
    }
    if (!out || *count < n) {
        *count = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    memcpy(out, found, n * sizeof *out);
    *count = n;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(fake_device *d, unsigned int *count, nvmlProcessInfo_t *p) {
    return processes(d, "compute", count, p);
}

nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(fake_device *d, unsigned int *count, nvmlProcessInfo_t *p) {
    return processes(d, "graphics", count, p);
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(fake_device *d, nvmlUtilization_t *u) {
    maybe_block("nvmlDeviceGetUtilizationRates");
    const char *v = dget(d, "util");
    nvmlReturn_t r = status_of(v);
    if (!r && sscanf(v, "%u,%u", &u->gpu, &u->memory) != 2) r = NVML_ERROR_INVALID_ARGUMENT;
    return r;
}

nvmlReturn_t nvmlDeviceGetClockInfo(fake_device *d, int type, unsigned int *mhz) {
    return type == 1 ? device_uint(d, "sm", "nvmlDeviceGetClockInfo", mhz) : NVML_ERROR_NOT_SUPPORTED;
}

nvmlReturn_t nvmlDeviceGetMaxClockInfo(fake_device *d, int type, unsigned int *mhz) {
    return type == 1 ? device_uint(d, "sm_max", "nvmlDeviceGetMaxClockInfo", mhz) : NVML_ERROR_NOT_SUPPORTED;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(fake_device *d, unsigned int *mw) {
    return device_uint(d, "power_mw", "nvmlDeviceGetPowerUsage", mw);
}

nvmlReturn_t nvmlDeviceGetTemperature(fake_device *d, int sensor, unsigned int *c) {
    return sensor == 0 ? device_uint(d, "temp", "nvmlDeviceGetTemperature", c) : NVML_ERROR_NOT_SUPPORTED;
}

nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(fake_device *d, ull *reasons) {
    const char *v = dget(d, "reasons");
    nvmlReturn_t r = status_of(v);
    if (!r) *reasons = strtoull(v, NULL, 0);
    return r;
}

/* The pre-r535 name of the same bits, answered from its own key. */
nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(fake_device *d, ull *reasons) {
    const char *v = dget(d, "throttle_reasons");
    nvmlReturn_t r = status_of(v);
    if (!r) *reasons = strtoull(v, NULL, 0);
    return r;
}

nvmlReturn_t nvmlDeviceGetAddressingMode(fake_device *d, nvmlDeviceAddressingMode_t *mode) {
    unsigned int value = 0;
    nvmlReturn_t r = device_uint(d, "addressing", "nvmlDeviceGetAddressingMode", &value);
    if (!r) mode->value = value;
    return r;
}

nvmlReturn_t nvmlDeviceGetSupportedEventTypes(fake_device *d, ull *types) {
    const char *v = dget(d, "events");
    if (v && !strcmp(v, "unsupported")) return NVML_ERROR_NOT_SUPPORTED;
    *types = 0x8; /* nvmlEventTypeXidCriticalError */
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetCreate(void **set) {
    *set = &event_set_token;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceRegisterEvents(fake_device *d, ull types, void *set) {
    (void)set;
    if (!(types & 0x8)) return NVML_ERROR_NOT_SUPPORTED;
    d->registered = 1;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetWait_v2(void *set, nvmlEventData_t *data, unsigned int timeoutms) {
    (void)set;
    maybe_block("nvmlEventSetWait");
    for (int i = 0; i < device_count(); i++) {
        fake_device *d = &devices[i];
        if (d->registered && d->next_xid < d->nxid) {
            memset(data, 0, sizeof *data);
            data->device = d;
            data->eventType = 0x8;
            data->eventData = (ull)d->xid[d->next_xid++];
            data->gpuInstanceId = data->computeInstanceId = 0xFFFFFFFFu;
            return NVML_SUCCESS;
        }
    }
    usleep(timeoutms * 1000u);
    return NVML_ERROR_TIMEOUT;
}

nvmlReturn_t nvmlEventSetFree(void *set) {
    (void)set;
    return NVML_SUCCESS;
}

/* Layout probes for the tests, which compare them with pynvml's ctypes structures. */
#include <stddef.h>
#define LAYOUT(T, F) if (!strcmp(type, #T)) return field ? (!strcmp(field, #F) ? offsetof(T, F) : (size_t)-1) : sizeof(T)
size_t fake_nvml_layout(const char *type, const char *field) {
    LAYOUT(nvmlMemory_t, used);
    LAYOUT(nvmlMemory_v2_t, used);
    LAYOUT(nvmlProcessInfo_t, usedGpuMemory);
    LAYOUT(nvmlPciInfo_t, busId);
    LAYOUT(nvmlUtilization_t, memory);
    LAYOUT(nvmlEventData_t, eventData);
    LAYOUT(nvmlDeviceAddressingMode_t, value);
    return (size_t)-1;
}
