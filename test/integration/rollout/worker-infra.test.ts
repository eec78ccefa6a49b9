/**
 * Issue #28 item 2 with real processes: `smol worker` run with another home's blobs (as a second host without
 * shared storage would be) against a SQLite ledger, and a worker whose PostgreSQL server is stopped mid-run.
 * Each must say what failed, give the leases back, and exit non-zero, instead of exiting 0 having done nothing.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { pgUnavailableReason, startPostgres } from '../../helpers/postgres.js';
import { smol, smolRun, type Proc } from './procs.js';

let dir: string;
let procs: Proc[];

function manifest(name: string, cmd: string, count: number): string {
  const file = path.join(dir, `${name}.yaml`);
  fs.writeFileSync(file, `apiVersion: smol/v1\nkind: Rollout\nname: ${name}\nenvironment: { version: e1 }\ndefaults: { maxAttempts: 2, backoff: 50ms, timeout: 60s }\ngenerate: { count: ${count}, template: "in{i}" }\nstages:\n  - { name: only, kind: cpu, command: ${cmd} }\n`);
  return file;
}

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-worker-infra-'));
  procs = [];
});
afterEach(async () => {
  for (const p of procs) p.kill('SIGKILL');
  await Promise.all(procs.map((p) => p.exited));
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('a worker that cannot do the work (real processes)', () => {
  it('with another home\'s blobs: one line per item, leases given back, exit 69, counted in rollout stats', async () => {
    const a = { SMOL_HOME: path.join(dir, 'a'), SMOL_LEDGER: path.join(dir, 'a', 'ledger.db'), SMOL_BLOBS: '' };
    expect((await smolRun(['rollout', 'submit', manifest('r', '[cat]', 6)], a)).code).toBe(0);
    // host B: the same ledger, its own (empty) blob store
    const b = { ...a, SMOL_HOME: path.join(dir, 'b'), SMOL_BLOBS: path.join(dir, 'b', 'blobs') };
    const w = await smolRun(['worker', '--concurrency', '2', '--give-up-after', '3', '--exit-when-idle', '2s'], b);
    expect(w.code).toBe(69);
    expect(w.stderr).toMatch(/worker: item \d+ attempt 1 \(stage only\): reading input blob sha256:[0-9a-f]{64} failed: blob sha256:[0-9a-f]{64} is missing \[.*b\/blobs\]; lease released/);
    expect(w.stderr).toMatch(/error: worker gave up after 3 infrastructure failures in a row \(blob store\)/);
    expect(w.stderr).not.toMatch(/queue ran dry/);
    const stats = await smolRun(['rollout', 'stats', '--json', '--rollout', 'r'], a);
    const s = JSON.parse(stats.stdout) as { infraFailures: number; queueDepth: number; leased: number; dead: number };
    expect(s).toMatchObject({ queueDepth: 6, leased: 0, dead: 0 });
    expect(s.infraFailures).toBeGreaterThanOrEqual(3);
    expect((await smolRun(['rollout', 'stats', '--rollout', 'r'], a)).stdout).toMatch(/given back on infrastructure failures/);
  });

  const reason = pgUnavailableReason();
  it.skipIf(reason !== null)(`loses its PostgreSQL server mid-run: exits 75 naming the ledger, no hang${reason ? ` (skipped: ${reason})` : ''}`, async () => {
    const server = await startPostgres();
    try {
      const env = { SMOL_HOME: dir, SMOL_LEDGER: server.url(), SMOL_BLOBS: '' };
      expect((await smolRun(['rollout', 'submit', manifest('p', `[sh, -c, 'sleep 0.5; cat']`, 20)], env)).code).toBe(0);
      const w = smol(['worker', '--json', '--concurrency', '1', '--give-up-after', '3', '--lease', '5s', '--grace', '2s'], env);
      procs.push(w);
      await w.waitFor((e) => e.type === 'completed');
      server.stop();
      const code = await w.exited; // the test's own timeout is the "no hang" bound
      expect(code).toBe(75);
      expect(w.events.some((e) => e.type === 'infra' && e.area === 'ledger')).toBe(true);
      expect(w.stderr).toMatch(/worker gave up after 3 infrastructure failures in a row \(ledger\)/);
      expect(w.stderr).toContain(`"where":"${server.url()}"`);
    } finally {
      server.stop();
    }
  });
});
