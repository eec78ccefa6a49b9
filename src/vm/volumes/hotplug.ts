/**
 * Volumes on a throwaway run that restores its boot snapshot (docs/volumes.md). QEMU 7.2 cannot migrate a
 * vhost-user-fs device, so no snapshot can hold one. Such a run boots (or restores) a machine with an empty
 * PCIe root port instead, and once the guest runs the device is plugged into that port over QMP: a PCI
 * rescan in the guest finds it, virtio_pci binds it, and the agent mounts the tag where /init would have
 * mounted it at boot.
 * The port and the modules are part of the snapshot, so runs with and without volumes keep separate ones.
 */
import { BootError } from '../../errors/index.js';
import type { GuestChannel } from '../engine.js';
import { trace } from '../../util/trace.js';
import { HOTPLUG_PORT } from '../qemu/args.js';
import type { QmpClient } from '../qemu/qmp.js';
import type { SharedFs } from './virtiofsd.js';

const DEVICE = 'smolfs0';

/** Connects QEMU to virtiofsd's socket and plugs the device into the root port. */
export async function plugSharedFs(qmp: QmpClient, socketPath: string, tag: string): Promise<void> {
  await qmp.execute('chardev-add', { id: DEVICE, backend: { type: 'socket', data: { addr: { type: 'unix', data: { path: socketPath } }, server: false } } });
  await qmp.execute('device_add', { driver: 'vhost-user-fs-pci', id: DEVICE, chardev: DEVICE, tag, bus: HOTPLUG_PORT });
  trace('volumes: plugged');
}

/**
 * Guest readahead for the virtiofs mount at /run/smol/vol, in KiB. FUSE caps its bdi at 128 KiB, so a sequential
 * read went to virtiofsd in 128 KiB requests, one round trip each under TCG; with 1-8 MiB a 256 MiB buffered
 * read took 0.6-0.7x the time (docs/volumes.md). A shell line without a fork (/init runs it too).
 */
export const VIRTIOFS_READ_AHEAD_KB = 8192;
export const READ_AHEAD_LINE = `while read -r _ _ d _ p _; do [ "$p" = /run/smol/vol ] && { echo ${VIRTIOFS_READ_AHEAD_KB} >"/sys/class/bdi/$d/read_ahead_kb"; } 2>/dev/null; done </proc/self/mountinfo; true`;

/**
 * The guest side, as /init's smol.vols block does it at boot. The guest runs no hotplug driver for the port
 * (no pciehp: it would spend ~0.15 s in the link waits the PCIe spec asks of real hardware), and the port has
 * no power controller, so the plugged device is on the bus at once: a rescan finds it and virtio_pci binds
 * it before the write returns. Until then mount fails with EINVAL (no such tag), so it rescans and retries
 * 2,000 times 10 ms (20 s or more), a bound that only a stuck device reaches. busybox runs it: the image may have no mount(8) (a
 * disk image's root gets /.smol/busybox from /init). SMOL_PCI_RESCAN exists for the unit test only.
 */
export function mountScript(fs: Pick<SharedFs, 'tag' | 'mounts'>): string {
  const lines = [
    // a counter, not date(1): every process costs ~10 ms of a TCG guest, and this runs before the user's command
    'set -u', 'mkdir -p /run/smol/vol', 'n=0', 'rescan=${SMOL_PCI_RESCAN:-/sys/bus/pci/rescan}',
    `until echo 1 2>/dev/null >"$rescan"; mount -t virtiofs ${fs.tag} /run/smol/vol 2>/dev/null; do`,
    '  n=$((n + 1))',
    '  if [ "$n" -ge 2000 ]; then',
    '    echo "the virtiofs device did not appear within 20 s; kernel: $(dmesg | grep -iE "pci|virtio" | grep -v "tag <" | tail -n 2 | tr "\\n" " "); modules: $(cut -d" " -f1 /proc/modules | tr "\\n" " ")" >&2',
    '    exit 3',
    '  fi',
    '  sleep 0.01',
    'done',
    READ_AHEAD_LINE,
  ];
  for (const m of fs.mounts) {
    lines.push(`mkdir -p '${m.guest}' && mount --bind /run/smol/vol/${m.index} '${m.guest}' || { echo "cannot mount volume ${m.index} on ${m.guest}" >&2; exit 4; }`);
    if (m.readonly) lines.push(`mount -o remount,bind,ro '${m.guest}' || { echo "cannot make volume ${m.guest} read-only" >&2; exit 5; }`);
  }
  return lines.join('\n');
}

/**
 * Runs mountScript through the agent; a failure is a boot failure of the run, with the guest's reason. The
 * busybox is the initramfs's own on a diskless machine, else the copy /init puts in a disk image's root.
 */
export async function mountInGuest(ch: GuestChannel, fs: Pick<SharedFs, 'tag' | 'mounts'>, name: string, diskless: boolean): Promise<void> {
  const script = mountScript(fs);
  const h = await ch.exec({ argv: [diskless ? '/bin/busybox' : '/.smol/busybox', 'sh', '-c', script] });
  h.stdin.end();
  h.stdout.resume();
  const err: Buffer[] = [];
  h.stderr.on('data', (d: Buffer) => err.push(d));
  const code = (await h.exit).code;
  trace('volumes: mounted');
  if (code !== 0) {
    throw new BootError(`boot failed: the volumes of machine "${name}" could not be mounted after restore: ${Buffer.concat(err).toString().trim() || `exit ${code}`}`, {
      where: name, hint: 'Run with --cold-boot to mount them at boot instead, and report this with `smol machine logs`.',
    });
  }
}
