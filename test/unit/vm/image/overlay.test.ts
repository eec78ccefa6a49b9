import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createOverlay } from '../../../../src/vm/image/ext4.js';
import { readQcow2Header } from '../../../../src/vm/image/qcow2.js';
import { run } from '../../../../src/util/exec.js';
import { NotFoundError, SmolError } from '../../../../src/errors/index.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'overlay-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));
const base = path.join(dir, 'base.qcow2');
const templates = path.join(dir, 'templates');

describe('overlays (real qemu-img)', () => {
  it('copies one template per base and size, and every copy names the base and keeps the size', async () => {
    await run('qemu-img', ['create', '-q', '-f', 'qcow2', base, '64M']);
    const a = path.join(dir, 'a.qcow2');
    const b = path.join(dir, 'b.qcow2');
    await createOverlay(base, a, { templateDir: templates });
    await createOverlay(base, b, { templateDir: templates });
    expect(fs.readdirSync(templates)).toHaveLength(1);
    expect(fs.readFileSync(a).equals(fs.readFileSync(b))).toBe(true);
    expect(readQcow2Header(b)).toEqual({ version: 3, virtualSize: 64 << 20, backing: base });
    const info = JSON.parse((await run('qemu-img', ['info', '--output=json', b])).stdout) as { 'backing-filename': string; 'virtual-size': number };
    expect(info).toMatchObject({ 'backing-filename': base, 'virtual-size': 64 << 20 });

    const big = path.join(dir, 'big.qcow2');
    await createOverlay(base, big, { templateDir: templates, sizeBytes: 128 << 20 });
    expect(fs.readdirSync(templates)).toHaveLength(2);
    expect(readQcow2Header(big).virtualSize).toBe(128 << 20);
    // a written overlay never feeds back into the template
    await run('qemu-io', ['-c', 'write -P 7 0 64k', a]);
    expect(fs.statSync(a).size).toBeGreaterThan(fs.statSync(b).size);
    await createOverlay(base, path.join(dir, 'c.qcow2'), { templateDir: templates });
    expect(fs.readFileSync(path.join(dir, 'c.qcow2')).equals(fs.readFileSync(b))).toBe(true);
  });

  it('names a missing base, and refuses a file that is not qcow2', async () => {
    await expect(createOverlay(path.join(dir, 'nope.qcow2'), path.join(dir, 'x.qcow2'), { templateDir: templates })).rejects.toBeInstanceOf(NotFoundError);
    fs.writeFileSync(path.join(dir, 'raw'), Buffer.alloc(1024));
    expect(() => readQcow2Header(path.join(dir, 'raw'))).toThrow(SmolError);
    expect(() => readQcow2Header(path.join(dir, 'raw'))).toThrow(/not a qcow2 image/);
  });
});

describe('overlay templates after a kill -9', () => {
  it('sweeps a stale temp file left between qemu-img and the rename, and keeps a fresh one', async () => {
    const tdir = path.join(dir, 'swept');
    fs.mkdirSync(tdir, { recursive: true });
    const stale = path.join(tdir, '.tmp-deadbeef.999999.qcow2');
    const fresh = path.join(tdir, '.tmp-cafe.999998.qcow2');
    fs.writeFileSync(stale, 'half a qcow2');
    fs.writeFileSync(fresh, 'another maker, still at work');
    const hourAgo = new Date(Date.now() - 3_600_000);
    fs.utimesSync(stale, hourAgo, hourAgo);
    await createOverlay(base, path.join(dir, 'd.qcow2'), { templateDir: tdir });
    const left = fs.readdirSync(tdir);
    expect(left).not.toContain(path.basename(stale));
    expect(left).toContain(path.basename(fresh));
    expect(left.filter((n) => n.endsWith('.qcow2') && !n.startsWith('.tmp-'))).toHaveLength(1);
  });
});
