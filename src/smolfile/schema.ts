/** The Smolfile: a YAML declaration of a machine. Unknown keys are errors (Firecracker's rule). */
import { z } from 'zod';
import { networkSchema, portsSchema } from './network.js';
import { labelsSchema } from './labels.js';
import { secretsSchema } from './secrets.js';

/** "512", "512M", "1G", "1.5GiB" → MiB. A bare number is MiB. */
export function parseMemoryMiB(v: string | number): number {
  if (typeof v === 'number') return v;
  const m = /^\s*(\d+(?:\.\d+)?)\s*(k|m|g|t)?(i?b)?\s*$/i.exec(v);
  if (!m) return Number.NaN;
  const n = Number(m[1]);
  const unit = (m[2] ?? 'm').toLowerCase();
  const mul = unit === 'k' ? 1 / 1024 : unit === 'm' ? 1 : unit === 'g' ? 1024 : 1024 * 1024;
  return Math.round(n * mul);
}

export const memorySchema = z
  .union([z.number(), z.string()])
  .transform((v, ctx) => {
    const mib = parseMemoryMiB(v);
    if (!Number.isFinite(mib)) {
      ctx.addIssue({ code: 'custom', message: `"${v}" is not a size; use MiB as a number or a string like "512M" or "1G"` });
      return z.NEVER;
    }
    return mib;
  })
  .pipe(z.number().int().min(64, 'memory must be at least 64 MiB').max(1024 * 1024, 'memory must be at most 1 TiB'));

export const cpusSchema = z.number().int('cpus must be a whole number').min(1, 'cpus must be at least 1').max(64, 'cpus must be at most 64');

/** A NUL cannot reach the guest (the agent's frames end strings with it): refused here, naming the field, not at boot. */
export const noNul = (what: string) => z.string().refine((v) => !v.includes('\0'), `${what} cannot contain NUL bytes`);

const envName = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** env as a map {K: V} or a list ["K=V"]; both become a map. */
export const envSchema = z
  .union([
    z.record(z.string().regex(envName, 'environment names are letters, digits and _'), z.union([z.string(), z.number(), z.boolean()]).transform(String).pipe(noNul('environment values'))),
    z.array(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*=/, 'each entry must look like NAME=value').pipe(noNul('environment values'))),
  ])
  .transform((v) => (Array.isArray(v) ? Object.fromEntries(v.map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)])) : v));

/**
 * Guest paths a volume may sit on: absolute, no `..`, and words the guest's /init can read from the kernel
 * command line (no spaces, commas or colons). The API filesystems and smol's own dirs are off limits:
 * /init moves /proc, /sys, /dev and /run into the root after mounting volumes, which would hide one there.
 */
export const GUEST_VOLUME_PATH = /^\/[A-Za-z0-9._@+/-]*$/;
const RESERVED_GUEST = ['/proc', '/sys', '/dev', '/run', '/.smol'];

export function guestPathProblem(p: string): string | null {
  if (!p.startsWith('/')) return `guest path "${p}" must be absolute (start with /)`;
  if (!GUEST_VOLUME_PATH.test(p)) return `guest path "${p}" may only hold letters, digits and . _ @ + - /`;
  if (p.split('/').some((c) => c === '..' || c === '.')) return `guest path "${p}" must not contain . or .. components`;
  const norm = normalizeGuestPath(p);
  if (norm === '/') return 'a volume cannot be mounted on / (the guest\'s root)';
  const hit = RESERVED_GUEST.find((r) => norm === r || norm.startsWith(`${r}/`));
  if (hit) return `guest path "${p}" is under ${hit}, which the guest's init manages`;
  return null;
}

/** "/work//src/" → "/work/src". */
export const normalizeGuestPath = (p: string): string => `/${p.split('/').filter(Boolean).join('/')}`;

/** A host directory shared into the guest over virtiofs (docs/volumes.md). */
export const volumeSchema = z.object({
  /** Host directory; relative to the Smolfile's directory. */
  host: z.string().min(1, 'host path must not be empty'),
  guest: z.string().superRefine((p, ctx) => {
    const why = guestPathProblem(p);
    if (why) ctx.addIssue({ code: 'custom', message: why });
  }).transform(normalizeGuestPath),
  readonly: z.boolean().default(false),
}).strict();

export type Volume = z.output<typeof volumeSchema>;

/** Two volumes on one guest path would hide one another. */
export const volumesSchema = z.array(volumeSchema).superRefine((vs, ctx) => {
  const seen = new Map<string, number>();
  vs.forEach((v, i) => {
    const j = seen.get(v.guest);
    if (j !== undefined) ctx.addIssue({ code: 'custom', path: [i, 'guest'], message: `two volumes on guest path ${v.guest} (entries ${j + 1} and ${i + 1})` });
    else seen.set(v.guest, i);
  });
});

export const smolfileSchema = z
  .object({
    /** 'default' (busybox + agent), a rootfs directory, or a `docker save`/OCI tarball; relative to the Smolfile. */
    image: z.string().min(1).default('default'),
    cpus: cpusSchema.default(1),
    memory: memorySchema.default(256),
    /** User-mode networking; off by default so a guest has no route out. */
    net: z.boolean().default(false),
    /** Host ports forwarded into the guest ("8080:80", Docker's -p form); no egress implied. */
    ports: portsSchema.default([]),
    /** Egress policy: `allow` lists the only destinations a guest may reach (see docs/network.md). */
    network: networkSchema.default({ allow: [] }),
    env: envSchema.default({}),
    workdir: noNul('workdir').pipe(z.string().startsWith('/', 'workdir must be an absolute guest path')).default('/'),
    /** Shell commands run once, at the machine's first boot. */
    init: z.array(noNul('init commands').pipe(z.string().min(1))).default([]),
    /** Command for `smol run` when none is given. */
    command: z.array(noNul('arguments')).optional(),
    gpu: z.boolean().default(false),
    /** Host directories shared into the guest (virtiofs); see docs/volumes.md. */
    volumes: volumesSchema.default([]),
    fork: z.object({ enabled: z.boolean().default(false) }).strict().default({ enabled: false }),
    /** Root disk size for persistent machines (the overlay's virtual size). */
    disk: z.union([z.number(), z.string()]).optional().transform((v) => (v === undefined ? undefined : parseMemoryMiB(v)))
      .pipe(z.number().int().min(16, 'disk must be at least 16 MiB').optional()),
    /** Labels for `smol machine ls --filter label=K=V` (docs/labels.md); kept in the registry, not the spec. */
    labels: labelsSchema.optional(),
    /** Secrets by name only; values come from the host at each run/start/exec (docs/secrets.md). */
    secrets: secretsSchema.optional(),
  })
  .strict();

export type Smolfile = z.output<typeof smolfileSchema>;
export type SmolfileInput = z.input<typeof smolfileSchema>;
