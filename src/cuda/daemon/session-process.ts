/**
 * Entry of a session process. The real driver treats a fault in a kernel (an illegal address, a trap)
 * as fatal to the whole process: every context in it, and every context it creates afterwards, fails
 * (seen on an H200, driver 580: after one guest's faulting kernel, the next guest's cudaMalloc got 46).
 * So each guest process gets a host process of its own, as it would natively, and one guest's fault,
 * crash or leak cannot reach another guest. The daemon keeps one spare ready: it has loaded the driver
 * and waits in accept() on the listening socket it inherited as fd 3 (a pre-forking server), so a new
 * guest waits neither for a process start nor for the driver to load.
 */
import fs from 'node:fs';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { loadCudaDriver } from './driver/cuda.js';
import { sys } from './driver/sys.js';
import { PROTOCOL } from '../protocol/index.js';
import { Session, STAT } from './session.js';
import { serveConnection } from './session-loop.js';

export interface SessionProcessConfig { libcuda: string; quotaBytes: number; statsDir: string; sessionId: number; nodelay: boolean }
export type SessionMessage =
  | { type: 'ready' }
  | { type: 'session'; id: number }
  | { type: 'closed'; id: number; reason: string; cleanupMs: number };

const LISTEN_FD = 3;
const STATS_EVERY_MS = 100;

const cfg = JSON.parse(process.env.SMOL_GPU_SESSION ?? '{}') as SessionProcessConfig;
const send = (m: SessionMessage): Promise<void> => new Promise((r) => { if (process.send) process.send(m, undefined, {}, () => r()); else r(); });

async function main(): Promise<void> {
  const drv = loadCudaDriver(cfg.libcuda);
  const io = sys();
  // An idle spare whose daemon is gone must not go on accepting guests for nobody.
  let accepted = false;
  process.on('disconnect', () => { if (!accepted) process.exit(0); });
  const stats = new Float64Array(new SharedArrayBuffer(STAT.size * 8));
  const statsFile = path.join(cfg.statsDir, String(cfg.sessionId));
  publishStats(stats, statsFile);
  await send({ type: 'ready' });
  let conn = -1;
  while (conn < 0) {
    if (io.readable(LISTEN_FD, 50)) conn = io.accept(LISTEN_FD);
    else await new Promise((r) => setImmediate(r));
  }
  accepted = true;
  io.close(LISTEN_FD);
  if (cfg.nodelay) io.setNoDelay(conn);
  await send({ type: 'session', id: cfg.sessionId });

  const session = new Session(drv, {
    quotaBytes: cfg.quotaBytes, stats, maxPayload: PROTOCOL.maxPayload, sessionId: cfg.sessionId,
    paramSource: process.env.SMOL_CUDA_PARAM_LAYOUT === 'image' ? 'image' : 'driver',
    // A direct write: this process spends its life in blocking reads, so a stream might never flush.
    log: (line) => { try { fs.writeSync(2, `smol gpu: session ${cfg.sessionId}: ${line}\n`); } catch { /* no stderr */ } },
  });
  const { reason, cleanupMs } = serveConnection(conn, session);
  await send({ type: 'closed', id: cfg.sessionId, reason, cleanupMs });
  process.exit(0);
}

/**
 * The counters reach `smol gpu status` through a file that a small thread rewrites when they change:
 * the session's own thread spends its life in blocking reads and should not pay a write per call.
 */
function publishStats(stats: Float64Array, file: string): void {
  const code = `const { workerData: w } = require('node:worker_threads'); const fs = require('node:fs');
    const fd = fs.openSync(w.file, 'w'); const now = new Uint8Array(w.sab); let last = '';
    setInterval(() => { const s = Buffer.from(now).toString('base64'); if (s !== last) { last = s; fs.writeSync(fd, now, 0, now.length, 0); } }, ${STATS_EVERY_MS});`;
  new Worker(code, { eval: true, workerData: { sab: stats.buffer, file } }).unref();
}

main().catch((err) => {
  try { fs.writeSync(2, `smol gpu: session ${cfg.sessionId}: ${(err as Error).stack ?? err}\n`); } catch { /* no stderr */ }
  process.exit(70);
});
