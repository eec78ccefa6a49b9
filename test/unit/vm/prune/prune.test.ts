/**
 * The pruners against a real registry and real directories (no VM): what goes, what stays, and that a dry
 * run removes nothing. The VM side (prune while clones run) is test/integration/vm/daily.test.ts.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Engine } from '../../../../src/vm/engine.js';
import { pruneAll, pruneArtifacts, pruneBootSnapshots, pruneMachines, pruners } from '../../../../src/vm/prune/index.js';
import { openMachineDb } from '../../../../src/vm/store/db.js';
import { MachineStore } from '../../../../src/vm/store/machines.js';
import { MachineService } from '../../../../src/vm/service.js';
import { smolfileSchema } from '../../../../src/smolfile/schema.js';

const deadPid = spawnSync('true').pid!;
const old = new Date(Date.now() - 10 * 60_000);
const age = (...ps: string[]) => { for (const p of ps) fs.utimesSync(p, old, old); };
const write = (p: string, bytes = 8192) => { fs.mkdirSync(path.dirname(p), { recursive: true }); fs.writeFileSync(p, Buffer.alloc(bytes, 1)); };

let home: string;
let assets: string;
let svc: MachineService;
const savedAssets = process.env.SMOL_ASSETS;

beforeEach(() => {
  home = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-prune-'));
  assets = path.join(home, 'assets');
  process.env.SMOL_ASSETS = assets;
  const engine = { terminate: async () => undefined } as unknown as Engine;
  svc = new MachineService({ home, store: new MachineStore(openMachineDb(path.join(home, 'smol.db'))), engine });
});
afterEach(() => {
  fs.rmSync(svc.layout({ id: 'cccccc000000' }).memFile, { force: true });
  svc.store.db.close();
  fs.rmSync(home, { recursive: true, force: true });
  if (savedAssets === undefined) delete process.env.SMOL_ASSETS;
  else process.env.SMOL_ASSETS = savedAssets;
});

const names = (r: { removed: { name: string }[] }) => r.removed.map((i) => i.name).sort();
const insert = (name: string, o: { ephemeral?: boolean; ownerPid?: number | null; state?: 'stopped' | 'running' } = {}) => {
  const rec = svc.store.insert({ id: `${name.padEnd(12, '0')}`.slice(0, 12), name, state: o.state ?? 'stopped', ephemeral: !!o.ephemeral, spec: smolfileSchema.parse({}), imageId: 'x', ownerPid: o.ownerPid ?? null, parent: null, generation: 0 });
  write(path.join(svc.layout(rec).dir, 'disk.qcow2'));
  return rec;
};

describe('machine prune', () => {
  it('removes dead throwaway machines and rowless dirs; keeps persistent machines, live runs, spares and young dirs', async () => {
    insert('aaaaaa', { ephemeral: true, ownerPid: deadPid }); // a smol run that was killed
    insert('bbbbbb', { ephemeral: true, ownerPid: process.pid }); // a smol run in progress
    insert('cccccc'); // persistent, stopped
    const machines = path.join(home, 'machines');
    write(path.join(machines, 'dead00000001', 'disk.qcow2'), 64 * 1024);
    write(path.join(machines, 'young0000001', 'disk.qcow2'));
    write(path.join(machines, 'spare0000001', 'disk.qcow2'));
    fs.writeFileSync(path.join(machines, 'cccccc000000', 'spare.json'), JSON.stringify({ id: 'spare0000001' }));
    age(path.join(machines, 'dead00000001'), path.join(machines, 'spare0000001'));
    // a young directory with no row may be a machine being made right now
    fs.renameSync(path.join(machines, 'young0000001'), path.join(machines, '0123456789ab'));

    const ram = svc.layout({ id: 'cccccc000000' }).memFile; // left by its last forkable boot
    write(ram, 4096);
    const dry = await pruneMachines(svc, { dryRun: true });
    expect(names(dry)).toEqual(['aaaaaa', 'cccccc RAM file', 'dir dead00000001'].sort());
    expect(fs.existsSync(ram)).toBe(true);
    expect(svc.store.find('aaaaaa')).not.toBeNull();
    expect(fs.existsSync(path.join(machines, 'dead00000001'))).toBe(true);

    const real = await pruneMachines(svc);
    expect(names(real)).toEqual(names(dry));
    expect(real.bytes).toBeGreaterThanOrEqual(64 * 1024);
    expect(svc.store.list().map((r) => r.name).sort()).toEqual(['bbbbbb', 'cccccc']);
    expect(fs.readdirSync(machines).sort()).toEqual(['0123456789ab', 'bbbbbb000000', 'cccccc000000', 'spare0000001']);
    expect(fs.existsSync(ram)).toBe(false);
  });
});

describe('boot snapshot prune', () => {
  it('removes snapshots nobody uses; keeps one a live restore marked and one looked up within the minute', async () => {
    const root = path.join(assets, 'cache', 'boot-snapshots');
    for (const k of ['unused', 'marked', 'stalemark', 'fresh']) write(path.join(root, k, 'meta.json'), 100);
    write(path.join(root, 'unused', 'mem'), 32 * 1024);
    write(path.join(root, 'marked', 'users', `${process.pid}-m1`), 0);
    write(path.join(root, 'stalemark', 'users', `${deadPid}-m2`), 0);
    write(path.join(root, '.tmp-old', 'state'), 10);
    write(path.join(root, '.tmp-new', 'state'), 10);
    age(...['unused', 'marked', 'stalemark'].map((k) => path.join(root, k, 'meta.json')), path.join(root, '.tmp-old'));
    expect(names(await pruneBootSnapshots(home, { dryRun: true }))).toEqual(['.tmp-old', 'stalemark', 'unused']);
    expect(fs.readdirSync(root)).toHaveLength(6);
    const r = await pruneBootSnapshots(home);
    expect(r.bytes).toBeGreaterThanOrEqual(32 * 1024);
    expect(fs.readdirSync(root).sort()).toEqual(['.tmp-new', 'fresh', 'marked']);
  });
});

describe('pack prune', () => {
  it('keeps entries a machine\'s boot files point into, extractions in progress and fresh lookups', async () => {
    const cache = path.join(home, 'cache', 'artifacts');
    const d = (n: string) => path.join(cache, n.repeat(64));
    for (const n of ['a', 'b', 'c', 'e']) write(path.join(d(n), 'disk.qcow2'), 16 * 1024);
    const rec = insert('user00');
    fs.writeFileSync(path.join(svc.layout(rec).dir, 'boot.json'), JSON.stringify({ kernel: path.join(d('a'), 'vmlinux'), initrd: path.join(d('a'), 'initrd'), kernelIdentity: 'x' }));
    fs.writeFileSync(`${d('b')}.lock`, String(process.pid)); // being extracted
    fs.writeFileSync(`${d('c')}.lock`, String(deadPid)); // its extractor died
    write(path.join(cache, `.${'c'.repeat(64)}.tmp-x1`, 'part'), 10);
    age(d('a'), d('b'), d('c'));
    const r = await pruneArtifacts(svc);
    expect(names(r)).toEqual([`${'c'.repeat(64)}`, `${'c'.repeat(64)}.lock`, `.${'c'.repeat(64)}.tmp-x1`].sort());
    expect(fs.readdirSync(cache).sort()).toEqual([d('a'), d('b'), `${d('b')}.lock`, d('e')].map((p) => path.basename(p)).sort());
  });
});

describe('smol prune', () => {
  it('adds up every pruner, machines first', async () => {
    const s = await pruneAll(pruners(svc), { dryRun: true });
    expect(s.results.map((r) => r.kind)).toEqual(['machines', 'images', 'boot-snapshots', 'artifacts', 'worker-caches']);
    expect(s).toMatchObject({ dryRun: true, bytes: 0 });
  });
});
