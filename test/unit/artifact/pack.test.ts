import { createHash } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { extractArtifact, inspectArtifact, packArtifact, verifyArtifact } from '../../../src/artifact/index.js';
import { run } from '../../../src/util/exec.js';
import { leftovers, makeInputs, tempDir, type Inputs } from './helpers.js';

const fileSha = async (f: string) => createHash('sha256').update(await readFile(f)).digest('hex');

describe('packArtifact', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  let inputs: Inputs;
  beforeAll(async () => {
    ({ dir, cleanup } = await tempDir());
    inputs = await makeInputs(dir, { disk: true });
  });
  afterAll(() => cleanup());

  it('writes byte-identical artifacts for the same input and creation time', async () => {
    const common = { ...inputs, createdAt: '2026-01-02T03:04:05Z', cpus: 2, memoryMiB: 512, entrypoint: ['/bin/sh'], env: { A: '1' } };
    const a = await packArtifact({ ...common, out: path.join(dir, 'a.smolmachine') });
    const b = await packArtifact({ ...common, out: path.join(dir, 'b.smolmachine') });
    expect(await fileSha(a.out)).toBe(await fileSha(b.out));
    expect(a.digest).toBe(b.digest);
    const c = await packArtifact({ ...common, createdAt: '2026-01-02T03:04:06Z', out: path.join(dir, 'c.smolmachine') });
    expect(await fileSha(c.out)).not.toBe(await fileSha(a.out));
    expect(c.manifest.contentDigest).toBe(a.manifest.contentDigest);
  });

  it('is a standard tar: GNU tar lists manifest.json first, root-owned, mtime 0', async () => {
    const out = path.join(dir, 'tar.smolmachine');
    await packArtifact({ ...inputs, out, createdAt: '2026-01-01T00:00:00Z' });
    const r = await run('tar', ['--numeric-owner', '-tvf', out]);
    const lines = r.stdout.trim().split('\n');
    expect(lines.map((l) => l.split(/\s+/).pop())).toEqual(['manifest.json', 'disk.qcow2.zst', 'kernel.zst', 'initrd.zst']);
    for (const l of lines) expect(l).toMatch(/^-rw-r--r-- 0\/0 .* 1970-01-01 00:00 /);
  });

  it('round-trips: the flattened disk holds the whole qcow2 chain, kernel and initrd come back byte-exact', async () => {
    const out = path.join(dir, 'rt.smolmachine');
    const r = await packArtifact({ ...inputs, out, createdAt: '2026-01-01T00:00:00Z' });
    expect(r.manifest.entries.find((e) => e.kind === 'disk')).toMatchObject({ format: 'qcow2', virtualSize: 64 * 1024 * 1024 });
    const x = await extractArtifact(out, path.join(dir, 'rt'));
    expect(await fileSha(x.files.kernel!)).toBe(await fileSha(inputs.kernel));
    expect(await fileSha(x.files.initrd!)).toBe(await fileSha(inputs.initrd));
    const cmp = await run('qemu-img', ['compare', inputs.disk!, x.files.disk!], { allowFailure: true });
    expect(cmp.stdout).toContain('Images are identical');
    const info = JSON.parse((await run('qemu-img', ['info', '--output=json', x.files.disk!])).stdout) as Record<string, unknown>;
    expect(info['backing-filename']).toBeUndefined();
    expect((await verifyArtifact(out)).ok).toBe(true);
  });

  it('stores a mostly-empty disk compactly (zero clusters are not allocated, then zstd)', async () => {
    const out = path.join(dir, 'sparse.smolmachine');
    const r = await packArtifact({ ...inputs, out });
    const disk = r.manifest.entries.find((e) => e.kind === 'disk')!;
    expect(disk.virtualSize).toBe(64 * 1024 * 1024);
    // 1.5 MiB of written pattern data in a 64 MiB disk
    expect(disk.size).toBeLessThan(4 * 1024 * 1024);
    expect(disk.stored.size).toBeLessThan(disk.size / 4);
  });

  it('inspect reads the manifest without reading the entries', async () => {
    const out = path.join(dir, 'inspect.smolmachine');
    const p = await packArtifact({ ...inputs, out, kernelIdentity: 'linux-image-cloud-amd64 6.1', imageIdentity: 'default' });
    const i = await inspectArtifact(out);
    expect(i.manifest).toEqual(p.manifest);
    expect(i).toMatchObject({ size: (await stat(out)).size, digest: p.digest, signed: false });
    expect(i.manifest.kernel.identity).toBe('linux-image-cloud-amd64 6.1');
  });

  it('refuses to replace an existing output unless forced, and leaves no temp files on failure', async () => {
    const out = path.join(dir, 'exists.smolmachine');
    await packArtifact({ ...inputs, out });
    await expect(packArtifact({ ...inputs, out })).rejects.toThrow(/already exists/);
    await packArtifact({ ...inputs, out, force: true });
    await expect(packArtifact({ ...inputs, kernel: path.join(dir, 'missing'), out: path.join(dir, 'never.smolmachine') })).rejects.toThrow(/kernel .* does not exist/);
    await expect(packArtifact({ ...inputs, out: path.join(dir, 'no-such-dir', 'x.smolmachine') })).rejects.toThrow(/output directory .*no-such-dir does not exist/);
    expect((await leftovers(dir)).filter((n) => n.startsWith('.'))).toEqual([]);
  });

  it('rejects a kernel that is neither ELF nor bzImage', async () => {
    await expect(packArtifact({ ...inputs, kernel: inputs.initrd, out: path.join(dir, 'badk.smolmachine') })).rejects.toThrow(/neither an ELF vmlinux nor a bzImage/);
  });
});
