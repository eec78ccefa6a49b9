/**
 * `smol prune`'s worker caches (cache/pulled, cache/blobs) against a real registry and real files: what a
 * fork point, a pull in progress or a recent use holds stays; the rest goes; a dry run removes nothing.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Engine } from '../../../../src/vm/engine.js';
import { pruneWorkerCaches } from '../../../../src/vm/prune/caches.js';
import { openMachineDb } from '../../../../src/vm/store/db.js';
import { MachineStore, pulledArtifactLock } from '../../../../src/vm/store/machines.js';
import { MachineService } from '../../../../src/vm/service.js';
import { smolfileSchema } from '../../../../src/smolfile/schema.js';
import { cacheBlobFile } from '../../../../src/ledger/blob-common.js';

const old = new Date(Date.now() - 2 * 3600_000);
const write = (p: string) => { fs.mkdirSync(path.dirname(p), { recursive: true }); fs.writeFileSync(p, Buffer.alloc(8192, 1)); fs.utimesSync(p, old, old); return p; };
const hex = (c: string) => c.repeat(64);

let home: string;
let svc: MachineService;
let holder: ChildProcess | undefined;
beforeEach(() => {
  home = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'smol-prune-caches-')));
  svc = new MachineService({ home, store: new MachineStore(openMachineDb(path.join(home, 'smol.db'))), engine: {} as Engine });
});
afterEach(() => { holder?.kill(); svc.store.db.close(); fs.rmSync(home, { recursive: true, force: true }); });

const pulled = (c: string) => path.join(home, 'cache', 'pulled', `${hex(c)}.smolmachine`);
const blob = (c: string) => path.join(home, 'cache', 'blobs', c + c, hex(c).slice(2));

describe('worker caches', () => {
  it('removes unused pulled artifacts and blobs; keeps a point\'s artifact, a pull in progress and recent ones', async () => {
    for (const c of ['a', 'b', 'c', 'd']) write(pulled(c));
    fs.utimesSync(pulled('c'), new Date(), new Date()); // used a moment ago
    // b is a fork point's image: the point is a machine whose spec names the pulled file
    svc.store.insert({ id: 'bbbbbb000000', name: 'art-bbbbbbbbbbbb', state: 'stopped', ephemeral: false, spec: smolfileSchema.parse({ image: pulled('b') }), imageId: 'x', ownerPid: null, parent: null, generation: 0 });
    // d is being pulled by another live process right now
    holder = spawn('sleep', ['30']);
    svc.store.db.prepare('INSERT INTO locks (machine, pid, op, acquired_at) VALUES (?, ?, ?, ?)').run(pulledArtifactLock(`sha256:${hex('d')}`), holder.pid, 'pull', Date.now());
    write(blob('e'));
    write(blob('f'));
    // a stage looked f up just now: the hit refreshes it
    await cacheBlobFile(path.join(home, 'cache', 'blobs'), `sha256:${hex('f')}`, (async function* () { /* a hit reads nothing */ })());

    const dry = await pruneWorkerCaches(svc, { dryRun: true });
    expect(dry.removed.map((r) => r.name).sort()).toEqual([`blobs/ee/${hex('e').slice(2)}`, `pulled/${hex('a')}.smolmachine`]);
    expect(fs.existsSync(pulled('a')) && fs.existsSync(blob('e'))).toBe(true);

    const r = await pruneWorkerCaches(svc);
    expect(r.removed).toHaveLength(2);
    expect(r.bytes).toBeGreaterThanOrEqual(2 * 8192);
    expect([pulled('a'), blob('e')].map((p) => fs.existsSync(p))).toEqual([false, false]);
    expect([pulled('b'), pulled('c'), pulled('d'), blob('f')].map((p) => fs.existsSync(p))).toEqual([true, true, true, true]);
    expect(fs.existsSync(path.dirname(blob('e')))).toBe(false); // its emptied fan-out directory too
  });

  it('a pull lock whose holder died does not keep an artifact', async () => {
    write(pulled('a'));
    const dead = spawn('true');
    await new Promise((r) => dead.on('exit', r));
    svc.store.db.prepare('INSERT INTO locks (machine, pid, op, acquired_at) VALUES (?, ?, ?, ?)').run(pulledArtifactLock(`sha256:${hex('a')}`), dead.pid, 'pull', Date.now());
    expect((await pruneWorkerCaches(svc)).removed.map((x) => x.name)).toEqual([`pulled/${hex('a')}.smolmachine`]);
  });

  it('an empty or missing cache is nothing to prune', async () => {
    expect(await pruneWorkerCaches(svc)).toEqual({ kind: 'worker-caches', removed: [], bytes: 0 });
  });
});
