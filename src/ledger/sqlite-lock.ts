/**
 * A fair, first-come-first-served queue in front of SQLite's write lock, shared by every process that writes
 * one ledger file. SQLite's lock cannot block: a waiter sleeps and polls, and with eight processes on two
 * cores the lock was free only in short gaps that a waiter woken at a random time kept missing (claims that
 * waited 200 ms through 50 failed polls while others went ahead). Here a waiter blocks until the one
 * before it hands over, so a claim waits for the transactions queued ahead of it and no longer.
 *
 * One process of the group serves the queue from a thread on an abstract Unix socket named after the
 * database file (Linux; nothing to clean up when it dies); the others connect to it, and the first to find
 * it gone serves next. Each process blocks its main thread on a shared cell (Atomics.wait) that its own
 * thread sets when the grant arrives. The queue is only an ordering hint: SQLite's lock stays the truth and
 * the caller still retries BEGIN IMMEDIATE on busy, so a dead, stopped or slow member costs time, never
 * correctness. A holder that dies releases by closing its socket; a grant held past `holdMs` (a holder
 * stopped by SIGSTOP, a long enqueue) passes to the next waiter, who then polls SQLite as before; a waiter
 * not granted within its timeout polls as before too.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { Worker } from 'node:worker_threads';

/** Cells of the shared state array. */
const STATE = 0; // IDLE | WAITING | GRANTED | ABANDONED, written by both threads with compare-exchange
const BELL = 1; // bumped by the main thread when ACQ or REL changed
const ACQ = 2; // acquisitions asked for by the main thread
const REL = 3; // releases asked for by the main thread
const READY = 4; // 1 while the thread is connected to a server
const CROWDED_AT = 5; // when (ms after `base`) the server last said that writers wait in line
const IDLE = 0, WAITING = 1, GRANTED = 2, ABANDONED = 3;

/**
 * CommonJS so the thread needs no loader. Bytes on the wire: A (acquire) and R (release) from a member,
 * G (granted, nobody else waiting), W (granted, others waiting) or C (writers wait in line) from the server.
 */
const SOURCE = `
const net = require('node:net');
const { workerData } = require('node:worker_threads');
const s = new Int32Array(workerData.state);
const [STATE, BELL, ACQ, REL, READY, CROWDED_AT] = [0, 1, 2, 3, 4, 5];
const crowded = () => Atomics.store(s, CROWDED_AT, Math.max(1, Date.now() - workerData.base));
const [IDLE, WAITING, GRANTED, ABANDONED] = [0, 1, 2, 3];
let sock = null, sentAcq = 0, sentRel = 0;

// ---- the server (in one member of the group) ----
const queue = [];
const members = new Set();
let toldAt = 0;
// a writer that never meets the lock busy would never queue and would starve those who do: tell everyone
const tell = () => {
  if (Date.now() - toldAt < 100) return;
  toldAt = Date.now();
  for (const m of members) m.write('C');
};
const holders = new Map(); // socket -> its hold timer
const pump = () => {
  while (holders.size < workerData.turns && queue.length) {
    const c = queue.shift();
    c.write(queue.length || holders.size ? 'W' : 'G');
    holders.set(c, setTimeout(() => { holders.delete(c); pump(); }, workerData.holdMs));
  }
};
const released = (c) => {
  if (!holders.has(c)) return; // a grant that had already passed on
  clearTimeout(holders.get(c));
  holders.delete(c);
  pump();
};
const serve = () => new Promise((resolve) => {
  const srv = net.createServer((c) => {
    members.add(c);
    c.on('data', (buf) => { for (const b of buf) if (b === 65) { queue.push(c); pump(); if (queue.length) tell(); } else if (b === 82) released(c); });
    c.on('error', () => {});
    c.on('close', () => { members.delete(c); const i = queue.indexOf(c); if (i >= 0) queue.splice(i, 1); released(c); });
  });
  srv.once('error', () => resolve(false));
  srv.listen({ path: workerData.name }, () => resolve(true));
});

// ---- the member ----
const grant = (others) => {
  if (others) crowded();
  for (;;) {
    if (Atomics.compareExchange(s, STATE, WAITING, GRANTED) === WAITING) { Atomics.notify(s, STATE); return; }
    // the main thread gave up waiting: hand the grant straight back
    if (Atomics.compareExchange(s, STATE, ABANDONED, IDLE) === ABANDONED) { sock.write('R'); return; }
    const now = Atomics.load(s, STATE);
    // not asked for (never expected): give it back rather than stall the line for holdMs
    if (now !== WAITING && now !== ABANDONED) { sock.write('R'); return; }
  }
};
const flush = () => {
  if (!sock || Atomics.load(s, READY) !== 1) return;
  let out = '';
  while (sentRel < Atomics.load(s, REL)) { out += 'R'; sentRel++; }
  while (sentAcq < Atomics.load(s, ACQ)) { out += 'A'; sentAcq++; }
  if (out) sock.write(out);
};
const connect = () => new Promise((resolve) => {
  const c = net.connect({ path: workerData.name });
  c.once('connect', () => { c.setNoDelay?.(true); resolve(c); });
  c.once('error', () => resolve(null));
});
const join = async () => {
  for (;;) {
    const c = (await connect()) ?? ((await serve()) ? await connect() : null);
    if (!c) { await new Promise((r) => setTimeout(r, 20)); continue; }
    sock = c;
    // requests made while disconnected went to SQLite's polling; start counting afresh
    sentAcq = Atomics.load(s, ACQ);
    sentRel = Atomics.load(s, REL);
    Atomics.store(s, READY, 1);
    Atomics.notify(s, READY);
    c.on('data', (buf) => { for (const b of buf) if (b === 71 || b === 87) grant(b === 87); else if (b === 67) crowded(); });
    c.on('error', () => {});
    c.once('close', () => {
      sock = null;
      Atomics.store(s, READY, 0);
      // a waiter would otherwise sit out its whole timeout
      if (Atomics.compareExchange(s, STATE, WAITING, IDLE) === WAITING) Atomics.notify(s, STATE);
      Atomics.compareExchange(s, STATE, ABANDONED, IDLE);
      setTimeout(join, Math.random() * 5);
    });
    return;
  }
};
const bell = () => {
  for (;;) {
    const v = Atomics.load(s, BELL);
    flush();
    const w = Atomics.waitAsync(s, BELL, v);
    if (w.async) { w.value.then(bell); return; }
  }
};
join();
bell();
`;

export interface WriteQueueOptions {
  /** How long the server lets one grant stand before passing it on. */
  holdMs?: number;
  /** How many writers hold a turn at once: the one in its transaction and the next, already polling. */
  turns?: number;
}

export class WriteQueue {
  private readonly s = new Int32Array(new SharedArrayBuffer(4 * 8));
  private readonly worker: Worker;
  private stopped = false;
  private readonly base = Date.now();

  constructor(dbPath: string, o: WriteQueueOptions = {}) {
    const real = fs.realpathSync(dbPath);
    const name = `\0smol-ledger-${createHash('sha256').update(real).digest('hex').slice(0, 32)}`;
    this.worker = new Worker(SOURCE, { eval: true, workerData: { state: this.s.buffer, base: this.base, name, holdMs: o.holdMs ?? 50, turns: o.turns ?? 2 },
      // the parent's flags (a loader, --input-type=module under -e) would not read this CommonJS
      execArgv: [], stdout: false, stderr: false });
    this.worker.unref();
    this.worker.on('error', () => { this.stopped = true; });
  }

  /** Whether the thread is connected, so acquire() can succeed. */
  get ready(): boolean {
    return !this.stopped && Atomics.load(this.s, READY) === 1;
  }

  /** Waits up to `ms` for the thread to join its queue (it starts in a few ms; polling meanwhile is unfair). */
  waitReady(ms: number): boolean {
    if (!this.stopped && Atomics.load(this.s, READY) !== 1) Atomics.wait(this.s, READY, 0, ms);
    return this.ready;
  }

  /** When (Date.now()) the group last had writers waiting in line; 0 if never seen. */
  get crowdedAt(): number {
    const at = Atomics.load(this.s, CROWDED_AT);
    return at === 0 ? 0 : this.base + at;
  }

  /** Blocks until it is this process's turn; false when not served within `timeoutMs` (then poll SQLite). */
  acquire(timeoutMs: number): boolean {
    if (!this.waitReady(timeoutMs)) return false;
    // a grant still on its way from a request that timed out is ours again
    if (Atomics.compareExchange(this.s, STATE, ABANDONED, WAITING) !== ABANDONED) {
      Atomics.store(this.s, STATE, WAITING);
      Atomics.add(this.s, ACQ, 1);
      this.ring();
    }
    Atomics.wait(this.s, STATE, WAITING, timeoutMs);
    const st = Atomics.compareExchange(this.s, STATE, WAITING, ABANDONED);
    return st === GRANTED;
  }

  /** Passes the turn on; call after COMMIT or ROLLBACK when acquire() returned true. */
  release(): void {
    if (Atomics.compareExchange(this.s, STATE, GRANTED, IDLE) !== GRANTED) return;
    Atomics.add(this.s, REL, 1);
    this.ring();
  }

  private ring(): void {
    Atomics.add(this.s, BELL, 1);
    Atomics.notify(this.s, BELL);
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    // nothing to flush: its socket closes with it, which tells the group (a turn it held passes on)
    await this.worker.terminate();
  }
}
