/**
 * Which kernel modules the guest needs and the order to load them. The cloud kernel builds its virtio
 * drivers, vsock and overlayfs as modules (ext4 is built in), and busybox's insmod does no dependency
 * resolution, so we resolve it here from depmod's modules.dep.
 */

/** Modules the guest loads at boot; their dependencies come along. */
export const GUEST_MODULES = [
  'virtio_mmio', 'virtio_blk', 'virtio_console', 'virtio_net', 'virtio-rng',
  'vmw_vsock_virtio_transport', 'overlay', 'virtiofs', 'virtio_pci',
] as const;

/**
 * Modules only some guests need, by group; /init loads a group only when the cmdline asks for it
 * (smol.net=1, smol.vsock=1, smol.virtiofs=1, smol.pcihp=1). Each insmod costs tens of ms under TCG.
 * virtio_pci serves only a device hotplugged after boot (volumes on a restored run: volumes/hotplug.ts).
 */
const OPTIONAL: Record<string, ModuleGroup> = {
  virtio_net: 'net', net_failover: 'net', failover: 'net',
  vsock: 'vsock', vmw_vsock_virtio_transport_common: 'vsock', vmw_vsock_virtio_transport: 'vsock',
  fuse: 'virtiofs', virtiofs: 'virtiofs',
  virtio_pci: 'pcihp', virtio_pci_legacy_dev: 'pcihp', virtio_pci_modern_dev: 'pcihp',
};

export type ModuleGroup = 'core' | 'net' | 'vsock' | 'virtiofs' | 'pcihp';

export function moduleGroup(relPath: string): ModuleGroup {
  return OPTIONAL[moduleName(relPath).replace(/-/g, '_')] ?? 'core';
}

export type DepMap = Map<string, string[]>;

/** modules.dep lines look like `kernel/a/b.ko: kernel/c.ko kernel/d.ko`. */
export function parseModulesDep(text: string): DepMap {
  const deps: DepMap = new Map();
  for (const line of text.split('\n')) {
    const m = /^([^:\s]+):\s*(.*)$/.exec(line.trim());
    if (m) deps.set(m[1], m[2].split(/\s+/).filter(Boolean));
  }
  return deps;
}

export function moduleName(relPath: string): string {
  return relPath.replace(/^.*\//, '').replace(/\.ko(\.(xz|zst|gz))?$/, '');
}

/**
 * The closure of `roots` in load order: each module after everything it depends on. Dependencies are
 * visited in the order depmod lists them, which puts virtio_ring before virtio (the other order fails
 * with unknown symbols, DESIGN.md §2). Roots missing from the map are reported, not ignored.
 */
export function loadOrder(deps: DepMap, roots: readonly string[]): { order: string[]; missing: string[] } {
  const byName = new Map<string, string>();
  for (const p of deps.keys()) byName.set(moduleName(p), p);
  const order: string[] = [];
  const seen = new Set<string>();
  const missing: string[] = [];
  const visit = (p: string, stack: Set<string>) => {
    if (seen.has(p) || stack.has(p)) return;
    stack.add(p);
    for (const d of deps.get(p) ?? []) visit(d, stack);
    stack.delete(p);
    seen.add(p);
    order.push(p);
  };
  for (const r of roots) {
    const p = byName.get(r) ?? byName.get(r.replace(/-/g, '_')) ?? byName.get(r.replace(/_/g, '-'));
    if (p) visit(p, new Set());
    else missing.push(r);
  }
  return { order, missing };
}
