/**
 * A reader of PostgreSQL's binary COPY format (`COPY (…) TO STDOUT (FORMAT binary)`), so bytea crosses the
 * wire as raw bytes instead of pg's hex text (twice the bytes, then decoded). The stream comes from the
 * server, so every length in it is checked before anything is allocated: a field longer than its bound, a
 * tuple of the wrong width, or a stream that ends early is an IntegrityError, never a buffer the server sized.
 * Format: https://www.postgresql.org/docs/current/sql-copy.html#id-1.9.3.55.9.4
 */
import { IntegrityError } from './errors.js';

const SIGNATURE = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1');
/** Flag bits 16–31 change the format (bit 16: OIDs follow); bits 0–15 may be ignored, per the format's rules. */
const INCOMPATIBLE_FLAGS = 0xffff0000;
/** The header extension is empty in every PostgreSQL so far; a few KiB leaves room for one, not for a flood. */
const MAX_HEADER_EXTENSION = 64 * 1024;
const TRAILER = -1;
const NULL_FIELD = -1;

/** What the query selects: `maxBytes[i]` bounds field i (its count is the tuple width). */
export interface CopyShape { maxBytes: readonly number[] }

/** Bytes from an async source, taken in exact amounts, holding only what the current read needs. */
class ByteReader {
  private pieces: Buffer[] = [];
  private have = 0;
  private done = false;
  constructor(private readonly it: AsyncIterator<Buffer>, private readonly truncated: (what: string) => IntegrityError) {}

  /** Exactly n bytes, or truncated(what) when the source ends first. */
  async take(n: number, what: string): Promise<Buffer> {
    while (this.have < n) {
      const next = this.done ? { done: true as const, value: undefined } : await this.it.next();
      if (next.done) { this.done = true; throw this.truncated(what); }
      if (next.value.length === 0) continue;
      this.pieces.push(next.value);
      this.have += next.value.length;
    }
    if (n === 0) return Buffer.alloc(0);
    const first = this.pieces[0];
    let out: Buffer;
    if (first.length >= n) {
      out = first.subarray(0, n); // the common case for small reads: no copy
      if (first.length === n) this.pieces.shift(); else this.pieces[0] = first.subarray(n);
    } else {
      out = Buffer.allocUnsafe(n); // n was checked against its bound by the caller
      let at = 0;
      while (at < n) {
        const p = this.pieces[0];
        const k = Math.min(p.length, n - at);
        p.copy(out, at, 0, k);
        at += k;
        if (k === p.length) this.pieces.shift(); else this.pieces[0] = p.subarray(k);
      }
    }
    this.have -= n;
    return out;
  }

  /** Whether any byte is left, after the source has ended. */
  async atEnd(): Promise<boolean> {
    while (this.have === 0 && !this.done) {
      const next = await this.it.next();
      if (next.done) this.done = true;
      else if (next.value.length) { this.pieces.push(next.value); this.have += next.value.length; }
    }
    return this.have === 0;
  }
}

/**
 * The tuples of a binary COPY stream, one at a time, each an array of its fields (null for SQL NULL).
 * `where` names the source in errors. Ending the iteration early ends the source's iteration too.
 */
export async function* copyTuples(source: AsyncIterable<Buffer>, shape: CopyShape, where: string): AsyncIterable<(Buffer | null)[]> {
  const damaged = (what: string) => new IntegrityError(`the binary COPY stream ${what}`, {
    where, hint: 'The server, or something between it and smol, sent what PostgreSQL does not: check the ledger URL points at PostgreSQL and retry.',
  });
  const it = source[Symbol.asyncIterator]();
  const r = new ByteReader(it, (what) => damaged(`ended inside ${what}`));
  try {
    if (!(await r.take(SIGNATURE.length, 'its signature')).equals(SIGNATURE)) throw damaged('does not start with PostgreSQL\'s binary COPY signature');
    const flags = (await r.take(4, 'its header')).readUInt32BE(0);
    if (flags & INCOMPATIBLE_FLAGS) throw damaged(`sets header flags 0x${flags.toString(16)} (OIDs or a newer format), which this reader does not know`);
    const ext = (await r.take(4, 'its header')).readInt32BE(0);
    if (ext < 0 || ext > MAX_HEADER_EXTENSION) throw damaged(`has a header extension of ${ext} bytes (0 to ${MAX_HEADER_EXTENSION} allowed)`);
    if (ext) await r.take(ext, 'its header extension');
    for (let tuple = 0; ; tuple++) {
      const width = (await r.take(2, `tuple ${tuple}`)).readInt16BE(0);
      if (width === TRAILER) break;
      if (width !== shape.maxBytes.length) throw damaged(`has ${width} fields in tuple ${tuple}, expected ${shape.maxBytes.length}`);
      const fields: (Buffer | null)[] = [];
      for (let i = 0; i < width; i++) {
        const len = (await r.take(4, `tuple ${tuple}`)).readInt32BE(0);
        if (len === NULL_FIELD) { fields.push(null); continue; }
        if (len < 0) throw damaged(`gives field ${i} of tuple ${tuple} a length of ${len}`);
        if (len > shape.maxBytes[i]) throw damaged(`gives field ${i} of tuple ${tuple} ${len} bytes, over its ${shape.maxBytes[i]}-byte bound`);
        fields.push(await r.take(len, `field ${i} of tuple ${tuple}`));
      }
      yield fields;
    }
    if (!(await r.atEnd())) throw damaged('goes on after its trailer');
  } finally {
    await it.return?.();
  }
}

/** A binary int4 field (4 bytes, big-endian), or an IntegrityError naming `what`. */
export function int4Of(field: Buffer | null, what: string, where: string): number {
  return intOf(field, 4, what, where);
}

/** A binary int8 field (8 bytes, big-endian) that fits a JS number exactly, or an IntegrityError naming `what`. */
export function int8Of(field: Buffer | null, what: string, where: string): number {
  return intOf(field, 8, what, where);
}

function intOf(field: Buffer | null, bytes: 4 | 8, what: string, where: string): number {
  if (field?.length !== bytes) throw new IntegrityError(`the binary COPY stream gives ${what} as ${field ? `${field.length} bytes` : 'NULL'}, not a ${bytes}-byte integer`, { where });
  const n = bytes === 4 ? field.readInt32BE(0) : Number(field.readBigInt64BE(0));
  if (!Number.isSafeInteger(n)) throw new IntegrityError(`the binary COPY stream gives ${what} as ${field.readBigInt64BE(0)}, beyond what smol counts exactly`, { where });
  return n;
}
