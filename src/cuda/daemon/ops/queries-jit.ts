/**
 * JIT options, cuModuleLoadDataEx and the cuLink* family. A guest's options arrive as (u64 option,
 * u64 value) pairs; only scalar options cross (a value that is a guest pointer means nothing here), and
 * the two log buffers are replaced by host buffers whose text goes back in the reply, with every option
 * value as the driver left it (sizes filled, wall time), so the shim can write them into the guest's.
 * Link states live here: the driver writes into a link's log buffers and option values at every later
 * call, so they stay alive with the state.
 */
import { CudaError } from '../../../errors/index.js';
import { CU, type OpHandlers, type Reply, type SessionState } from '../session-state.js';
import { imageFits } from './modules.js';

const OPT = { infoBuf: 3, infoSize: 4, errBuf: 5, errSize: 6 } as const;
/** Options whose value is a scalar (or a log buffer, replaced here); the rest carry guest pointers. */
const CARRIED = new Set([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 16, 21, 22, 23, 24, 29, 30, 31, 32, 33, 34]);
export const MAX_OPTS = 64;
/** Log text kept per buffer: longer logs are cut, so a reply with logs and a cubin fits one frame. */
export const MAX_LOG = 64 * 1024;
/** CUjitInputType: CUBIN .. NVVM. */
const INPUT_TYPES = 6;
/** Link states one session may hold at once: each keeps up to two logs and the driver's state here. */
export const MAX_LINKS = 256;

interface Jit { n: number; opts: Buffer; vals: Buffer; info: Buffer | null; err: Buffer | null }
interface Link { host: number; jit: Jit }

const links = new WeakMap<SessionState, Map<number, Link>>();
function linkMap(s: SessionState): Map<number, Link> {
  let m = links.get(s);
  if (!m) { m = new Map(); links.set(s, m); }
  return m;
}
function link(s: SessionState, id: number): Link {
  const l = linkMap(s).get(id);
  if (!l) throw new CudaError('link lookup', CU.invalidHandle);
  return l;
}

/** Decodes n option pairs from the front of blob; `logs` false refuses log buffers and output options
 *  (per-input link options, which the shim never sends with them). */
function parseJit(s: SessionState, blob: Buffer, n: number, logs: boolean): Jit {
  if (n > MAX_OPTS || blob.length < n * 16) throw new CudaError('jit options', CU.invalidValue);
  const opts = Buffer.alloc(Math.max(4, n * 4)), vals = Buffer.alloc(Math.max(8, n * 8));
  let infoSize = 0, errSize = 0;
  for (let i = 0; i < n; i++) {
    const o = blob.readUInt32LE(i * 16);
    if (blob.readUInt32LE(i * 16 + 4) || !CARRIED.has(o) || (!logs && o >= 1 && o <= 6)) throw new CudaError('jit option', CU.notSupported);
    opts.writeInt32LE(o, i * 4);
    blob.copy(vals, i * 8, i * 16 + 8, i * 16 + 16);
    if (o === OPT.infoSize) infoSize = Math.min(vals.readUInt32LE(i * 8), MAX_LOG);
    if (o === OPT.errSize) errSize = Math.min(vals.readUInt32LE(i * 8), MAX_LOG);
  }
  const jit: Jit = { n, opts, vals, info: null, err: null };
  for (let i = 0; i < n; i++) {
    const o = opts.readInt32LE(i * 4);
    if (o === OPT.infoBuf) jit.info = Buffer.alloc(Math.max(1, infoSize));
    if (o === OPT.errBuf) jit.err = Buffer.alloc(Math.max(1, errSize));
  }
  for (let i = 0; i < n; i++) {
    const o = opts.readInt32LE(i * 4);
    if (o === OPT.infoBuf) vals.writeBigUInt64LE(BigInt(s.drv.addressOf(jit.info!)), i * 8);
    if (o === OPT.errBuf) vals.writeBigUInt64LE(BigInt(s.drv.addressOf(jit.err!)), i * 8);
    if (o === OPT.infoSize) vals.writeBigUInt64LE(BigInt(jit.info ? infoSize : 0), i * 8);
    if (o === OPT.errSize) vals.writeBigUInt64LE(BigInt(jit.err ? errSize : 0), i * 8);
  }
  return jit;
}

const textLen = (b: Buffer | null) => { if (!b) return 0; const z = b.indexOf(0); return z < 0 ? b.length : z; };

/** Reply: outs [infoLen, errLen, ...extra]; blob = option values, info log, error log, then `tail`. */
function jitReply(s: SessionState, status: number, jit: Jit, extra: number[] = [], tail?: Buffer): Reply {
  const il = textLen(jit.info), el = textLen(jit.err), b = s.blobOut;
  const len = jit.n * 8 + il + el + (tail?.length ?? 0);
  if (len > b.length) return s.ret(CU.notSupported, [0, 0, ...extra.map(() => 0)]);
  let o = jit.vals.copy(b, 0, 0, jit.n * 8);
  if (jit.info) o += jit.info.copy(b, o, 0, il);
  if (jit.err) o += jit.err.copy(b, o, 0, el);
  if (tail) tail.copy(b, o);
  return { status, outs: [il, el, ...extra], blob: b, blobLen: len };
}

export const jitOps = {
  ModuleLoadDataEx(s, a, blob) {
    const jit = parseJit(s, blob, a.nopts, true);
    const body = blob.subarray(a.nopts * 16);
    if (!imageFits(body)) return jitReply(s, CU.invalidImage, jit);
    if (s.modules.has(a.module)) throw new CudaError('module id reused', CU.invalidHandle);
    const image = Buffer.allocUnsafeSlow(body.length + 1);
    body.copy(image); image[body.length] = 0;
    const r = s.drv.cuModuleLoadDataEx(s.out1, image, jit.n, jit.opts, jit.vals);
    if (!r) s.modules.set(a.module, { host: s.num(s.out1[0]), image, lib: false });
    return jitReply(s, r, jit);
  },
  LinkCreate(s, a, blob) {
    const links = linkMap(s);
    if (links.has(a.link)) throw new CudaError('link id reused', CU.invalidHandle);
    if (links.size >= MAX_LINKS) throw new CudaError('too many link states', CU.outOfMemory);
    const jit = parseJit(s, blob, a.nopts, true);
    const r = s.drv.cuLinkCreate(jit.n, jit.opts, jit.vals, s.out1);
    if (!r) links.set(a.link, { host: s.num(s.out1[0]), jit });
    return jitReply(s, r, jit);
  },
  LinkAddData(s, a, blob) {
    const l = link(s, a.link);
    const own = parseJit(s, blob, a.nopts, false);
    const rest = blob.subarray(a.nopts * 16);
    if (a.type >= INPUT_TYPES || a.nameLen > rest.length) return jitReply(s, CU.invalidValue, l.jit);
    const name = Buffer.alloc(a.nameLen + 1); rest.copy(name, 0, 0, a.nameLen);
    const data = Buffer.allocUnsafeSlow(rest.length - a.nameLen + 1);
    rest.copy(data, 0, a.nameLen); data[data.length - 1] = 0; // PTX the driver reads as a C string ends here
    const r = s.drv.cuLinkAddData(l.host, a.type, data, data.length - 1, name, own.n, own.opts, own.vals);
    return jitReply(s, r, l.jit);
  },
  LinkComplete(s, a) {
    const l = link(s, a.link);
    const r = s.drv.cuLinkComplete(l.host, s.out1, s.out2);
    if (r) return jitReply(s, r, l.jit, [0]);
    const size = s.num(s.out2[0]);
    if (size > s.blobOut.length) return jitReply(s, CU.notSupported, l.jit, [0]);
    // The cubin lives in the driver's link state until cuLinkDestroy: copy it out for the guest.
    const cubin = Buffer.allocUnsafe(size);
    s.drv.readAt(cubin, s.num(s.out1[0]), size);
    return jitReply(s, r, l.jit, [size], cubin);
  },
  LinkDestroy(s, a) {
    const l = linkMap(s).get(a.link);
    if (!l) return s.fire(CU.invalidHandle);
    linkMap(s).delete(a.link);
    return s.fire(s.drv.cuLinkDestroy(l.host));
  },
} satisfies Partial<OpHandlers>;

