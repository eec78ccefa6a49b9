/* The answer libcudart expects from the integrity-check export table: an HMAC built on MD2 (RFC 1319)
 * with a fixed key over the driver/runtime versions, pid, tid, the export tables' and the check
 * function's addresses, the time, and each device's UUID and PCI location. Behaviour as documented by
 * ZLUDA's reverse engineering (DESIGN.md §5b); this is an independent implementation. */
#include <stdint.h>
#include <string.h>
#include "integrity.h"

/* MD2's S-box: a permutation of 0..255 built from the digits of pi (RFC 1319). */
static const uint8_t S[256] = {
  41, 46, 67, 201, 162, 216, 124, 1, 61, 54, 84, 161, 236, 240, 6, 19, 98, 167, 5, 243, 192, 199, 115, 140,
  152, 147, 43, 217, 188, 76, 130, 202, 30, 155, 87, 60, 253, 212, 224, 22, 103, 66, 111, 24, 138, 23, 229, 18,
  190, 78, 196, 214, 218, 158, 222, 73, 160, 251, 245, 142, 187, 47, 238, 122, 169, 104, 121, 145, 21, 178, 7, 63,
  148, 194, 16, 137, 11, 34, 95, 33, 128, 127, 93, 154, 90, 144, 50, 39, 53, 62, 204, 231, 191, 247, 151, 3,
  255, 25, 48, 179, 72, 165, 181, 209, 215, 94, 146, 42, 172, 86, 170, 198, 79, 184, 56, 210, 150, 164, 125, 182,
  118, 252, 107, 226, 156, 116, 4, 241, 69, 157, 112, 89, 100, 113, 135, 32, 134, 91, 207, 101, 230, 45, 168, 2,
  27, 96, 37, 173, 174, 176, 185, 246, 28, 70, 97, 105, 52, 64, 126, 15, 85, 71, 163, 35, 221, 81, 175, 58,
  195, 92, 249, 206, 186, 197, 234, 38, 44, 83, 13, 110, 133, 40, 132, 9, 211, 223, 205, 244, 65, 129, 77, 82,
  106, 220, 55, 200, 108, 193, 171, 250, 36, 225, 123, 8, 12, 189, 177, 74, 120, 136, 149, 139, 227, 99, 232, 109,
  233, 203, 213, 254, 59, 0, 29, 57, 242, 239, 183, 14, 102, 88, 208, 228, 166, 119, 114, 248, 235, 117, 75, 10,
  49, 68, 80, 180, 143, 237, 31, 26, 219, 153, 141, 51, 159, 17, 131, 20,
};

typedef struct { uint8_t x[48], c[16]; unsigned n; uint8_t l; } md2;

static void md2_byte(md2 *m, uint8_t b) {
  unsigned i = m->n;
  m->x[16 + i] = b;
  m->x[32 + i] = m->x[i] ^ b;
  m->c[i] ^= S[b ^ m->l];
  m->l = m->c[i];
  m->n = (i + 1) & 15;
  if (m->n) return;
  uint8_t t = 0;
  for (unsigned j = 0; j < 18; j++) {
    for (unsigned k = 0; k < 48; k++) t = m->x[k] ^= S[t];
    t = (uint8_t)(t + j);
  }
}
static void md2_update(md2 *m, const void *p, size_t n) { for (size_t i = 0; i < n; i++) md2_byte(m, ((const uint8_t *)p)[i]); }
static void md2_final(md2 *m, uint8_t out[16]) {
  uint8_t pad = (uint8_t)(16 - m->n), c[16];
  for (unsigned i = 0; i < pad; i++) md2_byte(m, pad);
  memcpy(c, m->c, 16);
  md2_update(m, c, 16);
  memcpy(out, m->x, 16);
}

static const uint8_t KEY[16] = { 0x14, 0x6a, 0xdd, 0xae, 0x53, 0xa9, 0xa7, 0x52, 0xaa, 0x08, 0x41, 0x36, 0x0b, 0xf5, 0x5a, 0x9f };

void smol_integrity_hash(const smol_integrity_input *in, uint8_t out[16]) {
  static const uint8_t fixed[16] = { 0x5c, 0x67, 0xcb, 0x03, 0x1c, 0x18, 0x41, 0x33, 0xe8, 0xd1, 0x4c, 0x1f, 0xaa, 0x83, 0xd3, 0x8e };
  if (in->rt_version % 10 < 2) {
    memcpy(out, fixed, 16);
    if (in->rt_version % 10 == 1) out[7] = 24;
    return;
  }
  md2 m; uint8_t pad[16], inner[16];
  memset(&m, 0, sizeof m);
  for (int i = 0; i < 16; i++) pad[i] = KEY[i] ^ 0x36;
  md2_update(&m, pad, 16);
  struct __attribute__((packed)) { uint32_t drv, rt, pid, tid; uint64_t t1, t2, fn, secs; } head =
    { in->driver_version, in->rt_version, in->pid, in->tid, in->cudart_table, in->integrity_table, in->fn, in->seconds };
  md2_update(&m, &head, sizeof head);
  for (unsigned d = 0; d < in->device_count; d++) {
    struct __attribute__((packed)) { uint8_t uuid[16]; uint32_t domain, bus, device; } dev;
    memcpy(dev.uuid, in->devices[d].uuid, 16);
    dev.domain = in->devices[d].pci_domain; dev.bus = in->devices[d].pci_bus; dev.device = in->devices[d].pci_device;
    md2_update(&m, &dev, sizeof dev);
  }
  md2_final(&m, inner);
  memset(&m, 0, sizeof m);
  for (int i = 0; i < 16; i++) pad[i] = KEY[i] ^ 0x5c;
  md2_update(&m, pad, 16);
  md2_update(&m, inner, 16);
  md2_final(&m, out);
}
