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
import { VOLUME_MOUNT_ATTEMPTS } from '../limits.js';
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
 * read took 0.6-0.7x the time (docs/volumes.md). /init runs the line, a shell loop without a fork, after its
 * mount at boot; after a restore the agent writes the same file (shims/agent/volumes.c).
 */
export const VIRTIOFS_READ_AHEAD_KB = 8192;
export const READ_AHEAD_LINE = `while read -r _ _ d _ p _; do [ "$p" = /run/smol/vol ] && { echo ${VIRTIOFS_READ_AHEAD_KB} >"/sys/class/bdi/$d/read_ahead_kb"; } 2>/dev/null; done </proc/self/mountinfo; true`;

/**
 * The guest side, as /init's smol.vols block does it at boot, done by the agent itself (CONFIGURE's volumes
 * key, shims/agent/volumes.c): a shell and its five mount and mkdir processes cost ~100 ms more in a guest
 * just restored, whose TCG translation cache is empty. The guest runs no hotplug driver for the port (no
 * pciehp: it would spend ~0.15 s in the link waits the PCIe spec asks of real hardware), and the port has no
 * power controller, so the plugged device is on the bus at once: a rescan finds it and virtio_pci binds it
 * before the write returns. Until then mount fails (no such tag), so the agent rescans and retries.
 * A failure is a boot failure of the run, with the guest's reason.
 */
export async function mountInGuest(ch: GuestChannel, fs: Pick<SharedFs, 'tag' | 'mounts'>, name: string): Promise<void> {
  try {
    await ch.configure({ volumes: { tag: fs.tag, attempts: VOLUME_MOUNT_ATTEMPTS, readAheadKb: VIRTIOFS_READ_AHEAD_KB, mounts: fs.mounts } });
  } catch (err) {
    throw new BootError(`boot failed: the volumes of machine "${name}" could not be mounted after restore: ${(err as Error).message}`, {
      where: name, hint: 'Run with --cold-boot to mount them at boot instead, and report this with `smol machine logs`.',
    });
  } finally {
    trace('volumes: mounted');
  }
}
