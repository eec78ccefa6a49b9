/**
 * One virtiofsd per machine, serving all of its volumes (docs/volumes.md). Debian's C virtiofsd (QEMU 7.2)
 * shares one directory and has no read-only option, so it runs in a private mount namespace of its own
 * (`unshare --mount`) whose only view of the host is a staging directory: each volume bind-mounted onto
 * stage/N, read-only volumes remounted `bind,ro`, the stage itself read-only. virtiofsd then sandboxes
 * itself into the stage (pivot_root), so guest writes to a read-only volume fail with EROFS on the host
 * side whatever the guest's mount flags say, and a symlink in a share resolves inside the guest, never to
 * the host's files. The binds are `nosuid,nodev`, and virtiofsd runs under smol-fsguard's seccomp filter
 * (host/fsguard), so a guest can never give a host file a setuid or setgid bit or make a device node
 * there. virtiofsd exits by itself when QEMU disconnects; smol also stops it with its machine and
 * `machine ls` sweeps one whose QEMU died.
 */
import fs from 'node:fs';
import path from 'node:path';
import { BootError, PrerequisiteError } from '../../errors/index.js';
import type { Volume } from '../../smolfile/schema.js';
import { idOf, type SmolDirs } from './host-policy.js';
import { hostVolumeProblem, refusedVolume, type HostVolume } from './spec.js';
import { spawnDaemon } from '../../util/exec.js';
import { buildPaths } from '../../util/paths.js';
import type { MachineLayout } from '../layout.js';
import { VIRTIOFSD_START_MS, VIRTIOFSD_STOP_MS } from '../limits.js';
import { isRunning, waitGone } from '../qemu/process.js';

export const VIRTIOFSD = process.env.SMOL_VIRTIOFSD ?? '/usr/lib/qemu/virtiofsd';
/** The seccomp wrapper virtiofsd always runs under (host/fsguard); never optional, so no override. */
export const FSGUARD = path.join(buildPaths.root, 'smol-fsguard');
/** The one virtiofs tag a machine's guest mounts; volume N is the stage's directory N. */
export const VIRTIOFS_TAG = 'smol';

/** What QEMU and the guest's /init need to know about a running virtiofsd. */
export interface SharedFs {
  socketPath: string;
  tag: string;
  mounts: { index: number; guest: string; readonly: boolean }[];
}

export interface VirtiofsdFiles { socket: string; stage: string; pidFile: string; log: string }

export const virtiofsdFiles = (layout: Pick<MachineLayout, 'dir' | 'runDir'>): VirtiofsdFiles => ({
  socket: path.join(layout.runDir, 'fs.sock'),
  stage: path.join(layout.runDir, 'vol'),
  pidFile: path.join(layout.dir, 'virtiofsd.pid'),
  log: path.join(layout.dir, 'virtiofsd.log'),
});

/**
 * Mounts exist only in the namespace unshare made (propagation private), so the host never sees a volume
 * under the stage: removing the stage can never reach the user's files.
 */
const STAGE_SCRIPT = `set -e
stage=$1; n=$2; shift 2
# the static busybox (a prerequisite already) where there is one: util-linux's dynamically linked mount(8)
# cost 16 ms more CPU for these five mounts, on a path every run with volumes waits for
b=; [ -x /bin/busybox ] && b=/bin/busybox
# virtiofsd keeps a pid lock in /run/virtiofsd, which only root could create: it gets a private /run
run=$($b readlink -f /var/run)
$b mount -t tmpfs -o size=1m,mode=755 smol-run "$run"
$b mkdir "$run/virtiofsd"
$b mount --bind "$stage" "$stage"
i=0
while [ "$i" -lt "$n" ]; do
  $b mount --bind "$1" "$stage/$i"
  # the directory smol checked, not one a symlink swapped in since (volumes/host-policy.ts)
  [ "$($b stat -c %d:%i "$stage/$i")" = "$3" ] || { echo "volume $1 changed while it was being shared" >&2; exit 1; }
  # the guest's kernel opens its own device for a device node in a share, never virtiofsd; nodev keeps that so
  o=remount,bind,nosuid,nodev; [ "$2" = ro ] && o=$o,ro
  $b mount -o "$o" "$stage/$i"
  shift 3; i=$((i+1))
done
$b mount -o remount,bind,ro,nosuid,nodev "$stage"
exec "$@"
`;

/** Start virtiofsd for these volumes; resolves once its socket accepts QEMU. */
export async function startVirtiofsd(layout: Pick<MachineLayout, 'dir' | 'runDir'>, volumes: readonly HostVolume[], dirs: SmolDirs, name?: string): Promise<SharedFs> {
  if (!fs.existsSync(VIRTIOFSD)) {
    throw new PrerequisiteError(`volumes need virtiofsd, and ${VIRTIOFSD} does not exist`, { where: name, hint: 'Install it: sudo apt-get install qemu-system-common (or run `npm run setup`); `smol doctor` checks it.' });
  }
  if (!fs.existsSync(FSGUARD)) {
    throw new PrerequisiteError(`volumes need smol-fsguard, and ${FSGUARD} does not exist`, { where: name, hint: 'Build it: npm run build (it needs gcc).' });
  }
  const triples: string[] = [];
  for (const v of volumes) {
    // a symlinked host path is shared as the directory it names, checked again here where it is resolved
    // for the mount, and its identity taken before the check: the mount must land on that very directory
    const real = fs.realpathSync(v.host);
    const id = idOf(real);
    const why = hostVolumeProblem({ ...v, host: real }, dirs);
    if (why) throw refusedVolume(v, why);
    triples.push(real, v.readonly ? 'ro' : 'rw', id ?? 'none');
  }
  const f = virtiofsdFiles(layout);
  await stopVirtiofsd(layout);
  fs.mkdirSync(layout.runDir, { recursive: true });
  fs.rmSync(f.socket, { force: true });
  fs.mkdirSync(f.stage, { recursive: true });
  volumes.forEach((_, i) => fs.mkdirSync(path.join(f.stage, String(i)), { recursive: true }));
  // modcaps and no_xattr are a second wall behind the filter: no CAP_MKNOD at all, no security.capability
  // xattr (file capabilities); each is 7.2's default or harmless to what a share holds
  const daemon = [FSGUARD, VIRTIOFSD, `--socket-path=${f.socket}`, '-o', `source=${f.stage}`, '-o', 'sandbox=namespace', '-o', 'cache=auto',
    '-o', 'modcaps=-mknod:-fsetid', '-o', 'no_xattr', '-o', 'no_posix_acl', '-o', 'log_level=warn'];
  // root shares with guest uids as they are; anyone else runs it as root of a user namespace mapped to them
  const unshare = process.getuid?.() === 0 ? ['--mount', '--propagation', 'private'] : ['--user', '--map-root-user', '--mount', '--propagation', 'private'];
  fs.writeFileSync(f.log, '');
  let pid: number;
  try {
    pid = spawnDaemon('unshare', [...unshare, '--', '/bin/sh', '-c', STAGE_SCRIPT, 'smol-volumes', f.stage, String(volumes.length), ...triples, ...daemon], { outFile: f.log });
  } catch (err) {
    if (!(err instanceof PrerequisiteError)) throw err; // the log file could not be opened: say that, as it is
    throw new BootError(`boot failed: virtiofsd did not start${name ? ` for machine "${name}"` : ''}: unshare could not be run`, { where: name, hint: 'Install util-linux (or run `npm run setup`).' });
  }
  fs.writeFileSync(f.pidFile, `${pid}\n`);
  const deadline = Date.now() + VIRTIOFSD_START_MS;
  while (!fs.existsSync(f.socket)) {
    if (!isRunning(pid, '') || Date.now() > deadline) {
      await stopVirtiofsd(layout);
      throw new BootError(`boot failed: virtiofsd exited before serving the volumes${name ? ` of machine "${name}"` : ''}: ${logTail(f.log)}`, { where: name, hint: `Its log: ${f.log}` });
    }
    await new Promise((r) => setTimeout(r, 5));
  }
  return { socketPath: f.socket, tag: VIRTIOFS_TAG, mounts: mountsOf(volumes) };
}

/** Stage directory N on each guest path, outer before inner: /work must be mounted before /work/cache is made inside it. */
export function mountsOf(volumes: readonly Volume[]): SharedFs['mounts'] {
  const depth = (p: string) => p.split('/').filter(Boolean).length;
  return volumes.map((v, index) => ({ index, guest: v.guest, readonly: v.readonly })).sort((a, b) => depth(a.guest) - depth(b.guest));
}

/** This machine's virtiofsd, if it still runs (a recycled pid is not: its command line names our socket). */
export function virtiofsdPid(layout: Pick<MachineLayout, 'dir' | 'runDir'>): number | null {
  const f = virtiofsdFiles(layout);
  try {
    const pid = Number.parseInt(fs.readFileSync(f.pidFile, 'utf8'), 10);
    if (!(pid > 1) || !isRunning(pid, '')) return null;
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(f.socket) ? pid : null;
  } catch {
    return null;
  }
}

/** Stop the machine's virtiofsd (and its sandboxed child) and remove its files. Safe to call when none runs. */
export async function stopVirtiofsd(layout: Pick<MachineLayout, 'dir' | 'runDir'>): Promise<void> {
  const f = virtiofsdFiles(layout);
  const pid = virtiofsdPid(layout);
  if (pid) {
    const kids = childrenOf(pid);
    // callers stop it once its QEMU is gone. It would exit by itself within ~50 ms of the hang-up, but its
    // writes are synchronous (each answered before the guest went on), so a kill loses nothing and saves
    // every run with volumes that wait
    try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ }
    await waitGone(pid, '', VIRTIOFSD_STOP_MS);
    // the sandboxed child dies with its parent (PDEATHSIG); make sure of it
    for (const k of kids) if (isRunning(k, 'virtiofsd')) try { process.kill(k, 'SIGKILL'); } catch { /* gone */ }
  }
  fs.rmSync(f.pidFile, { force: true });
  fs.rmSync(f.socket, { force: true });
  removeStage(f.stage);
}

/**
 * rmdir, never a recursive remove: the stage's directories are empty on the host (the bind mounts live in
 * virtiofsd's namespace only), and if that ever were not so, a recursive remove would delete the user's files.
 */
export function removeStage(stage: string): boolean {
  try {
    for (const n of fs.readdirSync(stage)) fs.rmdirSync(path.join(stage, n));
    fs.rmdirSync(stage);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ENOENT';
  }
}

function childrenOf(pid: number): number[] {
  try {
    return fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

function logTail(file: string): string {
  try {
    return fs.readFileSync(file, 'utf8').trim().split('\n').slice(-3).join(' ') || '(no output)';
  } catch {
    return '(no log)';
  }
}
