/**
 * The public shape of a machine: `smol machine ls/status --json` and the API's Machine (stable for consumers).
 * Here, on the API's floor, so the CLI and `smol serve` print one shape from one function.
 */
import { diskUsage, memoryUsage, readDetached, type MachineRecord, type MachineService } from '../vm/api/machines.js';
import { formatAllow } from '../smolfile/network.js';

export function machineView(svc: MachineService, r: MachineRecord) {
  const layout = svc.layout(r);
  // ports: what is published; a fork clone never publishes its parent's
  return {
    name: r.name, id: r.id, state: r.state, ephemeral: r.ephemeral, image: r.spec.image, imageId: r.imageId,
    cpus: r.spec.cpus, memoryMiB: r.spec.memory, net: r.spec.net, ports: r.parent || r.forkPoint ? [] : r.spec.ports ?? [], allow: (r.spec.network?.allow ?? []).map(formatAllow), gpu: r.spec.gpu, forkable: r.spec.fork.enabled,
    pid: r.state === 'running' ? r.pid : null, parent: r.parent ? svc.store.find(r.parent)?.name ?? r.parent : null, generation: r.generation, forkPoint: r.forkPoint,
    createdAt: new Date(r.createdAt).toISOString(), startedAt: r.startedAt ? new Date(r.startedAt).toISOString() : null,
    lastError: r.lastError, dir: layout.dir, consoleLog: layout.consoleLog,
    volumes: r.spec.volumes ?? [],
    // `smol run -d`: the command, its state and (once it exited) its exit code
    detached: r.ephemeral ? readDetached(svc, r) : null,
    labels: r.labels,
    // names only: values are never stored (docs/secrets.md)
    secrets: { env: r.spec.secrets?.env ?? [], files: Object.keys(r.spec.secrets?.files ?? {}) },
    // files in the disk chain (top overlay to image base): each fork or saved point adds one, capped (docs/fork.md)
    chainDepth: diskUsage(layout.disk)?.chain.length ?? null,
    // shared vs own: a clone's RSS counts the fork template it shares, its PSS divides it among the family
    usage: { memory: r.state === 'running' ? memoryUsage(r.pid) : null, disk: diskUsage(layout.disk) },
  };
}

export type MachineView = ReturnType<typeof machineView>;
