/** A detached run's output is held to the console's cap on disk, whatever the guest command prints. */
import { afterAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pumpConsoleLog } from '../../../src/vm/qemu/console.js';
import { RotatingLog } from '../../../src/vm/rotating-log.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-rotlog-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const end = (w: RotatingLog) => new Promise<void>((resolve, reject) => w.end((err?: Error | null) => (err ? reject(err) : resolve())));

function readLog(file: string): string {
  const parts: Buffer[] = [];
  pumpConsoleLog(file, undefined, (c) => parts.push(c)).close();
  return Buffer.concat(parts).toString();
}

describe('RotatingLog', () => {
  it('keeps at most twice the cap on disk, the newest bytes in order, however the writes are cut', async () => {
    const file = path.join(dir, 'output.log');
    const w = new RotatingLog(file, 2500);
    let all = '';
    for (let i = 0; i < 40; i++) {
      const line = `line ${String(i).padStart(3, '0')} ${'x'.repeat(90)}\n`;
      all += line;
      w.write(line);
    }
    const big = 'B'.repeat(7000); // one write larger than the cap
    all += big;
    w.write(big);
    w.write('last\n');
    all += 'last\n';
    await end(w);
    expect(fs.statSync(file).size).toBeLessThanOrEqual(2500);
    expect(fs.statSync(`${file}.1`).size).toBeLessThanOrEqual(2500);
    const kept = readLog(file);
    expect(kept.length).toBeGreaterThan(2500);
    expect(all.endsWith(kept)).toBe(true);
  });

  it('appends to what an earlier writer left, counting it toward the cap', async () => {
    const file = path.join(dir, 'again.log');
    fs.writeFileSync(file, 'a'.repeat(900));
    const w = new RotatingLog(file, 1000);
    w.write('b'.repeat(200));
    await end(w);
    expect(fs.readFileSync(`${file}.1`, 'utf8')).toBe(`${'a'.repeat(900)}${'b'.repeat(100)}`);
    expect(fs.readFileSync(file, 'utf8')).toBe('b'.repeat(100));
  });
});
