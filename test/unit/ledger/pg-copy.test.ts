import { describe, expect, it } from 'vitest';
import { IntegrityError } from '../../../src/ledger/errors.js';
import { copyTuples, int4Of, int8Of, type CopyShape } from '../../../src/ledger/pg-copy.js';

const SIGNATURE = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1');
const i16 = (n: number) => { const b = Buffer.alloc(2); b.writeInt16BE(n); return b; };
const i32 = (n: number) => { const b = Buffer.alloc(4); b.writeInt32BE(n); return b; };
const header = (flags = 0, ext = Buffer.alloc(0)) => Buffer.concat([SIGNATURE, i32(flags), i32(ext.length), ext]);
const tuple = (fields: (Buffer | null)[]) => Buffer.concat([i16(fields.length), ...fields.map((f) => (f ? Buffer.concat([i32(f.length), f]) : i32(-1)))]);
const TRAILER = i16(-1);
/** A well-formed stream of what `COPY (SELECT seq, data) TO STDOUT (FORMAT binary)` sends. */
const stream = (...tuples: (Buffer | null)[][]) => Buffer.concat([header(), ...tuples.map(tuple), TRAILER]);

const SHAPE: CopyShape = { maxBytes: [4, 16] };
async function* pieces(buf: Buffer, size = buf.length): AsyncIterable<Buffer> {
  for (let at = 0; at < buf.length; at += size) yield buf.subarray(at, at + size);
}
async function all(source: AsyncIterable<Buffer>, shape = SHAPE): Promise<(Buffer | null)[][]> {
  const out: (Buffer | null)[][] = [];
  for await (const t of copyTuples(source, shape, 'test stream')) out.push(t.map((f) => (f ? Buffer.from(f) : f)));
  return out;
}
const rejects = (source: AsyncIterable<Buffer>, message: RegExp, shape = SHAPE) =>
  expect(all(source, shape)).rejects.toSatisfy((e: unknown) => e instanceof IntegrityError && message.test(e.message) && /test stream/.test(String(e.where)));

describe('binary COPY reader', () => {
  const rows = [[i32(0), Buffer.from('sixteen bytes!!!')], [i32(1), null], [i32(2), Buffer.alloc(0)]];

  it('reads tuples and NULLs the same whatever the stream is cut into', async () => {
    for (const size of [1, 2, 3, 7, 19, 1000]) expect(await all(pieces(stream(...rows), size))).toEqual(rows);
  });

  it('ignores the low flag bits and skips a header extension, as the format allows', async () => {
    const buf = Buffer.concat([header(0x1, Buffer.from('ext')), tuple(rows[0]), TRAILER]);
    expect(await all(pieces(buf, 5))).toEqual([rows[0]]);
  });

  it('yields a tuple before the rest of the stream has arrived, and ends the source when left early', async () => {
    let ended = false;
    let pulledPastFirst = false;
    async function* slow(): AsyncIterable<Buffer> {
      try {
        yield Buffer.concat([header(), tuple(rows[0])]);
        pulledPastFirst = true;
        yield Buffer.concat([tuple(rows[1]), TRAILER]);
      } finally { ended = true; }
    }
    for await (const t of copyTuples(slow(), SHAPE, 'test stream')) {
      expect(t[1]!.toString()).toBe('sixteen bytes!!!');
      break;
    }
    expect([pulledPastFirst, ended]).toEqual([false, true]);
  });

  it('refuses a stream cut anywhere: in the signature, the header, a tuple, or before its trailer', async () => {
    const whole = stream(...rows);
    const where = (at: number) => (at < 11 ? /ended inside its signature/ : at < 19 ? /ended inside its header/ : /ended inside (tuple|field) \d/);
    for (let at = 0; at < whole.length; at++) await rejects(pieces(whole.subarray(0, at), 3), where(at));
  });

  it('refuses a foreign signature, OIDs or unknown format flags, and a hostile header extension', async () => {
    await rejects(pieces(Buffer.concat([Buffer.from('PGCOPY\n\xff\r\n\x01', 'latin1'), i32(0), i32(0), TRAILER])), /does not start with PostgreSQL's binary COPY signature/);
    await rejects(pieces(Buffer.concat([header(1 << 16), TRAILER])), /header flags 0x10000/);
    await rejects(pieces(Buffer.concat([header(1 << 31), TRAILER])), /header flags 0x80000000/);
    await rejects(pieces(Buffer.concat([SIGNATURE, i32(0), i32(-1), TRAILER])), /header extension of -1 bytes/);
    await rejects(pieces(Buffer.concat([SIGNATURE, i32(0), i32(0x7fffffff)])), /header extension of 2147483647 bytes/);
  });

  it('refuses a tuple of the wrong width', async () => {
    await rejects(pieces(stream([i32(0)])), /has 1 fields in tuple 0, expected 2/);
    await rejects(pieces(stream(rows[0], [i32(1), i32(2), i32(3)])), /has 3 fields in tuple 1, expected 2/);
    await rejects(pieces(Buffer.concat([header(), i16(-2)])), /has -2 fields in tuple 0/);
  });

  it('refuses a negative length or one over the field\'s bound before any of its bytes arrive', async () => {
    await rejects(pieces(Buffer.concat([header(), i16(2), i32(-2)])), /field 0 of tuple 0 a length of -2/);
    // nothing follows the length: the bound, not a truncation, must be what stops it (no 2 GiB buffer asked for)
    await rejects(pieces(Buffer.concat([header(), i16(2), i32(4), i32(0), i32(0x7fffffff)])), /field 1 of tuple 0 2147483647 bytes, over its 16-byte bound/);
    await rejects(pieces(stream([i32(0), Buffer.alloc(17)])), /field 1 of tuple 0 17 bytes, over its 16-byte bound/);
    expect(await all(pieces(stream([i32(0), Buffer.alloc(16)])))).toHaveLength(1);
  });

  it('refuses bytes after the trailer', async () => {
    await rejects(pieces(Buffer.concat([stream(rows[0]), Buffer.from([0])])), /goes on after its trailer/);
  });

  it('reads 4- and 8-byte integer fields and nothing else as them', () => {
    expect(int4Of(i32(-7), 'n', 'w')).toBe(-7);
    expect(() => int4Of(Buffer.alloc(8), 'a chunk number', 'w')).toThrow(/gives a chunk number as 8 bytes, not a 4-byte integer/);
    expect(() => int4Of(null, 'a chunk number', 'w')).toThrow(/as NULL/);
    const i64 = (n: bigint) => { const b = Buffer.alloc(8); b.writeBigInt64BE(n); return b; };
    expect(int8Of(i64(3n << 40n), 'a blob size', 'w')).toBe(3 * 2 ** 40);
    expect(() => int8Of(i32(1), 'a blob size', 'w')).toThrow(/gives a blob size as 4 bytes, not a 8-byte integer/);
    expect(() => int8Of(i64(1n << 60n), 'a blob size', 'w')).toThrow(/a blob size as 1152921504606846976, beyond what smol counts exactly/);
  });
});
