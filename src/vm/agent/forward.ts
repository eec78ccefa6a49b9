/** Guest-initiated CONNECT(service) streams, exposed to the host as Duplex streams. */
import { Duplex } from 'node:stream';
import type { Frame } from './codec.js';
import { ProtocolError } from './codec.js';
import { destroySafely, InboundCredit, OutboundWriter, type ChannelPort, type StreamHandler } from './flow.js';
import { decodeU32, encodeError, u32 } from './payloads.js';
import { Channel, FrameType } from './protocol.js';

/** Guest->host bytes arrive on channel 1; host->guest bytes go on channel 0. */
export class ForwardedStream extends Duplex implements StreamHandler {
  private readonly credit: InboundCredit;
  private readonly writer: OutboundWriter;
  private guestEof = false;
  private hostEof = false;
  private over = false;

  constructor(
    private readonly port: ChannelPort,
    readonly id: number,
    readonly service: string,
  ) {
    super({ readableHighWaterMark: 256 * 1024, writableHighWaterMark: 256 * 1024 });
    this.credit = new InboundCredit(port.hostWindow, (n) => port.send(FrameType.window, Channel.out, id, u32(n)));
    this.writer = new OutboundWriter(port, id);
  }

  frame(f: Frame): boolean {
    switch (f.type) {
      case FrameType.data:
        if (f.flags !== Channel.out || this.guestEof || !this.credit.accept(f.payload.length)) {
          throw new ProtocolError(`stream ${this.id}: forwarded data beyond the window, after EOF or on channel ${f.flags}`);
        }
        if (!this.destroyed) this.credit.pushed(this.push(f.payload));
        return false;
      case FrameType.eof:
        if (f.flags !== Channel.out || this.guestEof) throw new ProtocolError(`stream ${this.id}: bad EOF`);
        this.guestEof = true;
        if (!this.destroyed) this.push(null);
        return this.maybeOver();
      case FrameType.window:
        if (f.flags !== Channel.in) throw new ProtocolError(`stream ${this.id}: WINDOW for channel ${f.flags}`);
        this.writer.grant(decodeU32(f.payload, 'WINDOW'));
        return false;
      case FrameType.error:
        this.over = true;
        this.writer.close();
        this.credit.release();
        this.destroy();
        return true;
      default:
        throw new ProtocolError(`stream ${this.id}: unexpected frame type ${f.type} for a forwarded stream`);
    }
  }

  fail(err: Error): void {
    if (this.over) return;
    this.over = true;
    this.writer.close();
    destroySafely(this, err);
  }

  override _read(): void {
    this.credit.read();
  }
  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    this.writer.write(chunk, cb);
  }
  override _final(cb: (err?: Error | null) => void): void {
    this.writer.end();
    this.hostEof = true;
    if (this.maybeOver()) this.port.forget(this.id);
    cb();
  }
  override _destroy(err: Error | null, cb: (err?: Error | null) => void): void {
    this.credit.release();
    if (!this.over) {
      this.over = true; // the host side closed it early: reset the guest connection
      this.port.send(FrameType.error, 0, this.id, encodeError(0, 'closed by the host'));
      this.port.forget(this.id);
    }
    this.writer.close();
    cb(err);
  }

  private maybeOver(): boolean {
    if (!this.guestEof || !this.hostEof || this.over) return false;
    this.over = true;
    return true;
  }
}
