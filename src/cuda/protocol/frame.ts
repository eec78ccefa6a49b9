/** Frame encoding for TypeScript clients (tests, tools); the daemon's hot path decodes in place. */
import { OP_ROWS } from './generated.js';
import { PROTOCOL } from './spec.js';

export interface FrameHeader { length: number; op: number; flags: number; seq: number; status: number }

export function encodeFrame(op: number, args: (number | bigint)[], opts: { seq?: number; flags?: number; blob?: Buffer } = {}): Buffer {
  const blob = opts.blob ?? Buffer.alloc(0);
  const b = Buffer.alloc(PROTOCOL.headerSize + args.length * 8 + blob.length);
  b.writeUInt32LE(args.length * 8 + blob.length, 0);
  b.writeUInt16LE(op, 4);
  b.writeUInt16LE(opts.flags ?? 0, 6);
  b.writeUInt32LE(opts.seq ?? 0, 8);
  args.forEach((a, i) => b.writeBigUInt64LE(BigInt.asUintN(64, BigInt(a)), PROTOCOL.headerSize + i * 8));
  blob.copy(b, PROTOCOL.headerSize + args.length * 8);
  return b;
}

export function decodeHeader(b: Buffer, off = 0): FrameHeader {
  return { length: b.readUInt32LE(off), op: b.readUInt16LE(off + 4), flags: b.readUInt16LE(off + 6), seq: b.readUInt32LE(off + 8), status: b.readInt32LE(off + 12) };
}

/** Splits a reply payload into its u64 results and trailing blob. */
export function decodeReply(op: number, payload: Buffer): { outs: bigint[]; blob: Buffer } {
  const n = OP_ROWS.find((r) => r.id === op)?.nouts ?? 0;
  const outs = Array.from({ length: n }, (_, i) => payload.readBigUInt64LE(i * 8));
  return { outs, blob: payload.subarray(n * 8) };
}
