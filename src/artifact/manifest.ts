/**
 * The .smolmachine manifest: a strict zod schema (unknown fields are rejected, as Firecracker's config
 * structs do) plus the canonical JSON encoding that makes packed bytes identical for identical input.
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { ArtifactError, ExitCode, ValidationError } from '../errors/index.js';

/** The one format version this build reads and writes. */
export const FORMAT_VERSION = 1;
export const MAX_MANIFEST_BYTES = 1024 * 1024;

const sha256Hex = z.string().regex(/^[0-9a-f]{64}$/, 'expected 64 lowercase hex digits');
const size = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);
/** Entry names become file names in the extraction directory, so they are flat and boring by construction. */
export const entryNameRe = /^[a-z0-9][a-z0-9._-]{0,63}$/;

export const entryKinds = ['disk', 'kernel', 'initrd', 'memory', 'device-state'] as const;
export type EntryKind = (typeof entryKinds)[number];

export const artifactEntrySchema = z.object({
  /** File name after extraction (e.g. `disk.qcow2`); the stored tar member is `${name}.zst`. */
  name: z.string().regex(entryNameRe, 'must be a flat file name (a-z0-9._-)'),
  kind: z.enum(entryKinds),
  /** Content format after decompression: qcow2 for disks, the rest are opaque blobs. */
  format: z.enum(['qcow2', 'elf', 'bzimage', 'cpio', 'qemu-ram', 'qemu-migration']),
  /** Decompressed size and digest: what lands on disk. */
  size,
  sha256: sha256Hex,
  /** Guest-visible size of a disk (qcow2 virtual size). */
  virtualSize: size.optional(),
  stored: z.object({
    compression: z.literal('zstd'),
    size,
    sha256: sha256Hex,
  }).strict(),
}).strict();
export type ArtifactEntry = z.infer<typeof artifactEntrySchema>;

export const resumeStateSchema = z.object({
  /** Saved QEMU state restores only on the same build, accelerator and CPU model (DESIGN.md §3). */
  qemuVersion: z.string().min(1),
  /** `qemu-system-x86_64 --version`'s first line from the version on: "7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)" (the package build). */
  qemuBuild: z.string().min(1),
  accelerator: z.enum(['kvm', 'tcg']),
  cpuModel: z.string().min(1),
  machineType: z.string().min(1),
  memoryBytes: size,
  /** The device set the state was saved with: the resumed machine must be launched with the same one. */
  net: z.boolean(),
  agentPorts: z.number().int().min(1).max(30),
  /** The agent port no host session held at the save: the resumed machine is configured on it (no inherited session). */
  agentPort: z.number().int().min(0).max(29),
}).strict();
export type ResumeState = z.infer<typeof resumeStateSchema>;

export const artifactManifestSchema = z.object({
  formatVersion: z.literal(FORMAT_VERSION),
  smolVersion: z.string().min(1),
  createdAt: z.string().datetime(),
  guest: z.object({
    platform: z.literal('linux'),
    arch: z.enum(['x86_64', 'aarch64']),
  }).strict(),
  kernel: z.object({ identity: z.string().min(1), cmdline: z.string().optional() }).strict(),
  image: z.object({ identity: z.string().min(1) }).strict(),
  resources: z.object({
    cpus: z.number().int().min(1).max(256),
    memoryMiB: z.number().int().min(16).max(4 * 1024 * 1024),
  }).strict(),
  entrypoint: z.array(z.string()).optional(),
  env: z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/), z.string()).optional(),
  workdir: z.string().optional(),
  resume: resumeStateSchema.optional(),
  entries: z.array(artifactEntrySchema).min(1).max(16),
  /** SHA-256 over the canonical entry list: the identity of what the artifact holds. */
  contentDigest: sha256Hex,
  signature: z.object({
    algorithm: z.literal('ed25519'),
    keyId: z.string().regex(/^[0-9a-f]{16}$/),
    /** base64 SPKI DER (44 bytes for ed25519): lets verify check a signature without --key; --key pins it. */
    publicKey: z.string().regex(/^[A-Za-z0-9+/]{58,64}={0,2}$/),
  }).strict().optional(),
}).strict().superRefine((m, ctx) => {
  const names = new Set<string>();
  for (const [i, e] of m.entries.entries()) {
    if (names.has(e.name)) ctx.addIssue({ code: 'custom', path: ['entries', i, 'name'], message: `duplicate entry ${e.name}` });
    names.add(e.name);
  }
  for (const kind of ['disk', 'kernel', 'initrd', 'memory', 'device-state'] as const) {
    if (m.entries.filter((e) => e.kind === kind).length > 1) ctx.addIssue({ code: 'custom', path: ['entries'], message: `more than one ${kind} entry` });
  }
  for (const kind of ['kernel', 'initrd'] as const) {
    if (!m.entries.some((e) => e.kind === kind)) ctx.addIssue({ code: 'custom', path: ['entries'], message: `missing ${kind} entry` });
  }
  const hasMem = m.entries.some((e) => e.kind === 'memory') && m.entries.some((e) => e.kind === 'device-state');
  const anyMem = m.entries.some((e) => e.kind === 'memory' || e.kind === 'device-state');
  if (anyMem && !hasMem) ctx.addIssue({ code: 'custom', path: ['entries'], message: 'memory and device-state entries come together' });
  if (hasMem !== (m.resume !== undefined)) ctx.addIssue({ code: 'custom', path: ['resume'], message: 'resume state is required exactly when memory entries are present' });
  if (m.resume && m.resume.agentPort >= m.resume.agentPorts) ctx.addIssue({ code: 'custom', path: ['resume', 'agentPort'], message: `must be below agentPorts (${m.resume.agentPorts})` });
  const mem = m.entries.find((e) => e.kind === 'memory');
  if (m.resume && mem && (mem.size !== m.resume.memoryBytes || mem.size !== m.resources.memoryMiB * 2 ** 20)) {
    ctx.addIssue({ code: 'custom', path: ['resume', 'memoryBytes'], message: `memory entry, resume.memoryBytes and resources.memoryMiB disagree (${mem.size}, ${m.resume.memoryBytes}, ${m.resources.memoryMiB} MiB)` });
  }
});
export type ArtifactManifest = z.infer<typeof artifactManifestSchema>;

/** Key-sorted JSON: the same manifest always encodes to the same bytes. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(sortKeys(value));
}
function sortKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v && typeof v === 'object') {
    return Object.fromEntries(Object.keys(v).sort().filter((k) => (v as Record<string, unknown>)[k] !== undefined)
      .map((k) => [k, sortKeys((v as Record<string, unknown>)[k])]));
  }
  return v;
}

export function contentDigest(entries: readonly ArtifactEntry[]): string {
  return createHash('sha256').update(canonicalJson(entries)).digest('hex');
}

export function encodeManifest(m: ArtifactManifest): Buffer {
  return Buffer.from(canonicalJson(m) + '\n', 'utf8');
}

/** Parses manifest bytes; the format version is checked first so old readers say "unsupported" rather than list field errors. */
export function decodeManifest(bytes: Buffer, where: string): ArtifactManifest {
  let raw: unknown;
  try {
    raw = JSON.parse(bytes.toString('utf8'));
  } catch (err) {
    throw new ArtifactError(`manifest is not valid JSON: ${(err as Error).message}`, { where, cause: err });
  }
  const version = (raw as { formatVersion?: unknown } | null)?.formatVersion;
  if (version !== FORMAT_VERSION) {
    throw new ArtifactError(`unsupported artifact format version ${JSON.stringify(version)} (this smol reads version ${FORMAT_VERSION})`,
      { where, hint: 'Upgrade smol, or repack the machine with this version.' }, ExitCode.invalidInput);
  }
  const r = artifactManifestSchema.safeParse(raw);
  if (!r.success) {
    throw new ValidationError('artifact manifest is invalid', r.error.issues.map((i) => ({
      path: i.path.join('.') || '(root)',
      message: i.code === 'unrecognized_keys' ? `unknown field(s): ${i.keys.join(', ')}` : i.message,
    })), { where });
  }
  if (r.data.contentDigest !== contentDigest(r.data.entries)) {
    throw new ArtifactError('manifest contentDigest does not match its entry list', { where });
  }
  return r.data;
}

export type HostArch = ArtifactManifest['guest']['arch'];
export function hostArch(nodeArch: string = process.arch): HostArch | string {
  return nodeArch === 'x64' ? 'x86_64' : nodeArch === 'arm64' ? 'aarch64' : nodeArch;
}

/** What a machine launched here would run on, in the terms the manifest records. */
export interface HostQemu {
  qemuVersion: string;
  qemuBuild: string;
  accelerator: 'kvm' | 'tcg';
  cpuModel: string;
  machineType: string;
  /** The machine as it would be launched: its memory, vCPUs, NIC and agent ports must match the saved devices. */
  memoryMiB: number;
  cpus: number;
  net: boolean;
  agentPorts: number;
  /** The disk size asked for (Smolfile `disk`), if any: a disk of another size than the artifact's is a different device. */
  diskBytes?: number;
}

/** Whether the saved memory state may be restored here; otherwise the caller cold-boots the disk with a notice. */
export function canResume(m: ArtifactManifest, host: HostQemu): { ok: true } | { ok: false; reason: string } {
  if (!m.resume) return { ok: false, reason: 'the artifact carries no memory state' };
  const r = m.resume;
  const disk = m.entries.find((e) => e.kind === 'disk');
  const checks: [string, string | number | boolean, string | number | boolean, 'host' | 'machine'][] = [
    ['QEMU version', r.qemuVersion, host.qemuVersion, 'host'], ['QEMU build', r.qemuBuild, host.qemuBuild, 'host'],
    ['accelerator', r.accelerator, host.accelerator, 'host'], ['CPU model', r.cpuModel, host.cpuModel, 'host'], ['machine type', r.machineType, host.machineType, 'host'],
    ['memory (MiB)', r.memoryBytes / 2 ** 20, host.memoryMiB, 'machine'], ['vCPUs', m.resources.cpus, host.cpus, 'machine'],
    ['networking', r.net ? 'on' : 'off', host.net ? 'on' : 'off', 'machine'], ['agent ports', r.agentPorts, host.agentPorts, 'host'],
  ];
  if (disk?.virtualSize !== undefined && host.diskBytes !== undefined) checks.push(['disk size (bytes)', disk.virtualSize, host.diskBytes, 'machine']);
  for (const [field, want, have, who] of checks) {
    if (want !== have) return { ok: false, reason: `saved state needs ${field} ${want}, this ${who} has ${have}` };
  }
  return { ok: true };
}
