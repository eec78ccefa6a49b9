/** A request stream answered by DONE or ERROR (CONFIGURE, SHUTDOWN). */
import type { Frame } from './codec.js';
import { ProtocolError } from './codec.js';
import type { StreamHandler } from './flow.js';
import { guestError, quiet } from './guest-errors.js';
import { decodeError } from './payloads.js';
import { FrameType } from './protocol.js';

export class SimpleHandler implements StreamHandler {
  /** DONE's payload (empty for most requests). */
  readonly result: Promise<Buffer>;
  private settle!: { resolve(p: Buffer): void; reject(e: Error): void };
  constructor(
    readonly id: number,
    private readonly what: string,
  ) {
    this.result = quiet(new Promise((resolve, reject) => (this.settle = { resolve, reject })));
  }
  frame(f: Frame): boolean {
    if (f.type === FrameType.done) {
      this.settle.resolve(f.payload);
      return true;
    }
    if (f.type === FrameType.error) {
      const { code, message } = decodeError(f.payload);
      this.settle.reject(guestError(code, message || `${this.what} failed`));
      return true;
    }
    throw new ProtocolError(`stream ${this.id}: unexpected frame type ${f.type} for ${this.what}`);
  }
  fail(err: Error): void {
    this.settle.reject(err);
  }
}
