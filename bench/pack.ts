/**
 * `npm run bench:pack`: .smolmachine pack/verify/extract on a disk with 200 MB written (ext4 built with
 * `mkfs.ext4 -d` from random files, no mount) and on a small disk-less artifact. The baseline is the
 * other layout we considered (smolvm's): one zstd stream over the whole tar, where checking digests
 * means decompressing everything. Then a real machine packed with and without its memory: resume vs cold
 * boot (bench/pack-resume.ts). BENCH_PACK=files or BENCH_PACK=resume runs one half. Prints medians.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, stat, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import * as tar from 'tar';
import { ensureExtracted, extractArtifact, inspectArtifact, packArtifact, verifyArtifact } from '../src/artifact/index.js';
import { run, spawn } from '../src/util/exec.js';
import { assetsHome, dataPaths } from '../src/util/paths.js';
import { resumeRows } from './pack-resume.js';
import { median, printRows, timeRuns, type Row } from './stats.js';

const quick = process.env.BENCH_QUICK === '1';
const RUNS = Number(process.env.BENCH_RUNS ?? (quick ? 1 : 5));
/** 10 MB random files written into the fixture disk: 200 MB, or 20 MB in a quick run. */
const BLOBS = quick ? 2 : 20;
const MB = 1e6;

async function fixture(dir: string): Promise<{ kernel: string; initrd: string; disk: string; usedBytes: number }> {
  const tree = path.join(dir, 'tree');
  await mkdir(tree);
  for (let i = 0; i < BLOBS; i++) await writeFile(path.join(tree, `blob-${i}`), randomBytes(10 * MB));
  const raw = path.join(dir, 'disk.raw');
  await run('qemu-img', ['create', '-q', '-f', 'raw', raw, '1G']);
  await run('mkfs.ext4', ['-q', '-F', '-d', tree, raw]);
  const disk = path.join(dir, 'disk.qcow2');
  await run('qemu-img', ['convert', '-f', 'raw', '-O', 'qcow2', raw, disk]);
  const usedBytes = (await stat(raw)).blocks * 512;
  await rm(raw);
  await rm(tree, { recursive: true });
  const kernel = path.join(dir, 'vmlinux');
  // a kernel-sized ELF: 4 MiB of random (code-like, incompressible) plus 8 MiB of zeros (bss-like)
  await writeFile(kernel, Buffer.concat([Buffer.from([0x7f, 0x45, 0x4c, 0x46]), randomBytes(4 << 20), Buffer.alloc(8 << 20)]));
  const initrd = path.join(dir, 'initrd.cpio');
  await writeFile(initrd, Buffer.concat([Buffer.from('070701'), randomBytes(2 << 20)]));
  return { kernel, initrd, disk, usedBytes };
}

/** The whole-stream layout: tar of the raw entries piped through one zstd stream. */
async function packBaseline(dir: string, files: string[], out: string): Promise<void> {
  const tarFile = path.join(dir, 'baseline.tar');
  const stage = path.join(dir, 'baseline-stage');
  await rm(stage, { recursive: true, force: true });
  await mkdir(stage);
  for (const f of files) await symlink(f, path.join(stage, path.basename(f)));
  await tar.c({ file: tarFile, cwd: stage, portable: true, mtime: new Date(0), follow: true }, files.map((f) => path.basename(f)));
  await run('zstd', ['-q', '-f', '-T0', '-3', tarFile, '-o', out]);
  await rm(tarFile);
}

/** Checking digests in the whole-stream layout means decompressing it all: zstd -d piped into SHA-256. */
async function verifyBaseline(file: string): Promise<void> {
  const { child } = await spawn('zstd', ['-d', '-c', '-q', file], { stdio: ['ignore', 'pipe', 'ignore'] });
  const h = createHash('sha256');
  for await (const c of child.stdout! as AsyncIterable<Buffer>) h.update(c);
  await child;
}

async function hashOnly(file: string): Promise<void> {
  const h = createHash('sha256');
  for await (const c of createReadStream(file, { highWaterMark: 4 << 20 }) as AsyncIterable<Buffer>) h.update(c);
}

/** The real default guest (kernel + initramfs) when smol has set it up, or BENCH_KERNEL/BENCH_INITRD; else null. */
async function defaultGuest(): Promise<{ kernel: string; initrd: string } | null> {
  if (process.env.BENCH_KERNEL && process.env.BENCH_INITRD) return { kernel: process.env.BENCH_KERNEL, initrd: process.env.BENCH_INITRD };
  const { kernel, images } = dataPaths(assetsHome());
  const first = async (d: string, pick: (n: string) => string | null) => {
    for (const n of await readdir(d).catch(() => [] as string[])) {
      const f = pick(n);
      if (f && (await stat(f).catch(() => null))?.isFile()) return f;
    }
    return null;
  };
  const k = await first(kernel, (n) => path.join(kernel, n, 'vmlinux'));
  const i = await first(path.join(images, 'initramfs'), (n) => (n.endsWith('.cpio') ? path.join(images, 'initramfs', n) : null));
  return k && i ? { kernel: k, initrd: i } : null;
}

async function main(): Promise<void> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'smol-bench-pack-'));
  try {
    const only = process.env.BENCH_PACK;
    if (only !== 'resume') await fileCases(dir);
    if (only !== 'files') {
      console.log(`\nresume vs cold boot: a real forkable machine, ${RUNS} alternating runs of each (load average ${os.loadavg().map((x) => x.toFixed(2)).join(' ')})`);
      const r = await resumeRows(dir, RUNS);
      if ('skipped' in r) console.log(`skipped: ${r.skipped}`);
      else printRows(`memory-carrying artifact, default image, 256 MiB (${r.note})`, r.rows);
      console.log(`load average after: ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}`);
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function fileCases(dir: string): Promise<void> {
  console.log(`building fixture (${BLOBS * 10} MB of random files in a 1 GiB ext4, qcow2) in ${dir}; ${RUNS} runs each; load average ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}`);
  const fx = await fixture(dir);
  const diskFile = (await stat(fx.disk)).size;
  const guest = await defaultGuest();
  const cases: [string, { kernel: string; initrd: string; disk?: string }][] = [
    [`${BLOBS * 10} MB-written disk (+ synthetic 12 MiB kernel, 2 MiB initramfs)`, { kernel: fx.kernel, initrd: fx.initrd, disk: fx.disk }],
    guest ? ['default image (real vmlinux + initramfs, no disk)', guest] : ['small (synthetic kernel + initramfs, no disk; no default image set up)', { kernel: fx.kernel, initrd: fx.initrd }],
  ];
  for (const [label, inputs] of cases) {
    const out = path.join(dir, 'a.smolmachine');
    const packMs = await timeRuns(RUNS, async () => {
      await rm(out, { force: true });
      await packArtifact({ ...inputs, out, createdAt: '2026-01-01T00:00:00Z' });
    });
    const size = (await stat(out)).size;
    const base = path.join(dir, 'baseline.tar.zst');
    const flat = path.join(dir, 'disk-flat.qcow2');
    const baseInputs: string[] = [inputs.kernel, inputs.initrd];
    if (inputs.disk) {
      await run('qemu-img', ['convert', '-O', 'qcow2', inputs.disk, flat]);
      baseInputs.unshift(flat);
    }
    const basePackMs = await timeRuns(RUNS, async () => {
      if (inputs.disk) await run('qemu-img', ['convert', '-O', 'qcow2', inputs.disk, flat]);
      await packBaseline(dir, baseInputs, base);
    });
    const baseSize = (await stat(base)).size;
    const verifyMs = await timeRuns(RUNS + 2, async () => { const r = await verifyArtifact(out); if (!r.ok) throw new Error('verify failed'); });
    const baseVerifyMs = await timeRuns(RUNS + 2, () => verifyBaseline(base));
    const zstdTestMs = await timeRuns(RUNS, async () => { await run('zstd', ['-t', '-q', base]); });
    const hashMs = await timeRuns(RUNS, () => hashOnly(out));
    const inspectMs = await timeRuns(RUNS + 2, async () => { await inspectArtifact(out); });
    const coldMs = await timeRuns(RUNS, async () => {
      const d = path.join(dir, 'x');
      await rm(d, { recursive: true, force: true });
      await extractArtifact(out, d);
    });
    const cache = path.join(dir, 'cache');
    await rm(cache, { recursive: true, force: true });
    await ensureExtracted(out, cache);
    const warmMs = await timeRuns(RUNS + 2, async () => { const r = await ensureExtracted(out, cache); if (r.extracted) throw new Error('expected a cache hit'); });

    const rows: Row[] = [
      { metric: 'pack', unit: 'ms', value: median(packMs), baseline: median(basePackMs), baselineLabel: 'tar|zstd' },
      { metric: 'artifact size', unit: 'MB', value: size / MB, baseline: baseSize / MB, baselineLabel: 'tar|zstd' },
      { metric: 'verify (all digests + signature check)', unit: 'ms', value: median(verifyMs), baseline: median(baseVerifyMs), baselineLabel: 'zstd -d|sha256' },
      { metric: 'verify throughput (artifact bytes)', unit: 'MB/s', value: size / MB / (median(verifyMs) / 1000), baseline: baseSize / MB / (median(baseVerifyMs) / 1000), baselineLabel: 'zstd -d|sha256', target: '>= 500' },
      { metric: 'zstd -t (CRC only, no digests)', unit: 'ms', value: median(zstdTestMs) },
      { metric: 'sha256 of the file alone (floor)', unit: 'ms', value: median(hashMs) },
      { metric: 'inspect (footer + manifest)', unit: 'ms', value: median(inspectMs) },
      { metric: 'extract cold (verify + decompress)', unit: 'ms', value: median(coldMs) },
      { metric: 'extract cached (ensureExtracted hit)', unit: 'ms', value: median(warmMs), baseline: median(coldMs), baselineLabel: 'cold' },
    ];
    if (inputs.disk) {
      rows.splice(2, 0, { metric: 'artifact / disk used bytes', unit: 'ratio', value: size / fx.usedBytes, target: `used ${(fx.usedBytes / MB).toFixed(0)} MB, qcow2 ${(diskFile / MB).toFixed(0)} MB` });
    }
    printRows(label, rows);
    await rm(flat, { force: true });
  }
}

await main();
