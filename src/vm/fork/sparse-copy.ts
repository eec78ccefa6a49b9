/**
 * Copies a memory file keeping its holes. Guest RAM that was never touched is a hole in the tmpfs file;
 * copying it as zeros would make every template cost the guest's full size in host memory, and be slower.
 */
import fs from 'node:fs';
import { mapFsError } from '../../errors/index.js';

const CHUNK = 1 << 20;
const PAGE = 1 << 16;
const ZERO = Buffer.alloc(PAGE);

/** Returns the bytes actually written (the non-zero part). */
export function sparseCopy(src: string, dst: string): number {
  let inFd: number | undefined;
  let outFd: number | undefined;
  let written = 0;
  try {
    inFd = fs.openSync(src, 'r');
    outFd = fs.openSync(dst, 'w', 0o600);
    const size = fs.fstatSync(inFd).size;
    const buf = Buffer.allocUnsafe(CHUNK);
    for (let off = 0; off < size; off += CHUNK) {
      const n = fs.readSync(inFd, buf, 0, Math.min(CHUNK, size - off), off);
      for (let p = 0; p < n; p += PAGE) {
        const len = Math.min(PAGE, n - p);
        if (buf.compare(ZERO, 0, len, p, p + len) === 0) continue;
        fs.writeSync(outFd, buf, p, len, off + p);
        written += len;
      }
      if (n === 0) break;
    }
    fs.ftruncateSync(outFd, size);
    return written;
  } catch (err) {
    if (outFd !== undefined) fs.rmSync(dst, { force: true });
    throw mapFsError(err, `copying the memory template ${src}`);
  } finally {
    if (inFd !== undefined) fs.closeSync(inFd);
    if (outFd !== undefined) fs.closeSync(outFd);
  }
}
