import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { diskUsage, memoryUsage, parseSmapsRollup, qcow2Backing } from '../../../src/vm/usage.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-usage-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/** A qcow2 header naming `backing` (only the fields the chain walk reads), plus `dataBytes` of payload. */
function qcow2(file: string, backing: string | null, dataBytes = 0): string {
  const name = Buffer.from(backing ?? '');
  const h = Buffer.alloc(512 + dataBytes, dataBytes ? 7 : 0);
  h.writeUInt32BE(0x514649fb, 0);
  h.writeUInt32BE(3, 4);
  if (backing) {
    h.writeBigUInt64BE(200n, 8);
    h.writeUInt32BE(name.length, 16);
    name.copy(h, 200);
  }
  const p = path.join(dir, file);
  fs.writeFileSync(p, h);
  return p;
}

describe('memory usage', () => {
  it('splits smaps_rollup into PSS, own and shared MiB', () => {
    const text = 'Rss:              102400 kB\nPss:               51200 kB\nShared_Clean:      40960 kB\nShared_Dirty:      20480 kB\nPrivate_Clean:      1024 kB\nPrivate_Dirty:     39936 kB\n';
    expect(parseSmapsRollup(text)).toEqual({ rssMiB: 100, pssMiB: 50, privateMiB: 40, sharedMiB: 60 });
  });

  it('is null for text without the fields, and for a process that is gone', () => {
    expect(parseSmapsRollup('nothing here')).toBeNull();
    expect(memoryUsage(null)).toBeNull();
    expect(memoryUsage(2 ** 22 + 12345)).toBeNull();
  });

  it('reads this very process', () => {
    const m = memoryUsage(process.pid)!;
    expect(m.rssMiB).toBeGreaterThan(10);
    expect(m.pssMiB).toBeLessThanOrEqual(m.rssMiB);
  });
});

describe('disk usage', () => {
  it('walks the backing chain (relative names resolve beside the image): the top is own, the rest shared', () => {
    const base = qcow2('base.qcow2', null, 64 * 1024);
    const frozen = qcow2('frozen.qcow2', base, 16 * 1024);
    const top = qcow2('top.qcow2', 'frozen.qcow2');
    expect(qcow2Backing(top)).toBe(frozen);
    expect(qcow2Backing(base)).toBeNull();
    const u = diskUsage(top)!;
    expect(u.chain).toEqual([top, frozen, base]);
    expect(u.privateBytes).toBe(fs.statSync(top).blocks * 512);
    expect(u.sharedBytes).toBe((fs.statSync(frozen).blocks + fs.statSync(base).blocks) * 512);
  });

  it('stops at a missing backing file or a file that is not qcow2, and is null without a disk', () => {
    const orphan = qcow2('orphan.qcow2', path.join(dir, 'gone.qcow2'));
    expect(diskUsage(orphan)!.chain).toEqual([orphan]);
    const raw = path.join(dir, 'raw.img');
    fs.writeFileSync(raw, Buffer.alloc(4096, 1));
    expect(qcow2Backing(raw)).toBeNull();
    expect(diskUsage(path.join(dir, 'none.qcow2'))).toBeNull();
  });
});
