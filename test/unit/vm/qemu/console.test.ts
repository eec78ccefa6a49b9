/** The console readers hold a bounded window of a file the guest writes, whatever its size. */
import { afterAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CONSOLE_WINDOW_BYTES, consoleTail, waitForConsole } from '../../../../src/vm/qemu/console.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-console-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('console log readers', () => {
  it('tail a console larger than Node can read whole (a guest flooding its serial port)', () => {
    const f = path.join(dir, 'huge.log');
    const fd = fs.openSync(f, 'w');
    fs.ftruncateSync(fd, 3 * 1024 ** 3); // sparse: 3 GiB of NULs costs no disk
    fs.writeSync(fd, '\nkernel panic line\nlast line\n', 3 * 1024 ** 3);
    fs.closeSync(fd);
    expect(consoleTail(f, 2)).toBe('kernel panic line\nlast line');
  });

  it('finds a marker after megabytes of output and across read boundaries', async () => {
    const f = path.join(dir, 'flood.log');
    const junk = Buffer.alloc(5 * CONSOLE_WINDOW_BYTES + 123, 'x');
    fs.writeFileSync(f, Buffer.concat([junk, Buffer.from('\nSMOL_READY pid=42\n')]));
    const m = await waitForConsole(f, /SMOL_READY pid=(\d+)/, { timeoutMs: 5000 });
    expect(m[1]).toBe('42');
  });

  it('matches the first occurrence as the file grows between polls', async () => {
    const f = path.join(dir, 'grow.log');
    fs.writeFileSync(f, 'booting\n');
    const found = waitForConsole(f, /READY (\w+)/, { timeoutMs: 5000, pollMs: 5 });
    setTimeout(() => fs.appendFileSync(f, 'READY first\nREADY second\n'), 30);
    expect((await found)[1]).toBe('first');
  });
});
