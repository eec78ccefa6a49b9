/**
 * The warm spare the service keeps beside a forkable machine (fork/spare.ts): started after a forkable boot,
 * discarded by stop, rm and a crash. A fake Engine (real processes for VMMs) and real qemu-img overlays.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { UserError } from '../../../src/errors/index.js';
import { smolfileSchema, type Smolfile } from '../../../src/smolfile/schema.js';
import { forkMemFile } from '../../../src/vm/fork/cleanup.js';
import type { Spare } from '../../../src/vm/fork/spare.js';
import { FORK_READY_PATH } from '../../../src/vm/fork/guest.js';
import { readQcow2Header } from '../../../src/vm/image/qcow2.js';
import { pidAlive, type MachineRecord } from '../../../src/vm/store/machines.js';
import type { MachineService } from '../../../src/vm/service.js';
import { fakeService, type FakeEngine } from '../../helpers/fake-engine.js';

let svc: MachineService;
let engine: FakeEngine;
let close: () => Promise<void>;
const savedSpareEnv = process.env.SMOL_FORK_SPARE;
beforeEach(() => {
  ({ svc, engine, close } = fakeService());
  engine.forkMemory = 'shared';
  delete process.env.SMOL_FORK_SPARE;
});
afterEach(async () => {
  await close();
  if (savedSpareEnv === undefined) delete process.env.SMOL_FORK_SPARE;
  else process.env.SMOL_FORK_SPARE = savedSpareEnv;
});

const forkable = (o: Record<string, unknown> = {}): Smolfile => smolfileSchema.parse({ image: 'alpine', memory: 64, fork: { enabled: true }, ...o });
const spareOf = (rec: MachineRecord): Spare | null => {
  try {
    return JSON.parse(fs.readFileSync(path.join(svc.layout(rec).dir, 'spare.json'), 'utf8')) as Spare;
  } catch {
    return null;
  }
};
/** Every file a spare has: its machine dirs, its memory template, the overlay its fork would move the parent onto. */
const spareFiles = (parent: MachineRecord, s: Spare) => [
  svc.layout({ id: s.id }).dir, svc.layout({ id: s.id }).runDir, forkMemFile(s.forkId), path.join(svc.layout(parent).dir, `disk-${s.forkId}.qcow2`),
];

async function startForkable(name = 'box'): Promise<{ rec: MachineRecord; spare: Spare }> {
  await svc.create(forkable(), { name });
  const rec = await svc.start(name);
  const spare = spareOf(rec);
  if (!spare) throw new Error('no spare was started');
  return { rec, spare };
}

describe('a forkable machine\'s spare', () => {
  it('is started after the boot: a clone VMM waiting on an overlay over the parent\'s top layer and on the next fork\'s template', async () => {
    const { rec, spare } = await startForkable();
    expect(engine.launches.map((l) => l.dir)).toEqual([svc.layout(rec).dir, svc.layout({ id: spare.id }).dir]);
    expect(engine.launches[0].opts.forkable).toBe(true);
    expect(engine.launches[1].opts).toMatchObject({ diskless: false, forkable: false, publishPorts: false, clone: { memFile: forkMemFile(spare.forkId) } });
    expect(spare).toMatchObject({ pid: engine.launches[1].pid, backing: svc.layout(rec).disk, memoryMiB: 64 });
    expect(pidAlive(spare.pid)).toBe(true);
    expect(fs.statSync(forkMemFile(spare.forkId)).size).toBe(64 * 2 ** 20);
    for (const f of [svc.layout({ id: spare.id }).disk, path.join(svc.layout(rec).dir, `disk-${spare.forkId}.qcow2`)]) {
      expect(readQcow2Header(f)).toMatchObject({ backing: svc.layout(rec).disk, virtualSize: 1 << 30 });
    }
    // and the guest got the fork-point helper first
    expect(engine.execs.some((e) => e.argv.join(' ').includes(FORK_READY_PATH) && e.stdin.length > 0)).toBe(true);
  });

  it('goes with a stop: its QEMU killed and every file of it removed', async () => {
    const { rec, spare } = await startForkable();
    await svc.stop('box');
    expect(pidAlive(spare.pid)).toBe(false);
    expect(spareOf(rec)).toBeNull();
    for (const f of spareFiles(rec, spare)) expect(fs.existsSync(f)).toBe(false);
  });

  it('goes with rm --force', async () => {
    const { rec, spare } = await startForkable();
    await svc.remove('box', { force: true });
    expect(pidAlive(spare.pid)).toBe(false);
    for (const f of spareFiles(rec, spare)) expect(fs.existsSync(f)).toBe(false);
  });

  it('goes, with the parent\'s RAM file, when the parent\'s QEMU is killed -9 and the machine is next listed', async () => {
    const { rec, spare } = await startForkable();
    const ram = svc.layout(rec).memFile;
    fs.writeFileSync(ram, ''); // what QEMU's memory-backend-file leaves in /dev/shm
    await engine.kill9(rec.pid!);
    expect((await svc.list()).map((r) => r.state)).toEqual(['crashed']);
    expect(pidAlive(spare.pid)).toBe(false);
    expect(spareOf(rec)).toBeNull();
    for (const f of [...spareFiles(rec, spare), ram]) expect(fs.existsSync(f)).toBe(false);
  });

  it('a failed spare start leaves nothing behind and the machine running', async () => {
    const launch = engine.launch.bind(engine);
    engine.launch = async (spec, layout, o) => {
      if (o.clone) throw new Error('spare launch failed');
      return launch(spec, layout, o);
    };
    await svc.create(forkable(), { name: 'box' });
    const rec = await svc.start('box');
    expect(rec.state).toBe('running');
    expect(spareOf(rec)).toBeNull();
    expect(fs.readdirSync(path.dirname(svc.layout(rec).dir))).toEqual([rec.id]);
    expect(fs.readdirSync(svc.layout(rec).dir).filter((f) => f.startsWith('disk-'))).toEqual([]);
  });
});

describe('no spare', () => {
  const booted = async (o: { spec?: Smolfile; forkHelper?: boolean } = {}) => {
    await svc.create(o.spec ?? forkable(), { name: 'box' });
    const rec = await svc.start('box', { forkHelper: o.forkHelper });
    expect(rec.state).toBe('running');
    return { rec, launches: engine.launches.length, spare: spareOf(rec) };
  };

  it('for a machine not started forkable', async () => {
    expect(await booted({ spec: smolfileSchema.parse({ image: 'alpine' }) })).toMatchObject({ launches: 1, spare: null });
  });

  it('when the engine says the RAM is not shared', async () => {
    engine.forkMemory = 'none';
    expect(await booted()).toMatchObject({ launches: 1, spare: null });
  });

  it('with SMOL_FORK_SPARE=0', async () => {
    process.env.SMOL_FORK_SPARE = '0';
    expect(await booted()).toMatchObject({ launches: 1, spare: null });
  });

  it('for a boot without the fork helper (a boot snapshot)', async () => {
    expect(await booted({ forkHelper: false })).toMatchObject({ launches: 1, spare: null });
    expect(engine.execs).toEqual([]);
  });
});

describe('forkable machines and volumes', () => {
  it('are refused together at create and at start, before anything is made or launched', async () => {
    const share = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-share-'));
    try {
      const volumes = [{ host: share, guest: '/data' }];
      await expect(svc.create(forkable({ volumes }), { name: 'both' })).rejects.toThrow(UserError);
      expect(svc.store.list()).toEqual([]);
      await svc.create(smolfileSchema.parse({ image: 'alpine', volumes }), { name: 'vol' });
      await expect(svc.start('vol', { forkable: true })).rejects.toThrow('a machine with volumes cannot be forkable');
      expect(engine.launches).toEqual([]);
    } finally {
      fs.rmSync(share, { recursive: true, force: true });
    }
  });
});
