import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BlobStore, digestOf } from '../../../src/ledger/blobs.js';
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
