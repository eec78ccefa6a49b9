/**
 * The memory-carrying half of `npm run bench:pack`: one forkable machine (default image) is packed twice,
 * running with --with-memory and then stopped without, and `smol pack run FILE -- true` is timed on each,
 * alternating, through the real CLI (bin/smol, so node startup is in both columns): resume from the saved
 * memory vs a cold boot of the same disk (SMOL_BOOT_SNAPSHOTS=0), and the disk artifact restored from its
 * boot snapshot vs `smol run -- true` (the issue's "warm pack run within 10 % of smol run").
 * Needs QEMU, `smol setup`'s kernel and a built dist/.
 */
import { existsSync } from 'node:fs';
import { mkdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { verifyArtifact } from '../src/artifact/index.js';
import { run } from '../src/util/exec.js';
import { assetsHome } from '../src/util/paths.js';
import { median, type Row } from './stats.js';

const smolBin = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'bin', 'smol');
const MB = 1e6;

export async function resumeRows(dir: string, runs: number): Promise<{ rows: Row[]; note: string } | { skipped: string }> {
  if (!existsSync(path.resolve(path.dirname(smolBin), '..', 'dist', 'cli', 'main.js'))) return { skipped: 'dist/ is not built (npx tsc -p tsconfig.build.json)' };
  const home = path.join(dir, 'home');
  await mkdir(home, { recursive: true });
  const env = { SMOL_HOME: home, SMOL_ASSETS: assetsHome(), NO_COLOR: '1' };
  const smol = async (args: string[], extra: Record<string, string> = {}) => {
    const t0 = performance.now();
    const r = await run(process.execPath, [smolBin, ...args], { env: { ...env, ...extra }, allowFailure: true, timeoutMs: 180_000 });
    if (r.exitCode !== 0) throw new Error(`smol ${args.join(' ')} exited ${r.exitCode}: ${r.stderr.trim().split('\n').slice(-3).join(' ')}`);
    return { ms: performance.now() - t0, stdout: r.stdout, stderr: r.stderr };
  };
  const warm = path.join(dir, 'warm.smolmachine');
  const disk = path.join(dir, 'disk.smolmachine');
  try {
    await smol(['machine', 'create', 'b', '--forkable', '--start']);
    await smol(['machine', 'exec', 'b', '--', 'sh', '-c', 'echo warm > /root/state; sync']);
    const packed = await smol(['pack', 'create', '--from-vm', 'b', '--with-memory', '-o', warm, '--json']);
    const pausedMs = (JSON.parse(packed.stdout) as { captured: { pausedMs: number } }).captured.pausedMs;
    await smol(['machine', 'stop', 'b']);
    await smol(['pack', 'create', '--from-vm', 'b', '-o', disk]);
    // first runs extract into the cache (verifying every byte); timed once each, reported apart
    const firstWarm = (await smol(['pack', 'run', warm, '--', 'true'])).ms;
    const firstDisk = (await smol(['pack', 'run', disk, '--', 'true'])).ms;
    await smol(['run', '--', 'true']); // saves the default image's boot snapshot (the disk artifact's was saved above)
    const resume: number[] = [];
    const boot: number[] = [];
    const snap: number[] = [];
    const plain: number[] = [];
    for (let i = 0; i < runs; i++) {
      const r = await smol(['pack', 'run', warm, '--', 'true']);
      if (/cold-booting/.test(r.stderr)) throw new Error(`the memory artifact did not resume: ${r.stderr.trim()}`);
      resume.push(r.ms);
      boot.push((await smol(['pack', 'run', disk, '--', 'true'], { SMOL_BOOT_SNAPSHOTS: '0' })).ms);
      snap.push((await smol(['pack', 'run', disk, '--', 'true'])).ms);
      plain.push((await smol(['run', '--', 'true'])).ms);
    }
    const verifyMs: number[] = [];
    for (let i = 0; i < runs + 2; i++) {
      const t0 = performance.now();
      if (!(await verifyArtifact(warm)).ok) throw new Error('verify failed');
      verifyMs.push(performance.now() - t0);
    }
    const [warmSize, diskSize] = [(await stat(warm)).size, (await stat(disk)).size];
    return {
      note: `pack --with-memory paused the machine ${pausedMs.toFixed(0)} ms`,
      rows: [
        { metric: 'pack run -- true, cached (resume vs cold boot)', unit: 'ms', value: median(resume), baseline: median(boot), baselineLabel: 'cold boot', target: 'resume < boot' },
        { metric: 'pack run -- true, cached disk artifact (boot snapshot)', unit: 'ms', value: median(snap), baseline: median(plain), baselineLabel: 'smol run -- true', target: 'within 10 %' },
        { metric: 'pack run -- true, cached memory artifact (resume)', unit: 'ms', value: median(resume), baseline: median(plain), baselineLabel: 'smol run -- true', target: 'within 10 %' },
        { metric: 'pack run -- true, first (extract + run)', unit: 'ms', value: firstWarm, baseline: firstDisk, baselineLabel: 'disk-only artifact' },
        { metric: 'artifact size', unit: 'MB', value: warmSize / MB, baseline: diskSize / MB, baselineLabel: 'disk-only artifact' },
        { metric: 'verify throughput (memory artifact)', unit: 'MB/s', value: warmSize / MB / (median(verifyMs) / 1000), target: '>= 500' },
      ],
    };
  } finally {
    await run(process.execPath, [smolBin, 'machine', 'rm', '--force', 'b'], { env, allowFailure: true });
  }
}
