import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BlobStore, BlobTooLargeError, blobMaxBytes, digestOf, FileBlobStore } from '../../../src/ledger/blobs.js';
import { checkLedger } from '../../../src/ledger/check.js';
import { BLOB_CHUNK_BYTES } from '../../../src/ledger/limits.js';
import { openLedger, resolveLedger } from '../../../src/ledger/open.js';
import { newItem } from './contract.js';
import { IntegrityError } from '../../../src/ledger/errors.js';
import { INLINE_MAX_BYTES } from '../../../src/ledger/small-blobs.js';

let dir: string;
beforeEach(() => { dir = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-blobs-')); });
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

const files = (root: string): string[] => fs.readdirSync(root, { recursive: true, withFileTypes: true }).filter((e) => e.isFile()).map((e) => e.name);

describe('blob store', () => {
  it('keeps small blobs as rows of small.db and large ones as files, readable the same way', () => {
    const b = new BlobStore(dir);
    const small = b.put('a prompt');
    const big = b.put(Buffer.alloc(INLINE_MAX_BYTES + 1, 7));
    expect(small).toBe(digestOf('a prompt'));
    expect(fs.existsSync(b.pathOf(small))).toBe(false);
    expect(fs.existsSync(b.pathOf(big))).toBe(true);
    expect(b.getText(small)).toBe('a prompt');
    expect(b.get(big).length).toBe(INLINE_MAX_BYTES + 1);
    expect([b.has(small), b.has(big), b.has(digestOf('never stored'))]).toEqual([true, true, false]);
    const fresh = new BlobStore(path.join(dir, 'fresh'));
    expect(fresh.has(small)).toBe(false);
    expect(fs.existsSync(path.join(dir, 'fresh', 'small.db'))).toBe(false); // looking does not create it
    b.close();
    // another store on the same directory (another process) sees them
    const again = new BlobStore(dir);
    expect(again.getText(small)).toBe('a prompt');
    again.close();
  });

  it('stores a batch in one call and gives a small blob a file when a program needs one', () => {
    const b = new BlobStore(dir);
    const refs = b.putMany(['one', 'two', 'one']);
    expect(refs).toEqual([digestOf('one'), digestOf('two'), digestOf('one')]);
    expect(files(dir).filter((f) => !f.startsWith('small.db'))).toEqual([]);
    const p = b.fileOf(refs[1]);
    expect(fs.readFileSync(p, 'utf8')).toBe('two');
    expect(b.fileOf(refs[1])).toBe(p);
    expect(() => b.fileOf(digestOf('missing'))).toThrow(IntegrityError);
    b.close();
  });

  it('detects a corrupted row like a corrupted file', () => {
    const b = new BlobStore(dir);
    const ref = b.put('honest bytes');
    b.close();
    const db = new Database(path.join(dir, 'small.db'));
    db.prepare('UPDATE blobs SET data = ? WHERE digest = ?').run(Buffer.from('tampered'), ref);
    db.close();
    const again = new BlobStore(dir);
    expect(() => again.get(ref)).toThrow(/corrupt/);
    expect(() => again.fileOf(ref)).toThrow(/corrupt/);
    again.close();
  });

  it('writes every blob as a file when inline storage is off (a PostgreSQL ledger shared across hosts)', () => {
    const b = new BlobStore(dir, false, { inline: false });
    const refs = b.putMany(['x', 'y']);
    for (const r of refs) expect(fs.existsSync(b.pathOf(r))).toBe(true);
    expect(fs.existsSync(path.join(dir, 'small.db'))).toBe(false);
    expect(b.has(refs[0])).toBe(true);
  });
});

describe('file blob store: streaming, listing, the size cap, and ledger check', () => {
  it('streams a blob in chunks, verifying at the end, and lists files and rows alike', async () => {
    const b = new FileBlobStore(dir);
    const big = Buffer.alloc(BLOB_CHUNK_BYTES * 2 + 3, 9);
    const ref = b.put(big);
    const small = b.put('row');
    const parts: Buffer[] = [];
    for await (const c of b.read(ref)) parts.push(c);
    expect(parts.length).toBeGreaterThan(1);
    expect(Buffer.concat(parts).equals(big)).toBe(true);
    const listed: string[] = [];
    for await (const d of b.list()) listed.push(d);
    expect(listed.sort()).toEqual([ref, small].sort());
    fs.writeFileSync(b.pathOf(ref), Buffer.alloc(big.length, 8));
    await expect((async () => { for await (const _ of b.read(ref)) { /* drain */ } })()).rejects.toThrow(/corrupt/);
    const file = path.join(dir, 'in.bin');
    fs.writeFileSync(file, big);
    expect(b.putFile(file)).toBe(ref); // already there, by name: the damaged file is what check --blobs reports
    b.close();
  });

  it('refuses a blob over the cap on write and on read, before reading it', () => {
    const b = new FileBlobStore(dir, false, { maxBytes: 10 });
    expect(() => b.put('x'.repeat(11))).toThrow(BlobTooLargeError);
    const roomy = new FileBlobStore(dir, false, { inline: false });
    const ref = roomy.put('y'.repeat(11));
    expect(() => b.get(ref)).toThrow(/larger than the blob size cap \(10 bytes\)/);
    expect(() => blobMaxBytes({ SMOL_BLOB_MAX_BYTES: '1e3x' })).toThrow(/not a positive whole number/);
    expect(blobMaxBytes({ SMOL_BLOB_MAX_BYTES: '4096' })).toBe(4096);
  });

  it('ledger check --blobs on a SQLite ledger: referenced blobs verified, a missing one named, orphans counted', async () => {
    const l = await openLedger(path.join(dir, 'ledger.db'), { SMOL_HOME: dir });
    expect(l.blobs.kind).toBe('files');
    const input = await l.blobs.put('input');
    await l.ledger.putManifest('sha256:m', 'x');
    await l.ledger.createRollout({ id: 'r', name: 'r', manifestDigest: 'sha256:m', envVersion: 'e', gpus: 1 }, [newItem('r', { inputRef: input }), newItem('r', { inputRef: digestOf('never stored') })]);
    await l.blobs.put('orphan');
    const report = await checkLedger(l, { verifyBlobs: true });
    expect(report).toMatchObject({ blobStore: { kind: 'files' }, blobsChecked: 2, orphans: { count: 1, digests: [digestOf('orphan')] } });
    expect(report.issues).toHaveLength(1);
    expect(report.issues[0]).toEqual({ check: 'blob references resolve', detail: expect.stringMatching(new RegExp(`^input of r/s\\d+/simulate: ${digestOf('never stored')} is missing$`)) });
    await l.ledger.close();
    await l.blobs.close();
  });
});

describe('which blob store a ledger opens with', () => {
  const pgUrl = 'postgres://u:secret@db.example:5432/smol';
  it('PostgreSQL rows for a PostgreSQL ledger, files beside a SQLite one, a directory when $SMOL_BLOBS names one', () => {
    expect(resolveLedger(pgUrl, { SMOL_HOME: dir })).toMatchObject({ backend: 'postgres', blobStore: 'postgres', blobs: path.join(dir, 'cache', 'blobs') });
    expect(resolveLedger(pgUrl, { SMOL_HOME: dir, SMOL_BLOBS: '/mnt/shared' })).toMatchObject({ blobStore: 'files', blobs: '/mnt/shared' });
    expect(resolveLedger(undefined, { SMOL_HOME: dir })).toMatchObject({ backend: 'sqlite', blobStore: 'files', blobs: path.join(dir, 'blobs') });
    expect(() => resolveLedger(undefined, { SMOL_HOME: dir, SMOL_BLOBS: 'postgres' })).toThrow(/needs a PostgreSQL ledger/);
  });
});
