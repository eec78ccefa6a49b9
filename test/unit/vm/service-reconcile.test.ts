/**
 * What the machine service makes of records left by processes killed with -9 (a QEMU, a `smol run`, a smol
 * half-way through create or start), against a fake Engine whose VMMs are real processes and a real store.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { GuestChannelError } from '../../../src/errors/index.js';
import { smolfileSchema } from '../../../src/smolfile/schema.js';
import { pidAlive, type MachineRecord, type MachineState } from '../../../src/vm/store/machines.js';
import type { MachineService } from '../../../src/vm/service.js';
import { fakeService, type FakeEngine } from '../../helpers/fake-engine.js';

// a pid that existed and is gone: a child that ran and was reaped
const deadPid = spawnSync('true').pid!;

let svc: MachineService;
let engine: FakeEngine;
let close: () => Promise<void>;
beforeEach(() => ({ svc, engine, close } = fakeService()));
afterEach(() => close());

const running = async (name: string): Promise<MachineRecord> => {
  await svc.create(smolfileSchema.parse({ image: 'alpine' }), { name });
  return svc.start(name);
};

/** A record as a smol killed mid-way leaves it, with its machine directory. */
const leftBehind = (name: string, o: { state: MachineState; ephemeral?: boolean; ownerPid?: number | null; pid?: number | null }) => {
  const rec = svc.store.insert({ id: `${name}000000000000`.slice(0, 12), name, state: o.state, ephemeral: !!o.ephemeral, spec: smolfileSchema.parse({ image: 'alpine' }), imageId: 'fake:alpine', ownerPid: o.ownerPid ?? null, parent: null, generation: 0 });
  if (o.pid !== undefined) svc.store.update(rec.id, { pid: o.pid });
  fs.mkdirSync(svc.layout(rec).dir, { recursive: true });
  return svc.store.get(rec.id);
};

const byName = async () => Object.fromEntries((await svc.list()).map((r) => [r.name, r]));

describe('after kill -9 of a QEMU', () => {
  it('a running machine lists as crashed, in the store too, and says why', async () => {
    const { pid } = await running('box');
    await engine.kill9(pid!);
    expect((await byName()).box).toMatchObject({ state: 'crashed', lastError: 'QEMU exited unexpectedly' });
    expect(svc.store.get('box').state).toBe('crashed');
  });

  it('a crashed machine refuses a channel and starts again', async () => {
    const { pid } = await running('box');
    await engine.kill9(pid!);
    await expect(svc.channel('box')).rejects.toThrow(GuestChannelError);
    const again = await svc.start('box');
    expect(again.state).toBe('running');
    expect(again.pid).not.toBe(pid);
    expect(pidAlive(again.pid)).toBe(true);
  });

  it('a machine stopping when its QEMU died is crashed too', async () => {
    const { id, pid } = await running('box');
    svc.store.update(id, { state: 'stopping' });
    await engine.kill9(pid!);
    expect(svc.refresh(svc.store.get('box')).state).toBe('crashed');
  });

  it('a machine another live smol holds is left to it, and judged once the lock is free', async () => {
    const { id, pid } = await running('box');
    await engine.kill9(pid!);
    // another smol (the vitest runner stands in: a live process that is not this one) is mid-operation
    svc.store.db.prepare('INSERT INTO locks (machine, pid, op, acquired_at) VALUES (?, ?, ?, ?)').run(id, process.ppid, 'stop', Date.now());
    expect((await byName()).box.state).toBe('running');
    svc.store.db.prepare('DELETE FROM locks WHERE machine = ?').run(id);
    expect((await byName()).box.state).toBe('crashed');
  });

  it('a stopped machine with a stale pid stays stopped', async () => {
    const rec = leftBehind('box', { state: 'stopped', pid: deadPid });
    expect((await byName()).box).toMatchObject({ state: 'stopped', lastError: null });
    expect(svc.store.get(rec.id).state).toBe('stopped');
  });
});

describe('after kill -9 of a smol', () => {
  it('a machine whose creator died mid-create is removed with its files at the next list', async () => {
    const rec = leftBehind('half', { state: 'creating', ownerPid: deadPid });
    leftBehind('making', { state: 'creating', ownerPid: process.pid }); // its creator is alive: not garbage
    expect(Object.keys(await byName())).toEqual(['making']);
    expect(svc.store.find('half')).toBeNull();
    expect(fs.existsSync(svc.layout(rec).dir)).toBe(false);
  });

  it('a throwaway machine of a dead smol run is reaped, its QEMU killed; live runs and persistent machines stay', async () => {
    const dead = leftBehind('run-dead', { state: 'running', ephemeral: true, ownerPid: deadPid });
    const vmm = engine.spawnVmm(svc.layout(dead));
    svc.store.update(dead.id, { pid: vmm });
    const live = leftBehind('run-live', { state: 'running', ephemeral: true, ownerPid: process.pid });
    svc.store.update(live.id, { pid: engine.spawnVmm(svc.layout(live)) });
    await running('keep');
    expect(await svc.reapDeadRuns()).toEqual(['run-dead']);
    expect(pidAlive(vmm)).toBe(false);
    expect(svc.store.list().map((r) => r.name).sort()).toEqual(['keep', 'run-live']);
    expect(fs.existsSync(svc.layout(dead).dir)).toBe(false);
  });

  it('a kept detached run (`run -d --no-rm`) that has exited outlives its dead supervisor', async () => {
    const kept = leftBehind('run-kept', { state: 'stopped', ephemeral: true, ownerPid: deadPid });
    const state = { command: ['true'], rm: false, supervisorPid: deadPid, state: 'exited', exitCode: 0, error: null, startedAt: '', endedAt: '' };
    fs.writeFileSync(path.join(svc.layout(kept).dir, 'detached.json'), JSON.stringify(state));
    expect(await svc.reapDeadRuns()).toEqual([]);
    expect(Object.keys(await byName())).toEqual(['run-kept']);
  });

  it('a QEMU started by a smol killed before it recorded the pid is found by its pidfile and killed on rm', async () => {
    const rec = leftBehind('box', { state: 'starting' });
    const stray = engine.spawnVmm(svc.layout(rec));
    expect((await byName()).box).toMatchObject({ state: 'crashed', lastError: 'smol was interrupted while starting the machine' });
    expect(pidAlive(stray)).toBe(true); // crashed, not cleaned behind the user's back: the QEMU is still its
    expect(await svc.remove('box', { force: true })).toEqual(['box']);
    expect(engine.terminated).toMatchObject([{ pid: stray, graceMs: 0 }]);
    expect(pidAlive(stray)).toBe(false);
  });
});
