/**
 * kill -9 in the middle of fetching the kernel or building an image leaves nothing that looks usable, and
 * the next run completes. The child runs in its own process group so its apt/lz4/mkfs children die with it.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { ensureKernel, findKernel } from '../../../src/vm/kernel/index.js';
import { resolveImage } from '../../../src/vm/image/index.js';

const tmp = mkdtempSync(path.join(os.tmpdir(), 'smol-atomic-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const child = path.join(path.dirname(new URL(import.meta.url).pathname), 'build-child.ts');

/** Start the child, wait until `ready()` says it is mid-build, then kill its whole process group. */
async function killMidway(args: string[], ready: () => boolean): Promise<void> {
  const p = spawn(process.execPath, ['--import', 'tsx', child, ...args], { detached: true, stdio: 'ignore' });
  const exited = new Promise<void>((r) => p.on('exit', () => r()));
  const deadline = Date.now() + 120_000;
  while (!ready() && Date.now() < deadline && p.exitCode === null) await new Promise((r) => setTimeout(r, 10));
  expect(p.exitCode, 'the child finished before it could be killed').toBeNull();
  process.kill(-p.pid!, 'SIGKILL');
  await exited;
  await new Promise((r) => setTimeout(r, 200));
}

const tmpEntries = (dir: string) => (existsSync(dir) ? readdirSync(dir).filter((n) => n.startsWith('.tmp-')) : []);

describe('interrupted builds', () => {
  it('leaves no kernel behind when the fetch is killed, and the next fetch completes', async () => {
    const home = path.join(tmp, 'k');
    const kdir = path.join(home, 'kernel');
    await killMidway(['kernel', home], () => tmpEntries(kdir).some((t) => readdirSync(path.join(kdir, t)).some((f) => f.endsWith('.deb') || f === 'x')));
    expect(await findKernel(home)).toBeNull();
    expect(readdirSync(kdir).filter((n) => !n.startsWith('.tmp-'))).toEqual([]);
    const k = await ensureKernel(home);
    expect(existsSync(k.vmlinux)).toBe(true);
    expect(readdirSync(kdir).filter((n) => !n.startsWith('.tmp-')).sort()).toEqual([k.release, 'current']);
  }, 300_000);

  it('leaves no image in the cache when a build is killed, and the next build completes', async () => {
    const home = path.join(tmp, 'i');
    const src = path.join(tmp, 'rootfs');
    mkdirSync(src);
    for (let i = 0; i < 40; i++) writeFileSync(path.join(src, `blob${i}`), randomBytes(2 * 1024 * 1024));
    const images = path.join(home, 'images');
    await killMidway(['image', home, src], () => tmpEntries(images).length > 0);
    expect(readdirSync(images).filter((n) => !n.startsWith('.tmp-'))).toEqual([]);
    const img = await resolveImage(src, home);
    expect(existsSync(img.basePath)).toBe(true);
  }, 300_000);
});
