/**
 * Tensor maps, cuLaunchKernelEx with launch attributes, and cluster occupancy (ops of spec-areas/launch.ts).
 * A launch's attributes arrive as the driver's own 72-byte CUlaunchAttribute records, except that an
 * event is the guest's id: the daemon allows only the attributes it knows, turns event ids into this
 * session's driver events, checks an access-policy window against the session's memory, and builds the
 * CUlaunchConfig in native memory for the driver.
 */
import { CU, ProtocolViolation, u64, type FuncInfo, type OpHandlers, type SessionState } from '../session-state.js';
import { tensorMapEncode, tensorMapReplaceAddress } from './tensormap.js';

/** Attributes one launch may carry (the driver has 16 kinds; a longer list is hostile or a bug). */
export const MAX_ATTRS = 32;
export const ATTR_BYTES = 72;
const CONFIG_BYTES = 64;
const A = { ignore: 0, accessPolicyWindow: 1, programmaticEvent: 7, completionEvent: 12, deviceUpdatableNode: 13 } as const;
/** Attributes whose value is plain numbers the driver itself range-checks (cooperative, sync policy,
 *  cluster dimension and scheduling, programmatic serialization, priority, mem sync domain map and
 *  domain, preferred cluster dimension, shared memory carveout, NVLink-centric scheduling). */
const SCALAR = new Set([2, 3, 4, 5, 6, 8, 9, 10, 11, 14, 16]);

interface LaunchState { buf: Buffer; addr: number }
const state = new WeakMap<SessionState, LaunchState>();
function config(s: SessionState): LaunchState {
  let st = state.get(s);
  if (!st) {
    const buf = Buffer.allocUnsafeSlow(CONFIG_BYTES + MAX_ATTRS * ATTR_BYTES);
    st = { buf, addr: s.drv.addressOf(buf) };
    state.set(s, st);
  }
  return st;
}

interface ConfigArgs { gx: number; gy: number; gz: number; bx: number; by: number; bz: number; smem: number; stream: number; nattrs: number }

function putU64(b: Buffer, off: number, v: number): void { b.writeUInt32LE(v % 2 ** 32, off); b.writeUInt32LE(Math.floor(v / 2 ** 32), off + 4); }

/** Fills the session's native CUlaunchConfig from the frame; returns the driver's code for a refusal.
 *  Layout (cuda.h): 7 u32 dims and shared memory, pad, hStream @32, attrs @40, numAttrs @48. */
function buildConfig(s: SessionState, a: ConfigArgs, blob: Buffer): number {
  const n = a.nattrs;
  if (n > MAX_ATTRS) return CU.invalidValue;
  if (blob.length < n * ATTR_BYTES) throw new ProtocolViolation('launch attributes past the frame');
  const sid = a.stream;
  const stream = sid <= 2 ? sid : s.streams.get(sid);
  if (stream === undefined) return CU.invalidHandle;
  const { buf, addr } = config(s);
  [a.gx, a.gy, a.gz, a.bx, a.by, a.bz, a.smem].forEach((v, i) => buf.writeUInt32LE(v % 2 ** 32, 4 * i));
  buf.writeUInt32LE(0, 28);
  putU64(buf, 32, stream);
  putU64(buf, 40, n ? addr + CONFIG_BYTES : 0);
  buf.writeUInt32LE(n, 48); buf.writeUInt32LE(0, 52);
  for (let i = 0; i < n; i++) {
    const off = CONFIG_BYTES + i * ATTR_BYTES;
    blob.copy(buf, off, i * ATTR_BYTES, (i + 1) * ATTR_BYTES);
    const id = buf.readUInt32LE(off);
    if (id === A.ignore || SCALAR.has(id)) continue;
    if (id === A.accessPolicyWindow) {
      // A persistence hint over memory the session does not own would still steer another guest's L2.
      const base = u64(buf, off + 8), bytes = u64(buf, off + 16);
      if (bytes && !s.ownsRange(base, bytes)) return CU.invalidValue;
    } else if (id === A.programmaticEvent || id === A.completionEvent) {
      const ev = s.events.get(u64(buf, off + 8));
      if (ev === undefined) return CU.invalidHandle;
      putU64(buf, off + 8, ev);
    } else {
      // graphs-only device-updatable nodes (the driver writes a handle back through it) and unknown ids
      return CU.invalidValue;
    }
  }
  return 0;
}

function launchFunc(s: SessionState, id: number, params: Buffer): FuncInfo | number {
  const f = s.funcs.get(id);
  if (!f) return CU.invalidHandle;
  if (!f.known) return CU.notSupported;
  if (params.length !== f.argBytes || s.foreignPointer(f, params, 0)) return CU.invalidValue;
  return f;
}

export const launchExOps = {
  TensorMapEncode: tensorMapEncode,
  TensorMapReplaceAddress: tensorMapReplaceAddress,
  LaunchKernelEx(s, a, blob) {
    const d = s.drv.cuLaunchKernelEx;
    if (!d) return s.fire(CU.notSupported);
    if (a.nattrs > MAX_ATTRS) return s.fire(CU.invalidValue);
    if (blob.length < a.nattrs * ATTR_BYTES) throw new ProtocolViolation('launch attributes past the frame');
    const f = launchFunc(s, a.func, blob.subarray(a.nattrs * ATTR_BYTES));
    if (typeof f === 'number') return s.fire(f);
    const r = buildConfig(s, a, blob);
    if (r) return s.fire(r);
    blob.copy(s.argBuf, 0, a.nattrs * ATTR_BYTES);
    return s.fire(d(config(s).addr, f.host, f.ptrsAddr, null));
  },
  OccupancyCluster(s, a, blob) {
    const d = a.which === 0 ? s.drv.cuOccupancyMaxPotentialClusterSize : a.which === 1 ? s.drv.cuOccupancyMaxActiveClusters : undefined;
    if (d === undefined) return s.ret(CU.invalidValue, [0]);
    if (d === null) return s.ret(CU.notSupported, [0]);
    const f = s.func(a.func);
    const r = buildConfig(s, a, blob);
    if (r) return s.ret(r, [0]);
    const rr = d(s.out1, f.host, config(s).addr);
    return s.ret(rr, [rr ? 0 : s.out1[0] >>> 0]);
  },
  OccupancyAvailableDynamicSMem(s, a) {
    const d = s.drv.cuOccupancyAvailableDynamicSMemPerBlock;
    if (!d) return s.ret(CU.notSupported, [0]);
    const r = d(s.out1, s.func(a.func).host, a.numBlocks | 0, a.blockSize | 0);
    return s.ret(r, [r ? 0 : s.num(s.out1[0])]);
  },
} satisfies Partial<OpHandlers>;
