/** A guest command's output kept up to a cap: the rest is counted and dropped, never buffered. */
import { Writable } from 'node:stream';

export class CappedSink extends Writable {
  private readonly chunks: Buffer[] = [];
  private kept = 0;
  /** Every byte the command wrote, kept or not. */
  total = 0;

  constructor(private readonly cap: number) { super(); }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    this.total += chunk.length;
    const room = this.cap - this.kept;
    if (room > 0) {
      const part = chunk.length > room ? chunk.subarray(0, room) : chunk;
      this.chunks.push(part);
      this.kept += part.length;
    }
    cb();
  }

  get truncated(): boolean { return this.total > this.kept; }

  /** As UTF-8; a multi-byte character cut by the cap becomes U+FFFD rather than an error. */
  text(): string { return Buffer.concat(this.chunks).toString('utf8'); }
}
