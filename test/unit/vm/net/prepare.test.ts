/** Which network a machine with published ports gets, by protocol and by who runs smol (no namespace made here). */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ExitCode, PrerequisiteError } from '../../../../src/errors/index.js';
import { smolfileSchema } from '../../../../src/smolfile/schema.js';
import { prepareNetwork } from '../../../../src/vm/net/index.js';
import type { MachineLayout } from '../../../../src/vm/layout.js';

const layout = { dir: '/nonexistent/smol-machine' } as MachineLayout;
const spec = (ports: { host: number; guest: number; protocol: 'tcp' | 'udp' }[]) =>
  ({ ...smolfileSchema.parse({}), ports: ports.map((p) => ({ address: '127.0.0.1', ...p })) });
afterEach(() => vi.restoreAllMocks());

describe('prepareNetwork with published ports only', () => {
  it('TCP: QEMU\'s restricted user-mode NIC, whoever runs smol', async () => {
    vi.spyOn(process, 'getuid').mockReturnValue(1000);
    const n = await prepareNetwork(spec([{ host: 0, guest: 80, protocol: 'tcp' }]), layout, { publish: true });
    expect(n.nic).toEqual({ restrict: true, hostfwd: [{ address: '127.0.0.1', host: 0, guest: 80, protocol: 'tcp' }] });
    expect(n.netns).toBeUndefined();
  });

  it('UDP as a user: refused before anything is made, saying why (restricted slirp drops the guest\'s datagrams)', async () => {
    vi.spyOn(process, 'getuid').mockReturnValue(1000);
    const err = await prepareNetwork(spec([{ host: 0, guest: 80, protocol: 'tcp' }, { host: 0, guest: 53, protocol: 'udp' }]), layout, { publish: true }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PrerequisiteError);
    expect((err as PrerequisiteError).exitCode).toBe(ExitCode.prerequisite);
    expect((err as Error).message).toMatch(/^publishing UDP port 0 needs root: QEMU's isolated network drops every UDP datagram/);
  });
});
