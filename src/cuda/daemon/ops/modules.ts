/** Modules and libraries (guest-minted ids), the functions and kernels in them with their parameter layouts, and their globals. */
import { ImageParams } from '../params/index.js';
import { resolveParams, type ParamInfoFn } from '../params/resolve.js';
import { ARG_BUF, CU, type OpHandlers, type Reply, type SessionState } from '../session-state.js';

/** paramCount in a function lookup's reply when the layout is unknown (the blob then says why). */
const LAYOUT_UNKNOWN = 0xffffffff;
const MAX_REASON = 1024;

export const moduleOps = {
  ModuleLoadData: (s, a, blob) => load(s, a.module, false, blob),
  LibraryLoadData: (s, a, blob) => load(s, a.library, true, blob),
  ModuleUnload: (s, a) => unload(s, a.module),
  LibraryUnload: (s, a) => unload(s, a.library),
  ModuleGetFunction: (s, a, blob) => getFunction(s, a.module, a.func, blob),
  LibraryGetKernel: (s, a, blob) => getFunction(s, a.library, a.kernel, blob),
  ModuleGetGlobal: (s, a, blob) => getGlobal(s, a.module, blob),
  LibraryGetGlobal: (s, a, blob) => getGlobal(s, a.library, blob),
} satisfies Partial<OpHandlers>;

function load(s: SessionState, id: number, lib: boolean, blob: Buffer): Reply {
  // The driver trusts the sizes inside an image: never hand it one that claims more than it has.
  if (!imageFits(blob)) return s.ret(CU.invalidImage);
  const image = Buffer.allocUnsafeSlow(blob.length + 1);
  blob.copy(image); image[blob.length] = 0;
  const d = s.drv, o1 = s.out1;
  const r = lib ? d.cuLibraryLoadData(o1, image, null, null, 0, null, null, 0) : d.cuModuleLoadData(o1, image);
  if (!r) s.modules.set(id, { host: s.num(o1[0]), image, lib });
  return s.ret(r);
}

function unload(s: SessionState, id: number): null {
  const m = s.modules.get(id);
  if (!m) return s.fire(CU.invalidHandle);
  s.modules.delete(id);
  // The driver's function handles die with the module: never hand it one again.
  for (const [fid, f] of s.funcs) if (f.module === id) s.funcs.delete(fid);
  return s.fire(m.lib ? s.drv.cuLibraryUnload(m.host) : s.drv.cuModuleUnload(m.host));
}

function getGlobal(s: SessionState, id: number, blob: Buffer): Reply {
  const m = s.modules.get(id);
  if (!m) return s.ret(CU.invalidHandle, [0, 0]);
  const d = s.drv, o1 = s.out1, o2 = s.out2;
  const name = blob.toString('latin1');
  const r = m.lib ? d.cuLibraryGetGlobal(o1, o2, m.host, name) : d.cuModuleGetGlobal(o1, o2, m.host, name);
  // Globals are device memory the guest may copy to: register them as owned (not freed by us).
  if (!r && !s.allocs.has(s.num(o1[0]))) { s.addAlloc(s.num(o1[0]), s.num(o2[0])); s.memBytes -= s.num(o2[0]); s.allocs.get(s.num(o1[0]))!.ctx = -1; }
  return s.ret(r, [s.num(o1[0]), s.num(o2[0])]);
}

function getFunction(s: SessionState, moduleId: number, funcId: number, blob: Buffer): Reply {
  const d = s.drv, o1 = s.out1;
  const m = s.modules.get(moduleId);
  if (!m) return s.ret(CU.invalidHandle, [0]);
  const name = blob.toString('latin1');
  const r = m.lib ? d.cuLibraryGetKernel(o1, m.host, name) : d.cuModuleGetFunction(o1, m.host, name);
  if (r) return s.ret(r, [0]);
  const host = s.num(o1[0]);
  const info = s.paramSource === 'image' ? null : (m.lib ? d.cuKernelGetParamInfo : d.cuFuncGetParamInfo) as ParamInfoFn | null;
  const res = resolveParams(info, host, name, () => (m.params ??= new ImageParams(m.image, smArch(s))),
    s.paramSource === 'image' ? 'SMOL_CUDA_PARAM_LAYOUT=image' : undefined);
  if (res.fallback && !s.fallbackLogged) {
    s.fallbackLogged = true;
    s.log(`kernel parameter layouts come from the module images: ${res.fallback}`);
  }
  if (!res.slots) {
    const why = res.reason!.slice(0, MAX_REASON);
    s.log(`launches of ${name} will fail with CUDA_ERROR_NOT_SUPPORTED: ${why}`);
    s.funcs.set(funcId, { host, module: moduleId, known: false, nparams: 0, argBytes: 0, ptrs: Buffer.alloc(0), ptrsAddr: 0, wide: [] });
    const text = Buffer.from(why, 'latin1');
    return { status: CU.ok, outs: [LAYOUT_UNKNOWN], blob: text, blobLen: text.length };
  }
  const slots = res.slots, nparams = slots.length;
  let argBytes = 0;
  const ptrs = Buffer.allocUnsafeSlow(Math.max(8, nparams * 8));
  for (let i = 0; i < nparams; i++) {
    const { offset, size } = slots[i];
    if (offset + size > ARG_BUF) return s.ret(CU.notSupported, [0]);
    ptrs.writeBigUInt64LE(BigInt(s.argBase + offset), i * 8);
    argBytes = Math.max(argBytes, offset + size);
  }
  const wide = slots.filter((p) => p.size === 8).map((p) => p.offset);
  s.funcs.set(funcId, { host, module: moduleId, known: true, nparams, argBytes, ptrs, ptrsAddr: d.addressOf(ptrs), wide });
  const out = Buffer.alloc(nparams * 8);
  slots.forEach((p, i) => { out.writeUInt32LE(p.offset, i * 8); out.writeUInt32LE(p.size, i * 8 + 4); });
  return { status: CU.ok, outs: [nparams], blob: out, blobLen: out.length };
}

/** SM version (e.g. 90) of the current context's device, so the image's matching cubin is read first. */
function smArch(s: SessionState): number {
  const dev = s.ctxDev.get(s.currentCtx) ?? 0;
  if (s.drv.cuDeviceGetAttribute(s.out1, 75, dev) || s.drv.cuDeviceGetAttribute(s.out2, 76, dev)) return 0;
  return (s.out1[0] | 0) * 10 + (s.out2[0] | 0);
}

/** A fatbin or ELF image whose own header claims no more bytes than were sent; PTX is NUL-terminated by us. */
export function imageFits(b: Buffer): boolean {
  if (b.length < 16) return b.length > 0 && ![0x7f, 0x50, 0xb1].includes(b[0]); // too short for any binary header
  const magic = b.readUInt32LE(0);
  if (magic === 0x466243b1) return false; // a wrapper holds a guest pointer; the shim unwraps it
  if (magic === 0xba55ed50) return b.readUInt16LE(6) + Number(b.readBigUInt64LE(8)) <= b.length;
  if (magic === 0x464c457f) {
    if (b.length < 64) return false;
    return Number(b.readBigUInt64LE(0x28)) + b.readUInt16LE(0x3a) * b.readUInt16LE(0x3c) <= b.length;
  }
  return true;
}
