/**
 * `isolation: {vm: {artifact: REF}}`: the reference must name its registry and be pinned by digest (a tag is
 * refused with how to pin it), and the digest becomes the environment version every item and trajectory carry.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { BlobStore } from '../../../src/ledger/blobs.js';
import { SqliteLedger } from '../../../src/ledger/sqlite.js';
import { environmentVersion, manifestSchema, parseManifest, stageIsolation, type CpuStage } from '../../../src/rollout/manifest.js';
import { submitRollout } from '../../../src/rollout/submit.js';
import { validationIssues } from '../../helpers/validation.js';

const D1 = `sha256:${'a1'.repeat(32)}`;
const D2 = `sha256:${'b2'.repeat(32)}`;
const head = (env: string) => `apiVersion: smol/v1\nkind: Rollout\nname: x\n${env}generate: { count: 2, template: t }\nstages:\n`;
const stage = (name: string, ref: string) => `  - { name: ${name}, kind: cpu, command: [x], isolation: { vm: { artifact: "${ref}" } } }\n`;

const issuesOf = (text: string) => validationIssues(() => parseManifest(text));

describe('rollout manifest: environments from registry artifacts', () => {
  it('reads a digest-pinned artifact reference into the stage\'s isolation', () => {
    const m = parseManifest(head('') + stage('a', `localhost:5000/team/env@${D1}`));
    expect(stageIsolation(m.stages[0] as CpuStage)).toEqual({ vm: true, artifact: `localhost:5000/team/env@${D1}` });
    // a reference with a tag and a digest is pinned by its digest
    expect(() => parseManifest(head('') + stage('a', `registry.example.com/env:v3@${D1}`))).not.toThrow();
  });

  it('refuses a tag-only reference with the digest form to write instead, at its field and line', () => {
    const [issue] = issuesOf(head('environment: { version: e }\n') + stage('a', 'localhost:5000/team/env:v3'));
    expect(issue.path).toMatch(/^stages\.0\.isolation\.vm\.artifact \(line 7\)$/);
    expect(issue.message).toBe('"localhost:5000/team/env:v3" is pinned by tag only, and a tag can move: pin it by digest, localhost:5000/team/env@sha256:<64 hex> (the "manifest sha256:…" line of smol pack push)');
    expect(issuesOf(head('') + stage('a', 'localhost:5000/team/env'))[0].message).toMatch(/pinned by tag only.*localhost:5000\/team\/env@sha256:<64 hex>/);
  });

  it('refuses references without a registry, with a malformed digest, or naming more than one source', () => {
    expect(issuesOf(head('') + stage('a', `team/env@${D1}`))[0].message).toMatch(/does not name its registry/);
    expect(issuesOf(head('') + stage('a', 'localhost:5000/env@sha256:abc'))[0].message).toBe('"sha256:abc" is not a digest: write sha256: and 64 lowercase hex digits');
    expect(issuesOf(head('') + stage('a', `localhost:5000/Env@${D1}`))[0].message).toMatch(/repository component "Env"/);
    const both = issuesOf(`${head('')}  - { name: a, kind: cpu, command: [x], isolation: { vm: { artifact: "localhost:5000/e@${D1}", forkPoint: p } } }\n`);
    expect(both[0].message).toMatch(/one of forkPoint, warmMachine or artifact/);
  });

  it('needs environment.version only when no stage runs an artifact', () => {
    const issue = issuesOf(`${head('')}  - { name: a, kind: cpu, command: [x] }\n`)[0];
    expect(issue.path).toMatch(/^environment\.version/);
    expect(issue.message).toMatch(/^required/);
  });

  it('records the artifact digest as the environment version: alone, after the stated version, several joined', () => {
    const ref = (d: string) => `localhost:5000/env@${d}`;
    expect(environmentVersion(parseManifest(head('') + stage('a', ref(D1))))).toBe(D1);
    expect(environmentVersion(parseManifest(head('environment: { version: v3 }\n') + stage('a', ref(D1))))).toBe(`v3@${D1}`);
    expect(environmentVersion(parseManifest(head('') + stage('a', ref(D1)) + stage('b', ref(D2)) + stage('c', `127.0.0.1:9/other@${D1}`)))).toBe(`${D1}+${D2}`);
    expect(environmentVersion(parseManifest(`${head('environment: { version: v3 }\n')}  - { name: a, kind: cpu, command: [x] }\n`))).toBe('v3');
  });

  it('the stored canonical manifest parses back to the same version (workers re-read it from the ledger)', async () => {
    const m = parseManifest(head('') + stage('a', `localhost:5000/env@${D1}`));
    expect(environmentVersion(manifestSchema.parse(JSON.parse(JSON.stringify(m))))).toBe(D1);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-submit-art-'));
    const ledger = new SqliteLedger({ path: path.join(dir, 'l.db') });
    try {
      await submitRollout(ledger, new BlobStore(path.join(dir, 'blobs')), head('environment: { version: v3 }\n') + stage('a', `localhost:5000/env@${D1}`));
      expect((await ledger.listItems('x', 10)).map((i) => i.envVersion)).toEqual([`v3@${D1}`, `v3@${D1}`]);
    } finally {
      await ledger.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
