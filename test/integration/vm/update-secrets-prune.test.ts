/**
 * Daily verbs on real QEMU (TCG here): secrets that reach the guest command and nowhere else, machine update,
 * labels, and prune while clones of a forked machine run. One machine family keeps the boots few.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killQemuMentioning, qemuProcessesMentioning, scratchHome, sharedHome, smol } from '../../helpers/cli.js';

let home: string;
const marker = `smol-marker-${crypto.randomBytes(8).toString('hex')}`;
const fileMarker = `smol-filemarker-${crypto.randomBytes(8).toString('hex')}`;
let secretFile: string;
const withToken = { TOKEN: marker };

beforeAll(() => {
  home = scratchHome('daily');
  secretFile = path.join(home, 'key.pem');
  fs.writeFileSync(secretFile, fileMarker, { mode: 0o600 });
});
afterAll(() => {
  killQemuMentioning(home);
  // only this home's RAM files: other sessions' machines share /dev/shm
  const ls = (d: string) => (fs.existsSync(d) ? fs.readdirSync(d) : []);
  const ids = [...ls(path.join(home, 'machines')), ...ls(path.join(home, 'forks'))];
  for (const id of ls(path.join(home, 'machines'))) {
    try { ids.push(JSON.parse(fs.readFileSync(path.join(home, 'machines', id, 'spare.json'), 'utf8')).forkId); } catch { /* no spare */ }
  }
  for (const id of ids) for (const f of [`smol-${id}.mem`, `smol-fork-${id}.mem`]) fs.rmSync(path.join('/dev/shm', f), { force: true });
  fs.rmSync(home, { recursive: true, force: true });
});

const json = (s: string) => JSON.parse(s);
const expectCode = (r: { code: number | null; stderr: string }, code: number) => expect(r.code, r.stderr).toBe(code);
const snapshots = () => path.join(sharedHome(), 'cache', 'boot-snapshots');

/** Every regular file under dir (skipping the secret's own source file), by name, that holds either marker. */
function filesWithMarker(dir: string, skip: string[] = []): string[] {
  const hits: string[] = [];
  const walk = (p: string) => {
    let st: fs.Stats;
    try { st = fs.lstatSync(p); } catch { return; }
    if (st.isDirectory()) { for (const e of fs.readdirSync(p)) walk(path.join(p, e)); return; }
    if (!st.isFile() || skip.includes(p)) return;
    const b = fs.readFileSync(p);
    if (b.includes(marker) || b.includes(fileMarker)) hits.push(p);
  };
  walk(dir);
  return hits;
}

describe('secrets, update, labels and prune (real QEMU)', () => {
  it('smol run delivers --secret-env to the command and --secret-file to a 0400 file on tmpfs', async () => {
    const r = await smol(['run', '--secret-env', 'TOKEN', '--secret-file', `key=${secretFile}`, '--label', 'job=once', '--',
      'sh', '-c', 'echo "$TOKEN"; cat /run/secrets/key; echo; stat -c "%a %U" /run/secrets/key; awk \'$2=="/run"{print $3}\' /proc/mounts'], { home, env: withToken });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe(`${marker}\n${fileMarker}\n400 root\ntmpfs\n`);
    expect(r.stderr).not.toContain(marker);
    // the boot snapshot this (first) run saved was taken after boot and before the secrets were delivered
    expect(fs.existsSync(snapshots()) ? filesWithMarker(snapshots()) : []).toEqual([]);
  });

  it('a missing secret env var or file fails before anything starts (66), a directory is invalid (65)', async () => {
    const env = await smol(['run', '--secret-env', 'SMOL_NO_SUCH_VAR', '--', 'true'], { home });
    expect(env.code).toBe(66);
    expect(env.stderr).toMatch(/SMOL_NO_SUCH_VAR is not set in the host environment/);
    const file = await smol(['run', '--secret-file', `k=${path.join(home, 'nope')}`, '--', 'true'], { home });
    expect(file.code).toBe(66);
    const dir = await smol(['run', '--secret-file', `k=${home}`, '--', 'true'], { home });
    expect(dir.code).toBe(65);
    const bad = await smol(['run', '--secret-file', 'a/b=/etc/hostname', '--', 'true'], { home });
    expect(bad.code).toBe(65);
    expect(json((await smol(['machine', 'ls', '--json'], { home })).stdout)).toEqual([]);
    expect(qemuProcessesMentioning(home)).toEqual([]);
  });

  it('persistent machines: declared secrets reach each exec; status shows names only; update is refused while running', async () => {
    const c = await smol(['machine', 'create', 's1', '--secret-env', 'TOKEN', '--label', 'app=s', '--label', 'tier=web', '--mem', '256', '--start'], { home, env: withToken });
    expect(c.code, c.stderr).toBe(0);
    const e = await smol(['machine', 'exec', 's1', '--secret-file', `key=${secretFile}`, '--', 'sh', '-c', 'echo "$TOKEN"; cat /run/secrets/key'], { home, env: withToken });
    expect([e.code, e.stdout]).toEqual([0, `${marker}\n${fileMarker}`]);
    const missing = await smol(['machine', 'exec', 's1', '--', 'true'], { home, env: { TOKEN: undefined } });
    expect(missing.code).toBe(66);
    const st = await smol(['machine', 'status', 's1', '--json'], { home });
    expect(json(st.stdout)).toMatchObject({ labels: { app: 's', tier: 'web' }, secrets: { env: ['TOKEN'], files: [] } });
    expect(st.stdout).not.toContain(marker);
    const upd = await smol(['machine', 'update', 's1', '--cpus', '2'], { home });
    expect(upd.code).toBe(67);
    expect(upd.stderr).toMatch(/running.*must be stopped[\s\S]*smol machine stop s1/);
    // labels are bookkeeping: they change while it runs
    expectCode(await smol(['machine', 'update', 's1', '--unlabel', 'tier'], { home }), 0);
    expect(json((await smol(['machine', 'ls', '--json', '--filter', 'label=app=s'], { home })).stdout).map((m: { name: string; labels: object }) => [m.name, m.labels])).toEqual([['s1', { app: 's' }]]);
    expect(json((await smol(['machine', 'ls', '--json', '--filter', 'label=tier'], { home })).stdout)).toEqual([]);
  });

  it('refuses to fork or memory-pack a machine whose RAM received a secret since it started', async () => {
    expectCode(await smol(['machine', 'stop', 's1'], { home }), 0);
    expectCode(await smol(['machine', 'start', 's1', '--forkable'], { home }), 0);
    expectCode(await smol(['machine', 'exec', 's1', '--', 'true'], { home, env: withToken }), 0);
    const f = await smol(['fork', 's1'], { home });
    expect(f.code).toBe(67);
    expect(f.stderr).toMatch(/received a secret since it started[\s\S]*smol machine stop s1/);
    const p = await smol(['pack', 'create', '--from-vm', 's1', '--with-memory', '-o', path.join(home, 'm.smolmachine')], { home });
    expect(p.code).toBe(67);
    expect(fs.existsSync(path.join(home, 'm.smolmachine'))).toBe(false);
    expect(fs.existsSync(path.join(home, 'forks')) ? fs.readdirSync(path.join(home, 'forks')) : []).toEqual([]);
  });

  it('update changes a stopped machine for its next boot; bad input changes nothing', async () => {
    expectCode(await smol(['machine', 'stop', 's1'], { home }), 0);
    const before = json((await smol(['machine', 'status', 's1', '--json'], { home })).stdout);
    for (const [args, code] of [[['--mem', '1'], 65], [['--image', 'x'], 64], [['-p', 'notaport'], 65], [['-v', '/nonexistent-dir:/data'], 66], [[], 64]] as const) {
      const r = await smol(['machine', 'update', 's1', ...args], { home });
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(code);
    }
    const after = json((await smol(['machine', 'status', 's1', '--json'], { home })).stdout);
    expect({ ...after, usage: null }).toEqual({ ...before, usage: null });
    const u = await smol(['machine', 'update', 's1', '--cpus', '2', '--mem', '320', '-e', 'ROLE=updated', '--json'], { home });
    expect(u.code, u.stderr).toBe(0);
    expect(json(u.stdout)).toMatchObject({ cpus: 2, memoryMiB: 320, changed: ['cpus', 'memory', 'env'] });
  });

  it('a disk pack of a machine that held secrets carries none', async () => {
    const art = path.join(home, 's1.smolmachine');
    const r = await smol(['pack', 'create', '--from-vm', 's1', '-o', art], { home });
    expect(r.code, r.stderr).toBe(0);
    const b = fs.readFileSync(art);
    expect(b.includes(marker) || b.includes(fileMarker)).toBe(false);
  });

  let forkId = '';
  it('forks with labels after a restart; clones receive their own secrets; the fork point holds none', async () => {
    expectCode(await smol(['machine', 'start', 's1', '--forkable'], { home }), 0);
    const boot = await smol(['machine', 'exec', 's1', '--', 'sh', '-c', 'nproc; awk \'/MemTotal/{print int($2/1024)}\' /proc/meminfo; echo $ROLE'], { home, env: withToken });
    const [cpus, memMiB, role] = boot.stdout.trim().split('\n');
    expect([cpus, role]).toEqual(['2', 'updated']);
    expect(Number(memMiB)).toBeGreaterThan(256);
    // that exec delivered TOKEN again: restart so the fork point is clean
    expectCode(await smol(['machine', 'stop', 's1'], { home }), 0);
    expectCode(await smol(['machine', 'start', 's1', '--forkable'], { home }), 0);
    const f = await smol(['fork', 's1', '--count', '2', '--label', 'role=clone', '--json'], { home });
    expect(f.code, f.stderr).toBe(0);
    forkId = json(f.stdout).forkId;
    const clones = json((await smol(['machine', 'ls', '--json', '--filter', 'label=role=clone', '--filter', 'label=app=s'], { home })).stdout);
    expect(clones.map((m: { name: string }) => m.name).sort()).toEqual(['s1-1', 's1-2']);
    for (const m of ['s1-1', 's1-2']) {
      const r = await smol(['machine', 'exec', m, '--secret-file', `key=${secretFile}`, '--', 'sh', '-c', 'echo "$TOKEN"; cat /run/secrets/key'], { home, env: withToken });
      expect([r.code, r.stdout], r.stderr).toEqual([0, `${marker}\n${fileMarker}`]);
    }
    const template = path.join('/dev/shm', `smol-fork-${forkId}.mem`);
    expect(fs.existsSync(template)).toBe(true);
    expect(filesWithMarker(path.join(home, 'forks'))).toEqual([]);
    const t = fs.readFileSync(template);
    expect(t.includes(marker) || t.includes(fileMarker)).toBe(false);
  });

  it('prune keeps everything the family needs, removes leftovers, and the clones exec afterwards', async () => {
    // leftovers: a dead machine's directory, an extracted artifact no machine uses, every boot snapshot (aged)
    const dead = path.join(home, 'machines', 'deadbeef0001');
    fs.mkdirSync(dead);
    fs.writeFileSync(path.join(dead, 'disk.qcow2'), Buffer.alloc(64 * 1024, 1));
    expectCode(await smol(['machine', 'create', 'fromart', '--from', path.join(home, 's1.smolmachine')], { home }), 0);
    const cache = path.join(home, 'cache', 'artifacts');
    const [used] = fs.readdirSync(cache).filter((n) => /^[0-9a-f]+$/.test(n));
    const unused = path.join(cache, 'ab'.repeat(32));
    fs.mkdirSync(unused);
    fs.writeFileSync(path.join(unused, 'disk.qcow2'), Buffer.alloc(32 * 1024, 2));
    const old = new Date(Date.now() - 10 * 60_000);
    for (const p of [dead, unused, path.join(cache, used)]) fs.utimesSync(p, old, old);
    const snaps = fs.existsSync(snapshots()) ? fs.readdirSync(snapshots()).filter((n) => !n.startsWith('.')) : [];
    for (const s of snaps) fs.utimesSync(path.join(snapshots(), s, 'meta.json'), old, old);

    const dry = await smol(['prune', '--dry-run', '--json'], { home });
    expect(dry.code, dry.stderr).toBe(0);
    const d = json(dry.stdout);
    expect(d.dryRun).toBe(true);
    const names = (kind: string, s = d) => s.results.find((r: { kind: string }) => r.kind === kind).removed.map((i: { name: string }) => i.name).sort();
    expect(names('machines')).toEqual(['dir deadbeef0001']);
    expect(names('artifacts')).toEqual(['ab'.repeat(32)]);
    expect(names('boot-snapshots')).toEqual([...snaps].sort());
    expect(d.bytes).toBeGreaterThan(96 * 1024);
    expect(fs.existsSync(dead) && fs.existsSync(unused)).toBe(true);

    const real = json((await smol(['prune', '--json'], { home })).stdout);
    expect(names('machines', real)).toEqual(['dir deadbeef0001']);
    expect(fs.existsSync(dead) || fs.existsSync(unused)).toBe(false);
    expect(fs.existsSync(path.join(cache, used))).toBe(true); // fromart's disk sits on it
    expect(fs.existsSync(path.join('/dev/shm', `smol-fork-${forkId}.mem`))).toBe(true);
    for (const m of ['s1', 's1-1', 's1-2']) {
      const r = await smol(['machine', 'exec', m, '--', 'sh', '-c', 'echo ok > /root/after-prune; sync; cat /root/after-prune'], { home, env: withToken });
      expect([m, r.code, r.stdout]).toEqual([m, 0, 'ok\n']);
    }
    // once nothing uses it, pack prune removes the extracted artifact
    expectCode(await smol(['machine', 'rm', 'fromart'], { home }), 0);
    fs.utimesSync(path.join(cache, used), old, old);
    const pp = await smol(['pack', 'prune'], { home });
    expect(pp.stdout).toMatch(new RegExp(`artifacts: removed ${used} `));
    expect(fs.existsSync(path.join(cache, used))).toBe(false);
  });

  it('no secret value landed in the registry, the machines\' files or their logs', async () => {
    const logs = await smol(['machine', 'logs', 's1'], { home });
    expect(logs.stdout).not.toContain(marker);
    // the home: registry (db, wal), machine dirs (console and QEMU logs, disks, boot.json), forks, caches
    expect(filesWithMarker(home, [secretFile])).toEqual([]);
    expectCode(await smol(['machine', 'rm', '--force', '--cascade', 's1'], { home }), 0);
  });
});
