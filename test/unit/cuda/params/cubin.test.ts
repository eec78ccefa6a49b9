/** Parameter layouts from a real cubin (nvcc -cubin -arch=sm_90) against the C ABI's answers. */
import { describe, expect, it } from 'vitest';
import { cubinParams } from '../../../../src/cuda/daemon/params/cubin.js';
import { GpuError } from '../../../../src/errors/index.js';
import { fixture, KNOWN } from './known.js';

describe('cubin .nv.info parameter records', () => {
  it('give every kernel its parameters in order, from KPARAM_INFO and (past 4 KiB) KPARAM_INFO_V2', () => {
    const got = cubinParams(fixture('sm_90.cubin'));
    expect(Object.fromEntries(got)).toEqual(KNOWN);
  });

  it('refuse a cubin whose section table lies past its end', () => {
    const elf = fixture('sm_90.cubin');
    const shoff = Number(elf.readBigUInt64LE(0x28));
    expect(() => cubinParams(elf.subarray(0, shoff + 100))).toThrow(/malformed cubin: section table out of bounds/);
    expect(() => cubinParams(Buffer.from('not an elf at all, but long enough for a header'.repeat(2)))).toThrow(GpuError);
  });

  it('refuse a parameter that ends past the kernel\'s parameter bank', () => {
    const elf = Buffer.from(fixture('sm_90.cubin'));
    // mixed's last record: ordinal 5 at offset 56; move it to 60 so it overruns the 64-byte bank
    const rec = Buffer.from([0x04, 0x17, 0x0c, 0x00, 0, 0, 0, 0, 0x05, 0x00, 0x38, 0x00]);
    const at = elf.indexOf(rec);
    expect(at).toBeGreaterThan(0);
    elf[at + 10] = 60;
    expect(() => cubinParams(elf)).toThrow(/parameter 5 of mixed ends past its 64-byte parameter bank/);
  });
});

describe('cubin parsing of hostile images', () => {
  it('refuses many .nv.info sections sharing one body instead of parsing it once per section', () => {
    const elf = Buffer.from(fixture('sm_90.cubin'));
    const shoff = Number(elf.readBigUInt64LE(0x28)), count = elf.readUInt16LE(0x3c);
    const mixed = cubinSectionIndex(elf, '.nv.info.mixed');
    const small = cubinSectionIndex(elf, '.nv.info.small');
    // Point small's section at mixed's body as well (offset and size).
    elf.copy(elf, shoff + small * 64 + 24, shoff + mixed * 64 + 24, shoff + mixed * 64 + 40);
    expect(count).toBeGreaterThan(small);
    // Two overlapping bodies are still within the image's size: both parse, small now reads mixed's records.
    expect(cubinParams(elf).get('small')).toEqual(KNOWN.mixed);
    // A body as large as the image, claimed twice, is refused.
    elf.writeBigUInt64LE(0n, shoff + mixed * 64 + 24); elf.writeBigUInt64LE(BigInt(elf.length), shoff + mixed * 64 + 32);
    elf.writeBigUInt64LE(0n, shoff + small * 64 + 24); elf.writeBigUInt64LE(BigInt(elf.length), shoff + small * 64 + 32);
    expect(() => cubinParams(elf)).toThrow(/\.nv\.info sections overlap/);
  });
});

function cubinSectionIndex(elf: Buffer, name: string): number {
  const shoff = Number(elf.readBigUInt64LE(0x28)), count = elf.readUInt16LE(0x3c), strIdx = elf.readUInt16LE(0x3e);
  const strOff = Number(elf.readBigUInt64LE(shoff + strIdx * 64 + 24));
  for (let i = 0; i < count; i++) {
    const at = strOff + elf.readUInt32LE(shoff + i * 64);
    if (elf.toString('latin1', at, elf.indexOf(0, at)) === name) return i;
  }
  throw new Error(`no section ${name}`);
}
