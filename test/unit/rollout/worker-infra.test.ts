/**
 * A worker that cannot do the work says so (issue #28 item 2): a blob store that is not the one the items
 * were written to (another SMOL_HOME), a gateway nobody listens on, a ledger that stops answering. Each
 * failure is an event with the item, attempt and cause; the lease is given back at once without costing
 * the item an attempt; the worker backs off and, after N failures in a row of one cause, stops with an
 * error naming it. Real SQLite ledger, real subprocess stages, a real closed port.
 */
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BlobStore } from '../../../src/ledger/blobs.js';
import { SqliteLedger } from '../../../src/ledger/sqlite.js';
import type { Ledger } from '../../../src/ledger/types.js';
import { SmolError } from '../../../src/errors/index.js';
import { ProcessStageRunner } from '../../../src/rollout/stage-runner.js';
import { submitRollout } from '../../../src/rollout/submit.js';
import { Worker, type WorkerEvent } from '../../../src/rollout/worker.js';

let dir: string;
let ledger: SqliteLedger;

function manifest(name: string, stage: string, count = 4) {
  return `apiVersion: smol/v1\nkind: Rollout\nname: ${name}\nenvironment: { version: e1 }\ndefaults: { maxAttempts: 2, backoff: 10ms, timeout: 2s }\ngenerate: { count: ${count}, template: "x{i}" }\nstages:\n  - ${stage}\n`;
}

/** A port that was just free: connecting to it is refused. */
async function closedPort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

async function run(o: Partial<ConstructorParameters<typeof Worker>[0]>) {
  const events: WorkerEvent[] = [];
  const w = new Worker({
    ledger, blobs: new BlobStore(path.join(dir, 'other-home', 'blobs')), runner: await ProcessStageRunner.create(), concurrency: 2, leaseMs: 60_000, pollMs: 20,
    exitWhenIdleMs: 300, windowMs: 100, infraBackoff: { baseMs: 10, capMs: 40 }, onEvent: (e) => events.push(e), ...o,
  });
  const error = await w.run().then(() => null, (err: unknown) => err);
  return { w, events, error };
}

beforeEach(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-worker-infra-'));
  ledger = new SqliteLedger({ path: path.join(dir, 'l.db') });
});
afterEach(async () => {
  await ledger.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('a worker that cannot do the work', () => {
  it('cannot read its input blobs (another home): reports each item, gives the leases back, gives up with exit 69', async () => {
    await submitRollout(ledger, new BlobStore(path.join(dir, 'blobs')), manifest('b', '{ name: up, kind: cpu, command: [cat] }'));
    const { w, events, error } = await run({ giveUpAfter: 3 });
    expect(error).toBeInstanceOf(SmolError);
    expect((error as SmolError).exitCode).toBe(69);
    expect((error as SmolError).message).toMatch(/3 infrastructure failures in a row \(blob store\)/);
    expect((error as SmolError).message).toMatch(/reading input blob sha256:[0-9a-f]{12}.* is missing/);
    expect((error as SmolError).where).toBe(path.join(dir, 'other-home', 'blobs'));
    const infra = events.filter((e) => e.type === 'infra');
    expect(infra.length).toBeGreaterThanOrEqual(3);
    for (const e of infra) expect(e).toMatchObject({ area: 'blob', itemId: expect.any(Number), attempt: 1, stage: 'up', released: true });
    expect(w.infraFailures).toBe(infra.length);
    expect(events.at(-1)).toMatchObject({ type: 'stopped', completed: 0, infraFailures: infra.length });
    // not the items' fault: none leased, none dead, no attempt spent; the ledger counts the failures
    const items = await ledger.listItems('b');
    expect(items.map((i) => [i.status, i.attempt])).toEqual(items.map(() => ['queued', 0]));
    expect((await ledger.stats('b')).infraFailures).toBe(infra.length);
    expect(events.some((e) => e.type === 'concurrency' && /queue ran dry/.test(e.step.reason))).toBe(false);
  });

  it('cannot reach the gateway: gives the GPU items back and gives up with exit 75 naming the URL', async () => {
    const blobs = new BlobStore(path.join(dir, 'blobs'));
    await submitRollout(ledger, blobs, manifest('g', '{ name: gen, kind: gpu, model: { name: m, version: "1" }, promptVersion: p1 }', 2));
    const gateway = `http://127.0.0.1:${await closedPort()}`;
    const { events, error } = await run({ blobs, gateway, giveUpAfter: 2, gatewayDownMaxWaitMs: 50 });
    expect((error as SmolError).exitCode).toBe(75);
    expect((error as SmolError).message).toMatch(/2 infrastructure failures in a row \(gateway\).*ECONNREFUSED/);
    expect((error as SmolError).where).toBe(gateway);
    expect(events.filter((e) => e.type === 'infra').every((e) => e.type === 'infra' && e.area === 'gateway' && e.itemId !== undefined)).toBe(true);
    expect((await ledger.listItems('g')).every((i) => i.status === 'queued' && i.attempt === 0)).toBe(true);
  });

  it('counts an outage once however many items were in flight when it began (--give-up-after counts tries, not items)', async () => {
    const blobs = new BlobStore(path.join(dir, 'blobs'));
    await submitRollout(ledger, blobs, manifest('o', '{ name: gen, kind: gpu, model: { name: m, version: "1" }, promptVersion: p1 }', 4));
    const gateway = `http://127.0.0.1:${await closedPort()}`;
    const { w, events, error } = await run({ blobs, gateway, concurrency: 4, giveUpAfter: 2, gatewayDownMaxWaitMs: 50 });
    expect((error as SmolError).message).toMatch(/2 infrastructure failures in a row \(gateway\)/);
    const infra = events.filter((e) => e.type === 'infra');
    // the four items claimed together meet the outage once: one try; the second claim round is the second try
    expect(infra.slice(0, 4).map((e) => e.type === 'infra' && e.inARow)).toEqual([1, 1, 1, 1]);
    expect(infra.some((e) => e.type === 'infra' && e.inARow === 2)).toBe(true);
    expect(w.infraFailures).toBe(infra.length);
  });

  it('an attempt whose budget the gateway outage ate is given back, not failed (the last try timed out)', async () => {
    const blobs = new BlobStore(path.join(dir, 'blobs'));
    await submitRollout(ledger, blobs, manifest('t', '{ name: gen, kind: gpu, model: { name: m, version: "1" }, promptVersion: p1 }', 1));
    // a gateway restarting: the first connection is reset, the next is accepted and never answered
    let conns = 0;
    const held: net.Socket[] = [];
    const srv = net.createServer((s) => { if (conns++ === 0) s.resetAndDestroy(); else held.push(s); });
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    try {
      const gateway = `http://127.0.0.1:${(srv.address() as net.AddressInfo).port}`;
      const { events } = await run({ blobs, gateway, concurrency: 1, giveUpAfter: 1 });
      expect(conns).toBeGreaterThanOrEqual(2);
      expect(events.filter((e) => e.type === 'failed')).toEqual([]);
      expect(events.find((e) => e.type === 'infra')).toMatchObject({ area: 'gateway', released: true });
      // one message for every way the gateway was out of reach, so operators (and the namespace test) match one line
      for (const e of events) if (e.type === 'infra') expect(e.error).toContain('failed: cannot reach the gateway');
      expect((await ledger.listItems('t')).map((i) => [i.status, i.attempt])).toEqual([['queued', 0]]);
    } finally {
      for (const s of held) s.destroy();
      await new Promise((r) => srv.close(r));
    }
  });

  it('loses its ledger mid-run: claims fail, it backs off, then gives up with exit 75 instead of hanging', async () => {
    const blobs = new BlobStore(path.join(dir, 'blobs'));
    await submitRollout(ledger, blobs, manifest('l', '{ name: up, kind: cpu, command: [cat] }', 2));
    let down = false;
    const seen: WorkerEvent[] = [];
    // the ledger answers until the switch flips, then every call fails as a vanished server's would
    const flaky = new Proxy(ledger, {
      get(t, k, r) {
        const v = Reflect.get(t, k, r) as unknown;
        if (typeof v !== 'function') return v;
        return (...a: unknown[]) => (down ? Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:5432')) : (v as (...x: unknown[]) => unknown).apply(t, a));
      },
    }) as Ledger;
    const { w, events, error } = await run({ ledger: flaky, blobs, giveUpAfter: 4, exitWhenIdleMs: undefined, graceMs: 1000,
      onEvent: (e) => { seen.push(e); if (e.type === 'completed') down = true; } });
    expect(w.completed).toBeGreaterThanOrEqual(1);
    expect((error as SmolError).exitCode).toBe(75);
    expect((error as SmolError).message).toMatch(/4 infrastructure failures in a row \(ledger\).*ECONNREFUSED/);
    expect(events).toEqual([]); // this run's events went to its own listener
    expect(seen.filter((e) => e.type === 'infra' && e.area === 'ledger').length).toBeGreaterThanOrEqual(4);
    expect(seen.at(-1)).toMatchObject({ type: 'stopped', completed: w.completed });
  });

});
