import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runRoot } from '../../../src/vm/layout.js';
import { killQemuMentioning, qemuProcessesMentioning, scratchHome, sharedHome, smol } from '../../helpers/cli.js';

let home: string;
/** The shared directories, beside the home: smol refuses to share its own home (or anything in it). */
let data: string;
let share: string;
let ro: string;
let secret: string;
beforeAll(() => {
  home = scratchHome('volumes');
  data = scratchHome('volumes-data');
  share = path.join(data, 'share');
  ro = path.join(data, 'ro');
  secret = path.join(data, 'outside');
  for (const d of [share, ro, secret]) fs.mkdirSync(d);
  fs.symlinkSync('/sys', path.join(data, 'to-sys'));
  fs.mkdirSync(path.join(home, 'machines'), { recursive: true });
  fs.writeFileSync(path.join(share, 'hello.txt'), 'hello from the host\n');
  fs.writeFileSync(path.join(ro, 'r.txt'), 'read-only content\n');
  fs.writeFileSync(path.join(secret, 'secret.txt'), 'HOST-SECRET-7f3a\n');
});
afterAll(() => {
  killQemuMentioning(home);
  for (const pid of virtiofsdOfHome()) try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ }
  fs.rmSync(home, { recursive: true, force: true });
  fs.rmSync(data, { recursive: true, force: true });
});

/** virtiofsd processes whose socket path contains needle (sockets live in the home's run root, one dir per machine id). */
function virtiofsdMentioning(needle: string): number[] {
  const r = spawnSync('pgrep', ['-f', `virtiofsd --socket-path=[^ ]*${needle}`], { encoding: 'utf8' });
  return r.stdout.split('\n').filter(Boolean).map(Number);
}
const virtiofsdOf = (machineId: string) => virtiofsdMentioning(`/${machineId}/fs.sock`);
/** Any virtiofsd of a machine of this test's home. */
const virtiofsdOfHome = () => virtiofsdMentioning(runRoot(home));
const json = (s: string) => JSON.parse(s);
/** Machines' RAM files (other sessions' machines too: compare before and after). */
const shmFiles = () => fs.readdirSync('/dev/shm').filter((n) => /^smol-[0-9a-f]{12}\.mem$/.test(n));
const machines = () => (fs.existsSync(path.join(home, 'machines')) ? fs.readdirSync(path.join(home, 'machines')) : []);

describe('volumes over virtiofs (real QEMU and virtiofsd)', () => {
  it('a run reads a host file and writes one the host sees, owned as the guest wrote it (1:1 as root)', async () => {
    const shmBefore = shmFiles();
    const r = await smol(['run', '-v', `${share}:/work`, '--', 'sh', '-c',
      'cat /work/hello.txt; echo from-guest > /work/out.txt; mkdir -p /work/sub/deep && echo x > /work/sub/deep/f; echo owned > /work/u1234; chown 1234:2345 /work/u1234'], { home, env: { SMOL_VERBOSE: '1' } });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe('hello from the host\n');
    expect(fs.readFileSync(path.join(share, 'out.txt'), 'utf8')).toBe('from-guest\n');
    expect(fs.readFileSync(path.join(share, 'sub/deep/f'), 'utf8')).toBe('x\n');
    const st = fs.statSync(path.join(share, 'out.txt'));
    // virtiofsd runs as the invoking user: guest root's files are the invoker's (root here); other ids pass through
    expect([st.uid, st.gid]).toEqual([process.getuid!(), process.getgid!()]);
    if (process.getuid!() === 0) expect(fs.statSync(path.join(share, 'u1234'))).toMatchObject({ uid: 1234, gid: 2345 });
    // a throwaway run leaves no process, and no RAM file of its own in /dev/shm
    // a cold boot starts virtiofsd before QEMU; a restore of a boot snapshot (left by an earlier run on these
    // shared assets) starts it beside QEMU and says only that it mounts the volumes
    expect(r.stderr).toMatch(/starting virtiofsd|mounting the volumes/);
    expect(virtiofsdOfHome()).toEqual([]);
    expect(shmFiles().filter((n) => !shmBefore.includes(n))).toEqual([]);
    expect(machines()).toEqual([]);
  });

  it('sees a host change made while it runs', async () => {
    // the guest says it is up by creating a file the host waits for, then waits for the host's answer
    const w = smol(['run', '-v', `${share}:/work`, '--', 'sh', '-c', 'touch /work/ready; i=0; while [ ! -e /work/late.txt ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; cat /work/late.txt'], { home });
    const deadline = Date.now() + 80_000;
    while (!fs.existsSync(path.join(share, 'ready')) && Date.now() < deadline) await new Promise((res) => setTimeout(res, 50));
    // whole or not at all: the guest's loop may look between a plain write's create and its data
    fs.writeFileSync(path.join(share, 'late.tmp'), 'appeared later\n');
    fs.renameSync(path.join(share, 'late.tmp'), path.join(share, 'late.txt'));
    const done = await w;
    expect(done.code, done.stderr).toBe(0);
    expect(done.stdout).toBe('appeared later\n');
  });

  it(':ro is enforced on the host side: writes fail even after the guest remounts read-write', async () => {
    // nested, inner first on the command line: the outer one still mounts first
    const r = await smol(['run', '-v', `${ro}:/work/ro:ro`, '-v', `${share}:/work`, '--', 'sh', '-c', [
      'cat /work/ro/r.txt',
      'echo a > /work/ro/a 2>/dev/null && echo WROTE-a',
      'mount -o remount,rw /work/ro && echo remounted',
      'echo b > /work/ro/b 2>/dev/null && echo WROTE-b',
      'rm -f /work/ro/r.txt 2>/dev/null; touch /work/ro/r.txt 2>/dev/null && echo WROTE-touch',
      // the share itself, where every volume sits, is read-only too
      'mount -o remount,rw /run/smol/vol; echo c > /run/smol/vol/0/c 2>/dev/null && echo WROTE-c',
      'echo d > /run/smol/vol/d 2>/dev/null && echo WROTE-d',
      'echo ok > /work/rw.txt && echo rw-ok',
    ].join('; ')], { home });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe('read-only content\nremounted\nrw-ok\n');
    expect(fs.readdirSync(ro)).toEqual(['r.txt']);
    // the inner mount point was made in the outer volume, on the host too (as Docker does), and stays empty
    expect(fs.readdirSync(path.join(share, 'ro'))).toEqual([]);
    expect(fs.readFileSync(path.join(ro, 'r.txt'), 'utf8')).toBe('read-only content\n');
  });

  it('a guest root cannot leave a setuid/setgid file or a device node on the host through a read-write share', async () => {
    // guest root, as an attacker would: chmod its own file 4755/2755, create one with the bits, mknod b and c
    const r = await smol(['run', '-v', `${share}:/work`, '--', 'sh', '-c', [
      'cp /bin/busybox /work/suid; chmod 4755 /work/suid; echo chmod-suid=$?',
      'echo x > /work/sgid; chmod 2755 /work/sgid; echo chmod-sgid=$?',
      'mkdir /work/gdir; chmod g+s /work/gdir; echo chmod-gdir=$?',
      // busybox cp creates its copy with the source's mode: open(O_CREAT, 04755) through FUSE_CREATE
      'cp /bin/busybox /tmp/s && chmod 4755 /tmp/s && cp /tmp/s /work/installed; echo create=$?',
      'mknod /work/blk b 254 0; echo mknod-b=$?',
      'mknod /work/chr c 1 3; echo mknod-c=$?',
      'mkfifo /work/fifo; echo mkfifo=$?',
      // and in the guest a share's setuid file grants nothing: the mount is nosuid,nodev
      'awk \'$2 == "/work" { print $4 }\' /proc/mounts | tr , "\\n" | grep -x "nosuid\\|nodev"',
    ].join('; ')], { home });
    expect(r.code, r.stderr).toBe(0);
    // the guest is told: each bit-setting call fails (EPERM), as does mknod of a device; a FIFO is allowed
    expect(r.stdout).toBe('chmod-suid=1\nchmod-sgid=1\nchmod-gdir=1\ncreate=1\nmknod-b=1\nmknod-c=1\nmkfifo=0\nnosuid\nnodev\n');
    for (const n of ['suid', 'sgid', 'gdir', 'installed']) {
      const p = path.join(share, n);
      if (fs.existsSync(p)) expect((fs.statSync(p).mode & 0o6000).toString(8), n).toBe('0');
    }
    for (const n of ['blk', 'chr']) expect(fs.existsSync(path.join(share, n)), n).toBe(false);
    expect(fs.statSync(path.join(share, 'fifo')).isFIFO()).toBe(true);
    for (const n of ['suid', 'sgid', 'gdir', 'installed', 'fifo']) fs.rmSync(path.join(share, n), { recursive: true, force: true });
  });

  it('a symlink in the share that points outside it does not reach the host\'s files', async () => {
    fs.symlinkSync(secret, path.join(share, 'abs-link'));
    fs.symlinkSync(path.join(secret, 'secret.txt'), path.join(share, 'abs-file-link'));
    fs.symlinkSync(path.relative(share, secret), path.join(share, 'rel-link'));
    const r = await smol(['run', '-v', `${share}:/work`, '--', 'sh', '-c',
      'readlink /work/abs-link; cat /work/abs-link/secret.txt /work/abs-file-link /work/rel-link/secret.txt /work/../outside/secret.txt; ls /work/rel-link/ 2>&1; true'], { home });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.split('\n')[0]).toBe(secret); // the link itself is visible, as the host has it
    expect(r.stdout + r.stderr).not.toContain('HOST-SECRET');
    expect(r.stderr).toMatch(/No such file or directory/);
  });

  // concurrently: each is a few CLI starts refused before anything is made (service.create checks volumes first)
  it.concurrent.each([
    ['a missing host path', ['-v', '/nonexistent/smol-vol:/work'], 66, /volume host path not found: \/nonexistent\/smol-vol/],
    ['a relative guest path', ['-v', '@SHARE:work'], 65, /-v: guest path "work" must be absolute/],
    ['two volumes on one guest path', ['-v', '@SHARE:/w', '-v', '@RO:/w/'], 65, /guest path \/w is already used by -v/],
    ['a volume on /', ['-v', '@SHARE:/'], 65, /cannot be mounted on \//],
    ['a host path that is a file', ['-v', '@FILE:/w'], 65, /is not a directory/],
    ['volumes on a forkable machine', ['-v', '@SHARE:/w', '--forkable'], 64, /volumes cannot be forkable/],
    // host paths smol will not share (volumes/host-policy.ts): what, why, and the way out
    ['/proc', ['-v', '/proc:/p'], 65, /-v \/proc:\/p: host path \/proc is refused: it is \/proc, the host kernel's .*core_pattern.*\n.*--allow-unsafe-volume/s],
    ['a symlink to /sys', ['-v', '@TOSYS:/s:ro'], 65, /\(really \/sys\) is refused/],
    ['smol\'s own home, even read-only', ['-v', '@HOME/machines:/m:ro'], 65, /is inside smol's home \(SMOL_HOME\).*read every machine's disk/],
    ['/ read-write', ['-v', '/:/host'], 65, /the host's root directory, read-write/],
  ])('refuses %s with a clear error and creates nothing', async (_what, flags, code, msg) => {
    const sub = (a: string) => a.replace('@SHARE', share).replace('@RO', ro).replace('@FILE', path.join(share, 'hello.txt'))
      .replace('@TOSYS', path.join(data, 'to-sys')).replace('@HOME', home);
    // '@' marks the placeholders: a temp dir's random name may hold RO or HOME itself (it once did)
    const cmds = [['run', ...flags.map(sub), '--', 'true'], ['machine', 'create', 'bad', ...flags.map(sub)]];
    for (const r of await Promise.all(cmds.map((cmd) => smol(cmd, { home })))) {
      expect(r.code, r.stderr).toBe(code);
      expect(r.stderr).toMatch(msg);
    }
    expect(json((await smol(['machine', 'ls', '--json'], { home })).stdout)).toEqual([]);
    expect(machines()).toEqual([]);
    expect(virtiofsdOfHome()).toEqual([]);
  });

  it('checks again at start: a host path a guest turned into a symlink to /proc since create is refused, nothing boots', async () => {
    // what a guest with a read-write share of the parent could leave behind for the next start
    const target = path.join(data, 'later');
    fs.mkdirSync(path.join(data, 'real-later'));
    fs.symlinkSync(path.join(data, 'real-later'), target);
    expect((await smol(['machine', 'create', 'sw', '-v', `${target}:/l`], { home })).code).toBe(0);
    fs.unlinkSync(target);
    fs.symlinkSync('/proc', target);
    const r = await smol(['machine', 'start', 'sw'], { home });
    expect(r.code, r.stderr).toBe(65);
    expect(r.stderr).toMatch(/host path .*later \(really \/proc\) is refused/);
    expect(json((await smol(['machine', 'status', 'sw', '--json'], { home })).stdout).state).toBe('stopped');
    expect(qemuProcessesMentioning(home)).toEqual([]);
    expect(virtiofsdOfHome()).toEqual([]);
    expect((await smol(['machine', 'rm', '-f', 'sw'], { home })).code).toBe(0);
  });

  it('without virtiofsd: exit 69 naming the fix, nothing left behind; doctor warns', async () => {
    const env = { SMOL_VIRTIOFSD: path.join(home, 'no-virtiofsd') };
    const r = await smol(['run', '-v', `${share}:/work`, '--', 'true'], { home, env });
    expect(r.code, r.stderr).toBe(69);
    expect(r.stderr).toMatch(/volumes need virtiofsd.*\n.*qemu-system-common/s);
    expect(machines()).toEqual([]);
    const d = json((await smol(['doctor', '--json'], { home, env })).stdout);
    expect(d.checks.find((c: { name: string }) => c.name === 'virtiofsd')).toMatchObject({ status: 'warn', required: false });
  });

  it('a persistent machine keeps its Smolfile volume (relative to the Smolfile) across stop and start; virtiofsd goes with QEMU', async () => {
    const proj = path.join(data, 'proj');
    fs.mkdirSync(path.join(proj, 'src'), { recursive: true });
    fs.writeFileSync(path.join(proj, 'src', 'main.txt'), 'v1\n');
    fs.writeFileSync(path.join(proj, 'Smolfile'), 'volumes:\n  - host: ./src\n    guest: /work\n  - host: ../ro\n    guest: /opt/ro\n    readonly: true\n');
    // a directory in smol's home, shared only because the user says so; the machine keeps that across starts
    const inHome = path.join(home, 'granted');
    fs.mkdirSync(inHome);
    fs.writeFileSync(path.join(inHome, 'g.txt'), 'granted\n');
    const created = await smol(['machine', 'create', 'pv', '-s', path.join(proj, 'Smolfile'), '-v', `${inHome}:/g:ro`, '--allow-unsafe-volume', '--json'], { home });
    expect(created.code, created.stderr).toBe(0);
    const status = json((await smol(['machine', 'status', 'pv', '--json'], { home })).stdout);
    expect(status.volumes).toEqual([{ host: path.join(proj, 'src'), guest: '/work', readonly: false }, { host: ro, guest: '/opt/ro', readonly: true },
      { host: inHome, guest: '/g', readonly: true, unsafe: true }]);
    const text = (await smol(['machine', 'status', 'pv'], { home })).stdout;
    expect(text).toMatch(/^volumes +/m);
    expect(text).toContain(` ${path.join(proj, 'src')}:/work ${ro}:/opt/ro:ro ${inHome}:/g:ro\n`);
    expect(text).not.toContain('[object Object]');
    const id = status.id as string;
    expect((await smol(['machine', 'start', 'pv'], { home })).code).toBe(0);
    expect(virtiofsdOf(id).length).toBeGreaterThan(0);
    expect(virtiofsdOfHome()).toEqual(expect.arrayContaining(virtiofsdOf(id))); // the home-wide check sees it too
    let r = await smol(['machine', 'exec', 'pv', '--', 'sh', '-c', 'cat /work/main.txt /opt/ro/r.txt; echo v2 >> /work/main.txt; echo x > /opt/ro/x 2>/dev/null || echo ro-refused'], { home });
    expect(r.stdout).toBe('v1\nread-only content\nro-refused\n');
    expect(fs.readFileSync(path.join(proj, 'src', 'main.txt'), 'utf8')).toBe('v1\nv2\n');
    expect((await smol(['machine', 'stop', 'pv'], { home })).code).toBe(0);
    expect(virtiofsdOf(id)).toEqual([]);
    fs.writeFileSync(path.join(proj, 'src', 'while-stopped.txt'), 'host wrote this while it was stopped\n');
    expect((await smol(['machine', 'start', 'pv'], { home })).code).toBe(0);
    r = await smol(['machine', 'exec', 'pv', '--', 'sh', '-c', 'cat /work/main.txt /work/while-stopped.txt /g/g.txt'], { home });
    expect(r.stdout).toBe('v1\nv2\nhost wrote this while it was stopped\ngranted\n');
    // kill -9 its QEMU: virtiofsd must not outlive it, and ls reports the crash
    const pid = json((await smol(['machine', 'status', 'pv', '--json'], { home })).stdout).pid as number;
    process.kill(pid, 'SIGKILL');
    const ls = json((await smol(['machine', 'ls', '--json'], { home })).stdout);
    expect(ls).toMatchObject([{ name: 'pv', state: 'crashed' }]);
    const deadline = Date.now() + 5_000;
    while (virtiofsdOf(id).length && Date.now() < deadline) await new Promise((res) => setTimeout(res, 100));
    expect(virtiofsdOf(id)).toEqual([]);
    // and it starts again after the crash
    expect((await smol(['machine', 'start', 'pv'], { home })).code).toBe(0);
    r = await smol(['machine', 'exec', 'pv', '--', 'cat', '/work/main.txt'], { home });
    expect(r.stdout).toBe('v1\nv2\n');
    expect((await smol(['machine', 'rm', '-f', 'pv'], { home })).code).toBe(0);
    expect(virtiofsdOf(id)).toEqual([]);
    expect(qemuProcessesMentioning(home)).toEqual([]);
    // removing the machine never touches the shared directory
    expect(fs.readdirSync(path.join(proj, 'src')).sort()).toEqual(['main.txt', 'while-stopped.txt']);
  });

  it('boot snapshots: runs with volumes save and restore their own, the device plugged in after the restore', async () => {
    // its own assets dir (kernel and images linked from the shared one), so this test owns its snapshot cache
    const assets = path.join(home, 'assets');
    fs.mkdirSync(assets);
    for (const d of ['kernel', 'images']) fs.symlinkSync(path.join(sharedHome(), d), path.join(assets, d));
    const env = { SMOL_ASSETS: assets, SMOL_VERBOSE: '1' };
    const first = await smol(['run', '-v', `${share}:/work`, '--', 'cat', '/work/hello.txt'], { home, env });
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toBe('hello from the host\n');
    expect(first.stderr).toMatch(/saving the boot snapshot/);
    // written after the save: a restored run must see the host directory as it is now, not as it was
    fs.writeFileSync(path.join(share, 'after-save.txt'), 'written after the snapshot\n');
    // the agent mounts them (shims/agent/volumes.c): outer before inner, whatever the flag order, the inner
    // one's mount point made inside the outer share
    const vol = await smol(['run', '-v', `${ro}:/work/nested:ro`, '-v', `${share}:/work`, '-v', `${ro}:/ro:ro`, '--', 'sh', '-c',
      'cat /work/after-save.txt; echo restored > /work/from-restored.txt; mount -o remount,rw /ro 2>/dev/null; echo x > /ro/w 2>/dev/null || echo ro-refused; [ "$(ls /work/nested)" = "$(ls /ro)" ] && ! touch /work/nested/x 2>/dev/null && echo nested-ro; '
      + 'grep -q " /work/nested virtiofs ro,nosuid,nodev" /proc/mounts && echo nested-nosuid'], { home, env });
    expect(vol.code, vol.stderr).toBe(0);
    expect(fs.statSync(path.join(share, 'nested')).isDirectory()).toBe(true);
    expect(vol.stderr).toMatch(/restoring the boot snapshot/);
    expect(vol.stderr).toMatch(/mounting the volumes/);
    expect(vol.stdout).toBe('written after the snapshot\nro-refused\nnested-ro\nnested-nosuid\n');
    expect(fs.readFileSync(path.join(share, 'from-restored.txt'), 'utf8')).toBe('restored\n');
    expect(fs.existsSync(path.join(ro, 'w'))).toBe(false);
    // the volume snapshot is a separate one (its guest has a PCIe port): runs without volumes save their own
    const plain = await smol(['run', '--', 'true'], { home, env });
    expect(plain.stderr).toMatch(/saving the boot snapshot/);
    expect((await smol(['run', '--', 'true'], { home, env })).stderr).toMatch(/restoring the boot snapshot/);
    // SMOL_FS_HOTPLUG=0 mounts at boot, as before, and so cannot use a snapshot
    const cold = await smol(['run', '-v', `${share}:/work`, '--', 'cat', '/work/hello.txt'], { home, env: { ...env, SMOL_FS_HOTPLUG: '0' } });
    expect(cold.code, cold.stderr).toBe(0);
    expect(cold.stdout).toBe('hello from the host\n');
    expect(cold.stderr).not.toMatch(/boot snapshot|mounting the volumes/);
    expect(virtiofsdOfHome()).toEqual([]);
    expect(machines()).toEqual([]);
  });

  it('a machine with volumes is never started forkable; pack create omits its volumes with a message', async () => {
    expect((await smol(['machine', 'create', 'pk', '-v', `${share}:/work`], { home })).code).toBe(0);
    // starting it forkable is refused before anything runs (QEMU could not save its virtiofs device)
    const fk = await smol(['machine', 'start', 'pk', '--forkable'], { home });
    expect(fk.code, fk.stderr).toBe(64);
    expect(fk.stderr).toMatch(/volumes cannot be forkable/);
    expect(json((await smol(['machine', 'status', 'pk', '--json'], { home })).stdout).state).toBe('stopped');
    expect(qemuProcessesMentioning(home)).toEqual([]);
    const out = path.join(home, 'pk.smolmachine');
    const r = await smol(['pack', 'create', '--from-vm', 'pk', '-o', out], { home });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain(`volumes are not packed (${share}:/work)`);
    const inspect = await smol(['pack', 'inspect', out, '--json'], { home });
    expect(inspect.stdout).not.toContain(share);
    // and the artifact runs with a volume given again
    const run = await smol(['pack', 'run', out, '-v', `${share}:/data:ro`, '--', 'cat', '/data/hello.txt'], { home });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toBe('hello from the host\n');
    expect((await smol(['machine', 'rm', '-f', 'pk'], { home })).code).toBe(0);
  });
});
