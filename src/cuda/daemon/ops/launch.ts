/** Function attributes, occupancy, and kernel launches (the hot path: see launchInPlace). */
import { ARG_INDEX, OP, OP_ROWS } from '../../protocol/index.js';
import { CU, ProtocolViolation, u64, type OpHandlers, type SessionState } from '../session-state.js';

// Byte offsets of a launch frame's words, taken once so that a launch reads the buffer directly.
const W = ARG_INDEX.LaunchKernel;
const FUNC = 8 * W.func, GX = 8 * W.gx, GY = 8 * W.gy, GZ = 8 * W.gz, BX = 8 * W.bx, BY = 8 * W.by, BZ = 8 * W.bz, SMEM = 8 * W.smem, STREAM = 8 * W.stream;
/** Bytes of a launch frame's u64 arguments; the packed kernel arguments follow them. */
const HEAD = 8 * OP_ROWS.find((r) => r.id === OP.LaunchKernel)!.nargs;

export const launchOps = {
  FuncGetAttribute(s, a) {
    const r = s.drv.cuFuncGetAttribute(s.out1, a.attrib, s.func(a.func).host);
    return s.ret(r, [s.out1[0] >>> 0]);
  },
  FuncSetAttribute: (s, a) => s.fire(s.drv.cuFuncSetAttribute(s.func(a.func).host, a.attrib, a.value | 0)),
  FuncSetCacheConfig: (s, a) => s.fire(s.drv.cuFuncSetCacheConfig(s.func(a.func).host, a.config)),
  OccupancyMaxActiveBlocks(s, a) {
    const r = s.drv.cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(s.out1, s.func(a.func).host, a.blockSize, a.dynSmem, a.flags);
    return s.ret(r, [s.out1[0]]);
  },
  OccupancyMaxPotentialBlockSize(s, a) {
    const r = s.drv.cuOccupancyMaxPotentialBlockSizeWithFlags(s.out1, s.out2, s.func(a.func).host, null, a.dynSmem, a.blockSizeLimit, a.flags);
    return s.ret(r, [s.out1[0], s.out2[0]]);
  },
  /** A launch sent without the async flag; fire-and-forget ones take launchInPlace. */
  LaunchKernel(s, a, blob) {
    const f = s.funcs.get(a.func);
    if (!f) return s.fire(CU.invalidHandle);
    if (!f.known) return s.fire(CU.notSupported);
    if (blob.length !== f.argBytes) return s.fire(CU.invalidValue);
    if (s.foreignPointer(f, blob, 0)) return s.fire(CU.invalidValue);
    blob.copy(s.argBuf, 0);
    return s.fire(s.drv.cuLaunchKernel(f.host, a.gx, a.gy, a.gz, a.bx, a.by, a.bz, a.smem, s.stream(a.stream), f.ptrsAddr, null));
  },
} satisfies Partial<OpHandlers>;

/** A fire-and-forget launch decoded in place from the receive buffer (no argument array, no blob view),
 *  since programs issue them by the hundred thousand. Grid, block and shared-memory sizes are read as
 *  u32, the driver's unsigned int. */
export function launchInPlace(s: SessionState, b: Buffer, off: number, len: number): void {
  if (len < HEAD) throw new ProtocolViolation('short LaunchKernel frame');
  const f = s.funcs.get(u64(b, off + FUNC));
  if (!f) { s.fire(CU.invalidHandle); return; }
  if (!f.known) { s.fire(CU.notSupported); return; }
  if (len - HEAD !== f.argBytes) { s.fire(CU.invalidValue); return; }
  if (s.foreignPointer(f, b, off + HEAD)) { s.fire(CU.invalidValue); return; }
  b.copy(s.argBuf, 0, off + HEAD, off + len);
  const sid = u64(b, off + STREAM);
  const st = sid <= 2 ? sid : s.streams.get(sid);
  if (st === undefined) { s.fire(CU.invalidHandle); return; }
  s.fire(s.drv.cuLaunchKernel(f.host, b.readUInt32LE(off + GX), b.readUInt32LE(off + GY), b.readUInt32LE(off + GZ),
    b.readUInt32LE(off + BX), b.readUInt32LE(off + BY), b.readUInt32LE(off + BZ), b.readUInt32LE(off + SMEM), st, f.ptrsAddr, null));
}
