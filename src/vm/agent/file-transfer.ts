/** PUT and GET streams: host<->guest file copies under flow control. */
import type { Readable, Writable } from 'node:stream';
import { GuestChannelError } from '../../errors/index.js';
import type { Frame } from './codec.js';
import { ProtocolError } from './codec.js';
import { destroySafely, InboundReadable, OutboundWriter, outboundWritable, type ChannelPort, type StreamHandler } from './flow.js';
import { guestError, quiet } from './guest-errors.js';
import { decodeError, decodeInfo, decodeU32, encodeError } from './payloads.js';
import { Channel, FrameType } from './protocol.js';

export class PutHandler implements StreamHandler {
  /** Bytes written in the guest; settles on DONE or ERROR. */
  readonly result: Promise<number>;
  readonly sink: Writable;
  private readonly writer: OutboundWriter;
  private settle!: { resolve(n: number): void; reject(e: Error): void };
  private done = false;

  constructor(
    private readonly port: ChannelPort,
    readonly id: number,
    private readonly path: string,
  ) {
    this.writer = new OutboundWriter(port, id);
    this.sink = outboundWritable(this.writer, (err) => this.abort(err ?? new Error(`put ${path} failed: the source stream closed before its end`)));
    this.result = quiet(new Promise((resolve, reject) => (this.settle = { resolve, reject })));
  }

  /** The local source failed: tell the guest to drop the partial file. */
  abort(err: Error): void {
    if (this.done) return;
    this.port.send(FrameType.error, 0, this.id, encodeError(0, 'aborted by the host'));
    this.port.forget(this.id);
    this.fail(err);
  }

  frame(f: Frame): boolean {
    switch (f.type) {
      case FrameType.window:
        if (f.flags !== Channel.in) throw new ProtocolError(`stream ${this.id}: WINDOW for channel ${f.flags}`);
        this.writer.grant(decodeU32(f.payload, 'WINDOW'));
        return false;
      case FrameType.done:
        this.done = true;
        this.writer.close();
        this.settle.resolve(f.payload.length === 8 ? Number(f.payload.readBigUInt64LE(0)) : 0);
        return true;
      case FrameType.error: {
        const { code, message } = decodeError(f.payload);
        this.fail(guestError(code, message || `put ${this.path} failed`));
        return true;
      }
      default:
        throw new ProtocolError(`stream ${this.id}: unexpected frame type ${f.type} for a put`);
    }
  }

  fail(err: Error): void {
    if (this.done) return;
    this.done = true;
    this.writer.close(err);
    this.settle.reject(err);
  }
}

export interface GuestFile {
  size: number;
  mode: number;
  stream: Readable;
}

export class GetHandler implements StreamHandler {
  /** Settles on INFO (the data follows on .stream) or on an error before it. */
  readonly info: Promise<GuestFile>;
  private readonly data: InboundReadable;
  private settle!: { resolve(f: GuestFile): void; reject(e: Error): void };
  private gotInfo = false;
  private done = false;
  /** The size INFO announced, and what came: a guest may not send more, nor end with less (#31.7). */
  private size = 0;
  private received = 0;

  constructor(
    private readonly port: ChannelPort,
    readonly id: number,
    private readonly path: string,
  ) {
    this.data = new InboundReadable(port, id, Channel.out, () => this.cancel());
    // so a failure reaches a reader that attaches after it (destroySafely drops errors nobody listens to)
    this.data.on('error', () => undefined);
    this.info = quiet(new Promise((resolve, reject) => (this.settle = { resolve, reject })));
  }

  frame(f: Frame): boolean {
    switch (f.type) {
      case FrameType.info: {
        if (this.gotInfo) throw new ProtocolError(`stream ${this.id}: second INFO`);
        this.gotInfo = true;
        const { size, mode } = decodeInfo(f.payload);
        this.size = size;
        this.settle.resolve({ size, mode, stream: this.data });
        return false;
      }
      case FrameType.data:
        if (!this.gotInfo || f.flags !== Channel.out) throw new ProtocolError(`stream ${this.id}: unexpected file data`);
        // a symlink to /dev/zero announces 0 bytes and never ends: cut off at the first byte too many
        if (this.received + f.payload.length > this.size) return this.refuse(`sent more than the ${this.size} bytes it announced`);
        this.received += f.payload.length;
        if (!this.data.deliver(f.payload)) throw new ProtocolError(`stream ${this.id}: over-window file data`);
        return false;
      case FrameType.eof:
        if (!this.gotInfo || f.flags !== Channel.out) throw new ProtocolError(`stream ${this.id}: bad EOF`);
        if (this.received < this.size) return this.refuse(`ended after ${this.received} of the ${this.size} bytes it announced`);
        if (!this.data.finish()) throw new ProtocolError(`stream ${this.id}: bad EOF`);
        return false;
      case FrameType.done:
        if (!this.data.finished) throw new ProtocolError(`stream ${this.id}: DONE before EOF`);
        this.done = true;
        return true;
      case FrameType.error: {
        const { code, message } = decodeError(f.payload);
        this.fail(guestError(code, message || `get ${this.path} failed`));
        return true;
      }
      default:
        throw new ProtocolError(`stream ${this.id}: unexpected frame type ${f.type} for a get`);
    }
  }

  fail(err: Error): void {
    if (this.done) return;
    this.done = true;
    this.settle.reject(err);
    if (!this.data.finished) destroySafely(this.data, err);
  }

  /** The guest broke its own INFO: it is told to stop, and the reader gets the error. Ends the stream. */
  private refuse(what: string): true {
    this.port.send(FrameType.error, 0, this.id, encodeError(0, 'refused by the host'));
    this.port.forget(this.id);
    this.fail(new GuestChannelError(`get ${this.path} failed: the guest ${what}`, {
      hint: 'The file changed size while it was read, or it is not a regular file (a device, a /proc or /sys file); copy such contents with: smol machine exec NAME -- cat PATH > FILE',
    }));
    return true;
  }

  /** The consumer destroyed the stream before EOF: stop the guest sending. */
  private cancel(): void {
    if (this.done) return;
    this.done = true;
    this.port.send(FrameType.error, 0, this.id, encodeError(0, 'cancelled by the host'));
    this.port.forget(this.id);
  }
}
