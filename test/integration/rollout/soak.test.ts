/**
 * 300 samples (SMOL_SOAK_N; 1,000 for the long soak) through generate (GPU, via the gateway) → score (CPU) with faults injected while it runs:
 * a worker SIGKILLed, one SIGSTOPped past its leases and resumed, the gateway killed and restarted, a
 * replacement worker started, and stage failures (transient and permanent). Afterwards: every item is
 * done or dead, one result per idempotency key, no execution beyond max_attempts, no SQLITE_BUSY anywhere.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BlobStore } from '../../../src/ledger/blobs.js';
import { SqliteLedger } from '../../../src/ledger/sqlite.js';
import { submitRollout } from '../../../src/rollout/submit.js';
import { startUpstream, type TestUpstream } from '../../fixtures/upstream/server.js';
import { smol, type Proc } from './procs.js';
import Database from 'better-sqlite3';

// 300 is the fewest that proves what 1,000 does: the faults land at 15 % (45 items, each of 3 workers holding 6
// leases), and several samples end in 99 (s099, s199, s299: permanent failures among retried ones). The long
// soak: SMOL_SOAK_N=1000 npx vitest run --project integration test/integration/rollout/soak.test.ts
const N = Number(process.env.SMOL_SOAK_N ?? 300);
let dir: string;
let up: TestUpstream;
const procs: Proc[] = [];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// samples ending in 7 fail their first score attempt; those ending in 99 always fail (they must end dead)
const manifest = `apiVersion: smol/v1
kind: Rollout
name: soak
environment: { version: soak-1 }
defaults: { maxAttempts: 3, backoff: 100ms, timeout: 30s }
generate: { count: ${N}, template: "episode {i}" }
stages:
  - { name: gen, kind: gpu, model: { name: m, version: '1' }, promptVersion: p, params: { max_tokens: 8 } }
  - name: score
    kind: cpu
    command: [sh, -c, 'case $SMOL_SAMPLE_ID in *99) echo "permanent failure" >&2; exit 4;; *7) [ "$SMOL_ATTEMPT" = 1 ] && exit 3;; esac; wc -c']
`;

describe('rollout soak with injected faults (real processes)', () => {
  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-soak-'));
    up = await startUpstream({ delayMs: 5 });
  });
  afterAll(async () => {
    for (const p of procs) { p.kill('SIGCONT'); p.kill('SIGKILL'); }
    await Promise.all(procs.map((p) => p.exited));
    await up.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it(`${N} samples end done or dead with exactly one result per key`, { timeout: 300_000 }, async () => {
    const env = { SMOL_HOME: dir, SMOL_LEDGER: '' };
    const ledger = new SqliteLedger({ path: path.join(dir, 'ledger.db') });
    await submitRollout(ledger, new BlobStore(path.join(dir, 'blobs')), manifest);
    const gateway = (port: string) => {
      const g = smol(['gateway', '--json', '--listen', `127.0.0.1:${port}`, '--upstream', up.url, '--max-batch', '16', '--batch-window', '10'], env);
      procs.push(g);
      return g;
    };
    const g1 = gateway('0');
    const url = String((await g1.waitFor((e) => typeof e.url === 'string')).url);
    const worker = () => {
      const w = smol(['worker', '--json', '--gateway', url, '--concurrency', '6', '--lease', '3s', '--exit-when-idle', '2s'], env);
      procs.push(w);
      return w;
    };
    const [w1, w2, w3] = [worker(), worker(), worker()];
    const doneCount = async () => (await ledger.stats('soak')).results;

    // the faults must land mid-work: on a quiet host the first worker up can do 15 % alone while the
    // others still start, and a fault on a worker that holds nothing proves nothing
    const db = new Database(path.join(dir, 'ledger.db'), { readonly: true });
    const leasedBy = db.prepare("SELECT count(*) AS n FROM items WHERE status = 'leased' AND lease_owner LIKE ?");
    const holds = (w: Proc) => (leasedBy.get(`%:${w.child.pid}`) as { n: number }).n > 0;
    while ((await doneCount()) < N * 0.15 || !holds(w1) || !holds(w2)) await sleep(20);
    db.close();
    w1.kill('SIGKILL'); // dies holding leases mid-work
    w2.kill('SIGSTOP'); // a zombie: its leases expire while it is stopped
    g1.kill('SIGKILL'); // the gateway dies with batches in flight
    await sleep(3500); // past the 3 s lease
    gateway(url.split(':').pop()!);
    w2.kill('SIGCONT');
    const w4 = worker(); // replacement for the killed one

    const until = Date.now() + 200_000;
    for (;;) {
      const s = await ledger.stats('soak');
      if (s.queueDepth + s.leased === 0) break;
      if (Date.now() > until) throw new Error(`soak did not finish: ${JSON.stringify(s)}; processes: ${procs.map((p) => `${p.child.pid} exit=${p.child.exitCode} ${p.stderr.slice(-300)}`).join(' | ')}`);
      await sleep(500);
    }
    for (const w of [w2, w3, w4]) w.kill('SIGTERM');
    await Promise.all([w2, w3, w4].map((w) => w.exited));

    const items = await ledger.listItems('soak', 10 * N);
    const results = await ledger.results({ rolloutId: 'soak' });
    const stats = await ledger.stats('soak');
    // every item reached a final state
    expect(items.filter((i) => i.status !== 'done' && i.status !== 'dead')).toEqual([]);
    // exactly the permanently failing samples are dead, after all their attempts, with their error
    const dead = items.filter((i) => i.status === 'dead');
    const width = String(N - 1).length;
    const permanent = Array.from({ length: N }, (_, i) => `s${String(i).padStart(width, '0')}`).filter((id) => id.endsWith('99'));
    expect(dead.map((i) => i.sampleId).sort()).toEqual(permanent);
    for (const d of dead) expect(d).toMatchObject({ stage: 'score', attempt: 3, lastError: 'sh failed (exit 4): permanent failure' });
    // one result per idempotency key, and only for done items
    const keys = results.map((r) => r.idempotencyKey);
    expect(new Set(keys).size).toBe(keys.length);
    expect(keys.sort()).toEqual(items.filter((i) => i.status === 'done').map((i) => i.idempotencyKey).sort());
    expect(results).toHaveLength(2 * N - dead.length);
    expect(stats.trajectories).toBe(N - dead.length);
    // executions never exceed max_attempts
    for (const i of items) {
      expect(i.attempt).toBeLessThanOrEqual(i.maxAttempts);
      expect((await ledger.attemptsOf(i.id)).length).toBeLessThanOrEqual(i.maxAttempts);
    }
    expect(await ledger.check()).toEqual([]);
    // the faults really happened and were counted
    expect(stats.leaseExpiries).toBeGreaterThan(0);
    // no SQLITE_BUSY (or any internal error) reached a caller in any process
    for (const p of procs) expect(p.stderr).not.toMatch(/SQLITE_BUSY|database is locked|internal error/);
    process.stderr.write(`soak: ${items.length} items, ${results.length} results, ${stats.attempts} attempts, retry rate ${(stats.retryRate * 100).toFixed(1)}%, ${stats.leaseExpiries} lease expiries, ${stats.staleRejections} stale rejections, ${up.calls.length} upstream batches for ${N} generations\n`);
    await ledger.close();
  });
});
