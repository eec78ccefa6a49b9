/** One EXEC stream: a guest process with streamed stdio, signals, resize and its exit status. */
import type { Readable, Writable } from 'node:stream';
import type { Frame } from './codec.js';
import { ProtocolError } from './codec.js';
import { destroySafely, InboundReadable, OutboundWriter, outboundWritable, type ChannelPort, type StreamHandler } from './flow.js';
import { guestError, quiet } from './guest-errors.js';
import { decodeError, decodeExit, decodeU32, encodeError, encodeResize, u32 } from './payloads.js';
import { Channel, FrameType } from './protocol.js';
import { signalName, signalNumber } from './signals.js';

export interface ExitStatus {
  /** Exit code, or null when a signal ended the process. */
  code: number | null;
  /** Signal name such as 'SIGINT', or null when the process exited. */
  signal: string | null;
}

export class ExecSession implements StreamHandler {
  readonly stdout: Readable;
  /** Empty in tty mode: the terminal merges everything into stdout. */
  readonly stderr: Readable;
  readonly stdin: Writable;
  /** The guest pid once the process started; rejects if it could not start. */
  readonly pid: Promise<number>;
  /** Settles after stdout and stderr ended. Rejects if the command could not start or the channel broke. */
  readonly exit: Promise<ExitStatus>;

  private readonly out: InboundReadable;
  private readonly err: InboundReadable;
  private readonly writer: OutboundWriter;
  private settlePid!: { resolve(pid: number): void; reject(e: Error): void };
  private settleExit!: { resolve(s: ExitStatus): void; reject(e: Error): void };
  private started = false;
  private done = false;

  constructor(
    private readonly port: ChannelPort,
    readonly id: number,
    private readonly argv0: string,
  ) {
    this.out = new InboundReadable(port, id, Channel.out);
    this.err = new InboundReadable(port, id, Channel.err);
    this.stdout = this.out;
    this.stderr = this.err;
    this.writer = new OutboundWriter(port, id);
    this.stdin = outboundWritable(this.writer, () => this.writer.end());
    this.pid = quiet(new Promise((resolve, reject) => (this.settlePid = { resolve, reject })));
    this.exit = quiet(new Promise((resolve, reject) => (this.settleExit = { resolve, reject })));
  }

  /** Sends a signal to the guest process: a name ('SIGINT', 'TERM') or a Linux number. */
  signal(sig: string | number): void {
    const n = signalNumber(sig);
    if (!this.done) this.port.send(FrameType.signal, 0, this.id, u32(n));
  }
  kill(): void {
    this.signal('SIGKILL');
  }
  /** New terminal size (tty mode). */
  resize(rows: number, cols: number): void {
    if (!this.done) this.port.send(FrameType.resize, 0, this.id, encodeResize(rows, cols));
  }
  /** Abandons the process: the guest kills it and frees the stream. */
  abort(): void {
    if (this.done) return;
    this.port.send(FrameType.error, 0, this.id, encodeError(0, 'aborted by the host'));
    this.port.forget(this.id);
    this.fail(guestError(0, `exec ${this.argv0} aborted`));
  }

  frame(f: Frame): boolean {
    switch (f.type) {
      case FrameType.started:
        if (this.started) throw new ProtocolError(`stream ${this.id}: second STARTED`);
        this.started = true;
        this.settlePid.resolve(decodeU32(f.payload, 'STARTED'));
        return false;
      case FrameType.data:
        if (!this.channel(f).deliver(f.payload)) throw new ProtocolError(`stream ${this.id}: data beyond the granted window or after EOF`);
        return false;
      case FrameType.eof:
        if (!this.channel(f).finish()) throw new ProtocolError(`stream ${this.id}: second EOF`);
        return false;
      case FrameType.window:
        if (f.flags !== Channel.in) throw new ProtocolError(`stream ${this.id}: WINDOW for channel ${f.flags}`);
        this.writer.grant(decodeU32(f.payload, 'WINDOW'));
        return false;
      case FrameType.exit: {
        if (!this.started) throw new ProtocolError(`stream ${this.id}: EXIT before STARTED`);
        const { code, signo } = decodeExit(f.payload);
        this.finishStreams();
        this.settleExit.resolve({ code, signal: signo === null ? null : signalName(signo) });
        return true;
      }
      case FrameType.error: {
        const { code, message } = decodeError(f.payload);
        this.fail(guestError(code, message || `exec ${this.argv0} failed`));
        return true;
      }
      default:
        throw new ProtocolError(`stream ${this.id}: unexpected frame type ${f.type} for an exec`);
    }
  }

  fail(err: Error): void {
    if (this.done) return;
    this.done = true;
    this.settlePid.reject(err);
    this.settleExit.reject(err);
    this.writer.close();
    for (const s of [this.out, this.err]) if (!s.finished) destroySafely(s, err);
    if (!this.stdin.destroyed) this.stdin.destroy();
  }

  private channel(f: Frame): InboundReadable {
    if (f.flags === Channel.out) return this.out;
    if (f.flags === Channel.err) return this.err;
    throw new ProtocolError(`stream ${this.id}: data on channel ${f.flags}`);
  }

  private finishStreams(): void {
    this.done = true;
    this.out.finish();
    this.err.finish();
    this.writer.close();
  }
}
