/**
 * The QEMU command line for one microvm, as a pure function of its inputs so it can be unit-tested and
 * recorded next to a snapshot. microvm + PVH vmlinux + trimmed cmdline is the fastest TCG boot measured
 * (DESIGN.md §2); devices are virtio-mmio, so every -device here is a *-device, never *-pci.
 */
export interface DiskSpec {
  /** qcow2 (usually a per-machine overlay) or raw file. */
  path: string;
  format?: 'qcow2' | 'raw';
  readOnly?: boolean;
  /** 'unsafe' only for throwaway disks (DESIGN.md §3). */
  cache?: 'writeback' | 'none' | 'unsafe';
  /** QEMU drive id; the fork code passes it to blockdev-snapshot-sync. Defaults to disk0, disk1, … */
  id?: string;
}

export interface MemoryBackendSpec {
  /** A file (usually under /dev/shm) holding guest RAM, so it can be mapped by clones (DESIGN.md §3). */
  path: string;
  /** true for a fork parent/template (MAP_SHARED); false for a clone mapping it copy-on-write. */
  share: boolean;
}

/**
 * virtio-serial: one port per host unix socket, named smol.0, smol.1, … (the guest runs one agent per port,
 * so several host processes can hold sessions at once). vsock: one device; the agent listens on a port.
 */
export type ChannelSpec =
  | { kind: 'serial'; socketPaths: readonly string[] }
  | { kind: 'vsock'; cid: number };

/**
 * The guest's NIC: QEMU user-mode networking (slirp). `restrict` cuts the guest off from everything but
 * hostfwd (published ports without egress); an egress machine's QEMU runs in its own network namespace,
 * where slirp's sockets meet the nftables policy (src/vm/net/). IPv6 is off: the policy is IPv4.
 */
export interface NicSpec {
  restrict: boolean;
  hostfwd: readonly { protocol: 'tcp' | 'udp'; address: string; host: number; guest: number }[];
}

/** The -add-fd set the console's pipe is in. */
const CONSOLE_FDSET = 1;

export const serialPortName = (i: number): string => `smol.${i}`;

export interface QemuArgsInput {
  accel: 'kvm' | 'tcg';
  kernelPath: string;
  initrdPath: string;
  cmdline: string;
  memoryMiB: number;
  cpus: number;
  disks?: readonly DiskSpec[];
  channel: ChannelSpec;
  net?: boolean;
  /** The NIC in detail (wins over net). */
  nic?: NicSpec;
  qmpSocketPath: string;
  /**
   * The fd QEMU inherits for the serial console: a pipe to the console keeper (console-keeper.ts),
   * never a file, so no launch writes an unbounded log.
   */
  consoleFd: number;
  pidfilePath?: string;
  /** Detach: QEMU forks after initialising, so the machine outlives the CLI. */
  daemonize?: boolean;
  memoryBackend?: MemoryBackendSpec;
  /** Start paused waiting for `migrate-incoming` over QMP (restore and fork). */
  incomingDefer?: boolean;
  name?: string;
  /** A PCIe root port (HOTPLUG_PORT) on microvm's PCIe bus, empty at boot: volumes/hotplug.ts plugs virtiofs there. */
  pciHotplug?: boolean;
  /** A vhost-user-fs device on virtiofsd's socket (volumes: vm/volumes/virtiofsd.ts). */
  sharedFs?: SharedFsSpec;
}

/** The root port's QOM id, which device_add names as its bus. */
export const HOTPLUG_PORT = 'smolrp0';

export interface SharedFsSpec { socketPath: string; tag: string }

export function buildQemuArgs(i: QemuArgsInput): string[] {
  if (!Number.isInteger(i.memoryMiB) || i.memoryMiB < 64) throw new RangeError(`memoryMiB must be an integer ≥ 64, got ${i.memoryMiB}`);
  if (!Number.isInteger(i.cpus) || i.cpus < 1) throw new RangeError(`cpus must be an integer ≥ 1, got ${i.cpus}`);
  // microvm's defaults otherwise (PIT and PIC on): the measured 0-hangs-in-30 recipe used them
  const machine = ['microvm', 'rtc=on', 'isa-serial=on'];
  const a: string[] = [];
  if (i.name) a.push('-name', opt(i.name));
  if (i.memoryBackend) {
    const mb = i.memoryBackend;
    a.push('-object', `memory-backend-file,id=mem,size=${i.memoryMiB}M,mem-path=${opt(mb.path)},share=${mb.share ? 'on' : 'off'}`);
    machine.push('memory-backend=mem');
  }
  if (i.pciHotplug) machine.push('pcie=on');
  if (i.sharedFs || i.pciHotplug) {
    // virtiofsd reads and writes guest buffers in place: vhost-user needs the guest RAM mapped shared
    if (i.memoryBackend && !i.memoryBackend.share) throw new RangeError('a vhost-user-fs device needs shared guest memory (share=on)');
    if (!i.memoryBackend) {
      a.push('-object', `memory-backend-memfd,id=mem,size=${i.memoryMiB}M,share=on`);
      machine.push('memory-backend=mem');
    }
  }
  a.push('-machine', machine.join(','));
  a.push(...accelArgs(i.accel));
  a.push('-m', `${i.memoryMiB}M`, '-smp', String(i.cpus));
  // -nographic would tie the serial port to stdio, which -daemonize forbids; -display none + a chardev on
  // the keeper's pipe gives the same headless machine with a console log that `smol logs` can read after we detach.
  a.push('-nodefaults', '-no-user-config', '-display', 'none', '-no-reboot');
  a.push(...sandboxArgs());
  if (!Number.isInteger(i.consoleFd) || i.consoleFd < 3) throw new RangeError(`consoleFd must be an inherited fd ≥ 3, got ${i.consoleFd}`);
  // append=on: without it QEMU truncates what it opens, and a pipe cannot be truncated (EINVAL)
  a.push('-add-fd', `fd=${i.consoleFd},set=${CONSOLE_FDSET},opaque=console`,
    '-chardev', `file,id=con0,path=/dev/fdset/${CONSOLE_FDSET},append=on`, '-serial', 'chardev:con0');
  a.push('-kernel', i.kernelPath, '-initrd', i.initrdPath, '-append', i.cmdline);
  (i.disks ?? []).forEach((d, n) => {
    const id = d.id ?? `disk${n}`;
    // werror/rerror=report: on a full host disk the guest sees the write fail; QEMU's default (enospc) pauses
    // the whole VM, which leaves every exec hanging with no message
    const drive = [`id=${opt(id)}`, `file=${opt(d.path)}`, `format=${d.format ?? 'qcow2'}`, 'if=none', `cache=${d.cache ?? 'writeback'}`, 'werror=report', 'rerror=report'];
    if (d.readOnly) drive.push('read-only=on');
    a.push('-drive', drive.join(','), '-device', `virtio-blk-device,drive=${opt(id)}`);
  });
  if (i.channel.kind === 'serial') {
    if (i.channel.socketPaths.length < 1) throw new RangeError('a serial channel needs at least one socket path');
    if (i.channel.socketPaths.length > 30) throw new RangeError('at most 30 serial ports');
    a.push('-device', 'virtio-serial-device');
    i.channel.socketPaths.forEach((p, n) => {
      a.push('-chardev', `socket,id=ch${n},path=${opt(p)},server=on,wait=off`,
        '-device', `virtserialport,chardev=ch${n},name=${serialPortName(n)}`);
    });
  } else {
    if (!Number.isInteger(i.channel.cid) || i.channel.cid < 3) throw new RangeError(`vsock cid must be an integer ≥ 3, got ${i.channel.cid}`);
    a.push('-device', `vhost-vsock-device,guest-cid=${i.channel.cid}`);
  }
  if (i.sharedFs) {
    // virtiofsd (libvhost-user) refuses legacy virtio, microvm's default transport: make them all modern
    a.push('-global', 'virtio-mmio.force-legacy=false');
    a.push('-chardev', `socket,id=fs0,path=${opt(i.sharedFs.socketPath)}`, '-device', `vhost-user-fs-device,chardev=fs0,tag=${opt(i.sharedFs.tag)}`);
  }
  // no power controller: the slot is always powered, so a plugged device is on the bus at once for the guest's
  // rescan (volumes/hotplug.ts); with one, it stays dark until a hotplug driver powers the slot on
  if (i.pciHotplug) a.push('-device', `pcie-root-port,id=${HOTPLUG_PORT},bus=pcie.0,chassis=1,slot=0,power_controller_present=off`);
  const nic = i.nic ?? (i.net ? { restrict: false, hostfwd: [] } : null);
  if (nic) a.push('-netdev', netdevArg(nic), '-device', 'virtio-net-device,netdev=net0');
  else a.push('-nic', 'none');
  a.push('-qmp', `unix:${opt(i.qmpSocketPath)},server=on,wait=off`);
  if (i.incomingDefer) a.push('-incoming', 'defer');
  if (i.daemonize) a.push('-daemonize');
  if (i.pidfilePath) a.push('-pidfile', i.pidfilePath);
  return a;
}

function netdevArg(n: NicSpec): string {
  const parts = ['user', 'id=net0', 'ipv6=off'];
  if (n.restrict) parts.push('restrict=on');
  for (const f of n.hostfwd) parts.push(`hostfwd=${f.protocol}:${f.address}:${f.host}-:${f.guest}`);
  return parts.join(',');
}

/**
 * QEMU's seccomp filter: a guest that escapes into QEMU meets a process that cannot load modules, reboot,
 * mount, swap, kexec, call obsolete syscalls or change scheduling and resource limits. `spawn=deny` and
 * `elevateprivileges=deny` would go further, but both kill QEMU at -daemonize (it forks and calls setsid).
 * (The fork save no longer needs a spawn: it migrates into a socket smol listens on.) SMOL_QEMU_SANDBOX=off
 * is for a QEMU built without seccomp.
 */
export function sandboxArgs(env: NodeJS.ProcessEnv = process.env): string[] {
  return env.SMOL_QEMU_SANDBOX === 'off' ? [] : ['-sandbox', 'on,obsolete=deny,resourcecontrol=deny'];
}

/** QEMU option values are comma-separated; a literal comma is written twice. */
export function opt(v: string): string {
  return v.replace(/,/g, ',,');
}

/**
 * QEMU 7.2 gives TCG a 1 GiB translation cache by default, and a long-running guest fills it: a 1 GiB
 * machine running CPython's tests held 1.46 GiB of host memory, ~1 GiB of it translated code. 256 MiB
 * holds far more than a guest's hot code; when it fills, TCG flushes and retranslates. SMOL_TCG_TB_MIB
 * overrides it.
 */
export function tcgTbMiB(env: NodeJS.ProcessEnv = process.env): number {
  const v = Number(env.SMOL_TCG_TB_MIB);
  return Number.isInteger(v) && v >= 16 && v <= 4096 ? v : 256;
}

/**
 * TCG's CPU: the richest model it has, less ERMS and FSRM. TCG runs `rep movsb` one byte per step, and with
 * those CPUID bits the guest kernel's copy_to_user (every page-cache read) and glibc's large memcpy use it;
 * without them they move 8–32 bytes an instruction. Measured here under TCG, re-reading a 64 MiB tmpfs file:
 * 116–160 MiB/s with them, 400–457 without; a virtiofs read 40–52 → 77–116 MiB/s. The bits are only hints:
 * code that runs `rep movsb` anyway (a state saved with them) still works. SMOL_TCG_CPU overrides it.
 */
export function tcgCpu(env: NodeJS.ProcessEnv = process.env): string {
  return env.SMOL_TCG_CPU || 'max,erms=off,fsrm=off';
}

/** KVM guests run the host's CPU model; TCG emulates the richest one it has (tcgCpu). The KVM probe uses the same. */
export function accelArgs(accel: 'kvm' | 'tcg'): string[] {
  return accel === 'kvm' ? ['-accel', 'kvm', '-cpu', 'host'] : ['-accel', `tcg,tb-size=${tcgTbMiB()}`, '-cpu', tcgCpu()];
}
