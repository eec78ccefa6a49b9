/**
 * `ledger check`: backend invariants plus the blobs the ledger names, in whichever store is in use. Every
 * referenced digest must be present; with `verifyBlobs` its bytes are streamed and re-hashed too, and the
 * store's other blobs are counted as orphans (a blob written before a row that then never came: a stale
 * worker's output, a crash between the two). Orphans are reported, not failures: they cost space, not truth.
 */
import type { OpenLedger } from './open.js';
import { redactUrl } from './open.js';
import type { CheckIssue } from './types.js';
import { SqliteLedger } from './sqlite.js';

/** Orphan digests a report lists by name; the count covers them all. */
const ORPHANS_LISTED = 20;

export interface CheckReport {
  location: string;
  backend: string;
  /** The blob store checked: 'files' (a directory) or 'postgres' (rows of the ledger's database). */
  blobStore: { kind: string; where: string };
  items: number;
  results: number;
  blobsChecked: number;
  /** Only with verifyBlobs: blobs in the store that no row names. */
  orphans?: { count: number; digests: string[] };
  issues: CheckIssue[];
}

export async function checkLedger(l: OpenLedger, opts: { verifyBlobs: boolean }): Promise<CheckReport> {
  const issues = await l.ledger.check();
  let items = 0;
  let results = 0;
  for (const r of await l.ledger.listRollouts()) {
    items += Object.values(r.counts).reduce((a, b) => a + b, 0);
    results += (await l.ledger.results({ rolloutId: r.id })).length;
  }
  const refs = await l.ledger.blobRefs();
  const bad = (what: string, detail: string) => issues.push({ check: 'blob references resolve', detail: `${what}: ${detail}` });
  const missing = new Set(await l.blobs.missing(refs.map((r) => r.ref)));
  for (const r of refs) if (missing.has(r.ref)) bad(r.what, `${r.ref} is missing`);
  let orphans: CheckReport['orphans'];
  if (opts.verifyBlobs) {
    for (const r of refs) {
      if (missing.has(r.ref)) continue;
      try {
        for await (const _ of l.blobs.read(r.ref)) { /* read() hashes as it streams and throws at the end on a mismatch */ }
      } catch (err) {
        bad(r.what, (err as Error).message);
      }
    }
    const named = new Set(refs.map((r) => r.ref));
    const found = new Set<string>();
    for await (const d of l.blobs.list()) if (!named.has(d)) found.add(d);
    orphans = { count: found.size, digests: [...found].slice(0, ORPHANS_LISTED) };
  }
  // a clean checkpoint keeps the WAL from carrying old frames forward
  if (l.ledger instanceof SqliteLedger) l.ledger.checkpoint();
  return {
    location: redactUrl(l.location.ledger), backend: l.ledger.backend, blobStore: { kind: l.blobs.kind, where: l.blobs.where },
    items, results, blobsChecked: refs.length, ...(orphans ? { orphans } : {}), issues,
  };
}
