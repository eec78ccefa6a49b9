/**
 * Tensor maps (TMA descriptors): the driver writes 128 opaque bytes that the guest later passes to a
 * kernel by value. A descriptor names device memory, so the daemon encodes one only over memory the
 * session owns, and remembers the extent of each it handed out: cuTensorMapReplaceAddress gets bytes
 * back from the guest, and only a descriptor this session was given can be re-pointed.
 */
import { CU, ProtocolViolation, type Reply, type SessionState } from '../session-state.js';
import type { OpArgs } from '../../protocol/index.js';

/** Encode blob: dims u64[5], strides u64[4], box u32[5], elementStrides u32[5], lower i32[3], upper i32[3],
 *  channelsPerPixel, pixelsPerColumn, mode u32. */
export const ENCODE_BLOB = 148;
const DIMS = 0, STRIDES = 40, BOX = 72, ESTR = 92, LOWER = 112, UPPER = 124, CPP = 136, PPC = 140, MODE = 144;
export const MAP_BYTES = 128;
/** Descriptors remembered per session; the oldest is forgotten first (it can then no longer be re-pointed). */
const MAX_DESCS = 4096;
const ELEM = [1, 2, 4, 4, 8, 8, 2, 4, 8, 2, 4, 4, 4];

interface MapState { buf: Buffer; addr: number; descs: Map<string, number> }
const state = new WeakMap<SessionState, MapState>();
function mapState(s: SessionState): MapState {
  let st = state.get(s);
  if (!st) {
    // The driver wants the descriptor 64-byte aligned: align inside a buffer that does not move.
    const buf = Buffer.allocUnsafeSlow(MAP_BYTES + 64);
    const base = s.drv.addressOf(buf), skew = (64 - (base % 64)) % 64;
    st = { buf: buf.subarray(skew, skew + MAP_BYTES), addr: base + skew, descs: new Map() };
    state.set(s, st);
  }
  return st;
}

/** Bytes from the base address to one past the last byte the dims and strides reach, or -1 when the
 *  arguments are out of the driver's documented range (it refuses those anyway). BigInt: dims go to
 *  2^32 and strides to 2^40, so products overflow a double's exact range. */
export function tensorExtent(dtype: number, rank: number, interleave: number, dims: bigint[], strides: bigint[]): number {
  if (dtype < 0 || dtype > 15 || rank < 1 || rank > 5) return -1;
  for (const d of dims) if (d < 1n || d > 1n << 32n) return -1;
  for (const st of strides) if (st >= 1n << 40n) return -1;
  // Packed types count their 4- or 6-bit values: 16 in 8 bytes (13), or in 16 bytes with gaps (14, 15).
  let row = dtype < 13 ? dims[0] * BigInt(ELEM[dtype]) : dtype === 13 ? (dims[0] + 1n) / 2n : dims[0];
  const chunk = interleave === 2 ? 32n : interleave === 1 ? 16n : 1n; // an interleaved row is read in whole chunks
  row = (row + chunk - 1n) / chunk * chunk;
  let end = row;
  for (let i = 1; i < rank; i++) end += (dims[i] - 1n) * strides[i - 1];
  return end > BigInt(Number.MAX_SAFE_INTEGER) ? -1 : Number(end);
}

function remember(st: MapState, extent: number): void {
  if (st.descs.size >= MAX_DESCS) st.descs.delete(st.descs.keys().next().value as string);
  st.descs.set(st.buf.toString('latin1'), extent);
}
function reply(s: SessionState, st: MapState, r: number): Reply {
  if (r) return { status: r, outs: [] };
  st.buf.copy(s.blobOut, 0);
  return { status: 0, outs: [], blob: s.blobOut, blobLen: MAP_BYTES };
}

export function tensorMapEncode(s: SessionState, a: OpArgs['TensorMapEncode'], blob: Buffer): Reply {
  if (blob.length !== ENCODE_BLOB) throw new ProtocolViolation('TensorMapEncode blob is not 148 bytes');
  const d = s.drv, kind = a.kind, rank = a.rank, addr = a.addr;
  const fn = kind === 0 ? d.cuTensorMapEncodeTiled : kind === 1 ? d.cuTensorMapEncodeIm2col : kind === 2 ? d.cuTensorMapEncodeIm2colWide : undefined;
  if (fn === undefined) return s.ret(CU.invalidValue);
  if (fn === null) return s.ret(CU.notSupported);
  if (rank < 1 || rank > 5) return s.ret(CU.invalidValue);
  const dims = Array.from({ length: rank }, (_, i) => blob.readBigUInt64LE(DIMS + 8 * i));
  const strides = Array.from({ length: rank - 1 }, (_, i) => blob.readBigUInt64LE(STRIDES + 8 * i));
  const extent = tensorExtent(a.dtype, rank, a.interleave, dims, strides);
  if (extent < 0 || !s.ownsRange(addr, extent)) return s.ret(CU.invalidValue);
  // Fresh copies: the blob is a view into the receive buffer, and the arrays must be native-addressable.
  const part = (off: number, n: number) => Buffer.from(blob.subarray(off, off + n));
  const st = mapState(s);
  const estr = part(ESTR, 20), dimsB = part(DIMS, 40), stridesB = part(STRIDES, 32);
  const r = kind === 0
    ? fn(st.addr, a.dtype, rank, addr, dimsB, stridesB, part(BOX, 20), estr, a.interleave, a.swizzle, a.l2, a.oob)
    : kind === 1
      ? fn(st.addr, a.dtype, rank, addr, dimsB, stridesB, part(LOWER, 12), part(UPPER, 12), blob.readUInt32LE(CPP), blob.readUInt32LE(PPC), estr, a.interleave, a.swizzle, a.l2, a.oob)
      : fn(st.addr, a.dtype, rank, addr, dimsB, stridesB, blob.readInt32LE(LOWER), blob.readInt32LE(UPPER), blob.readUInt32LE(CPP), blob.readUInt32LE(PPC), estr, a.interleave, blob.readUInt32LE(MODE), a.swizzle, a.l2, a.oob);
  if (!r) remember(st, extent);
  return reply(s, st, r);
}

export function tensorMapReplaceAddress(s: SessionState, a: OpArgs['TensorMapReplaceAddress'], blob: Buffer): Reply {
  if (blob.length !== MAP_BYTES) throw new ProtocolViolation('TensorMapReplaceAddress blob is not 128 bytes');
  const d = s.drv.cuTensorMapReplaceAddress;
  if (!d) return s.ret(CU.notSupported);
  const st = mapState(s);
  blob.copy(st.buf, 0);
  const extent = st.descs.get(st.buf.toString('latin1'));
  if (extent === undefined || !s.ownsRange(a.addr, extent)) return s.ret(CU.invalidValue);
  const r = d(st.addr, a.addr);
  if (!r) remember(st, extent);
  return reply(s, st, r);
}
