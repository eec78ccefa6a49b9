/** The rollout, ledger and worker commands as a user runs them: exit codes, --json shapes, field-path errors. */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { root, smolRun } from './procs.js';

let dir: string;
let env: NodeJS.ProcessEnv;
const example = path.join(root, 'examples/rollout/manifest.yaml');

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-rollout-cli-'));
  env = { SMOL_HOME: dir, SMOL_LEDGER: '' };
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('smol rollout / ledger / worker commands', () => {
  it('rejects a malformed manifest with field paths (exit 65) and changes nothing', async () => {
    const bad = path.join(dir, 'bad.yaml');
    fs.writeFileSync(bad, fs.readFileSync(example, 'utf8').replace('maxAttempts: 3', 'maxAttempts: zero').replace('kind: gpu', 'kind: gpu\n    colour: red'));
    const r = await smolRun(['rollout', 'submit', bad, '--json'], env);
    expect(r.code).toBe(65);
    const err = JSON.parse(r.stderr).error;
    expect(err.type).toBe('ValidationError');
    expect(err.issues.map((i: { path: string }) => i.path.replace(/ \(line \d+\)/, '')).sort()).toEqual(['defaults.maxAttempts', 'stages.0.colour']);
    const ls = await smolRun(['rollout', 'ls', '--json'], env);
    expect(JSON.parse(ls.stdout)).toEqual([]);
  });

  it('submits idempotently, lists, shows, reports stats, cancels and checks, all as JSON', async () => {
    const first = await smolRun(['rollout', 'submit', example, '--json'], env);
    expect(first.code, first.stderr).toBe(0);
    expect(JSON.parse(first.stdout)).toMatchObject({ rolloutId: 'demo', created: true, items: 20 });
    const again = await smolRun(['rollout', 'submit', example, '--json'], env);
    expect(JSON.parse(again.stdout)).toMatchObject({ rolloutId: 'demo', created: false, items: 0 });
    const show = JSON.parse((await smolRun(['rollout', 'show', 'demo', '--json', '--limit', '2'], env)).stdout);
    expect(show.rollout).toMatchObject({ id: 'demo', envVersion: 'demo-env-1', counts: { queued: 20 } });
    expect(show.items).toHaveLength(2);
    const stats = JSON.parse((await smolRun(['rollout', 'stats', '--json'], env)).stdout);
    expect(stats).toMatchObject({ queueDepth: 20, leased: 0, results: 0, retryRate: 0 });
    const cancel = JSON.parse((await smolRun(['rollout', 'cancel', 'demo', '--json'], env)).stdout);
    expect(cancel).toEqual({ rolloutId: 'demo', canceled: 20 });
    const check = await smolRun(['ledger', 'check', '--json'], env);
    expect(check.code, check.stderr).toBe(0);
    expect(JSON.parse(check.stdout)).toMatchObject({ backend: 'sqlite', items: 20, issues: [] });
    expect((await smolRun(['rollout', 'show', 'nope'], env)).code).toBe(66);
  });

  it('checks --isolation vm flags: a missing warm machine is 66, --warm-machine without vm isolation is 65', async () => {
    const missing = await smolRun(['worker', '--isolation', 'vm', '--warm-machine', 'nope', '--exit-when-idle', '1s'], env);
    expect(missing.code).toBe(66);
    expect(missing.stderr).toContain('no machine named "nope"');
    const mixed = await smolRun(['worker', '--warm-machine', 'nope', '--exit-when-idle', '1s'], env);
    expect(mixed.code).toBe(65);
    expect(mixed.stderr).toContain('--warm-machine, --fork-point and --smolfile need --isolation vm');
  });
});
