/**
 * WAL checkpoints off the caller's thread. With SQLite's wal_autocheckpoint, the commit that pushes the WAL
 * past the threshold copies the WAL into the database file and fsyncs it before returning, so one write in a
 * few hundred (a claim, a completion) took 10–100 ms: with 8 claiming processes that was most of the claims
 * over 10 ms (365 of 4,000 with it, 116 without, same load). Here a worker thread with its own connection
 * runs PASSIVE checkpoints, which never block writers or readers; commits stay short and the WAL stays
 * bounded (journal_size_limit truncates it when a writer restarts it).
 */
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/**
 * CommonJS so the thread needs no loader (the same code runs under tsx and from dist/). It checkpoints only
 * once `minFrames` frames await copying, like SQLite's own autocheckpoint: checkpointing on every tick cost
 * two fsyncs each time. The count comes from the WAL-index header in the -shm file (mxFrame at byte 16,
 * nBackfill at byte 96, native byte order; https://sqlite.org/walformat.html), read without a lock: it is
 * only a hint, and when it cannot be read the thread checkpoints anyway.
 */
const SOURCE = `
const fs = require('node:fs');
const os = require('node:os');
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.module);
const hdr = Buffer.alloc(100);
const behind = new Int32Array(workerData.behind);
const u32 = (off) => (os.endianness() === 'LE' ? hdr.readUInt32LE(off) : hdr.readUInt32BE(off));
let db = null;
let shm = null;
const waiting = () => {
  try {
    shm ??= fs.openSync(workerData.path + '-shm', 'r');
    if (fs.readSync(shm, hdr, 0, 100, 0) < 100) return Infinity;
    Atomics.store(behind, 0, u32(16) > workerData.maxFrames ? 1 : 0);
    return u32(16) - u32(96);
  } catch {
    return Infinity;
  }
};
const tick = () => {
  if (waiting() < workerData.minFrames) return;
  try {
    db ??= new Database(workerData.path, { timeout: 0, fileMustExist: true });
    db.pragma('wal_checkpoint(PASSIVE)');
  } catch {
    // busy (another process checkpoints now) or the file is going away: the next tick tries again
  }
};
const timer = setInterval(tick, workerData.intervalMs);
parentPort.on('message', () => {
  clearInterval(timer);
  try { db?.close(); } catch {}
  try { if (shm !== null) fs.closeSync(shm); } catch {}
  parentPort.close();
});
`;

export class Checkpointer {
  private readonly worker: Worker;
  private stopped = false;
  /** Set by the thread while the WAL is longer than maxFrames. */
  private readonly behindFlag = new Int32Array(new SharedArrayBuffer(4));

  /** `onFailure` runs if the thread dies, so the caller can fall back to inline checkpoints. */
  constructor(dbPath: string, o: { intervalMs: number; minFrames: number; maxFrames: number }, onFailure: (err: Error) => void) {
    const module = createRequire(import.meta.url).resolve('better-sqlite3');
    // no inherited flags: a loader or --input-type=module (node -e) would not read this CommonJS
    this.worker = new Worker(SOURCE, { eval: true, workerData: { module, path: dbPath, behind: this.behindFlag.buffer, ...o }, execArgv: [], stdout: false, stderr: false });
    this.worker.unref(); // never what keeps a process alive
    this.worker.on('error', (err) => { if (!this.stopped) onFailure(err); });
  }

  /**
   * Whether the WAL has outgrown maxFrames. A PASSIVE checkpoint copies the frames that existed when it
   * began, and a WAL restarts from its beginning only once fully copied, so writers that never pause can
   * outrun the thread (52 MB in the benchmark's 4 s write storm). Then writers checkpoint in their commits
   * again, as SQLite's autocheckpoint does, until the WAL has restarted.
   */
  behind(): boolean {
    return Atomics.load(this.behindFlag, 0) === 1;
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    const exited = new Promise<void>((resolve) => this.worker.once('exit', () => resolve()));
    this.worker.ref(); // an unref'd thread would let the event loop end while close() waits for it
    this.worker.postMessage('stop');
    await exited;
  }
}
