/** `rollout submit`: validate, store the immutable manifest by digest, create the rollout and its first items. */
import path from 'node:path';
import { ConflictError, NotFoundError } from '../errors/index.js';
import { digestOf, type BlobStore } from '../ledger/blobs.js';
import type { Ledger } from '../ledger/types.js';
import { readCapped } from '../util/read-capped.js';
import { MANIFEST_MAX_BYTES } from './limits.js';
import { environmentVersion, parseManifest, samplesOf, tooLarge } from './manifest.js';
import { itemFor } from './pipeline.js';

export interface SubmitResult { rolloutId: string; manifestDigest: string; created: boolean; items: number }

/** The manifest's text; a file past MANIFEST_MAX_BYTES is refused before it is read whole. */
export function readManifestFile(file: string): string {
  let text: string | null;
  try {
    text = readCapped(file, MANIFEST_MAX_BYTES);
  } catch {
    throw new NotFoundError(`manifest not found: ${file}`, { hint: 'Pass the path of a rollout manifest (see examples/rollout/manifest.yaml).' });
  }
  if (text === null) throw tooLarge(file);
  return text;
}

/** Idempotent: resubmitting the same manifest returns the existing rollout and changes nothing. */
export async function submitRollout(ledger: Ledger, blobs: BlobStore, text: string, file = 'manifest'): Promise<SubmitResult> {
  const m = parseManifest(text, path.basename(file));
  // canonical body: the validated manifest with defaults applied, so equal meaning gives an equal digest
  const canonical = JSON.stringify(m);
  const digest = digestOf(canonical);
  const existing = await ledger.getRollout(m.name);
  const conflict = () => new ConflictError(`rollout ${m.name} already exists with a different manifest`, {
    where: file, hint: `Rename the rollout (field "name") or cancel ${m.name}; a submitted manifest is immutable.`,
  });
  if (existing) {
    if (existing.manifestDigest !== digest) throw conflict();
    return { rolloutId: m.name, manifestDigest: digest, created: false, items: 0 };
  }
  const now = await ledger.now();
  const deadlineAt = m.defaults.deadline ? now + m.defaults.deadline : null;
  const rollout = { id: m.name, envVersion: environmentVersion(m) };
  const samples = samplesOf(m);
  const inputRefs = await blobs.putMany(samples.map((s) => s.text)); // small inputs share one commit
  const items = samples.map((s, i) => itemFor(rollout, m, {
    stageIndex: 0, sampleId: s.id, inputRef: inputRefs[i], inputVersion: digest.slice(0, 19), deadlineAt,
  }));
  await ledger.putManifest(digest, canonical);
  const { created } = await ledger.createRollout({ id: m.name, name: m.name, manifestDigest: digest, envVersion: rollout.envVersion, gpus: m.gpus }, items);
  if (!created) {
    // lost a race with another submitter: fine if it submitted the same manifest
    if ((await ledger.getRollout(m.name))?.manifestDigest !== digest) throw conflict();
    return { rolloutId: m.name, manifestDigest: digest, created: false, items: 0 };
  }
  return { rolloutId: m.name, manifestDigest: digest, created: true, items: items.length };
}
