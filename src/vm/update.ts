/**
 * `smol machine update`: change what a stopped machine boots with next time (docs/update.md). Everything
 * `machine create` takes that is read at each boot can change; what was baked into the machine cannot:
 * its image (the disk is an overlay on that image's base), its disk size and its Smolfile `init` (run at
 * first boot only). The whole new spec is checked before anything is written, so bad input changes nothing.
 */
import fs from 'node:fs';
import { ConflictError, UserError } from '../errors/index.js';
import { resumePlanFile } from './boot-files.js';
import type { Smolfile } from '../smolfile/schema.js';
import type { SecretDecl } from '../smolfile/secrets.js';
import { checkVolumes, volumesOf } from './volumes/spec.js';
import type { MachineRecord } from './store/machines.js';
import type { MachineService } from './service.js';

/** Spec fields update may replace (lists are replaced whole, not appended to). */
export type SpecPatch = Partial<Pick<Smolfile, 'cpus' | 'memory' | 'net' | 'ports' | 'gpu' | 'env' | 'workdir' | 'volumes' | 'secrets'>> & {
  allow?: Smolfile['network']['allow'];
  forkable?: boolean;
};

export interface LabelPatch { set?: Record<string, string>; remove?: string[] }

export interface UpdateResult { machine: MachineRecord; changed: string[]; notices: string[] }

const SPEC_KEYS = ['cpus', 'memory', 'net', 'ports', 'allow', 'gpu', 'forkable', 'env', 'workdir', 'volumes', 'secrets'] as const;

/** The spec with the patch applied (pure: tests and the command's dry checks use it). */
export function applyPatch(spec: Smolfile, p: SpecPatch): Smolfile {
  const next: Smolfile = { ...spec };
  if (p.cpus !== undefined) next.cpus = p.cpus;
  if (p.memory !== undefined) next.memory = p.memory;
  if (p.net !== undefined) next.net = p.net;
  if (p.ports !== undefined) next.ports = p.ports;
  if (p.allow !== undefined) next.network = { ...spec.network, allow: p.allow };
  if (p.gpu !== undefined) next.gpu = p.gpu;
  if (p.forkable !== undefined) next.fork = { ...spec.fork, enabled: p.forkable };
  if (p.env !== undefined) next.env = p.env;
  if (p.workdir !== undefined) next.workdir = p.workdir;
  if (p.volumes !== undefined) next.volumes = p.volumes;
  if (p.secrets !== undefined) {
    const s: SecretDecl = { ...(spec.secrets ?? { env: [], files: {} }), ...p.secrets };
    if (s.env.length || Object.keys(s.files).length) next.secrets = s;
    else delete next.secrets;
  }
  return next;
}

/** Which patch keys differ from the spec (a flag that restates the current value changes nothing). */
export function changedKeys(before: Smolfile, after: Smolfile): string[] {
  const view = (s: Smolfile) => ({
    cpus: s.cpus, memory: s.memory, net: s.net, ports: s.ports ?? [], allow: s.network?.allow ?? [], gpu: s.gpu, forkable: s.fork.enabled,
    env: s.env, workdir: s.workdir, volumes: s.volumes ?? [], secrets: s.secrets ?? { env: [], files: {} },
  });
  const a = view(before);
  const b = view(after);
  return SPEC_KEYS.filter((k) => JSON.stringify(a[k]) !== JSON.stringify(b[k]));
}

export function applyLabels(labels: Record<string, string>, p: LabelPatch): Record<string, string> {
  const out = { ...labels, ...p.set };
  for (const k of p.remove ?? []) delete out[k];
  return out;
}

export async function updateMachine(svc: MachineService, nameOrId: string, spec: SpecPatch, labels: LabelPatch = {}): Promise<UpdateResult> {
  const rec = svc.refresh(svc.store.get(nameOrId));
  const specChange = SPEC_KEYS.some((k) => spec[k] !== undefined);
  const unlock = svc.store.lock(rec.id, 'update', rec.name);
  try {
    const cur = svc.refresh(svc.store.get(rec.id));
    // labels are smol's bookkeeping, so they change on a running machine too; the spec is read at boot
    if (specChange && cur.state !== 'stopped' && cur.state !== 'crashed') {
      throw new ConflictError(`machine "${cur.name}" is ${cur.state}: update changes what it boots with, so it must be stopped`, {
        where: cur.name, hint: `Stop it first: smol machine stop ${cur.name} (labels alone can change while it runs).`,
      });
    }
    const next = applyPatch(cur.spec, spec);
    checkVolumes(volumesOf(next));
    if (next.fork.enabled && volumesOf(next).length) {
      throw new UserError('a machine with volumes cannot be forkable', { where: cur.name, hint: 'QEMU cannot save a virtiofs device\'s state. Drop --forkable, or the volumes (--no-volume).' });
    }
    const notices: string[] = [];
    if (cur.parent && next.ports?.length) notices.push('a fork clone never publishes ports (its parent\'s policy applies); -p is kept for the record only');
    const changed = [...changedKeys(cur.spec, next)];
    if ((changed.includes('cpus') || changed.includes('memory')) && fs.existsSync(resumePlanFile(svc.layout(cur)))) {
      notices.push('it was made from a memory artifact: with another CPU count or memory size its first start boots the disk instead of resuming');
    }
    const nextLabels = applyLabels(cur.labels, labels);
    if (JSON.stringify(nextLabels) !== JSON.stringify(cur.labels)) changed.push('labels');
    svc.store.update(cur.id, { spec: next, labels: nextLabels });
    return { machine: svc.store.get(cur.id), changed, notices };
  } finally {
    unlock();
  }
}
