/** `ledger check`: backend invariants plus the blob references every result and trajectory points at. */
import type { OpenLedger } from './open.js';
import type { CheckIssue } from './types.js';
import { SqliteLedger } from './sqlite.js';

export interface CheckReport { location: string; backend: string; items: number; results: number; blobsChecked: number; issues: CheckIssue[] }

export async function checkLedger(l: OpenLedger, opts: { verifyBlobs: boolean }): Promise<CheckReport> {
  const issues = await l.ledger.check();
  let items = 0;
  let results = 0;
  let blobsChecked = 0;
  const checkRef = (what: string, ref: string) => {
    blobsChecked++;
    try {
      if (opts.verifyBlobs) l.blobs.get(ref);
      else if (!l.blobs.has(ref)) issues.push({ check: 'blob references resolve', detail: `${what}: ${ref} is missing` });
    } catch (err) {
      issues.push({ check: 'blob references resolve', detail: `${what}: ${(err as Error).message}` });
    }
  };
  for (const r of await l.ledger.listRollouts()) {
    items += Object.values(r.counts).reduce((a, b) => a + b, 0);
    for (const res of await l.ledger.results({ rolloutId: r.id })) {
      results++;
      checkRef(`result ${res.idempotencyKey}`, res.outputRef);
    }
    for (const t of await l.ledger.trajectories(r.id)) checkRef(`trajectory ${r.id}/${t.sampleId}`, t.ref);
  }
  // a clean checkpoint keeps the WAL from carrying old frames forward
  if (l.ledger instanceof SqliteLedger) l.ledger.checkpoint();
  return { location: l.location.ledger.replace(/:[^:@/]*@/, ':***@'), backend: l.ledger.backend, items, results, blobsChecked, issues };
}
