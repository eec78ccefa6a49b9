/**
 * Virtual memory management (PyTorch's expandable segments): address reservations, physical allocations
 * (guest-minted handle ids), mappings and access. The session keeps every reservation, handle and mapping
 * it made, checks each range a guest names against them before the driver sees it, counts each allocation
 * against the quota until its memory is really gone (released and unmapped), and lends ownsRange its
 * accessible mappings so copies, memsets and launches may use them.
 */
import { CU, STAT, type OpHandlers, type SessionState } from '../session-state.js';

interface Phys { host: number; size: number; released: boolean; maps: number }
interface Mapping { base: number; size: number; phys: Phys; access: boolean }
interface Vmm {
  handles: Map<number, Phys>;      // guest handle id -> allocation (until released)
  resv: Map<number, number>;       // reservation base -> size
  maps: Mapping[];                 // sorted by base, never overlapping
}

/** Bounds on what one guest can make the daemon track. */
const MAX_OBJECTS = 1 << 16;
const states = new WeakMap<SessionState, Vmm>();
/** Scratch for the structs the driver reads: CUmemAllocationProp (32 bytes), CUmemAccessDesc (12), CUmemLocation (8). */
const prop = Buffer.alloc(32);
const desc = Buffer.alloc(12);

function vmm(s: SessionState): Vmm {
  let v = states.get(s);
  if (!v) {
    const st: Vmm = v = { handles: new Map(), resv: new Map(), maps: [] };
    states.set(s, st);
    s.extraRange = (p, n) => accessible(st, p, n);
    s.ownsAddress = (p) => inReservation(st, p, 1);
    s.cleanups.push(() => cleanup(s, st));
  }
  return v;
}

/** Index of the mapping containing p, or -1. */
function mapAt(v: Vmm, p: number): number {
  const m = v.maps;
  let lo = 0, hi = m.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (m[mid].base > p) hi = mid - 1; else if (p >= m[mid].base + m[mid].size) lo = mid + 1; else return mid;
  }
  return -1;
}
/** [p, p+n) lies in accessible mappings that follow each other without a gap (one contiguous VA range). */
function accessible(v: Vmm, p: number, n: number): boolean {
  let i = mapAt(v, p);
  if (i < 0) return false;
  const end = p + n;
  for (;;) {
    const m = v.maps[i];
    if (!m.access) return false;
    if (end <= m.base + m.size) return true;
    if (i + 1 >= v.maps.length || v.maps[i + 1].base !== m.base + m.size) return false;
    i++;
  }
}
function inReservation(v: Vmm, p: number, n: number): boolean {
  for (const [b, size] of v.resv) if (p >= b && p + n <= b + size) return true;
  return false;
}
/** The mappings exactly covering [p, p+n): whole ones, no gap; null if the range cuts one or leaves a hole. */
function wholeMaps(v: Vmm, p: number, n: number): Mapping[] | null {
  if (n <= 0) return null;
  const out: Mapping[] = [];
  for (let at = p, i = mapAt(v, p); at < p + n; i++) {
    const m = v.maps[i];
    if (i < 0 || !m || m.base !== at || m.base + m.size > p + n) return null;
    out.push(m); at += m.size;
  }
  return out;
}

function charge(s: SessionState, bytes: number): void {
  s.memBytes += bytes;
  s.stats[STAT.memBytes] = s.memBytes;
}
/** An allocation's memory is gone once it is released and its last mapping unmapped. */
function settle(s: SessionState, ph: Phys): void {
  if (ph.released && ph.maps === 0) charge(s, -ph.size);
}

function putProp(a: { allocType: number; handleTypes: number; locType: number; locId: number; allocFlags: number }): Buffer {
  prop.fill(0);
  prop.writeInt32LE(a.allocType | 0, 0); prop.writeInt32LE(a.handleTypes | 0, 4);
  prop.writeInt32LE(a.locType | 0, 8); prop.writeInt32LE(a.locId | 0, 12);
  prop.writeUInt32LE(a.allocFlags % 2 ** 32, 24); prop.writeUInt32LE(Math.floor(a.allocFlags / 2 ** 32) % 2 ** 32, 28);
  return prop;
}
function putDesc(locType: number, locId: number, flags: number): Buffer {
  desc.writeInt32LE(locType | 0, 0); desc.writeInt32LE(locId | 0, 4); desc.writeUInt32LE(flags % 2 ** 32, 8);
  return desc;
}

export const vmmOps = {
  MemGetAllocationGranularity(s, a) {
    if (a.option > 1) return s.ret(CU.invalidValue, [0]);
    const r = s.drv.cuMemGetAllocationGranularity(s.out1, putProp({ allocType: a.allocType, handleTypes: a.handleTypes, locType: a.locType, locId: a.locId, allocFlags: 0 }), a.option);
    return s.ret(r, [r ? 0 : s.num(s.out1[0])]);
  },
  MemAddressReserve(s, a) {
    const v = vmm(s);
    if (v.resv.size >= MAX_OBJECTS) return s.ret(CU.outOfMemory, [0]);
    const r = s.drv.cuMemAddressReserve(s.out1, a.size, a.alignment, a.addr, a.flags);
    if (r) return s.ret(r, [0]);
    const p = s.num(s.out1[0]);
    v.resv.set(p, a.size);
    return s.ret(CU.ok, [p]);
  },
  /** A reservation that still has mappings is refused before the driver (the shim and the FAKE agree). */
  MemAddressFree(s, a) {
    const v = vmm(s), p = a.ptr;
    if (v.resv.get(p) !== a.size || v.maps.some((m) => m.base >= p && m.base < p + a.size)) return s.ret(CU.invalidValue);
    const r = s.drv.cuMemAddressFree(p, a.size);
    if (!r) v.resv.delete(p);
    return s.ret(r);
  },
  MemCreate(s, a) {
    const v = vmm(s), n = a.size;
    if (v.handles.has(a.handle) || v.handles.size >= MAX_OBJECTS) return s.ret(CU.invalidValue);
    if (n <= 0) return s.ret(CU.invalidValue);
    if (s.memBytes + n > s.quota) return s.ret(CU.outOfMemory);
    const r = s.drv.cuMemCreate(s.out1, n, putProp(a), a.flags);
    if (r) return s.ret(r);
    v.handles.set(a.handle, { host: s.num(s.out1[0]), size: n, released: false, maps: 0 });
    charge(s, n);
    return s.ret(CU.ok);
  },
  /** Legal while mapped: the memory (and its share of the quota) stays until the last unmap. */
  MemRelease(s, a) {
    const v = vmm(s), ph = v.handles.get(a.handle);
    if (!ph) return s.fire(CU.invalidValue);
    const r = s.drv.cuMemRelease(ph.host);
    if (!r) { v.handles.delete(a.handle); ph.released = true; settle(s, ph); }
    return s.fire(r);
  },
  MemMap(s, a) {
    const v = vmm(s), ph = v.handles.get(a.handle), p = a.ptr, n = a.size;
    if (!ph || n <= 0 || !inReservation(v, p, n)) return s.ret(CU.invalidValue);
    if (v.maps.some((m) => m.base < p + n && p < m.base + m.size)) return s.ret(CU.invalidValue);
    if (v.maps.length >= MAX_OBJECTS) return s.ret(CU.outOfMemory);
    const r = s.drv.cuMemMap(p, n, a.offset, ph.host, a.flags);
    if (r) return s.ret(r);
    let i = v.maps.length; while (i > 0 && v.maps[i - 1].base > p) i--;
    v.maps.splice(i, 0, { base: p, size: n, phys: ph, access: false });
    ph.maps++;
    return s.ret(CU.ok);
  },
  MemUnmap(s, a) {
    const v = vmm(s), ms = wholeMaps(v, a.ptr, a.size);
    if (!ms) return s.ret(CU.invalidValue);
    const r = s.drv.cuMemUnmap(a.ptr, a.size);
    if (r) return s.ret(r);
    v.maps = v.maps.filter((m) => !ms.includes(m));
    for (const m of ms) { m.phys.maps--; settle(s, m.phys); }
    return s.ret(CU.ok);
  },
  MemSetAccess(s, a) {
    const v = vmm(s), ms = wholeMaps(v, a.ptr, a.size);
    if (!ms) return s.ret(CU.invalidValue);
    const r = s.drv.cuMemSetAccess(a.ptr, a.size, putDesc(a.locType, a.locId, a.flags), 1);
    if (!r) for (const m of ms) m.access = a.flags !== 0;
    return s.ret(r);
  },
  MemGetAccess(s, a) {
    const v = vmm(s);
    if (mapAt(v, a.ptr) < 0) return s.ret(CU.invalidValue, [0]);
    const r = s.drv.cuMemGetAccess(s.out1, putDesc(a.locType, a.locId, 0), a.ptr);
    return s.ret(r, [r ? 0 : s.num(s.out1[0])]);
  },
} satisfies Partial<OpHandlers>;

/** Explicit, though the session's process exit would free it all: unmap, release, give back the VA. */
function cleanup(s: SessionState, v: Vmm): void {
  const d = s.drv;
  for (const m of v.maps) d.cuMemUnmap(m.base, m.size);
  for (const ph of v.handles.values()) d.cuMemRelease(ph.host);
  for (const [b, size] of v.resv) d.cuMemAddressFree(b, size);
  v.maps = []; v.handles.clear(); v.resv.clear();
}
