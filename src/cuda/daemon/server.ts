/**
 * The GPU daemon: accepts guest connections and gives each its own worker thread (its own session and
 * CUDA context), so the main event loop never sits on the hot path. Also serves a small control socket
 * that `smol gpu status --json` reads.
 */
import { spawnWorker } from './spawn.js';
import net from 'node:net';
import fs from 'node:fs';
import path from 'node:path';
import { GpuError, UserError } from '../../errors/index.js';
import { formatEndpoint, parseEndpoint, type Endpoint } from '../protocol/index.js';
import { STAT } from './session.js';
import { sys } from './driver/sys.js';

export interface GpuDaemonOptions {
  /** unix:PATH, tcp:HOST:PORT or vsock:PORT */
  listen: string;
  /** Path of libcuda.so.1 (the real driver, or the FAKE one in tests). */
  libcuda?: string;
  /** Per-session device-memory quota in bytes (default: no limit beyond the device's). */
  quotaBytes?: number;
  /** Unix socket for status queries; default none. */
  control?: string;
}

export interface SessionStatus { id: number; startedAt: string; calls: number; memBytes: number; allocations: number; asyncErrors: number }
export interface GpuDaemonStatus {
  endpoint: string; libcuda: string; pid: number; quotaBytes: number | null;
  sessions: SessionStatus[]; closedSessions: number; lastClose?: { id: number; reason: string; cleanupMs: number };
  /** A session worker with the driver bound waits for the next connection. */
  spareReady: boolean;
}
export interface StoppedSession { id: number; reason: string; freedBytes: number; cleanupMs: number }
/** What close() did: how long it took and the sessions it ended (their memory freed by the daemon). */
export interface GpuStopReport { stopMs: number; sessions: StoppedSession[] }
export interface GpuDaemon {
  endpoint: string; control?: string; status(): GpuDaemonStatus;
  /** Ends every session (each guest sees its connection close; its memory is freed) and stops all threads. */
  close(): Promise<GpuStopReport>;
}

/** How long an exiting process waits for the daemon's threads to leave the driver before it _exit()s. */
const EXIT_WAIT_MS = 3000;

export async function startGpuDaemon(opts: GpuDaemonOptions): Promise<GpuDaemon> {
  const ep = parseEndpoint(opts.listen);
  if (!ep) throw new UserError(`invalid --listen value: ${opts.listen}`, { hint: 'Use unix:PATH, tcp:HOST:PORT or vsock:PORT.' });
  const libcuda = opts.libcuda ?? 'libcuda.so.1';
  if (libcuda.includes('/') && !fs.existsSync(libcuda)) throw new GpuError(`gpu serve failed: ${libcuda} does not exist`, { hint: 'Pass --libcuda PATH to the host driver.' });
  // Fail here, with a message, rather than in every session: load the driver once and throw it away.
  const { loadCudaDriver } = await import('./driver/cuda.js');
  try { loadCudaDriver(libcuda); } catch (err) {
    throw new GpuError(`gpu serve failed: cannot load ${libcuda}: ${(err as Error).message}`, { cause: err, hint: 'Is the NVIDIA driver installed? Pass --libcuda PATH.' });
  }
  if (ep.kind === 'unix') { fs.mkdirSync(path.dirname(ep.path), { recursive: true }); fs.rmSync(ep.path, { force: true }); }
  const quota = opts.quotaBytes ?? Number.MAX_SAFE_INTEGER;

  // Set to 1 by the acceptor once every thread of the daemon has left koffi for good (see onExit).
  const stoppedFlag = new Int32Array(new SharedArrayBuffer(4));
  const acceptor = spawnWorker('acceptor-worker', { endpoint: ep, libcuda, quotaBytes: quota, stopped: stoppedFlag.buffer });
  const exited = new Promise<void>((r) => acceptor.once('exit', () => r()));
  let spareReady = false;
  acceptor.on('message', (m: { type: string; ready?: boolean }) => { if (m.type === 'spare') spareReady = !!m.ready; });
  let listenError: Error | undefined;
  await new Promise<void>((resolve, reject) => {
    acceptor.once('error', reject);
    acceptor.on('message', function first(m: { type: string; message?: string }) {
      if (m.type === 'listening') { acceptor.off('message', first); resolve(); }
      if (m.type === 'error') { listenError = new GpuError(`gpu serve failed: cannot listen on ${opts.listen}: ${m.message}`); reject(listenError); }
    });
  }).catch(async (err: unknown) => { if (listenError) await exited; throw err; });

  interface Live { id: number; stats: Float64Array; startedAt: Date }
  const live = new Map<number, Live>();
  let closedSessions = 0;
  let lastClose: GpuDaemonStatus['lastClose'];
  const endedByStop: StoppedSession[] = [];
  let closing: Promise<GpuStopReport> | undefined;
  acceptor.on('message', (m: { type: string; id: number; stats: SharedArrayBuffer; reason: string; cleanupMs: number; freedBytes: number }) => {
    if (m.type === 'session') live.set(m.id, { id: m.id, stats: new Float64Array(m.stats), startedAt: new Date() });
    if (m.type === 'closed') {
      live.delete(m.id); closedSessions++; lastClose = { id: m.id, reason: m.reason, cleanupMs: m.cleanupMs };
      if (closing) endedByStop.push({ id: m.id, reason: m.reason, freedBytes: m.freedBytes, cleanupMs: m.cleanupMs });
    }
  });
  let acceptorGone = false;
  void exited.then(() => { acceptorGone = true; });
  acceptor.on('error', (err) => { process.stderr.write(`smol gpu: acceptor crashed: ${err.message}\n`); });

  const status = (): GpuDaemonStatus => ({
    endpoint: formatEndpoint(ep), libcuda, pid: process.pid, quotaBytes: opts.quotaBytes ?? null,
    sessions: [...live.values()].map((s) => ({
      id: s.id, startedAt: s.startedAt.toISOString(), calls: s.stats[STAT.calls], memBytes: s.stats[STAT.memBytes],
      allocations: s.stats[STAT.allocs], asyncErrors: s.stats[STAT.asyncErrors],
    })),
    closedSessions, lastClose, spareReady,
  });

  let control: net.Server | undefined;
  if (opts.control) {
    fs.mkdirSync(path.dirname(opts.control), { recursive: true });
    fs.rmSync(opts.control, { force: true });
    control = net.createServer((c) => { c.end(JSON.stringify(status()) + '\n'); });
    try {
      await new Promise<void>((resolve, reject) => { control!.once('error', reject); control!.listen(opts.control, resolve); });
    } catch (err) {
      acceptor.postMessage({ type: 'stop' });
      await exited;
      throw new GpuError(`gpu serve failed: cannot listen on ${opts.control}: ${(err as Error).message}`, { cause: err });
    }
  }

  // Node's own exit (process.exit, an uncaught exception) stops worker threads wherever they are, and
  // koffi aborts the process when that lands inside a call. So an exit with the daemon still open first
  // stops it the normal way, blocking this thread until every daemon thread has left koffi; if that does
  // not happen in time (a session stuck inside the driver), it ends the process with _exit(2) instead.
  const onExit = (code: number) => {
    if (acceptorGone) return;
    acceptor.postMessage({ type: 'stop' });
    if (Atomics.wait(stoppedFlag, 0, 0, EXIT_WAIT_MS) === 'timed-out') {
      process.stderr.write(`smol gpu: a session is still inside the driver ${EXIT_WAIT_MS} ms after exit; ending the process now\n`);
      sys().exitNow(typeof code === 'number' ? code : 1);
    }
  };
  process.on('exit', onExit);

  const close = () => closing ??= (async () => {
    const t0 = performance.now();
    acceptor.postMessage({ type: 'stop' });
    await exited;
    process.off('exit', onExit);
    if (control) await new Promise<void>((r) => control!.close(() => r()));
    if (opts.control) fs.rmSync(opts.control, { force: true });
    if (ep.kind === 'unix') fs.rmSync(ep.path, { force: true });
    return { stopMs: performance.now() - t0, sessions: endedByStop };
  })();

  return { endpoint: formatEndpoint(ep as Endpoint), control: opts.control, status, close };
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
