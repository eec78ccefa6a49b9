/**
 * scripts/gpu-frameworks.sh proven without a GPU (issue #30: the GPU is lent for minutes at most, so the
 * harness must work the first time there): --selftest runs its whole machinery on the FAKE driver (daemon,
 * native vs remoted runs, compare.py, the kill row through `gpu status`, the budget, the table, --trace),
 * and a deliberately wrong remoted result must FAIL its row and the exit code.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { root } from './helpers.js';
import { checkUsageDir } from '../../../scripts/cuda-coverage.js';

const script = path.join(root, 'scripts/gpu-frameworks.sh');
const x64 = process.arch === 'x64';
let dir: string;
beforeAll(() => { dir = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-fw-')); });
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

function harness(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const p = spawn(script, args, { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    p.stdout.on('data', (d) => { out += d; });
    p.stderr.on('data', (d) => { out += d; });
    p.on('close', (code) => resolve({ code, out }));
  });
}
/** The PASS/FAIL table: workload -> verdict. */
const verdicts = (out: string) => Object.fromEntries([...out.matchAll(/^(\S+)\s+(PASS|FAIL|SKIP)\s/gm)].map((m) => [m[1], m[2]]));
const tableRows = (file: string) => fs.readFileSync(file, 'utf8').split('\n').filter((l) => l.startsWith('| ') && !l.startsWith('| Workload'));

describe('scripts/gpu-frameworks.sh --selftest (FAKE driver)', { timeout: 400_000 }, () => {
  it('runs native vs remoted, the kill row through gpu status, and passes its table', async () => {
    const out = path.join(dir, 'pass');
    const r = await harness(['--selftest', '--only', 'driver_vecadd,conf_mem,kill', '--out', out]);
    expect(r.code, r.out).toBe(0);
    expect(verdicts(r.out)).toEqual({ driver_vecadd: 'PASS', conf_mem: 'PASS', kill: 'PASS' });
    expect(r.out).toMatch(/gpu-frameworks: ALL PASS\n$/);
    expect(tableRows(path.join(out, 'table.md'))).toEqual([
      expect.stringMatching(/^\| driver_vecadd \| FAKE driver \(CPU\) \| ok \| PASS \| wall_ms=[\d.]+ \| \d{4}-\d\d-\d\d \| FAKE driver, no GPU \|$/),
      expect.stringMatching(/^\| conf_mem \| FAKE driver \(CPU\) \| ok \| PASS \| wall_ms=/),
      expect.stringMatching(/^\| kill mid-run \| FAKE driver \(CPU\) \| - \| PASS \| - \|/),
    ]);
    // each side's RESULT line is kept, and both carry the same digest
    const res = (f: string) => JSON.parse(fs.readFileSync(path.join(out, f), 'utf8').split('\n').find((l) => l.startsWith('RESULT '))!.slice(7));
    expect(res('conf_mem.remoted').exact).toEqual(res('conf_mem.native').exact);
    expect(Number(res('conf_mem.native').exact.lines)).toBeGreaterThan(10);
  });

  it('fails the row and the exit code when one remoted result differs', async () => {
    const out = path.join(dir, 'corrupt');
    const r = await harness(['--selftest', '--only', 'driver_vecadd,conf_mem', '--out', out], { SMOL_FW_SELFTEST_CORRUPT: 'conf_mem' });
    expect(r.code, r.out).toBe(1);
    expect(verdicts(r.out)).toEqual({ driver_vecadd: 'PASS', conf_mem: 'FAIL' });
    expect(r.out).toContain('--- conf_mem: {"verdict": "FAIL", "why": "output differs; lines differs"');
    expect(r.out).toMatch(/gpu-frameworks: 1 FAILED, 0 SKIPPED\n$/);
    expect(tableRows(path.join(out, 'table.md'))[1]).toMatch(/^\| conf_mem \| FAKE driver \(CPU\) \| ok \| FAIL \|/);
  });

  it('skips rows once the time budget is spent, and says so in the exit code', async () => {
    const out = path.join(dir, 'budget');
    const r = await harness(['--selftest', '--only', 'driver_vecadd,kill', '--out', out], { GPU_FW_BUDGET_S: '19' });
    expect(r.code, r.out).toBe(3);
    expect(verdicts(r.out)).toEqual({ driver_vecadd: 'SKIP', kill: 'SKIP' });
    expect(r.out).toMatch(/no failure, 2 SKIPPED \(time budget\)\n$/);
    expect(tableRows(path.join(out, 'table.md'))).toEqual([]); // a skipped row must not overwrite the docs
  });

  it.skipIf(!x64)('--trace writes usage files from the interposer, which the coverage check reads', async () => {
    const usage = path.join(dir, 'usage');
    const r = await harness(['--selftest', '--trace', '--only', 'driver_vecadd', '--usage', usage]);
    expect(r.code, r.out).toBe(0);
    const text = fs.readFileSync(path.join(usage, 'driver_vecadd.txt'), 'utf8');
    expect(text).toMatch(/^# driver_vecadd: driver entry points called/);
    expect(text).toContain('call cuLaunchKernel 3 errors=0\n');
    expect(text).toContain('call cuMemAlloc_v2 4 errors=0\n');
    expect(r.out).toContain('cuda-coverage: 1 usage file(s), 0 gap(s)');
    expect(checkUsageDir(usage)).toEqual({ files: 1, gaps: [] });
    expect(fs.existsSync(path.join(root, 'test/fixtures/driver-usage/driver_vecadd.txt'))).toBe(false);
  });
});
