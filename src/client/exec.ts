/**
 * Exec through the API: one buffered call, or, when the caller gives onStdout/onStderr, the SSE stream with
 * each chunk handed over as it comes. Either way the answer is the same ExecResult shape, so code need not
 * care which was used; a stream keeps at most maxOutputBytes of each stream for that answer, as the server does.
 */
import { SmolProtocolError, apiError } from './errors.js';
import type { components } from './schema.js';
import { sseEvents } from './sse.js';
import type { Transport } from './transport.js';

export type ExecResult = components['schemas']['ExecResult'];
type ExecBody = components['schemas']['Exec'];

export interface ExecOptions {
  env?: Record<string, string>;
  /** Default: the machine's workdir. */
  workdir?: string;
  /** Bytes for the command's stdin (at most 768 KiB: it travels in the JSON body). */
  stdin?: string | Uint8Array;
  /** The command is killed after this long; the result then has timedOut and exit code 124. */
  timeoutMs?: number;
  /** Of each stream kept in the result; default 16 MiB, the rest is dropped and *Truncated set. */
  maxOutputBytes?: number;
  /** Streams: called with each chunk of stdout as it arrives (UTF-8 decoded across chunk edges). */
  onStdout?: (text: string) => void;
  onStderr?: (text: string) => void;
  /** Aborting ends the request; the server then kills the command. */
  signal?: AbortSignal;
}

const DEFAULT_KEEP = 16 * 1024 * 1024;

function body(argv: string[], o: ExecOptions): ExecBody {
  const stdin = o.stdin === undefined ? undefined : Buffer.from(typeof o.stdin === 'string' ? Buffer.from(o.stdin, 'utf8') : o.stdin).toString('base64');
  return { argv, env: o.env, workdir: o.workdir, stdin, timeoutMs: o.timeoutMs, maxOutputBytes: o.maxOutputBytes };
}

export async function exec(t: Transport, name: string, argv: string[], o: ExecOptions = {}): Promise<ExecResult> {
  const params = { path: { name } };
  if (!o.onStdout && !o.onStderr) return t.postJson<ExecResult>(`/v1/machines/${encodeURIComponent(name)}/exec`, body(argv, o), o.signal);
  const t0 = performance.now();
  const { data, error, response } = await t.api.POST('/v1/machines/{name}/exec/stream', { params, body: body(argv, o), parseAs: 'stream', signal: o.signal });
  if (!response.ok) throw apiError(response.status, error);
  if (!data) throw new SmolProtocolError('exec/stream answered without a body');
  const keep = o.maxOutputBytes ?? DEFAULT_KEEP;
  const out = { stdout: new Kept(keep, o.onStdout), stderr: new Kept(keep, o.onStderr) };
  for await (const ev of sseEvents(data)) {
    if (ev.event === 'stdout' || ev.event === 'stderr') {
      out[ev.event].add(Buffer.from(field(ev.data, 'data', 'string'), 'base64'));
    } else if (ev.event === 'exit') {
      const x = JSON.parse(ev.data) as Partial<ExecResult>;
      if (typeof x.exitCode !== 'number') throw new SmolProtocolError(`exec/stream: an exit event without an exitCode: ${ev.data.slice(0, 200)}`);
      return {
        exitCode: x.exitCode, signal: x.signal ?? null, timedOut: x.timedOut === true,
        stdout: out.stdout.text(), stderr: out.stderr.text(), stdoutTruncated: out.stdout.truncated, stderrTruncated: out.stderr.truncated,
        durationMs: Math.round(performance.now() - t0),
      };
    } else if (ev.event === 'error') {
      // a failure after the stream began (the guest channel broke): its code picks the class; HTTP said 200
      throw apiError(response.status, parse(ev.data));
    }
  }
  throw new SmolProtocolError('exec/stream ended without an exit event (the server went away?)');
}

function parse(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new SmolProtocolError(`exec/stream: an event that is not JSON: ${text.slice(0, 200)}`);
  }
}

function field(text: string, key: string, type: 'string'): string {
  const v = (parse(text) as Record<string, unknown> | null)?.[key];
  if (typeof v !== type) throw new SmolProtocolError(`exec/stream: an event without ${key}: ${text.slice(0, 200)}`);
  return v as string;
}

/** One stream's output: handed to its callback as text, and its first `cap` bytes kept for the result. */
class Kept {
  private chunks: Buffer[] = [];
  private size = 0;
  private readonly decoder = new TextDecoder();
  truncated = false;
  constructor(private readonly cap: number, private readonly cb?: (text: string) => void) {}

  add(b: Buffer): void {
    if (this.cb) {
      const s = this.decoder.decode(b, { stream: true });
      if (s) this.cb(s);
    }
    const room = this.cap - this.size;
    if (b.length > room) this.truncated = true;
    if (room > 0) {
      const kept = b.length > room ? b.subarray(0, room) : b;
      this.chunks.push(kept);
      this.size += kept.length;
    }
  }

  text(): string {
    const tail = this.cb ? this.decoder.decode() : '';
    if (tail) this.cb!(tail);
    return Buffer.concat(this.chunks).toString('utf8');
  }
}
