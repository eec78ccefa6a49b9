/**
 * Worker-thread entry: binds the listening socket (unix, tcp or vsock), accepts connections and starts
 * one session worker per connection itself, so that a busy (or blocked) main thread never delays a
 * guest. Polls with a short timeout to keep its own event loop turning for its children's events.
 */
import { parentPort, workerData, type Worker } from 'node:worker_threads';
import { sys, sockaddr } from './driver/sys.js';
import { spawnWorker } from './spawn.js';
import { STAT } from './session.js';
import type { Endpoint } from '../protocol/index.js';

const { endpoint, libcuda, quotaBytes } = workerData as { endpoint: Endpoint; libcuda: string; quotaBytes: number };
const io = sys();
const sessions = new Map<number, { fd: number; worker: Worker }>();
let fd = -1, stopping = false, nextId = 1;

parentPort!.on('message', (m: { type: string }) => { if (m.type === 'stop') stopping = true; });

const spawnSpare = () => spawnWorker('session-worker', { fd: -1, libcuda, quotaBytes });
let spare: Worker | undefined;

function startSession(conn: number): void {
  const id = nextId++;
  const stats = new SharedArrayBuffer(STAT.size * 8);
  const worker = spare ?? spawnSpare();
  spare = spawnSpare();
  worker.postMessage({ fd: conn, stats, sessionId: id });
  sessions.set(id, { fd: conn, worker });
  parentPort!.postMessage({ type: 'session', id, stats });
  let reported = false;
  worker.on('message', (msg: { type: string; reason: string; cleanupMs: number }) => {
    if (msg.type === 'closed') { reported = true; parentPort!.postMessage({ type: 'closed', id, reason: msg.reason, cleanupMs: msg.cleanupMs }); }
  });
  worker.on('error', (err) => { io.close(conn); reported = true; parentPort!.postMessage({ type: 'closed', id, reason: `worker crashed: ${err.message}`, cleanupMs: 0 }); });
  worker.on('exit', () => {
    sessions.delete(id);
    if (!reported) parentPort!.postMessage({ type: 'closed', id, reason: 'worker exited', cleanupMs: 0 });
  });
}

async function main(): Promise<void> {
  try {
    const { family, addr } = sockaddr(endpoint);
    fd = io.socket(family);
    io.bindListen(fd, addr, 128);
  } catch (err) {
    if (fd >= 0) io.close(fd);
    parentPort!.postMessage({ type: 'error', message: (err as Error).message });
    return;
  }
  spare = spawnSpare();
  parentPort!.postMessage({ type: 'listening' });
  while (!stopping) {
    if (io.readable(fd, 50)) {
      const c = io.accept(fd);
      if (c >= 0) {
        if (endpoint.kind === 'tcp') io.setNoDelay(c);
        startSession(c);
      }
    }
    await new Promise((r) => setImmediate(r));
  }
  io.close(fd);
  if (spare) await spare.terminate();
  // Ending each connection makes its worker free everything and exit.
  const exits = [...sessions.values()].map(({ fd: s, worker }) => new Promise((r) => { worker.once('exit', r); io.shutdown(s); }));
  await Promise.race([Promise.all(exits), new Promise((r) => setTimeout(r, 5000))]);
  for (const { worker } of sessions.values()) await worker.terminate();
  parentPort!.postMessage({ type: 'stopped' });
}
void main();
