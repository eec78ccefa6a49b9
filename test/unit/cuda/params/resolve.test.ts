/** Choosing between the driver's param info and the image, with a scripted driver function. */
import { describe, expect, it } from 'vitest';
import { ImageParams } from '../../../../src/cuda/daemon/params/index.js';
import { MAX_PARAMS, resolveParams, type ParamInfoFn } from '../../../../src/cuda/daemon/params/resolve.js';

/** A driver whose kernel has `n` 4-byte parameters. */
const driver = (n: number): ParamInfoFn => (_h, i, off, size) => { if (i >= n) return 1; off[0] = BigInt(i * 4); size[0] = 4; return 0; };
const image = (ptx: string) => () => new ImageParams(Buffer.from(ptx));

describe('resolveParams', () => {
  it('takes the driver\'s answer, reading parameters until it says there are no more, without touching the image', () => {
    const res = resolveParams(driver(3), 1, 'k', () => { throw new Error('image read'); });
    expect(res).toEqual({ slots: [{ offset: 0, size: 4 }, { offset: 4, size: 4 }, { offset: 8, size: 4 }] });
  });

  it('refuses a layout longer than the guest shim can hold, from either source', () => {
    expect(resolveParams(driver(MAX_PARAMS + 5), 1, 'k', image('')).reason).toBe(`kernel parameter layout failed: k: more than ${MAX_PARAMS} parameters`);
    const params = Array.from({ length: MAX_PARAMS + 1 }, (_, i) => `.param .u32 p${i}`).join(', ');
    const res = resolveParams(null, 1, 'k', image(`.entry k(${params}) { ret; }`));
    expect(res.reason).toMatch(/more than 256 parameters/);
    expect(res.fallback).toMatch(/no cuFuncGetParamInfo/);
  });

  it('names the reason it was given for skipping the driver', () => {
    expect(resolveParams(null, 1, 'k', image('.entry k(.param .u32 a) {}'), 'SMOL_CUDA_PARAM_LAYOUT=image'))
      .toEqual({ slots: [{ offset: 0, size: 4 }], fallback: 'SMOL_CUDA_PARAM_LAYOUT=image' });
  });
});
