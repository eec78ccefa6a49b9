/** How `smol prune`, `machine prune` and `pack prune` print their results. */
import type { PruneSummary } from '../vm/api/prune.js';
import { formatBytes, printJson } from './output.js';

export function printPrune(s: PruneSummary, json?: boolean): void {
  if (json) return printJson(s);
  const verb = s.dryRun ? 'would remove' : 'removed';
  for (const r of s.results) {
    for (const i of r.removed) process.stdout.write(`${r.kind}: ${verb} ${i.name} (${formatBytes(i.bytes)})\n`);
  }
  const n = s.results.reduce((k, r) => k + r.removed.length, 0);
  const parts = s.results.map((r) => `${r.kind} ${r.removed.length}`).join(', ');
  process.stdout.write(`${s.dryRun ? 'would free' : 'freed'} ${formatBytes(s.bytes)} (${n ? parts : 'nothing to prune'})${s.dryRun ? '; nothing was removed (--dry-run)' : ''}\n`);
}
