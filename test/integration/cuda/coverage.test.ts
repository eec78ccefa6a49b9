/**
 * What the built shim answers (issue #30): the driver-usage fixtures recorded on a GPU must all be
 * implemented, the docs' unsupported list must match the build, and an unsupported entry point must say
 * so on stderr at its first call and return 801.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BEGIN, END, answeredExportTables, buildShim, checkUsageDir, currentBlock, docsPath, probe, shimLib, shimSymbols } from '../../../scripts/cuda-coverage.js';
import { build, buildNative, nvcc, progs, root, runProgram, startDaemon } from './helpers.js';

const usageDir = path.join(root, 'test/fixtures/driver-usage');
const recorded = fs.existsSync(usageDir) && fs.readdirSync(usageDir).some((f) => f.endsWith('.txt'));
let dir: string;
beforeAll(() => { buildShim(); dir = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-cov-')); });
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const probeRun = (names: string[], env: Record<string, string> = {}) => {
  const r = spawnSync(probe, [shimLib, ...names], { encoding: 'utf8', env: { ...process.env, ...env } });
  return { code: r.status, stdout: r.stdout, stderrLines: r.stderr.split('\n').filter(Boolean) };
};

describe('driver entry points the shim answers', () => {
  if (recorded) {
    it('every entry point and export table in test/fixtures/driver-usage is answered by the shim', () => {
      const { files, gaps } = checkUsageDir(usageDir);
      expect(files).toBeGreaterThan(0);
      expect(gaps).toEqual([]);
    });
  } else {
    it.skip('no driver-usage fixture recorded yet: needs a GPU machine, run scripts/gpu-frameworks.sh --trace', () => {});
  }

  it('the usage check fails on a fixture naming a stub, and passes once it names only implemented ones', () => {
    const sym = shimSymbols();
    const stub = [...sym.weak].sort()[0];
    fs.writeFileSync(path.join(dir, 'w.txt'), `# w\ncall cuInit 1 errors=0\ncall ${stub} 2 errors=0\n`);
    const cli = (d: string) => spawnSync(process.execPath, ['--import', 'tsx', path.join(root, 'scripts/cuda-coverage.ts'), '--no-build', '--usage', d], { cwd: root, encoding: 'utf8' });
    const bad = cli(dir);
    expect(bad.status, bad.stderr).toBe(1);
    expect(bad.stdout).toContain(`w.txt: ${stub}: a NOT_SUPPORTED stub in the shim`);
    fs.writeFileSync(path.join(dir, 'w.txt'), '# w\ncall cuInit 1 errors=0\ncall cuMemAlloc_v2 2 errors=0\n');
    expect(cli(dir).status).toBe(0);
  });

  it('docs/cuda.md lists exactly the stubs of this build (stale: npx tsx scripts/cuda-coverage.ts --write)', () => {
    const doc = fs.readFileSync(docsPath, 'utf8');
    const inDocs = doc.slice(doc.indexOf(BEGIN), doc.indexOf(END) + END.length);
    expect(inDocs, 'docs/cuda.md is stale: run npx tsx scripts/cuda-coverage.ts --write').toBe(currentBlock());
  });

  it('an unsupported entry point returns 801 and names itself on stderr once, unless SMOL_CUDA_LOG=0', () => {
    const [a, b] = [...shimSymbols().weak].sort();
    const r = probeRun([a, a, b, a]);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`${a} 801\n${a} 801\n${b} 801\n${a} 801\n`);
    expect(r.stderrLines).toEqual([a, b].map((n) => `smol-cuda: ${n} is not supported by the remoting (CUDA_ERROR_NOT_SUPPORTED 801)`));
    expect(probeRun([a, b], { SMOL_CUDA_LOG: '0' }).stderrLines).toEqual([]);
    expect(probeRun([a], { SMOL_CUDA_LOG: '1' }).stderrLines).toHaveLength(1);
  });

  it('every stub of the 500-odd still answers once each, however many there are', () => {
    const weak = [...shimSymbols().weak];
    const r = probeRun([...weak, ...weak]);
    expect(r.stdout.split('\n').filter(Boolean).every((l) => l.endsWith(' 801'))).toBe(true);
    expect(r.stderrLines).toHaveLength(weak.length);
  });
});

describe.skipIf(!nvcc || process.arch !== 'x64')('export tables', () => {
  it('the UUIDs the interposer records for cudart through the shim are the ones the checker reads from exports.c', async () => {
    buildNative();
    const d = await startDaemon();
    try {
      const log = path.join(dir, 'rt.log');
      const r = await runProgram(path.join(progs, 'runtime_vecadd_shared'), ['4096'], {
        LD_LIBRARY_PATH: path.join(build, 'driver-trace'), SMOL_TRACE_REAL_LIBCUDA: shimLib, SMOL_TRACE_LOG: log, SMOL_TRACE_CALLS: '0', SMOL_CUDA_ENDPOINT: d.endpoint,
      });
      expect(r.code, r.stderr).toBe(0);
      const asked = fs.readFileSync(log, 'utf8').split('\n').map((l) => l.split(' ')).filter((l) => l[1] === 'EXPORT' && l[3] === 'rc=0').map((l) => l[2]);
      expect(asked.length).toBeGreaterThan(0);
      const answered = answeredExportTables();
      expect(asked.filter((u) => !answered.has(u))).toEqual([]);
    } finally { await d.stop(); }
  });
});
