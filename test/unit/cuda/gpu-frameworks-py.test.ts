/**
 * The Python half of scripts/gpu-frameworks.sh, here where there is no GPU and no torch: every workload
 * compiles, compare.py's digest and tolerance rules on hand-made RESULT lines, and apply_table.py's merge
 * of a run's rows into the docs table.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '../../..');
const W = path.join(root, 'scripts/gpu-frameworks');
const hasPython = spawnSync('python3', ['--version']).status === 0;
let dir: string;
beforeAll(() => { dir = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-fwpy-')); });
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

interface Line { ok?: boolean; exact?: Record<string, string>; close?: Record<string, unknown[]>; perf?: Record<string, number>; note?: string }
/** A workload's RESULT line; 'NaN' in a list becomes a bare NaN, as Python's json.dumps writes it. */
const line = (l: Line) => `RESULT ${JSON.stringify({ workload: 'w', ok: true, exact: {}, close: {}, perf: {}, ...l }).replaceAll('"NaN"', 'NaN')}\n`;
let n = 0;
function compare(native: string, remoted: string) {
  const a = path.join(dir, `n${++n}`), b = path.join(dir, `r${n}`);
  fs.writeFileSync(a, native); fs.writeFileSync(b, remoted);
  const r = spawnSync('python3', [path.join(W, 'compare.py'), a, b], { encoding: 'utf8' });
  return { code: r.status, ...JSON.parse(r.stdout) as { verdict: string; why: string; ratios: Record<string, number> } };
}

// Each case starts python3 a few times: slow on a loaded CI host.
describe.skipIf(!hasPython)('gpu-frameworks Python', { timeout: 120_000 }, () => {
  it('every workload and helper compiles', () => {
    const files = fs.readdirSync(W).filter((f) => f.endsWith('.py'));
    expect(files).toEqual(expect.arrayContaining(['matmul.py', 'conv.py', 'mlp.py', 'generate.py', 'triton_kernel.py', 'graphs.py',
      'fft_rand.py', 'memstats.py', 'hold.py', 'compare.py', 'common.py', 'selftest.py', 'apply_table.py']));
    const code = 'import os, py_compile, sys\nfor f in sys.argv[2:]: py_compile.compile(f, cfile=os.path.join(sys.argv[1], "x.pyc"), doraise=True)';
    execFileSync('python3', ['-c', code, dir, ...files.map((f) => path.join(W, f))], { stdio: 'pipe' });
  });

  it('compare.py: equal digests and equal losses pass, with the speed ratios', () => {
    const l = line({ exact: { sgemm: 'abc' }, close: { losses: [1.5, 0.25] }, perf: { step_ms: 2 } });
    const r = compare(l, line({ exact: { sgemm: 'abc' }, close: { losses: [1.5, 0.25] }, perf: { step_ms: 3 } }));
    expect(r).toMatchObject({ code: 0, verdict: 'PASS', ratios: { step_ms: 1.5 } });
  });

  it('compare.py: a differing digest fails and is named', () => {
    const r = compare(line({ exact: { sgemm: 'abc', bf16: 'x' } }), line({ exact: { sgemm: 'abd', bf16: 'x' } }));
    expect(r).toMatchObject({ code: 1, verdict: 'FAIL', why: 'sgemm differs' });
    expect(compare(line({ exact: { sgemm: 'abc' } }), line({ exact: {} })).why).toBe('sgemm differs');
  });

  it('compare.py: losses pass within 1e-6 relative and fail beyond it, NaN and missing values included', () => {
    const at = (v: unknown[], w: unknown[]) => compare(line({ close: { loss: v } }), line({ close: { loss: w } }));
    expect(at([1.0, 2.0], [1.0000009, 2.0]).verdict).toBe('PASS');
    expect(at([0, 0], [0, 0]).verdict).toBe('PASS');
    expect(at([1.0, 2.0], [1.0000011, 2.0]).why).toBe('loss beyond 1e-06 relative');
    expect(at([1.0], [1.0, 2.0]).verdict).toBe('FAIL');
    expect(at([1.0], ['NaN']).verdict).toBe('FAIL');
    expect(at(['NaN'], ['NaN']).verdict).toBe('FAIL');
    expect(at([1.0], ['1.0']).verdict).toBe('FAIL');
    // sanity figures (vs the CPU, vs eager) are each side's own check, not compared
    expect(compare(line({ close: { rel_err_vs_cpu: [1e-5] } }), line({ close: { rel_err_vs_cpu: [3e-5] } })).verdict).toBe('PASS');
  });

  it('compare.py: a side that is not ok or printed no RESULT fails with its note', () => {
    expect(compare(line({}), line({ ok: false, note: 'CUDA error: operation not supported' })).why).toBe('remoted: CUDA error: operation not supported');
    expect(compare(line({}), 'Traceback ...\n').why).toBe('remoted: no RESULT line');
    expect(compare('', line({})).why).toBe('native: no RESULT line');
    // a C program's own "RESULT name PASS" line is not a workload's JSON line
    expect(compare(`RESULT vecadd PASS\n${line({ exact: { a: '1' } })}`, line({ exact: { a: '1' } })).verdict).toBe('PASS');
  });

  it('apply_table.py merges a run\'s rows by workload, keeps the descriptions and recomputes the unproven list', () => {
    const docs = path.join(dir, 'cuda.md');
    fs.writeFileSync(docs, ['# x', '<!-- frameworks:begin -->', '| Workload | Framework | Native | Remoted | Remoted/native | Date | GPU |',
      '|---|---|---|---|---|---|---|', '| matmul: SGEMM, bit-identical | | | | | | |', '| conv: conv2d | | | | | | |',
      '', 'Unproven (no PASS through the remoting on a GPU yet): matmul, conv.', '<!-- frameworks:end -->', 'after', ''].join('\n'));
    const table = path.join(dir, 'table.md');
    fs.writeFileSync(table, ['| Workload | Framework | Native | Remoted | Remoted/native | Date | GPU |', '|---|---|---|---|---|---|---|',
      '| matmul | PyTorch 2.11.0 | ok | PASS | wall_ms=1.2 | 2026-12-07 | NVIDIA H100 |',
      '| kill mid-run | PyTorch 2.11.0 | - | FAIL | - | 2026-12-07 | NVIDIA H100 |', ''].join('\n'));
    execFileSync('python3', [path.join(W, 'apply_table.py'), table, docs], { stdio: 'pipe' });
    const out = fs.readFileSync(docs, 'utf8');
    expect(out).toContain('| matmul: SGEMM, bit-identical | PyTorch 2.11.0 | ok | PASS | wall_ms=1.2 | 2026-12-07 | NVIDIA H100 |');
    expect(out).toContain('| conv: conv2d |  |  |  |  |  |  |');
    expect(out).toContain('| kill mid-run | PyTorch 2.11.0 | - | FAIL | - | 2026-12-07 | NVIDIA H100 |');
    expect(out).toContain('Unproven (no PASS through the remoting on a GPU yet): conv, kill mid-run.\n<!-- frameworks:end -->\nafter\n');
    expect(out.match(/Unproven/g)).toHaveLength(1);
    // a --selftest table is not a GPU result and must not reach the docs
    fs.writeFileSync(table, '| matmul | FAKE driver (CPU) | ok | PASS | - | 2026-12-07 | FAKE driver, no GPU |\n');
    const r = spawnSync('python3', [path.join(W, 'apply_table.py'), table, docs], { encoding: 'utf8' });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('matmul is a --selftest row');
    expect(fs.readFileSync(docs, 'utf8')).toBe(out);
  });
});
