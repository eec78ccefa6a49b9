/** Checks on the built shims themselves: exported symbols and the integrity-check answer. */
import { beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { build, buildNative, root } from './helpers.js';

beforeAll(() => buildNative());

describe('guest shim binaries', () => {
  it('libcuda.so.1 exports exactly the checked-in symbol list (nm -D)', () => {
    const nm = execFileSync('nm', ['-D', '--defined-only', path.join(build, 'libcuda.so.1')], { encoding: 'utf8' });
    const got = nm.split('\n').map((l) => l.trim().split(/\s+/)[2]).filter(Boolean).sort();
    const want = fs.readFileSync(path.join(root, 'shims/cuda/exports.txt'), 'utf8').split('\n').filter(Boolean).sort();
    expect(got).toEqual(want);
    for (const s of ['cuGetProcAddress_v2', 'cuGetExportTable', 'cuLaunchKernel', 'cuLibraryLoadData', 'cuCtxGetDevice_v2', 'cuEventElapsedTime_v2']) expect(got).toContain(s);
  });

  it('libnvidia-ml.so.1 exports the NVML entry points tools use', () => {
    const nm = execFileSync('nm', ['-D', '--defined-only', path.join(build, 'libnvidia-ml.so.1')], { encoding: 'utf8' });
    for (const s of ['nvmlInit_v2', 'nvmlDeviceGetCount_v2', 'nvmlDeviceGetHandleByIndex_v2', 'nvmlDeviceGetName', 'nvmlDeviceGetUUID', 'nvmlDeviceGetMemoryInfo', 'nvmlDeviceGetUtilizationRates', 'nvmlSystemGetDriverVersion']) {
      expect(nm).toMatch(new RegExp(`\\b${s}\\b`));
    }
  });

  it('the integrity hash matches the published reference vector (ZLUDA test data)', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-integrity-'));
    const src = path.join(dir, 't.c');
    fs.writeFileSync(src, `#include <stdio.h>
#include "integrity.h"
int main(void) {
  smol_integrity_device d = { { 0x67, 0x22, 0xCB, 0xCF, 0xC6, 0x61, 0xF2, 0x92, 0x74, 0xD6, 0xED, 0x23, 0x2A, 0x32, 0x13, 0x1C }, 0, 4, 0 };
  smol_integrity_input in = { 12020, 0x2B4A, 0x4D08, 0x2B78, 0x00007FF8C80717F0ull, 0x00007FF8C825E4B0ull, 0x00007FF8C7DD0AD0ull, 0x64A365EE, 1, &d };
  uint8_t o[16]; smol_integrity_hash(&in, o);
  for (int i = 15; i >= 0; i--) printf("%02X", o[i]);
  in.rt_version = 13001; smol_integrity_hash(&in, o); printf(" %02X", o[7]);
  in.rt_version = 13000; smol_integrity_hash(&in, o); printf(" %02X\\n", o[7]);
}
`);
    const exe = path.join(dir, 't');
    execFileSync('cc', ['-I', path.join(root, 'shims/cuda'), '-o', exe, src, path.join(root, 'shims/cuda/integrity.c')]);
    const out = execFileSync(exe, { encoding: 'utf8' }).trim();
    fs.rmSync(dir, { recursive: true, force: true });
    expect(out).toBe('EAF1313342BFCD84A7C34628F214707A 18 33');
  });
});
