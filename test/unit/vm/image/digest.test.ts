import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';

// counts the reads, to tell a digest taken again from one answered from memory
vi.mock('node:fs', async (importOriginal) => {
  const real = await importOriginal<typeof import('node:fs')>();
  return { ...real, default: real, createReadStream: vi.fn(real.createReadStream) };
});
const { createReadStream } = await import('node:fs');
const { fileDigest } = await import('../../../../src/vm/image/digest.js');

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-digest-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));
const sha = (b: Buffer | string) => crypto.createHash('sha256').update(b).digest('hex');
const reads = () => vi.mocked(createReadStream).mock.calls.length;

describe('fileDigest', () => {
  it('hashes a settled file once per process while its stat stays the same', async () => {
    // the node binary was written long ago: its digest may be kept
    const before = reads();
    const d = await fileDigest(process.execPath);
    expect(d).toBe(sha(fs.readFileSync(process.execPath)));
    expect(await fileDigest(process.execPath)).toBe(d);
    expect(reads() - before).toBe(1);
  });

  it('hashes a file changed in the last seconds every time, and sees each change', async () => {
    const f = path.join(tmp, 'agent');
    fs.writeFileSync(f, 'aaaa');
    const before = reads();
    expect(await fileDigest(f)).toBe(sha('aaaa'));
    expect(await fileDigest(f)).toBe(sha('aaaa'));
    expect(reads() - before).toBe(2);
    // same size, mtime put back: only the ctime tells
    const st = fs.statSync(f);
    fs.writeFileSync(f, 'bbbb');
    fs.utimesSync(f, st.atime, st.mtime);
    expect(await fileDigest(f)).toBe(sha('bbbb'));
  });
});
