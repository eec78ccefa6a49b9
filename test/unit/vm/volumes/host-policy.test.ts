/**
 * The host paths -v refuses (volumes/host-policy.ts through checkVolumes, which the CLI, a Smolfile's
 * volumes, the API and every start go through): kernel interfaces, smol's own home and assets from inside
 * or above, and / read-write. Real paths decide, so symlinks and bind mounts change nothing.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ExitCode, ValidationError } from '../../../../src/errors/index.js';
import { specFromFlags } from '../../../../src/cli/machine-options.js';
import { checkVolumes, type HostVolume } from '../../../../src/vm/volumes/spec.js';

const tmp = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'smol-vol-policy-')));
const home = path.join(tmp, 'user', '.smol');
const assets = path.join(tmp, 'assets');
const mine = path.join(tmp, 'user', 'project');
for (const d of [path.join(home, 'machines', 'm1'), assets, mine]) fs.mkdirSync(d, { recursive: true });
const dirs = { home, assets };
const mounted: string[] = [];
afterAll(() => {
  for (const m of mounted) spawnSync('umount', [m]);
  fs.rmSync(tmp, { recursive: true, force: true });
});

const vol = (host: string, o: Partial<HostVolume> = {}): HostVolume => ({ host, guest: '/w', readonly: false, ...o });
function refusal(v: HostVolume): (ValidationError & { issues: { path: string; message: string }[] }) | null {
  try {
    checkVolumes([v], undefined, dirs);
    return null;
  } catch (e) {
    if (!(e instanceof ValidationError)) throw e;
    return e as ValidationError & { issues: { path: string; message: string }[] };
  }
}
const link = (name: string, to: string) => {
  const p = path.join(tmp, name);
  fs.symlinkSync(to, p);
  return p;
};

describe('host paths -v refuses', () => {
  it.each([
    ['/proc', /is \/proc, the host kernel's process and settings interface.*core_pattern/],
    ['/proc/sys/kernel', /inside \/proc/],
    ['/sys', /is \/sys/],
    ['/sys/kernel', /inside \/sys/],
    ['/dev', /is \/dev, the host's device nodes/],
    ['/dev/shm', /inside \/dev/],
  ])('%s (read-only too): a kernel interface', (p, why) => {
    for (const readonly of [false, true]) {
      const e = refusal(vol(p, { readonly }));
      expect(e?.exitCode).toBe(ExitCode.invalidInput);
      expect(e?.issues[0].path).toBe(`-v ${p}:/w${readonly ? ':ro' : ''}`);
      expect(e?.issues[0].message).toMatch(why);
      expect(e?.hint).toMatch(/--allow-unsafe-volume.*docs\/volumes\.md/);
    }
  });

  it('a symlink to /proc is judged by what it names', () => {
    const l = link('to-proc', '/proc/sys');
    expect(refusal(vol(l))?.issues[0].message).toBe(`host path ${l} is refused: it is inside /proc, the host kernel's process and settings interface: a guest could change host sysctls (kernel.core_pattern runs a program as host root)`.replace(`${l} is`, `${l} (really /proc/sys) is`));
  });

  it.skipIf(process.getuid?.() !== 0)('a bind mount of /proc/sys elsewhere is still procfs', () => {
    const m = path.join(tmp, 'bound');
    fs.mkdirSync(m);
    expect(spawnSync('mount', ['--bind', '/proc/sys', m]).status).toBe(0);
    mounted.push(m);
    expect(refusal(vol(m))?.issues[0].message).toMatch(/on a procfs filesystem/);
  });

  it('smol\'s home, anything in it, and anything above it, in either mode', () => {
    for (const [p, what] of [[home, /is smol's home/], [path.join(home, 'machines', 'm1'), /is inside smol's home/], [path.dirname(home), /contains smol's home/]] as const) {
      expect(refusal(vol(p, { readonly: true }))?.issues[0].message).toMatch(new RegExp(`${what.source} \\(SMOL_HOME\\), ${home}: a guest could read every machine's disk`));
      expect(refusal(vol(p))?.issues[0].message).toMatch(/a guest could rewrite smol's database, machine disks, kernel and images/);
    }
    // through a symlink to its parent
    expect(refusal(vol(link('to-user', path.join(tmp, 'user'))))?.issues[0].message).toMatch(/\(really .*\/user\) is refused: it contains smol's home/);
  });

  it('smol\'s shared assets, inside and above', () => {
    expect(refusal(vol(assets))?.issues[0].message).toMatch(/is smol's shared assets \(SMOL_ASSETS\)/);
    expect(refusal(vol(tmp, { readonly: true }))?.issues[0].message).toMatch(/contains smol's home|contains smol's shared assets/);
  });

  it('/ read-write; / read-only as well, since it holds smol\'s home', () => {
    expect(refusal(vol('/'))?.issues[0].message).toMatch(/it is the host's root directory, read-write: a guest could rewrite any host file/);
    expect(refusal(vol('/', { readonly: true }))?.issues[0].message).toMatch(/contains smol's home/);
  });

  it('a directory of the user\'s own beside the home is shared; every refusal is listed at once', () => {
    expect(refusal(vol(mine))).toBeNull();
    expect(refusal(vol(path.join(tmp, 'user', 'project'), { readonly: true }))).toBeNull();
    let e: unknown;
    try {
      checkVolumes([vol('/proc'), vol(mine, { guest: '/m' }), vol(home, { guest: '/h' })], undefined, dirs);
    } catch (err) {
      e = err;
    }
    expect((e as { issues: { path: string }[] }).issues.map((i) => i.path)).toEqual(['-v /proc:/w', `-v ${home}:/h`]);
  });

  it('a volume marked unsafe (--allow-unsafe-volume) is shared as asked', () => {
    expect(refusal(vol('/proc', { unsafe: true }))).toBeNull();
    expect(refusal(vol(home, { unsafe: true }))).toBeNull();
  });
});

describe('--allow-unsafe-volume', () => {
  it('marks the -v flags only, never a Smolfile\'s volumes', () => {
    const sf = path.join(tmp, 'Smolfile');
    fs.writeFileSync(sf, `volumes:\n  - host: ${mine}\n    guest: /m\n`);
    const old = { home: process.env.SMOL_HOME, assets: process.env.SMOL_ASSETS };
    process.env.SMOL_HOME = home;
    process.env.SMOL_ASSETS = assets;
    try {
      const spec = specFromFlags({ smolfile: sf, volume: ['/sys:/s:ro'], allowUnsafeVolume: true });
      expect(spec.volumes).toEqual([{ host: mine, guest: '/m', readonly: false }, { host: '/sys', guest: '/s', readonly: true, unsafe: true }]);
      // without it, the same flags are refused before anything is made
      expect(() => specFromFlags({ smolfile: sf, volume: ['/sys:/s:ro'] })).toThrow(/refused volume/);
      // and a Smolfile cannot grant itself the exemption
      fs.writeFileSync(sf, `volumes:\n  - {host: /sys, guest: /s, unsafe: true}\n`);
      expect(() => specFromFlags({ smolfile: sf, allowUnsafeVolume: true })).toThrow(expect.objectContaining({ issues: [expect.objectContaining({ message: expect.stringMatching(/unknown key/) })] }));
      fs.writeFileSync(sf, `volumes:\n  - {host: /sys, guest: /s}\n`);
      expect(() => specFromFlags({ smolfile: sf, allowUnsafeVolume: true }))
        .toThrow(expect.objectContaining({ issues: [{ path: `${sf} volumes[0]`, message: expect.stringMatching(/^host path \/sys is refused: it is \/sys/) }] }));
    } finally {
      for (const [k, v] of [['SMOL_HOME', old.home], ['SMOL_ASSETS', old.assets]] as const) if (v === undefined) delete process.env[k]; else process.env[k] = v;
    }
  });
});
