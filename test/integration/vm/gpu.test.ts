import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killQemuMentioning, root, scratchHome, smol } from '../../helpers/cli.js';
import { buildGlibcRootfs } from '../../helpers/glibc-rootfs.js';

const progs = path.join(root, 'build', 'cuda-programs');
const fake = path.join(root, 'build', 'fake-cuda', 'libcuda.so.1');
const haveRuntime = fs.existsSync(path.join(progs, 'runtime_vecadd_static'));
let home: string;
let rootfs: string;
const env = () => ({ SMOL_LIBCUDA: fake });

beforeAll(async () => {
  home = scratchHome('gpu');
  rootfs = path.join(home, 'rootfs');
  const programs = ['driver_vecadd', 'nvml_query', ...(haveRuntime ? ['runtime_vecadd_static'] : [])].map((p) => path.join(progs, p));
  await buildGlibcRootfs(rootfs, programs, [path.join(progs, 'kernels.ptx')]);
});
afterAll(() => {
  killQemuMentioning(home);
  fs.rmSync(home, { recursive: true, force: true });
});

const results = (out: string) => Object.fromEntries([...out.matchAll(/^RESULT (\S+) (\S+)/gm)].map((m) => [m[1], m[2]]));

describe('gpu: true machines (guest shim -> agent stream -> host daemon -> FAKE driver)', () => {
  it('runs the driver-API program inside a microVM with correct results', async () => {
    const r = await smol(['run', '--gpu', '--image', rootfs, '--', '/opt/bin/driver_vecadd', '/opt/bin/kernels.ptx'], { home, env: env() });
    expect(r.code, r.stderr).toBe(0);
    const res = results(r.stdout);
    expect(res.vecadd).toBe('PASS');
    expect(Object.values(res).every((v) => v === 'PASS')).toBe(true);
    expect(r.stdout).toContain('Smol FAKE GPU');
  });

  it('answers NVML queries from inside the guest', async () => {
    const r = await smol(['run', '--gpu', '--image', rootfs, '--', '/opt/bin/nvml_query'], { home, env: env() });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('gpu0.name: Smol FAKE GPU (test double)');
  });

  it.skipIf(!haveRuntime)('runs an unmodified nvcc-built runtime-API program in the guest (skipped when nvcc did not build it)', async () => {
    const r = await smol(['run', '--gpu', '--image', rootfs, '--', '/opt/bin/runtime_vecadd_static', '100000'], { home, env: env() });
    expect(r.code, r.stderr).toBe(0);
    expect(results(r.stdout).rt_vecadd).toBe('PASS');
  });

  it('reports no CUDA device to a machine without --gpu', async () => {
    const r = await smol(['run', '--image', rootfs, '--', '/opt/bin/driver_vecadd', '/opt/bin/kernels.ptx'], { home, env: env() });
    expect(r.code).not.toBe(0);
  });
});
