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
}
export interface GpuDaemon { endpoint: string; control?: string; status(): GpuDaemonStatus; close(): Promise<void> }

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

  const acceptor = spawnWorker('acceptor-worker', { endpoint: ep, libcuda, quotaBytes: quota });
  await new Promise<void>((resolve, reject) => {
    acceptor.once('error', reject);
    acceptor.on('message', function first(m: { type: string; message?: string }) {
      if (m.type === 'listening') { acceptor.off('message', first); resolve(); }
      if (m.type === 'error') reject(new GpuError(`gpu serve failed: cannot listen on ${opts.listen}: ${m.message}`));
    });
  });

  interface Live { id: number; stats: Float64Array; startedAt: Date }
  const live = new Map<number, Live>();
  let closedSessions = 0;
  let lastClose: GpuDaemonStatus['lastClose'];
  acceptor.on('message', (m: { type: string; id: number; stats: SharedArrayBuffer; reason: string; cleanupMs: number }) => {
    if (m.type === 'session') live.set(m.id, { id: m.id, stats: new Float64Array(m.stats), startedAt: new Date() });
    if (m.type === 'closed') { live.delete(m.id); closedSessions++; lastClose = { id: m.id, reason: m.reason, cleanupMs: m.cleanupMs }; }
  });

  const status = (): GpuDaemonStatus => ({
    endpoint: formatEndpoint(ep), libcuda, pid: process.pid, quotaBytes: opts.quotaBytes ?? null,
    sessions: [...live.values()].map((s) => ({
      id: s.id, startedAt: s.startedAt.toISOString(), calls: s.stats[STAT.calls], memBytes: s.stats[STAT.memBytes],
      allocations: s.stats[STAT.allocs], asyncErrors: s.stats[STAT.asyncErrors],
    })),
    closedSessions, lastClose,
  });

  let control: net.Server | undefined;
  if (opts.control) {
    fs.mkdirSync(path.dirname(opts.control), { recursive: true });
    fs.rmSync(opts.control, { force: true });
    control = net.createServer((c) => { c.end(JSON.stringify(status()) + '\n'); });
    await new Promise<void>((resolve, reject) => { control!.once('error', reject); control!.listen(opts.control, resolve); });
  }

  let closing: Promise<void> | undefined;
  const close = () => closing ??= (async () => {
    const stopped = new Promise<void>((r) => acceptor.once('exit', () => r()));
    acceptor.postMessage({ type: 'stop' });
    await Promise.race([stopped, new Promise<void>((r) => setTimeout(r, 8000).unref())]);
    await acceptor.terminate();
    if (control) await new Promise<void>((r) => control!.close(() => r()));
    if (opts.control) fs.rmSync(opts.control, { force: true });
    if (ep.kind === 'unix') fs.rmSync(ep.path, { force: true });
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
