/**
 * A small QMP client: JSON lines over QEMU's unix socket. Negotiates capabilities, runs commands one
 * reply at a time (matched by id), and re-emits asynchronous events (STOP, RESUME, SHUTDOWN, …).
 */
import { EventEmitter } from 'node:events';
import net from 'node:net';
import { GuestChannelError, TimeoutError } from '../../errors/index.js';
import { QMP_COMMAND_MS, QMP_CONNECT_MS, QMP_GREETING_MIN_MS } from '../limits.js';

export interface QmpEvent { event: string; data?: Record<string, unknown>; timestamp?: { seconds: number; microseconds: number } }

interface Pending { resolve: (v: unknown) => void; reject: (e: Error) => void; cmd: string }

export class QmpError extends GuestChannelError {
  readonly qmpClass: string;
  constructor(cmd: string, cls: string, desc: string) {
    super(`QMP ${cmd} failed: ${desc}`, { where: cls });
    this.qmpClass = cls;
  }
}

export class QmpClient extends EventEmitter {
  private buf = '';
  private nextId = 1;
  private readonly pending = new Map<string, Pending>();
  private closed = false;
  /** QEMU's version from the greeting, e.g. { major: 7, minor: 2, micro: 22 }. */
  version?: { major: number; minor: number; micro: number };

  private constructor(private readonly sock: net.Socket) {
    super();
    sock.setEncoding('utf8');
    sock.on('data', (d: string) => this.onData(d));
    sock.on('close', () => this.onClose(new GuestChannelError('QMP connection closed (QEMU exited?)')));
    sock.on('error', (e) => this.onClose(new GuestChannelError(`QMP connection failed: ${e.message}`, { cause: e })));
  }

  /** Connect, read the greeting and leave capabilities negotiation mode. Retries until the socket exists. */
  /** `alive`: whether the QEMU behind the socket still runs; without it a refused connect is retried until the timeout. */
  static async connect(socketPath: string, timeoutMs = QMP_CONNECT_MS, alive?: () => boolean): Promise<QmpClient> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      try {
        const sock = await new Promise<net.Socket>((resolve, reject) => {
          const s = net.createConnection(socketPath);
          s.once('connect', () => { s.off('error', reject); resolve(s); });
          s.once('error', reject);
        });
        const c = new QmpClient(sock);
        const greeting = await c.waitGreeting(Math.max(QMP_GREETING_MIN_MS, deadline - Date.now()));
        c.version = (greeting as { QMP?: { version?: { qemu?: QmpClient['version'] } } }).QMP?.version?.qemu;
        await c.execute('qmp_capabilities');
        return c;
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code;
        if ((code === 'ENOENT' || code === 'ECONNREFUSED') && alive && !alive()) throw new GuestChannelError(`QEMU exited before its QMP socket ${socketPath} answered`);
        if ((code === 'ENOENT' || code === 'ECONNREFUSED') && Date.now() < deadline) {
          await new Promise((r) => setTimeout(r, 20));
          continue;
        }
        if (code === 'ENOENT' || code === 'ECONNREFUSED') throw new TimeoutError(`QMP socket ${socketPath} not ready after ${timeoutMs} ms`);
        throw e;
      }
    }
  }

  private greeting?: { resolve: (v: unknown) => void; reject: (e: Error) => void };

  private waitGreeting(timeoutMs: number): Promise<unknown> {
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => { reject(new TimeoutError(`no QMP greeting within ${timeoutMs} ms`)); this.close(); }, timeoutMs);
      this.greeting = { resolve: (v) => { clearTimeout(t); resolve(v); }, reject: (e) => { clearTimeout(t); reject(e); } };
    });
  }

  /** Run a command and resolve with its `return` value; QMP errors reject with QmpError. */
  execute<T = unknown>(cmd: string, args?: Record<string, unknown>, timeoutMs = QMP_COMMAND_MS): Promise<T> {
    if (this.closed) return Promise.reject(new GuestChannelError(`QMP ${cmd} failed: connection closed`));
    const id = String(this.nextId++);
    return new Promise<T>((resolve, reject) => {
      const t = setTimeout(() => { this.pending.delete(id); reject(new TimeoutError(`QMP ${cmd} got no reply within ${timeoutMs} ms`)); }, timeoutMs);
      this.pending.set(id, {
        cmd,
        resolve: (v) => { clearTimeout(t); resolve(v as T); },
        reject: (e) => { clearTimeout(t); reject(e); },
      });
      this.sock.write(JSON.stringify(args ? { execute: cmd, arguments: args, id } : { execute: cmd, id }) + '\n');
    });
  }

  /** Resolve with the next event named `name` (optionally matching `pred`). */
  waitEvent(name: string, timeoutMs = QMP_COMMAND_MS, pred: (e: QmpEvent) => boolean = () => true): Promise<QmpEvent> {
    return new Promise((resolve, reject) => {
      const on = (e: QmpEvent) => { if (e.event === name && pred(e)) { cleanup(); resolve(e); } };
      const t = setTimeout(() => { cleanup(); reject(new TimeoutError(`no QMP ${name} event within ${timeoutMs} ms`)); }, timeoutMs);
      const cleanup = () => { clearTimeout(t); this.off('event', on); };
      this.on('event', on);
    });
  }

  close(): void {
    if (!this.closed) this.sock.destroy();
    this.onClose(new GuestChannelError('QMP connection closed'));
  }

  private onData(d: string): void {
    this.buf += d;
    let nl: number;
    while ((nl = this.buf.indexOf('\n')) >= 0) {
      const line = this.buf.slice(0, nl).trim();
      this.buf = this.buf.slice(nl + 1);
      if (!line) continue;
      let msg: Record<string, unknown>;
      try { msg = JSON.parse(line) as Record<string, unknown>; } catch { continue; }
      this.dispatch(msg);
    }
  }

  private dispatch(msg: Record<string, unknown>): void {
    if ('QMP' in msg) { this.greeting?.resolve(msg); this.greeting = undefined; return; }
    if ('event' in msg) { this.emit('event', msg as unknown as QmpEvent); return; }
    const id = msg.id === undefined ? undefined : String(msg.id);
    const p = id === undefined ? undefined : this.pending.get(id);
    if (!p || id === undefined) return;
    this.pending.delete(id);
    if ('error' in msg) {
      const err = msg.error as { class?: string; desc?: string };
      p.reject(new QmpError(p.cmd, err.class ?? 'GenericError', err.desc ?? 'unknown error'));
    } else {
      p.resolve(msg.return);
    }
  }

  private onClose(err: Error): void {
    if (this.closed) return;
    this.closed = true;
    this.greeting?.reject(err);
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
    this.emit('close');
  }
}
