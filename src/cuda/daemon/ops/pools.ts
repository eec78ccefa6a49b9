/**
 * Memory pools and async allocation from pools (ops of spec-areas/pools.ts; the VMM half is vmm.ts).
 * Pool ids are minted by the guest; a device's default pool has a fixed id (kinds.pool << 48 |
 * primaryBase + device) resolved through the driver on first use. An allocation from a pool is an
 * ordinary session allocation (quota, ownership, cuMemFree/cuMemFreeAsync, freed when the session ends).
 */
import { PROTOCOL } from '../../protocol/index.js';
import { CudaError } from '../../../errors/index.js';
import { CU, type OpHandlers, type SessionState } from '../session-state.js';
import { vmmOps } from './vmm.js';

interface Pools { created: Map<number, number>; defaults: Map<number, number> }
const states = new WeakMap<SessionState, Pools>();
const MAX_POOLS = 4096;
/** CUmemPoolProps (88 bytes), an attribute value, a CUmemAccessDesc. */
const props = Buffer.alloc(88);
const value = Buffer.alloc(64);
const desc = Buffer.alloc(12);
const DEFAULT_BASE = PROTOCOL.kinds.pool * 2 ** 48 + PROTOCOL.primaryBase;
/** Attributes: 1-3 are ints (reuse flags), 4-8 u64 (threshold, reserved and used, current and high). */
const ATTR_MAX = 8;

function pools(s: SessionState): Pools {
  let p = states.get(s);
  if (!p) {
    const st: Pools = p = { created: new Map(), defaults: new Map() };
    states.set(s, st);
    s.cleanups.push(() => { for (const h of st.created.values()) s.drv.cuMemPoolDestroy(h); st.created.clear(); });
  }
  return p;
}

/** The host pool a guest id names: one it created, or a device's default pool. */
function pool(s: SessionState, id: number): number {
  const p = pools(s);
  const h = p.created.get(id) ?? p.defaults.get(id);
  if (h !== undefined) return h;
  const dev = id - DEFAULT_BASE;
  if (dev >= 0 && dev < 64) {
    const r = s.drv.cuDeviceGetDefaultMemPool(s.out1, dev);
    if (r) throw new CudaError('cuDeviceGetDefaultMemPool', r);
    const host = s.num(s.out1[0]);
    p.defaults.set(id, host);
    return host;
  }
  throw new CudaError('pool lookup', CU.invalidValue);
}

function putDesc(locType: number, locId: number, flags: number): Buffer {
  desc.writeInt32LE(locType | 0, 0); desc.writeInt32LE(locId | 0, 4); desc.writeUInt32LE(flags % 2 ** 32, 8);
  return desc;
}

export const poolOps = {
  MemPoolCreate(s, a) {
    const p = pools(s);
    const isDefault = a.pool >= DEFAULT_BASE && a.pool < DEFAULT_BASE + 64;
    if (p.created.has(a.pool) || isDefault || p.created.size >= MAX_POOLS) return s.ret(CU.invalidValue);
    props.fill(0);
    props.writeInt32LE(a.allocType | 0, 0); props.writeInt32LE(a.handleTypes | 0, 4);
    props.writeInt32LE(a.locType | 0, 8); props.writeInt32LE(a.locId | 0, 12);
    props.writeUInt32LE(a.maxSize % 2 ** 32, 24); props.writeUInt32LE(Math.floor(a.maxSize / 2 ** 32) % 2 ** 32, 28);
    const r = s.drv.cuMemPoolCreate(s.out1, props);
    if (!r) p.created.set(a.pool, s.num(s.out1[0]));
    return s.ret(r);
  },
  /** Outstanding allocations stay valid (the driver frees the pool after them); default pools stay. */
  MemPoolDestroy(s, a) {
    const p = pools(s), h = p.created.get(a.pool);
    if (h === undefined) return s.fire(CU.invalidValue);
    p.created.delete(a.pool);
    return s.fire(s.drv.cuMemPoolDestroy(h));
  },
  DeviceSetMemPool: (s, a) => s.ret(s.drv.cuDeviceSetMemPool(a.dev, pool(s, a.pool))),
  // u64 attribute values travel as 8 exact bytes in the blob (a release threshold is often UINT64_MAX,
  // which a JavaScript number cannot hold); the `value` word carries the int attributes.
  MemPoolSetAttribute(s, a, blob) {
    const h = pool(s, a.pool);
    if (a.attr < 1 || a.attr > ATTR_MAX) return s.ret(CU.invalidValue);
    value.fill(0);
    if (a.attr <= 3) value.writeInt32LE(a.value ? 1 : 0, 0);
    else if (blob.length === 8) blob.copy(value, 0, 0, 8);
    else return s.ret(CU.invalidValue);
    return s.ret(s.drv.cuMemPoolSetAttribute(h, a.attr, value));
  },
  MemPoolGetAttribute(s, a) {
    const h = pool(s, a.pool);
    if (a.attr < 1 || a.attr > ATTR_MAX) return s.ret(CU.invalidValue, [0]);
    value.fill(0);
    const r = s.drv.cuMemPoolGetAttribute(h, a.attr, value);
    if (r) return s.ret(r, [0]);
    value.copy(s.blobOut, 0, 0, 8);
    return { status: CU.ok, outs: [a.attr <= 3 ? value.readInt32LE(0) >>> 0 : 0], blob: s.blobOut, blobLen: 8 };
  },
  MemPoolTrimTo: (s, a) => s.fire(s.drv.cuMemPoolTrimTo(pool(s, a.pool), a.keep)),
  MemAllocFromPoolAsync(s, a) {
    const n = a.bytes, h = pool(s, a.pool);
    if (n <= 0) return s.ret(CU.invalidValue, [0]);
    if (s.memBytes + n > s.quota) return s.ret(CU.outOfMemory, [0]);
    const r = s.drv.cuMemAllocFromPoolAsync(s.out1, n, h, s.stream(a.stream));
    if (r) return s.ret(r, [0]);
    const p = s.num(s.out1[0]);
    s.addAlloc(p, n);
    return s.ret(CU.ok, [p]);
  },
  MemPoolSetAccess: (s, a) => s.ret(s.drv.cuMemPoolSetAccess(pool(s, a.pool), putDesc(a.locType, a.locId, a.flags), 1)),
  MemPoolGetAccess(s, a) {
    const r = s.drv.cuMemPoolGetAccess(s.out1, pool(s, a.pool), putDesc(a.locType, a.locId, 0));
    return s.ret(r, [r ? 0 : s.out1[0] >>> 0]);
  },
  ...vmmOps,
} satisfies Partial<OpHandlers>;
