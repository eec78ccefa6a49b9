/**
 * The tracing interposer (test/fixtures/driver-trace) in front of the FAKE driver, and in front of the
 * guest shim (itself on a daemon on the FAKE): programs must behave exactly as without it, and its log
 * must name what they called. Plus scripts/gpu-frameworks.sh's refusal on a host without PyTorch.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { build, buildNative, fakeLibcuda, nvcc, progs, ptx, results, root, runProgram, startDaemon, type DaemonProc } from './helpers.js';

const interposer = path.join(build, 'driver-trace', 'libcuda.so.1');
const x64 = process.arch === 'x64';
const noNvcc = nvcc ? '' : ' [skipped: nvcc not installed]';
let dir: string;
let d: DaemonProc | undefined;

beforeAll(() => {
  buildNative();
  if (x64) execFileSync('make', ['-s', '-C', path.join(root, 'test/fixtures/driver-trace'), `OUT=${build}`], { stdio: 'pipe' });
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-trace-'));
});
afterAll(async () => {
  await d?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** Runs a program with the interposer first on the library path; returns its result and log lines. */
async function traced(name: string, bin: string, args: string[], real: string, env: Record<string, string> = {}) {
  const log = path.join(dir, `${name}.log`);
  const r = await runProgram(bin, args, { LD_LIBRARY_PATH: path.dirname(interposer), SMOL_TRACE_REAL_LIBCUDA: real, SMOL_TRACE_LOG: log, ...env });
  const lines = fs.existsSync(log) ? fs.readFileSync(log, 'utf8').split('\n').filter(Boolean).map((l) => l.split(' ').slice(1)) : [];
  return { ...r, lines };
}
/** COUNT lines as name -> calls. */
const counts = (lines: string[][]) => Object.fromEntries(lines.filter((l) => l[0] === 'COUNT').map((l) => [l[1], Number(l[2].slice('calls='.length))]));

describe.skipIf(!x64)('tracing interposer', () => {
  it('exports the same names as the shim, so anything linked against the shim loads it', () => {
    const nm = execFileSync('nm', ['-D', '--defined-only', interposer], { encoding: 'utf8' });
    const got = nm.split('\n').map((l) => l.trim().split(/\s+/)[2]).filter(Boolean).sort();
    const want = fs.readFileSync(path.join(root, 'shims/cuda/exports.txt'), 'utf8').split('\n').filter(Boolean).sort();
    expect(got).toEqual(want);
  });

  it('forwards a driver-API program to the FAKE driver unchanged and logs every call with its code', async () => {
    const plain = await runProgram(path.join(progs, 'driver_vecadd'), [ptx], { LD_LIBRARY_PATH: path.dirname(fakeLibcuda) });
    const t = await traced('vecadd', path.join(progs, 'driver_vecadd'), [ptx], fakeLibcuda);
    expect(t.code, t.stderr).toBe(0);
    expect(results(t.stdout)).toEqual(results(plain.stdout));
    expect(t.stdout).toContain('ALL PASS');
    expect(t.lines[0]).toEqual(['OPEN', fakeLibcuda, 'ok']);
    const calls = t.lines.filter((l) => l[0] === 'CALL');
    expect(calls[0]).toEqual(['CALL', 'cuInit', 'rc=0']);
    // the summary agrees with the per-call lines, name by name
    const perCall: Record<string, number> = {};
    for (const c of calls) perCall[c[1]] = (perCall[c[1]] ?? 0) + 1;
    expect(counts(t.lines)).toEqual(perCall);
    expect(perCall).toMatchObject({ cuLaunchKernel: 3, cuModuleLoadData: 1, cuMemAlloc_v2: 4, cuMemFree_v2: 4 });
  });

  it('passes error codes through unchanged: the conformance program prints the same cases', async () => {
    const bin = path.join(progs, 'conformance', 'conf_mem');
    const plain = await runProgram(bin, [], { LD_LIBRARY_PATH: path.dirname(fakeLibcuda) });
    const t = await traced('conf_mem', bin, [], fakeLibcuda, { SMOL_TRACE_CALLS: '0' });
    const cases = (s: string) => s.split('\n').filter((l) => l.startsWith('CASE '));
    expect(cases(plain.stdout).length).toBeGreaterThan(5);
    expect(cases(t.stdout)).toEqual(cases(plain.stdout));
    expect(t.code).toBe(plain.code);
    // SMOL_TRACE_CALLS=0: only failing calls have lines, and they carry the driver's code
    const calls = t.lines.filter((l) => l[0] === 'CALL');
    expect(calls.length).toBeGreaterThan(0);
    expect(calls.every((c) => c[2] !== 'rc=0')).toBe(true);
    const errors = Object.fromEntries(t.lines.filter((l) => l[0] === 'COUNT').map((l) => [l[1], Number(l[3].slice('errors='.length))]));
    expect(Object.values(errors).reduce((a, b) => a + b, 0)).toBe(calls.length);
  });

  it('refuses to forward to itself and answers CUDA_ERROR_NOT_FOUND instead of recursing', async () => {
    const t = await traced('self', path.join(progs, 'driver_vecadd'), [ptx], interposer);
    expect(t.code).not.toBe(0);
    expect(t.lines[0].join(' ')).toContain('is this interposer');
    expect(t.lines).toContainEqual(['MISSING', 'cuInit']);
  });

  it.skipIf(!nvcc)(`traces an nvcc-built cudart program through cuGetProcAddress and cuGetExportTable (shim, daemon, FAKE)${noNvcc}`, async () => {
    d = await startDaemon();
    const t = await traced('rt', path.join(progs, 'runtime_vecadd_shared'), ['4096'], path.join(build, 'libcuda.so.1'),
      { SMOL_CUDA_ENDPOINT: d.endpoint, SMOL_TRACE_CALLS: '0' });
    expect(t.code, t.stderr).toBe(0);
    expect(t.stdout).toContain('ALL PASS');
    const procs = t.lines.filter((l) => l[0] === 'PROC');
    // cudart resolves the driver through cuGetProcAddress; each line names the shim's function it got
    expect(procs).toContainEqual(expect.arrayContaining(['PROC', 'cuMemAlloc', 'rc=0', 'entry=cuMemAlloc_v2']));
    expect(t.lines.some((l) => l[0] === 'EXPORT' && /^[0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}$/.test(l[1]) && l[2] === 'rc=0')).toBe(true);
    // calls made through the resolved pointers are counted under the function's real name
    expect(counts(t.lines)).toMatchObject({ cuInit: 1, cuLaunchKernel: 3, cuMemAlloc_v2: 4 });
    expect(t.lines.some((l) => l[0] === 'COUNT' && l[1].startsWith('export:'))).toBe(true);
  });
});

describe('scripts/gpu-frameworks.sh', () => {
  const hasTorch = (() => { try { execFileSync('python3', ['-c', 'import torch'], { stdio: 'ignore' }); return true; } catch { return false; } })();
  it.skipIf(hasTorch)('stops with exit 69 and names what is missing on a host without PyTorch', () => {
    let code = 0, err = '';
    try { execFileSync(path.join(root, 'scripts/gpu-frameworks.sh'), [], { cwd: root, stdio: 'pipe', encoding: 'utf8' }); } catch (e) {
      const x = e as { status: number; stderr: string };
      code = x.status; err = x.stderr;
    }
    expect(code).toBe(69);
    expect(err).toMatch(/gpu-frameworks: python3 lacks torch.*needs a GPU machine with PyTorch/);
  });
});
