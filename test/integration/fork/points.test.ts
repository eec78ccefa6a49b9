/**
 * Saved fork points on real QEMU (TCG here): one save, clones from it any number of times while the machine
 * goes on, stops or is removed; `snapshot ls/rm` with sizes and refusals; and a disk chain that stays within
 * its cap while data written at every layer reads back, live and after a cold boot.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killQemuMentioning, qemuProcessesMentioning, scratchHome, smol } from '../../helpers/cli.js';
import { ciOrLong } from '../../helpers/long.js';
import { removeHomeShm } from '../../helpers/shm.js';

let home: string;
const shmBefore = new Set(fs.readdirSync('/dev/shm'));
const newShm = () => fs.readdirSync('/dev/shm').filter((f) => f.startsWith('smol-') && !shmBefore.has(f));

beforeAll(() => { home = scratchHome('points'); });
afterAll(() => {
  killQemuMentioning(home);
  removeHomeShm(home); // only ours: other tests' machines keep their RAM in /dev/shm too
  fs.rmSync(home, { recursive: true, force: true });
});

const json = (s: string) => JSON.parse(s);
const ok = async (args: string[], env?: Record<string, string>) => {
  const r = await smol(args, { home, env, timeoutMs: 180_000 });
  expect(r.code, `smol ${args.join(' ')}\n${r.stderr}`).toBe(0);
  return r.stdout;
};
const sh = (m: string, script: string) => ok(['machine', 'exec', m, '--', 'sh', '-c', script]);
const status = async (m: string) => json(await ok(['machine', 'status', m, '--json']));
const points = async () => json(await ok(['snapshot', 'ls', '--json'])) as { name: string; id: string; machine: string; machineGone: boolean; clones: string[]; sizes: Record<string, number> }[];

describe('saved fork points (real QEMU)', () => {
  it('saves once, clones any number of times without a new layer on the machine, and outlives the machine', async () => {
    await ok(['machine', 'create', 'w', '--forkable', '--start']);
    await sh('w', 'echo at-save > /root/f; sync');
    const saved = json(await ok(['fork', 'w', '--save', 'p', '--json'])).saved;
    expect(saved).toMatchObject({ point: 'p', machine: 'w' });
    const depth = (await status('w')).chainDepth;
    expect(depth).toBe(saved.chainDepth);
    await sh('w', 'echo after-save > /root/f; sync'); // the machine goes on; the point does not see it

    const first = json(await ok(['fork', '--from', 'p', '--count', '2', '--json']));
    expect(first.clones.map((c: { name: string; ok: boolean }) => [c.name, c.ok])).toEqual([['p-1', true], ['p-2', true]]);
    const again = json(await ok(['fork', '--from', 'p', '--json']));
    expect(again.clones.map((c: { name: string }) => c.name)).toEqual(['p-3']);
    // clones sit on the point's own layer, not on the machine's chain: its depth did not move
    expect((await status('w')).chainDepth).toBe(depth);
    for (const c of ['p-1', 'p-2', 'p-3']) expect((await sh(c, 'cat /root/f; hostname')).split('\n').slice(0, 2)).toEqual(['at-save', c]);
    // each clone writes only its own overlay
    await sh('p-1', 'echo mine > /root/f; sync');
    expect((await sh('p-2', 'cat /root/f')).trim()).toBe('at-save');
    expect((await sh('w', 'cat /root/f')).trim()).toBe('after-save');

    const [pt] = await points();
    expect(pt).toMatchObject({ name: 'p', machine: 'w', machineGone: false, clones: ['p-1', 'p-2', 'p-3'] });
    expect(pt.sizes.templateBytes).toBeGreaterThan(1 << 20); // the guest's touched RAM
    expect(pt.sizes.stateBytes).toBeGreaterThan(0);
    expect(pt.sizes.stateBytes).toBeLessThan(1 << 20); // device state only
    expect(pt.sizes.diskBytes).toBeGreaterThan(0);

    // the machine goes; the point keeps what its clones need
    await ok(['machine', 'rm', '--force', 'w']);
    const late = json(await ok(['fork', '--from', 'p', '--json']));
    expect((await sh(late.clones[0].name, 'cat /root/f')).trim()).toBe('at-save');
    expect((await points())[0]).toMatchObject({ machine: 'w', machineGone: true });
  }, 900_000);

  it('snapshot rm: refused while clones use it (naming them), --force drops the name, the files go with the last clone', async () => {
    const pt = (await points())[0];
    const busy = await smol(['snapshot', 'rm', 'p'], { home });
    expect(busy.code).toBe(67);
    expect(busy.stderr).toMatch(/in use by 4 clones \(p-1, p-2, p-3, p-4\)[\s\S]*snapshot rm --force p/);
    const template = `smol-fork-${pt.id}.mem`;
    expect(newShm()).toContain(template);
    const forced = json(await ok(['snapshot', 'rm', '--force', 'p', '--json']));
    expect(forced).toMatchObject({ freed: false });
    expect(await points()).toEqual([]);
    const gone = await smol(['fork', '--from', 'p'], { home });
    expect(gone.code).toBe(66);
    expect(gone.stderr).toMatch(/no fork point named "p"/);
    for (const c of ['p-1', 'p-2', 'p-3']) await ok(['machine', 'rm', '--force', c]);
    expect(newShm()).toContain(template); // p-4 still maps it
    await ok(['machine', 'rm', '--force', 'p-4']);
    expect(newShm()).not.toContain(template);
    expect(fs.readdirSync(path.join(home, 'forks'))).toEqual([]);
    expect(qemuProcessesMentioning(home)).toEqual([]);
    const missing = await smol(['snapshot', 'rm', 'p'], { home });
    expect(missing.code).toBe(66);
  }, 300_000);

  it('caps the chain: layers merge past SMOL_FORK_MAX_DEPTH and data written at every layer reads back, live and after a cold boot', async () => {
    // 4 saves already take the chain past the cap and back (cap 3, the least, merges at every save, so no
    // drop would show); SMOL_TEST_LONG=1: 6 saves
    const cap = 4;
    const saves = ciOrLong(4, 6);
    const env = { SMOL_FORK_MAX_DEPTH: String(cap) };
    await ok(['machine', 'create', 'deep', '--forkable', '--start']);
    const depths: number[] = [];
    for (let i = 1; i <= saves; i++) {
      // each save freezes the layer this write went to
      await sh('deep', `echo layer${i} > /root/l${i}; sync`);
      await ok(['fork', 'deep', '--save', `d${i}`], env);
      depths.push((await status('deep')).chainDepth);
      if (i < saves) await ok(['snapshot', 'rm', `d${i}`]);
    }
    expect(Math.max(...depths), String(depths)).toBeLessThanOrEqual(cap);
    expect(depths.some((d, i) => i > 0 && d < depths[i - 1]), String(depths)).toBe(true); // a merge happened
    await sh('deep', 'echo top > /root/top; sync');
    const want = Array.from({ length: saves }, (_, i) => `layer${i + 1}`);
    const all = `for i in ${want.map((_, i) => i + 1).join(' ')}; do cat /root/l$i; done; cat /root/top 2>/dev/null || echo none`;
    expect((await sh('deep', all)).trim().split('\n')).toEqual([...want, 'top']);
    // the last point's clone sees every layer up to its save, through its own layer
    const c = json(await ok(['fork', '--from', `d${saves}`, '--json'])).clones[0].name;
    expect((await sh(c, all)).trim().split('\n')).toEqual([...want, 'none']);
    // the merged files on disk, read by a fresh boot
    await ok(['machine', 'stop', 'deep']);
    await ok(['machine', 'start', 'deep']);
    expect((await sh('deep', all)).trim().split('\n')).toEqual([...want, 'top']);
    await ok(['machine', 'rm', '--force', c]);
    await ok(['snapshot', 'rm', `d${saves}`]);
    await ok(['machine', 'rm', '--force', 'deep']);
    expect(qemuProcessesMentioning(home)).toEqual([]);
  }, 900_000);

  it('refuses bad combinations and names precisely', async () => {
    const both = await smol(['fork', 'x', '--from', 'p'], { home });
    expect(both.code).toBe(64);
    expect(both.stderr).toMatch(/either a machine or --from/);
    const none = await smol(['fork'], { home });
    expect(none.code).toBe(64);
    const hold = await smol(['fork', 'x', '--save', 'p', '--hold'], { home });
    expect(hold.code).toBe(64);
    expect(hold.stderr).toMatch(/--hold/);
    const badName = await smol(['snapshot', 'save', 'x', 'bad/name'], { home });
    expect(badName.code).toBe(64);
    expect(badName.stderr).toMatch(/invalid fork point name "bad\/name"/);
  });
});
