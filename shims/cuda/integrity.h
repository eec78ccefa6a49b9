#ifndef SMOL_INTEGRITY_H
#define SMOL_INTEGRITY_H
#include <stdint.h>
typedef struct { uint8_t uuid[16]; uint32_t pci_domain, pci_bus, pci_device; } smol_integrity_device;
typedef struct {
  uint32_t driver_version, rt_version, pid, tid;
  uint64_t cudart_table, integrity_table, fn, seconds;
  unsigned device_count;
  const smol_integrity_device *devices;
} smol_integrity_input;
void smol_integrity_hash(const smol_integrity_input *in, uint8_t out[16]);
#endif
