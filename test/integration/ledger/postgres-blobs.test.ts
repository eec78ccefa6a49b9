import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BlobTooLargeError, digestOf } from '../../../src/ledger/blobs.js';
import { checkLedger } from '../../../src/ledger/check.js';
import { IntegrityError } from '../../../src/ledger/errors.js';
import { FileBlobStore } from '../../../src/ledger/file-blobs.js';
import { BLOB_CHUNK_BYTES } from '../../../src/ledger/limits.js';
import { migrateBlobs } from '../../../src/ledger/migrate-blobs.js';
import { openLedger, type OpenLedger } from '../../../src/ledger/open.js';
import { PostgresBlobStore } from '../../../src/ledger/postgres-blobs.js';
import { PostgresLedger } from '../../../src/ledger/postgres.js';
import { pgUnavailableReason, startPostgres, type PgServer } from '../../helpers/postgres.js';
import { newItem } from '../../unit/ledger/contract.js';

const reason = pgUnavailableReason();
let server: PgServer | undefined;
let admin: pg.Client | undefined;
let tmp: string;
let n = 0;

/** A fresh database, opened as a host with its own SMOL_HOME would open it. */
async function host(db: string, home = fs.mkdtempSync(path.join(tmp, 'home-')), extra: NodeJS.ProcessEnv = {}): Promise<OpenLedger> {
  return openLedger(server!.url(db), { SMOL_HOME: home, ...extra });
}
async function freshDb(): Promise<string> {
  const db = `b${++n}`;
  await admin!.query(`CREATE DATABASE ${db}`);
  return db;
}
const close = async (...ls: OpenLedger[]) => { for (const l of ls) { await l.blobs.close(); await l.ledger.close(); } };
const q = async (db: string, sql: string, args: unknown[] = []) => {
  const c = new pg.Client({ connectionString: server!.url(db) });
  await c.connect();
  try { return (await c.query(sql, args)).rows; } finally { await c.end(); }
};

describe.skipIf(reason !== null)(`postgres blob store${reason ? ` (skipped: ${reason})` : ''}`, () => {
  beforeAll(async () => {
    server = await startPostgres();
    admin = new pg.Client({ connectionString: server.url() });
    await admin.connect();
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-pgblobs-'));
  });
  afterAll(async () => {
    await admin?.end();
    server?.stop();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('is the default store of a PostgreSQL ledger; a blob larger than a chunk round-trips in chunks, by bytes, file and stream', async () => {
    const db = await freshDb();
    const a = await host(db);
    expect(a.blobs.kind).toBe('postgres');
    const big = randomBytes(2 * BLOB_CHUNK_BYTES + 12345);
    const ref = await a.blobs.put(big);
    expect(ref).toBe(digestOf(big));
    expect(await q(db, 'SELECT size, chunks FROM blobs WHERE digest = $1', [ref])).toEqual([{ size: String(big.length), chunks: 3 }]);
    expect((await q(db, 'SELECT octet_length(data) AS n FROM blob_chunks WHERE digest = $1 ORDER BY seq', [ref])).map((r) => r.n)).toEqual([BLOB_CHUNK_BYTES, BLOB_CHUNK_BYTES, 12345]);
    expect((await a.blobs.get(ref)).equals(big)).toBe(true);
    expect(fs.readFileSync(await a.blobs.fileOf(ref)).equals(big)).toBe(true);
    // the same bytes from a file: same digest, nothing stored twice; small ones share a commit
    const file = path.join(tmp, 'big.bin');
    fs.writeFileSync(file, big);
    expect(await a.blobs.putFile(file)).toBe(ref);
    const refs = await a.blobs.putMany(['one', 'two', 'one', '', big]);
    expect(refs).toEqual([digestOf('one'), digestOf('two'), digestOf('one'), digestOf(''), ref]);
    expect(await a.blobs.getText(refs[1])).toBe('two');
    expect(await a.blobs.getText(refs[3])).toBe('');
    expect(await q(db, 'SELECT count(*)::int AS n FROM blobs')).toEqual([{ n: 4 }]);
    expect(await a.blobs.missing([ref, digestOf('never')])).toEqual([digestOf('never')]);
    await expect(a.blobs.get(digestOf('never'))).rejects.toThrow(/missing/);
    await close(a);
  });

  it('detects a tampered or overlong chunk on read and returns none of it', async () => {
    const db = await freshDb();
    const a = await host(db);
    const big = randomBytes(BLOB_CHUNK_BYTES + 100);
    const ref = await a.blobs.put(big);
    await q(db, 'UPDATE blob_chunks SET data = overlay(data PLACING $2 FROM 10) WHERE digest = $1 AND seq = 1', [ref, Buffer.from('tampered')]);
    await expect(a.blobs.get(ref)).rejects.toThrow(IntegrityError);
    await expect(a.blobs.get(ref)).rejects.toThrow(/corrupt \(content hash differs\)/);
    await expect(a.blobs.fileOf(ref)).rejects.toThrow(/corrupt/);
    expect(fs.readdirSync(a.location.blobs, { recursive: true }).filter((f) => String(f).endsWith('.tmp') || String(f).length > 60)).toEqual([]);
    // a hostile row far longer than a chunk: only a chunk and a byte of it cross the wire, then it is refused
    await q(db, 'UPDATE blob_chunks SET data = $2 WHERE digest = $1 AND seq = 0', [ref, Buffer.alloc(3 * BLOB_CHUNK_BYTES)]);
    await expect(a.blobs.get(ref)).rejects.toThrow(/chunk 0 is 3145728 bytes, over the 1048576-byte chunk size/);
    // a missing chunk
    await q(db, 'DELETE FROM blob_chunks WHERE digest = $1 AND seq = 1', [ref]);
    await expect(a.blobs.get(ref)).rejects.toThrow(/corrupt/);
    await close(a);
  });

  it('streams a read as raw chunks; a reader left mid-stream closes its connection and the pool goes on', async () => {
    const db = await freshDb();
    const a = await host(db);
    const big = randomBytes(3 * BLOB_CHUNK_BYTES + 3);
    const ref = await a.blobs.put(big);
    for (let i = 0; i < 6; i++) { // more abandoned reads than the pool has connections
      for await (const chunk of a.blobs.read(ref)) {
        expect(chunk.equals(big.subarray(0, BLOB_CHUNK_BYTES))).toBe(true);
        break;
      }
    }
    expect((await a.blobs.get(ref)).equals(big)).toBe(true);
    expect(await a.blobs.getText(await a.blobs.put(''))).toBe('');
    await close(a);
  });

  it('lets concurrent writers of the same digest on separate connections store it once, whole', async () => {
    const db = await freshDb();
    const hosts = await Promise.all([1, 2, 3, 4, 5, 6].map(() => host(db)));
    const big = randomBytes(3 * BLOB_CHUNK_BYTES + 7);
    const refs = await Promise.all(hosts.map((h, i) => (i % 2 ? h.blobs.put(big) : (async () => (await h.blobs.putMany(['small', big]))[1])())));
    expect(new Set(refs)).toEqual(new Set([digestOf(big)]));
    expect(await q(db, 'SELECT count(*)::int AS n FROM blobs')).toEqual([{ n: 2 }]);
    expect(await q(db, 'SELECT count(*)::int AS n FROM blob_chunks WHERE digest = $1', [refs[0]])).toEqual([{ n: 4 }]);
    expect((await hosts[5].blobs.get(refs[0])).equals(big)).toBe(true);
    await close(...hosts);
  });

  it('never lets a reader on another host find a row before its blob', async () => {
    const db = await freshDb();
    const gpu = await host(db);
    const cpu = await host(db);
    const L = gpu.ledger;
    await L.putManifest('sha256:m', 'x');
    const N = 40;
    await L.createRollout({ id: 'r', name: 'r', manifestDigest: 'sha256:m', envVersion: 'e', gpus: 1 }, Array.from({ length: N }, () => newItem('r')));
    const writer = (async () => {
      for (;;) {
        const [c] = await L.claim({ worker: 'w', leaseMs: 30_000, limit: 1, kind: 'cpu' });
        if (!c) return;
        // the order a worker keeps: the blob committed, then the row that names it
        const outputRef = await gpu.blobs.put(randomBytes(BLOB_CHUNK_BYTES + c.item.id));
        expect((await L.complete({ itemId: c.item.id, token: c.token, outputRef })).ok).toBe(true);
      }
    })();
    const seen = new Set<string>();
    let writing = true;
    void writer.finally(() => { writing = false; });
    // the other host reads every result as soon as its row is visible, until the writer is done and all are read
    while (writing || seen.size < N) {
      for (const r of await cpu.ledger.results({ rolloutId: 'r' })) {
        if (seen.has(r.outputRef)) continue;
        expect((await cpu.blobs.get(r.outputRef)).length).toBeGreaterThan(BLOB_CHUNK_BYTES);
        seen.add(r.outputRef);
      }
    }
    await writer;
    expect(seen.size).toBe(N);
    await close(gpu, cpu);
  });

  it('migrate-blobs moves a file store in, one whole blob per transaction, idempotently; a damaged file is reported, not copied', async () => {
    const db = await freshDb();
    const dir = path.join(tmp, `files-${n}`);
    const files = new FileBlobStore(dir);
    const big = randomBytes(2 * BLOB_CHUNK_BYTES + 1);
    const bigRef = files.put(big);
    const smallRefs = files.putMany(['prompt a', 'completion b']);
    const damaged = files.put(Buffer.alloc(BLOB_CHUNK_BYTES + 5, 1));
    fs.writeFileSync(files.pathOf(damaged), Buffer.alloc(BLOB_CHUNK_BYTES + 5, 2)); // same length, other bytes
    const l = await host(db);
    const to = l.blobs as PostgresBlobStore;
    const first = await migrateBlobs(files, to);
    expect(first).toMatchObject({ scanned: 4, copied: 3, present: 0, bytes: big.length + 'prompt a'.length + 'completion b'.length });
    expect(first.failed).toEqual([{ digest: damaged, error: expect.stringMatching(/corrupt/) }]);
    // the damaged blob's chunks were rolled back with its row: all or nothing
    expect(await q(db, 'SELECT count(*)::int AS n FROM blob_chunks WHERE digest = $1', [damaged])).toEqual([{ n: 0 }]);
    expect((await l.blobs.get(bigRef)).equals(big)).toBe(true);
    expect(await l.blobs.getText(smallRefs[1])).toBe('completion b');
    // a rerun (or a run after a kill) copies nothing twice
    fs.writeFileSync(files.pathOf(damaged), Buffer.alloc(BLOB_CHUNK_BYTES + 5, 1)); // restored from a backup
    const again = await migrateBlobs(files, to);
    expect(again).toMatchObject({ scanned: 4, copied: 1, present: 3, failed: [] });
    expect(await migrateBlobs(files, to)).toMatchObject({ scanned: 4, copied: 0, present: 4, failed: [] });
    files.close();
    await close(l);
  });

  it('enforces the size cap while streaming, on write and on read', async () => {
    const db = await freshDb();
    const cap = BLOB_CHUNK_BYTES + BLOB_CHUNK_BYTES / 2;
    const small = await host(db, undefined, { SMOL_BLOB_MAX_BYTES: String(cap) });
    const roomy = await host(db);
    const over = randomBytes(2 * BLOB_CHUNK_BYTES);
    await expect(small.blobs.put(over)).rejects.toThrow(BlobTooLargeError);
    const file = path.join(tmp, 'over.bin');
    fs.writeFileSync(file, over);
    await expect(small.blobs.putFile(file)).rejects.toThrow(/larger than the blob size cap/);
    // a stream that lies about nothing but is simply too long is cut off mid-stream and rolled back
    const to = small.blobs as PostgresBlobStore;
    await expect(to.store(digestOf(over), [over.subarray(0, BLOB_CHUNK_BYTES), over.subarray(BLOB_CHUNK_BYTES)])).rejects.toThrow(BlobTooLargeError);
    expect(await q(db, 'SELECT count(*)::int AS n FROM blobs')).toEqual([{ n: 0 }]);
    // written by a host with a larger cap: the small host refuses to read it, before fetching a chunk
    const ref = await roomy.blobs.put(over);
    await expect(small.blobs.get(ref)).rejects.toThrow(/larger than the blob size cap/);
    // a row that claims a small size but holds more chunks than that stops at the cap
    await q(db, 'UPDATE blobs SET size = 10 WHERE digest = $1', [ref]);
    await expect(roomy.blobs.get(ref)).rejects.toThrow(/more bytes than its recorded 10/);
    await close(small, roomy);
  });

  it('serves a second host with another SMOL_HOME, and `ledger check --blobs` sees the same store (orphans counted)', async () => {
    const db = await freshDb();
    const a = await host(db);
    const b = await host(db);
    expect(a.location.blobs).not.toBe(b.location.blobs);
    const L = a.ledger as PostgresLedger;
    const input = await a.blobs.put('sample input');
    await L.putManifest('sha256:m', 'x');
    await L.createRollout({ id: 'r', name: 'r', manifestDigest: 'sha256:m', envVersion: 'e', gpus: 1 }, [{ ...newItem('r'), inputRef: input }]);
    const [c] = await b.ledger.claim({ worker: 'host-b', leaseMs: 30_000, limit: 1, kind: 'cpu' });
    expect(fs.readFileSync(await b.blobs.fileOf(c.item.inputRef), 'utf8')).toBe('sample input');
    const out = await b.blobs.put(randomBytes(BLOB_CHUNK_BYTES * 2));
    expect((await b.ledger.complete({ itemId: c.item.id, token: c.token, outputRef: out })).ok).toBe(true);
    await a.blobs.put('a stale worker\'s output, never referenced');
    const report = await checkLedger(a, { verifyBlobs: true });
    expect(report).toMatchObject({ backend: 'postgres', blobStore: { kind: 'postgres' }, blobsChecked: 2, orphans: { count: 1 }, issues: [] });
    await q(db, 'UPDATE blob_chunks SET data = $2 WHERE digest = $1 AND seq = 0', [input, Buffer.from('sample inpuT')]);
    await q(db, 'DELETE FROM blobs WHERE digest = $1', [out]);
    const bad = await checkLedger(b, { verifyBlobs: true });
    expect(bad.issues.map((i) => i.detail)).toHaveLength(2);
    expect(bad.issues.map((i) => i.detail)).toEqual(expect.arrayContaining([
      expect.stringMatching(/^input of .*: blob sha256:\w+ is corrupt/),
      expect.stringMatching(new RegExp(`^result .*: ${out} is missing`)),
    ]));
    await close(a, b);
  });
});
