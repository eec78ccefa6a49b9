/**
 * Payloads of the agent protocol (docs/agent-protocol.md §Frames). The offsets and sizes come from the spec
 * (`Layout`, generated into protocol.ts); the variable parts (strings, entries) are encoded here. Decoders
 * validate lengths.
 */
import { ConfigureKey, ExecFlag, HELLO_MAGIC, HELLO_MIN, Layout } from './protocol.js';
import { ProtocolError } from './codec.js';

export interface Hello {
  version: number;
  capabilities: number;
  maxPayload: number;
  window: number;
  /** The host picks it; the agent echoes the one of the HELLO it answers. */
  nonce: number;
  name: string;
}

/** "SMOL", u32 version, u32 capabilities, u32 max payload, u32 initial window, u32 nonce, UTF-8 name. */
export function encodeHello(h: Hello): Buffer {
  const name = Buffer.from(h.name);
  const b = Buffer.allocUnsafe(HELLO_MIN + name.length);
  const at = Layout.hello.at;
  HELLO_MAGIC.copy(b, at.magic);
  b.writeUInt32LE(h.version, at.version);
  b.writeUInt32LE(h.capabilities, at.capabilities);
  b.writeUInt32LE(h.maxPayload, at.maxPayload);
  b.writeUInt32LE(h.window, at.window);
  b.writeUInt32LE(h.nonce >>> 0, at.nonce);
  name.copy(b, HELLO_MIN);
  return b;
}

export function decodeHello(p: Buffer): Hello {
  need(p, HELLO_MIN, 'HELLO');
  const at = Layout.hello.at;
  if (!p.subarray(at.magic, at.magic + HELLO_MAGIC.length).equals(HELLO_MAGIC)) throw new ProtocolError('HELLO without the SMOL magic');
  return {
    version: p.readUInt32LE(at.version),
    capabilities: p.readUInt32LE(at.capabilities),
    maxPayload: p.readUInt32LE(at.maxPayload),
    window: p.readUInt32LE(at.window),
    nonce: p.readUInt32LE(at.nonce),
    name: p.subarray(HELLO_MIN).toString('utf8'),
  };
}

export interface ExecRequest {
  argv: string[];
  env?: Record<string, string> | string[];
  cwd?: string;
  tty?: boolean;
  rows?: number;
  cols?: number;
  /** Start from an empty environment instead of the agent's. */
  clearEnv?: boolean;
}

/** u32 flags, u16 rows, u16 cols, u32 argc, u32 envc, then NUL-terminated cwd, argv..., env... */
export function encodeExec(r: ExecRequest): Buffer {
  const env = Array.isArray(r.env) ? r.env : Object.entries(r.env ?? {}).map(([k, v]) => `${k}=${v}`);
  const strings = [r.cwd ?? '', ...r.argv, ...env];
  for (const s of strings) if (s.includes('\0')) throw new RangeError('exec: arguments and environment cannot contain NUL bytes');
  const body = Buffer.from(strings.map((s) => `${s}\0`).join(''));
  const { at, size } = Layout.exec;
  const b = Buffer.allocUnsafe(size + body.length);
  b.writeUInt32LE((r.tty ? ExecFlag.tty : 0) | (r.clearEnv ? ExecFlag.clearEnv : 0), at.flags);
  b.writeUInt16LE(clamp16(r.rows ?? 24), at.rows);
  b.writeUInt16LE(clamp16(r.cols ?? 80), at.cols);
  b.writeUInt32LE(r.argv.length, at.argc);
  b.writeUInt32LE(env.length, at.envc);
  body.copy(b, size);
  return b;
}

export function u32(v: number): Buffer {
  const b = Buffer.allocUnsafe(4);
  b.writeUInt32LE(v >>> 0, 0);
  return b;
}

export function decodeU32(p: Buffer, what: string): number {
  need(p, 4, what, true);
  return p.readUInt32LE(0);
}

export function encodeResize(rows: number, cols: number): Buffer {
  const { at, size } = Layout.resize;
  const b = Buffer.allocUnsafe(size);
  b.writeUInt16LE(clamp16(rows), at.rows);
  b.writeUInt16LE(clamp16(cols), at.cols);
  return b;
}

/** EXIT: i32 code (-1 when killed by a signal), i32 signal number (0 when it exited). */
export function decodeExit(p: Buffer): { code: number | null; signo: number | null } {
  const { at, size } = Layout.exit;
  need(p, size, 'EXIT', true);
  const code = p.readInt32LE(at.code);
  const signo = p.readInt32LE(at.signal);
  return { code: signo > 0 ? null : code, signo: signo > 0 ? signo : null };
}

export function encodeError(code: number, message: string): Buffer {
  return Buffer.concat([u32(code), Buffer.from(message)]);
}

export function decodeError(p: Buffer): { code: number; message: string } {
  const { at, size } = Layout.error;
  need(p, size, 'ERROR');
  return { code: p.readUInt32LE(at.code), message: p.subarray(size).toString('utf8') };
}

export function encodePut(path: string, mode: number, flags: number): Buffer {
  const { at, size } = Layout.put;
  const b = Buffer.allocUnsafe(size);
  b.writeUInt32LE(mode & 0o7777, at.mode);
  b.writeUInt32LE(flags, at.flags);
  return Buffer.concat([b, pathBytes(path)]);
}

export function encodeGet(path: string): Buffer {
  return pathBytes(path);
}

/** INFO: u64 size, u32 mode. */
export function decodeInfo(p: Buffer): { size: number; mode: number } {
  const { at, size } = Layout.info;
  need(p, size, 'INFO', true);
  return { size: Number(p.readBigUInt64LE(at.size)), mode: p.readUInt32LE(at.mode) };
}

export interface ConfigureRequest {
  hostname?: string;
  machineId?: string;
  /** Bytes mixed into the guest RNG (credited when the agent has CAP_SYS_ADMIN). */
  entropy?: Buffer;
  /** Wall clock to set in the guest. */
  clock?: Date | number;
  /** The fork-point release (src/vm/fork/guest.ts): write envFile, wake the FIFOs `dir/wait.<pid>` of live waiters. */
  forkRelease?: { dir: string; envFile: string; text: string };
  /**
   * Mount the virtiofs tag at /run/smol/vol once its device appears (rescanning PCI up to `attempts` times,
   * 10 ms apart), raise its readahead, then bind each volume's directory on its guest path, in this order.
   */
  volumes?: { tag: string; attempts: number; readAheadKb: number; mounts: { index: number; guest: string; readonly: boolean }[] };
}

/** Entries of (u16 key, u16 reserved, u32 length, bytes). */
export function encodeConfigure(c: ConfigureRequest): Buffer {
  const parts: Buffer[] = [];
  const entry = Layout.configureEntry;
  const add = (key: number, v: Buffer) => {
    const h = Buffer.alloc(entry.size);
    h.writeUInt16LE(key, entry.at.key);
    h.writeUInt32LE(v.length, entry.at.length);
    parts.push(h, v);
  };
  if (c.hostname !== undefined) add(ConfigureKey.hostname, Buffer.from(c.hostname));
  if (c.machineId !== undefined) add(ConfigureKey.machineId, Buffer.from(c.machineId));
  if (c.entropy !== undefined) add(ConfigureKey.entropy, c.entropy);
  if (c.clock !== undefined) {
    const ms = typeof c.clock === 'number' ? c.clock : c.clock.getTime();
    const { at, size } = Layout.clock;
    const v = Buffer.alloc(size);
    v.writeBigUInt64LE(BigInt(Math.floor(ms / 1000)), at.seconds);
    v.writeUInt32LE(Math.floor(ms % 1000) * 1_000_000, at.nanos);
    add(ConfigureKey.clock, v);
  }
  if (c.forkRelease) {
    const r = c.forkRelease;
    add(ConfigureKey.forkRelease, Buffer.concat([pathBytes(r.dir), Buffer.alloc(1), pathBytes(r.envFile), Buffer.alloc(1), Buffer.from(r.text)]));
  }
  if (c.volumes) {
    const v = c.volumes;
    const { at, size } = Layout.volumes;
    const head = Buffer.alloc(size);
    head.writeUInt32LE(v.attempts, at.attempts);
    head.writeUInt32LE(v.readAheadKb, at.readAheadKb);
    const fields = [v.tag, ...v.mounts.flatMap((m) => [String(m.index), m.guest, m.readonly ? 'ro' : 'rw'])];
    for (const f of fields) if (!f || f.includes('\0')) throw new RangeError(`bad volumes field ${JSON.stringify(f)}`);
    add(ConfigureKey.volumes, Buffer.concat([head, ...fields.map((f) => Buffer.from(`${f}\0`))]));
  }
  return Buffer.concat(parts);
}

function pathBytes(path: string): Buffer {
  if (path.length === 0 || path.includes('\0')) throw new RangeError(`bad guest path ${JSON.stringify(path)}`);
  return Buffer.from(path);
}

function clamp16(v: number): number {
  return Math.max(0, Math.min(0xffff, Math.floor(v)));
}

function need(p: Buffer, n: number, what: string, exact = false): void {
  if (p.length < n || (exact && p.length !== n)) throw new ProtocolError(`${what} payload has ${p.length} bytes, expected ${exact ? '' : 'at least '}${n}`);
}

