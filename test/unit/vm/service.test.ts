/**
 * The machine service's lifecycle against a fake Engine (test/helpers/fake-engine.ts) and a real SQLite
 * store: what each transition records, what it asks of the engine, and what it refuses. The same paths on
 * real QEMU are test/integration/vm/machine.test.ts.
 */
import fs from 'node:fs';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BootError, ConflictError, GuestChannelError, NotFoundError, NoSpaceError } from '../../../src/errors/index.js';
import { smolfileSchema, type Smolfile } from '../../../src/smolfile/schema.js';
import { pidAlive } from '../../../src/vm/store/machines.js';
import type { MachineService } from '../../../src/vm/service.js';
import { fakeService, type FakeEngine } from '../../helpers/fake-engine.js';

let svc: MachineService;
let engine: FakeEngine;
let close: () => Promise<void>;
beforeEach(() => ({ svc, engine, close } = fakeService()));
afterEach(() => close());

const spec = (o: Record<string, unknown> = {}): Smolfile => smolfileSchema.parse(o);

describe('create', () => {
  it('records a stopped machine, nobody\'s, with the disk and image the engine prepared, labels in their own column', async () => {
    const rec = await svc.create(spec({ image: 'alpine', labels: { team: 'a' } }), { name: 'box' });
    expect(rec).toMatchObject({ name: 'box', state: 'stopped', ephemeral: false, imageId: 'fake:alpine', ownerPid: null, pid: null, booted: false, labels: { team: 'a' } });
    expect(rec.spec).not.toHaveProperty('labels');
    expect(svc.store.get('box')).toMatchObject({ state: 'stopped', imageId: 'fake:alpine' });
    expect(engine.prepared).toEqual([svc.layout(rec).dir]);
    expect(fs.existsSync(svc.layout(rec).disk)).toBe(true);
  });

  it('names machines vm-… or, for smol run, run-…, and a throwaway machine stays its creator\'s', async () => {
    const a = await svc.create(spec({ image: 'alpine' }));
    const b = await svc.create(spec({ image: 'alpine' }), { ephemeral: true });
    expect(a.name).toMatch(/^vm-[0-9a-f]{6}$/);
    expect(b.name).toMatch(/^run-[0-9a-f]{6}$/);
    expect(b.ownerPid).toBe(process.pid);
  });

  it('a throwaway machine on the default image gets no disk: it boots from the initramfs', async () => {
    const rec = await svc.create(spec(), { ephemeral: true });
    expect(rec.imageId).toBe('default');
    expect(engine.prepared).toEqual([]);
    await svc.start(rec.name);
    expect(engine.launches[0].opts.diskless).toBe(true);
  });

  it('a failed disk leaves no record and no files, and keeps the engine\'s error (mapped when the disk is full)', async () => {
    engine.failPrepare = new Error('image not found');
    await expect(svc.create(spec({ image: 'nope' }), { name: 'gone' })).rejects.toThrow('image not found');
    engine.failPrepare = Object.assign(new Error('write failed'), { code: 'ENOSPC' });
    await expect(svc.create(spec({ image: 'nope' }), { name: 'full' })).rejects.toThrow(NoSpaceError);
    expect(svc.store.list()).toEqual([]);
    expect(engine.prepared.some((d) => fs.existsSync(d))).toBe(false);
  });

  it('refuses a second machine of the same name and keeps the first', async () => {
    await svc.create(spec({ image: 'alpine' }), { name: 'box' });
    await expect(svc.create(spec({ image: 'alpine' }), { name: 'box' })).rejects.toThrow(/box/);
    expect(svc.store.list().map((r) => r.name)).toEqual(['box']);
  });
});

describe('start', () => {
  it('launches, waits for the agent, configures the first boot and runs the init commands in order', async () => {
    await svc.create(spec({ image: 'alpine', init: ['echo one', 'echo two'], env: { A: '1' }, workdir: '/srv' }), { name: 'box' });
    const rec = await svc.start('box');
    expect(rec).toMatchObject({ state: 'running', booted: true, lastError: null });
    expect(rec.pid).toBe(engine.launches[0].pid);
    expect(pidAlive(rec.pid)).toBe(true);
    expect(rec.startedAt).toBeGreaterThan(0);
    expect(engine.launches[0].opts).toMatchObject({ diskless: false, forkable: false, publishPorts: true });
    expect(engine.configures[0].c).toMatchObject({ hostname: 'box', machineId: expect.stringMatching(/^[0-9a-f]{32}$/) });
    expect(engine.execs.map((e) => e.argv)).toEqual([['/bin/sh', '-c', 'echo one'], ['/bin/sh', '-c', 'echo two']]);
    expect(engine.execs[0]).toMatchObject({ env: { A: '1' }, cwd: '/srv', port: 0 });
  });

  it('a later boot sets hostname and clock but neither a new machine id nor the init commands again', async () => {
    await svc.create(spec({ image: 'alpine', init: ['echo once'] }), { name: 'box' });
    await svc.start('box');
    await svc.stop('box');
    await svc.start('box');
    expect(engine.execs).toHaveLength(1);
    expect(engine.configures).toHaveLength(2);
    expect(engine.configures[1].c).toEqual({ hostname: 'box', timeMs: expect.any(Number) });
  });

  it('refuses a running machine and an unknown name, launching nothing', async () => {
    await svc.create(spec({ image: 'alpine' }), { name: 'box' });
    await svc.start('box');
    await expect(svc.start('box')).rejects.toThrow(ConflictError);
    await expect(svc.start('box')).rejects.toThrow('machine "box" is already running');
    await expect(svc.start('nope')).rejects.toThrow(NotFoundError);
    expect(engine.launches).toHaveLength(1);
  });

  it('a failing init command stops the machine, kills its VMM and records why', async () => {
    await svc.create(spec({ image: 'alpine', init: ['true', 'false'] }), { name: 'box' });
    engine.execCode = (argv) => (argv[2] === 'false' ? 1 : 0);
    await expect(svc.start('box')).rejects.toThrow(BootError);
    const { pid } = engine.launches[0];
    expect(pidAlive(pid)).toBe(false);
    expect(engine.terminated).toEqual([{ pid, dir: svc.layout(svc.store.get('box')).dir, graceMs: 0 }]);
    expect(svc.store.get('box')).toMatchObject({ state: 'stopped', pid: null, booted: false, lastError: 'init command 2 failed (exit 1): false' });
  });

  it('a VMM that dies during boot is a BootError carrying the console, not a wait for the timeout', async () => {
    await svc.create(spec({ image: 'alpine' }), { name: 'box' });
    engine.vmmDies = true;
    engine.unreachable = true;
    const err = await svc.start('box', { bootTimeoutMs: 60_000 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BootError);
    expect((err as BootError).message).toBe('boot failed: QEMU exited before machine "box" was ready');
    expect((err as BootError).hint).toContain('fake console of');
    expect(svc.store.get('box')).toMatchObject({ state: 'stopped', pid: null });
  });

  it('an agent that never answers is a BootError once the boot timeout passes, and the VMM is killed', async () => {
    await svc.create(spec({ image: 'alpine' }), { name: 'box' });
    engine.unreachable = true;
    await expect(svc.start('box', { bootTimeoutMs: 1_000 })).rejects.toThrow('boot failed: machine "box" did not become ready within 1s');
    expect(pidAlive(engine.launches[0].pid)).toBe(false);
    expect(svc.store.get('box').state).toBe('stopped');
  });

  it('a launch failure leaves the machine stopped with the error, and it can start later', async () => {
    await svc.create(spec({ image: 'alpine' }), { name: 'box' });
    engine.failLaunch = new BootError('boot failed: QEMU exited with 1');
    await expect(svc.start('box')).rejects.toThrow('QEMU exited with 1');
    expect(svc.store.get('box')).toMatchObject({ state: 'stopped', lastError: 'boot failed: QEMU exited with 1' });
    engine.failLaunch = null;
    expect(await svc.start('box')).toMatchObject({ state: 'running', lastError: null });
  });

  it('hands the boot channel over with keepChannel, holding port 0\'s lock until released', async () => {
    await svc.create(spec({ image: 'alpine' }), { name: 'box' });
    const rec = await svc.start('box', { keepChannel: true });
    expect(rec.channel?.ch.port).toBe(0);
    expect(svc.store.lockHolder(`${rec.id}#p0`)).toBe(process.pid);
    expect(svc.store.lockHolder(rec.id)).toBeNull(); // the start itself is over
    rec.channel!.release();
    expect(svc.store.lockHolder(`${rec.id}#p0`)).toBeNull();
    await svc.create(spec({ image: 'alpine' }), { name: 'plain' });
    const plain = await svc.start('plain');
    expect(svc.store.lockHolder(`${plain.id}#p0`)).toBeNull(); // without keepChannel the boot channel is closed
  });

  it('a busy machine (another smol holds its lock) is refused', async () => {
    await svc.create(spec({ image: 'alpine' }), { name: 'box' });
    const id = svc.store.get('box').id;
    // the lock row of a live process other than this one: the vitest runner that started this worker
    svc.store.db.prepare('INSERT INTO locks (machine, pid, op, acquired_at) VALUES (?, ?, ?, ?)').run(id, process.ppid, 'fork', Date.now());
    await expect(svc.start('box')).rejects.toThrow(`machine "box" is busy: fork in progress (pid ${process.ppid})`);
    expect(engine.launches).toEqual([]);
  });
});

describe('stop', () => {
  it('asks the guest to power off over port 0, then the engine to end QEMU with the default grace', async () => {
    await svc.create(spec({ image: 'alpine' }), { name: 'box' });
    const { pid } = await svc.start('box');
    const rec = await svc.stop('box');
    expect(rec).toMatchObject({ state: 'stopped', pid: null });
    expect(engine.shutdowns).toEqual([svc.layout(rec).dir]);
    expect(engine.terminated).toEqual([{ pid, dir: svc.layout(rec).dir, graceMs: 10_000 }]);
    expect(pidAlive(pid)).toBe(false);
  });

  it('with force, kills at once without asking the guest', async () => {
    await svc.create(spec({ image: 'alpine' }), { name: 'box' });
    const { pid } = await svc.start('box');
    await svc.stop('box', { force: true });
    expect(engine.shutdowns).toEqual([]);
    expect(engine.terminated).toMatchObject([{ pid, graceMs: 0 }]);
  });

  it('a stopped machine stays as it is; an unknown one is NotFound', async () => {
    await svc.create(spec({ image: 'alpine' }), { name: 'box' });
    expect(await svc.stop('box')).toMatchObject({ state: 'stopped' });
    expect(engine.terminated).toEqual([]);
    await expect(svc.stop('nope')).rejects.toThrow(NotFoundError);
  });
});

describe('remove', () => {
  it('refuses a running machine without force, and keeps it running', async () => {
    await svc.create(spec({ image: 'alpine' }), { name: 'box' });
    const { pid } = await svc.start('box');
    await expect(svc.remove('box')).rejects.toThrow('machine "box" is running');
    expect(svc.store.get('box').state).toBe('running');
    expect(pidAlive(pid)).toBe(true);
  });

  it('with force, kills the VMM and removes the record and the files', async () => {
    const made = await svc.create(spec({ image: 'alpine' }), { name: 'box' });
    const { pid } = await svc.start('box');
    const layout = svc.layout(made);
    expect(await svc.remove('box', { force: true })).toEqual(['box']);
    expect(pidAlive(pid)).toBe(false);
    expect(svc.store.find('box')).toBeNull();
    expect(fs.existsSync(layout.dir)).toBe(false);
    expect(fs.existsSync(layout.runDir)).toBe(false);
  });

  it('a stopped machine goes without force; an unknown one is NotFound', async () => {
    await svc.create(spec({ image: 'alpine' }), { name: 'box' });
    expect(await svc.remove('box')).toEqual(['box']);
    await expect(svc.remove('box')).rejects.toThrow(NotFoundError);
  });

  it('refuses a machine with clones unless cascading, which removes the clones first', async () => {
    const parent = await svc.create(spec({ image: 'alpine' }), { name: 'p' });
    await svc.create(spec({ image: 'alpine' }), { name: 'c1', parent: parent.id });
    const c2 = await svc.create(spec({ image: 'alpine' }), { name: 'c2', parent: parent.id });
    await svc.create(spec({ image: 'alpine' }), { name: 'g', parent: c2.id });
    await expect(svc.remove('p')).rejects.toThrow('machine "p" has 2 clones (c1, c2)');
    expect(svc.store.list()).toHaveLength(4);
    expect(await svc.remove('p', { cascade: true })).toEqual(['c1', 'g', 'c2', 'p']);
    expect(svc.store.list()).toEqual([]);
  });
});

describe('channel', () => {
  it('refuses a stopped machine, and an unknown one', async () => {
    await svc.create(spec({ image: 'alpine' }), { name: 'box' });
    await expect(svc.channel('box')).rejects.toThrow('machine "box" is not running (state: stopped)');
    await expect(svc.channel('nope')).rejects.toThrow(NotFoundError);
  });

  it('a machine whose agent stops answering and whose VMM is gone is marked crashed', async () => {
    await svc.create(spec({ image: 'alpine' }), { name: 'box' });
    const { pid } = await svc.start('box');
    // the QEMU dies between the refresh and the connect: the connect's failure finds it gone
    engine.unreachable = true;
    const connect = engine.connect.bind(engine);
    engine.connect = async (layout, port) => { await engine.kill9(pid!); return connect(layout, port); };
    await expect(svc.channel('box')).rejects.toThrow(GuestChannelError);
    expect(svc.store.get('box').state).toBe('crashed');
  });
});
