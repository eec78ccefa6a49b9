/**
 * What `smol doctor` checks and `smol setup` does, as plain functions (the CLI only renders them).
 * Each check says what is wrong and the one thing to do about it.
 */
import { constants } from 'node:fs';
import { access, mkdir, statfs } from 'node:fs/promises';
import { run, which } from '../../util/exec.js';
import { buildPaths } from '../../util/paths.js';
import { PrerequisiteError } from '../../errors/index.js';
import { detectHostTscKhz } from '../kernel/tsc.js';
import { ensureKernel, findKernel } from '../kernel/index.js';
import { ensureInitramfs } from '../image/initramfs.js';
import { resolveImage } from '../image/resolve.js';
import { BUSYBOX } from '../image/tree.js';
import { findQemu, kvmUsable, vhostVsockAvailable } from './detect.js';
import { kvmBoots, type ProbeResult } from './kvm-probe.js';
import { FSGUARD, VIRTIOFSD } from '../volumes/virtiofsd.js';
import { CONSOLE_KEEPER } from './console-keeper.js';
import { DATA_DIR_MIN_FREE_BYTES } from '../limits.js';

export type CheckStatus = 'ok' | 'warn' | 'missing';
export interface Check { name: string; status: CheckStatus; required: boolean; detail: string; fix?: string }

const apt = (pkgs: string) => `sudo apt-get install ${pkgs} (or run \`npm run setup\`)`;

/** Host tools smol runs, by Debian package. */
const TOOLS: { bin: string; pkg: string; why: string }[] = [
  { bin: 'qemu-img', pkg: 'qemu-utils', why: 'disk images and overlays' },
  { bin: 'mkfs.ext4', pkg: 'e2fsprogs', why: 'root disks' },
  { bin: 'cpio', pkg: 'cpio', why: 'the initramfs' },
  { bin: 'lz4', pkg: 'lz4', why: 'unpacking the guest kernel' },
  { bin: 'depmod', pkg: 'kmod', why: 'indexing guest kernel modules' },
];

/** Optional: only --net and --allow machines need them (published ports alone do not). */
const NET_TOOLS: { bin: string; pkg: string; why: string }[] = [
  { bin: 'ip', pkg: 'iproute2', why: 'network namespaces' },
  { bin: 'nft', pkg: 'nftables', why: 'the egress policy' },
  { bin: 'dnsmasq', pkg: 'dnsmasq-base', why: 'the filtering resolver' },
  { bin: 'tcpdump', pkg: 'tcpdump', why: 'the denial log' },
  { bin: 'socat', pkg: 'socat', why: 'published ports and host:PORT under --net' },
];

export async function runChecks(home: string): Promise<Check[]> {
  const checks: Check[] = [];
  const qemu = await findQemu();
  checks.push(qemu
    ? { name: 'qemu-system-x86_64', status: 'ok', required: true, detail: `${qemu.version} (${qemu.path})` }
    : { name: 'qemu-system-x86_64', status: 'missing', required: true, detail: 'not found on PATH', fix: apt('qemu-system-x86') });
  for (const t of TOOLS) {
    const p = await which(t.bin);
    checks.push(p ? { name: t.bin, status: 'ok', required: true, detail: p } : { name: t.bin, status: 'missing', required: true, detail: `not found (needed for ${t.why})`, fix: apt(t.pkg) });
  }
  for (const t of NET_TOOLS) {
    const p = (await which(t.bin)) ?? (await which(`/usr/sbin/${t.bin}`)) ?? (await which(`/sbin/${t.bin}`));
    checks.push(p ? { name: t.bin, status: 'ok', required: false, detail: p } : { name: t.bin, status: 'warn', required: false, detail: `not found (--net and --allow need it for ${t.why})`, fix: apt(t.pkg) });
  }
  checks.push(await busyboxCheck());
  checks.push(await virtiofsdCheck());
  const kernel = await findKernel(home);
  checks.push(kernel
    ? { name: 'guest kernel', status: 'ok', required: true, detail: `${kernel.release} (${kernel.packageVersion})` }
    : { name: 'guest kernel', status: 'missing', required: true, detail: `not in ${home}/kernel`, fix: 'smol setup' });
  const agent = await access(buildPaths.agent, constants.X_OK).then(() => true, () => false);
  checks.push(agent
    ? { name: 'guest agent', status: 'ok', required: true, detail: buildPaths.agent }
    : { name: 'guest agent', status: 'missing', required: true, detail: `${buildPaths.agent} not built`, fix: 'npm run build (needs gcc, make, libc6-dev)' });
  // host-side helpers from host/: every boot's console goes through the keeper; volumes need the guard
  for (const h of [
    { name: 'console keeper', file: CONSOLE_KEEPER, required: true, why: 'every machine\'s console log (bounded on disk)' },
    { name: 'volume guard', file: FSGUARD, required: false, why: '-v volumes (virtiofsd under its seccomp filter)' },
  ]) {
    const ok = await access(h.file, constants.X_OK).then(() => true, () => false);
    checks.push(ok
      ? { name: h.name, status: 'ok', required: h.required, detail: h.file }
      : { name: h.name, status: h.required ? 'missing' : 'warn', required: h.required, detail: `${h.file} not built: needed for ${h.why}`, fix: 'npm run build (needs gcc, make, libc6-dev)' });
  }
  const dev = await kvmUsable();
  const kvm: ProbeResult = dev.ok && qemu && kernel ? await kvmBoots(qemu.path, kernel.vmlinux) : dev;
  checks.push(kvm.ok
    ? { name: 'acceleration', status: 'ok', required: false, detail: `KVM (/dev/kvm read-write${kvm.ms !== undefined ? `, a guest kernel started in ${kvm.ms} ms` : ''})` }
    : { name: 'acceleration', status: 'warn', required: false, detail: `TCG emulation: ${kvm.reason}`, fix: dev.ok ? 'KVM is present but does not run guests here (often nested virtualisation); SMOL_ACCEL=kvm forces it' : 'for speed, run on a host with KVM and add yourself to the kvm group' });
  if (!kvm.ok) {
    const tsc = await detectHostTscKhz();
    checks.push(tsc
      ? { name: 'host TSC', status: 'ok', required: false, detail: `${tsc.khz} kHz (from ${tsc.source})` }
      : { name: 'host TSC', status: 'warn', required: false, detail: 'frequency unknown: TCG boots may hang at TSC calibration now and then', fix: 'run smol as root (dmesg) or on a kernel exposing tsc_freq_khz' });
  }
  const vsock = await vhostVsockAvailable();
  checks.push({ name: 'vhost-vsock', status: vsock ? 'ok' : 'warn', required: false, detail: vsock ? '/dev/vhost-vsock usable' : 'absent: the agent channel uses virtio-serial (works everywhere)', fix: vsock ? undefined : 'modprobe vhost_vsock (optional)' });
  checks.push(await dataDirCheck(home));
  return checks;
}

/** Volumes only: a machine without them never starts virtiofsd, so its absence is a warning. */
async function virtiofsdCheck(): Promise<Check> {
  const ok = await access(VIRTIOFSD, constants.X_OK).then(() => true, () => false);
  const unshare = await which('unshare');
  if (!ok) return { name: 'virtiofsd', status: 'warn', required: false, detail: `${VIRTIOFSD} not found: volumes (-v) cannot be used`, fix: apt('qemu-system-common') };
  if (!unshare) return { name: 'virtiofsd', status: 'warn', required: false, detail: 'unshare not found: volumes (-v) cannot be used', fix: apt('util-linux') };
  return { name: 'virtiofsd', status: 'ok', required: false, detail: `${VIRTIOFSD} (volumes)` };
}

async function busyboxCheck(): Promise<Check> {
  const r = await run('file', ['-L', BUSYBOX], { allowFailure: true }).catch(() => null);
  const exists = await access(BUSYBOX, constants.X_OK).then(() => true, () => false);
  if (!exists) return { name: 'busybox-static', status: 'missing', required: true, detail: `${BUSYBOX} not found`, fix: apt('busybox-static') };
  // `file` may be absent; a dynamically linked busybox would not run in the initramfs, which has no libc
  if (r && r.exitCode === 0 && !/statically linked|static-pie/.test(r.stdout)) {
    return { name: 'busybox-static', status: 'missing', required: true, detail: `${BUSYBOX} is dynamically linked`, fix: apt('busybox-static') };
  }
  return { name: 'busybox-static', status: 'ok', required: true, detail: BUSYBOX };
}

async function dataDirCheck(home: string): Promise<Check> {
  try {
    await mkdir(home, { recursive: true });
    await access(home, constants.W_OK);
    const s = await statfs(home);
    const free = s.bavail * s.bsize;
    const gib = (free / 1024 ** 3).toFixed(1);
    return free < DATA_DIR_MIN_FREE_BYTES
      ? { name: 'data dir', status: 'warn', required: false, detail: `${home}: only ${gib} GiB free`, fix: 'free space or set SMOL_HOME to a larger disk' }
      : { name: 'data dir', status: 'ok', required: true, detail: `${home} (${gib} GiB free)` };
  } catch (e) {
    return { name: 'data dir', status: 'missing', required: true, detail: `${home} is not writable (${(e as NodeJS.ErrnoException).code})`, fix: 'set SMOL_HOME to a writable directory' };
  }
}

export interface SetupStep { step: string; result: string; ms: number }

/**
 * Make this host ready to boot machines: check tools, fetch the kernel, build the initramfs and the
 * default disk. Idempotent; a second run only re-hashes inputs.
 */
export async function runSetup(home: string, opts: { refresh?: boolean; log?: (line: string) => void } = {}): Promise<SetupStep[]> {
  const steps: SetupStep[] = [];
  const timed = async <T>(step: string, f: () => Promise<T>, describe: (v: T) => string) => {
    const t0 = performance.now();
    const v = await f();
    steps.push({ step, result: describe(v), ms: Math.round(performance.now() - t0) });
    opts.log?.(`${step}: ${steps[steps.length - 1].result}`);
    return v;
  };
  const missing = (await runChecks(home)).filter((c) => c.required && c.status === 'missing' && c.name !== 'guest kernel' && c.name !== 'guest agent');
  if (missing.length) {
    throw new PrerequisiteError(`setup failed: missing ${missing.map((m) => m.name).join(', ')}`, { hint: missing.map((m) => `${m.name}: ${m.fix}`).join('\n') });
  }
  steps.push({ step: 'prerequisites', result: 'QEMU, qemu-img, busybox-static, e2fsprogs, cpio, lz4, kmod present', ms: 0 });
  const before = await findKernel(home);
  const kernel = await timed('kernel', () => ensureKernel(home, { refresh: opts.refresh, log: opts.log }),
    (k) => `${k.release} (${before?.release === k.release ? 'already present' : `fetched ${k.package} ${k.packageVersion}`})`);
  await timed('initramfs', () => ensureInitramfs(home, kernel), (i) => `${i.path}${i.hasAgent ? '' : ' (WITHOUT the agent: run `npm run build`, then `smol setup` again)'}`);
  await timed('default disk', () => resolveImage('default', home, { log: opts.log }), (img) => img.basePath);
  return steps;
}
