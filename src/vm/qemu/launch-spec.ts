/**
 * What one QEMU launch (launcher.ts) is given and gives back. QEMU is the only VMM (Firecracker and libkrun
 * need KVM and are not installable here), so there is no VMM interface: the Engine (../engine.ts) is the seam.
 */
import type { DiskSpec, MemoryBackendSpec, NicSpec } from './args.js';

export type { DiskSpec, MemoryBackendSpec };

export interface LaunchSpec {
  /** Caller-owned, existing directory for the console log and pidfile. */
  machineDir: string;
  /** Directory for unix sockets (paths must stay under 108 bytes); defaults to machineDir. */
  runDir?: string;
  name?: string;
  kernelPath: string;
  initrdPath: string;
  memoryMiB: number;
  cpus: number;
  /** The first disk is the guest's /dev/vda; set rootDisk to boot into it. */
  disks?: readonly DiskSpec[];
  rootDisk?: boolean;
  net?: boolean;
  /** The NIC in detail: restricted (ports only) or not, and QEMU hostfwd rules (wins over net). */
  nic?: NicSpec;
  /** Run QEMU inside this network namespace (`ip netns exec`): an egress machine's (src/vm/net/netns.ts). */
  netns?: string;
  /** 'serial' (default) works everywhere; 'vsock' needs /dev/vhost-vsock; 'auto' picks vsock when present. */
  channel?: 'serial' | 'vsock' | 'auto';
  /** Number of virtio-serial agent ports (smol.0 …); default 1. */
  ports?: number;
  /** Guest CID for vsock; default derived from the pid-free machine name is the caller's job, else 3. */
  vsockCid?: number;
  memoryBackend?: MemoryBackendSpec;
  incomingDefer?: boolean;
  hostname?: string;
  /** Load the guest's fuse/virtiofs modules (for a vhost-user-fs device passed in by the caller). */
  virtiofs?: boolean;
  /** Volumes: a running virtiofsd's socket, and what /init mounts from it (vm/volumes/virtiofsd.ts). */
  sharedFs?: { socketPath: string; tag: string; mounts: readonly { index: number; guest: string; readonly: boolean }[] };
  /** An empty PCIe root port for a virtiofs device plugged in after boot (volumes/hotplug.ts). */
  pciHotplug?: boolean;
  /** TEST ONLY: run /init's marker hook instead of the agent (see image/init-script.ts). */
  testHook?: { marker: string; sleepSeconds?: number };
  extraCmdline?: readonly string[];
  /** Keep the console log from earlier boots instead of truncating it. */
  appendConsole?: boolean;
}

export interface LaunchResult {
  pid: number;
  accel: 'kvm' | 'tcg';
  qmpPath: string;
  /** virtio-serial sockets in port order (smol.0 first); empty for vsock. */
  channelPaths: string[];
  /** First channel socket, or null for vsock. */
  channelPath: string | null;
  vsock: { cid: number; port: number } | null;
  consoleLogPath: string;
  pidfilePath: string;
  /** Exactly what QEMU was started with (record it with snapshots: state is only valid for the same setup). */
  argv: string[];
  cmdline: string;
}
