/**
 * `smol machine exec --stream`: output for CI logs. Each complete line is written at once with a prefix, so
 * the lines of several machines (or of stdout and stderr) interleave whole, never mid-line; a last line
 * without a newline is written, with one, when the command ends.
 */
import { Writable } from 'node:stream';

export class LinePrefixer extends Writable {
  private pending: Buffer = Buffer.alloc(0);

  constructor(private readonly prefix: string, private readonly out: NodeJS.WritableStream) {
    super();
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    const buf = this.pending.length ? Buffer.concat([this.pending, chunk]) : chunk;
    const last = buf.lastIndexOf(0x0a);
    if (last < 0) {
      this.pending = buf;
      return cb();
    }
    this.pending = buf.subarray(last + 1);
    const lines = buf.subarray(0, last).toString('utf8').split('\n');
    this.out.write(lines.map((l) => `${this.prefix}${l}\n`).join(''));
    cb();
  }

  /** Write what is left of an unterminated last line. */
  flush(): void {
    if (!this.pending.length) return;
    this.out.write(`${this.prefix}${this.pending.toString('utf8')}\n`);
    this.pending = Buffer.alloc(0);
  }
}
