import { describe, expect, it } from 'vitest';
import { ConflictError, UserError } from '../../../../src/errors/index.js';
import { cloneEnv, cloneNames, parseEnvFlags } from '../../../../src/vm/fork/plan.js';
import { envFileText } from '../../../../src/vm/fork/guest.js';
import { identityMismatch, assertCompatible } from '../../../../src/vm/fork/identity.js';

describe('clone names', () => {
  it('numbers from 1 with the default prefix and continues after existing clones', () => {
    expect(cloneNames('web', 3, new Set())).toEqual(['web-1', 'web-2', 'web-3']);
    expect(cloneNames('web', 2, new Set(['web-1', 'web-2', 'web-7', 'web-x']))).toEqual(['web-8', 'web-9']);
  });

  it('refuses an explicit prefix that collides, naming the taken names', () => {
    expect(() => cloneNames('web', 3, new Set(['w2']), 'w')).toThrow(ConflictError);
    expect(() => cloneNames('web', 3, new Set(['w2']), 'w')).toThrow(/already taken: w2/);
  });

  it('refuses counts outside 1..64 and names the machine registry would reject', () => {
    expect(() => cloneNames('web', 0, new Set())).toThrow(UserError);
    expect(() => cloneNames('web', 65, new Set())).toThrow(/1 to 64/);
    expect(() => cloneNames('web', 1.5, new Set())).toThrow(UserError);
    expect(() => cloneNames('web', 1, new Set(), '-bad')).toThrow(/invalid machine name/);
  });
});

describe('clone environment', () => {
  it('gives each clone its identity and expands {index}, {name}, {count} in user values', () => {
    const ids = cloneEnv({ parent: 'p', forkId: 'f1', names: ['p-1', 'p-2'], user: { TASK: 'shard-{index}-of-{count}', WHO: '{name}', KEEP: '{other}' } });
    expect(ids.map((c) => c.env)).toEqual([
      { SMOL_FORK_ROLE: 'clone', SMOL_FORK_ID: 'f1', SMOL_PARENT: 'p', SMOL_CLONE_NAME: 'p-1', SMOL_CLONE_INDEX: '1', SMOL_CLONE_COUNT: '2', TASK: 'shard-1-of-2', WHO: 'p-1', KEEP: '{other}' },
      { SMOL_FORK_ROLE: 'clone', SMOL_FORK_ID: 'f1', SMOL_PARENT: 'p', SMOL_CLONE_NAME: 'p-2', SMOL_CLONE_INDEX: '2', SMOL_CLONE_COUNT: '2', TASK: 'shard-2-of-2', WHO: 'p-2', KEEP: '{other}' },
    ]);
  });

  it('parses -e flags and rejects malformed ones', () => {
    expect(parseEnvFlags(['A=1', 'B=x=y', 'C='])).toEqual({ A: '1', B: 'x=y', C: '' });
    expect(() => parseEnvFlags(['=1'])).toThrow(/NAME=value/);
    expect(() => parseEnvFlags(['1A=x'])).toThrow(/NAME=value/);
  });

  it('writes values a shell reads back verbatim, quotes included', () => {
    expect(envFileText({ A: "it's $HOME `x`" })).toBe("export A='it'\\''s $HOME `x`'\n");
  });
});

describe('state compatibility', () => {
  const vm = { qemu: '7.2.22', accel: 'tcg' as const, cpu: 'max', memoryMiB: 256 };
  it('accepts the same VMM and lists every difference otherwise', () => {
    expect(identityMismatch(vm, { ...vm })).toEqual([]);
    expect(identityMismatch(vm, { ...vm, qemu: '8.0.0', accel: 'kvm' })).toEqual(['qemu: 7.2.22 → 8.0.0', 'accel: tcg → kvm']);
    expect(() => assertCompatible(vm, { ...vm, cpu: 'host' }, 'fork of "p"')).toThrow(/fork of "p" failed: .*cpu: max → host/);
  });
});
