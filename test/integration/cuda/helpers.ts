/** Fixtures for CUDA remoting tests: native builds, a daemon process on the FAKE driver, programs. */
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import net from 'node:net';
import { queryGpuDaemon, type GpuDaemonStatus } from '../../../src/cuda/daemon/index.js';
import { OP, PROTO_HASH, PROTOCOL, decodeHeader, decodeReply, encodeFrame } from '../../../src/cuda/protocol/index.js';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
export const build = path.join(root, 'build');
export const fakeLibcuda = path.join(build, 'fake-cuda', 'libcuda.so.1');
export const progs = path.join(build, 'cuda-programs');
export const ptx = path.join(progs, 'kernels.ptx');
/** Checked-in nvcc output (CI has no nvcc): test/fixtures/cuda-programs/param-layouts/regen.sh. */
export const layoutFixtures = path.join(root, 'test/fixtures/cuda-programs/param-layouts');
export const nvcc = ['/usr/local/cuda/bin/nvcc', '/usr/local/bin/nvcc'].find((p) => fs.existsSync(p));

/** Builds the shims, the FAKE driver and the test programs (make is incremental). */
export function buildNative(): void {
  for (const dir of ['shims/cuda', 'shims/nvml', 'test/fixtures/fake-cuda', 'test/fixtures/cuda-programs']) {
    execFileSync('make', ['-s', '-C', path.join(root, dir), `OUT=${build}`, ...(nvcc ? [`NVCC=${nvcc}`] : [])], { stdio: 'pipe' });
  }
}

export interface DaemonProc { endpoint: string; control: string; dir: string; proc: ChildProcess; stop(): Promise<number | null>; status(): Promise<GpuDaemonStatus>; log(): string }

export async function startDaemon(extra: string[] = [], env: Record<string, string> = {}): Promise<DaemonProc> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-gpu-'));
  const control = path.join(dir, 'ctl');
  const args = ['--import', 'tsx', path.join(root, 'test/integration/cuda/smol-dev.ts'), 'gpu', 'serve',
    '--listen', `unix:${path.join(dir, 'cuda.sock')}`, '--libcuda', fakeLibcuda, '--control', control, '--json', ...extra];
  const proc = spawn(process.execPath, args, { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '', err = '';
  proc.stdout!.on('data', (d) => { out += d; });
  proc.stderr!.on('data', (d) => { err += d; });
  const info = await new Promise<{ endpoint: string }>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`daemon did not start: ${err}`)), 30_000);
    const check = () => { const i = out.indexOf('}'); if (i >= 0) { clearTimeout(t); resolve(JSON.parse(out.slice(0, i + 1))); } };
    proc.stdout!.on('data', check);
    proc.on('exit', (code) => { clearTimeout(t); reject(new Error(`daemon exited ${code}: ${err}`)); });
  });
  return {
    endpoint: info.endpoint, control, dir, proc,
    status: () => queryGpuDaemon(control),
    log: () => err,
    stop: () => new Promise((resolve) => {
      if (proc.exitCode !== null) { resolve(proc.exitCode); return; }
      proc.once('exit', (code) => { fs.rmSync(dir, { recursive: true, force: true }); resolve(code); });
      proc.kill('SIGTERM');
    }),
  };
}

/** A raw protocol client: collects replies and notices when the daemon hangs up. */
export class Raw {
  sock: net.Socket;
  buf = Buffer.alloc(0);
  closed: Promise<void>;
  private waiters: (() => void)[] = [];
  constructor(endpoint: string) {
    this.sock = net.connect(endpoint.replace(/^unix:/, ''));
    this.sock.on('data', (b) => { this.buf = Buffer.concat([this.buf, b]); this.waiters.splice(0).forEach((w) => w()); });
    this.sock.on('error', () => {});
    this.closed = new Promise((r) => this.sock.on('close', () => { r(); this.waiters.splice(0).forEach((w) => w()); }));
  }
  send(b: Buffer) { this.sock.write(b); }
  async reply(timeoutMs = 20_000) {
    const end = Date.now() + timeoutMs;
    while (this.buf.length < PROTOCOL.headerSize || this.buf.length < PROTOCOL.headerSize + this.buf.readUInt32LE(0)) {
      if (this.sock.destroyed || Date.now() > end) return undefined;
      await new Promise<void>((r) => { this.waiters.push(r); setTimeout(r, 50); });
    }
    const h = decodeHeader(this.buf);
    const payload = this.buf.subarray(PROTOCOL.headerSize, PROTOCOL.headerSize + h.length);
    this.buf = this.buf.subarray(PROTOCOL.headerSize + h.length);
    return { ...h, ...decodeReply(h.op, payload) };
  }
  async hello() {
    this.send(encodeFrame(OP.Hello, [PROTOCOL.magic, PROTO_HASH, process.pid, 0], { seq: 1 }));
    return this.reply();
  }
  /** A sync call: sends the frame and waits for its reply. */
  async call(op: number, args: (number | bigint)[], blob?: Buffer) {
    this.send(encodeFrame(op, args, { seq: ++this.seq, blob }));
    return this.reply();
  }
  seq = 1;
  /** Handshake, the device's primary context made current, and `bytes` of device memory; returns the pointer. */
  async withMemory(bytes: number): Promise<bigint> {
    await this.hello();
    await this.call(OP.PrimaryCtxRetain, [0]);
    this.send(encodeFrame(OP.CtxSetCurrent, [PROTOCOL.kinds.ctx * 2 ** 48 + PROTOCOL.primaryBase], { flags: PROTOCOL.flags.async }));
    const r = await this.call(OP.MemAlloc, [bytes]);
    if (r?.status !== 0) throw new Error(`MemAlloc failed: ${r?.status}`);
    return r.outs[0];
  }
  hangsUp(ms = 20_000) { return Promise.race([this.closed.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms))]); }
}

export interface RunResult { code: number | null; stdout: string; stderr: string }
export function runProgram(bin: string, args: string[], env: Record<string, string>, timeoutMs = 60_000): Promise<RunResult> {
  return new Promise((resolve) => {
    const p = spawn(bin, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '', stderr = '';
    p.stdout.on('data', (d) => { stdout += d; });
    p.stderr.on('data', (d) => { stderr += d; });
    const t = setTimeout(() => p.kill('SIGKILL'), timeoutMs);
    p.on('close', (code) => { clearTimeout(t); resolve({ code, stdout, stderr }); });
  });
}

/** Environment that makes a program load the shim and talk to `endpoint`. */
export const shimEnv = (endpoint: string) => ({ LD_LIBRARY_PATH: build, SMOL_CUDA_ENDPOINT: endpoint });

export const results = (stdout: string) => Object.fromEntries([...stdout.matchAll(/^RESULT (\S+) (PASS|FAIL)$/gm)].map((m) => [m[1], m[2]]));

export async function waitFor<T>(fn: () => Promise<T | undefined>, timeoutMs: number, everyMs = 20): Promise<T | undefined> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== undefined || Date.now() > end) return v;
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
