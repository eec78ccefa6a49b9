/**
 * The pool of waiting clones per fork point (fork/point-pool.ts), over a stand-in for prepareClone and
 * startPrepared (the real ones need QEMU; the rollout's integration tests run them): which clone a job gets,
 * how many wait, and that every clone it made is removed.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { PreparedClone } from '../../../../src/vm/fork/from-point.js';
import type { MachineService } from '../../../../src/vm/service.js';

const prepared: string[] = [];
const started: string[] = [];
let failStart = false;
vi.mock('../../../../src/vm/fork/from-point.js', () => ({
  prepareClone: (_svc: unknown, point: string, name: string) => {
    prepared.push(name);
    return Promise.resolve({ point, name, id: `id-${name}` } as PreparedClone);
  },
  startPrepared: (_svc: unknown, p: PreparedClone) => {
    started.push(p.name);
    return Promise.resolve({ name: p.name, id: p.id, index: 1, ok: !failStart, pid: 1 });
  },
}));
const { ForkPointPool } = await import('../../../../src/vm/fork/point-pool.js');

let rows: Set<string>;
const removed: string[] = [];
const svc = {
  store: { find: (id: string) => (rows.has(id) ? { id } : null) },
  remove: (id: string) => { removed.push(id); rows.delete(id); return Promise.resolve(); },
} as unknown as MachineService;
let n = 0;
const pool = () => new ForkPointPool(svc, { name: () => { const name = `c${++n}`; rows.add(`id-${name}`); return name; } });
const settle = () => new Promise((r) => setTimeout(r, 0));

beforeEach(() => {
  rows = new Set();
  for (const a of [prepared, started, removed]) a.length = 0;
  failStart = false;
  n = 0;
  delete process.env.SMOL_FORK_SPARE;
});
afterEach(() => { delete process.env.SMOL_FORK_SPARE; });

describe('a fork point\'s pool of waiting clones', () => {
  it('prepares a clone for the first job and, once it runs, one for the next, which the next job gets', async () => {
    const p = pool();
    const a = await p.take('pt');
    expect(prepared).toEqual(['c1']);
    await p.start(a);
    await settle();
    expect(prepared).toEqual(['c1', 'c2']);
    p.release(a);
    const b = await p.take('pt');
    expect(b.name).toBe('c2');
    await p.start(b);
    p.release(b);
    await p.close();
    expect(removed).toEqual(['id-c1', 'id-c2', 'id-c3']);
  });

  it('keeps as many waiting as jobs have run at once', async () => {
    const p = pool();
    const [a, b] = await Promise.all([p.take('pt'), p.take('pt')]);
    await Promise.all([p.start(a), p.start(b)]);
    await settle();
    expect(prepared).toHaveLength(4);
    await p.close();
    expect(removed.sort()).toEqual(['id-c3', 'id-c4']); // a and b were never released: their jobs own them
  });

  it('starts no clone ahead with SMOL_FORK_SPARE=0, nor after a clone that failed to start', async () => {
    process.env.SMOL_FORK_SPARE = '0';
    const p = pool();
    await p.start(await p.take('pt'));
    delete process.env.SMOL_FORK_SPARE;
    failStart = true;
    await p.start(await p.take('pt'));
    await settle();
    expect(prepared).toEqual(['c1', 'c2']);
    await p.close();
  });

  it('removes a released clone, and the waiting ones at close', async () => {
    const p = pool();
    const a = await p.take('pt');
    await p.start(a);
    p.release(a);
    await p.close();
    expect(removed).toEqual(['id-c1', 'id-c2']);
    expect(rows.size).toBe(0);
  });
});
