/**
 * Bounds on one copy out of a guest: how many bytes it may send, how long it may send nothing, and the
 * user's Ctrl-C or SIGTERM. A guest that floods, stalls or never answers ends the copy with an error
 * instead of filling the host disk or hanging smol (#31.7).
 */
import { Transform } from 'node:stream';
import { InterruptedError, NoSpaceError, TimeoutError } from '../errors/index.js';
import { CP_IDLE_MS, CP_MAX_BYTES } from './limits.js';

export interface CopyLimits {
  /** Bytes the guest may send: a file's contents, or with -r the whole tar stream. */
  maxBytes?: number;
  /** How long the guest may send nothing before the copy fails (124). */
  idleMs?: number;
  /** Aborted, with an InterruptedError (130 or 143) as reason, when the user stops smol. */
  signal?: AbortSignal;
}

function size(n: number): string {
  const units = ['bytes', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${+n.toFixed(1)} ${units[i]}`;
}

export class CopyGuard {
  readonly maxBytes: number;
  readonly idleMs: number;
  /** Aborted, with the error the copy fails with, once any bound is hit. */
  readonly signal: AbortSignal;
  private readonly ctl = new AbortController();
  private timer: NodeJS.Timeout | undefined;
  private bytes = 0;
  private readonly onUserAbort = () => {
    const r: unknown = this.limits.signal?.reason;
    this.stop(r instanceof InterruptedError ? r : new InterruptedError('interrupted'));
  };

  constructor(private readonly what: string, private readonly limits: CopyLimits = {}) {
    this.maxBytes = limits.maxBytes ?? CP_MAX_BYTES;
    this.idleMs = limits.idleMs ?? CP_IDLE_MS;
    this.signal = this.ctl.signal;
    if (limits.signal?.aborted) this.onUserAbort();
    else limits.signal?.addEventListener('abort', this.onUserAbort, { once: true });
    this.poke();
  }

  /** Bytes the guest has sent so far. */
  get received(): number {
    return this.bytes;
  }

  /** The guest did something: the idle clock starts again. */
  poke(): void {
    if (this.signal.aborted) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.stop(new TimeoutError(`cp failed: the guest sent nothing for ${this.idleMs / 1000}s while copying ${this.what}`, {
      hint: 'A FIFO, a device or a stalled guest never ends. If the guest is only slow, raise --idle-timeout.',
    })), this.idleMs);
  }

  /** Counts `n` more bytes from the guest; past the cap the copy stops. */
  take(n: number): void {
    this.bytes += n;
    this.poke();
    if (this.bytes > this.maxBytes) this.stop(this.overCap());
  }

  overCap(): NoSpaceError {
    return new NoSpaceError(`cp failed: ${this.what} is larger than the ${size(this.maxBytes)} --max-size limit; nothing was written`, {
      hint: 'If you expect it to be that large, raise the limit: smol machine cp --max-size 50G ...',
    });
  }

  /** A pass-through that counts what the guest sends. */
  meter(): Transform {
    return new Transform({
      transform: (chunk: Buffer, _enc, cb) => {
        this.take(chunk.length);
        cb(this.signal.aborted ? (this.signal.reason as Error) : null, chunk);
      },
    });
  }

  stop(err: Error): void {
    if (this.signal.aborted) return;
    clearTimeout(this.timer);
    this.ctl.abort(err);
  }

  /** `p`, unless a bound is hit first: then that bound's error. */
  race<T>(p: Promise<T>): Promise<T> {
    if (this.signal.aborted) return Promise.reject(this.signal.reason as Error);
    return new Promise<T>((resolve, reject) => {
      const onStop = () => reject(this.signal.reason as Error);
      this.signal.addEventListener('abort', onStop, { once: true });
      p.then(resolve, reject).finally(() => this.signal.removeEventListener('abort', onStop));
    });
  }

  /** The error to report for `err`: the bound that stopped the copy, when one did (streams then fail with AbortError). */
  cause(err: unknown): unknown {
    return this.signal.aborted ? this.signal.reason : err;
  }

  dispose(): void {
    clearTimeout(this.timer);
    this.limits.signal?.removeEventListener('abort', this.onUserAbort);
  }
}
