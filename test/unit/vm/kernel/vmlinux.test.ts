import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';
import { extractVmlinux, locateLz4Payload } from '../../../../src/vm/kernel/vmlinux.js';
import { ValidationError } from '../../../../src/errors/index.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'vmlinux-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A fake x86-64 ELF, LZ4-compressed in the kernel's legacy format and wrapped in a bzImage setup header. */
function fakeBzImage(elf: Buffer, withHeader: boolean): Buffer {
  writeFileSync(path.join(dir, 'elf'), elf);
  execFileSync('lz4', ['-l', '-q', '-f', path.join(dir, 'elf'), path.join(dir, 'elf.lz4')]);
  const payload = Buffer.concat([readFileSync(path.join(dir, 'elf.lz4')), Buffer.alloc(4)]); // + the size trailer
  const setupSects = 3;
  const setup = Buffer.alloc((setupSects + 1) * 512);
  const pmHead = Buffer.alloc(300, 0x90);
  if (withHeader) {
    setup[0x1f1] = setupSects;
    setup.writeUInt32LE(0x53726448, 0x202);
    setup.writeUInt32LE(pmHead.length, 0x248);
    setup.writeUInt32LE(payload.length, 0x24c);
  }
  return Buffer.concat([setup, pmHead, payload, Buffer.alloc(64, 0xee)]);
}

function fakeElf(): Buffer {
  const b = Buffer.alloc(4096, 0x41);
  b.writeUInt32BE(0x7f454c46, 0);
  b[4] = 2;
  b.writeUInt16LE(62, 18);
  return b;
}

describe('vmlinux extraction', () => {
  it('finds the payload through the setup header and decompresses the exact ELF', async () => {
    const elf = fakeElf();
    const bz = fakeBzImage(elf, true);
    const loc = locateLz4Payload(bz);
    expect(loc.start).toBe(4 * 512 + 300);
    writeFileSync(path.join(dir, 'vmlinuz'), bz);
    await extractVmlinux(path.join(dir, 'vmlinuz'), path.join(dir, 'vmlinux'));
    expect(readFileSync(path.join(dir, 'vmlinux')).equals(elf)).toBe(true);
  });

  it('falls back to the LZ4 magic when the header does not say', async () => {
    const elf = fakeElf();
    writeFileSync(path.join(dir, 'vmlinuz2'), fakeBzImage(elf, false));
    await extractVmlinux(path.join(dir, 'vmlinuz2'), path.join(dir, 'vmlinux2'));
    expect(readFileSync(path.join(dir, 'vmlinux2')).equals(elf)).toBe(true);
  });

  it('rejects images without an LZ4 payload or whose payload is not an ELF', async () => {
    expect(() => locateLz4Payload(Buffer.alloc(4096))).toThrow(ValidationError);
    writeFileSync(path.join(dir, 'notelf'), fakeBzImage(Buffer.alloc(4096, 1), true));
    await expect(extractVmlinux(path.join(dir, 'notelf'), path.join(dir, 'out3'))).rejects.toThrow(/not an x86-64 ELF/);
  });
});
