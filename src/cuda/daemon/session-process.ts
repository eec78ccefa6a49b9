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
import { OP, PROTOCOL } from '../protocol/index.js';
import { CU, Session, STAT } from './session.js';
import { serveConnection } from './session-loop.js';

export interface SessionProcessConfig { libcuda: string; quotaBytes: number; statsDir: string; sessionId: number; nodelay: boolean; handshakeMs: number; spinUs: number }
/** The daemon's answer to 'session': serve the connection, or turn it away because `limit` sessions are open. */
export type DaemonMessage = { type: 'admit' } | { type: 'refuse'; limit: number };
export type SessionMessage =
  | { type: 'ready' }
  | { type: 'session'; id: number }
  | { type: 'closed'; id: number; reason: string; cleanupMs: number };

const LISTEN_FD = 3;
const STATS_EVERY_MS = 100;
/** How long a refused connection's HELLO is waited for; the spare accepts no one else meanwhile. */
const REFUSE_WAIT_MS = 200;
let refusalLogged = false;

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
    if (conn < 0) continue;
    // The daemon counts the open sessions: this process becomes one, or turns the guest away and stays the spare.
    const verdict = new Promise<DaemonMessage>((r) => process.once('message', r));
    await send({ type: 'session', id: cfg.sessionId });
    const v = await verdict;
    if (v.type === 'admit') break;
    refuse(io, conn, v.limit);
    conn = -1;
  }
  accepted = true;
  io.close(LISTEN_FD);
  if (cfg.nodelay) io.setNoDelay(conn);

  const session = new Session(drv, {
    quotaBytes: cfg.quotaBytes, stats, maxPayload: PROTOCOL.maxPayload, sessionId: cfg.sessionId,
    paramSource: process.env.SMOL_CUDA_PARAM_LAYOUT === 'image' ? 'image' : 'driver',
    // A direct write: this process spends its life in blocking reads, so a stream might never flush.
    log: (line) => { try { fs.writeSync(2, `smol gpu: session ${cfg.sessionId}: ${line}\n`); } catch { /* no stderr */ } },
  });
  const { reason, cleanupMs } = serveConnection(conn, session, cfg.handshakeMs, cfg.spinUs ?? 0);
  await send({ type: 'closed', id: cfg.sessionId, reason, cleanupMs });
  process.exit(0);
}

/**
 * Answers a refused connection's HELLO with CUDA_ERROR_DEVICE_UNAVAILABLE, which the shim reports as the
 * daemon being at its session limit, and closes it. The reply must echo the HELLO's sequence number, so the
 * HELLO is waited for, briefly: a connection that sends nothing is simply closed.
 */
function refuse(io: ReturnType<typeof sys>, conn: number, limit: number): void {
  const hdr = PROTOCOL.headerSize, hello = hdr + 4 * 8, nouts = 5;
  const buf = Buffer.alloc(hello);
  let got = 0;
  while (got < hello && io.readable(conn, REFUSE_WAIT_MS)) {
    const n = io.read(conn, buf, got, hello - got);
    if (n <= 0) break;
    got += n;
  }
  if (got >= hdr && buf.readUInt16LE(4) === OP.Hello) {
    const rep = Buffer.alloc(hdr + nouts * 8);
    rep.writeUInt32LE(nouts * 8, 0); rep.writeUInt16LE(OP.Hello, 4); rep.writeUInt16LE(PROTOCOL.flags.reply, 6);
    rep.writeUInt32LE(buf.readUInt32LE(8), 8); rep.writeInt32LE(CU.deviceUnavailable, 12);
    io.writeAll(conn, rep, 0, rep.length);
  }
  io.close(conn);
  if (refusalLogged) return; // the daemon's status counts them all; one line per spare is enough for a log
  refusalLogged = true;
  try { fs.writeSync(2, `smol gpu: refused a connection: ${limit} sessions are open (the limit; set SMOL_GPU_MAX_SESSIONS to change it)\n`); } catch { /* no stderr */ }
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
