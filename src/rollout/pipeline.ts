/**
 * Stage sequencing: completing stage k of a sample enqueues stage k+1 with the output as its input; the
 * last stage's completion assembles the trajectory (every step's output reference) into one blob.
 * Idempotency keys are rollout/sample/stage, so a replayed completion can never enqueue twice.
 */
import type { BlobStore } from '../ledger/blobs.js';
import type { Ledger, NewItem, RolloutRecord, WorkItem } from '../ledger/types.js';
import { NotFoundError } from '../errors/index.js';
import { guard } from './infra.js';
import { manifestSchema, type Manifest, type Stage } from './manifest.js';

export function idempotencyKey(rolloutId: string, sampleId: string, stage: string): string {
  return `${rolloutId}/${sampleId}/${stage}`;
}

export interface ItemSpec { stageIndex: number; sampleId: string; inputRef: string; inputVersion: string; deadlineAt: number | null }

export function itemFor(r: Pick<RolloutRecord, 'id' | 'envVersion'>, m: Manifest, s: ItemSpec): NewItem {
  const stage: Stage = m.stages[s.stageIndex];
  return {
    rolloutId: r.id, stage: stage.name, stageIndex: s.stageIndex, kind: stage.kind, sampleId: s.sampleId,
    inputRef: s.inputRef, inputVersion: s.inputVersion, envVersion: r.envVersion,
    idempotencyKey: idempotencyKey(r.id, s.sampleId, stage.name),
    maxAttempts: stage.maxAttempts ?? m.defaults.maxAttempts, timeoutMs: stage.timeout ?? m.defaults.timeout,
    backoffMs: stage.backoff ?? m.defaults.backoff, deadlineAt: s.deadlineAt,
  };
}

/**
 * What completing `item` with `outputRef` should also do: enqueue the next stage, or finish a trajectory.
 * `at` names the ledger and the blob store in an InfraFailure when either is out of reach.
 */
export async function advance(ledger: Ledger, blobs: BlobStore, m: Manifest, item: WorkItem, attempt: number, outputRef: string,
  at: { ledger: string; blobs: string } = { ledger: 'the ledger', blobs: 'the blob store' }):
Promise<{ next?: NewItem[]; trajectory?: { rolloutId: string; sampleId: string; ref: string } }> {
  if (item.stageIndex + 1 < m.stages.length) {
    const next = itemFor({ id: item.rolloutId, envVersion: item.envVersion }, m, {
      stageIndex: item.stageIndex + 1, sampleId: item.sampleId, inputRef: outputRef,
      inputVersion: `${item.stage}#${attempt}`, deadlineAt: item.deadlineAt,
    });
    return { next: [next] };
  }
  const earlier = await guard('ledger', `reading the results of sample ${item.sampleId}`, at.ledger, () => ledger.results({ rolloutId: item.rolloutId, sampleId: item.sampleId }));
  const byStage = new Map(earlier.map((r) => [r.stage, r]));
  const steps = m.stages.map((s, i) => {
    if (i === item.stageIndex) return { stage: s.name, kind: s.kind, attempt, outputRef };
    const r = byStage.get(s.name);
    return { stage: s.name, kind: s.kind, attempt: r?.attempt ?? null, outputRef: r?.outputRef ?? null };
  });
  const trajectory = {
    apiVersion: 'smol/v1', kind: 'Trajectory', rolloutId: item.rolloutId, sampleId: item.sampleId,
    environmentVersion: item.envVersion, steps, final: outputRef,
  };
  const ref = await guard('blob', 'writing the trajectory blob', at.blobs, () => blobs.put(JSON.stringify(trajectory)));
  return { trajectory: { rolloutId: item.rolloutId, sampleId: item.sampleId, ref } };
}

/** Manifests are immutable, so a process caches them by rollout for its lifetime. */
export class ManifestCache {
  private readonly cache = new Map<string, Manifest>();
  constructor(private readonly ledger: Ledger) {}

  async get(rolloutId: string): Promise<Manifest> {
    const hit = this.cache.get(rolloutId);
    if (hit) return hit;
    const r = await this.ledger.getRollout(rolloutId);
    const body = r ? await this.ledger.getManifest(r.manifestDigest) : null;
    if (!r || !body) throw new NotFoundError(`rollout ${rolloutId} or its manifest is missing from the ledger`);
    const m = manifestSchema.parse(JSON.parse(body));
    this.cache.set(rolloutId, m);
    return m;
  }
}
