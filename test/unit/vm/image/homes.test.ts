import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConflictError } from '../../../../src/errors/index.js';
import { run } from '../../../../src/util/exec.js';
import { createOverlay } from '../../../../src/vm/image/ext4.js';
import { machinesOfOtherHomes, otherHomes, registerHome } from '../../../../src/vm/image/homes.js';
import { listImages, pruneImages, removeImage } from '../../../../src/vm/image/manage.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-homes-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));
const assets = path.join(tmp, 'assets');
const mine = path.join(tmp, 'mine');
const theirs = path.join(tmp, 'theirs');

/** A `--image DIR` base, the kind prune removes when no machine uses it (it is rebuilt from its source). */
async function base(id: string): Promise<string> {
  const dir = path.join(assets, 'images', id);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'image.json'), JSON.stringify({ id, kind: 'dir', source: `/src/${id}` }));
  await run('qemu-img', ['create', '-q', '-f', 'qcow2', path.join(dir, 'disk.qcow2'), '16M']);
  return path.join(dir, 'disk.qcow2');
}

describe('images shared by several homes (real qemu-img overlays)', () => {
  it('a home that is its own assets dir registers nothing', () => {
    registerHome(mine, mine);
    expect(fs.existsSync(path.join(mine, 'homes'))).toBe(false);
  });

  it("neither prune nor rm takes a base from under another home's machine, a fork clone's included", async () => {
    const used = await base('dir-used');
    const clonedOnly = await base('dir-cloned');
    await base('dir-free');
    registerHome(assets, theirs);
    registerHome(assets, mine);
    registerHome(assets, theirs); // once is enough
    expect(fs.readdirSync(path.join(assets, 'homes'))).toHaveLength(2);
    const m = (id: string) => { fs.mkdirSync(path.join(theirs, 'machines', id), { recursive: true }); return path.join(theirs, 'machines', id); };
    // this home names the shared dir through a symlink; the other home's disks name the real path
    fs.symlinkSync(assets, path.join(tmp, 'assets-link'));
    await createOverlay(used, path.join(m('aaa'), 'disk.qcow2'));
    // a clone's disk sits on its parent's frozen overlay, which sits on the base
    await createOverlay(clonedOnly, path.join(m('bbb'), 'disk-frozen.qcow2'));
    await createOverlay(path.join(m('bbb'), 'disk-frozen.qcow2'), path.join(m('ccc'), 'disk.qcow2'));
    fs.writeFileSync(path.join(m('aaa'), 'console.log'), 'not a disk');

    expect(otherHomes(assets, mine)).toEqual([theirs]);
    expect(Object.fromEntries(machinesOfOtherHomes(path.join(tmp, 'assets-link'), mine))).toEqual({
      'dir-used': [`aaa (of ${theirs})`], 'dir-cloned': [`bbb (of ${theirs})`],
    });
    expect((await listImages({ assets, home: mine })).find((i) => i.id === 'dir-used')?.usedBy).toEqual([`aaa (of ${theirs})`]);

    const err = await removeImage('dir-used', { assets, home: mine }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConflictError);
    expect((err as ConflictError).message).toContain(`aaa (of ${theirs})`);
    expect((err as ConflictError).hint).toContain('SMOL_HOME=');

    const r = await pruneImages({ assets, home: mine });
    expect(r.removed.map((x) => x.what)).toEqual(['dir-free']);
    expect(fs.existsSync(used) && fs.existsSync(clonedOnly)).toBe(true);
    // the machines still open their whole chain
    await run('qemu-img', ['info', '--backing-chain', path.join(theirs, 'machines', 'ccc', 'disk.qcow2')]);
  });

  it('forgets a home whose machines dir has gone, and then its bases can go', async () => {
    fs.rmSync(path.join(theirs, 'machines'), { recursive: true, force: true });
    expect(otherHomes(assets, mine)).toEqual([]);
    expect(fs.readdirSync(path.join(assets, 'homes'))).toHaveLength(1); // only mine is left
    const r = await pruneImages({ assets, home: mine });
    expect(r.removed.map((x) => x.what).sort()).toEqual(['dir-cloned', 'dir-used']);
  });
});
