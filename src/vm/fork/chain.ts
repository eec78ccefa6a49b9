/**
 * Bounded disk chains. Every capture (a fork, a saved point) freezes the machine's top overlay and moves it
 * onto a new one, so the chain grows a layer each time; QEMU opens every layer and walks them on each read
 * miss. Past a depth the machine's own frozen layers that nothing else sits on are merged, live, with
 * QEMU's block-commit: the data every layer holds stays, only the files go.
 */
import fs from 'node:fs';
import path from 'node:path';
import { UserError } from '../../errors/index.js';
import type { MachineLayout } from '../layout.js';
import { ForkPointStore } from '../store/fork-points.js';
import type { MachineStore } from '../store/machines.js';
import { diskUsage } from '../usage.js';
import type { ForkOps } from './types.js';
import { DEFAULT_MAX_CHAIN_DEPTH } from '../limits.js';

export { DEFAULT_MAX_CHAIN_DEPTH };
/** The active overlay, one merged layer and the image base: a merge cannot go below this. */
const MIN_DEPTH = 3;

/** The cap: SMOL_FORK_MAX_DEPTH, else 16. */
export function maxChainDepth(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.SMOL_FORK_MAX_DEPTH;
  if (raw === undefined || raw === '') return DEFAULT_MAX_CHAIN_DEPTH;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < MIN_DEPTH) {
    throw new UserError(`SMOL_FORK_MAX_DEPTH must be a whole number of at least ${MIN_DEPTH}, got "${raw}"`, { where: 'SMOL_FORK_MAX_DEPTH', hint: `Unset it for the default (${DEFAULT_MAX_CHAIN_DEPTH}).` });
  }
  return n;
}

/** Files in the machine's disk chain, its top overlay and the image base included (0: no disk). */
export function chainDepth(layout: Pick<MachineLayout, 'disk'>): number {
  return diskUsage(layout.disk)?.chain.length ?? 0;
}

/**
 * Which layers under the top can merge, top first: the machine's own frozen overlays (in its directory) down
 * to the first one a plain fork's clones sit on, or one outside its directory (the image base). Merging
 * rewrites the lowest of them, so none may be a layer another machine reads. Fewer than two: nothing to do.
 */
export function mergeableLayers(chain: readonly string[], ownDir: string, depended: ReadonlySet<string>): string[] {
  const out: string[] = [];
  for (const f of chain.slice(1)) {
    if (path.dirname(path.resolve(f)) !== path.resolve(ownDir) || depended.has(path.resolve(f))) break;
    out.push(f);
  }
  return out.length >= 2 ? out : [];
}

export interface MergeResult { before: number; after: number; merged: number; ms: number }

/**
 * Merges the mergeable layers of a running machine's chain when it is deeper than the cap (call under the
 * machine's fork lock). Returns null when nothing was merged.
 */
export async function capChain(store: MachineStore, ops: ForkOps, layout: MachineLayout, cap = maxChainDepth()): Promise<MergeResult | null> {
  const chain = diskUsage(layout.disk)?.chain ?? [];
  if (chain.length <= cap) return null;
  const depended = new Set(new ForkPointStore(store.db).list().flatMap((fp) => (fp.frozenDisk ? [path.resolve(fp.frozenDisk)] : [])));
  const layers = mergeableLayers(chain, layout.dir, depended);
  if (!layers.length) return null;
  const t = performance.now();
  const top = layers[0];
  const base = layers[layers.length - 1];
  await ops.commitLayers(layout, top, base);
  // QEMU now reads base where it read the layers above it; their files are nobody's
  for (const f of layers.slice(0, -1)) fs.rmSync(f, { force: true });
  return { before: chain.length, after: chainDepth(layout), merged: layers.length - 1, ms: performance.now() - t };
}
