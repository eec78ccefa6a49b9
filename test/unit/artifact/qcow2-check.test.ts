/**
 * The qcow2 header rules behind the artifact disk check, on images qemu-img 7.2 writes (then patched at
 * the byte level where qemu-img will not write the hostile variant).
 */
import { open, readFile } from 'node:fs/promises';
import path from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inspectQcow2, qcow2Hazard, readQcow2Head } from '../../../src/artifact/qcow2-check.js';
import { run } from '../../../src/util/exec.js';
import { tempDir } from './helpers.js';

describe('qcow2Hazard', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  let n = 0;
  beforeAll(async () => { ({ dir, cleanup } = await tempDir()); });
  afterAll(() => cleanup());

  async function image(...opts: string[]): Promise<Buffer> {
    const f = path.join(dir, `i-${++n}.qcow2`);
    await run('qemu-img', ['create', '-q', '-f', 'qcow2', ...opts, f, '4M']);
    return readFile(f);
  }

  it('accepts images that stand alone: version 3, version 2, 2 MiB clusters', async () => {
    expect(inspectQcow2(await image())).toEqual({ hazard: null, facts: { version: 3, clusterBits: 16, virtualSize: 4 << 20 } });
    expect(qcow2Hazard(await image('-o', 'compat=0.10'))).toBeNull();
    expect(qcow2Hazard(await image('-o', 'cluster_size=2M'))).toBeNull();
  });

  it('names a backing file in a version 2 header too', async () => {
    expect(qcow2Hazard(await image('-o', 'compat=0.10', '-u', '-b', '/etc/shadow', '-F', 'raw'))).toBe('names the backing file "/etc/shadow"');
  });

  it('refuses a backing offset whatever its size says, naming where the name would be', async () => {
    const b = await image();
    b.writeBigUInt64BE(4096n, 8);
    expect(qcow2Hazard(b)).toBe('names the backing file of 0 bytes at offset 4096');
    b.writeUInt32BE(70_000, 16);
    expect(qcow2Hazard(b)).toBe('names the backing file of 70000 bytes at offset 4096');
  });

  it('refuses the external data file bit without its name, and incompatible features QEMU 7.2 does not know', async () => {
    const withData = await image('-o', `data_file=${path.join(dir, 'data.raw')}`);
    expect(qcow2Hazard(withData)).toMatch(/^names the external data file ".*data\.raw"$/);
    const at = withData.indexOf('DATA');
    withData.write('XXXX', at); // an extension QEMU skips: the bit alone still makes it open a data file
    expect(qcow2Hazard(withData)).toBe('needs an external data file (qcow2 incompatible feature bit 2)');
    const b = await image();
    b.writeBigUInt64BE(1n << 40n, 72);
    expect(qcow2Hazard(b)).toBe('uses qcow2 incompatible features 0x10000000000 that QEMU 7.2 does not know');
  });

  it('refuses a header extension that runs past the first cluster', async () => {
    const b = await image();
    const headerLength = b.readUInt32BE(100);
    b.writeUInt32BE(0x7fffffff, headerLength + 4);
    expect(qcow2Hazard(b)).toMatch(/^has a qcow2 header extension 0x[0-9a-f]+ of 2147483647 bytes that runs past the first cluster$/);
  });

  it('refuses what is not a qcow2 QEMU would open', async () => {
    const b = await image();
    expect(qcow2Hazard(b.subarray(0, 71))).toBe('is not a qcow2 image');
    expect(qcow2Hazard(Buffer.alloc(4096))).toBe('is not a qcow2 image');
    const v4 = Buffer.from(b);
    v4.writeUInt32BE(4, 4);
    expect(qcow2Hazard(v4)).toBe('is a qcow2 image of version 4 (QEMU opens versions 2 and 3)');
    const huge = Buffer.from(b);
    huge.writeUInt32BE(30, 20);
    expect(qcow2Hazard(huge)).toBe('has a qcow2 cluster size of 2^30 bytes (QEMU opens 2^9 to 2^21)');
    expect(qcow2Hazard(b.subarray(0, 100))).toBe('is a truncated qcow2 image (its version 3 header is cut short)');
  });

  it('never throws on mutated headers, and never accepts one that names a backing or data file', async () => {
    const seeds = [await image(), await image('-o', 'compat=0.10'), await image('-o', `data_file=${path.join(dir, 'd.raw')}`), await image('-u', '-b', '/etc/shadow', '-F', 'raw')];
    const flips = fc.array(fc.record({ at: fc.nat(511), value: fc.nat(255) }), { maxLength: 8 });
    fc.assert(fc.property(fc.constantFrom(...seeds), flips, fc.nat(4096), (seed, edits, cut) => {
      const b = Buffer.from(seed.subarray(0, seed.length - cut));
      for (const e of edits) if (e.at < b.length) b[e.at] = e.value;
      const r = inspectQcow2(b);
      expect(r.hazard === null || typeof r.hazard === 'string').toBe(true);
      if (r.hazard === null) {
        expect(b.readBigUInt64BE(8)).toBe(0n);
        expect(b.readUInt32BE(16)).toBe(0);
        // QEMU opens a data file only with this bit set (version 2 has no such bit)
        if (b.readUInt32BE(4) === 3) expect(b.readBigUInt64BE(72) & 4n).toBe(0n);
      }
    }), { numRuns: 3000, seed: 31 });
  });

  it('readQcow2Head reads the first cluster as the header sizes it', async () => {
    await image('-o', 'cluster_size=2M', '-u', '-b', '/etc/passwd', '-F', 'raw');
    const fh = await open(path.join(dir, `i-${n}.qcow2`), 'r');
    try {
      const head = await readQcow2Head(fh);
      expect(head.length).toBe(Math.min((2 << 20) + 1024, (await fh.stat()).size));
      expect(qcow2Hazard(head)).toBe('names the backing file "/etc/passwd"');
    } finally {
      await fh.close();
    }
  });
});
