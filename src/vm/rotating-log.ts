/**
 * A log file the guest decides the length of (a detached run's output), held to a cap on the host's disk the
 * way the console keeper (host/conlog) holds console.log: when the next bytes would pass the cap, FILE moves
 * to FILE.1 and writing starts anew, so the two together never exceed twice the cap, and `machine logs`
 * (qemu/console.ts) reads them as one log. A full host disk drops bytes rather than failing the run.
 */
import fs from 'node:fs';
import { Writable } from 'node:stream';
import { rotatedLog } from './qemu/console.js';

export class RotatingLog extends Writable {
  private fd: number;
  private size: number;

  constructor(private readonly file: string, private readonly maxBytes: number) {
    super();
    this.fd = fs.openSync(file, 'a');
    this.size = fs.fstatSync(this.fd).size;
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    try {
      for (let off = 0; off < chunk.length;) {
        if (this.size >= this.maxBytes) this.rotate();
        const want = Math.min(chunk.length - off, this.maxBytes - this.size);
        off += want;
        this.size += want;
        this.writeAll(chunk.subarray(off - want, off));
      }
      cb();
    } catch (err) {
      cb(err as Error);
    }
  }

  override _final(cb: (err?: Error | null) => void): void {
    fs.closeSync(this.fd);
    cb();
  }

  private writeAll(buf: Buffer): void {
    try {
      for (let done = 0; done < buf.length;) done += fs.writeSync(this.fd, buf, done);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOSPC' && (err as NodeJS.ErrnoException).code !== 'EDQUOT') throw err;
    }
  }

  private rotate(): void {
    fs.closeSync(this.fd);
    fs.renameSync(this.file, rotatedLog(this.file));
    this.fd = fs.openSync(this.file, 'a');
    this.size = 0;
  }
}
