/**
 * `smol run -it` on a real pseudo-terminal (#20.2): the host terminal stays raw while the guest command
 * runs, so what the user types is echoed once, by the guest's tty, not also by the host's.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliEnv, killQemuMentioning, root, scratchHome, smolBin } from '../../helpers/cli.js';

const probe = path.join(root, 'test/helpers/pty-probe.py');
const hasPython = spawnSync('python3', ['-c', 'import pty, termios'], { stdio: 'ignore' }).status === 0;
let home: string;
beforeAll(() => { home = scratchHome('tty'); });
afterAll(() => {
  killQemuMentioning(home); // a smol the probe had to kill leaves its machine
  fs.rmSync(home, { recursive: true, force: true });
});

interface Probe { icanon: boolean | null; echo: boolean | null; output: string; code: number }
function onPty(args: string[], size = '24x80'): Probe {
  const r = spawnSync('python3', [probe, 'READY', 'hi\r', '--', process.execPath, smolBin, ...args],
    { env: { ...cliEnv({ home }), NO_COLOR: undefined, PTY_SIZE: size }, encoding: 'utf8', timeout: 110_000 });
  expect(r.status, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as Probe;
}

describe.skipIf(!hasPython)('interactive runs on a real terminal (skipped without python3: it provides the pty)', () => {
  for (const cold of [true, false]) {
    it(`smol run -it keeps the host terminal raw while the command runs (${cold ? 'cold boot, spinner on' : 'snapshot restore'})`, () => {
      const p = onPty(['run', '-it', ...(cold ? ['--cold-boot'] : []), '--', 'sh', '-c', 'echo READY; read x; echo GOT $x']);
      expect(p.code).toBe(0);
      expect({ icanon: p.icanon, echo: p.echo }).toEqual({ icanon: false, echo: false });
      const after = p.output.slice(p.output.indexOf('READY'));
      expect(after.match(/hi/g)?.length).toBe(2); // the guest tty's echo, and GOT hi: no host echo
      expect(after).toContain('GOT hi');
    });
  }

  it('smol run finishes on a terminal that reports 0x0 (no spinner: its line clearing looped forever)', () => {
    const p = onPty(['run', '-i', '--cold-boot', '--', 'sh', '-c', 'echo READY; read x; echo GOT $x'], '0x0');
    expect(p.code).toBe(0);
    expect(p.output).toContain('GOT hi');
  });
});
