/**
 * Volumes for a user who is not root (docs/volumes.md, "Ownership"): virtiofsd runs as root of a user
 * namespace mapped to that user, so what the guest's root writes is the user's on the host, and other guest
 * uids are refused. Runs smol as `nobody` through setpriv: cold boot, then the boot snapshot's restore with
 * the device plugged in afterwards. Needs root (to become nobody) and setpriv.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killQemuMentioning, root, scratchHome, sharedHome, smolBin } from '../../helpers/cli.js';

const NOBODY = 65534;
const canDrop = process.getuid?.() === 0 && spawnSync('setpriv', ['--version']).status === 0;

let home: string;
/** Directories above the checkout that `nobody` could not pass through, with their modes, put back after. */
const opened: [string, number][] = [];

beforeAll(() => {
  if (!canDrop) return;
  home = scratchHome('volumes-unpriv');
  const assets = path.join(home, 'assets');
  fs.mkdirSync(path.join(home, 'share'), { recursive: true });
  fs.mkdirSync(assets);
  // the kernel and images the test run built (readable by all); snapshots go to this user's own cache
  for (const d of ['kernel', 'images']) fs.symlinkSync(path.join(sharedHome(), d), path.join(assets, d));
  fs.writeFileSync(path.join(home, 'share', 'in.txt'), 'from the host\n');
  spawnSync('chown', ['-R', `${NOBODY}:${NOBODY}`, home]);
  // a fresh clone in `mktemp -d` sits in a 0700 directory: let nobody search (not list) the way to bin/smol
  for (let d = path.dirname(home); d !== '/'; d = path.dirname(d)) widen(d);
  for (let d = root; d !== '/'; d = path.dirname(d)) widen(d);
});
afterAll(() => {
  if (!home) return;
  killQemuMentioning(home);
  for (const [d, mode] of opened) fs.chmodSync(d, mode);
  fs.rmSync(home, { recursive: true, force: true });
});

function widen(dir: string): void {
  const mode = fs.statSync(dir).mode & 0o7777;
  if (mode & 0o001 || opened.some(([d]) => d === dir)) return;
  opened.push([dir, mode]);
  fs.chmodSync(dir, mode | 0o001);
}

function asNobody(args: string[]): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync('setpriv', [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', process.execPath, smolBin, ...args], {
    env: { ...process.env, HOME: home, SMOL_HOME: path.join(home, 'smol'), SMOL_ASSETS: path.join(home, 'assets'), SMOL_VERBOSE: '1', NO_COLOR: '1' },
    encoding: 'utf8', timeout: 180_000,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe.skipIf(!canDrop)('volumes for an unprivileged user (skipped unless root with setpriv, to become nobody)', () => {
  it('the guest root\'s files are the user\'s on the host, other guest uids are refused, :ro holds; cold and restored', () => {
    const share = path.join(home, 'share');
    const script = 'cat /work/in.txt; echo "$1" >> /work/out.txt; chown 1234 /work/out.txt 2>/dev/null || echo chown-refused; '
      + 'echo x > /ro/x 2>/dev/null || echo ro-refused; chmod 4755 /work/out.txt 2>/dev/null || echo suid-refused';
    for (const [i, how] of [[1, /saving the boot snapshot/], [2, /restoring the boot snapshot/]] as const) {
      const r = asNobody(['run', '-v', `${share}:/work`, '-v', `${share}:/ro:ro`, '--', 'sh', '-c', script, 'sh', `run ${i}`]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr).toMatch(how);
      expect(r.stdout).toBe('from the host\nchown-refused\nro-refused\nsuid-refused\n');
    }
    const out = path.join(share, 'out.txt');
    expect(fs.readFileSync(out, 'utf8')).toBe('run 1\nrun 2\n');
    expect([fs.statSync(out).uid, fs.statSync(out).gid]).toEqual([NOBODY, NOBODY]);
    // a setuid-nobody file would let any host user act as nobody (and so as this user)
    expect(fs.statSync(out).mode & 0o6000).toBe(0);
    expect(fs.existsSync(path.join(share, 'x'))).toBe(false);
    expect(fs.readdirSync(path.join(home, 'smol', 'machines'))).toEqual([]);
  }, 400_000);
});
