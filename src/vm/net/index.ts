/**
 * A machine's network, from its spec (docs/network.md):
 *  - none:    no NIC at all (the default).
 *  - ports:   published ports only. QEMU's user-mode NIC with restrict=on: hostfwd binds the host ports, and
 *             the guest can open nothing (not the host's loopback, not the world). No root needed, for TCP:
 *             restricted slirp drops every UDP datagram the guest sends, a published port's replies too, so
 *             a machine with UDP ports gets the egress namespace instead, with a policy that allows nothing.
 *  - egress:  --net or --allow. QEMU runs in its own network namespace under an nftables policy (netns.ts).
 */
import { PrerequisiteError } from '../../errors/index.js';
import type { NicSpec } from '../qemu/args.js';
import { netModeOf } from '../../smolfile/network.js';
import type { Smolfile } from '../../smolfile/schema.js';
import type { Progress } from '../engine.js';
import type { MachineLayout } from '../layout.js';
import { checkPortsFree } from './ports.js';
import { publishPorts, setupEgress, teardownEgress } from './netns.js';

export interface PreparedNetwork {
  nic?: NicSpec;
  netns?: string;
  /** Once QEMU runs: the host-side forwarders of an egress machine's published ports. */
  afterLaunch(): Promise<void>;
  /** Undo what was made (QEMU did not start). */
  undo(): Promise<void>;
}

const nothing = async () => undefined;

export async function prepareNetwork(spec: Smolfile, layout: MachineLayout, o: { publish: boolean; onProgress?: Progress }): Promise<PreparedNetwork> {
  const mode = netModeOf(spec);
  const ports = o.publish ? spec.ports ?? [] : [];
  if (mode === 'none') return { afterLaunch: nothing, undo: nothing };
  await checkPortsFree(ports, layout.dir);
  const udp = ports.filter((p) => p.protocol === 'udp');
  if (mode === 'ports' && !udp.length) return { nic: { restrict: true, hostfwd: ports }, afterLaunch: nothing, undo: nothing };
  if (mode === 'ports' && process.getuid?.() !== 0) {
    throw new PrerequisiteError(`publishing UDP port ${udp[0].host} needs root: QEMU's isolated network drops every UDP datagram a guest sends, replies included, and the namespace that replaces it needs root`, {
      hint: 'Run smol as root (or with sudo), or publish TCP ports only.',
    });
  }
  o.onProgress?.('setting up the network namespace');
  const allow = spec.network?.allow ?? [];
  // with UDP ports alone (no --net, no --allow): the namespace, with nothing allowed out, as for TCP
  const st = await setupEgress(layout, { full: spec.net && allow.length === 0, allow, ports });
  return {
    // inside the namespace QEMU binds the same port numbers on the namespace's own address; the host's socat forwards there
    nic: { restrict: false, hostfwd: ports.map((p) => ({ ...p, address: st.nsAddr })) },
    netns: st.ns,
    afterLaunch: () => publishPorts(layout, st, ports),
    undo: () => teardownEgress(layout),
  };
}

export { checkPortsFree } from './ports.js';
