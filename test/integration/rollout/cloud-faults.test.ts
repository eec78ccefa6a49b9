/**
 * The cloud plane's failures with real processes across network namespaces (test/helpers/cloud-hosts.ts):
 * a worker host's link cut while it holds leases (its items finish on the other host exactly once; when the
 * link returns, its late writes are rejected as stale and counted), and PostgreSQL restarted under two
 * running workers (they reconnect and finish; nothing lost, nothing done twice).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { netnsUnavailableReason } from '../../helpers/netns.js';
import { pgUnavailableReason } from '../../helpers/postgres.js';
import { cpuManifest, startCloud, until, workerIdOf, type Cloud } from '../../helpers/cloud-hosts.js';
import type { PostgresLedger } from '../../../src/ledger/postgres.js';

const skip = netnsUnavailableReason() ?? pgUnavailableReason();
let cloud: Cloud;

/** Every item of the rollout done, one result per item, and the attempts each made (worker and outcome). */
async function settled(l: PostgresLedger, rollout: string, count: number) {
  const items = await l.listItems(rollout);
  expect(items).toHaveLength(count);
  expect(items.map((i) => i.status)).toEqual(Array(count).fill('done'));
  const results = await l.results({ rolloutId: rollout });
  expect(results.map((r) => r.idempotencyKey).sort()).toEqual(items.map((i) => i.idempotencyKey).sort());
  const attempts = new Map<number, { worker: string; outcome: string }[]>();
  for (const i of items) attempts.set(i.id, await l.attemptsOf(i.id));
  // nothing done twice: one completed attempt per item, and it is the one whose result was kept
  for (const i of items) expect(attempts.get(i.id)!.filter((a) => a.outcome === 'done')).toHaveLength(1);
  expect(await l.check()).toEqual([]);
  return { items, results, attempts };
}

describe.skipIf(skip)(`cloud plane failures across namespaces${skip ? ` (skipped: ${skip})` : ''}`, () => {
  beforeAll(async () => { cloud = await startCloud(['w1', 'w2']); });
  afterEach(async () => { await cloud?.killWorkers(); });
  afterAll(async () => { await cloud?.close(); });

  it('a worker host cut off mid-lease: the other host finishes its item once; its late completion is rejected as stale', async () => {
    // w1 stores its output, then pauses before completing (the project's fault hook): the cut falls in the
    // pause, so what w1 sends after the link returns is a real completion on a lease it has lost
    const w1 = cloud.worker('w1', ['--concurrency', '1', '--lease', '2s'], { SMOL_WORKER_FAULT: 'after-output=8000' });
    const w2 = cloud.worker('w2', ['--concurrency', '2', '--lease', '2s']);
    await Promise.all([w1, w2].map((w) => w.waitFor((e) => e.type === 'concurrency')));
    await cloud.submit('split', cpuManifest('split', 3, 2));
    const cutItem = Number((await w1.waitFor((e) => e.type === 'output')).itemId);
    cloud.lan.cut('w1'); // its sockets to PostgreSQL stay open and go quiet; new ones find no route

    await until('all 3 items are done', () => cloud.view(async (l) => (await l.getRollout('split'))!.counts.done === 3), [w2]);
    expect(w2.events.filter((e) => e.type === 'completed' && Number(e.itemId) === cutItem)).toHaveLength(1);
    cloud.lan.mend('w1');
    const late = await w1.waitFor((e) => e.type === 'rejected' && e.op === 'complete', 60_000);
    expect(late).toMatchObject({ itemId: cutItem, attempt: 1, reason: 'stale' });
    for (const w of [w1, w2]) w.kill('SIGTERM');
    for (const w of [w1, w2]) expect(await w.exited, w.stderr).toBe(0);
    const rejected = w1.events.filter((e) => e.type === 'rejected');
    // its renewals were turned down too once they got through: every write on the lost lease, none applied
    expect(rejected.map((e) => [e.itemId, e.reason])).toEqual(rejected.map(() => [cutItem, 'stale']));
    expect(w1.events.filter((e) => e.type === 'completed')).toEqual([]);
    // while cut off it said so: the ledger out of reach, named, not a silent stall
    expect(w1.events.some((e) => e.type === 'infra' && e.area === 'ledger' && String(e.where).includes(cloud.gpu.addr))).toBe(true);

    await cloud.view(async (l) => {
      const { results, attempts } = await settled(l, 'split', 3);
      expect(attempts.get(cutItem)!.map((a) => [a.worker, a.outcome])).toEqual([[workerIdOf(w1), 'expired'], [workerIdOf(w2), 'done']]);
      expect(results.find((r) => r.itemId === cutItem)!.attempt).toBe(2);
      const stats = await l.stats('split');
      expect(stats.leaseExpiries).toBe(1);
      expect(stats.staleRejections).toBe(rejected.length);
    });
    const shown = await cloud.runOn('gpu', ['rollout', 'stats', '--rollout', 'split', '--json']);
    expect(shown.code, shown.stderr).toBe(0);
    expect(JSON.parse(shown.stdout)).toMatchObject({ leaseExpiries: 1, staleRejections: rejected.length });
  });

  // The bug: pg-pool takes its error listener off a client while it is checked out, and neither ledger/postgres.ts
  // nor ledger/postgres-blobs.ts adds one, so a server that ends the session (57P01) or drops the socket
  // (ECONNRESET) between two queries of a transaction crashes the worker with an unhandled 'error' event
  // (exit 1): 3 of 4 workers in two runs here. With `pool.on('connect', (c) => c.on('error', () => undefined))`
  // beside the pool's own error handler this test passes as written (checked twice on a copy of the tree).
  it('PostgreSQL restarted mid-run: both workers reconnect and finish; nothing lost, nothing done twice', async () => {
    await cloud.submit('restart', cpuManifest('restart', 8, 0.5));
    const ws = ['w1', 'w2'].map((h) => cloud.worker(h, ['--concurrency', '2', '--lease', '3s']));
    await Promise.all(ws.map((w) => w.waitFor((e) => e.type === 'claimed')));
    await ws[0].waitFor((e) => e.type === 'completed');
    cloud.pg.restart(); // -m fast: every session is terminated, the server is down for a moment
    await until('all 8 items are done', () => cloud.view(async (l) => (await l.getRollout('restart'))!.counts.done === 8), ws);
    for (const w of ws) w.kill('SIGTERM');
    for (const w of ws) expect(await w.exited, w.stderr).toBe(0);
    const infra = ws.flatMap((w) => w.events.filter((e) => e.type === 'infra'));
    await cloud.view(async (l) => {
      const { attempts } = await settled(l, 'restart', 8);
      const completed = ws.flatMap((w) => w.events.filter((e) => e.type === 'completed').map((e) => Number(e.itemId)));
      expect(completed.sort((a, b) => a - b)).toEqual([...attempts.keys()].sort((a, b) => a - b));
      // what the restart cost is counted where an operator looks: the workers' events and the ledger's stats
      expect((await l.stats('restart')).infraFailures).toBe(infra.filter((e) => e.released).length);
    });
  });
});
