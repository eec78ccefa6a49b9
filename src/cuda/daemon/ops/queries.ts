/** Module loading variants and context, stream and module queries (ops of spec-areas/queries.ts). */
import { CudaError } from '../../../errors/index.js';
import { CU, type OpHandlers, type SessionState } from '../session-state.js';
import { jitOps } from './queries-jit.js';

/** CUstreamAttrID values valid on a stream (cuda.h: the launch attributes documented "valid for streams"). */
export const STREAM_ATTRS = new Set([1, 3, 8, 9, 10, 16]);
const ACCESS_POLICY_WINDOW = 1;
/** sizeof(CUstreamAttrValue): a union padded to 64 bytes. */
export const ATTR_VALUE_BYTES = 64;
/** Functions named in one enumeration (a real module holds far fewer). */
const MAX_ENUM = 65536;

const attrValue = Buffer.alloc(ATTR_VALUE_BYTES);
const affinity = Buffer.alloc(8);

function streamAttr(attr: number): void {
  if (!STREAM_ATTRS.has(attr)) throw new CudaError('stream attribute', CU.invalidValue);
}
function need<T>(fn: T | null): T {
  if (!fn) throw new CudaError('the host driver lacks this entry point', CU.notSupported);
  return fn;
}
function module(s: SessionState, id: number) {
  const m = s.modules.get(id);
  if (!m) throw new CudaError('module lookup', CU.invalidHandle);
  return m;
}

export const queryOps = {
  ...jitOps,
  ModuleFunctionCount(s, a) {
    const m = module(s, a.module), d = s.drv;
    const r = need(m.lib ? d.cuLibraryGetKernelCount : d.cuModuleGetFunctionCount)(s.out1, m.host);
    return s.ret(r, [r ? 0 : s.out1[0]]);
  },
  /** The names of the first `max` functions; the shim looks each up by name, so it gets handles it knows. */
  ModuleEnumerate(s, a) {
    const m = module(s, a.module), d = s.drv;
    // The driver fills at most its own count: the handles past it would be garbage.
    const rc = need(m.lib ? d.cuLibraryGetKernelCount : d.cuModuleGetFunctionCount)(s.out1, m.host);
    if (rc) return s.ret(rc, [0]);
    const n = Math.min(a.max, s.out1[0], MAX_ENUM);
    const hs = Buffer.alloc(Math.max(8, n * 8));
    const r = need(m.lib ? d.cuLibraryEnumerateKernels : d.cuModuleEnumerateFunctions)(hs, n, m.host);
    if (r) return s.ret(r, [0]);
    const getName = need(m.lib ? d.kernelNameOf : d.funcNameOf), name: (string | null)[] = [null];
    const b = s.blobOut;
    let o = 0;
    for (let i = 0; i < n; i++) {
      const rn = getName(name, s.num(hs.readBigUInt64LE(i * 8)));
      if (rn) return s.ret(rn, [0]);
      const len = Buffer.byteLength(name[0] ?? '', 'latin1');
      if (o + len + 1 > b.length) return s.ret(CU.notSupported, [0]);
      o += b.write(name[0] ?? '', o, 'latin1'); b[o++] = 0;
    }
    return { status: CU.ok, outs: [n], blob: b, blobLen: o };
  },

  CtxGetCacheConfig(s) { const r = s.drv.cuCtxGetCacheConfig(s.out1); return s.ret(r, [r ? 0 : s.out1[0]]); },
  CtxSetCacheConfig: (s, a) => s.ret(s.drv.cuCtxSetCacheConfig(a.config)),
  CtxGetSharedMemConfig(s) { const r = need(s.drv.cuCtxGetSharedMemConfig)(s.out1); return s.ret(r, [r ? 0 : s.out1[0]]); },
  CtxSetSharedMemConfig: (s, a) => s.ret(need(s.drv.cuCtxSetSharedMemConfig)(a.config)),
  CtxResetPersistingL2Cache: (s) => s.ret(s.drv.cuCtxResetPersistingL2Cache()),
  CtxGetExecAffinity(s, a) {
    affinity.fill(0);
    const r = s.drv.cuCtxGetExecAffinity(affinity, a.type);
    return s.ret(r, [r ? 0 : affinity.readUInt32LE(4)]);
  },
  DeviceGetExecAffinitySupport(s, a) { const r = s.drv.cuDeviceGetExecAffinitySupport(s.out1, a.type, a.dev); return s.ret(r, [r ? 0 : s.out1[0]]); },
  DeviceGetTexture1DLinearMaxWidth(s, a) {
    const r = s.drv.cuDeviceGetTexture1DLinearMaxWidth(s.out1, a.format, a.channels, a.dev);
    return s.ret(r, [r ? 0 : s.num(s.out1[0])]);
  },
  FlushGPUDirectRDMAWrites: (s, a) => s.ret(s.drv.cuFlushGPUDirectRDMAWrites(a.target, a.scope)),

  StreamGetAttribute(s, a) {
    streamAttr(a.attr);
    attrValue.fill(0);
    const r = s.drv.cuStreamGetAttribute(s.stream(a.stream), a.attr, attrValue);
    // An access policy window names device memory: only as the driver reports it, no other bytes.
    return { status: r, outs: [], blob: attrValue, blobLen: r ? 0 : ATTR_VALUE_BYTES };
  },
  StreamSetAttribute(s, a, blob) {
    streamAttr(a.attr);
    if (blob.length !== ATTR_VALUE_BYTES) throw new CudaError('stream attribute value', CU.invalidValue);
    const h = s.stream(a.stream);
    // The window is a hint the driver keeps for the L2 cache: it may only cover this session's memory.
    if (a.attr === ACCESS_POLICY_WINDOW) {
      const base = s.num(blob.readBigUInt64LE(0)), bytes = s.num(blob.readBigUInt64LE(8));
      if (bytes) s.checkRange(base, bytes);
    }
    blob.copy(attrValue);
    return s.ret(s.drv.cuStreamSetAttribute(h, a.attr, attrValue));
  },
  StreamCopyAttributes: (s, a) => s.ret(s.drv.cuStreamCopyAttributes(s.stream(a.dst), s.stream(a.src))),
} satisfies Partial<OpHandlers>;
