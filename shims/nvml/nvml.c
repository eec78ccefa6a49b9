/* smol guest shim for libnvidia-ml.so.1: enough NVML for nvidia-smi-style queries (count, name, UUID,
 * memory, utilization, PCI, versions), answered by the host daemon over the CUDA channel. */
#include "../cuda/shim.h"
#include <stdio.h>
#include <string.h>

typedef int nvmlReturn_t;
enum { NVML_SUCCESS = 0, NVML_ERROR_UNINITIALIZED = 1, NVML_ERROR_INVALID_ARGUMENT = 2, NVML_ERROR_NOT_SUPPORTED = 3,
       NVML_ERROR_NOT_FOUND = 6, NVML_ERROR_INSUFFICIENT_SIZE = 7, NVML_ERROR_DRIVER_NOT_LOADED = 9, NVML_ERROR_UNKNOWN = 999 };
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct { unsigned version; unsigned long long total, reserved, free, used; } nvmlMemory_v2_t;
typedef struct { unsigned gpu, memory; } nvmlUtilization_t;
typedef struct { char busIdLegacy[16]; unsigned domain, bus, device, pciDeviceId, pciSubSystemId; char busId[32]; } nvmlPciInfo_t;
typedef struct nvml_dev { int index; } *nvmlDevice_t;

static struct nvml_dev g_devs[SMOL_MAX_DEVICES];
static int g_init;

/* NVML needs no current context; the transport asks for one only for context-bound ops. */
uint64_t smol_current_id(void) { return 0; }

static nvmlReturn_t up(void) { return g_init ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED; }
static nvmlReturn_t dev_ok(nvmlDevice_t d) {
  if (!g_init) return NVML_ERROR_UNINITIALIZED;
  return d && d >= g_devs && d < g_devs + smol_device_count ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
}

EXPORT nvmlReturn_t nvmlInit_v2(void) {
  if (smol_connect()) return NVML_ERROR_DRIVER_NOT_LOADED;
  for (int i = 0; i < SMOL_MAX_DEVICES; i++) g_devs[i].index = i;
  g_init++; return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlInit(void) { return nvmlInit_v2(); }
EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned flags) { (void)flags; return nvmlInit_v2(); }
EXPORT nvmlReturn_t nvmlShutdown(void) { if (!g_init) return NVML_ERROR_UNINITIALIZED; g_init--; return NVML_SUCCESS; }
EXPORT const char *nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
    case NVML_SUCCESS: return "Success"; case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument"; case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NOT_FOUND: return "Not Found"; case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded"; default: return "Unknown Error";
  }
}
static nvmlReturn_t copy_str(char *dst, unsigned len, const char *src) {
  if (!dst) return NVML_ERROR_INVALID_ARGUMENT;
  if (strlen(src) + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
  memcpy(dst, src, strlen(src) + 1); return NVML_SUCCESS;
}
/* The kernel-module version is not visible through libcuda; report the CUDA driver version instead. */
EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *v, unsigned len) {
  char s[32]; nvmlReturn_t r = up(); if (r) return r;
  snprintf(s, sizeof s, "%d.%d", smol_driver_version / 1000, smol_driver_version % 1000 / 10);
  return copy_str(v, len, s);
}
EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char *v, unsigned len) { return copy_str(v, len, "13.0-smol"); }
EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v) { nvmlReturn_t r = up(); if (r) return r; *v = smol_driver_version; return NVML_SUCCESS; }
EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v) { return nvmlSystemGetCudaDriverVersion(v); }
EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned *n) { nvmlReturn_t r = up(); if (r) return r; *n = (unsigned)smol_device_count; return NVML_SUCCESS; }
EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned *n) { return nvmlDeviceGetCount_v2(n); }
EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned i, nvmlDevice_t *d) {
  nvmlReturn_t r = up(); if (r) return r;
  if (i >= (unsigned)smol_device_count || !d) return NVML_ERROR_INVALID_ARGUMENT;
  *d = &g_devs[i]; return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned i, nvmlDevice_t *d) { return nvmlDeviceGetHandleByIndex_v2(i, d); }
EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t d, unsigned *i) { nvmlReturn_t r = dev_ok(d); if (r) return r; *i = (unsigned)d->index; return NVML_SUCCESS; }
EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned len) { nvmlReturn_t r = dev_ok(d); if (r) return r; return copy_str(name, len, smol_devices[d->index].name); }
static void uuid_str(int i, char out[48]) {
  const unsigned char *u = smol_devices[i].uuid;
  snprintf(out, 48, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
           u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
}
EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned len) {
  char s[48]; nvmlReturn_t r = dev_ok(d); if (r) return r;
  uuid_str(d->index, s); return copy_str(uuid, len, s);
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *d) {
  nvmlReturn_t r = up(); if (r) return r;
  for (int i = 0; i < smol_device_count; i++) { char s[48]; uuid_str(i, s); if (!strcmp(s, uuid)) { *d = &g_devs[i]; return NVML_SUCCESS; } }
  return NVML_ERROR_NOT_FOUND;
}
static nvmlReturn_t info(nvmlDevice_t d, uint64_t o[5], char bus[32]) {
  nvmlReturn_t r = dev_ok(d); if (r) return r;
  uint64_t a = (uint64_t)d->index; size_t n = 0;
  CUresult cr = smol_call(SMOL_OP_NVML_DEVICE_INFO, &a, 1, NULL, 0, o, 5, bus, 32, &n);
  if (cr) return NVML_ERROR_UNKNOWN;
  bus[31] = 0; return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m) {
  uint64_t o[5]; char bus[32]; nvmlReturn_t r = info(d, o, bus); if (r) return r;
  m->total = o[0]; m->free = o[1]; m->used = o[2]; return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *m) {
  uint64_t o[5]; char bus[32]; nvmlReturn_t r = info(d, o, bus); if (r) return r;
  m->total = o[0]; m->reserved = 0; m->free = o[1]; m->used = o[2]; return NVML_SUCCESS;
}
/* Utilization needs NVML on the host; the daemon answers from libcuda, which has none: reported as 0. */
EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u) {
  uint64_t o[5]; char bus[32]; nvmlReturn_t r = info(d, o, bus); if (r) return r;
  u->gpu = (unsigned)o[3]; u->memory = (unsigned)o[4]; return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *p) {
  nvmlReturn_t r = dev_ok(d); if (r) return r;
  const int32_t *a = smol_devices[d->index].attrs;
  memset(p, 0, sizeof *p);
  p->domain = (unsigned)a[50 - 1]; p->bus = (unsigned)a[33 - 1]; p->device = (unsigned)a[34 - 1];
  snprintf(p->busId, sizeof p->busId, "%08x:%02x:%02x.0", p->domain, p->bus, p->device);
  snprintf(p->busIdLegacy, sizeof p->busIdLegacy, "%04x:%02x:%02x.0", p->domain & 0xffff, p->bus & 0xff, p->device & 0xff);
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t d, nvmlPciInfo_t *p) { return nvmlDeviceGetPciInfo_v3(d, p); }
EXPORT nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t d, nvmlPciInfo_t *p) { return nvmlDeviceGetPciInfo_v3(d, p); }
EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t d, int *major, int *minor) {
  nvmlReturn_t r = dev_ok(d); if (r) return r;
  *major = smol_devices[d->index].attrs[75 - 1]; *minor = smol_devices[d->index].attrs[76 - 1]; return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t d, unsigned *m) { nvmlReturn_t r = dev_ok(d); if (r) return r; *m = (unsigned)d->index; return NVML_SUCCESS; }
EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned *t) { (void)d; (void)sensor; (void)t; return NVML_ERROR_NOT_SUPPORTED; }
EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned *p) { (void)d; (void)p; return NVML_ERROR_NOT_SUPPORTED; }
EXPORT nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t d, unsigned *s) { (void)d; (void)s; return NVML_ERROR_NOT_SUPPORTED; }
