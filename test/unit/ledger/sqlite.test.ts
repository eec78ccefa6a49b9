import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import { SqliteLedger } from '../../../src/ledger/sqlite.js';
import { LedgerVersionError } from '../../../src/ledger/errors.js';
import { sqliteMigrations } from '../../../src/ledger/sqlite-migrations.js';
import { ledgerContract, newItem } from './contract.js';

const tmp = () => fs.mkdtempSync(path.join(os.tmpdir(), 'smol-ledger-'));

ledgerContract('sqlite', async () => {
  const dir = tmp();
  const ledger = new SqliteLedger({ path: path.join(dir, 'ledger.db') });
  return { ledger, cleanup: async () => { await ledger.close(); fs.rmSync(dir, { recursive: true, force: true }); } };
});

describe('sqlite ledger specifics', () => {
  it('runs in WAL mode with a bounded journal and numbered migrations', async () => {
    const dir = tmp();
    const l = new SqliteLedger({ path: path.join(dir, 'l.db') });
    expect(l.db.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(l.db.pragma('journal_size_limit', { simple: true })).toBe(67108864);
    expect(l.db.pragma('user_version', { simple: true })).toBe(sqliteMigrations.length);
    expect(sqliteMigrations.length).toBeGreaterThanOrEqual(2);
    await l.close();
    // reopening does not re-run migrations
    const again = new SqliteLedger({ path: path.join(dir, 'l.db') });
    expect(again.db.pragma('user_version', { simple: true })).toBe(sqliteMigrations.length);
    await again.close();
  });

  it('checkpoints the WAL from a background thread, not inside commits', async () => {
    const dir = tmp();
    const file = path.join(dir, 'l.db');
    const l = new SqliteLedger({ path: file });
    await l.putManifest('sha256:m', 'x');
    expect(l.db.pragma('wal_autocheckpoint', { simple: true })).toBe(0);
    await l.createRollout({ id: 'r', name: 'r', manifestDigest: 'sha256:m', envVersion: 'e', gpus: 1 }, Array.from({ length: 20_000 }, () => newItem('r')));
    // the WAL-index header: mxFrame (frames in the WAL) at byte 16, nBackfill (frames copied into the database) at 96
    const shm = () => { const b = fs.readFileSync(`${file}-shm`); return { frames: b.readUInt32LE(16), backfilled: b.readUInt32LE(96) }; };
    expect(shm().frames).toBeGreaterThan(1000); // past SQLite's autocheckpoint threshold, yet the commit did not checkpoint
    const until = Date.now() + 5000;
    while (shm().backfilled < shm().frames && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
    expect(shm().backfilled).toBe(shm().frames);
    await l.close();
    const inline = new SqliteLedger({ path: path.join(dir, 'inline.db'), checkpoints: 'inline' });
    await inline.putManifest('sha256:m', 'x');
    expect(inline.db.pragma('wal_autocheckpoint', { simple: true })).toBe(1000);
    await inline.close();
  });

  it('starts the checkpoint thread at prepareWrites(), before the first write, and only once', async () => {
    const dir = tmp();
    const l = new SqliteLedger({ path: path.join(dir, 'l.db') });
    // a ledger that only reads starts no thread: SQLite's own autocheckpoint is still on
    await l.listRollouts();
    expect(l.db.pragma('wal_autocheckpoint', { simple: true })).toBe(1000);
    l.prepareWrites();
    expect(l.db.pragma('wal_autocheckpoint', { simple: true })).toBe(0);
    l.prepareWrites();
    await l.putManifest('sha256:m', 'x');
    expect(l.db.pragma('wal_autocheckpoint', { simple: true })).toBe(0);
    await l.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('keeps the WAL bounded when writers never pause (commits checkpoint again while the thread is behind)', async () => {
    const dir = tmp();
    const file = path.join(dir, 'l.db');
    const l = new SqliteLedger({ path: file });
    await l.putManifest('sha256:m', 'x');
    await l.createRollout({ id: 'r', name: 'r', manifestDigest: 'sha256:m', envVersion: 'e', gpus: 1 }, []);
    let peak = 0;
    const until = Date.now() + 3000;
    while (Date.now() < until) {
      l.enqueueSync(Array.from({ length: 500 }, () => newItem('r')));
      const cs = l.claimSync({ worker: 'w', leaseMs: 60_000, limit: 500 });
      l.completeManySync(cs.map((c) => ({ itemId: c.item.id, token: c.token, outputRef: 'sha256:o' })));
      peak = Math.max(peak, fs.statSync(`${file}-wal`).size);
    }
    await l.close();
    // the thread alone let this reach 52 MB in 4 s; the fallback starts at 4000 frames (~16 MB)
    expect(peak).toBeLessThan(24 * 2 ** 20);
  });

  it('refuses a ledger written by a newer schema', () => {
    const dir = tmp();
    const file = path.join(dir, 'l.db');
    const db = new Database(file);
    db.pragma('user_version = 99');
    db.close();
    expect(() => new SqliteLedger({ path: file })).toThrow(LedgerVersionError);
  });

  it('uses the injected clock for leases, so expiry follows the ledger and not the worker', async () => {
    let now = 1_000_000;
    const dir = tmp();
    const l = new SqliteLedger({ path: path.join(dir, 'l.db'), clock: () => now });
    await l.putManifest('sha256:m', 'x');
    await l.createRollout({ id: 'r', name: 'r', manifestDigest: 'sha256:m', envVersion: 'e', gpus: 1 }, [newItem('r')]);
    const [c] = await l.claim({ worker: 'w', leaseMs: 5000, kind: 'cpu' });
    expect(c.expiresAt).toBe(1_005_000);
    now += 5001;
    expect(await l.reclaimExpired()).toBe(1);
    expect((await l.getItem(c.item.id))?.status).toBe('queued');
    await l.close();
  });

  it('waits out another process holding the write lock instead of surfacing SQLITE_BUSY', async () => {
    const dir = tmp();
    const file = path.join(dir, 'l.db');
    const a = new SqliteLedger({ path: file });
    const holder = spawn(process.execPath, ['-e', `
      const D = require('better-sqlite3'); const db = new D(${JSON.stringify(file)});
      db.exec('BEGIN IMMEDIATE'); process.stdout.write('locked\\n'); setTimeout(() => { db.exec('COMMIT'); db.close(); }, 300);`], { cwd: process.cwd(), stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise<void>((resolve) => holder.stdout.once('data', () => resolve()));
    const start = Date.now();
    await a.putManifest('sha256:m', 'x');
    expect(Date.now() - start).toBeGreaterThanOrEqual(200);
    expect(a.tx.busyWaits).toBeGreaterThan(0);
    expect(await a.getManifest('sha256:m')).toBe('x');
    await a.close();
  });
});
