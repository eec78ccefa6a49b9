import { describe, expect, it } from 'vitest';
import { loadOrder, moduleGroup, moduleName, parseModulesDep } from '../../../../src/vm/kernel/modules.js';

// excerpt of modules.dep from Debian's 6.1 cloud kernel, as depmod writes it
const DEP = `kernel/drivers/virtio/virtio.ko:
kernel/drivers/virtio/virtio_ring.ko:
kernel/drivers/virtio/virtio_mmio.ko: kernel/drivers/virtio/virtio_ring.ko kernel/drivers/virtio/virtio.ko
kernel/drivers/block/virtio_blk.ko: kernel/drivers/virtio/virtio_ring.ko kernel/drivers/virtio/virtio.ko
kernel/drivers/net/virtio_net.ko: kernel/drivers/net/net_failover.ko kernel/net/core/failover.ko kernel/drivers/virtio/virtio_ring.ko kernel/drivers/virtio/virtio.ko
kernel/drivers/net/net_failover.ko: kernel/net/core/failover.ko
kernel/net/core/failover.ko:
kernel/drivers/char/hw_random/virtio-rng.ko: kernel/drivers/virtio/virtio_ring.ko kernel/drivers/virtio/virtio.ko
`;

describe('kernel module order', () => {
  it('parses modules.dep and names modules by file', () => {
    const deps = parseModulesDep(DEP);
    expect(deps.get('kernel/drivers/virtio/virtio_mmio.ko')).toEqual(['kernel/drivers/virtio/virtio_ring.ko', 'kernel/drivers/virtio/virtio.ko']);
    expect(moduleName('kernel/drivers/char/hw_random/virtio-rng.ko')).toBe('virtio-rng');
    expect(moduleName('kernel/fs/x.ko.xz')).toBe('x');
  });

  it('loads every dependency first, virtio_ring before virtio, each module once', () => {
    const { order, missing } = loadOrder(parseModulesDep(DEP), ['virtio_mmio', 'virtio_net', 'virtio_blk', 'virtio_rng']);
    const names = order.map(moduleName);
    expect(missing).toEqual([]);
    expect(names).toEqual(['virtio_ring', 'virtio', 'virtio_mmio', 'failover', 'net_failover', 'virtio_net', 'virtio_blk', 'virtio-rng']);
    expect(new Set(names).size).toBe(names.length);
  });

  it('reports roots the kernel does not have', () => {
    expect(loadOrder(parseModulesDep(DEP), ['virtio_mmio', 'nine_p']).missing).toEqual(['nine_p']);
  });

  it('puts only what every guest needs in the core group', () => {
    expect(moduleGroup('kernel/drivers/char/virtio_console.ko')).toBe('core');
    expect(moduleGroup('kernel/drivers/char/hw_random/virtio-rng.ko')).toBe('core');
    expect(moduleGroup('kernel/net/core/failover.ko')).toBe('net');
    expect(moduleGroup('kernel/net/vmw_vsock/vmw_vsock_virtio_transport.ko')).toBe('vsock');
    expect(moduleGroup('kernel/fs/fuse/virtiofs.ko')).toBe('virtiofs');
  });
});
