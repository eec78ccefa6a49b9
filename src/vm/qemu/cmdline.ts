/**
 * The guest kernel command line. Every parameter here was measured to matter under TCG (DESIGN.md §2):
 * crypto self-tests alone cost 315 ms, and without the host's real TSC rate microvm hangs one boot in five.
 */
export interface CmdlineOptions {
  /** Host TSC kHz; required under TCG (see tsc.ts), dropped under KVM where -cpu host supplies it. */
  tscKhz?: number | null;
  accel: 'kvm' | 'tcg';
  net?: boolean;
  /** Root disk device inside the guest (vda), or none to stay in the initramfs. */
  root?: string | null;
  vsock?: boolean;
  /** Number of virtio-serial ports (one agent each); 1 when omitted. */
  ports?: number;
  hostname?: string;
  /** Load fuse + virtiofs in the guest. */
  virtiofs?: boolean;
  /** Volumes /init mounts from the virtiofs tag `smol`: directory N of the share on guest path P (implies virtiofs). */
  volumes?: readonly { index: number; guest: string; readonly: boolean }[];
  /**
   * A PCIe root port takes a device after boot (volumes on a restored run): load virtio_pci. pciehp stays off
   * the port (microvm's ACPI tables do not hand it to the OS, and no pcie_ports=native asks): the guest finds
   * the device with a rescan, ~0.15 s sooner than pciehp's link waits under TCG (volumes/hotplug.ts).
   */
  pciHotplug?: boolean;
  /** Test-only hook in /init (see init-script.ts). */
  test?: { marker: string; sleepSeconds?: number };
  extra?: readonly string[];
}

export const BASE_CMDLINE = [
  'console=ttyS0', 'quiet', 'cryptomgr.notests', 'mitigations=off', 'nokaslr', 'init_on_alloc=0',
  '8250.nr_uarts=1', 'random.trust_cpu=on', 'panic=-1',
] as const;

const TOKEN = /^[A-Za-z0-9._-]+$/;

export function buildCmdline(o: CmdlineOptions): string {
  const parts: string[] = [...BASE_CMDLINE];
  if (o.accel === 'tcg' && o.tscKhz) parts.push(`tsc_early_khz=${Math.round(o.tscKhz)}`);
  if (o.net) parts.push('smol.net=1');
  if (o.root) parts.push(`smol.root=${token('root', o.root)}`);
  if (o.vsock) parts.push('smol.vsock=1');
  else if (o.ports && o.ports > 1) parts.push(`smol.ports=${Math.min(31, Math.floor(o.ports))}`);
  if (o.virtiofs || o.volumes?.length || o.pciHotplug) parts.push('smol.virtiofs=1');
  if (o.pciHotplug) parts.push('smol.pcihp=1');
  if (o.volumes?.length) {
    parts.push(`smol.vols=${o.volumes.map((v) => `${v.index}:${token('volume guest path', v.guest, /^\/[A-Za-z0-9._@+/-]*$/)}${v.readonly ? ':ro' : ''}`).join(',')}`);
  }
  if (o.hostname) parts.push(`smol.hostname=${token('hostname', o.hostname)}`);
  if (o.test) {
    parts.push(`smol.test=${token('test marker', o.test.marker)}`);
    if (o.test.sleepSeconds) parts.push(`smol.testsleep=${Math.round(o.test.sleepSeconds)}`);
  }
  for (const e of o.extra ?? []) parts.push(token('extra kernel parameter', e, /^[A-Za-z0-9._,=:/-]+$/));
  return parts.join(' ');
}

/** The kernel splits on spaces and /init on words: anything else would be read as another parameter. */
function token(what: string, value: string, re = TOKEN): string {
  if (!re.test(value)) throw new RangeError(`invalid ${what} ${JSON.stringify(value)}: only ${re.source} is allowed`);
  return value;
}
