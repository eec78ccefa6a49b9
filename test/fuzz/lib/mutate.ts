/**
 * Byte-level mutation as a fast-check arbitrary: a seed from the corpus with a few edits of the kinds
 * that find parser bugs (length fields set to 0, -1 or 4 GiB, truncation, splices, repeats). Built from
 * fast-check primitives so a failure shrinks towards the seed and a fixed seed replays exactly.
 */
import fc from 'fast-check';

/** Values that sit on the edges length and count checks get wrong. */
const INTERESTING_32 = [0, 1, 2, 0x7f, 0x80, 0xff, 0x100, 0xfff, 0x1000, 0xffff, 0x10000, 0x7fffffff, 0x80000000, 0xfffffffe, 0xffffffff];

type Edit =
  | { k: 'byte'; at: number; v: number }
  | { k: 'u32'; at: number; v: number }
  | { k: 'u64'; at: number; hi: number; lo: number }
  | { k: 'cut'; at: number }
  | { k: 'del'; at: number; n: number }
  | { k: 'ins'; at: number; bytes: Uint8Array }
  | { k: 'dup'; at: number; n: number; times: number }
  | { k: 'splice'; at: number; other: number; from: number };

const pos = fc.nat({ max: 1 << 20 });
const edit: fc.Arbitrary<Edit> = fc.oneof(
  fc.record({ k: fc.constant('byte' as const), at: pos, v: fc.oneof(fc.constantFrom(0, 0xff, 0x7f, 0x80, 0x2f, 0x2e), fc.nat({ max: 255 })) }),
  fc.record({ k: fc.constant('u32' as const), at: pos, v: fc.oneof(fc.constantFrom(...INTERESTING_32), fc.nat({ max: 0xffffffff })) }),
  fc.record({ k: fc.constant('u64' as const), at: pos, hi: fc.constantFrom(0, 1, 0x7fffffff, 0xffffffff, 0x200000), lo: fc.constantFrom(...INTERESTING_32) }),
  fc.record({ k: fc.constant('cut' as const), at: pos }),
  fc.record({ k: fc.constant('del' as const), at: pos, n: fc.integer({ min: 1, max: 64 }) }),
  fc.record({ k: fc.constant('ins' as const), at: pos, bytes: fc.uint8Array({ minLength: 1, maxLength: 32 }) }),
  fc.record({ k: fc.constant('dup' as const), at: pos, n: fc.integer({ min: 1, max: 64 }), times: fc.integer({ min: 1, max: 8 }) }),
  fc.record({ k: fc.constant('splice' as const), at: pos, other: fc.nat(), from: pos }),
);

function apply(seed: Buffer, edits: Edit[], seeds: readonly Buffer[]): Buffer {
  let b = Buffer.from(seed);
  for (const e of edits) {
    const at = b.length ? e.at % (b.length + 1) : 0;
    switch (e.k) {
      case 'byte': if (at < b.length) b[at] = e.v; break;
      case 'u32': if (at + 4 <= b.length) b.writeUInt32LE(e.v >>> 0, at); break;
      case 'u64': if (at + 8 <= b.length) { b.writeUInt32LE(e.lo >>> 0, at); b.writeUInt32LE(e.hi >>> 0, at + 4); } break;
      case 'cut': b = b.subarray(0, at); break;
      case 'del': b = Buffer.concat([b.subarray(0, at), b.subarray(at + e.n)]); break;
      case 'ins': b = Buffer.concat([b.subarray(0, at), Buffer.from(e.bytes), b.subarray(at)]); break;
      case 'dup': {
        const piece = b.subarray(at, at + e.n);
        b = Buffer.concat([b.subarray(0, at), ...Array<Buffer>(e.times).fill(piece), b.subarray(at)]);
        break;
      }
      case 'splice': {
        const o = seeds[e.other % seeds.length];
        b = Buffer.concat([b.subarray(0, at), o.subarray(o.length ? e.from % o.length : 0)]);
        break;
      }
    }
  }
  return b;
}

/** A seed with 0..maxEdits edits; `maxLength` caps what one input may grow to. */
export function mutated(seeds: readonly Buffer[], opts: { maxEdits?: number; maxLength?: number } = {}): fc.Arbitrary<Buffer> {
  if (seeds.length === 0) return fc.uint8Array({ maxLength: 512 }).map((u) => Buffer.from(u));
  const max = opts.maxLength ?? 1 << 20;
  return fc.tuple(fc.nat({ max: seeds.length - 1 }), fc.array(edit, { maxLength: opts.maxEdits ?? 6 }))
    .map(([i, edits]) => {
      const out = apply(seeds[i], edits, seeds);
      return out.length > max ? out.subarray(0, max) : out;
    });
}

/** Plain random bytes, for the parsers' first lines of defence. */
export const randomBytes = (maxLength = 4096): fc.Arbitrary<Buffer> => fc.uint8Array({ maxLength }).map((u) => Buffer.from(u));
