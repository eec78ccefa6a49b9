/** The image fallback as the daemon uses it: any image form, the fatbin entry it reads, and why not. */
import { describe, expect, it } from 'vitest';
import { ImageParams } from '../../../../src/cuda/daemon/params/index.js';
import { fatbinEntries } from '../../../../src/cuda/daemon/params/fatbin.js';
import { GpuError } from '../../../../src/errors/index.js';
import { fixture, KNOWN } from './known.js';

const all = (p: ImageParams) => Object.fromEntries(Object.keys(KNOWN).map((k) => [k, p.layout(k)]));

describe('kernel parameter layouts from a module image', () => {
  it('are the same from a cubin, PTX text (NUL-terminated, as the daemon keeps it), a fatbin and a PTX-only fatbin', () => {
    expect(all(new ImageParams(fixture('sm_90.cubin'), 90))).toEqual(KNOWN);
    expect(all(new ImageParams(Buffer.concat([fixture('ptx'), Buffer.from([0])]), 90))).toEqual(KNOWN);
    expect(all(new ImageParams(fixture('fatbin'), 90))).toEqual(KNOWN);
    expect(all(new ImageParams(fixture('ptx-only.fatbin'), 90))).toEqual(KNOWN);
  });

  it('read the fatbin cubin of the device\'s architecture first, and another entry when that one is unreadable', () => {
    const fb = Buffer.from(fixture('fatbin'));
    const [sm80] = fatbinEntries(fb);
    // Give small's parameter 1 (a short at offset 2) a size of 4 in the sm_80 cubin only.
    const rec = Buffer.from([0x04, 0x17, 0x0c, 0x00, 0, 0, 0, 0, 0x01, 0x00, 0x02, 0x00]);
    const at = sm80.data.indexOf(rec);
    expect(at).toBeGreaterThan(0);
    sm80.data.writeUInt32LE((sm80.data.readUInt32LE(at + 12) & 0x3ffff) | (4 << 18), at + 12);
    expect(new ImageParams(fb, 80).layout('small')[1]).toEqual({ offset: 2, size: 4 });
    expect(new ImageParams(fb, 90).layout('small')[1]).toEqual({ offset: 2, size: 2 });
    // An sm_90 cubin with a broken section table: the sm_80 one answers instead.
    const sm90 = fatbinEntries(fb)[1].data;
    sm90.writeBigUInt64LE(BigInt(sm90.length), 0x28);
    expect(new ImageParams(fb, 90).layout('mixed')).toEqual(KNOWN.mixed);
    expect(new ImageParams(fb, 90).layout('small')[1]).toEqual({ offset: 2, size: 4 });
  });

  it('inflate zstd entries (CUDA 13 nvcc -compress-all) with Debian\'s zstd', () => {
    expect(all(new ImageParams(fixture('compressed.fatbin'), 90))).toEqual(KNOWN);
  });

  it('say why when nothing readable is left: an LZ4 entry, a zstd entry that does not inflate', () => {
    const fb = Buffer.from(fixture('compressed.fatbin'));
    const [elf, ptx] = fatbinEntries(fb);
    ptx.data.fill(0x55, 4); // keeps the zstd magic, breaks the frame (the entries are views into fb)
    // LZ4 (older toolkits) is flag 0x2000 where zstd is 0x8000, at +0x28 of the entry header
    const at = elf.headerAt;
    expect(fb.readUInt32LE(at + 0x1c)).toBe(90);
    fb.writeBigUInt64LE((fb.readBigUInt64LE(at + 0x28) & ~0x8000n) | 0x2000n, at + 0x28);
    const p = new ImageParams(fb, 90);
    expect(() => p.layout('mixed')).toThrow(GpuError);
    expect(() => p.layout('mixed')).toThrow(/^kernel parameter layout failed: mixed: not in a readable part of the image \(sm_90 cubin is compressed \(lz4\), which the daemon does not read; compute_90 PTX \(zstd\) does not decompress: zstd -d -c -q failed/);
  });

  it('say the kernel is not there when the image is readable but lacks it', () => {
    expect(() => new ImageParams(fixture('sm_90.cubin')).layout('vecadd')).toThrow('kernel parameter layout failed: vecadd: the image has no kernel of that name');
    expect(() => new ImageParams(Buffer.from('garbage that is no image\0')).layout('k')).toThrow(/no kernel of that name/);
  });
});
