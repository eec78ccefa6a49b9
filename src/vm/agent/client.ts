/**
 * AgentClient: the host end of the agent protocol over any byte stream (a unix socket to QEMU's
 * virtio-serial chardev, or a test agent's --listen socket). It never trusts the guest: any
 * malformed frame ends the client with a GuestChannelError that rejects every pending operation.
 */
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import net from 'node:net';
import type { Duplex, Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { GuestChannelError } from '../../errors/index.js';
import { encodeHeader, findHello, FrameDecoder, ProtocolError, type Frame } from './codec.js';
import { ExecSession } from './exec-session.js';
import { GetHandler, PutHandler, type GuestFile } from './file-transfer.js';
import type { ChannelPort, StreamHandler } from './flow.js';
import { ForwardedStream } from './forward.js';
import { quiet } from './guest-errors.js';
import { decodeError, decodeHello, encodeConfigure, encodeExec, encodeGet, encodeHello, encodePut, type ConfigureRequest, type ExecRequest, type Hello } from './payloads.js';
import { Capability, FrameType, GUEST_STREAM_BIT, HEADER_LENGTH, HELLO_MAGIC, HOST_WINDOW, MAX_GUEST_STREAMS, MAX_PAYLOAD, MIN_PEER_PAYLOAD, OUTBOUND_BUDGET, PING_MAX, PROTOCOL_VERSION, PutFlag, ShutdownFlag } from './protocol.js';
import { SimpleHandler } from './simple-handler.js';
import { AGENT_HELLO_RETRY_CAP_MS, AGENT_HELLO_TIMEOUT_MS } from '../limits.js';

export interface ConnectOptions {
  /** Handshake deadline (default 10 s). */
  timeoutMs?: number;
  /** Credit granted to the guest per stream channel (default 1 MiB). */
  window?: number;
  /** Used in error messages, e.g. the machine name. */
  name?: string;
  /** The longest wait before an unanswered HELLO is sent again (default 1 s; the first resends come sooner). */
  helloRetryMs?: number;
}

export interface RunResult {
  code: number | null;
  signal: string | null;
  stdout: Buffer;
  stderr: Buffer;
}

export type StreamListener = (stream: Duplex) => void;

export class AgentClient {
  /** The guest's HELLO: protocol version, capabilities, limits, agent name. */
  hello!: Hello;
  /** Resolves (never rejects) with the reason once the client is finished. */
  readonly closed: Promise<GuestChannelError>;

  private readonly decoder = new FrameDecoder();
  private readonly streams = new Map<number, StreamHandler>();
  private readonly listeners = new Map<string, StreamListener>();
  private readonly pings = new Map<number, { t0: number; resolve(ms: number): void; reject(e: Error): void }>();
  private readonly port: ChannelPort;
  private nextId = 1;
  private maxGuestId = 0;
  private pingSeq = 0;
  private failure: GuestChannelError | undefined;
  private corked = false;
  private throttled = false;
  private drainWaiters: Array<() => void> = [];
  private preamble = Buffer.alloc(0);
  private skipped = 0;
  private helloFound = false;
  private helloNonce = 0;
  private onHello: ((h: Hello) => void) | undefined;
  private resolveClosed!: (e: GuestChannelError) => void;
  private readonly label: string;

  private constructor(
    private readonly socket: Duplex,
    private readonly window: number,
    name: string | undefined,
  ) {
    this.label = name ? `guest channel of ${name}` : 'guest channel';
    this.closed = new Promise((resolve) => (this.resolveClosed = resolve));
    const client = this; // eslint-disable-line @typescript-eslint/no-this-alias
    this.port = {
      send: (type, flags, stream, payload) => this.send(type, flags, stream, payload),
      whenDrained: (cb) => this.whenDrained(cb),
      forget: (id) => this.streams.delete(id),
      get maxPayload() { return Math.min(MAX_PAYLOAD, client.hello?.maxPayload ?? MAX_PAYLOAD); },
      get guestWindow() { return client.hello?.window ?? 0; },
      hostWindow: window,
    };
    socket.on('data', (chunk: Buffer) => this.receive(chunk));
    socket.on('error', (err: NodeJS.ErrnoException) => {
      const gone = err.code === 'ECONNRESET' || err.code === 'EPIPE';
      this.fail(gone ? `${this.label} closed (${err.code})` : `${this.label} failed: ${err.message}`, err);
    });
    socket.on('end', () => this.fail(`${this.label} closed by the guest`));
    socket.on('close', () => this.fail(`${this.label} closed`));
  }

  /** Performs the HELLO handshake on an open byte stream. On failure the stream is destroyed. */
  static async connect(socket: Duplex, opts: ConnectOptions = {}): Promise<AgentClient> {
    const client = new AgentClient(socket, opts.window ?? HOST_WINDOW, opts.name);
    const timeoutMs = opts.timeoutMs ?? AGENT_HELLO_TIMEOUT_MS;
    const hello = new Promise<Hello>((resolve) => (client.onHello = resolve));
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        client.fail(`${client.label}: no HELLO from the agent within ${timeoutMs} ms`);
        reject(client.failure);
      }, timeoutMs);
    });
    const closed = quiet(client.closed.then((e) => Promise.reject(e)));
    // Resent after 25, 50, 100 … ms, then every helloRetryMs: on a serial port a HELLO can be swallowed by a
    // stale partial frame from an earlier host, and an older agent dropped the answer to about one connect in
    // 30 to a port idle for over 2 s (see docs/agent-protocol.md). Only the answer to the latest counts.
    const cap = opts.helloRetryMs ?? AGENT_HELLO_RETRY_CAP_MS;
    let retry: NodeJS.Timeout | undefined;
    const resend = (delay: number) => {
      retry = setTimeout(() => { client.sendHello(); resend(Math.min(delay * 2, cap)); }, delay);
    };
    client.sendHello();
    resend(Math.min(25, cap));
    try {
      client.hello = await Promise.race([hello, timeout, closed]);
      return client;
    } finally {
      clearTimeout(timer);
      clearTimeout(retry);
    }
  }

  /** Connects to a unix socket (QEMU's chardev or a test agent) and handshakes. */
  static async connectUnix(path: string, opts: ConnectOptions = {}): Promise<AgentClient> {
    const socket = net.createConnection(path);
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', resolve);
      socket.once('error', (e) => reject(new GuestChannelError(`connecting to ${path} failed: ${e.message}`, { cause: e, where: opts.name })));
    });
    return AgentClient.connect(socket, opts);
  }

  get isClosed(): boolean {
    return this.failure !== undefined;
  }

  exec(req: ExecRequest): ExecSession {
    if (req.argv.length === 0) throw new RangeError('exec: argv is empty');
    const payload = encodeExec(req);
    if (payload.length > MAX_PAYLOAD) throw new RangeError(`exec: argv and environment take ${payload.length} bytes; the limit is ${MAX_PAYLOAD}`);
    const id = this.allocate();
    const session = new ExecSession(this.port, id, req.argv[0]);
    this.open(id, session, FrameType.exec, payload);
    return session;
  }

  /** Runs a command to completion, collecting its output (use exec() for streaming). */
  async run(req: ExecRequest & { stdin?: Buffer | string }): Promise<RunResult> {
    const s = this.exec(req);
    s.stdin.end(req.stdin ?? '');
    const [stdout, stderr, status] = await Promise.all([collect(s.stdout), collect(s.stderr), s.exit]);
    return { ...status, stdout, stderr };
  }

  /** Copies a local file (path) or stream into the guest; the file appears atomically at EOF. */
  async putFile(source: Readable | string, guestPath: string, mode?: number, opts: { mkdirs?: boolean } = {}): Promise<{ bytes: number }> {
    const fileMode = mode ?? (typeof source === 'string' ? (await stat(source)).mode & 0o7777 : 0o644);
    const src = typeof source === 'string' ? createReadStream(source, { highWaterMark: 256 * 1024 }) : source;
    const id = this.allocate();
    const h = new PutHandler(this.port, id, guestPath);
    this.open(id, h, FrameType.put, encodePut(guestPath, fileMode, opts.mkdirs ? PutFlag.mkdirs : 0));
    pipeline(src, h.sink).catch((err: Error) => h.abort(err));
    return { bytes: await h.result };
  }

  /** Opens a guest file; its bytes follow on the returned stream. */
  getFile(guestPath: string): Promise<GuestFile> {
    const id = this.allocate();
    const h = new GetHandler(this.port, id, guestPath);
    this.open(id, h, FrameType.get, encodeGet(guestPath));
    return h.info;
  }

  /**
   * Hostname, machine-id, RNG seed and clock for a fresh or forked guest, and the fork-point release;
   * `released` is how many waiters that woke (null when none was asked for).
   */
  async configure(c: ConfigureRequest): Promise<{ released: number | null }> {
    const done = await this.request(FrameType.configure, encodeConfigure(c), 'configure');
    return { released: c.forkRelease && done.length >= 4 ? done.readUInt32LE(0) : null };
  }

  /** Asks the agent to sync and power off (reboot with {reboot: true}); resolves when it acknowledged. */
  async shutdown(opts: { reboot?: boolean } = {}): Promise<void> {
    const flags = Buffer.alloc(4);
    flags.writeUInt32LE(opts.reboot ? ShutdownFlag.reboot : 0, 0);
    await this.request(FrameType.shutdown, flags, 'shutdown');
  }

  /** Round trip in milliseconds. */
  ping(): Promise<number> {
    if (this.failure) return quiet(Promise.reject(this.failure));
    const seq = ++this.pingSeq >>> 0;
    const p = quiet(new Promise<number>((resolve, reject) => this.pings.set(seq, { t0: performance.now(), resolve, reject })));
    const b = Buffer.alloc(8);
    b.writeUInt32LE(seq, 0);
    this.send(FrameType.ping, 0, 0, b);
    return p;
  }

  /** Handles guest-initiated CONNECT(service) streams; unhandled services are refused. */
  onStream(service: string, handler: StreamListener): void {
    this.listeners.set(service, handler);
  }

  /** Ends the client: pending operations reject with GuestChannelError, the byte stream is destroyed. */
  close(): void {
    this.fail(`${this.label} closed by the host`);
  }

  private async request(type: number, payload: Buffer, what: string): Promise<Buffer> {
    const id = this.allocate();
    const h = new SimpleHandler(id, what);
    this.open(id, h, type, payload);
    return h.result;
  }

  private allocate(): number {
    if (this.failure) throw this.failure;
    if (this.nextId >= GUEST_STREAM_BIT) throw new GuestChannelError(`${this.label}: stream ids exhausted; reconnect`);
    return this.nextId++;
  }

  private open(id: number, h: StreamHandler, type: number, payload: Buffer): void {
    this.streams.set(id, h);
    this.send(type, 0, id, payload);
  }

  private send(type: number, flags: number, stream: number, payload?: Buffer): boolean {
    if (this.failure || this.socket.destroyed) return true;
    if (!this.corked) {
      // Frames produced in one tick leave in one writev.
      this.corked = true;
      this.socket.cork();
      process.nextTick(() => {
        this.corked = false;
        this.socket.uncork();
      });
    }
    const ok = this.socket.write(encodeHeader(type, flags, stream, payload?.length ?? 0));
    return payload && payload.length > 0 ? this.socket.write(payload) : ok;
  }

  private whenDrained(cb: () => void): void {
    if (this.failure) return cb();
    this.drainWaiters.push(cb);
    if (this.drainWaiters.length === 1) this.socket.once('drain', () => this.drained());
  }

  private drained(): void {
    const waiters = this.drainWaiters;
    this.drainWaiters = [];
    for (const cb of waiters) cb();
  }

  private receive(chunk: Buffer): void {
    if (this.failure) return;
    if (!this.helloFound) {
      const c = this.skipToHello(chunk);
      if (!c) return;
      chunk = c;
    }
    try {
      for (const f of this.decoder.push(chunk)) {
        this.dispatch(f);
        if (this.failure) return;
      }
    } catch (err) {
      const why = err instanceof ProtocolError ? err.message : `unexpected error (${(err as Error).message})`;
      this.fail(`${this.label}: malformed frame from the guest: ${why}`, err);
      return;
    }
    if (this.socket.writableLength > OUTBOUND_BUDGET) this.throttle();
  }

  /**
   * Frames from the guest can make the host answer (PONG, ERROR, WINDOW); a guest that sends them without
   * reading the answers would grow the host's queue without end. So past OUTBOUND_BUDGET queued bytes the
   * host stops reading until the guest has taken them: the flood then stalls in the guest's own buffers.
   * The answers of one chunk at most overshoot the budget. A real agent always reads, so it never waits long.
   */
  private throttle(): void {
    if (this.throttled) return;
    this.throttled = true;
    this.socket.pause();
    this.socket.once('drain', () => {
      this.throttled = false;
      if (!this.failure) this.socket.resume();
    });
  }

  private sendHello(): void {
    if (this.onHello === undefined) return;
    this.helloNonce = (this.helloNonce + 1) >>> 0;
    const caps = Capability.tty | Capability.files | Capability.forward | Capability.configure;
    this.send(FrameType.hello, 0, 0, encodeHello({ version: PROTOCOL_VERSION, capabilities: caps, maxPayload: MAX_PAYLOAD, window: this.window, nonce: this.helloNonce, name: 'smol-host' }));
  }

  /** Before the handshake, drops bytes a serial port kept from an earlier host, up to the agent's HELLO. */
  private skipToHello(chunk: Buffer): Buffer | undefined {
    const buf = this.preamble.length ? Buffer.concat([this.preamble, chunk]) : chunk;
    const at = findHello(buf);
    if (at >= 0) {
      this.preamble = Buffer.alloc(0);
      this.skipped += at;
      this.helloFound = true;
      return buf.subarray(at);
    }
    const keep = Math.min(buf.length, HEADER_LENGTH + HELLO_MAGIC.length - 1);
    this.skipped += buf.length - keep;
    this.preamble = Buffer.from(buf.subarray(buf.length - keep));
    if (this.skipped > MAX_PAYLOAD * 4) this.fail(`${this.label}: no HELLO from the agent in the first ${this.skipped} bytes`);
    return undefined;
  }

  private dispatch(f: Frame): void {
    if (f.stream === 0) return this.control(f);
    const h = this.streams.get(f.stream);
    if (h) {
      if (h.frame(f)) this.streams.delete(f.stream);
      return;
    }
    const guestSide = (f.stream & GUEST_STREAM_BIT) !== 0;
    const local = f.stream & 0x7fff_ffff;
    if (guestSide && f.type === FrameType.connect) return this.accept(f, local);
    const known = guestSide ? local <= this.maxGuestId : f.stream < this.nextId;
    if (!known) throw new ProtocolError(`frame type ${f.type} for unknown stream ${f.stream}`);
    // A stream that already ended here: frames in flight are dropped.
  }

  private control(f: Frame): void {
    switch (f.type) {
      case FrameType.hello: {
        if (this.onHello === undefined) throw new ProtocolError('second HELLO');
        const h = decodeHello(f.payload);
        if (h.nonce !== this.helloNonce) return; // answers a HELLO we have since resent
        if (h.version !== PROTOCOL_VERSION) throw new ProtocolError(`agent speaks protocol ${h.version}, the host ${PROTOCOL_VERSION}`);
        if (h.maxPayload < MIN_PEER_PAYLOAD || h.window === 0) throw new ProtocolError('agent HELLO has unusable limits');
        const cb = this.onHello;
        this.onHello = undefined;
        this.hello = h;
        cb(h);
        return;
      }
      case FrameType.ping:
        this.send(FrameType.pong, 0, 0, f.payload.subarray(0, PING_MAX));
        return;
      case FrameType.pong: {
        const seq = f.payload.length >= 4 ? f.payload.readUInt32LE(0) : -1;
        const p = this.pings.get(seq);
        if (!p) throw new ProtocolError('PONG without a PING');
        this.pings.delete(seq);
        p.resolve(performance.now() - p.t0);
        return;
      }
      case FrameType.error: {
        const { message } = decodeError(f.payload);
        this.fail(`${this.label}: the agent reported: ${message}`);
        return;
      }
      default:
        throw new ProtocolError(`frame type ${f.type} on stream 0`);
    }
  }

  private accept(f: Frame, local: number): void {
    if (local <= this.maxGuestId) throw new ProtocolError(`CONNECT reuses stream ${f.stream}`);
    this.maxGuestId = local;
    const service = f.payload.toString('utf8');
    const listener = this.listeners.get(service);
    const shown = service.length > 64 ? `${service.slice(0, 64)}…` : service; // an answer stays small whatever the guest sent
    if (!listener) return this.refuse(f.stream, `no host handler for service ${shown}`);
    // Each open stream may hold a window of guest data on the host: their number is what bounds that memory.
    let open = 0;
    for (const id of this.streams.keys()) if (id >= GUEST_STREAM_BIT) open++;
    if (open >= MAX_GUEST_STREAMS) return this.refuse(f.stream, `too many open forwarded streams (limit ${MAX_GUEST_STREAMS}); service ${shown} refused`);
    const s = new ForwardedStream(this.port, f.stream, service);
    this.streams.set(f.stream, s);
    try {
      listener(s);
    } catch {
      s.destroy(); // a throwing handler resets the connection, not the channel
    }
  }

  /** Refuses a guest CONNECT: ERROR with ECONNREFUSED makes the agent close that guest connection. */
  private refuse(stream: number, message: string): void {
    this.send(FrameType.error, 0, stream, Buffer.concat([Buffer.from([111, 0, 0, 0]), Buffer.from(message)]));
  }

  private fail(message: string, cause?: unknown): void {
    if (this.failure) return;
    const err = new GuestChannelError(message, { cause, hint: 'The guest agent or its VM may have stopped; restart the machine if this persists.' });
    this.failure = err;
    for (const h of this.streams.values()) h.fail(err);
    this.streams.clear();
    for (const p of this.pings.values()) p.reject(err);
    this.pings.clear();
    this.socket.destroy();
    this.drained();
    this.resolveClosed(err);
  }
}

async function collect(r: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of r) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}
