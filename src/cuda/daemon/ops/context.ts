/** The handshake, devices, contexts (guest-minted ids) and primary contexts. */
import { PROTOCOL, PROTO_HASH } from '../../protocol/index.js';
import { CU, ProtocolViolation, type OpHandlers, type Reply, type SessionState } from '../session-state.js';

export const contextOps = {
  Hello(s, a) {
    if (a.magic !== PROTOCOL.magic) throw new ProtocolViolation('bad magic');
    if (a.protoHash !== Number(PROTO_HASH)) return s.ret(CU.notSupported, [0, 0, 0, 0, 0]);
    s.helloDone = true;
    const d = s.drv, o1 = s.out1, o2 = s.out2;
    d.cuInit(0);
    d.cuDriverGetVersion(o1); const ver = o1[0];
    d.cuDeviceGetCount(o2);
    const caps = PROTOCOL.caps.asyncAlloc | PROTOCOL.caps.nvml | PROTOCOL.caps.libraries | (d.cuFuncGetParamInfo ? PROTOCOL.caps.paramInfo : 0);
    return s.ret(CU.ok, [ver, caps, PROTOCOL.maxPayload, o2[0], s.sessionId]);
  },
  Nop: (s) => s.ret(CU.ok),
  DeviceProps: (s, a) => deviceProps(s, a.dev),
  NvmlDeviceInfo: (s, a) => nvmlInfo(s, a.dev),

  CtxCreate(s, a) {
    const r = s.drv.cuCtxCreate(s.out1, a.flags, a.dev);
    if (r) return s.ret(r);
    s.ctxs.set(a.ctx, s.num(s.out1[0])); s.ctxDev.set(a.ctx, a.dev);
    s.currentCtx = a.ctx;
    return s.ret(CU.ok);
  },
  CtxDestroy(s, a) {
    const h = s.lookup(s.ctxs, a.ctx);
    s.ctxs.delete(a.ctx);
    if (s.currentCtx === a.ctx) s.currentCtx = 0;
    return s.fire(s.drv.cuCtxDestroy(h));
  },
  CtxSetCurrent(s, a) {
    const id = a.ctx, dev = s.primaryDev(id);
    const h = id === 0 ? 0 : dev >= 0 ? s.primaryCtx(dev) : s.lookup(s.ctxs, id);
    s.currentCtx = id;
    return s.fire(s.drv.cuCtxSetCurrent(h));
  },
  CtxSynchronize: (s) => s.ret(s.drv.cuCtxSynchronize()),
  CtxGetDevice(s) { const r = s.drv.cuCtxGetDevice(s.out1); return s.ret(r, [s.out1[0]]); },
  CtxGetLimit(s, a) { const r = s.drv.cuCtxGetLimit(s.out1, a.limit); return s.ret(r, [s.num(s.out1[0])]); },
  CtxSetLimit: (s, a) => s.ret(s.drv.cuCtxSetLimit(a.limit, a.value)),
  CtxGetStreamPriorityRange(s) {
    const r = s.drv.cuCtxGetStreamPriorityRange(s.out1, s.out2);
    return s.ret(r, [s.out1[0] >>> 0, s.out2[0] >>> 0]);
  },
  CtxGetFlags(s) { const r = s.drv.cuCtxGetFlags(s.out1); return s.ret(r, [s.out1[0]]); },

  // Primary contexts are the session's own (see SessionState.primaryCtx): the flags and reference count
  // the guest sees are kept here, and a reset or the last release leaves the host context alone.
  PrimaryCtxRetain(s, a) {
    s.primaryCtx(a.dev);
    s.primaryRefs.set(a.dev, (s.primaryRefs.get(a.dev) ?? 0) + 1);
    return s.ret(CU.ok);
  },
  PrimaryCtxRelease(s, a) { s.primaryRefs.set(a.dev, Math.max(0, (s.primaryRefs.get(a.dev) ?? 0) - 1)); return null; },
  PrimaryCtxGetState: (s, a) => s.ret(CU.ok, [s.primaryFlags.get(a.dev) ?? 0, (s.primaryRefs.get(a.dev) ?? 0) > 0 ? 1 : 0]),
  PrimaryCtxSetFlags(s, a) { s.primaryFlags.set(a.dev, a.flags); return s.ret(CU.ok); },
  PrimaryCtxReset: (s) => s.ret(CU.ok),
} satisfies Partial<OpHandlers>;

function deviceProps(s: SessionState, dev: number): Reply {
  const d = s.drv, o1 = s.out1, b = s.blobOut;
  b.fill(0, 0, 280 + PROTOCOL.attrCount * 4);
  let r = d.cuDeviceGetName(b, 256, dev);
  if (r) return s.ret(r);
  r = d.cuDeviceGetUuid(b.subarray(256, 272), dev);
  if (r) return s.ret(r);
  d.cuDeviceTotalMem(o1, dev);
  b.writeBigUInt64LE(BigInt(Math.min(s.num(o1[0]), s.quota)), 272);
  for (let i = 1; i <= PROTOCOL.attrCount; i++) {
    if (!d.cuDeviceGetAttribute(o1, i, dev)) b.writeInt32LE(o1[0] | 0, 280 + (i - 1) * 4);
  }
  return { status: CU.ok, outs: [], blob: b, blobLen: 280 + PROTOCOL.attrCount * 4 };
}

function nvmlInfo(s: SessionState, dev: number): Reply {
  const d = s.drv, o1 = s.out1, o2 = s.out2;
  let r = d.cuInit(0);
  if (!r) r = d.cuDeviceTotalMem(o1, dev);
  if (r) return s.ret(r, [0, 0, 0, 0, 0]);
  const total = s.num(o1[0]);
  // Free memory needs a context: borrow this session's own.
  const ctx = s.primaryCtx(dev);
  d.cuCtxSetCurrent(ctx);
  const mr = d.cuMemGetInfo(o1, o2);
  d.cuCtxSetCurrent(s.currentHostCtx());
  const free = mr ? total : s.num(o1[0]);
  s.blobOut.fill(0, 0, 32);
  d.cuDeviceGetPCIBusId(s.blobOut, 32, dev);
  return { status: CU.ok, outs: [total, free, total - free, 0, 0], blob: s.blobOut, blobLen: 32 };
}
