/** Where an exec's output goes in the API: a capped buffer (buffered exec) or SSE events (streamed exec). */
import type http from 'node:http';
import { Writable } from 'node:stream';

/** Keeps the first `cap` bytes and drains the rest unseen, so a chatty command never blocks on a full buffer. */
export class CappedBuffer extends Writable {
  private chunks: Buffer[] = [];
  private size = 0;
  truncated = false;

  constructor(private readonly cap: number) { super(); }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: () => void): void {
    const room = this.cap - this.size;
    if (chunk.length > room) this.truncated = true;
    if (room > 0) {
      const kept = chunk.length > room ? chunk.subarray(0, room) : chunk;
      this.chunks.push(kept);
      this.size += kept.length;
    }
    cb();
  }

  bytes(): Buffer { return Buffer.concat(this.chunks); }
}

/** One SSE event; `data` is one line of JSON. */
export const sseEvent = (event: string, data: unknown) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;

/**
 * Output as `stdout`/`stderr` events. A write completes only when the response took it without buffering
 * (or drained), so the exec's pipe stops reading from the guest while the client is slow: memory stays bounded.
 */
export class SseSink extends Writable {
  constructor(private readonly res: http.ServerResponse, private readonly event: 'stdout' | 'stderr') { super({ highWaterMark: 64 * 1024 }); }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error) => void): void {
    if (this.res.destroyed) return cb();
    if (this.res.write(sseEvent(this.event, { data: chunk.toString('base64') }))) return cb();
    const done = () => { this.res.off('drain', done); this.res.off('close', done); cb(); };
    this.res.on('drain', done);
    this.res.on('close', done);
  }
}
