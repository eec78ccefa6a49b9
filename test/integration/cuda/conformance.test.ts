/**
 * Return-code conformance: C programs (test/fixtures/cuda-programs/conformance) call driver functions with
 * documented bad arguments and print "CASE <name> <code>". Each runs on the FAKE driver directly and
 * through the guest shim + daemon; both must print exactly the codes in expected/<program>.txt (what a
 * real driver returns; scripts/gpu-check.sh repeats the native-vs-remoted diff on a GPU). An error is
 * returned by the call that caused it: the "sync_after_*" cases after each group of bad calls succeed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import { buildNative, fakeLibcuda, nvcc, progs, ptx, root, runProgram, shimEnv, startDaemon, type DaemonProc } from './helpers.js';

const dir = path.join(progs, 'conformance');
const expectedDir = path.join(root, 'test/fixtures/cuda-programs/conformance/expected');
const noNvcc = nvcc ? '' : ' [skipped: nvcc not installed]';

/** CASE lines as [name, code] pairs, in order; INFO lines (data checks) as a separate list. */
function cases(text: string): [string, number][] {
  return [...text.matchAll(/^CASE (\S+) (-?\d+)\b/gm)].map((m) => [m[1], Number(m[2])]);
}
const infos = (text: string) => [...text.matchAll(/^INFO .*$/gm)].map((m) => m[0]);
const expected = (prog: string) => cases(fs.readFileSync(path.join(expectedDir, `${prog}.txt`), 'utf8'));

let d: DaemonProc;
beforeAll(async () => { buildNative(); d = await startDaemon(); });
afterAll(async () => { await d?.stop(); });

const core: [string, string[]][] = [['conf_init', []], ['conf_mem', []], ['conf_exec', [ptx]], ['conf_handles', [ptx]]];
// Each area's program (conformance/conf_<area>.c: graphs, pools, copies...) takes the PTX path too.
const areas: [string, string[]][] = fs.readdirSync(path.join(root, 'test/fixtures/cuda-programs/conformance'))
  .filter((f) => /^conf_\w+\.c$/.test(f)).map((f) => f.slice(0, -2))
  .filter((p) => !core.some(([c]) => c === p)).sort().map((p) => [p, [ptx]]);
const driverPrograms = [...core, ...areas];

describe('driver API return codes: FAKE driver directly vs through the shim', () => {
  for (const [prog, args] of driverPrograms) {
    it(`${prog}: the same code from the same call on both, and the documented one`, async () => {
      const native = await runProgram(path.join(dir, prog), args, { LD_LIBRARY_PATH: path.dirname(fakeLibcuda) });
      const remote = await runProgram(path.join(dir, prog), args, shimEnv(d.endpoint));
      expect(native.code, native.stderr).toBe(0);
      expect(remote.code, remote.stderr).toBe(0);
      const want = expected(prog);
      expect(want.length).toBeGreaterThan(10);
      expect(cases(remote.stdout)).toEqual(cases(native.stdout));
      expect(cases(native.stdout)).toEqual(want);
      expect(infos(remote.stdout)).toEqual(infos(native.stdout));
      for (const line of infos(remote.stdout)) expect(line).not.toMatch(/wrong/);
    });
  }

  it('a bad argument fails its own call and never the next one', () => {
    const all = driverPrograms.flatMap(([p]) => expected(p));
    const code = (name: string) => all.find(([n]) => n === name)?.[1];
    // the calls issue 16 named: fire-and-forget frees and copies answer at once...
    expect(code('free_unknown')).toBe(1);
    expect(code('htod_unknown')).toBe(1);
    expect(code('htod_past_end')).toBe(1);
    expect(code('memset_d8_unknown')).toBe(1);
    expect(code('launch_block_0')).toBe(1);
    // ...and the synchronising call after each group of bad ones succeeds
    const after = all.filter(([n]) => n.startsWith('sync_after') || n.startsWith('good_') || n === 'sync_at_end');
    expect(after.length).toBeGreaterThanOrEqual(8);
    expect(after.filter(([, c]) => c !== 0)).toEqual([]);
  });

  it('a real deferred error (an illegal address in a kernel) still surfaces at the next synchronising call', async () => {
    const r = await runProgram(path.join(progs, 'driver_vecadd'), [ptx, 'sticky', '4096'], shimEnv(d.endpoint));
    expect(r.stdout).toContain('launch=0 sync=700');
  });
});

describe('runtime API (nvcc-built, cudart) return codes through the shim', () => {
  for (const link of ['static', 'shared']) {
    it.skipIf(!nvcc)(`rt_conformance (${link} cudart): each call returns its own cudaError_t; cudaGetLastError reports it once${noNvcc}`, async () => {
      const r = await runProgram(path.join(dir, `rt_conformance_${link}`), [], shimEnv(d.endpoint));
      expect(r.code, r.stderr).toBe(0);
      expect(cases(r.stdout)).toEqual(expected('rt_conformance'));
      expect(infos(r.stdout)).toEqual(['INFO roundtrip ok']);
    });
  }
});
