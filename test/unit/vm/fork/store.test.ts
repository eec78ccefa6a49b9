import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { smolfileSchema } from '../../../../src/smolfile/schema.js';
import { openMachineDb } from '../../../../src/vm/store/db.js';
import { ForkPointStore } from '../../../../src/vm/store/fork-points.js';
import { MachineStore } from '../../../../src/vm/store/machines.js';
import { releaseForkPoints } from '../../../../src/vm/fork/cleanup.js';
import { armSparseCopy, sparseCopy } from '../../../../src/vm/fork/sparse-copy.js';

let dir: string;
let store: MachineStore;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-fork-unit-'));
  store = new MachineStore(openMachineDb(path.join(dir, 'smol.db')));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

const spec = smolfileSchema.parse({});
const machine = (id: string, parent: string | null = null) =>
  store.insert({ id, name: id, state: 'running', ephemeral: false, spec, imageId: null, ownerPid: null, parent, generation: parent ? 1 : 0 });

function point(id: string, clones: string[], memOwned = true) {
  const fdir = path.join(dir, 'forks', id);
  fs.mkdirSync(fdir, { recursive: true });
  fs.writeFileSync(path.join(fdir, 'state'), 'state');
  fs.writeFileSync(path.join(dir, `${id}.mem`), 'mem');
  return new ForkPointStore(store.db).insert({
    id, machine: 'p', frozenDisk: '/x/disk.qcow2', memFile: path.join(dir, `${id}.mem`), memOwned, stateFile: path.join(fdir, 'state'),
    vm: { qemu: '7.2.22', accel: 'tcg', cpu: 'max', memoryMiB: 256 },
  }, clones);
}

describe('fork point reference counting', () => {
  it('keeps a point and its files while any clone names it, and frees them with the last one', () => {
    machine('p'); machine('c1', 'p'); machine('c2', 'p');
    const fp = point('f1', ['c1', 'c2']);
    expect(store.get('c1').forkPoint).toBe('f1');
    store.delete('c1');
    expect(releaseForkPoints(store)).toEqual([]);
    expect(fs.existsSync(fp.memFile) && fs.existsSync(fp.stateFile)).toBe(true);
    store.delete('c2');
    expect(releaseForkPoints(store).map((f) => f.id)).toEqual(['f1']);
    expect(fs.existsSync(fp.memFile) || fs.existsSync(fp.stateFile)).toBe(false);
    expect(new ForkPointStore(store.db).get('f1')).toBeNull();
  });

  it('never deletes a template it does not own (a held parent\'s own memory file)', () => {
    machine('p'); machine('c1', 'p');
    const fp = point('f2', ['c1'], false);
    store.delete('c1');
    releaseForkPoints(store);
    expect(fs.existsSync(fp.memFile)).toBe(true);
    expect(fs.existsSync(fp.stateFile)).toBe(false);
  });

  it('lists the children of a machine for remove --cascade', () => {
    machine('p'); machine('c1', 'p'); machine('c2', 'p'); machine('other');
    expect(store.children('p').map((c) => c.name).sort()).toEqual(['c1', 'c2']);
    store.update('p', { diskFile: 'disk-f1.qcow2' });
    expect(store.get('p').diskFile).toBe('disk-f1.qcow2');
  });
});

describe('sparse copy of a memory file', () => {
  it('copies the bytes exactly and leaves untouched pages as holes', async () => {
    const src = path.join(dir, 'src.mem');
    const dst = path.join(dir, 'dst.mem');
    const fd = fs.openSync(src, 'w');
    fs.ftruncateSync(fd, 64 << 20);
    fs.writeSync(fd, Buffer.from('hello'), 0, 5, 3 << 20);
    fs.writeSync(fd, Buffer.alloc(70_000, 9), 0, 70_000, (64 << 20) - 70_000);
    fs.closeSync(fd);
    const written = await sparseCopy(src, dst);
    expect(fs.readFileSync(dst).equals(fs.readFileSync(src))).toBe(true);
    expect(written).toBeLessThanOrEqual(3 * 65536);
    expect(fs.statSync(dst).mode & 0o777).toBe(0o600);
    expect(fs.statSync(dst).blocks * 512).toBeLessThan(1 << 20);
  });

  it('armed ahead, copies the file as it is at the cue, and nothing when cancelled', async () => {
    const src = path.join(dir, 'src.mem');
    const dst = path.join(dir, 'dst.mem');
    const fd = fs.openSync(src, 'w');
    fs.ftruncateSync(fd, 8 << 20);
    fs.writeSync(fd, Buffer.from('before'), 0, 6, 1 << 20);
    const armed = armSparseCopy(src, dst);
    await new Promise((r) => setTimeout(r, 100)); // the copier is waiting by now
    expect(fs.existsSync(dst)).toBe(false);
    fs.writeSync(fd, Buffer.from('at cue'), 0, 6, 1 << 20);
    fs.closeSync(fd);
    await armed.start();
    expect(fs.readFileSync(dst).equals(fs.readFileSync(src))).toBe(true);
    expect(fs.statSync(dst).mode & 0o777).toBe(0o600);
    expect(fs.statSync(dst).blocks * 512).toBeLessThan(1 << 20);

    const other = path.join(dir, 'other.mem');
    const cancelled = armSparseCopy(src, other);
    cancelled.cancel();
    await new Promise((r) => setTimeout(r, 100));
    expect(fs.existsSync(other)).toBe(false);
  });
});
