/**
 * The GPU daemon: binds the guest endpoint and gives each guest connection a process of its own
 * (session-process.ts: its own session, CUDA contexts and driver state), so one guest's kernel fault or
 * crash cannot reach another, and the main event loop never sits on the hot path. Also serves a small
 * control socket that `smol gpu status --json` reads.
 */
import type { ChildProcess } from 'node:child_process';
import net from 'node:net';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { GpuError, UserError } from '../../errors/index.js';
import { formatEndpoint, parseEndpoint, type Endpoint } from '../protocol/index.js';
import { STAT } from './session.js';
import { spawnSessionProcess } from './spawn.js';
import type { DaemonMessage, SessionMessage, SessionProcessConfig } from './session-process.js';

export interface GpuDaemonOptions {
  /** unix:PATH, tcp:HOST:PORT or vsock:PORT */
  listen: string;
  /** Path of libcuda.so.1 (the real driver, or the FAKE one in tests). */
  libcuda?: string;
  /** Per-session device-memory quota in bytes (default: no limit beyond the device's). */
  quotaBytes?: number;
  /** Unix socket for status queries; default none. */
  control?: string;
  /** Sessions served at once (default $SMOL_GPU_MAX_SESSIONS, else DEFAULT_MAX_SESSIONS); more are refused. */
  maxSessions?: number;
  /** How long a connection may take to complete the HELLO handshake (default $SMOL_GPU_HANDSHAKE_MS, else DEFAULT_HANDSHAKE_MS). */
  handshakeMs?: number;
  /** How long a session polls for its guest's next frame before sleeping in read(), µs (default spinUsFor()). */
  spinUs?: number;
}

/**
 * Each session is a host process holding the driver (tens of MB, more on a real GPU), so a guest opening
 * connections in a loop would otherwise get a process per connection (40 connections: 42 processes, 2.8 GB).
 * One daemon serves one machine's port (or one `gpu serve`), so this caps what one machine can make.
 */
export const DEFAULT_MAX_SESSIONS = 8;
/** A connection that has not finished its HELLO by then is closed, and its session slot freed. */
export const DEFAULT_HANDSHAKE_MS = 5000;

export interface SessionStatus { id: number; pid: number; startedAt: string; calls: number; memBytes: number; allocations: number; asyncErrors: number }
export interface GpuDaemonStatus {
  endpoint: string; libcuda: string; pid: number; quotaBytes: number | null; maxSessions: number;
  sessions: SessionStatus[]; closedSessions: number; lastClose?: { id: number; reason: string; cleanupMs: number };
  /** Connections turned away because maxSessions were open. */
  refusedSessions: number;
  /** A spare session process has loaded the driver and waits for the next guest. */
  spareReady: boolean;
}
/** A session a stop ended: its device memory is freed by the driver as its process exits. */
export interface StoppedSession { id: number; reason: string; freedBytes: number; cleanupMs: number }
export interface GpuStopReport { stopMs: number; sessions: StoppedSession[] }
export interface GpuDaemon { endpoint: string; control?: string; status(): GpuDaemonStatus; close(): Promise<GpuStopReport> }

/** Polling only pays where the poller does not take the CPU its peer needs: from this many CPUs online. */
export const SPIN_MIN_CPUS = 4;
export const DEFAULT_SPIN_US = 50;
const MAX_SPIN_US = 10_000;

/**
 * How long a session polls for its guest's next frame before it sleeps: $SMOL_CUDA_SPIN_US (0 = never, N µs,
 * at most 10 ms), else DEFAULT_SPIN_US with SPIN_MIN_CPUS or more CPUs and 0 below that. The shim reads the same
 * variable, with the same default, for its side (shims/cuda/transport.c).
 */
export function spinUsFor(env: NodeJS.ProcessEnv = process.env, cpus = os.availableParallelism()): number {
  const raw = env.SMOL_CUDA_SPIN_US;
  if (raw === undefined || raw === '') return cpus >= SPIN_MIN_CPUS ? DEFAULT_SPIN_US : 0;
  if (!/^\d+$/.test(raw)) throw new UserError(`invalid SMOL_CUDA_SPIN_US: ${JSON.stringify(raw)}`, { hint: 'Set it to a number of microseconds (0 turns polling off).' });
  return Math.min(Number(raw), MAX_SPIN_US);
}

/** How long stopping sessions may take before their processes are killed outright. */
const STOP_GRACE_MS = 800;
/** A spare that keeps dying (a broken driver) is restarted no faster than this. */
const RESPAWN_MS = 1000;
/** How long a connection past the limit waits for a session to end before it is refused. */
const ADMIT_WAIT_MS = 250;

export async function startGpuDaemon(opts: GpuDaemonOptions): Promise<GpuDaemon> {
  const ep = parseEndpoint(opts.listen);
  if (!ep) throw new UserError(`invalid --listen value: ${opts.listen}`, { hint: 'Use unix:PATH, tcp:HOST:PORT or vsock:PORT.' });
  const maxSessions = opts.maxSessions ?? envLimit('SMOL_GPU_MAX_SESSIONS', DEFAULT_MAX_SESSIONS);
  const handshakeMs = opts.handshakeMs ?? envLimit('SMOL_GPU_HANDSHAKE_MS', DEFAULT_HANDSHAKE_MS);
  const spinUs = Math.min(Math.max(0, Math.floor(opts.spinUs ?? spinUsFor())), MAX_SPIN_US);
  const libcuda = opts.libcuda ?? 'libcuda.so.1';
  if (libcuda.includes('/') && !fs.existsSync(libcuda)) throw new GpuError(`gpu serve failed: ${libcuda} does not exist`, { hint: 'Pass --libcuda PATH to the host driver.' });
  // Fail here, with a message, rather than in every session: load the driver once and throw it away.
  const { loadCudaDriver } = await import('./driver/cuda.js');
  try { loadCudaDriver(libcuda); } catch (err) {
    throw new GpuError(`gpu serve failed: cannot load ${libcuda}: ${(err as Error).message}`, { cause: err, hint: 'Is the NVIDIA driver installed? Pass --libcuda PATH.' });
  }
  const { sys, sockaddr } = await import('./driver/sys.js');
  const io = sys();
  if (ep.kind === 'unix') { fs.mkdirSync(path.dirname(ep.path), { recursive: true }); fs.rmSync(ep.path, { force: true }); }
  let listenFd = -1;
  try {
    const { family, addr } = sockaddr(ep);
    listenFd = io.socket(family);
    io.bindListen(listenFd, addr, 128);
  } catch (err) {
    if (listenFd >= 0) io.close(listenFd);
    throw new GpuError(`gpu serve failed: cannot listen on ${opts.listen}: ${(err as Error).message}`, { cause: err });
  }
  const statsDir = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-gpu-stats-'));
  const quota = opts.quotaBytes ?? Number.MAX_SAFE_INTEGER;

  interface Live { id: number; proc: ChildProcess; startedAt: Date }
  const live = new Map<number, Live>();
  let closedSessions = 0, refusedSessions = 0, nextId = 1, stopping = false;
  let lastClose: GpuDaemonStatus['lastClose'];
  let spare: ChildProcess | undefined;
  let spareReady = false;
  const noteClosed = (id: number, reason: string, cleanupMs: number) => {
    if (!live.delete(id)) return;
    closedSessions++;
    lastClose = { id, reason, cleanupMs };
    waiting?.admit();
  };
  /** The spare's guest when all sessions were taken: admitted if one ends within ADMIT_WAIT_MS. */
  let waiting: { proc: ChildProcess; admit(): void; drop(): void } | undefined;

  let firstReady: (err?: Error) => void = () => {};
  const ready = new Promise<void>((resolve, reject) => { firstReady = (err) => (err ? reject(err) : resolve()); });
  const spawnSpare = (): void => {
    if (stopping) return;
    const id = nextId++;
    const cfg: SessionProcessConfig = { libcuda, quotaBytes: quota, statsDir, sessionId: id, nodelay: ep.kind === 'tcp', handshakeMs, spinUs };
    const proc = spawnSessionProcess(listenFd, { SMOL_GPU_SESSION: JSON.stringify(cfg) });
    spare = proc;
    let session = false, closed = false;
    proc.on('message', (m: SessionMessage) => {
      if (m.type === 'ready') { firstReady(); if (spare === proc) spareReady = true; }
      if (m.type === 'session') {
        const admit = () => {
          session = true;
          live.set(id, { id, proc, startedAt: new Date() });
          answer(proc, { type: 'admit' });
          if (spare === proc) { spare = undefined; spareReady = false; spawnSpare(); }
        };
        // Only the spare accepts, so this count is exact. A session that just ended may not have said so
        // yet (it frees its memory first), so a guest that starts a process as another exits waits a moment
        // for that slot; after that it is refused, and the spare stays the spare.
        if (live.size < maxSessions) return admit();
        const timer = setTimeout(() => {
          waiting = undefined;
          refusedSessions++;
          answer(proc, { type: 'refuse', limit: maxSessions });
        }, ADMIT_WAIT_MS);
        waiting = { proc, admit: () => { waiting?.drop(); admit(); }, drop: () => { clearTimeout(timer); waiting = undefined; } };
      }
      if (m.type === 'closed') { closed = true; noteClosed(id, m.reason, m.cleanupMs); }
    });
    proc.on('exit', (code, signal) => {
      if (waiting?.proc === proc) waiting.drop();
      if (spare === proc) { spare = undefined; spareReady = false; }
      if (session && !closed) noteClosed(id, stopping ? 'daemon stopped' : `session process ended (${signal ?? `exit ${code}`})`, 0);
      fs.rmSync(path.join(statsDir, String(id)), { force: true });
      if (!session && !stopping) {
        firstReady(new GpuError(`gpu serve failed: a session process could not start (${signal ?? `exit ${code}`})`));
        setTimeout(spawnSpare, RESPAWN_MS).unref();
      }
    });
  };
  spawnSpare();
  try { await ready; } catch (err) { stopping = true; spare?.kill('SIGKILL'); io.close(listenFd); fs.rmSync(statsDir, { recursive: true, force: true }); throw err; }

  /** A session's counters as its process last published them; zeros before the first write. */
  const readStats = (id: number): Float64Array => {
    const st = new Float64Array(STAT.size);
    let b: Buffer;
    try { b = fs.readFileSync(path.join(statsDir, String(id))); } catch { return st; } // not written yet, or gone
    if (b.length === st.length * 8) for (let i = 0; i < st.length; i++) st[i] = b.readDoubleLE(i * 8);
    return st;
  };
  const status = (): GpuDaemonStatus => ({
    endpoint: formatEndpoint(ep), libcuda, pid: process.pid, quotaBytes: opts.quotaBytes ?? null, maxSessions, refusedSessions,
    sessions: [...live.values()].map((s) => {
      const st = readStats(s.id);
      return {
        id: s.id, pid: s.proc.pid ?? 0, startedAt: s.startedAt.toISOString(), calls: st[STAT.calls], memBytes: st[STAT.memBytes],
        allocations: st[STAT.allocs], asyncErrors: st[STAT.asyncErrors],
      };
    }),
    closedSessions, lastClose, spareReady,
  });

  let control: net.Server | undefined;
  if (opts.control) {
    fs.mkdirSync(path.dirname(opts.control), { recursive: true });
    fs.rmSync(opts.control, { force: true });
    control = net.createServer((c) => { c.end(JSON.stringify(status()) + '\n'); });
    await new Promise<void>((resolve, reject) => { control!.once('error', reject); control!.listen(opts.control, resolve); });
  }

  let closing: Promise<GpuStopReport> | undefined;
  const close = () => closing ??= (async () => {
    const t0 = performance.now();
    stopping = true;
    waiting?.drop();
    spare?.kill('SIGKILL');
    io.close(listenFd);
    if (ep.kind === 'unix') fs.rmSync(ep.path, { force: true });
    // A session process ends on SIGTERM: its guest sees the connection close, and the driver frees
    // the process's device memory and contexts as it exits. What it held is read from its counters first.
    const ending = [...live.values()].filter((s) => s.proc.exitCode === null && s.proc.signalCode === null);
    const sessions: StoppedSession[] = ending.map((s) => ({ id: s.id, reason: 'daemon stopped', freedBytes: readStats(s.id)[STAT.memBytes], cleanupMs: 0 }));
    const exited = ending.map((s) => new Promise<void>((r) => s.proc.once('exit', () => r())));
    for (const s of ending) s.proc.kill('SIGTERM');
    const timer = setTimeout(() => { for (const s of ending) s.proc.kill('SIGKILL'); }, STOP_GRACE_MS);
    await Promise.all(exited);
    clearTimeout(timer);
    if (control) await new Promise<void>((r) => control!.close(() => r()));
    if (opts.control) fs.rmSync(opts.control, { force: true });
    fs.rmSync(statsDir, { recursive: true, force: true });
    return { stopMs: performance.now() - t0, sessions };
  })();

  return { endpoint: formatEndpoint(ep as Endpoint), control: opts.control, status, close };
}

/** A session process that died meanwhile cannot be told; its exit is handled on its own. */
function answer(proc: ChildProcess, m: DaemonMessage): void {
  if (proc.connected) proc.send(m, (err) => void err);
}

/** A positive integer from the environment, or the default; anything else is refused by name. */
function envLimit(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d+$/.test(raw) || Number(raw) < 1) throw new UserError(`invalid ${name}: ${JSON.stringify(raw)}`, { hint: `Set ${name} to a positive integer (default ${fallback}).` });
  return Number(raw);
}

/** Reads a running daemon's status through its control socket. */
export function queryGpuDaemon(control: string, timeoutMs = 2000): Promise<GpuDaemonStatus> {
  return new Promise((resolve, reject) => {
    const c = net.connect(control);
    let data = '';
    const t = setTimeout(() => { c.destroy(); reject(new GpuError(`gpu status failed: no answer from ${control}`)); }, timeoutMs);
    c.on('data', (d) => { data += d.toString(); });
    c.on('end', () => { clearTimeout(t); try { resolve(JSON.parse(data) as GpuDaemonStatus); } catch (err) { reject(new GpuError(`gpu status failed: bad answer from ${control}`, { cause: err })); } });
    c.on('error', (err) => { clearTimeout(t); reject(new GpuError(`gpu status failed: no daemon at ${control} (${(err as NodeJS.ErrnoException).code})`, { cause: err, hint: 'Start one with `smol gpu serve`.' })); });
  });
}
