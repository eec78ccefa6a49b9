import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../../src/errors/index.js';
import { BlobStore } from '../../../src/ledger/blobs.js';
import { SqliteLedger } from '../../../src/ledger/sqlite.js';
import { parseManifest, samplesOf, stageIsolation, type CpuStage } from '../../../src/rollout/manifest.js';
import { readManifestFile, submitRollout } from '../../../src/rollout/submit.js';
import { ConflictError } from '../../../src/errors/index.js';
import { validationIssues } from '../../helpers/validation.js';

const example = fs.readFileSync(path.join(import.meta.dirname, '../../../examples/rollout/manifest.yaml'), 'utf8');

const issuesOf = (text: string) => validationIssues(() => parseManifest(text));

describe('rollout manifest', () => {
  it('accepts the shipped example and applies defaults', () => {
    const m = parseManifest(example);
    expect(m.stages.map((s) => `${s.name}:${s.kind}`)).toEqual(['generate:gpu', 'simulate:cpu', 'score:cpu']);
    expect(m.defaults).toMatchObject({ maxAttempts: 3, timeout: 30_000, backoff: 500, deadline: 3_600_000 });
    expect(samplesOf(m)).toHaveLength(20);
    expect(samplesOf(m)[7]).toEqual({ id: 's07', text: 'Solve task 7: move the block to the goal.' });
  });

  it('names the field path and line of every problem', () => {
    const bad = example.replace('timeout: 10s', 'timeout: soon').replace('kind: Rollout', 'kind: Rollout\ncolour: blue').replace('version: "2026-01"', 'version: ""');
    const issues = issuesOf(bad);
    expect(issues).toEqual(expect.arrayContaining([
      { path: expect.stringMatching(/^stages\.2\.timeout \(line \d+\)$/), message: expect.stringContaining('not a duration') },
      { path: expect.stringMatching(/^colour \(line 4\)$/), message: 'unknown field "colour"' },
      { path: expect.stringMatching(/^stages\.0\.model\.version/), message: expect.any(String) },
    ]));
  });

  it('reads a CPU stage\'s isolation: process by default, vm, or a VM from a fork point or warm machine', () => {
    const base = 'apiVersion: smol/v1\nkind: Rollout\nname: x\nenvironment: { version: e }\ngenerate: { count: 1, template: t }\nstages:\n';
    const iso = (field: string) => stageIsolation(parseManifest(`${base}  - { name: a, kind: cpu, command: [x]${field} }`).stages[0] as CpuStage);
    expect(iso('')).toEqual({ vm: false });
    expect(iso(', isolation: process')).toEqual({ vm: false });
    expect(iso(', isolation: vm')).toEqual({ vm: true });
    expect(iso(', isolation: { vm: { forkPoint: env.v1 } }')).toEqual({ vm: true, forkPoint: 'env.v1', warmMachine: undefined });
    expect(iso(', isolation: { vm: { warmMachine: w } }')).toMatchObject({ vm: true, warmMachine: 'w' });
    const bad = (field: string) => issuesOf(`${base}  - { name: a, kind: cpu, command: [x], isolation: ${field} }`)[0];
    expect(bad('{ vm: { forkPoint: a, warmMachine: b } }').message).toMatch(/one of forkPoint, warmMachine or artifact/);
    expect(bad('{ vm: { fork_point: a } }').message).toMatch(/unknown field "fork_point"/);
    expect(bad('{ vm: { forkPoint: "bad/name" } }').path).toMatch(/^stages\.0\.isolation/);
    expect(bad('container').path).toMatch(/^stages\.0\.isolation/);
  });

  it('rejects unknown stage kinds, duplicate names and missing samples', () => {
    const base = 'apiVersion: smol/v1\nkind: Rollout\nname: x\nenvironment: { version: e }\n';
    expect(issuesOf(base + 'generate: { count: 1, template: t }\nstages: [{ name: a, kind: tpu }]')[0].path).toMatch(/^stages\.0\.kind/);
    expect(issuesOf(base + 'generate: { count: 1, template: t }\nstages: [{ name: a, kind: cpu, command: [x] }, { name: a, kind: cpu, command: [y] }]')[0])
      .toMatchObject({ path: expect.stringMatching(/^stages\.1\.name/), message: 'duplicate stage name "a"' });
    expect(issuesOf(base + 'stages: [{ name: a, kind: cpu, command: [x] }]')[0].message).toContain('exactly one of');
    expect(issuesOf('a: [1, 2')[0].path).toMatch(/line/);
  });

  it('submits idempotently and refuses a changed manifest under the same name without changing anything', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-submit-'));
    const ledger = new SqliteLedger({ path: path.join(dir, 'l.db') });
    const blobs = new BlobStore(path.join(dir, 'blobs'));
    const first = await submitRollout(ledger, blobs, example);
    expect(first).toMatchObject({ rolloutId: 'demo', created: true, items: 20 });
    expect(await submitRollout(ledger, blobs, example)).toMatchObject({ created: false, items: 0 });
    await expect(submitRollout(ledger, blobs, example.replace('count: 20', 'count: 21'))).rejects.toBeInstanceOf(ConflictError);
    await expect(submitRollout(ledger, blobs, example.replace('name: demo', 'name: demo2').replace('maxAttempts: 3', 'maxAttempts: 0'))).rejects.toBeInstanceOf(ValidationError);
    expect((await ledger.listRollouts()).map((r) => [r.id, r.counts.queued])).toEqual([['demo', 20]]);
    const items = await ledger.listItems('demo', 100);
    expect(items[0]).toMatchObject({ stage: 'generate', kind: 'gpu', envVersion: 'demo-env-1', idempotencyKey: 'demo/s00/generate', maxAttempts: 3 });
    expect(blobs.getText(items[0].inputRef)).toBe('Solve task 0: move the block to the goal.');
    await ledger.close();
  });

  describe('hostile manifests (issue 31)', () => {
    // the documented limits (docs/ledger.md), spelled out so a change to them is a change to this test
    const MAX_DURATION_MS = 24 * 24 * 3600 * 1000;
    const MANIFEST_MAX_BYTES = 8 * 1024 * 1024;
    const base = 'apiVersion: smol/v1\nkind: Rollout\nname: x\nenvironment: { version: e }\n';
    const stages = 'stages: [{ name: a, kind: cpu, command: [x] }]\n';
    const failure = (text: string): ValidationError => {
      try {
        parseManifest(text, 'm.yaml');
      } catch (err) {
        expect(err).toBeInstanceOf(ValidationError);
        return err as ValidationError;
      }
      throw new Error('expected a ValidationError');
    };

    it('refuses a YAML alias bomb as invalid input naming the file, without expanding it', () => {
      const levels = ['x0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]'];
      for (let i = 1; i < 9; i++) levels.push(`x${i}: &a${i} [${Array(9).fill(`*a${i - 1}`).join(', ')}]`);
      const e = failure(`${base}${stages}samples: [{ id: s, text: t }]\n${levels.join('\n')}\n`);
      expect(e.exitCode).toBe(65);
      expect(e.where).toBe('m.yaml');
      expect(e.message).toMatch(/aliases/);
    });

    it('still resolves ordinary aliases', () => {
      const m = parseManifest(`${base}defaults: { timeout: &t 5s, backoff: *t }\nsamples: [{ id: s, text: t }]\n${stages}`);
      expect(m.defaults).toMatchObject({ timeout: 5000, backoff: 5000 });
    });

    it('refuses durations past the documented maximum, naming the field', () => {
      const tooLong = failure(`${base}defaults: { timeout: 99999999999999999999h }\nsamples: [{ id: s, text: t }]\n${stages}`);
      expect(tooLong.issues).toEqual([{ path: 'defaults.timeout (line 5)', message: expect.stringMatching(/at most 24d/) }]);
      const stage = failure(`${base}samples: [{ id: s, text: t }]\nstages: [{ name: a, kind: cpu, command: [x], backoff: ${MAX_DURATION_MS + 1} }]\n`);
      expect(stage.issues[0].path).toMatch(/^stages\.0\.backoff/);
      expect(parseManifest(`${base}defaults: { deadline: 24d }\nsamples: [{ id: s, text: t }]\n${stages}`).defaults.deadline).toBe(MAX_DURATION_MS);
    });

    it('refuses NUL bytes in a stage\'s environment and arguments, naming the field', () => {
      const env = failure(`${base}samples: [{ id: s, text: t }]\nstages: [{ name: a, kind: cpu, command: [x], env: { A: "x\\0y" } }]\n`);
      expect(env.issues).toEqual([{ path: expect.stringMatching(/^stages\.0\.env\.A/), message: expect.stringMatching(/NUL/) }]);
      const name = failure(`${base}samples: [{ id: s, text: t }]\nstages: [{ name: a, kind: cpu, command: [x], env: { "A=B": y } }]\n`);
      expect(name.issues[0].path).toMatch(/^stages\.0\.env/);
      const arg = failure(`${base}samples: [{ id: s, text: t }]\nstages: [{ name: a, kind: cpu, command: ["x\\0y"] }]\n`);
      expect(arg.issues[0].path).toMatch(/^stages\.0\.command\.0/);
    });

    it('checks sizes before any work: file, template, count and what generate would expand to', () => {
      const big = failure(`${base}${stages}samples: [{ id: s, text: t }]\n# ${'x'.repeat(MANIFEST_MAX_BYTES)}\n`);
      expect(big.message).toMatch(/larger than 8 MiB/);
      expect(big.where).toBe('m.yaml');
      const gen = (count: number, template: string) => failure(`${base}${stages}generate: { count: ${count}, template: "${template}" }\n`).issues[0];
      expect(gen(10_000_000, 't')).toMatchObject({ path: expect.stringMatching(/^generate\.count/), message: expect.stringMatching(/at most 1000000/) });
      expect(gen(1, 'x'.repeat(1024 * 1024 + 1))).toMatchObject({ path: expect.stringMatching(/^generate\.template/), message: expect.stringMatching(/1 MiB/) });
      expect(gen(1_000_000, 'x'.repeat(80))).toMatchObject({ path: expect.stringMatching(/^generate/), message: expect.stringMatching(/64 MiB/) });
      expect(parseManifest(`${base}${stages}generate: { count: 1000000, template: "task {i}" }\n`).generate?.count).toBe(1_000_000);
    });

    it('refuses a manifest with too many YAML tokens before parsing it (8 MiB of "1," took 3.9 GB)', () => {
      const e = failure(`${base}${stages}samples: [{ id: s, text: t }]\nx: [${'1,'.repeat(130_000)}1]\n`);
      expect(e).toMatchObject({ exitCode: 65, where: 'm.yaml', message: expect.stringMatching(/more than 250000 YAML tokens/) });
    });

    it('still refuses duplicate keys, naming the line', () => {
      expect(issuesOf(`${base}${stages}samples: [{ id: s, text: t }]\nname: y\n`)[0]).toMatchObject({ path: 'line 7', message: expect.stringMatching(/unique/) });
      expect(issuesOf(`${base}${stages}samples: [{ id: s, text: t, id: u }]\n`)[0].message).toMatch(/unique/);
    });

    it('reads no more of a manifest file than the limit allows', () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-manifest-'));
      const huge = path.join(dir, 'huge.yaml');
      fs.closeSync(fs.openSync(huge, 'w'));
      fs.truncateSync(huge, 3 * 1024 ** 3); // sparse: 3 GiB of nothing, no disk used
      expect(() => readManifestFile(huge)).toThrow(expect.objectContaining({ exitCode: 65, where: huge, message: expect.stringMatching(/larger than 8 MiB/) }));
      expect(() => readManifestFile('/dev/zero')).toThrow(expect.objectContaining({ exitCode: 65 }));
      expect(() => readManifestFile(path.join(dir, 'missing.yaml'))).toThrow(expect.objectContaining({ exitCode: 66 }));
      fs.rmSync(dir, { recursive: true });
    });
  });
});
