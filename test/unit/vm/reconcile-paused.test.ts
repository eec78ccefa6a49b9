/**
 * A paused machine as `ls` reports it: frozen with its QEMU, saved to disk without one, or neither (its
 * QEMU died, and no save exists: crashed). Fake engine with real processes, real store (fake-engine.ts).
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConflictError } from '../../../src/errors/index.js';
import { smolfileSchema } from '../../../src/smolfile/schema.js';
import { pausedDir } from '../../../src/vm/pause-files.js';
import { pauseMachine } from '../../../src/vm/pause.js';
import type { MachineService } from '../../../src/vm/service.js';
import { fakeService } from '../../helpers/fake-engine.js';

const deadPid = spawnSync('true').pid!;

let svc: MachineService;
let close: () => Promise<void>;
beforeEach(() => ({ svc, close } = fakeService()));
afterEach(() => close());

/** A paused record, as pause.ts leaves it, with a complete save or none. */
const paused = (name: string, o: { pid: number | null; saved: boolean }) => {
  const rec = svc.store.insert({ id: `${name}000000000000`.slice(0, 12), name, state: 'paused', ephemeral: false, spec: smolfileSchema.parse({ image: 'alpine' }), imageId: 'fake:alpine', ownerPid: null, parent: null, generation: 0 });
  svc.store.update(rec.id, { pid: o.pid });
  const dir = pausedDir(svc.layout(rec));
  fs.mkdirSync(dir, { recursive: true });
  if (o.saved) fs.writeFileSync(path.join(dir, 'meta.json'), '{}');
  return svc.store.get(rec.id);
};

const stateOf = async (name: string) => (await svc.list()).find((r) => r.name === name)?.state;

describe('paused machines, reconciled', () => {
  it('paused to disk: no QEMU, a save (also when smol died before clearing the pid)', async () => {
    paused('disk', { pid: null, saved: true });
    paused('late', { pid: deadPid, saved: true });
    expect(await stateOf('disk')).toBe('paused');
    expect(await stateOf('late')).toBe('paused');
  });

  it('paused in memory with a live QEMU stays paused', async () => {
    paused('mem', { pid: process.pid, saved: false });
    expect(await stateOf('mem')).toBe('paused');
  });

  it('paused with neither a QEMU nor a complete save is crashed, and says why', async () => {
    paused('gone', { pid: deadPid, saved: false });
    expect(await stateOf('gone')).toBe('crashed');
    expect(svc.store.get('gone').lastError).toMatch(/exited while the machine was paused/);
  });

  it('refuses a channel into a paused machine with the resume hint', async () => {
    paused('mem', { pid: process.pid, saved: false });
    const err = await svc.channel('mem').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConflictError);
    expect((err as ConflictError).hint).toBe('Resume it first: smol machine resume mem');
  });

  it('refuses pause --to-disk while a session is open, before touching QEMU', async () => {
    await svc.create(smolfileSchema.parse({ image: 'alpine' }), { name: 'busy' });
    const rec = await svc.start('busy');
    const release = svc.store.lock(`${rec.id}#p1`, 'channel', rec.name);
    try {
      await expect(pauseMachine(svc, 'busy', { toDisk: true })).rejects.toThrow(/1 session open .*pid \d+/);
      expect(svc.store.get('busy').state).toBe('running');
    } finally {
      release();
    }
  });
});
