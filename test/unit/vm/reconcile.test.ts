import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { isOrphan } from '../../../src/vm/reconcile.js';
import type { MachineRecord } from '../../../src/vm/store/machines.js';

// a pid that existed and is gone: a child that ran and was reaped
const deadPid = spawnSync('true').pid!;
const rec = (o: Partial<MachineRecord>) => ({ state: 'stopped', ephemeral: false, ownerPid: null, ...o }) as MachineRecord;

describe('orphans', () => {
  it('an ephemeral machine belongs to its live smol run, and is garbage once that run is gone', () => {
    expect(isOrphan(rec({ ephemeral: true, state: 'running', ownerPid: process.pid }))).toBe(false);
    expect(isOrphan(rec({ ephemeral: true, state: 'running', ownerPid: deadPid }))).toBe(true);
  });

  it('a machine still being created is garbage only when its creator is gone', () => {
    expect(isOrphan(rec({ state: 'creating', ownerPid: process.pid }))).toBe(false);
    expect(isOrphan(rec({ state: 'creating', ownerPid: deadPid }))).toBe(true);
    expect(isOrphan(rec({ state: 'creating', ownerPid: null }))).toBe(true);
  });

  it('a clone whose smol fork died while it was starting is garbage (it was never handed over)', () => {
    expect(isOrphan(rec({ state: 'starting', ownerPid: deadPid }))).toBe(true);
    expect(isOrphan(rec({ state: 'crashed', ownerPid: deadPid }))).toBe(true);
    expect(isOrphan(rec({ state: 'starting', ownerPid: process.pid }))).toBe(false);
  });

  it('a made persistent machine is nobody\'s orphan, whatever its state', () => {
    for (const state of ['stopped', 'running', 'crashed', 'starting'] as const) expect(isOrphan(rec({ state, ownerPid: null }))).toBe(false);
  });
});
