/** The console keeper (host/conlog, built here from source) and the readers that follow its rotations. */
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { consoleMaxBytes, consoleSettled, DEFAULT_CONSOLE_MAX_BYTES, keeperPidFile } from '../../../../src/vm/qemu/console-keeper.js';
import { LogFollower, pumpConsoleLog, rotatedLog } from '../../../../src/vm/qemu/console.js';

const root = path.resolve(import.meta.dirname, '../../../..');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-conlog-'));
const keeper = path.join(dir, 'smol-conlog');
beforeAll(() => { execFileSync('make', ['-s', '-C', path.join(root, 'host/conlog'), `OUT=${dir}`]); });
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/** Runs `script` as the keeper's command (it writes the console on fd 3, as QEMU does), then waits for the keeper to finish. */
async function keep(log: string, max: number, append: boolean, script: string) {
  const r = spawnSync(keeper, [log, String(max), append ? '1' : '0', keeperPidFile(log), '--', 'sh', '-c', script], { encoding: 'utf8' });
  await consoleSettled(log, 5000);
  return r;
}
const read = (f: string) => (fs.existsSync(f) ? fs.readFileSync(f, 'utf8') : '');

describe('smol-conlog', () => {
  it('holds the log and one rotated file to the cap, newest bytes kept in order', async () => {
    const log = path.join(dir, 'a', 'console.log');
    fs.mkdirSync(path.dirname(log));
    const lines = Array.from({ length: 400 }, (_, i) => `line ${i}\n`).join('');
    const r = await keep(log, 1000, false, `printf '%s' "$1" >&3; echo to-stderr >&2; exit 7`.replace('$1', lines));
    expect(r.status).toBe(7); // the command's own status and stderr, as if it ran alone
    expect(r.stderr).toBe('to-stderr\n');
    expect(fs.statSync(log).size).toBeLessThanOrEqual(1000);
    expect(fs.statSync(rotatedLog(log)).size).toBe(1000);
    expect(lines.endsWith(read(rotatedLog(log)) + read(log))).toBe(true);
  });

  it('keeps earlier boots with append, and starts empty without', async () => {
    const log = path.join(dir, 'b.log');
    await keep(log, 1 << 20, false, 'echo boot1 >&3');
    await keep(log, 1 << 20, true, 'echo boot2 >&3');
    expect(read(log)).toBe('boot1\nboot2\n');
    await keep(log, 1 << 20, false, 'echo boot3 >&3');
    expect(read(log)).toBe('boot3\n');
  });

  it('fails before running the command when the log cannot be opened', () => {
    const r = spawnSync(keeper, [path.join(dir, 'missing', 'console.log'), '1000', '0', path.join(dir, 'p'), '--', 'touch', path.join(dir, 'ran')], { encoding: 'utf8' });
    expect(r.status).toBe(125);
    expect(r.stderr).toMatch(/cannot open .*missing\/console\.log/);
    expect(fs.existsSync(path.join(dir, 'ran'))).toBe(false);
  });
});

describe('reading a rotated console', () => {
  it('follows the log across a rotation without losing or repeating bytes', () => {
    const log = path.join(dir, 'f.log');
    fs.writeFileSync(log, 'one\n');
    const seen: string[] = [];
    const f = new LogFollower(log);
    f.drain((c) => { seen.push(c.toString()); });
    fs.appendFileSync(log, 'two\n');
    fs.renameSync(log, rotatedLog(log)); // what the keeper does at the cap
    fs.writeFileSync(log, 'three\n');
    f.drain((c) => { seen.push(c.toString()); });
    fs.appendFileSync(log, 'four\n');
    f.drain((c) => { seen.push(c.toString()); });
    f.close();
    expect(seen.join('')).toBe('one\ntwo\nthree\nfour\n');
  });

  it('prints the rotated file first, and takes the last lines from both', () => {
    const log = path.join(dir, 't.log');
    fs.writeFileSync(rotatedLog(log), 'a\nb\nc'); // the cap can cut a line in two
    fs.writeFileSync(log, 'c2\nd\n');
    const out = (tail?: number) => {
      const parts: Buffer[] = [];
      pumpConsoleLog(log, tail, (c) => { parts.push(c); }).close();
      return Buffer.concat(parts).toString();
    };
    expect(out()).toBe('a\nb\ncc2\nd\n');
    expect(out(1)).toBe('d\n');
    expect(out(2)).toBe('cc2\nd\n');
    expect(out(3)).toBe('b\ncc2\nd\n');
    expect(out(10)).toBe('a\nb\ncc2\nd\n');
  });
});

describe('SMOL_CONSOLE_MAX_BYTES', () => {
  it('defaults to 8 MiB and refuses what is not a byte count of at least 1 KiB', () => {
    expect(consoleMaxBytes({})).toBe(DEFAULT_CONSOLE_MAX_BYTES);
    expect(DEFAULT_CONSOLE_MAX_BYTES).toBe(8 << 20);
    expect(consoleMaxBytes({ SMOL_CONSOLE_MAX_BYTES: '65536' })).toBe(65536);
    for (const bad of ['0', '100', '1e6', '-5', '8M', ' 4096']) {
      expect(() => consoleMaxBytes({ SMOL_CONSOLE_MAX_BYTES: bad })).toThrow(/SMOL_CONSOLE_MAX_BYTES/);
    }
  });
});
