/** CLI flags over a Smolfile: scalars from flags win, lists and env concatenate (flags last). */
import path from 'node:path';
import { resolveImageRef } from '../util/image-ref.js';
import type { AllowRule, PortMapping } from './network.js';
import type { Smolfile, Volume } from './schema.js';
import { smolfileSchema } from './schema.js';
import { mergeSecrets, type SecretDecl } from './secrets.js';

export interface MachineOverrides {
  image?: string;
  cpus?: number;
  memory?: number;
  net?: boolean;
  ports?: PortMapping[];
  allow?: AllowRule[];
  gpu?: boolean;
  forkable?: boolean;
  env?: Record<string, string>;
  workdir?: string;
  init?: string[];
  command?: string[];
  /** Added after the Smolfile's volumes; host paths already absolute. */
  volumes?: Volume[];
  /** Over the Smolfile's labels, key by key. */
  labels?: Record<string, string>;
  /** Added to the Smolfile's declarations; host paths already absolute. */
  secrets?: SecretDecl;
}

export function mergeSpec(base: Smolfile | undefined, baseDir: string | undefined, o: MachineOverrides): Smolfile {
  const spec = base ?? smolfileSchema.parse({});
  const image = o.image ?? resolveImageRef(spec.image, baseDir);
  return {
    ...spec,
    image,
    cpus: o.cpus ?? spec.cpus,
    memory: o.memory ?? spec.memory,
    net: o.net ?? spec.net,
    ports: [...(spec.ports ?? []), ...(o.ports ?? [])],
    network: { ...spec.network, allow: [...(spec.network?.allow ?? []), ...(o.allow ?? [])] },
    gpu: o.gpu ?? spec.gpu,
    fork: { enabled: o.forkable ?? spec.fork.enabled },
    env: { ...spec.env, ...(o.env ?? {}) },
    workdir: o.workdir ?? spec.workdir,
    init: [...spec.init, ...(o.init ?? [])],
    command: o.command ?? spec.command,
    volumes: [...(spec.volumes ?? []).map((v) => ({ ...v, host: resolveHostPath(v.host, baseDir) })), ...(o.volumes ?? [])],
    ...(spec.labels || o.labels ? { labels: { ...spec.labels, ...o.labels } } : {}),
    ...withSecrets(spec.secrets && { ...spec.secrets, files: Object.fromEntries(Object.entries(spec.secrets.files).map(([k, f]) => [k, resolveHostPath(f, baseDir)])) }, o.secrets),
  };
}

/** The field only when something is declared: specs without secrets stay as they were. */
function withSecrets(a: SecretDecl | undefined, b: SecretDecl | undefined): { secrets?: SecretDecl } {
  const m = mergeSecrets(a, b);
  return m.env.length || Object.keys(m.files).length ? { secrets: m } : {};
}

/** Volume host paths in a Smolfile are relative to the Smolfile too. */
function resolveHostPath(p: string, baseDir: string | undefined): string {
  return path.resolve(baseDir ?? process.cwd(), p);
}
