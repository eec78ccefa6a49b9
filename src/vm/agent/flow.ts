/**
 * Credit-based flow control for one stream direction. Inbound (guest->host): the guest may send only
 * what the host granted; the host grants more as the consumer reads. Outbound (host->guest): writes
 * wait for credit from WINDOW frames. Memory per stream stays within window + highWaterMark.
 */
import { Duplex, Readable, Writable } from 'node:stream';
import type { Frame } from './codec.js';
import { Channel, FrameType } from './protocol.js';
import { u32 } from './payloads.js';

/** What stream handlers need from the client. */
export interface ChannelPort {
  send(type: number, flags: number, stream: number, payload?: Buffer): boolean;
  whenDrained(cb: () => void): void;
  /** The stream ended locally; later guest frames for it are ignored. */
  forget(stream: number): void;
  readonly maxPayload: number;
  /** Credit the guest grants per host->guest channel at stream start. */
  readonly guestWindow: number;
  /** Credit the host grants per guest->host channel at stream start. */
  readonly hostWindow: number;
}

export interface StreamHandler {
  /** Handles a guest frame; returns true when it ended the stream. Throws ProtocolError on a frame the stream cannot take. */
  frame(f: Frame): boolean;
  /** The channel died; settle everything with err. */
  fail(err: Error): void;
}

/** Emits 'error' only when someone listens, so a broken guest can never crash the host with an unhandled event. */
export function destroySafely(s: Readable | Writable | Duplex, err: Error): void {
  if (s.destroyed) return;
  if (s.listenerCount('error') > 0) s.destroy(err);
  else s.destroy();
}

export class InboundCredit {
  private remaining: number;
  private unacked = 0;
  private blocked = false;
  private released = false;
  constructor(
    private readonly window: number,
    private readonly grant: (n: number) => void,
  ) {
    this.remaining = window;
  }

  /** Accounts for n bytes from the guest; false when they exceed the credit it was given. */
  accept(n: number): boolean {
    if (n > this.remaining) return false;
    this.remaining -= n;
    this.unacked += n;
    if (this.released) this.flush(true);
    return true;
  }
  /** After push(): false means the consumer is behind, so hold the credit until it reads. */
  pushed(ok: boolean): void {
    if (ok) this.flush(false);
    else this.blocked = true;
  }
  read(): void {
    this.blocked = false;
    this.flush(false);
  }
  /** Nobody will read any more (consumer destroyed the stream): keep the guest from stalling. */
  release(): void {
    this.released = true;
    this.flush(true);
  }

  private flush(force: boolean): void {
    if (this.unacked === 0 || (this.blocked && !force)) return;
    if (!force && this.unacked < this.window / 4) return;
    const n = this.unacked;
    this.unacked = 0;
    this.remaining += n;
    this.grant(n);
  }
}

/** A Readable fed by DATA frames on one guest->host channel. */
export class InboundReadable extends Readable {
  readonly credit: InboundCredit;
  private eof = false;
  constructor(
    port: ChannelPort,
    stream: number,
    channel: number,
    private readonly onEarlyDestroy?: () => void,
  ) {
    super({ highWaterMark: 256 * 1024 });
    this.credit = new InboundCredit(port.hostWindow, (n) => port.send(FrameType.window, channel, stream, u32(n)));
  }

  /** Returns false when the guest overran its window (a protocol violation). */
  deliver(chunk: Buffer): boolean {
    if (this.eof || !this.credit.accept(chunk.length)) return false;
    if (this.destroyed) return true;
    this.credit.pushed(this.push(chunk));
    return true;
  }
  /** EOF from the guest; false if it already sent one. */
  finish(): boolean {
    if (this.eof) return false;
    this.eof = true;
    if (!this.destroyed) this.push(null);
    return true;
  }
  get finished(): boolean {
    return this.eof;
  }
  override _read(): void {
    this.credit.read();
  }
  override _destroy(err: Error | null, cb: (err?: Error | null) => void): void {
    this.credit.release();
    if (!this.eof) this.onEarlyDestroy?.();
    cb(err);
  }
}

/** Sends host->guest DATA on channel 0 within the guest's credit. */
export class OutboundWriter {
  private credit: number;
  private pending: { chunk: Buffer; cb: (err?: Error | null) => void } | undefined;
  private closed = false;
  private error: Error | undefined;
  constructor(
    private readonly port: ChannelPort,
    private readonly stream: number,
  ) {
    this.credit = port.guestWindow;
  }

  write(chunk: Buffer, cb: (err?: Error | null) => void): void {
    if (this.closed) return cb(this.error); // the guest side is gone: input is dropped (like a closed pipe)
    this.pending = { chunk, cb };
    this.pump();
  }
  grant(n: number): void {
    this.credit += n;
    this.pump();
  }
  end(): void {
    if (!this.closed) this.port.send(FrameType.eof, Channel.in, this.stream);
  }
  close(err?: Error): void {
    this.closed = true;
    this.error = err;
    const p = this.pending;
    this.pending = undefined;
    p?.cb(err);
  }

  private pump(): void {
    const p = this.pending;
    if (!p) return;
    let ok = true;
    while (p.chunk.length > 0 && this.credit > 0) {
      const n = Math.min(p.chunk.length, this.credit, this.port.maxPayload);
      ok = this.port.send(FrameType.data, Channel.in, this.stream, p.chunk.subarray(0, n)) && ok;
      this.credit -= n;
      p.chunk = p.chunk.subarray(n);
    }
    if (p.chunk.length > 0) return;
    this.pending = undefined;
    if (ok) p.cb();
    else this.port.whenDrained(() => p.cb());
  }
}

/** A Writable over an OutboundWriter; end() sends EOF. */
export function outboundWritable(writer: OutboundWriter, onEarlyDestroy?: (err: Error | null) => void): Writable {
  let finished = false;
  return new Writable({
    highWaterMark: 256 * 1024,
    write(chunk: Buffer, _enc, cb) {
      writer.write(chunk, cb);
    },
    final(cb) {
      finished = true;
      writer.end();
      cb();
    },
    destroy(err, cb) {
      if (!finished) onEarlyDestroy?.(err);
      writer.close();
      cb(err);
    },
  });
}
