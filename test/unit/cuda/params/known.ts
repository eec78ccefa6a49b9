/** The checked-in nvcc output for test/fixtures/cuda-programs/param-layouts/param_layouts.cu and the
 *  parameter layouts the C ABI gives its kernels, worked out by hand from the declarations. */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const dir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../fixtures/cuda-programs/param-layouts');
export const fixture = (name: string): Buffer => fs.readFileSync(path.join(dir, `param_layouts.${name}`));

const slots = (...pairs: [number, number][]) => pairs.map(([offset, size]) => ({ offset, size }));
export const KNOWN = {
  // const float *, int, float, Box (32 bytes, __align__(16)), char, double *
  mixed: slots([0, 8], [8, 4], [12, 4], [16, 32], [48, 1], [56, 8]),
  // char, short, Pair {char, short, int} (8 bytes, 4-aligned), unsigned long long
  small: slots([0, 1], [2, 2], [4, 8], [16, 8]),
  noargs: slots(),
  // two __restrict__ pointers, double, unsigned char
  restricted: slots([0, 8], [8, 8], [16, 8], [24, 1]),
  // Big (float[50]), int
  big_then_int: slots([0, 200], [200, 4]),
  // Huge (float[5000]), int: past 4 KiB of parameters
  huge: slots([0, 20000], [20000, 4]),
  // parameters the kernel never reads still have their slots
  unused: slots([0, 4], [8, 8], [16, 2]),
  _Z10cpp_kernelPfi: slots([0, 8], [8, 4]),
};
