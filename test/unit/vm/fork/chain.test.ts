import { describe, expect, it } from 'vitest';
import { UserError } from '../../../../src/errors/index.js';
import { DEFAULT_MAX_CHAIN_DEPTH, maxChainDepth, mergeableLayers } from '../../../../src/vm/fork/chain.js';

const dir = '/h/machines/m1';
const chain = [`${dir}/disk-f.qcow2`, `${dir}/disk-e.qcow2`, `${dir}/disk-d.qcow2`, `${dir}/disk-c.qcow2`, `${dir}/disk.qcow2`, '/h/images/default/base.qcow2'];

describe('disk chain cap', () => {
  it('merges the machine\'s own frozen layers under the top, never the top itself or the image base', () => {
    expect(mergeableLayers(chain, dir, new Set())).toEqual(chain.slice(1, 5));
  });

  it('stops at the highest layer a plain fork\'s clones sit on: rewriting it or anything under it would change their disks', () => {
    expect(mergeableLayers(chain, dir, new Set([`${dir}/disk-c.qcow2`]))).toEqual([`${dir}/disk-e.qcow2`, `${dir}/disk-d.qcow2`]);
    // one layer above a pinned one: nothing to merge it into
    expect(mergeableLayers(chain, dir, new Set([`${dir}/disk-d.qcow2`]))).toEqual([]);
    expect(mergeableLayers(chain, dir, new Set([`${dir}/disk-e.qcow2`]))).toEqual([]);
  });

  it('leaves layers outside the machine\'s directory (a clone\'s parent\'s layers, the image) alone', () => {
    const clone = ['/h/machines/c/disk.qcow2', `${dir}/disk-e.qcow2`, `${dir}/disk.qcow2`, '/h/images/default/base.qcow2'];
    expect(mergeableLayers(clone, '/h/machines/c', new Set())).toEqual([]);
  });

  it('reads the cap from SMOL_FORK_MAX_DEPTH, refusing values that cannot hold a chain', () => {
    expect(maxChainDepth({})).toBe(DEFAULT_MAX_CHAIN_DEPTH);
    expect(maxChainDepth({ SMOL_FORK_MAX_DEPTH: '5' })).toBe(5);
    expect(() => maxChainDepth({ SMOL_FORK_MAX_DEPTH: '2' })).toThrow(UserError);
    expect(() => maxChainDepth({ SMOL_FORK_MAX_DEPTH: 'deep' })).toThrow(/SMOL_FORK_MAX_DEPTH must be a whole number of at least 3, got "deep"/);
  });
});
