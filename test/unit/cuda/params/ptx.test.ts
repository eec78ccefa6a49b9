/** Parameter layouts from PTX text (nvcc -ptx, plus hand-written declarations nvcc may emit). */
import { describe, expect, it } from 'vitest';
import { ptxParams } from '../../../../src/cuda/daemon/params/ptx.js';
import { fixture, KNOWN } from './known.js';

describe('PTX .entry parameter lists', () => {
  it('give every kernel its parameters, each at an offset that suits its alignment', () => {
    expect(Object.fromEntries(ptxParams(fixture('ptx').toString()))).toEqual(KNOWN);
  });

  it('align a slot by its own type, not by a pointer\'s .ptr .align (which is about the pointee)', () => {
    const ptx = `.visible .entry k(
      .param .u8 k_param_0,
      .param .u64 .ptr .global .align 16 k_param_1,
      .param .u32 k_param_2[3],
      .param .align 8 .b8 k_param_3[12]
    ) { ret; }`;
    expect(ptxParams(ptx).get('k')).toEqual([{ offset: 0, size: 1 }, { offset: 8, size: 8 }, { offset: 16, size: 12 }, { offset: 32, size: 12 }]);
  });

  it('ignore entries in comments and accept an entry without a parameter list', () => {
    const ptx = `// .entry fake(.param .u32 x)
      /* .entry also_fake(.param .u64 y) */
      .file 1 "/src//dir/*/k.cu"
      .entry bare
      { ret; }`;
    expect([...ptxParams(ptx)]).toEqual([['bare', []]]);
  });

  it('refuse a parameter type it cannot size, naming it', () => {
    expect(() => ptxParams('.entry t(.param .texref tex) { ret; }')).toThrow(/parameter type \.texref of t is not supported/);
  });
});

describe('PTX parsing of hostile text', () => {
  // Not a speed test: quadratic work on 4 MiB would take hours, linear takes ~0.1 s, so a wide bound
  // tells them apart without failing on a loaded machine (it did at 1 s with load 15 on 2 cores).
  it('stays linear: 4 MiB of unclosed comments, strings and parameter lists parse without quadratic work', () => {
    const started = performance.now();
    expect([...ptxParams('/*'.repeat(1 << 21))]).toEqual([]);
    expect([...ptxParams('\\"'.repeat(1 << 21))]).toEqual([]);
    expect(() => ptxParams('.entry a('.repeat(1 << 19))).toThrow(/parameter list of a is not closed/);
    expect(performance.now() - started).toBeLessThan(15_000);
  });
});
