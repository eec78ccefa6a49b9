/**
 * Rollout manifests: a pipeline of stages (GPU via the gateway, CPU as subprocesses) over a set of samples.
 * Strict schema: unknown fields are errors, and every error names its field path and YAML line.
 */
import { isMap, isSeq, LineCounter, type Node } from 'yaml';
import { z } from 'zod';
import { ValidationError, type Issue } from '../errors/index.js';
import { parseImageReference } from '../registry/reference.js';
import { parseDuration } from '../util/duration.js';
import { sizeLabel } from '../util/read-capped.js';
import { parseYamlBounded, yamlToJs } from '../util/yaml-bounded.js';
import { DEFAULT_MAX_ATTEMPTS, GENERATED_MAX_BYTES, MANIFEST_MAX_BYTES, MAX_ATTEMPTS_CAP, MAX_ITEMS, STAGE_BACKOFF_MS, STAGE_MAX_OUTPUT_BYTES, STAGE_TIMEOUT_MS, TEMPLATE_MAX_BYTES } from './limits.js';

const noNul = (what: string) => z.string().refine((v) => !v.includes('\0'), `${what} cannot contain NUL bytes`);

const duration = z.union([z.number(), z.string()]).transform((v, ctx) => {
  const d = parseDuration(v, 'ms');
  if ('problem' in d) {
    ctx.addIssue({ code: 'custom', message: d.problem });
    return z.NEVER;
  }
  return d.ms;
});
const name = z.string().regex(/^[a-z0-9][a-z0-9._-]{0,62}$/, 'use 1-63 lowercase letters, digits, ".", "_" or "-"');

const limits = z.strictObject({
  cpuSeconds: z.number().int().positive().optional(),
  memoryMiB: z.number().int().positive().optional(),
  maxOutputBytes: z.number().int().positive().default(STAGE_MAX_OUTPUT_BYTES),
  openFiles: z.number().int().positive().optional(),
}).prefault({});

const common = {
  name,
  maxAttempts: z.number().int().min(1).max(MAX_ATTEMPTS_CAP).optional(),
  timeout: duration.optional(),
  backoff: duration.optional(),
};

const gpuStage = z.strictObject({
  ...common,
  kind: z.literal('gpu'),
  model: z.strictObject({ name: z.string().min(1), version: z.string().min(1) }),
  promptVersion: z.string().min(1),
  params: z.record(z.string(), z.union([z.string(), z.number(), z.boolean(), z.null(), z.array(z.string())])).default({}),
});
/**
 * Where a CPU stage's attempts run. `process` (the default) takes whatever the worker offers; `vm` requires a
 * worker with --isolation vm; `{vm: {forkPoint}}` also names the saved fork point (smol snapshot ls) each
 * attempt's clone starts from, and `{vm: {warmMachine}}` a running forkable machine the worker saves one
 * point from (docs/fork.md). `{vm: {artifact}}` names a `.smolmachine` in an OCI registry (what `smol pack push`
 * wrote), pinned by digest: each worker host pulls it once and clones a fork point made from it (vm-artifact.ts).
 */
const machineRef = z.string().regex(/^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$/, 'a machine or fork point name: 1-63 letters, digits, ".", "_" or "-"');
/**
 * A registry artifact pinned by digest. A tag is refused rather than resolved at submit: the manifest alone then
 * says which bytes run (its digest is the rollout's identity), resubmitting cannot meet a moved tag, and
 * submitting needs no registry. `smol pack push` prints the digest to pin.
 */
const artifactRef = z.string().max(1024).superRefine((v, ctx) => {
  const at = v.indexOf('@');
  const name = at < 0 ? v : v.slice(0, at);
  const first = name.split('/')[0];
  if (!name.includes('/') || !(/[.:]/.test(first) || first === 'localhost')) {
    ctx.addIssue({ code: 'custom', message: `"${v}" does not name its registry: write REGISTRY[:PORT]/NAME@sha256:<64 hex>, e.g. registry.example.com/team/env@sha256:…` });
  } else if (at < 0) {
    ctx.addIssue({ code: 'custom', message: `"${v}" is pinned by tag only, and a tag can move: pin it by digest, ${name.replace(/:[^/:]*$/, '')}@sha256:<64 hex> (the "manifest sha256:…" line of smol pack push)` });
  } else if (!/^sha256:[0-9a-f]{64}$/.test(v.slice(at + 1))) {
    ctx.addIssue({ code: 'custom', message: `"${v.slice(at + 1)}" is not a digest: write sha256: and 64 lowercase hex digits` });
  } else {
    try {
      parseImageReference(v);
    } catch (err) {
      ctx.addIssue({ code: 'custom', message: (err as Error).message });
    }
  }
});
const isolation = z.union([
  z.enum(['process', 'vm']),
  z.strictObject({
    vm: z.strictObject({ forkPoint: machineRef.optional(), warmMachine: machineRef.optional(), artifact: artifactRef.optional() })
      .refine((v) => [v.forkPoint, v.warmMachine, v.artifact].filter(Boolean).length <= 1, { message: 'give one of forkPoint, warmMachine or artifact' }),
  }),
]).optional();
const cpuStage = z.strictObject({
  ...common,
  kind: z.literal('cpu'),
  command: z.array(noNul('arguments')).min(1),
  // a NUL or "=" in a name, or a NUL in a value, cannot reach a process's environment as written
  env: z.record(z.string().regex(/^[^=\0]+$/, 'environment names cannot be empty or contain "=" or NUL'), noNul('environment values')).default({}),
  limits,
  isolation,
});
export const stageSchema = z.discriminatedUnion('kind', [gpuStage, cpuStage]);

const sample = z.strictObject({ id: name, text: z.string() });

export const manifestSchema = z.strictObject({
  apiVersion: z.literal('smol/v1'),
  kind: z.literal('Rollout'),
  name,
  /** Optional when a stage runs an artifact: its digest then is the version (environmentVersion). */
  environment: z.strictObject({ version: z.string().min(1).optional() }).prefault({}),
  gpus: z.number().int().min(0).default(1),
  defaults: z.strictObject({
    maxAttempts: z.number().int().min(1).max(MAX_ATTEMPTS_CAP).default(DEFAULT_MAX_ATTEMPTS),
    timeout: duration.default(STAGE_TIMEOUT_MS),
    backoff: duration.default(STAGE_BACKOFF_MS),
    deadline: duration.optional(),
  }).prefault({}),
  samples: z.array(sample).min(1).max(MAX_ITEMS, `at most ${MAX_ITEMS} samples per rollout; split it into several rollouts`).optional(),
  generate: z.strictObject({
    count: z.number().int().min(1).max(MAX_ITEMS, `at most ${MAX_ITEMS} samples per rollout; split it into several rollouts`),
    template: z.string().min(1).refine((t) => Buffer.byteLength(t) <= TEMPLATE_MAX_BYTES, `the template must be at most ${sizeLabel(TEMPLATE_MAX_BYTES)}`),
  }).optional(),
  stages: z.array(stageSchema).min(1),
}).superRefine((m, ctx) => {
  if (!m.samples === !m.generate) ctx.addIssue({ code: 'custom', path: ['samples'], message: 'give exactly one of "samples" or "generate"' });
  const seen = new Set<string>();
  m.stages.forEach((s, i) => {
    if (seen.has(s.name)) ctx.addIssue({ code: 'custom', path: ['stages', i, 'name'], message: `duplicate stage name "${s.name}"` });
    seen.add(s.name);
  });
  if (m.generate && generatedBytes(m.generate) > GENERATED_MAX_BYTES) {
    ctx.addIssue({ code: 'custom', path: ['generate'], message: `count × template would make ${Math.ceil(generatedBytes(m.generate) / 2 ** 20)} MiB of samples; the most is ${sizeLabel(GENERATED_MAX_BYTES)}` });
  }
  if (!m.environment.version && !artifactDigests(m).length) {
    ctx.addIssue({ code: 'custom', path: ['environment', 'version'], message: 'required: name the environment\'s version (or run a stage from a registry artifact, whose digest is then the version)' });
  }
  const ids = new Set<string>();
  m.samples?.forEach((s, i) => {
    if (ids.has(s.id)) ctx.addIssue({ code: 'custom', path: ['samples', i, 'id'], message: `duplicate sample id "${s.id}"` });
    ids.add(s.id);
  });
});

/** An upper bound on the bytes samplesOf would make, computed without making them. */
function generatedBytes(g: { count: number; template: string }): number {
  const holes = g.template.split('{i}').length - 1;
  const digits = String(g.count - 1).length;
  return g.count * (Buffer.byteLength(g.template) + holes * Math.max(0, digits - 3));
}

export type Manifest = z.output<typeof manifestSchema>;
export type Stage = z.output<typeof stageSchema>;
export type GpuStage = Extract<Stage, { kind: 'gpu' }>;
export type CpuStage = Extract<Stage, { kind: 'cpu' }>;

/** What a CPU stage asks of the worker's isolation: none (process is fine), a VM, and which fork point, warm machine or artifact. */
export function stageIsolation(s: CpuStage): { vm: boolean; forkPoint?: string; warmMachine?: string; artifact?: string } {
  if (s.isolation === undefined || s.isolation === 'process') return { vm: false };
  if (s.isolation === 'vm') return { vm: true };
  const { forkPoint, warmMachine, artifact } = s.isolation.vm;
  return { vm: true, forkPoint, warmMachine, artifact };
}

/** The distinct digests (sha256:…) of the artifacts the manifest's stages run, in stage order. */
function artifactDigests(m: { stages: Stage[] }): string[] {
  const out: string[] = [];
  for (const s of m.stages) {
    const ref = s.kind === 'cpu' ? stageIsolation(s).artifact : undefined;
    const d = ref?.slice(ref.indexOf('@') + 1);
    if (d && !out.includes(d)) out.push(d);
  }
  return out;
}

/**
 * The environment version the rollout records on every item and trajectory: the stated version, and the digest
 * of each artifact a stage runs after an "@" (`v3@sha256:…`), or the digests alone (several joined by "+").
 * An environment that travels by digest is then named by its bytes wherever a result is read.
 */
export function environmentVersion(m: Pick<Manifest, 'environment' | 'stages'>): string {
  const pinned = artifactDigests(m).join('+');
  const stated = m.environment.version;
  return stated && pinned ? `${stated}@${pinned}` : stated || pinned;
}

function nodeAt(root: Node | null, p: PropertyKey[]): Node | null {
  let node: Node | null = root;
  for (const key of p) {
    if (isMap(node)) {
      const pair = node.items.find((it) => (it.key as { value?: unknown })?.value === key);
      if (!pair) return node;
      node = (pair.value as Node | null) ?? (pair.key as Node);
    } else if (isSeq(node) && typeof key === 'number') {
      const next = node.items[key] as Node | undefined;
      if (!next) return node;
      node = next;
    } else return node;
  }
  return node;
}

/** Parses and validates manifest YAML. Throws ValidationError with one issue per bad field ("stages.1.timeout"). */
export function parseManifest(text: string, file = 'manifest'): Manifest {
  if (Buffer.byteLength(text) > MANIFEST_MAX_BYTES) throw tooLarge(file);
  const lc = new LineCounter();
  const doc = parseYamlBounded(text, file, lc, true);
  if (doc.errors.length) {
    const e = doc.errors[0];
    const pos = e.linePos?.[0];
    throw new ValidationError(`${file} is not valid YAML: ${e.message.split('\n')[0]}`, [{ path: pos ? `line ${pos.line}` : '(root)', message: e.message.split('\n')[0] }], { where: file });
  }
  const res = manifestSchema.safeParse(yamlToJs(doc, file) ?? {});
  if (res.success) return res.data;
  const issues: Issue[] = [];
  for (const i of res.error.issues) {
    const keys = i.code === 'unrecognized_keys' ? i.keys : [null];
    for (const k of keys) {
      const p = k === null ? i.path : [...i.path, k];
      const n = nodeAt(doc.contents as Node, p);
      const line = n?.range ? lc.linePos(n.range[0]).line : undefined;
      issues.push({ path: (p.join('.') || '(root)') + (line ? ` (line ${line})` : ''), message: k === null ? i.message : `unknown field "${k}"` });
    }
  }
  throw new ValidationError(`${file} is invalid`, issues, { where: file, hint: 'Fix the fields listed; examples/rollout/manifest.yaml shows every field.' });
}

export function tooLarge(file: string): ValidationError {
  return new ValidationError(`${file} is larger than ${sizeLabel(MANIFEST_MAX_BYTES)}`, [], {
    where: file, hint: 'Split the samples into several rollouts, or generate them with "generate: {count, template}".',
  });
}

/** The samples a manifest describes, in order. */
export function samplesOf(m: Manifest): { id: string; text: string }[] {
  if (m.samples) return m.samples;
  const g = m.generate!;
  const width = String(g.count - 1).length;
  return Array.from({ length: g.count }, (_, i) => ({ id: `s${String(i).padStart(width, '0')}`, text: g.template.replaceAll('{i}', String(i)) }));
}
