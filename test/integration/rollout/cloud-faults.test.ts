/**
 * The cloud plane's failures with real processes across network namespaces (test/helpers/cloud-hosts.ts):
 * a worker host's link cut while it holds leases (its items finish on the other host exactly once; when the
 * link returns, its late writes are rejected as stale and counted); PostgreSQL restarted under two running
 * workers (they reconnect and finish; nothing lost, nothing done twice); the gateway killed mid-batch and
 * started again on its address (each item it failed is given back as an infrastructure failure, counted,
 * and done once after it returns); and a worker host that vanishes for good (its items are finished by the
 * other host once their leases expire). The last leaves a host cut off, so it runs last.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { netnsUnavailableReason } from '../../helpers/netns.js';
import { pgUnavailableReason } from '../../helpers/postgres.js';
import { cpuManifest, settled, startCloud, until, workerIdOf, type Cloud } from '../../helpers/cloud-hosts.js';

const skip = netnsUnavailableReason() ?? pgUnavailableReason();
let cloud: Cloud;

describe.skipIf(skip)(`cloud plane failures across namespaces${skip ? ` (skipped: ${skip})` : ''}`, () => {
  beforeAll(async () => { cloud = await startCloud(['w1', 'w2'], { upstreamDelayMs: 1000 }); }); // a batch the gateway test can kill
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

  it('the gateway killed mid-batch and started again: each item it failed is given back, counted, and done once after', async () => {
    // the attempt's budget (timeout 3s) bounds how long a worker waits within it for a gateway that refuses
    // connections, so this outage is seen per item (and counted as one try per claim round); --give-up-after is
    // raised so that a slow restart under a loaded CI host cannot make the workers give up (that path has its
    // own tests in worker-infra.test.ts)
    await cloud.submit('gwdown', 'apiVersion: smol/v1\nkind: Rollout\nname: gwdown\nenvironment: { version: gwdown-env }\n'
      + 'defaults: { maxAttempts: 2, backoff: 100ms, timeout: 3s }\ngenerate: { count: 8, template: "prompt {i}" }\n'
      + 'stages:\n  - { name: gen, kind: gpu, model: { name: m, version: "1" }, promptVersion: p1, params: { max_tokens: 4 } }\n');
    const ws = ['w1', 'w2'].map((h) => cloud.worker(h, ['--concurrency', '2', '--lease', '3s', '--give-up-after', '50']));
    await Promise.race(ws.map((w) => w.waitFor((e) => e.type === 'completed')));
    const old = cloud.gateway;
    old.kill('SIGKILL'); // mid-batch: the next batch went upstream when the first came back
    await old.exited;
    // both hosts see it on the items they hold: each given back at once and counted, then a pause before the next claim
    await Promise.all(ws.map((w) => w.waitFor((e) => e.type === 'infra', 30_000)));
    await cloud.startGateway();
    await until('all 8 items are done', () => cloud.view(async (l) => (await l.getRollout('gwdown'))!.counts.done === 8), ws);
    for (const w of ws) w.kill('SIGTERM');
    for (const w of ws) expect(await w.exited, w.stderr).toBe(0);

    const infra = ws.flatMap((w) => w.events.filter((e) => e.type === 'infra'));
    for (const e of infra) {
      expect(e).toMatchObject({ area: 'gateway', released: true, stage: 'gen', itemId: expect.any(Number) });
      expect(e.where).toBe(cloud.gatewayUrl);
      expect(String(e.error)).toContain(`POST ${new URL('/v1/infer', cloud.gatewayUrl).href} failed: cannot reach the gateway`);
      expect(Number(e.backoffMs)).toBeGreaterThanOrEqual(0); // an item in flight when the outage began adds no pause of its own
    }
    for (const w of ws) expect(Number(w.events.find((e) => e.type === 'infra')!.backoffMs)).toBeGreaterThan(0);
    // an outage is not the item's fault: no attempt failed, and none of the given-back ones counted
    for (const w of ws) expect(w.events.filter((e) => e.type === 'failed' || e.type === 'rejected')).toEqual([]);
    for (const w of ws) expect(w.events.find((e) => e.type === 'stopped')).toMatchObject({ infraFailures: w.events.filter((e) => e.type === 'infra').length });
    await cloud.view(async (l) => {
      const { items, attempts } = await settled(l, 'gwdown', 8);
      for (const i of items) expect(attempts.get(i.id)!.map((a) => a.outcome)).toEqual(['done']);
      for (const i of items) expect((await l.getInference(i.idempotencyKey))?.status).toBe('done');
      const stats = await l.stats('gwdown');
      expect(stats.infraFailures).toBe(infra.length);
      expect(stats.inference).toMatchObject({ requests: 8, done: 8 });
    });
    const shown = await cloud.runOn('gpu', ['rollout', 'stats', '--rollout', 'gwdown', '--json']);
    expect(shown.code, shown.stderr).toBe(0);
    expect(JSON.parse(shown.stdout)).toMatchObject({ infraFailures: infra.length });
  });

  // last: the vanished host's link stays down
  it('a worker host vanishes for good: once its leases expire, the other host finishes its items, each once', async () => {
    const [w1, w2] = ['w1', 'w2'].map((h) => cloud.worker(h, ['--concurrency', '2', '--lease', '2s']));
    // both claiming before there is work, two slots each for four items: each host holds two (a slow start
    // under load would otherwise let one host take them all)
    await Promise.all([w1, w2].map((w) => w.waitFor((e) => e.type === 'concurrency')));
    await cloud.submit('vanish', cpuManifest('vanish', 4, 3));
    await Promise.all([w1, w2].map((w) => w.waitFor((e) => e.type === 'claimed')));
    await cloud.vanish('w1', w1);
    // what it held, as the ledger saw it when it vanished: leased by w1
    const lost = await cloud.view(async (l) => {
      const ids: number[] = [];
      for (const i of await l.listItems('vanish')) if (i.status === 'leased' && (await l.attemptsOf(i.id)).at(-1)?.worker === workerIdOf(w1)) ids.push(i.id);
      return ids;
    });
    expect(lost.length).toBeGreaterThan(0);
    await until('all 4 items are done', () => cloud.view(async (l) => (await l.getRollout('vanish'))!.counts.done === 4), [w2]);
    w2.kill('SIGTERM');
    expect(await w2.exited, w2.stderr).toBe(0);
    await cloud.view(async (l) => {
      const { attempts } = await settled(l, 'vanish', 4);
      for (const id of lost) expect(attempts.get(id)!.map((a) => [a.worker, a.outcome])).toEqual([[workerIdOf(w1), 'expired'], [workerIdOf(w2), 'done']]);
      expect((await l.stats('vanish')).leaseExpiries).toBe(lost.length);
    });
    for (const id of lost) expect(w2.events.filter((e) => e.type === 'completed' && Number(e.itemId) === id)).toHaveLength(1);
  });
});
