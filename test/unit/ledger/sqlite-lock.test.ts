import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { WriteQueue, type WriteQueueOptions } from '../../../src/ledger/sqlite-lock.js';
import { SqliteLedger } from '../../../src/ledger/sqlite.js';
import { newItem } from './contract.js';

const tmp = () => fs.mkdtempSync(path.join(os.tmpdir(), 'smol-lock-'));
const until = async (f: () => boolean, ms = 5000) => {
  const end = Date.now() + ms;
  while (!f()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 5));
  }
};

// each queue has its own thread, so one test process can hold several members of a group
const open: WriteQueue[] = [];
async function member(file: string, o: WriteQueueOptions = {}): Promise<WriteQueue> {
  const q = new WriteQueue(file, o);
  open.push(q);
  await until(() => q.ready);
  return q;
}
afterEach(async () => { await Promise.all(open.splice(0).map((q) => q.stop())); });

function dbFile(): string {
  const f = path.join(tmp(), 'l.db');
  fs.writeFileSync(f, '');
  return f;
}

describe('WriteQueue (the FIFO in front of SQLite write lock)', () => {
  it('gives one turn at a time and hands it to the waiter when released', async () => {
    const f = dbFile();
    const a = await member(f, { turns: 1, holdMs: 5000 });
    const b = await member(f, { turns: 1, holdMs: 5000 });
    expect(a.acquire(1000)).toBe(true);
    const t0 = performance.now();
    expect(b.acquire(50)).toBe(false);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(45);
    a.release();
    expect(b.acquire(1000)).toBe(true); // the request that timed out was still queued: its grant is taken up
    b.release();
  });

  it('grants a second turn (the next writer, already polling) while the first is held, and no third', async () => {
    const f = dbFile();
    const [a, b, c] = [await member(f, { holdMs: 5000 }), await member(f, { holdMs: 5000 }), await member(f, { holdMs: 5000 })];
    expect(a.acquire(1000)).toBe(true);
    expect(b.acquire(1000)).toBe(true);
    expect(b.crowdedAt).toBeGreaterThan(0);
    expect(c.acquire(30)).toBe(false);
    a.release();
    expect(c.acquire(1000)).toBe(true);
    b.release();
    c.release();
  });

  it('passes the turn on when its holder goes away, electing a new server if it was the server', async () => {
    const f = dbFile();
    const a = await member(f, { turns: 1, holdMs: 5000 }); // first in: serves the group
    const b = await member(f, { turns: 1, holdMs: 5000 });
    expect(a.acquire(1000)).toBe(true);
    await a.stop(); // as a SIGKILL would: its socket closes
    // b may ask the dead server once before it sees the close; then it serves itself
    let got = false;
    for (let i = 0; i < 50 && !got; i++) {
      got = b.acquire(200);
      if (!got) await new Promise((r) => setTimeout(r, 10));
    }
    expect(got).toBe(true);
    b.release();
  });

  it('passes a turn held past holdMs on (a stopped or slow holder), so waiters fall back to SQLite itself', async () => {
    const f = dbFile();
    const a = await member(f, { turns: 1, holdMs: 100 });
    const b = await member(f, { turns: 1, holdMs: 100 });
    expect(a.acquire(1000)).toBe(true);
    const t0 = performance.now();
    expect(b.acquire(2000)).toBe(true);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(90);
    a.release(); // late: must not end b's turn
    expect(a.acquire(20)).toBe(false);
    b.release();
  });

  it('keeps one queue per database file', async () => {
    const a = await member(dbFile(), { turns: 1, holdMs: 5000 });
    const b = await member(dbFile(), { turns: 1, holdMs: 5000 });
    expect(a.acquire(1000)).toBe(true);
    expect(b.acquire(1000)).toBe(true);
    a.release();
    b.release();
  });
});

describe('SQLite ledger writers in several processes', () => {
  it('claim one item at a time, queueing for the lock: every item done once, no SQLITE_BUSY', async () => {
    const dir = tmp();
    const file = path.join(dir, 'l.db');
    const l = new SqliteLedger({ path: file });
    await l.putManifest('sha256:m', 'x');
    await l.createRollout({ id: 'r', name: 'r', manifestDigest: 'sha256:m', envVersion: 'e', gpus: 0 }, Array.from({ length: 1000 }, () => newItem('r')));
    await l.close();
    const src = fileURLToPath(new URL('../../../src/ledger/sqlite.ts', import.meta.url));
    const script = `import fs from 'node:fs';
      import { SqliteLedger } from ${JSON.stringify(src)};
      const l = new SqliteLedger({ path: ${JSON.stringify(file)} });
      let n = 0;
      process.stdout.write('ready ');
      while (!fs.existsSync(${JSON.stringify(path.join(dir, 'go'))})) await new Promise((r) => setTimeout(r, 5));
      for (;;) {
        const [c] = l.claimSync({ worker: 'w' + process.pid, leaseMs: 60000, limit: 1 });
        if (!c) break;
        l.completeSync({ itemId: c.item.id, token: c.token, outputRef: 'sha256:o' });
        n++;
      }
      const rep = JSON.stringify({ n, turns: l.tx.turns });
      await l.close();
      process.stdout.write(rep);`;
    const children = Array.from({ length: 4 }, () => spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] }));
    const reports = children.map((c) => new Promise<{ n: number; turns: number }>((resolve, reject) => {
      let out = '';
      c.stdout.on('data', (d: Buffer) => { out += d.toString(); });
      c.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out.replace('ready ', ''))) : reject(new Error(`writer exited ${code}`))));
    }));
    await Promise.all(children.map((c) => new Promise<void>((resolve) => c.stdout.once('data', () => resolve()))));
    fs.writeFileSync(path.join(dir, 'go'), ''); // all four start together, so they contend
    const done = await Promise.all(reports);
    expect(done.reduce((a, r) => a + r.n, 0)).toBe(1000);
    expect(done.reduce((a, r) => a + r.turns, 0)).toBeGreaterThan(0); // they did queue
    // polling alone let one writer take ~all items here (997 of 1,000); in turn each gets a share
    for (const r of done) expect(r.n).toBeGreaterThan(50);
    const check = new SqliteLedger({ path: file });
    expect((await check.results({ rolloutId: 'r' })).length).toBe(1000);
    expect(await check.check()).toEqual([]);
    await check.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }, 60_000);
});
