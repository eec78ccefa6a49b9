import { describe, expect, it } from 'vitest';
import { smolfileSchema } from '../../../src/smolfile/schema.js';
import { applyLabels, applyPatch, changedKeys } from '../../../src/vm/update.js';

const base = smolfileSchema.parse({ cpus: 1, memory: 256, env: { A: '1' }, ports: ['8080:80'], network: { allow: ['example.org'] }, secrets: { env: ['T'], files: { k: '/k' } } });

describe('machine update: applying a patch', () => {
  it('replaces lists whole and leaves what the patch does not name', () => {
    const next = applyPatch(base, { cpus: 2, env: { B: '2' }, ports: [], allow: [] });
    expect(next).toMatchObject({ cpus: 2, memory: 256, env: { B: '2' }, ports: [], network: { allow: [] }, image: 'default' });
    expect(changedKeys(base, next)).toEqual(['cpus', 'ports', 'allow', 'env']);
    expect(base.cpus).toBe(1); // the record's spec is not mutated
  });

  it('restating the current value changes nothing', () => {
    expect(changedKeys(base, applyPatch(base, { cpus: 1, memory: 256, net: false }))).toEqual([]);
  });

  it('forkable maps to fork.enabled; secrets replace by kind, and clearing both drops the field', () => {
    expect(applyPatch(base, { forkable: true }).fork.enabled).toBe(true);
    expect(applyPatch(base, { secrets: { env: ['U'] } as never }).secrets).toEqual({ env: ['U'], files: { k: '/k' } });
    expect(applyPatch(base, { secrets: { env: [], files: {} } }).secrets).toBeUndefined();
  });

  it('labels: set over the current ones, then removals', () => {
    expect(applyLabels({ a: '1', b: '2' }, { set: { b: '3', c: '' }, remove: ['a'] })).toEqual({ b: '3', c: '' });
  });
});
