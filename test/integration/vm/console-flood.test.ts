/**
 * Root in the guest owns its serial port: a guest that writes to /dev/console forever must not fill the host
 * disk. The console keeper (host/conlog) holds console.log and console.log.1 to SMOL_CONSOLE_MAX_BYTES each.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killQemuMentioning, qemuProcessesMentioning, scratchHome, smol } from '../../helpers/cli.js';

const CAP = 16 << 10;
// ten times the cap, so the old unbounded file is unmistakable; busybox `yes` gives printable lines
const FLOOD = 160 << 10;
let home: string;
const env = { SMOL_CONSOLE_MAX_BYTES: String(CAP) };
beforeAll(() => { home = scratchHome('flood'); });
afterAll(() => {
  killQemuMentioning(home);
  fs.rmSync(home, { recursive: true, force: true });
});

const keepers = () => spawnSync('pgrep', ['-f', `smol-conlog ${home}`], { encoding: 'utf8' }).stdout.split('\n').filter(Boolean);
const size = (f: string) => (fs.existsSync(f) ? fs.statSync(f).size : 0);

/** `logs -n 1` until it shows `marker`: the guest's tty hands its last bytes to the serial port after exec returns. */
async function logsShow(marker: string): Promise<string> {
  let out = '';
  for (let i = 0; i < 100 && !out.includes(marker); i++) {
    out = (await smol(['machine', 'logs', 'f1', '-n', '1'], { home, env })).stdout;
    if (!out.includes(marker)) await new Promise((r) => setTimeout(r, 100));
  }
  return out;
}

describe('a guest flooding its console (real QEMU)', () => {
  it('fills no more of the host disk than the cap, and the machine and its logs work on', async () => {
    expect((await smol(['machine', 'create', 'f1'], { home, env })).code).toBe(0);
    const s = await smol(['machine', 'start', 'f1', '--json'], { home, env });
    expect(s.code, s.stderr).toBe(0);
    const log: string = JSON.parse(s.stdout).consoleLog;
    const flood = await smol(['machine', 'exec', 'f1', '--timeout', '120s', '--', 'sh', '-c', `yes flood-line | head -c ${FLOOD} > /dev/console; echo END-MARK > /dev/console`], { home, env, timeoutMs: 150_000 });
    expect(flood.code, flood.stderr).toBe(0);
    expect(await logsShow('END-MARK')).toMatch(/END-MARK/);
    expect(size(log)).toBeLessThanOrEqual(CAP);
    expect(size(`${log}.1`)).toBeLessThanOrEqual(CAP);
    expect(size(`${log}.1`)).toBeGreaterThan(0); // rotated, and the newest output is in console.log

    // all that is kept, in order: the rotated file first, the newest line last
    const all = await smol(['machine', 'logs', 'f1', '--raw'], { home, env });
    expect(all.stdout.length).toBeGreaterThan(CAP);
    expect(all.stdout.length).toBeLessThanOrEqual(2 * CAP);
    expect(all.stdout).toMatch(/flood-line\r?\n[\s\S]*END-MARK\r?\n$/);

    const ok = await smol(['machine', 'exec', 'f1', '--', 'echo', 'still here'], { home, env });
    expect(ok.stdout).toBe('still here\n');
    expect(keepers()).toHaveLength(1);
    expect((await smol(['machine', 'rm', '-f', 'f1'], { home, env })).code).toBe(0);
    expect(qemuProcessesMentioning(home)).toEqual([]);
    // the keeper goes with the QEMU it served
    for (let i = 0; i < 50 && keepers().length; i++) await new Promise((r) => setTimeout(r, 100));
    expect(keepers()).toEqual([]);
  });
});
