/**
 * Worker-thread entry: binds the listening socket (unix, tcp or vsock), accepts connections and starts
 * one session worker per connection itself, so that a busy (or blocked) main thread never delays a
 * guest. Polls with a short timeout to keep its own event loop turning for its children's events.
 *
 * Never `terminate()` a thread of this daemon: each one calls into koffi, and a thread stopped from
 * outside while inside a koffi call aborts the whole process (docs/cuda.md, "Stopping"). Every thread
 * ends itself: a spare on a stop message, a session at EOF on its socket (shut down here), this thread
 * once all of them have exited.
 */
import { parentPort, workerData, type Worker } from 'node:worker_threads';
import { sys, sockaddr } from './driver/sys.js';
import { spawnWorker } from './spawn.js';
import { STAT } from './session.js';
import type { Endpoint } from '../protocol/index.js';

interface Data { endpoint: Endpoint; libcuda: string; quotaBytes: number; stopped: SharedArrayBuffer }
const { endpoint, libcuda, quotaBytes, stopped } = workerData as Data;
const io = sys();
interface Child { worker: Worker; exited: Promise<void>; alive: boolean }
const sessions = new Map<number, Child & { fd: number }>();
let fd = -1, stopping = false, nextId = 1;

parentPort!.on('message', (m: { type: string }) => { if (m.type === 'stop') stopping = true; });

const post = (m: object) => parentPort!.postMessage(m);

function child(worker: Worker): Child {
  const c: Child = { worker, alive: true, exited: undefined as unknown as Promise<void> };
  c.exited = new Promise<void>((r) => worker.once('exit', () => { c.alive = false; r(); }));
  return c;
}

function spawnSpare(): Child {
  const c = child(spawnWorker('session-worker', { fd: -1, libcuda, quotaBytes }));
  // A spare that fails to load the driver dies here; the next connection gets a fresh worker instead.
  c.worker.on('error', (err) => { if (!stopping) process.stderr.write(`smol gpu: session worker failed to start: ${err.message}\n`); });
  c.worker.once('message', (m: { type: string }) => { if (m.type === 'ready' && spare === c) post({ type: 'spare', ready: true }); });
  return c;
}
let spare: Child | undefined;

function startSession(conn: number): void {
  const id = nextId++;
  const stats = new SharedArrayBuffer(STAT.size * 8);
  const c = spare?.alive ? spare : spawnSpare();
  spare = spawnSpare();
  post({ type: 'spare', ready: false });
  const s = { ...c, fd: conn };
  sessions.set(id, s);
  post({ type: 'session', id, stats });
  let reported = false;
  const report = (reason: string, cleanupMs = 0, freedBytes = 0) => {
    if (reported) return;
    reported = true;
    post({ type: 'closed', id, reason: stopping && reason === 'guest disconnected' ? 'daemon stopping' : reason, cleanupMs, freedBytes });
  };
  c.worker.on('message', (msg: { type: string; reason: string; cleanupMs: number; freedBytes: number }) => {
    if (msg.type === 'closed') report(msg.reason, msg.cleanupMs, msg.freedBytes);
  });
  c.worker.on('error', (err) => report(`worker crashed: ${err.message}`));
  // The socket stays open (the worker only shuts it down) until its worker is gone, so the fd number
  // cannot be reused by another socket of this process while a stop may still shut it down.
  c.worker.once('exit', () => { io.close(conn); sessions.delete(id); report('worker exited'); });
  c.worker.postMessage({ fd: conn, stats, sessionId: id });
}

async function serve(): Promise<void> {
  spare = spawnSpare();
  post({ type: 'listening' });
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
}

/** Ends every child and waits for each to exit on its own; after this, no thread of the daemon calls koffi. */
async function stop(): Promise<void> {
  stopping = true;
  if (fd >= 0) io.close(fd);
  spare?.worker.postMessage({ type: 'stop' });
  // EOF on its socket makes a session free everything, report, and exit; its guest sees the close.
  for (const s of sessions.values()) io.shutdown(s.fd);
  await Promise.all([spare?.exited, ...[...sessions.values()].map((s) => s.exited)]);
  Atomics.store(new Int32Array(stopped), 0, 1);
  Atomics.notify(new Int32Array(stopped), 0);
  post({ type: 'stopped' });
  parentPort!.close();
}

async function main(): Promise<void> {
  try {
    const { family, addr } = sockaddr(endpoint);
    fd = io.socket(family);
    io.bindListen(fd, addr, 128);
  } catch (err) {
    if (fd >= 0) io.close(fd);
    fd = -1;
    post({ type: 'error', message: (err as Error).message });
    await stop();
    return;
  }
  try {
    await serve();
  } catch (err) {
    process.stderr.write(`smol gpu: acceptor failed: ${(err as Error).stack ?? String(err)}\n`);
  }
  await stop();
}
void main();
