/**
 * `smol machine logs` prints what a guest wrote to its console: a guest (root in its VM) can write any bytes
 * there, including OSC 52 (set the host's clipboard) and OSC 0/2 (set the terminal's title). Through the real
 * command against a real registry and console file; no VM.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const home = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-logs-'));
const saved = process.env.SMOL_HOME;
process.env.SMOL_HOME = home;
const { main } = await import('../../../src/cli/main.js');
const { machineService } = await import('../../../src/cli/context.js');
const { smolfileSchema } = await import('../../../src/smolfile/schema.js');

const hostile = Buffer.concat([
  Buffer.from('boot ok\r\n'),
  Buffer.from('\x1b]52;c;cm0gLXJmIH4K\x07'), // OSC 52: "rm -rf ~" onto the clipboard
  Buffer.from('\x1b]0;pwned\x07'), // OSC 0: the window title
  Buffer.from('\x1b[2J\x1b[31mred\x1b[0m\ttab\n'), // clear screen, colours
  Buffer.from([0xc2, 0x9b]), Buffer.from('1;1H'), // C1 CSI (U+009B), as UTF-8
  Buffer.from('\u202eevil\n'), // right-to-left override
]);

let consoleLog: string;
beforeAll(() => {
  const svc = machineService();
  const rec = svc.store.insert({ id: 'aaaaaa000000', name: 'm', state: 'stopped', ephemeral: false, spec: smolfileSchema.parse({}), imageId: 'x', ownerPid: null, parent: null, generation: 0 });
  consoleLog = svc.layout(rec).consoleLog;
  fs.mkdirSync(path.dirname(consoleLog), { recursive: true });
  fs.writeFileSync(consoleLog, hostile);
});
afterAll(() => {
  machineService().store.db.close();
  fs.rmSync(home, { recursive: true, force: true });
  if (saved === undefined) delete process.env.SMOL_HOME;
  else process.env.SMOL_HOME = saved;
});

async function logs(...args: string[]): Promise<Buffer> {
  const chunks: Buffer[] = [];
  const write = process.stdout.write;
  process.stdout.write = ((c: string | Uint8Array) => { chunks.push(Buffer.from(c)); return true; }) as typeof process.stdout.write;
  try {
    expect(await main(['node', 'smol', 'machine', 'logs', 'm', ...args])).toBe(0);
  } finally {
    process.stdout.write = write;
    process.exitCode = undefined;
  }
  return Buffer.concat(chunks);
}

describe('smol machine logs', () => {
  it('shows control sequences from the guest as visible escapes, keeping newlines and tabs', async () => {
    for (const out of [await logs(), await logs('-f'), await logs('-n', '3')]) {
      const text = out.toString('utf8');
      // eslint-disable-next-line no-control-regex
      expect(text).not.toMatch(/[\x00-\x08\x0b-\x1f\x7f\u0080-\u009f\u202e]/);
      expect(text).toContain('\\x1b]52;c;cm0gLXJmIH4K\\x07');
      expect(text).toContain('\\x1b[31mred\\x1b[0m\ttab\n');
      expect(text).toContain('\\u009b1;1H');
      expect(text).toContain('\\u202eevil\n');
    }
    expect((await logs()).toString()).toMatch(/^boot ok\n/);
  });

  it('passes the bytes through unchanged with --raw', async () => {
    expect(await logs('--raw')).toEqual(hostile);
    expect(await logs('--raw', '-f')).toEqual(hostile);
  });

  it('tails a console flooded past what Node can read whole, and prints a log in bounded chunks', async () => {
    const fd = fs.openSync(consoleLog, 'w');
    fs.ftruncateSync(fd, 3 * 1024 ** 3); // sparse: a guest that wrote 3 GiB to its serial port
    fs.writeSync(fd, 'one\ntwo\nthree\n', 3 * 1024 ** 3);
    fs.closeSync(fd);
    try {
      expect((await logs('-n', '2', '--raw')).toString()).toBe('two\nthree\n');
      fs.truncateSync(consoleLog, 5 << 20);
      const sizes: number[] = [];
      const write = process.stdout.write;
      process.stdout.write = ((c: Uint8Array) => { sizes.push(c.length); return true; }) as typeof process.stdout.write;
      try {
        expect(await main(['node', 'smol', 'machine', 'logs', 'm', '--raw'])).toBe(0);
      } finally {
        process.stdout.write = write;
        process.exitCode = undefined;
      }
      expect(sizes.reduce((a, b) => a + b, 0)).toBe(5 << 20);
      expect(Math.max(...sizes)).toBeLessThanOrEqual(1 << 20);
    } finally {
      fs.writeFileSync(consoleLog, hostile);
    }
  });
});
