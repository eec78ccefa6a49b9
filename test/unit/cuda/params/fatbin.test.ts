/** Fatbin containers as CUDA 13's nvcc writes them (nvcc -fatbin, with and without compression). */
import { describe, expect, it } from 'vitest';
import { fatbinEntries } from '../../../../src/cuda/daemon/params/fatbin.js';
import { fixture } from './known.js';

const summary = (name: string) => fatbinEntries(fixture(name)).map((e) => `${e.kind}:${e.arch}:${e.compression ?? 'plain'}`);

describe('fatbin entries', () => {
  it('list cubins and PTX with their architecture; CUDA 13 compresses only the PTX by default', () => {
    expect(summary('fatbin')).toEqual(['elf:80:plain', 'elf:90:plain', 'ptx:90:zstd']);
    const [sm80] = fatbinEntries(fixture('fatbin'));
    expect(sm80.data.readUInt32BE(0)).toBe(0x7f454c46); // the payload is the cubin itself
  });

  it('mark every entry of a -compress-all fatbin compressed, and a --no-compress PTX entry plain', () => {
    expect(summary('compressed.fatbin')).toEqual(['elf:90:zstd', 'ptx:90:zstd']);
    expect(summary('ptx-only.fatbin')).toEqual(['ptx:90:plain']);
    expect(fatbinEntries(fixture('ptx-only.fatbin'))[0].data.toString('latin1')).toContain('.entry mixed(');
  });

  it('refuse a container whose sizes do not add up', () => {
    const fb = Buffer.from(fixture('fatbin'));
    expect(() => fatbinEntries(fb.subarray(0, fb.length - 8))).toThrow(/malformed fatbin: container larger than the image/);
    fb.writeBigUInt64LE(1n << 40n, 16 + 8); // the first entry claims a terabyte
    expect(() => fatbinEntries(fb)).toThrow(/entry at 16 extends past the container/);
  });
});
